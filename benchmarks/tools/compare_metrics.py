"""Side-by-side timing of ranking metrics: jkofast vs pytrec_eval vs ranx, one process.

    python benchmarks/tools/compare_metrics.py                 # 10k queries x 100 results
    python benchmarks/tools/compare_metrics.py --queries 2000 --no-ranx

Synthetic TREC-style data (seeded): a 200k-document id space ("doc<n>"), ``--depth`` results
per query sorted by score (4 decimals, so some ties), 5 judged documents per query with
graded labels 1-2 (3 of them retrieved).  Metrics: nDCG@10, recall@10, P@10, MRR (no cutoff,
pytrec_eval's recip_rank) and MAP — the same five for all three libraries.

Timings (best of ``--repeat``, wall clock, after one warm-up call each):

* pytrec_eval: ``RelevanceEvaluator(qrels, measures).evaluate(run)`` from dicts;
* ranx: ``evaluate(Qrels, Run, metrics)`` on pre-built objects (their construction from
  the dicts is timed separately); ranx compiles with Numba, warmed first;
* jkofast: ``evaluate(run, qrels)`` from the same dicts (end to end: flattening, id
  packing, kernel), from :class:`RunArrays`, and the kernel alone on packed arrays.

Also prints the largest absolute difference to pytrec_eval per metric.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.common import make_metric_data as make_data

METRICS = ("ndcg@10", "recall@10", "p@10", "mrr", "map")
PYTREC = {
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10"),
    "recall@10": ("recall.10", "recall_10"),
    "p@10": ("P.10", "P_10"),
    "mrr": ("recip_rank", "recip_rank"),
    "map": ("map", "map"),
}
RANX = {"ndcg@10": "ndcg@10", "recall@10": "recall@10", "p@10": "precision@10", "mrr": "mrr", "map": "map"}


def best_of(fn, repeat: int) -> float:
    fn()  # warm-up (compilation / caches)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-ranx", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import jkofast
    from jkofast.eval.metrics import _flatten_dict, _id_rows, _parse_metrics, evaluate
    from jkofast.eval.trec import RunArrays
    from jkofast.kernels.eval import metrics as K

    jkofast.warmup()
    run, qrels = make_data(args.queries, args.depth)
    n = sum(len(v) for v in run.values())
    rows = {}
    ref = {}

    try:
        import pytrec_eval

        measures = {v[0] for v in PYTREC.values()}

        def pt():
            return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

        rows["pytrec_eval (dicts)"] = best_of(pt, args.repeat)
        res = pt()
        ref = {m: np.array([res[q][PYTREC[m][1]] for q in run]) for m in METRICS}
    except ImportError:
        print("pytrec_eval not installed: skipped")

    ranx_vals = None
    if not args.no_ranx:
        try:
            import ranx

            t0 = time.perf_counter()
            Q, R = ranx.Qrels(qrels), ranx.Run(run)
            rows["ranx: build Qrels+Run from dicts (once)"] = time.perf_counter() - t0
            ms = [RANX[m] for m in METRICS]
            rows["ranx evaluate (pre-built objects)"] = best_of(
                lambda: ranx.evaluate(Q, R, ms, make_comparable=False), args.repeat
            )
            ranx.evaluate(Q, R, ms, save_results_in_run=True)
            ranx_vals = {m: np.array([R.scores[RANX[m]][q] for q in run]) for m in METRICS}
        except ImportError:
            print("ranx not installed: skipped")

    for nt in (1, 2):
        rows[f"jkofast evaluate (dicts), {nt} thread(s)"] = best_of(
            lambda nt=nt: evaluate(run, qrels, METRICS, n_threads=nt), args.repeat
        )
    ra = RunArrays.from_dict(run)
    rows["jkofast evaluate (RunArrays), 1 thread"] = best_of(
        lambda: evaluate(ra, qrels, METRICS, n_threads=1), args.repeat
    )
    # kernel alone on packed arrays
    qids = list(run)
    roff, rids, sc = _flatten_dict(run, qids, np.float64)
    qoff, qids_, lab = _flatten_dict(qrels, qids, np.int64)
    rr, qr = _id_rows(rids, qids_)
    s32 = sc.astype(np.float32)
    _, kinds, ks = _parse_metrics(METRICS)
    out = np.zeros((len(qids), len(METRICS)))
    nret = np.zeros(len(qids), np.int64)
    for nt in (1, 2):
        with jkofast.numba_threads(nt):
            rows[f"jkofast kernel only (packed arrays), {nt} thread(s)"] = best_of(
                lambda: K.evaluate_batch_chars_trec(
                    roff, rr, s32, qoff, qr, lab, kinds, ks, K.GAIN_LINEAR, False, out, nret
                ),
                args.repeat,
            )

    mine = evaluate(run, qrels, METRICS)
    diffs = {}
    if ref:
        diffs["vs pytrec_eval"] = {m: float(np.max(np.abs(mine[m] - ref[m]))) for m in METRICS}
    if ranx_vals is not None:
        diffs["vs ranx"] = {m: float(np.max(np.abs(mine[m] - ranx_vals[m]))) for m in METRICS}

    if args.json:
        print(
            json.dumps(
                {"queries": args.queries, "depth": args.depth, "n_results": n, "seconds": rows, "max_abs_diff": diffs},
                indent=2,
            )
        )
        return 0
    print(
        f"{args.queries} queries x {args.depth} results ({n:,} run lines), "
        f"metrics {', '.join(METRICS)}; best of {args.repeat}"
    )
    print(f"| {'what':<56} | {'seconds':>8} |")
    print(f"|{'-' * 58}|{'-' * 10}|")
    for k, v in rows.items():
        print(f"| {k:<56} | {v:8.3f} |")
    for k, d in diffs.items():
        print(f"max |diff| {k}: " + ", ".join(f"{m} {v:.1e}" for m, v in d.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
