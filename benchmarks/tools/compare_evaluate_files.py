"""Evaluation from files, side by side in one process: ``jkofast evaluate`` vs pytrec_eval.

    python benchmarks/tools/compare_evaluate_files.py                  # 10,000 queries x 100 results
    python benchmarks/tools/compare_evaluate_files.py --queries 2000 --cli --all

Writes a seeded synthetic TREC run (6 columns, 4-decimal scores) and qrels (4 columns) to a
temporary folder (``benchmarks.common.make_metric_data``), then times the whole path from the
files to the per-query metrics (nDCG@10, recall@10, P@10, MRR, MAP), the variants interleaved
round by round (one warm-up round first; best and median of ``--repeat`` rounds):

* pytrec_eval, read the documented way: ``pytrec_eval.parse_run`` / ``parse_qrel`` on the
  open files (its dict input), then ``RelevanceEvaluator(qrels, measures).evaluate(run)``;
* jkofast, what ``jkofast evaluate`` does: ``evaluate_files`` (both files parsed from their
  bytes, ids matched by hash inside Numba, metrics from the parsed arrays), at 1 thread and
  at all threads;
* jkofast's previous path: ``read_run_arrays_fast`` + ``read_qrels`` + ``evaluate``;
* ``--all``: also the dict readers (``read_run`` + ``read_qrels`` + ``evaluate``);
* ``--cli``: the ``jkofast evaluate --run --qrels --json`` command as a subprocess (import
  included; with the default 2000-replicate bootstrap CIs and with ``--n-boot 0``) beside
  ``python -c`` of the pytrec_eval path, interleaved the same way.

Prints seconds, the ratios to pytrec_eval (of the best times) and the largest per-metric
difference to pytrec_eval.
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


def interleaved(fns: dict, repeat: int) -> tuple[dict, dict, dict]:
    """Best and median wall time per variant over ``repeat`` rounds (each round runs every variant once,
    in turn, after one warm-up round), and each variant's last result."""
    out = {k: f() for k, f in fns.items()}
    times: dict = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            t0 = time.perf_counter()
            out[k] = f()
            times[k].append(time.perf_counter() - t0)
    return {k: min(v) for k, v in times.items()}, {k: float(np.median(v)) for k, v in times.items()}, out


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
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cli", action="store_true", help="also time the two commands as subprocesses")
    ap.add_argument("--all", action="store_true", help="also time the dict readers")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import pytrec_eval

    from jkofast.eval.fastread import evaluate_files, read_run_arrays_fast
    from jkofast.eval.metrics import evaluate
    from jkofast.eval.trec import read_qrels, read_run

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

        fns = {
            "pytrec_eval": pt,
            "jkofast_files_1thread": lambda: evaluate_files(rp, qp, METRICS, n_threads=1),
            "jkofast_files_all_threads": lambda: evaluate_files(rp, qp, METRICS),
            "jkofast_read_fast+evaluate": lambda: evaluate(read_run_arrays_fast(rp), read_qrels(qp), METRICS),
        }
        if args.all:
            fns["jkofast_dict_readers"] = lambda: evaluate(read_run(rp), read_qrels(qp), METRICS)
        best, med, res = interleaved(fns, args.repeat)
        ref = res.pop("pytrec_eval")
        diff = {}
        for m, (_, key) in PYTREC.items():
            diff[m] = 0.0
            for r in res.values():
                assert sorted(r.query_ids) == sorted(ref), "a variant evaluated other queries"
                mine = dict(zip(r.query_ids, r[m].tolist(), strict=True))
                diff[m] = max(diff[m], max(abs(mine[q] - ref[q][key]) for q in ref))
        out["seconds"] = best
        out["median_seconds"] = med
        if args.cli:
            cmds = {
                "pytrec_eval_cli": [sys.executable, "-c", PYTREC_SNIPPET, rp, qp],
                "jkofast_cli": [sys.executable, "-m", "jkofast", "evaluate", "--run", rp, "--qrels", qp, "--json"],
                "jkofast_cli_no_ci": [
                    *[sys.executable, "-m", "jkofast", "evaluate", "--run", rp, "--qrels", qp, "--json"],
                    *["--n-boot", "0"],
                ],
            }
            fns = {k: (lambda c=c: subprocess.run(c, check=True, capture_output=True)) for k, c in cmds.items()}
            b2, m2, _ = interleaved(fns, args.repeat)
            out["seconds"].update(b2)
            out["median_seconds"].update(m2)
        t_pt = out["seconds"]["pytrec_eval"]
        out["speedup_vs_pytrec_eval"] = {k: t_pt / v for k, v in out["seconds"].items() if "pytrec" not in k}
        if args.cli:
            t_cli = out["seconds"]["pytrec_eval_cli"]
            for k in ("jkofast_cli", "jkofast_cli_no_ci"):
                out["speedup_vs_pytrec_eval"][k] = t_cli / out["seconds"][k]
        out["max_abs_diff"] = diff
    out["load"] = os.getloadavg()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{'variant':<28} {'best':>8} {'median':>8}")
        for k, v in out["seconds"].items():
            sp = out["speedup_vs_pytrec_eval"].get(k)
            line = f"{k:<28} {v:7.3f}s {out['median_seconds'][k]:7.3f}s"
            print(line + (f"   {sp:5.2f}x pytrec_eval" if sp else ""))
        print("max |diff| vs pytrec_eval:", {k: f"{v:.1e}" for k, v in diff.items()})
        print(f"{args.queries} queries x {args.depth} results ({out['run_mb']:.1f} MB); load {out['load']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
