"""SGR index bytes by structure and query time per rescue mode, one revision per process (for A/B runs).

Usage (run each step with the revision to measure first on ``PYTHONPATH``, alternating the revisions):

    python benchmarks/tools/sgr_storage.py build --docs 1000000 --out DIR [--queries-json Q]
    python benchmarks/tools/sgr_storage.py time DIR --queries-json Q [--repeats 3] [--modes auto,postings]

``build`` fits ``SparseGeometricRetriever()`` (defaults, 2 threads) on
``benchmarks.common.synthetic_texts(docs, 200)``, saves it to ``DIR``, writes the 200 queries to
``Q`` and prints ``index_nbytes(breakdown=True)`` per passage.  ``time`` opens ``DIR``
(``load(mmap=True)``), warms the query kernel, then times ``search(queries, k=10, n_threads=1)``
``--repeats`` times per rescue mode and prints one JSON line (ms/query per pass, bytes by
structure); the ids and scores of the last pass go to ``DIR/../<name>_<mode>_{ids,scores}.npy``
so two revisions' outputs can be compared.  docs/performance.md ("SGR index storage") has the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

# appended: the jkofast on PYTHONPATH (the revision measured) comes first; this tree gives benchmarks.common
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def build(args) -> None:
    from benchmarks.common import synthetic_texts
    from jkofast.sgr.retriever import SparseGeometricRetriever

    docs, queries = synthetic_texts(args.docs, 200)
    if args.queries_json:
        with open(args.queries_json, "w") as fh:
            json.dump(queries, fh)
    t0 = time.perf_counter()
    r = SparseGeometricRetriever().fit(docs, n_threads=2)
    fit_s = time.perf_counter() - t0
    r.save(args.out)
    bd = r.index_nbytes(breakdown=True)
    per = {k: v / args.docs for k, v in bd.items()}
    print(json.dumps({"docs": args.docs, "fit_s": fit_s, "bytes_per_passage": per}))


def time_index(args) -> None:
    import jkofast
    from jkofast.sgr.retriever import SparseGeometricRetriever

    with open(args.queries_json) as fh:
        queries = json.load(fh)
    r = SparseGeometricRetriever.load(args.index, mmap=True)
    out = {"package": jkofast.__file__, "n_docs": r.n_docs_, "bytes": r.index_nbytes(breakdown=True)}
    stem = os.path.join(os.path.dirname(os.path.abspath(args.index)), os.path.basename(os.path.abspath(args.index)))
    for mode in args.modes.split(","):
        r.set_params(rescue_mode=mode)
        r.search(queries[:4], k=10, n_threads=1)  # compile or cache load
        ts = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ids, scores = r.search(queries, k=10, n_threads=1)
            ts.append((time.perf_counter() - t0) / len(queries) * 1e3)
        np.save(f"{stem}_{mode}_ids.npy", ids)
        np.save(f"{stem}_{mode}_scores.npy", scores)
        out[mode] = {"median_ms": float(np.median(ts)), "ms": [round(t, 4) for t in ts]}
    print(json.dumps(out), flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--docs", type=int, default=1_000_000)
    b.add_argument("--out", required=True)
    b.add_argument("--queries-json", default=None)
    t = sub.add_parser("time")
    t.add_argument("index")
    t.add_argument("--queries-json", required=True)
    t.add_argument("--repeats", type=int, default=3)
    t.add_argument("--modes", default="auto,postings")
    args = ap.parse_args(argv)
    build(args) if args.cmd == "build" else time_index(args)


if __name__ == "__main__":
    main()
