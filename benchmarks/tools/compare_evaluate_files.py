"""Evaluation from files, side by side in one process: ``jkofast evaluate`` vs pytrec_eval.

    python benchmarks/tools/compare_evaluate_files.py                  # 10,000 queries x 100 results
    python benchmarks/tools/compare_evaluate_files.py --queries 2000 --cli

Writes a seeded synthetic TREC run (6 columns, 4-decimal scores) and qrels (4 columns) to a
temporary folder (``benchmarks.common.make_metric_data``), then times, best of ``--repeat``
after one warm-up each, the whole path from the files to the per-query metrics
(nDCG@10, recall@10, P@10, MRR, MAP):

* pytrec_eval, read the documented way: ``pytrec_eval.parse_run`` / ``parse_qrel`` on the
  open files (its dict input), then ``RelevanceEvaluator(qrels, measures).evaluate(run)``;
* jkofast, what ``jkofast evaluate`` does: ``read_qrels`` + ``read_run`` + ``evaluate``;
* jkofast from arrays: ``read_qrels_arrays`` + ``read_run_arrays`` + ``evaluate``;
* jkofast fast path: ``read_run_arrays_fast`` (bytes -> Numba field scan, ids kept as bytes)
  + ``read_qrels`` + ``evaluate``, at 1 thread and at all threads;
* ``--cli``: the ``jkofast evaluate --run --qrels --json`` command as a subprocess (import
  included) beside ``python -c`` of the pytrec_eval path.

Prints seconds, the ratios to pytrec_eval and the largest per-metric difference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.common import make_metric_data
from benchmarks.tools.compare_metrics import METRICS, PYTREC  # the same five metrics, the same names


def write_files(folder: str, n_queries: int, depth: int) -> tuple[str, str]:
    """Write the synthetic run and qrels; return their paths."""
    run, qrels = make_metric_data(n_queries, depth)
    rp, qp = os.path.join(folder, "run.trec"), os.path.join(folder, "qrels.txt")
    with open(rp, "w") as fh:
        for q, docs in run.items():
            for r, (d, s) in enumerate(sorted(docs.items(), key=lambda t: -t[1]), 1):
                fh.write(f"{q} Q0 {d} {r} {s:.4f} synth\n")
    with open(qp, "w") as fh:
        for q, docs in qrels.items():
            for d, lab in docs.items():
                fh.write(f"{q} 0 {d} {lab}\n")
    return rp, qp


def best_of(fn, repeat: int) -> tuple[float, object]:
    """Best wall time of ``repeat`` calls after one warm-up call, and the last result."""
    out = fn()
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


PYTREC_SNIPPET = (
    "import sys, pytrec_eval\n"
    "with open(sys.argv[2]) as f: qrels = pytrec_eval.parse_qrel(f)\n"
    "with open(sys.argv[1]) as f: run = pytrec_eval.parse_run(f)\n"
    "r = pytrec_eval.RelevanceEvaluator(qrels, {'ndcg_cut.10', 'recall.10', 'P.10', 'recip_rank', 'map'})"
    ".evaluate(run)\n"
)


def main(argv=None) -> int:
    """Run the comparison and print the table (exit status)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli", action="store_true", help="also time the two commands as subprocesses")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import pytrec_eval

    from jkofast.eval.fastread import read_run_arrays_fast
    from jkofast.eval.metrics import evaluate
    from jkofast.eval.trec import read_qrels, read_qrels_arrays, read_run, read_run_arrays

    out = {"queries": args.queries, "depth": args.depth}
    with tempfile.TemporaryDirectory() as tmp:
        rp, qp = write_files(tmp, args.queries, args.depth)
        out["run_mb"] = os.path.getsize(rp) / 1e6

        def pt():
            with open(qp) as f:
                qrels = pytrec_eval.parse_qrel(f)
            with open(rp) as f:
                run = pytrec_eval.parse_run(f)
            return pytrec_eval.RelevanceEvaluator(qrels, {v[0] for v in PYTREC.values()}).evaluate(run)

        def jk_dict():
            return evaluate(read_run(rp), read_qrels(qp), METRICS)

        def jk_arrays():
            return evaluate(read_run_arrays(rp), read_qrels_arrays(qp), METRICS)

        def jk_fast(n_threads):
            return evaluate(read_run_arrays_fast(rp, n_threads), read_qrels(qp), METRICS, n_threads=n_threads)

        t_pt, ref = best_of(pt, args.repeat)
        t_f1, res_f = best_of(lambda: jk_fast(1), args.repeat)
        t_fa, _ = best_of(lambda: jk_fast(None), args.repeat)
        t_jd, res = best_of(jk_dict, args.repeat)
        t_ja, _ = best_of(jk_arrays, args.repeat)
        diff = {}
        for m, (_, key) in PYTREC.items():
            mine = dict(zip(res.query_ids, res[m], strict=True))
            fast = dict(zip(res_f.query_ids, res_f[m], strict=True))
            diff[m] = max(max(abs(mine[q] - ref[q][key]), abs(fast[q] - ref[q][key])) for q in ref)
        out["seconds"] = {
            "pytrec_eval": t_pt,
            "jkofast_dict": t_jd,
            "jkofast_arrays": t_ja,
            "jkofast_fast_1thread": t_f1,
            "jkofast_fast_all_threads": t_fa,
        }
        out["speedup_vs_pytrec_eval"] = {k: t_pt / v for k, v in out["seconds"].items() if k != "pytrec_eval"}
        out["max_abs_diff"] = diff
        if args.cli:
            cmds = {
                "pytrec_eval_cli": [sys.executable, "-c", PYTREC_SNIPPET, rp, qp],
                "jkofast_cli": [sys.executable, "-m", "jkofast", "evaluate", "--run", rp, "--qrels", qp, "--json"],
            }
            for name, cmd in cmds.items():
                t, _ = best_of(lambda c=cmd: subprocess.run(c, check=True, capture_output=True), args.repeat)
                out["seconds"][name] = t
            out["speedup_vs_pytrec_eval"]["jkofast_cli"] = (
                out["seconds"]["pytrec_eval_cli"] / out["seconds"]["jkofast_cli"]
            )
    out["load"] = os.getloadavg()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out["seconds"].items():
            sp = out["speedup_vs_pytrec_eval"].get(k)
            print(f"{k:<16} {v:8.3f} s" + (f"   {sp:5.2f}x pytrec_eval" if sp else ""))
        print("max |diff| vs pytrec_eval:", {k: f"{v:.1e}" for k, v in diff.items()})
        print(f"{args.queries} queries x {args.depth} results ({out['run_mb']:.1f} MB); load {out['load']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
