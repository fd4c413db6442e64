"""Seeded TREC run + qrels files for the whole-process ``jkofast evaluate`` timing (docs/performance.md).

    python benchmarks/tools/make_eval_runs.py OUT_DIR [--queries 1000,10000] [--depth 100]

Writes ``run_<Q>x<D>.trec`` (6 columns, 4-decimal scores) and ``qrels_<Q>.trec`` (4 columns) for each
query count: the data of ``benchmarks/tools/compare_evaluate_files.py`` (``benchmarks.common.make_metric_data``,
seed 0; same arguments, same bytes). The peer side of the timing is ``benchmarks/tools/pytrec_eval_files.py``.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.tools.compare_evaluate_files import write_files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output folder (created)")
    ap.add_argument("--queries", default="1000,10000", help="comma-separated query counts (default 1000,10000)")
    ap.add_argument("--depth", type=int, default=100, help="results per query (default 100)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for n in (int(x) for x in args.queries.split(",") if x):
        rp, qp = write_files(args.out, n, args.depth)
        named = (os.path.join(args.out, f"run_{n}x{args.depth}.trec"), os.path.join(args.out, f"qrels_{n}.trec"))
        for src, dst in zip((rp, qp), named):
            os.replace(src, dst)
            print(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
