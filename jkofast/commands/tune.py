"""``jkofast tune``: select the JKO-RAG operating point on a corpus by cross-validation, write it as a point file.

With ``--split train``: selected on the train queries, reported on ``--eval-split`` (test).
Without: ``--folds`` K-fold cross-validation over the judged queries of ``--eval-split``; each
query is scored by the point chosen on the other folds (out-of-fold nDCG@10), with paired
bootstrap CIs against dense, BM25, hybrid RRF, the same energy read out without the flow and the
published SciFact point.  The work is :func:`jkofast.studies.tune.tune_dataset`; docs/tuning.md.
"""

from __future__ import annotations

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Register ``jkofast tune``."""
    p = sub.add_parser("tune", help="select the operating point on a corpus by cross-validation (point file)")
    p.add_argument("--dataset", default="scifact", help="bundled name or any BEIR folder with saved embeddings")
    p.add_argument("--split", default=None, help="train split to select on (default: K-fold on --eval-split)")
    p.add_argument("--eval-split", default="test", help="split reported (and cross-validated without --split)")
    p.add_argument("--folds", type=int, default=5, help="K of the cross-validation (5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fold permutation (0)")
    p.add_argument("--grid", default="published", choices=["published", "wide"], help="search space (published)")
    p.add_argument(
        "--rule",
        default="1se",
        choices=["1se", "best"],
        help="selection: the simplest point within one standard error of the best (1se, default) or the best mean",
    )
    p.add_argument("--embeddings", default=None, help="folder name under FOLDER/embeddings/ (default minilm-l6-v2)")
    p.add_argument("--scores", default=None, help="rerank scores file 'query-id doc-id score' (default: BM25)")
    p.add_argument("--grad", default="implicit", choices=["implicit", "unrolled"], help="Wasserstein gradient path")
    p.add_argument("--out", default=None, help="write the point file (JSON) here")
    p.add_argument("--runs", default=None, help="write the out-of-fold run and the baselines' runs (TREC) here")
    p.add_argument("--per-query", default=None, help="write the per-query nDCG@10 of every row (TSV) here")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="select on qrels with no relevant document (default: exit 2, as evaluate; every nDCG would be 0)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _table(r: dict) -> str:
    lines = [
        f"{r['dataset']}: {r['protocol']} ({r['n_selection_queries']} selection, {r['n_eval_queries']} reported "
        f"queries, grid {r['grid_name']}: {len(r['grid'])} points)",
        f"corpus language: {r['language']['language']} ({r['language']['script']}); analyser: "
        + "; ".join(a["why"] for a in r["analysers"]),
        f"selected: {r['selected_description']}",
        "",
        f"{'row':<12} {'nDCG@10 [95% CI]':<26} {'tune - row [95% CI]':<28}",
        "-" * 68,
        f"{'tune (oof)':<12} {r['oof_ndcg10']:.4f} [{r['oof_ci'][0]:.3f}, {r['oof_ci'][1]:.3f}]",
    ]
    for name, b in r["baselines"].items():
        d, lo, hi = b["oof_minus"]
        sig = "*" if lo > 0 or hi < 0 else " "
        lines.append(
            f"{name:<12} {b['ndcg10']:.4f} [{b['ci'][0]:.3f}, {b['ci'][1]:.3f}]   {d:+.4f} [{lo:+.3f}, {hi:+.3f}]{sig}"
        )
    lines.append("-" * 68)
    lines.append("* = paired-difference CI excludes 0; readout = the chosen energy read out without the flow")
    sel = r["selection"]
    rule = "one-standard-error rule" if sel["rule"] == "1se" else "best mean"
    for f, info in zip(r["folds"], sel["folds"], strict=True):
        lines.append(f"fold {f['fold']}: {f['description']} (mean {info['chosen_mean']:.4f}; best "
                     f"{info['best_mean']:.4f}, paired SE {info['se']:.4f})")  # fmt: skip
    bc = sel["best_corner"]
    lines.append(
        f"selection ({rule}): tune (oof) {sel['oof_ndcg10']:.4f} vs best single input {bc['ndcg10']:.4f} "
        f"({bc['description']}): cost {sel['cost']:+.4f}; rule {sel['other_rule']['rule']} would give "
        f"{sel['other_rule']['oof_ndcg10']:.4f}"
    )
    lines.extend(f"note: {n}" for n in r["notes"])
    lines.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in r["seconds"].items()))
    return "\n".join(lines)


def _check_relevant(args) -> None:
    """Refuse qrels without one relevant document: every row would score 0 and the selection mean nothing."""
    import os

    from jkofast.datasets.beir import BUNDLED, bundled_path, read_qrels_beir

    folder = bundled_path(args.dataset) if args.dataset in BUNDLED and not os.path.isdir(args.dataset) else args.dataset
    for split in dict.fromkeys(s for s in (args.split, args.eval_split) if s is not None):
        path = os.path.join(folder, "qrels", f"{split}.tsv")
        if not os.path.isfile(path):
            continue  # the tuner names the missing split
        qrels = read_qrels_beir(path)
        if not any(label > 0 for judged in qrels.values() for label in judged.values()):
            raise ValueError(
                f"{path}: no relevant document (no judgement with a label above 0): every nDCG would be 0 and "
                "the selection meaningless (--allow-empty to accept)"
            )


def run(args) -> int:
    """Check the arguments, tune, write the point file / runs / per-query values, print the table."""
    from jkofast._io import check_writable, check_writable_dir
    from jkofast._threads import resolve_threads
    from jkofast.commands._common import check_qrels, emit
    from jkofast.studies.tune import save_point, tune_dataset, write_per_query, write_runs

    resolve_threads(args.threads)
    if args.folds < 2:
        raise ValueError(f"--folds must be >= 2, got {args.folds}")
    for path, name in ((args.out, "--out"), (args.per_query, "--per-query")):
        if path is not None:
            check_writable(path, name)
    if args.runs is not None:
        check_writable_dir(args.runs, "--runs")
    check_qrels(args.dataset, ([("--split", args.split)] if args.split else []) + [("--eval-split", args.eval_split)])
    if not args.allow_empty:
        _check_relevant(args)
    r = tune_dataset(
        args.dataset,
        split=args.split,
        eval_split=args.eval_split,
        folds=args.folds,
        grid_name=args.grid,
        seed=args.seed,
        embeddings=args.embeddings,
        scores_file=args.scores,
        grad=args.grad,
        rule=args.rule,
        n_threads=args.threads,
        progress=not (args.quiet or args.json),
    )
    if args.out:
        save_point(r, args.out)
    written = [args.out] if args.out else []
    if args.runs:
        written += write_runs(args.runs, r["_tops"], r["_query_ids"], r["_doc_ids"])
    if args.per_query:
        write_per_query(args.per_query, r["_query_ids"], {m: {"ndcg@10": v} for m, v in r["_per_query"].items()})
        written.append(args.per_query)
    public = {k: v for k, v in r.items() if not k.startswith("_") and k not in ("grid", "oof_per_query")}
    public["written"] = written
    text = _table(r) + (f"\npoint file: {args.out}" if args.out else "")
    emit(public, args.json, text + "".join(f"\nwrote {w}" for w in written))
    return 0
