"""``jkofast rerank``: resumable, streaming batch reranking of a TREC run with JKO-RAG.

Input (``--pools``): a TREC run (``qid Q0 docid rank score tag``) or a 3-column file
(``qid docid score``); each query's lines must be contiguous (their order is the pool
order).  The file is streamed in chunks of ``--chunk-size`` queries; each chunk is reranked
with ``jkofast.jko.rerank_batch`` (all cores) in a worker thread while the next chunk is
parsed, and written **atomically** to ``OUT.parts/chunk_NNNNNN.trec`` (temp file +
``os.replace``).  On restart, finished chunks are skipped; the final output is the
concatenation of the parts, byte-identical to an uninterrupted run.

Energy: ``r = minmax(run score)`` per pool, or with ``--scores`` (user rerank scores,
``query-id doc-id score``, streamed in the pool file's query order, or loaded whole with
``--scores-in-memory``) ``r = alpha*minmax(run score) + gamma*minmax(rerank)``;
``E = -r``, ``p0 = softmax_{tau0}(r)`` with the operating point's ``tau0``.
Geometry: ``--embeddings E.npy --ids ids.txt`` (dense rows, cosine) or
``--tfidf-corpus corpus.jsonl`` (TF-IDF rows, sparse cosine).

Malformed input lines are reported on stderr with their line number and skipped.  A query
whose pool cannot be reranked (unknown doc id, a failed solve) is reported on stderr and
written unchanged, in its input order, with its input scores -- never dropped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

FMT_VERSION = 1


def add_parser(sub) -> None:
    p = sub.add_parser("rerank", help="batch JKO-RAG reranking of a TREC run (streaming, resumable)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--pools", required=True,
                   help="input run: TREC 6-column or 'qid docid score' (optional header; .gz ok)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--embeddings", help=".npy (n_docs, d) document embeddings (L2-normalised)")
    g.add_argument("--tfidf-corpus", help="BEIR corpus.jsonl(.gz): TF-IDF geometry")
    p.add_argument("--ids", help="text file, one doc id per embeddings row")
    p.add_argument("--scores", help="rerank scores 'query-id doc-id score' (TREC-style), streamed in the "
                   "pool file's query order")
    p.add_argument("--scores-in-memory", action="store_true",
                   help="load --scores into memory (any query order) instead of streaming it")
    p.add_argument("--alpha", type=float, default=0.4, help="weight of the run score when --scores (0.4)")
    p.add_argument("--gamma", type=float, default=0.6, help="weight of the rerank score when --scores (0.6)")
    p.add_argument("--config", default="tuned", help="operating point: base, tuned, contrib, fast (tuned)")
    p.add_argument("--mode", default=None, choices=["wasserstein", "kl", "noproximal", "bregman"],
                   help="proximal term (default: the operating point's, wasserstein = JKO-RAG; kl = KL-Prox)")
    p.add_argument("--alpha-prox", type=float, default=None, help="transport weight of --mode bregman (BW-JKO)")
    p.add_argument("--grad", default=None, choices=["unrolled", "implicit"],
                   help="override the operating point's Wasserstein gradient path")
    p.add_argument("--out", required=True, help="output TREC run")
    p.add_argument("--dist", help="also write the final distributions p_T (.npz)")
    p.add_argument("--k", type=int, default=0, help="keep the top-k per query (0 = whole pool)")
    p.add_argument("--tag", default="jkofast", help="run tag (6th column)")
    p.add_argument("--chunk-size", type=int, default=1000, help="queries per chunk (1000)")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    p.add_argument("--keep-parts", action="store_true", help="keep OUT.parts/ after success")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    # test hook: raise before processing chunk N (simulates an interruption)
    p.add_argument("--fail-after-chunks", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


# ---------------------------------------------------------------------------------------------
# input parsing
# ---------------------------------------------------------------------------------------------
def _parse_line(parts):
    """-> (qid, docid, score_str, score) or raise ValueError."""
    if len(parts) == 6:
        qid, did, s = parts[0], parts[2], parts[4]
    elif len(parts) == 3:
        qid, did, s = parts
    else:
        raise ValueError(f"expected 6 fields (TREC run) or 3 (qid docid score), got {len(parts)}")
    v = float(s)
    if not np.isfinite(v):
        raise ValueError(f"non-finite score {s!r}")
    return qid, did, s, v


def _open_text(path: str):
    if path.endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_queries(path: str, report):
    """Stream ``(qid, docids, score_strs, scores)`` per contiguous query block.

    Malformed lines are passed to ``report(lineno, message)`` and skipped.  Duplicate doc
    ids within a query keep the first occurrence (the later line is reported).
    """
    cur = None
    docs: list = []
    sstr: list = []
    vals: list = []
    seen: set = set()
    with _open_text(path) as fh:
        for ln, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                qid, did, s, v = _parse_line(parts)
            except ValueError as exc:
                if ln == 1 and len(parts) == 3:
                    continue  # a 'query-id corpus-id score' header
                report(ln, str(exc))
                continue
            if qid != cur:
                if cur is not None:
                    yield cur, docs, sstr, vals
                cur, docs, sstr, vals, seen = qid, [], [], [], set()
            if did in seen:
                report(ln, f"duplicate document {did!r} in query {qid!r} (ignored)")
                continue
            seen.add(did)
            docs.append(did)
            sstr.append(s)
            vals.append(v)
    if cur is not None:
        yield cur, docs, sstr, vals


def iter_chunks(path: str, chunk_size: int, report):
    chunk = []
    for q in iter_queries(path, report):
        chunk.append(q)
        if len(chunk) == chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class ScoreStream:
    """Stream a score file by contiguous query blocks, in the pool file's query order.

    ``take(qid)`` returns the next block if it belongs to ``qid`` (and advances), else None
    (the query has no scores; nothing is consumed).  Memory: one query block.
    """

    def __init__(self, path: str):
        self.path = path
        self.missing = 0
        self._it = self._blocks()
        self._cur = next(self._it, None)

    def _blocks(self):
        from jkofast.energy import _parse_score_line

        cur, block = None, {}
        with _open_text(self.path) as fh:
            for ln, line in enumerate(fh, 1):
                parts = line.split()
                if not parts:
                    continue
                try:
                    qid, did, v = _parse_score_line(parts)
                except ValueError as exc:
                    if ln == 1:
                        continue  # header
                    raise ValueError(f"{self.path}:{ln}: malformed score line: {exc}") from None
                if not np.isfinite(v):
                    raise ValueError(f"{self.path}:{ln}: non-finite score")
                if qid != cur:
                    if cur is not None:
                        yield cur, block
                    cur, block = qid, {}
                block[did] = v
        if cur is not None:
            yield cur, block

    def take(self, qid: str):
        if self._cur is not None and self._cur[0] == qid:
            block = self._cur[1]
            self._cur = next(self._it, None)
            return block
        self.missing += 1
        return None


# ---------------------------------------------------------------------------------------------
# geometry
# ---------------------------------------------------------------------------------------------
class DenseGeometry:
    def __init__(self, npy: str, ids_path: str | None):
        from jkofast.pools import load_embeddings

        if ids_path is None:
            raise ValueError("--embeddings needs --ids (one doc id per row)")
        self.emb, ids = load_embeddings(npy, ids_path)
        self.row = {d: i for i, d in enumerate(ids)}

    def rows(self, docs):
        return [self.row.get(d, -1) for d in docs]

    def gather(self, rows):
        r = np.asarray(rows, np.int64)
        return {"embeddings": np.ascontiguousarray(self.emb[r], dtype=np.float32)}


class TfidfGeometry:
    def __init__(self, corpus: str):
        from jkofast.data import read_corpus
        from jkofast.index import TfidfIndex

        ids, titles, texts = read_corpus(corpus)
        idx = TfidfIndex().fit([(t + " " + x).strip() for t, x in zip(titles, texts, strict=True)])
        self.X = idx.doc_matrix().tocsr()
        self.row = {d: i for i, d in enumerate(ids)}

    def rows(self, docs):
        return [self.row.get(d, -1) for d in docs]

    def gather(self, rows):
        return {"csr": self.X[np.asarray(rows, np.int64)]}


# ---------------------------------------------------------------------------------------------
# per-chunk work
# ---------------------------------------------------------------------------------------------
class _Counter:
    """Progress on stderr: queries done and throughput (the total is unknown while streaming)."""

    def __init__(self, enabled: bool, every_s: float = 0.5):
        self.enabled, self.every_s = enabled, every_s
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and now - self._last >= self.every_s:
            self._last = now
            rate = self.done / max(now - self.t0, 1e-9)
            print(f"\rrerank: {self.done:,} queries ({rate:,.1f}/s)", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled:
            rate = self.done / max(time.perf_counter() - self.t0, 1e-9)
            print(f"\rrerank: {self.done:,} queries ({rate:,.1f}/s)", file=sys.stderr, flush=True)


def _fmt(v: float) -> str:
    return f"{v:.9g}"


def process_chunk(chunk, geom, user_scores, cfg, args, say):
    """Rerank one chunk -> (trec text, dist arrays)."""
    from jkofast.energy import align_scores, blend, softmax_tau
    from jkofast.jko import rerank_batch

    ok_q, bad = [], {}
    rows_all = []
    for qi, (qid, docs, _s, _v) in enumerate(chunk):
        rows = geom.rows(docs)
        if any(r < 0 for r in rows):
            missing = docs[rows.index(-1)]
            bad[qi] = f"document {missing!r} not in the geometry"
        elif not docs:
            bad[qi] = "empty pool"
        else:
            ok_q.append(qi)
            rows_all.extend(rows)
    p_by_q = {}
    if ok_q:
        sizes = np.array([len(chunk[qi][1]) for qi in ok_q], np.int64)
        off = np.zeros(len(ok_q) + 1, np.int64)
        np.cumsum(sizes, out=off[1:])
        run_s = np.concatenate([np.asarray(chunk[qi][3], np.float64) for qi in ok_q])
        if user_scores is not None:
            flat_docs = [d for qi in ok_q for d in chunk[qi][1]]
            rr, _ = align_scores(user_scores, [chunk[qi][0] for qi in ok_q], off, flat_docs)
            r = blend(off, dense=run_s, rerank=rr.astype(np.float64), alpha=args.alpha, gamma=args.gamma)
        else:
            r = blend(off, dense=run_s, alpha=1.0)
        p0 = softmax_tau(r, off, cfg.tau0)
        res = rerank_batch(-r, p0, off, config=cfg, n_threads=args.threads, **geom.gather(rows_all))
        status = np.asarray(res.status)
        errors = getattr(res, "errors", {}) or {}
        for j, qi in enumerate(ok_q):
            if status[j] != 0:
                bad[qi] = errors.get(j, f"solver status {int(status[j])}")
            else:
                p_by_q[qi] = np.asarray(res.p[off[j]:off[j + 1]], np.float64)
    lines = []
    dist_p, dist_sizes, dist_status = [], [], []
    for qi, (qid, docs, sstr, _v) in enumerate(chunk):
        if qi in bad:
            say(f"jkofast rerank: query {qid!r} passed through unchanged: {bad[qi]}")
            kk = len(docs) if args.k <= 0 else min(args.k, len(docs))
            for rank in range(kk):
                lines.append(f"{qid} Q0 {docs[rank]} {rank + 1} {sstr[rank]} {args.tag}\n")
            dist_p.append(np.full(len(docs), np.nan, np.float32))
            dist_status.append(1)
        else:
            p = p_by_q[qi]
            order = np.argsort(-p, kind="stable")  # ties -> input order
            kk = len(docs) if args.k <= 0 else min(args.k, len(docs))
            for rank in range(kk):
                j = order[rank]
                lines.append(f"{qid} Q0 {docs[j]} {rank + 1} {_fmt(p[j])} {args.tag}\n")
            dist_p.append(p.astype(np.float32))
            dist_status.append(0)
        dist_sizes.append(len(docs))
    dist = {
        "query_ids": np.array([c[0] for c in chunk], dtype=str),
        "sizes": np.array(dist_sizes, np.int64),
        "p": np.concatenate(dist_p) if dist_p else np.zeros(0, np.float32),
        "status": np.array(dist_status, np.int32),
    }
    return "".join(lines), dist, len(bad)


def _atomic_write_text(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _atomic_write_npz(path: str, arrays: dict) -> None:
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _fingerprint(args) -> dict:
    st = os.stat(args.pools)
    d = {"version": FMT_VERSION, "pools": os.path.abspath(args.pools), "size": st.st_size,
         "mtime_ns": st.st_mtime_ns, "config": args.config, "chunk_size": args.chunk_size, "k": args.k,
         "tag": args.tag, "embeddings": args.embeddings, "ids": args.ids, "tfidf_corpus": args.tfidf_corpus,
         "scores": args.scores, "scores_in_memory": args.scores_in_memory, "grad": getattr(args, "grad", None),
         "mode": getattr(args, "mode", None), "alpha_prox": getattr(args, "alpha_prox", None), "alpha": args.alpha, "gamma": args.gamma, "dist": bool(args.dist)}
    d["hash"] = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()
    return d


def _write_npz_streaming(path: str, parts: list[str]) -> None:
    """Concatenate per-chunk npz parts into one .npz without holding all of p in memory."""
    sizes, qids, status = [], [], []
    n_total = 0
    for pth in parts:
        with np.load(pth) as z:
            sizes.append(z["sizes"])
            qids.append(z["query_ids"])
            status.append(z["status"])
            n_total += int(z["sizes"].sum())
    sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    offsets = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in (("query_ids", np.concatenate(qids) if qids else np.zeros(0, str)),
                          ("offsets", offsets),
                          ("status", np.concatenate(status) if status else np.zeros(0, np.int32))):
            with zf.open(name + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(arr))
        with zf.open("p.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_2_0(
                fh, {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False,
                     "shape": (n_total,)})
            for pth in parts:
                with np.load(pth) as z:
                    fh.write(np.ascontiguousarray(z["p"], dtype="<f4").tobytes())
    os.replace(tmp, path)


def _warm_needed() -> None:
    """Warm up only the modules a chunk uses (energy + the JKO core), not the whole package."""
    import importlib

    from jkofast._numba import WARMUPS

    for mod, name in (("jkofast.energy", "energy"), ("jkofast.jko", "jko")):
        try:
            importlib.import_module(mod)
            if name in WARMUPS:
                WARMUPS[name]()
        except Exception as exc:  # a broken warm-up must not stop a batch job: kernels compile lazily
            print(f"jkofast rerank: warm-up of {mod} failed ({type(exc).__name__}: {exc}); continuing",
                  file=sys.stderr)


def run(args) -> int:
    from jkofast.commands._common import emit

    if args.chunk_size < 1:
        raise ValueError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    if not os.path.isfile(args.pools):
        raise FileNotFoundError(f"--pools file not found: {args.pools}")
    if args.embeddings is None and args.tfidf_corpus is None:
        raise ValueError("a geometry is required: --embeddings E.npy --ids ids.txt, or --tfidf-corpus corpus.jsonl")
    from jkofast.jko import JKOConfig, operating_point

    cfg = args.config if isinstance(args.config, JKOConfig) else operating_point(args.config)
    for field, val in (("grad", getattr(args, "grad", None)), ("mode", getattr(args, "mode", None)),
                       ("alpha_prox", getattr(args, "alpha_prox", None))):
        if val is not None:
            cfg = cfg.replace(**{field: val})
    t0 = time.perf_counter()
    quiet = args.quiet or args.json

    def say(msg):
        print(msg, file=sys.stderr, flush=True)

    n_malformed = [0]

    def report(ln, msg):
        n_malformed[0] += 1
        say(f"jkofast rerank: {args.pools}:{ln}: malformed line skipped: {msg}")

    geom = DenseGeometry(args.embeddings, args.ids) if args.embeddings else TfidfGeometry(args.tfidf_corpus)
    all_scores = stream = None
    if args.scores and args.scores_in_memory:
        from jkofast.energy import read_score_file

        all_scores = read_score_file(args.scores)
    elif args.scores:
        stream = ScoreStream(args.scores)

    def chunk_scores(chunk):
        if all_scores is not None:
            return all_scores
        if stream is None:
            return None
        out = {}
        for qid, *_ in chunk:
            block = stream.take(qid)
            if block is not None:
                out[qid] = block
        return out

    _warm_needed()  # compile / load the kernels a chunk needs before the worker starts

    work = args.out + ".parts"
    os.makedirs(work, exist_ok=True)
    fp = _fingerprint(args)
    man = os.path.join(work, "manifest.json")
    if os.path.exists(man):
        with open(man, encoding="utf-8") as fh:
            old = json.load(fh)
        if old.get("hash") != fp["hash"]:
            raise ValueError(f"{work} holds parts of a run with other settings/input; remove it to start over")
    else:
        _atomic_write_text(man, json.dumps(fp, indent=1))

    prog = _Counter(enabled=not quiet)  # streaming: the total is unknown up front
    n_done = n_skipped = n_failed = n_q = 0
    part_names = []
    pending = None
    t_compute = 0.0

    def finish(fut):
        nonlocal n_done, n_failed, t_compute
        nq_c, nbad, dt = fut.result()
        n_done += nq_c
        n_failed += nbad
        t_compute += dt
        prog.update(nq_c)

    def job(ci, chunk, user_scores):
        ts = time.perf_counter()
        text, dist, nbad = process_chunk(chunk, geom, user_scores, cfg, args, say)
        base = os.path.join(work, f"chunk_{ci:06d}")
        if args.dist:
            _atomic_write_npz(base + ".npz", dist)
        _atomic_write_text(base + ".trec", text)  # written last: marks the chunk finished
        return len(chunk), nbad, time.perf_counter() - ts

    with ThreadPoolExecutor(max_workers=1) as ex:
        for ci, chunk in enumerate(iter_chunks(args.pools, args.chunk_size, report)):
            n_q += len(chunk)
            scores_c = chunk_scores(chunk)  # advances the score stream even for finished chunks
            base = os.path.join(work, f"chunk_{ci:06d}")
            part_names.append(base)
            if os.path.exists(base + ".trec") and (not args.dist or os.path.exists(base + ".npz")):
                n_skipped += len(chunk)
                prog.update(len(chunk))
                continue
            if args.fail_after_chunks is not None and ci >= args.fail_after_chunks:
                if pending is not None:
                    finish(pending)
                raise RuntimeError(f"injected failure before chunk {ci}")
            if pending is not None:
                finish(pending)  # keeps at most two chunks in memory
            pending = ex.submit(job, ci, chunk, scores_c)
        if pending is not None:
            finish(pending)
    prog.close()
    if stream is not None and stream.missing:
        say(f"jkofast rerank: {stream.missing} queries had no rerank scores (their rerank term is 0); if "
            f"{args.scores} is not in the pool file's query order, use --scores-in-memory")

    # final output: concatenation of the parts, written atomically
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as out:
        for base in part_names:
            with open(base + ".trec", "rb") as fh:
                while True:
                    buf = fh.read(1 << 20)
                    if not buf:
                        break
                    out.write(buf)
    os.replace(tmp, args.out)
    if args.dist:
        _write_npz_streaming(args.dist, [b + ".npz" for b in part_names])
    if not args.keep_parts:
        for base in part_names:
            for ext in (".trec", ".npz"):
                if os.path.exists(base + ext):
                    os.remove(base + ext)
        os.remove(man)
        try:
            os.rmdir(work)
        except OSError:
            pass
    wall = time.perf_counter() - t0
    import resource

    summary = {
        "queries": n_q, "reranked_now": n_done, "skipped_finished": n_skipped, "passed_through": n_failed,
        "malformed_lines": n_malformed[0], "chunks": len(part_names), "wall_s": wall,
        "compute_s": t_compute, "queries_per_s": n_done / t_compute if t_compute > 0 else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "config": args.config, "out": args.out,
    }
    text = (f"reranked {n_done} queries ({n_skipped} from finished chunks, {n_failed} passed through, "
            f"{n_malformed[0]} malformed lines) in {wall:.1f} s"
            + (f", {summary['queries_per_s']:.1f} queries/s" if summary["queries_per_s"] else "")
            + f"; peak RSS {summary['peak_rss_mb']:.0f} MB -> {args.out}")
    emit(summary, args.json, text)
    return 0
