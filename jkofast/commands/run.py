"""``jkofast run --dataset scifact|FOLDER`` (alias ``jkofast demo``): the end-to-end main job on any BEIR folder.

Saved embeddings (``FOLDER/embeddings/minilm-l6-v2``) feed the dense rows; ``--embed`` makes
them first (``jkofast embed``); without them the rows that need none (BM25, SGR, ``jko_sparse``)
run and the output names the skipped rows and how to get them.
"""

from __future__ import annotations


def _add(sub, name: str, help_: str) -> None:
    p = sub.add_parser(name, help=help_)
    p.add_argument("--dataset", default="scifact", help="bundled name or any BEIR folder")
    p.add_argument("--split", default="test")
    p.add_argument("--config", default="tuned", help="JKO operating point: base, tuned, contrib, fast")
    p.add_argument(
        "--grad",
        default="implicit",
        choices=["implicit", "unrolled", "config"],
        help="Wasserstein gradient path (implicit = fast exact; unrolled = reference-faithful)",
    )
    p.add_argument(
        "--scores",
        default=None,
        help="rerank scores file 'query-id doc-id score' (e.g. from 'jkofast score --cross-encoder'; default: the "
        "BM25 pool score); adds the 'rerank' row (the pool ranked by them) and the paired differences against it",
    )
    p.add_argument("--quick", action="store_true", help="first 60 queries, fast operating point")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    p.add_argument("--no-sgr", action="store_true", help="skip SparseGeometricRAG")
    p.add_argument(
        "--sparse",
        default="bm25",
        choices=["bm25", "bm25-lucene", "tfidf", "sgr"],
        help="sparse first stage of the hybrid pool (bm25 = okapi \\w+, published)",
    )
    p.add_argument(
        "--methods",
        default=None,
        help="comma-separated subset, e.g. hybrid_rrf,jko_blend (extra: noprox_blend, bw_jko_a50, "
        "{noprox,kl,jko}_blend_dense (0.7, 0.3), {noprox,kl,jko}_rerank (0, 1))",
    )
    p.add_argument(
        "--embed",
        action="store_true",
        help="make the embeddings first when absent, or update them when the corpus changed (jkofast embed; needs "
        "jkofast[encode] and a model)",
    )
    p.add_argument("--model", default=None, help="model folder or zip for --embed (default all-MiniLM-L6-v2)")
    p.add_argument("--embeddings", default=None, help="folder name under FOLDER/embeddings/ (default minilm-l6-v2)")
    p.add_argument("--batch-size", type=int, default=32, help="encoder batch size for --embed (default 32)")
    p.add_argument(
        "--point", default=None, help="point file of 'jkofast tune': adds the 'point' row, its analyser for BM25"
    )
    p.add_argument(
        "--runs",
        default=None,
        help="write every row's ranking as a TREC run DIR/<method>.run, and the hybrid pools as DIR/pools.run",
    )
    p.add_argument("--per-query", default=None, help="write every row's per-query nDCG@10 / Recall@10 (TSV)")
    p.add_argument(
        "--analyser",
        default="auto",
        choices=["auto", "published"],
        help="BM25 analyser: auto = the corpus language's (Snowball stemmer; English keeps the published one)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a judgement on a document absent from the corpus, a query without text or a judged query without "
        "text is an error naming the file and line (default: dropped with one warning per kind giving the count)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def add_parser(sub) -> None:
    """Register ``jkofast run`` and its alias ``jkofast demo`` on the sub-command parser ``sub``."""
    _add(sub, "run", "run the end-to-end job (pools, baselines, JKO-RAG) on SciFact or any BEIR folder")
    _add(sub, "demo", "alias of 'run --dataset scifact'")


def run(args) -> int:
    """Run the main job and print its table (exit status)."""
    from jkofast._io import check_writable, check_writable_dir
    from jkofast._threads import resolve_threads
    from jkofast.commands._common import check_qrels, emit
    from jkofast.jko.solver import operating_point
    from jkofast.studies.main_job import MainJobOptions, run_main_job

    if args.runs is not None:  # outputs are checked writable before the job, not after it
        check_writable_dir(args.runs, "--runs")
    if args.per_query is not None:
        check_writable(args.per_query, "--per-query")
    check_qrels(args.dataset, [("--split", args.split)])
    # --config is checked even with --quick (which runs the "fast" point), before the minutes of work
    operating_point(args.config)
    resolve_threads(args.threads)
    if args.model is not None and not args.embed:
        raise ValueError("--model applies to --embed (pick saved embeddings with --embeddings NAME)")
    if args.methods is not None and not any(m.strip() for m in args.methods.split(",")):
        raise ValueError(f"--methods names no method ({args.methods!r}); omit it to run all")

    # No global warm-up here: the job compiles (or loads from the cache) only the kernels it
    # calls, for the dtypes it uses -- on a fresh machine that is a fraction of warming every
    # kernel of the package for both dtypes.
    options = MainJobOptions(
        split=args.split,
        config="fast" if args.quick else args.config,
        grad=None if args.grad == "config" else args.grad,
        scores_file=args.scores,
        n_queries=60 if args.quick else None,
        n_threads=args.threads,
        include_sgr=not args.no_sgr,
        progress=not (args.quiet or args.json),
        sparse=args.sparse,
        methods=tuple(m.strip() for m in args.methods.split(",")) if args.methods else None,
        embed=args.embed,
        model=args.model,
        embeddings=args.embeddings,
        batch_size=args.batch_size,
        point=args.point,
        runs=args.runs,
        per_query=args.per_query,
        analyser=args.analyser,
        strict=args.strict,
    )
    res = run_main_job(args.dataset, options=options)
    emit(res.summary(), args.json, res.table())
    return 0
