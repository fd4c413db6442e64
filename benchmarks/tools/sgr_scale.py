"""SparseGeometricRAG at corpus scale (issue #17 item 5; not CI): a synthetic MS-MARCO-shaped corpus,
the streaming build, and search latency beside bm25s.

Usage:
    # 1. write the corpus (chunks of 100k passages; .gz if the name ends with .gz) and its queries
    python benchmarks/tools/sgr_scale.py --generate DIR/corpus.jsonl --passages 8840000 [--queries 1000]
    # 2. build (child process, /usr/bin/time -v for the peak RSS), load (mmap), search at 1 and 2 threads
    python benchmarks/tools/sgr_scale.py --corpus DIR/corpus.jsonl --out DIR/index --calibrate 1000000
                                         [--threads 2] [--bm25s] [--json F]
    # 3. quality on SciFact: calibrate = all (bit-identical to fit) / first half / uniform half
    python benchmarks/tools/sgr_scale.py --scifact-quality [--json F]
    # 4. the tokens stage of this tree against another checkout, alternating, in child processes
    python benchmarks/tools/sgr_scale.py --tokens-ab /path/to/base --corpus F [--threads 2] [--repeats 3]

The corpus: ``n_words`` (1,000,000) random lowercase words, ranks drawn from a Zipf(1.07) law,
passage lengths Gamma(6, 56/6) (mean ≈ 56 analyser tokens, as MS MARCO's ≈ 54.5 + a few), first
word capitalised and a full stop, no titles; queries of 3-8 words from ranks >= 50 (the most
frequent ranks act as stop-words), one seed for everything (``--seed 0``).  The build runs as
``python -m jkofast index --method sgr --corpus ...`` under ``/usr/bin/time -v`` (peak RSS of the
whole build); then the index is opened with ``SparseGeometricRetriever.load(out, mmap=True)`` (load
time), ``index_nbytes`` gives the bytes per passage by structure, and every query is timed alone
(text in -> top-10 out, median and p95 in ms) at 1 and 2 threads with the published settings
(``--preset published``; ``--param postings=false``, the compact index of B.11).
``--bm25s``: bm25s (numba backend) on the same corpus in
a child process (build time, peak RSS, per-query latency), or the error that stopped it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

CHUNK = 100_000


def _words(n_words: int, rng) -> np.ndarray:
    """``n_words`` distinct random lowercase words of 2-12 letters (shorter words more likely)."""
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    out: list = []
    seen: set = set()
    while len(out) < n_words:
        m = (n_words - len(out)) * 2
        lens = np.clip(rng.poisson(5.0, m) + 2, 2, 12)
        flat = letters[rng.integers(0, 26, int(lens.sum()))].tobytes().decode()
        pos = 0
        for n in lens.tolist():
            w = flat[pos : pos + n]
            pos += n
            if w not in seen:
                seen.add(w)
                out.append(w)
                if len(out) == n_words:
                    break
    return np.array(out, dtype=object)


def generate(path: str, passages: int, n_queries: int = 1000, n_words: int = 1_000_000, seed: int = 0) -> dict:
    """Write the synthetic corpus ``path`` (and ``queries.jsonl`` beside it) in chunks; return its shape."""
    import gzip

    rng = np.random.default_rng(seed)
    words = _words(n_words, rng)
    p = 1.0 / np.arange(1, n_words + 1) ** 1.07
    cdf = np.cumsum(p / p.sum())
    cdf[-1] = 1.0
    caps = np.array([w.capitalize() for w in words], dtype=object)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    opener = gzip.open if path.endswith(".gz") else open
    n_tok = 0
    t0 = time.perf_counter()
    with opener(tmp, "wt", encoding="ascii", **({"compresslevel": 1} if path.endswith(".gz") else {})) as fh:
        for start in range(0, passages, CHUNK):
            n = min(CHUNK, passages - start)
            lens = np.maximum(np.rint(rng.gamma(6.0, 56.0 / 6.0, n)), 3).astype(np.int64)
            flat = np.searchsorted(cdf, rng.random(int(lens.sum())), side="right")
            n_tok += int(lens.sum())
            bounds = np.concatenate([[0], np.cumsum(lens)])
            lines = []
            for i in range(n):
                a, b = bounds[i], bounds[i + 1]
                text = caps[flat[a]] + " " + " ".join(words[flat[a + 1 : b]]) + "."
                lines.append(f'{{"_id": "{start + i}", "title": "", "text": "{text}"}}\n')
            fh.write("".join(lines))
            done = start + n
            el = time.perf_counter() - t0
            print(f"\rgenerate: {done:,}/{passages:,} ({done / el:,.0f}/s)", end="", file=sys.stderr, flush=True)
    os.replace(tmp, path)
    print(file=sys.stderr)
    pq = p[50:] / p[50:].sum()
    qlens = rng.integers(3, 9, n_queries)
    qpath = os.path.join(os.path.dirname(os.path.abspath(path)), "queries.jsonl")
    with open(qpath, "w") as fh:
        for i, m in enumerate(qlens.tolist()):
            q = " ".join(words[50 + rng.choice(n_words - 50, size=m, p=pq)])
            fh.write(json.dumps({"_id": f"q{i}", "text": q}) + "\n")
    info = {"passages": passages, "tokens": n_tok, "tokens_per_passage": n_tok / passages, "n_words": n_words}
    info["seconds"] = time.perf_counter() - t0
    print(json.dumps(info), flush=True)
    return info


def _read_queries(corpus: str, limit: int | None = None) -> list:
    qpath = os.path.join(os.path.dirname(os.path.abspath(corpus)), "queries.jsonl")
    with open(qpath) as fh:
        qs = [json.loads(line)["text"] for line in fh if line.strip()]
    return qs[:limit] if limit else qs


def _time_v(cmd: list, log: str) -> dict:
    """Run ``cmd`` under ``/usr/bin/time -v``; return wall seconds, peak RSS and the exit status."""
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.call(["/usr/bin/time", "-v", *cmd], stdout=fh, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    text = open(log).read()
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return {"rc": rc, "wall_s": wall, "peak_rss_gb": int(m.group(1)) / 1e6 if m else None, "log": log}


def _latency(search, queries, n_threads: int) -> dict:
    """Per-query wall time of ``search([q], n_threads)`` (after one warm-up call): median and p95 in ms."""
    search(queries[:2], n_threads)
    ts = []
    for q in queries:
        t0 = time.perf_counter()
        search([q], n_threads)
        ts.append(time.perf_counter() - t0)
    ts = np.asarray(ts) * 1e3
    return {"median_ms": float(np.median(ts)), "p95_ms": float(np.percentile(ts, 95)), "n": len(ts)}


def measure_sgr(args) -> dict:
    """Build (child), load with mmap, bytes per passage, latency at 1 and 2 threads (published and defaults)."""
    out: dict = {"uptime_before": os.popen("uptime").read().strip()}
    cmd = [sys.executable, "-m", "jkofast", "index", "--method", "sgr", "--corpus", args.corpus, "--out", args.out]
    cmd += ["--threads", str(args.threads), "--shard-size", str(args.shard_size)]
    if args.calibrate:
        cmd += ["--calibrate", str(args.calibrate), "--calibrate-mode", args.calibrate_mode]
    if args.preset:
        cmd += ["--preset", args.preset]
    for kv in args.param:
        cmd += ["--param", kv]
    if not args.skip_build:
        out["build"] = _time_v(cmd, args.out.rstrip("/") + ".build.log")
        print("build:", json.dumps(out["build"]), flush=True)
        if out["build"]["rc"] != 0:
            return out
    out["uptime_after_build"] = os.popen("uptime").read().strip()
    from jkofast.sgr.retriever import SparseGeometricRetriever

    t0 = time.perf_counter()
    r = SparseGeometricRetriever.load(args.out, mmap=True)
    out["load_s"] = time.perf_counter() - t0
    out["n_docs"] = r.n_docs_
    nb = r.index_nbytes(True)
    out["bytes_per_passage"] = nb / r.n_docs_
    try:
        out["nbytes_breakdown"] = r.index_nbytes(breakdown=True)
    except TypeError:
        pass
    print(f"load (mmap) {out['load_s']:.2f} s; {out['bytes_per_passage']:.1f} B/passage", flush=True)
    queries = _read_queries(args.corpus, args.queries)

    def search(qs, nt):
        r.search(qs, k=10, n_threads=nt)

    label = args.preset or "defaults"
    for nt in (1, 2):
        key = f"sgr_{label}_{nt}t"
        out[key] = _latency(search, queries, nt)
        print(key, json.dumps(out[key]), flush=True)
    out["uptime_after_search"] = os.popen("uptime").read().strip()
    return out


def _bm25s_child(corpus: str, n_queries: int | None, threads: int) -> None:
    """(child process) bm25s over the corpus: build time and per-query latency; prints one JSON line."""
    import bm25s

    from jkofast.sgr.streaming import corpus_file, read_corpus_shards

    t0 = time.perf_counter()
    texts: list = []
    for shard in read_corpus_shards(corpus_file(corpus), 500_000):
        texts.extend(shard[2])
    tok = bm25s.tokenize(texts, stopwords=None, show_progress=False)
    del texts
    ret = bm25s.BM25(backend="numba")
    ret.index(tok, show_progress=False)
    build = time.perf_counter() - t0
    del tok
    qs = _read_queries(corpus, n_queries)
    res = {"bm25s_build_s": build}
    for nt in (1, 2):

        def search(q, _nt, nt=nt):
            ret.retrieve(
                bm25s.tokenize(q, stopwords=None, show_progress=False), k=10, show_progress=False, n_threads=nt
            )

        res[f"bm25s_{nt}t"] = _latency(search, qs, nt)
    print("BM25S " + json.dumps(res), flush=True)


def measure_bm25s(args) -> dict:
    """bm25s in a child under /usr/bin/time -v: its figures, or the reason it stopped."""
    cmd = [sys.executable, __file__, "--bm25s-child", "--corpus", args.corpus, "--queries", str(args.queries or 0)]
    log = args.out.rstrip("/") + ".bm25s.log"
    info = _time_v(cmd, log)
    text = open(log).read()
    m = re.search(r"^BM25S (.*)$", text, re.M)
    if m:
        info.update(json.loads(m.group(1)))
    else:
        info["error"] = text[-2000:]
    return info


def scifact_quality(shard_size: int = 1000, threads: int = 2) -> dict:
    """SciFact test nDCG@10 of the streaming build: calibrate = None (checked bit-identical to ``fit``),
    the first half and a uniform half of the corpus; published settings and the defaults."""
    import tempfile

    from sgr_eval import ndcg10

    from jkofast.datasets.beir import bundled_path, load_dataset
    from jkofast.sgr.retriever import PRESETS, SparseGeometricRetriever
    from jkofast.sgr.streaming import build_index

    ds = load_dataset("scifact")
    qrels = ds.qrels("test")
    qids = sorted(qrels, key=lambda x: int(x) if x.isdigit() else x)
    queries = [ds.queries[q] for q in qids]
    half = ds.n_docs // 2
    out: dict = {"n_docs": ds.n_docs, "calibrate_half": half}
    for name, prm in (("published", PRESETS["published"]), ("defaults", {})):
        ref = SparseGeometricRetriever(**prm).fit(ds.doc_texts(" "), ids=ds.doc_ids, n_threads=threads)
        a = ref.search(queries, k=10)
        out[f"{name}_fit"] = ndcg10(a[0], a[1], qids, ds.doc_ids, qrels)
        for cal, mode in ((None, "first"), (half, "first"), (half, "uniform")):
            with tempfile.TemporaryDirectory() as tmp:
                r = build_index(
                    bundled_path("scifact"), tmp, calibrate=cal, calibrate_mode=mode, shard_size=shard_size,
                    params=prm, n_threads=threads, progress=False,
                )  # fmt: skip
                b = r.search(queries, k=10)
                key = f"{name}_calibrate_{'all' if cal is None else mode + '_half'}"
                out[key] = ndcg10(b[0], b[1], qids, ds.doc_ids, qrels)
                if cal is None:
                    out[f"{name}_identical_to_fit"] = bool(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))
                del r
            print(key, f"{out[key]:.4f}", flush=True)
    return out


_TOKENS_CHILD = """
import inspect, json, os, shutil, sys, tempfile, time
from jkofast.sgr import streaming as s
path, shard, nt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
work = tempfile.mkdtemp(prefix="sgr_tokens_ab_")
kw = {"n_threads": nt} if "n_threads" in inspect.signature(s._tokenise_corpus).parameters else {}
s.shard_term_counts(["warm up"])
try:
    t, c = time.perf_counter(), time.process_time()
    quiet = s.ProgressLine("tokens", enabled=False) if hasattr(s, "ProgressLine") else s._Bar("tokens", False)
    n = s._tokenise_corpus(path, work, shard, quiet, **kw)
    print("AB " + json.dumps({"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c, "shards": n}))
finally:
    shutil.rmtree(work, ignore_errors=True)
"""


def tokens_ab(corpus: str, base: str, repeats: int, shard_size: int, threads: int) -> dict:
    """Stage 1 (tokens) of the streaming build, this tree vs the checkout ``base``, alternating.

    Each run is a child process (``PYTHONPATH`` = the tree, its own Numba cache folder, warmed
    by a first run that is not counted); returns the median wall and CPU seconds of each tree,
    their ratio, and the load before and after.
    """
    import statistics
    import tempfile

    trees = {"base": os.path.abspath(base), "this": ROOT}
    caches = {k: tempfile.mkdtemp(prefix=f"sgr_ab_cache_{k}_") for k in trees}
    runs: dict = {k: [] for k in trees}
    out: dict = {"uptime_before": os.popen("uptime").read().strip(), "corpus": corpus, "threads": threads}
    for rep in range(repeats + 1):
        for k, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=tree, JKOFAST_CACHE_DIR=caches[k], JKOFAST_COMPILE_AHEAD="0")
            cmd = [sys.executable, "-c", _TOKENS_CHILD, corpus, str(shard_size), str(threads)]
            text = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=tree).stdout
            res = json.loads(re.search(r"^AB (.*)$", text, re.M).group(1))
            if rep:  # the first round compiles
                runs[k].append(res)
                print(k, json.dumps(res), flush=True)
    for k in trees:
        out[k] = {f: statistics.median(r[f] for r in runs[k]) for f in ("wall_s", "cpu_s")}
    out["speed-up_wall"] = out["base"]["wall_s"] / out["this"]["wall_s"]
    out["speed-up_cpu"] = out["base"]["cpu_s"] / out["this"]["cpu_s"]
    out["uptime_after"] = os.popen("uptime").read().strip()
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generate", default=None, help="write the synthetic corpus to this file and exit")
    ap.add_argument("--passages", type=int, default=8_840_000)
    ap.add_argument("--n-words", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--out", default=None, help="index folder")
    ap.add_argument("--calibrate", type=int, default=1_000_000)
    ap.add_argument("--calibrate-mode", default="first", choices=("first", "uniform"))
    ap.add_argument("--shard-size", type=int, default=250_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--preset", default="published", help="SGR preset of the build ('' for the defaults)")
    ap.add_argument("--param", action="append", default=["postings=false"], help="SGR KEY=VALUE (repeatable)")
    ap.add_argument("--queries", type=int, default=1000, help="queries timed (default 1000)")
    ap.add_argument("--skip-build", action="store_true", help="measure an index already built in --out")
    ap.add_argument("--bm25s", action="store_true", help="also bm25s on the same corpus (child process)")
    ap.add_argument("--bm25s-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--scifact-quality", action="store_true", help="SciFact nDCG@10: calibrate all / half (and exit)")
    ap.add_argument("--tokens-ab", default=None, help="A/B the tokens stage against this checkout (and exit)")
    ap.add_argument("--repeats", type=int, default=3, help="--tokens-ab: counted runs per tree")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.tokens_ab:
        res = tokens_ab(args.corpus, args.tokens_ab, args.repeats, args.shard_size, args.threads)
        print(json.dumps(res, indent=1), flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(res, fh, indent=1)
        return res
    if args.generate:
        return generate(args.generate, args.passages, args.queries, args.n_words, args.seed)
    if args.scifact_quality:
        res = scifact_quality(threads=args.threads)
        print(json.dumps(res, indent=1), flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(res, fh, indent=1)
        return res
    if args.bm25s_child:
        _bm25s_child(args.corpus, args.queries or None, args.threads)
        return {}
    if not args.corpus or not args.out:
        ap.error("--corpus and --out are required (or --generate)")
    res = measure_sgr(args)
    if args.bm25s:
        res["bm25s"] = measure_bm25s(args)
        print("bm25s:", json.dumps(res["bm25s"])[:2000], flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1, default=float)
    return res


if __name__ == "__main__":
    main()
