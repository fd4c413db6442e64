"""``jkofast study NAME``: one published experiment, its table printed beside the published numbers.

Studies are registered in :data:`jkofast.studies._registry.STUDIES`; each runs on the bundled
SciFact by default (``--dataset`` any BEIR folder with saved MiniLM embeddings), ``--quick`` is
CI-sized, ``--json`` prints the machine-readable summary, ``--out DIR`` also writes
``DIR/<study>.json`` and ``DIR/<study>.md``.
"""

from __future__ import annotations

import sys

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Register ``jkofast study``."""
    from jkofast.studies import STUDIES

    p = sub.add_parser(
        "study",
        help="run a published experiment (extensions, evaluators) and print its table",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "name",
        choices=sorted(STUDIES),
        metavar="NAME",
        help="; ".join(f"{k}: {v[1]}" for k, v in sorted(STUDIES.items())),
    )
    p.add_argument("--dataset", default="scifact", help="bundled name or BEIR folder with MiniLM embeddings")
    p.add_argument("--quick", action="store_true", help="CI-sized run (a few queries)")
    p.add_argument("--scores", default=None, help="rerank scores file 'query-id doc-id score' (default: BM25)")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    p.add_argument("--out", default=None, help="also write OUT/<study>.json and OUT/<study>.md")
    p.add_argument("--plot", action="store_true", help="also write the study's figures as PNG (matplotlib)")
    p.add_argument(
        "--methods",
        nargs="+",
        default=None,
        metavar="METHOD",
        help="stability only: the methods to run (default: jko_rerank kl_rerank noprox rerank_topk dense_topk); "
        "also bw:ALPHA (BW-JKO, ALPHA in [0, 1], one or several), nm:W.npz (NM-JKO with a learned metric) and "
        "nm-bw:ALPHA:W.npz (NM-JKO with the Bregman proximal term); 'train' for W.npz trains the metric on the "
        "train split in the run; with --config fast the default is the extension-stability set",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="POINT",
        help="stability only: the operating point (base, tuned, contrib, fast; default base); fast is the "
        "published extension-stability protocol (50 queries, kl/bw/jko/nm methods, its table beside ours)",
    )
    p.add_argument(
        "--n",
        type=int,
        default=None,
        metavar="N",
        help="stability only: queries in the seed-0 sample (default 60, or 50 with --config fast)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the study and print its table (exit status)."""
    import os

    from jkofast._io import check_writable_dir
    from jkofast._threads import resolve_threads
    from jkofast.commands._common import emit
    from jkofast.studies.common import StudyOptions, require_matplotlib, run_study, save_study

    resolve_threads(args.threads)
    for opt, val in (("--methods", args.methods), ("--config", args.config), ("--n", args.n)):
        if val is not None and args.name != "stability":
            raise ValueError(f"{opt} applies to the stability study only, not {args.name!r}")
    if args.name == "stability":
        from jkofast.studies.stability import CONFIGS, parse_methods

        if args.config is not None and args.config not in CONFIGS:
            raise ValueError(f"--config {args.config!r}: choose from {', '.join(CONFIGS)}")
        if args.n is not None and args.n < 1:
            raise ValueError(f"--n must be at least 1, got {args.n}")
        if args.methods is not None:  # a bad method fails before any work
            args.methods = parse_methods(args.methods, args.config or "base")
    if args.plot:
        require_matplotlib()
    if args.out or args.plot:  # before the study runs: a folder that cannot be written fails now
        check_writable_dir(args.out or ".", "--out" if args.out else "the current folder (--plot)")
    if args.scores and not os.path.isfile(args.scores):
        raise ValueError(f"--scores {args.scores!r} is not a file")
    opts = StudyOptions(
        dataset=args.dataset,
        quick=args.quick,
        scores_file=args.scores,
        n_threads=args.threads,
        progress=not (args.quiet or args.json),
        out=args.out,
        plot=args.plot,
        methods=args.methods,
        config=args.config,
        n_queries=args.n,
    )
    from jkofast._ahead import compile_notice
    from jkofast.warmups import compile_cost

    say = lambda msg: print(f"jkofast study: {msg}", file=sys.stderr, flush=True)  # noqa: E731
    with compile_notice(say, compile_cost("jko") + compile_cost("evaluation"), enabled=opts.progress):
        res = run_study(args.name, opts, save=False)
    if args.json:  # the summary lists the written files; printed even when a write fails
        try:
            save_study(args.name, res, opts)
        finally:
            emit(res.summary(), True, "")
    else:  # the table first, then the files: a failed write never loses the table
        emit(res.summary(), False, res.table())
        for path in save_study(args.name, res, opts):  # every file written, named (figures land in --out or here)
            print(f"wrote {path}")
    return 0
