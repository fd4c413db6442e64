"""``jkofast evaluate``: metrics of a TREC run against a split's qrels, with 95% bootstrap CIs.

With ``--qrels FILE`` and ``--n-boot 0`` both files are scored by the NumPy-only engine
(:func:`jkofast.eval._npfiles.evaluate_files_numpy`: the process never imports Numba, whose import
alone costs more than the whole evaluation of a 1,000-query run); files outside that engine's
layout, and every run with a bootstrap (whose resampling kernel needs Numba anyway), go to
:func:`jkofast.eval.fastread.evaluate_files` (bytes parsed in Numba, queries in parallel).  Both
give the same values bit for bit.  With ``--dataset`` the qrels come from the dataset loader.
Imports stay inside :func:`run`: the command loads the evaluation wing only.
"""

from __future__ import annotations

import argparse
import os
import sys

# Variables OpenBLAS reads for its thread count, in its order of precedence.
_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def add_parser(sub) -> None:
    """Register ``jkofast evaluate`` on the sub-command parser ``sub``."""
    p = sub.add_parser(
        "evaluate",
        help="score a TREC run (nDCG/recall/P/MRR/MAP) with bootstrap CIs",
        description="Score a TREC run against qrels. Conventions: --tie-break trec_eval "
        "(default) equals pytrec_eval/BEIR; --tie-break given --gain exponential is the "
        "published JKO-RAG evaluator.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--dataset", help='bundled name ("scifact") or a BEIR folder path')
    src.add_argument("--qrels", help="qrels file (TREC 4-column or BEIR 3-column TSV)")
    p.add_argument("--split", default="test", help="qrels split with --dataset (default test)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="with --dataset: a judgement on a document absent from the corpus or a query without text is an "
        "error (default: dropped with one warning giving the count)",
    )
    p.add_argument("--run", required=True, help="run file (TREC 6-column or qid/docid/score TSV; .gz ok)")
    p.add_argument(
        "--metrics",
        default="ndcg@10,recall@10,p@10,mrr@10,map",
        help="comma-separated metric names (default ndcg@10,recall@10,p@10,mrr@10,map)",
    )
    for opt, choices, say in (  # the conventions: the first choice is the default (pytrec_eval's)
        ("--gain", ("linear", "exponential"), "nDCG gain: label (trec_eval/BEIR, default) or 2^label-1"),
        (
            "--tie-break",
            ("trec_eval", "given"),
            "trec_eval: sort by score, ties by doc id desc (default); given: file order",
        ),
        ("--missing", ("skip", "zero"), "qrels queries absent from the run: skip (pytrec_eval/BEIR) or score 0"),
    ):
        p.add_argument(opt, choices=choices, default=choices[0], help=say)
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="score an empty run or qrels, or files with no query in common (default: exit 2, naming the file)",
    )
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap replicates (default 2000; 0: means only, no CI)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--per-query", action="store_true", help="include per-query values (with --json)")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default all)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _load_qrels(args: argparse.Namespace):
    if args.dataset:
        from jkofast.datasets.beir import load_dataset

        return load_dataset(args.dataset, strict=args.strict).qrels(args.split), f"{args.dataset}:{args.split}"
    raise ValueError("give --dataset NAME_OR_PATH (with --split) or --qrels FILE")


def _score(args: argparse.Namespace):
    """Return ``(result, qrels source, run-only count, qrels-only count)`` (an EvalResult or a FileScores)."""
    conv = {"gain": args.gain, "tie_break": args.tie_break, "missing": args.missing, "n_threads": args.threads}
    if args.qrels and args.n_boot == 0:
        from jkofast.eval import evaluate_files_numpy

        res = evaluate_files_numpy(args.run, args.qrels, args.metrics, args.gain, args.tie_break, missing=args.missing)
        if res is not None:
            return res, args.qrels, res.run_only, res.qrels_only
    if args.qrels:
        from jkofast.eval.fastread import evaluate_files

        res, info = evaluate_files(args.run, args.qrels, args.metrics, counts=True, **conv)
        return res, args.qrels, info["run_only"], info["qrels_only"]
    qrels, qrels_src = _load_qrels(args)
    from jkofast.eval.fastread import read_run_arrays_fast
    from jkofast.eval.metrics import evaluate

    run_arrays = read_run_arrays_fast(args.run, n_threads=args.threads)  # = read_run's content, as arrays
    res = evaluate(run_arrays, qrels, args.metrics, **conv)
    run_qids = set(run_arrays.query_ids)
    return res, qrels_src, sum(q not in qrels for q in run_qids), sum(q not in run_qids for q in qrels)


def _check_not_empty(args, n_scored: int, n_run_only: int, n_qrels_only: int, qrels_src: str) -> None:
    """Refuse to print metrics over nothing: an empty run, empty qrels, or no query in common."""
    both = n_scored - (n_qrels_only if args.missing == "zero" else 0)
    n_run, n_qrels = n_run_only + both, n_qrels_only + both
    if n_run and n_qrels and both:
        return
    if not n_run and not n_qrels:
        what = f"--run {args.run!r} and the qrels {qrels_src!r} hold no query"
    elif not n_run:
        what = f"--run {args.run!r} holds no result line"
    elif not n_qrels:
        what = f"the qrels {qrels_src!r} hold no judgement"
    else:
        what = f"--run {args.run!r} ({n_run} queries) and the qrels {qrels_src!r} ({n_qrels}) share no query id"
    raise ValueError(f"{what}: every metric would be 0 over 0 queries (--allow-empty to accept)")


def _one_blas_thread() -> None:
    """Ask OpenBLAS for one thread when this process has not loaded NumPy yet and no thread count is set.

    Evaluation does no linear algebra, but NumPy's import starts OpenBLAS's thread pool, whose
    workers spin on the other cores before they sleep: about 0.05 s of CPU per process on the
    2-core machine of docs/performance.md, 0.1 s on a 10,000-query evaluation.  A process that
    has NumPy already (the command called from Python) or a user's own setting is left alone.
    """
    if "numpy" not in sys.modules and not any(v in os.environ for v in _BLAS_THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def run(args: argparse.Namespace) -> int:
    """Score the run against the qrels and print the metrics with their CIs (exit status)."""
    import time

    _one_blas_thread()

    from jkofast.commands._common import emit

    if args.n_boot < 0:
        raise ValueError(f"--n-boot must be >= 0 (0: no CI), got {args.n_boot}")
    t0 = time.perf_counter()
    res, qrels_src, n_run_only, n_qrels_only = _score(args)
    t_eval = time.perf_counter() - t0
    if not args.allow_empty:
        _check_not_empty(args, len(res.query_ids), n_run_only, n_qrels_only, qrels_src)
    t0 = time.perf_counter()
    ci = args.n_boot > 0
    summ = (
        res.summary(ci=True, n_boot=args.n_boot, seed=args.seed)
        if ci
        else {m: {"mean": v} for m, v in res.means.items()}
    )
    t_ci = time.perf_counter() - t0
    obj = {
        "run": args.run,
        "qrels": qrels_src,
        "n_queries": len(res.query_ids),
        "skipped_run_queries_without_qrels": n_run_only,
        "qrels_queries_without_run": n_qrels_only,
        "gain": args.gain,
        "tie_break": args.tie_break,
        "missing": args.missing,
        "ci": {"method": "percentile bootstrap", "level": 0.95, "n_boot": args.n_boot, "seed": args.seed}
        if ci
        else None,
        "metrics": summ,
        "seconds": {"read_and_evaluate": t_eval, "bootstrap": t_ci},
    }
    if args.per_query:
        obj["per_query"] = {"query_ids": res.query_ids, **{m: v.tolist() for m, v in res.per_query.items()}}
    head = f"95% CI (bootstrap, n={args.n_boot})" if ci else "(no CI: --n-boot 0)"
    lines = [
        f"run {args.run}  qrels {qrels_src}  queries {len(res.query_ids)}"
        f"  (gain {args.gain}, tie-break {args.tie_break})",
        f"{'metric':<12} {'mean':>8}   {head}",
    ]
    for m, s in summ.items():
        ci_txt = f"[{s['lo']:.4f}, {s['hi']:.4f}]" if "lo" in s else "-"
        lines.append(f"{m:<12} {s['mean']:>8.4f}   {ci_txt}")
    if n_run_only or n_qrels_only:
        lines.append(
            f"skipped: {n_run_only} run queries without qrels; "
            f"{n_qrels_only} qrels queries without results" + (" (scored 0)" if args.missing == "zero" else "")
        )
    emit(obj, args.json, "\n".join(lines))
    return 0
