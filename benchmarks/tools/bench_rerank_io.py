"""IO throughput of ``jkofast rerank`` without the JKO kernel, one core, optionally A/B against a commit.

Per side, over a pool file (``make_synthetic_pools.py``), chunks of ``--chunk-size`` queries:

  parse    pool file -> chunks (block reader: tokenise, scores, query boundaries, duplicates)
  scores   when DIR/scores.tsv exists: the streamed score file, a block per query
  prepare  doc id -> geometry row, pass-through decisions, user scores aligned
  p0       energy / p0 (the Numba min-max / softmax kernels); the JKO kernel is replaced by
           a stand-in returning p0, so ``format`` sees real distributions
  format   TREC text of the chunk (sort by p, %.9g) and the dist arrays
  write    atomic write of the chunk text (temporary file, fsync, os.replace)

``--base REF`` also runs the same stages with jkofast at commit REF, exported by
``ab_compare.export_package`` (``git archive`` into a cache folder as ``jkofast_<sha12>``) and
imported in this process; the sides alternate (ABBA), ``--repeats`` times, best CPU time of each kept,
and their chunk texts must be byte-identical.  ``--head REF`` exports the other side too (both
sides then import alike: the working tree imported next to an export runs a few per cent
slower in an A/A check).  Numba runs on one thread.

Usage:
  python benchmarks/tools/make_synthetic_pools.py SYN_DIR --queries 5000 --pool 200 [--scores]
  python benchmarks/tools/bench_rerank_io.py SYN_DIR [--base feaac95 [--head HEAD]] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys
import tempfile
import time
import types

os.environ.setdefault("NUMBA_NUM_THREADS", "1")  # one core: before numba is imported

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

STAGES = ("parse", "scores", "prepare", "p0", "format", "write")


class _P0Result:
    """What the stand-in kernel returns: p = p0, every query solved."""

    def __init__(self, p, nq):
        self.p, self.status, self.errors, self.unconverged = p, np.zeros(nq, np.int32), {}, None


class _Rows:
    """A geometry that maps doc ids to rows (no gather: the kernel is not run)."""

    def __init__(self, ids, map_rows):
        self.row = {d: i for i, d in enumerate(ids)}
        self._map = map_rows

    def rows(self, docs):
        return self._map(self.row, docs)


def side_api(pkg: str) -> types.SimpleNamespace:
    """The IO stages of the jkofast package ``pkg``, in the streaming-library layout or the
    older one (everything in ``commands/rerank.py``)."""
    try:
        st = importlib.import_module(f"{pkg}.jko.stream")
        rio = importlib.import_module(f"{pkg}.eval.runio")

        def write(path, text):
            with rio.atomic_open(path) as fh:
                fh.write(text.encode("utf-8"))

        return types.SimpleNamespace(
            iter_chunks=rio.iter_chunks,
            ScoreStream=rio.ScoreStream,
            prepare=st.prepare_chunk,
            energy_p0=st.energy_p0,
            finish=st.finish_chunk,
            map_rows=st._map_rows,
            write=write,
        )
    except ImportError:
        R = importlib.import_module(f"{pkg}.commands.rerank")
        return types.SimpleNamespace(
            iter_chunks=R.iter_chunks,
            ScoreStream=R.ScoreStream,
            prepare=R.prepare_chunk,
            energy_p0=R.energy_p0,
            finish=R.finish_chunk,
            map_rows=R._map_rows,
            write=R._atomic_write_text,
        )


def run_side(api, d: str, chunk_size: int, out_dir: str) -> tuple[dict, list]:
    """One pass of every stage over the pool file -> (CPU seconds per stage, chunk texts)."""
    opts = types.SimpleNamespace(alpha=0.4, gamma=0.6, k=0, tag="jkofast", threads=1)
    cfg = types.SimpleNamespace(tau0=0.1)
    with open(os.path.join(d, "ids.txt"), encoding="utf-8") as fh:
        geom = _Rows(fh.read().split(), api.map_rows)
    scores_path = os.path.join(d, "scores.tsv")
    stream = api.ScoreStream(scores_path) if os.path.exists(scores_path) else None
    t = dict.fromkeys(STAGES, 0.0)
    texts = []
    clock = time.process_time
    it = api.iter_chunks(os.path.join(d, "run.trec"), chunk_size, lambda ln, msg: None)
    ci = 0
    while True:
        t0 = clock()
        chunk = next(it, None)
        t1 = clock()
        t["parse"] += t1 - t0
        if chunk is None:
            break
        sc = None
        if stream is not None:
            sc = {}
            for q in chunk.qids:
                b = stream.take(q)
                if b is not None:
                    sc[q] = b
        t2 = clock()
        pr = api.prepare(chunk, geom, sc, cfg, opts)
        t3 = clock()
        _, p0 = api.energy_p0(pr, cfg, opts)
        t4 = clock()
        text, _dist, _ = api.finish(pr, _P0Result(p0, len(pr.off_ok) - 1), opts, print)
        t5 = clock()
        api.write(os.path.join(out_dir, f"chunk_{ci:06d}.trec"), text)
        t6 = clock()
        t["scores"] += t2 - t1
        t["prepare"] += t3 - t2
        t["p0"] += t4 - t3
        t["format"] += t5 - t4
        t["write"] += t6 - t5
        texts.append(text)
        ci += 1
    return t, texts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="folder of make_synthetic_pools.py (run.trec, ids.txt[, scores.tsv])")
    ap.add_argument("--base", default=None, help="also time jkofast at this commit (A/B, alternating)")
    ap.add_argument("--head", default=None, help="time this commit (exported too) instead of the working tree")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "jkofast_ab"), help="export folder")
    ap.add_argument("--chunk-size", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args(argv)
    sides = {}
    if a.base or a.head:
        from ab_compare import export_package

        os.makedirs(a.cache, exist_ok=True)
        sys.path.insert(0, a.cache)
        if a.base:
            sides["base"] = side_api(export_package(a.base, a.cache))
    sides["head"] = side_api(export_package(a.head, a.cache) if a.head else "jkofast")
    with open(os.path.join(a.dir, "run.trec"), "rb") as fh:
        nq = len({ln.split(None, 1)[0] for ln in fh if ln.strip()})
    best = {s: dict.fromkeys(STAGES, float("inf")) for s in sides}
    texts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for api in sides.values():  # warm-up: compile / load the energy kernels
            run_side(api, a.dir, a.chunk_size, tmp)
        order = list(sides.items())
        for _ in range(a.repeats):
            for name, api in order:
                gc.collect()  # each side starts without the other's garbage
                t, texts[name] = run_side(api, a.dir, a.chunk_size, tmp)
                for k, v in t.items():
                    best[name][k] = min(best[name][k], v)
            order.reverse()  # ABBA: neither side always runs first
    if len(texts) == 2 and texts["base"] != texts["head"]:
        raise SystemExit("base and head chunk texts differ")
    rows = {}
    for name in sides:
        b = best[name]
        total = sum(b.values())
        rows[name] = {**{k: nq / v if v > 0 else None for k, v in b.items()}, "total": nq / total, "seconds": b}
    print(f"{nq} queries, chunks of {a.chunk_size}, best of {a.repeats}: queries/s per stage (one core)")
    print(
        f"{'stage':<9}"
        + "".join(f"{s:>12}" for s in sides)
        + ("   head/base (>1: head faster)" if len(sides) == 2 else "")
    )
    for k in (*STAGES, "total"):
        vals = [rows[s][k] for s in sides]
        line = f"{k:<9}" + "".join(f"{v:>12,.0f}" if v else f"{'-':>12}" for v in vals)
        if len(sides) == 2 and all(vals):
            line += f"   {vals[1] / vals[0]:.3f}"
        print(line)
    if len(sides) == 2:
        print("chunk texts byte-identical: yes")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"queries": nq, "chunk_size": a.chunk_size, "repeats": a.repeats, "sides": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
