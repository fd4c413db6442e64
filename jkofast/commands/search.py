"""``jkofast search``: retrieve the top-k documents for a split's queries (or a file of queries); write a TREC run."""

from __future__ import annotations

import os
import sys
import time

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Register ``jkofast search``."""
    from jkofast.commands._common import add_method_args

    p = sub.add_parser("search", help="first-stage retrieval for a split; writes a TREC run")
    add_method_args(p)
    p.add_argument(
        "--split", default=None, help='qrels split whose queries to run, or "all" (default test; not with --queries)'
    )
    p.add_argument(
        "--queries",
        default=None,
        metavar="FILE",
        help='ad-hoc queries instead of a split: JSONL {"_id": ..., "text": ...} per line, or TSV id<TAB>text',
    )
    p.add_argument("--k", type=int, default=100, help="results per query (default 100)")
    p.add_argument("--index", default=None, help="load a saved index (from `jkofast index`) instead of building")
    p.add_argument("--out", required=True, help="TREC run file to write")
    p.add_argument("--tag", default=None, help="run tag (default jkofast-<method>)")
    from jkofast.distributed.cluster import add_dask_args

    add_dask_args(p)  # --dask SCHEDULER (needs --index: loaded once per worker), --dask-timeout
    p.add_argument("--chunk-size", type=int, default=1000, help="queries per Dask task (1000; with --dask)")
    p.set_defaults(func=run)


def _load_index(args):
    """``(dataset, retriever, seconds)`` of a saved index, checked against the dataset."""
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset(args.dataset, strict=getattr(args, "strict", False))
    t0 = time.perf_counter()
    from jkofast.pools.retrievers import load_retriever

    retr = load_retriever(args.method, args.index, name="--index")  # memory-mapped: opens in seconds
    build_s = time.perf_counter() - t0
    _check_index(ds, retr.n_docs, getattr(retr, "ids_", None))
    return ds, retr, build_s


def _check_index(ds, n_docs, saved_ids) -> None:
    # (an SGR index had no n_docs, so one built on another corpus wrote wrong doc ids silently)
    if n_docs != ds.n_docs:
        raise ValueError(f"--index has {n_docs} docs but dataset {ds.name} has {ds.n_docs}")
    if saved_ids is not None and list(saved_ids) != list(ds.doc_ids):
        raise ValueError(f"--index was built with other document ids than dataset {ds.name}'s")


def _queries(args, ds) -> tuple[list, list]:
    """``(query ids, texts)``: those of ``--queries`` (read by ``run``), else of the split (``all``: every query)."""
    if args.query_file is not None:
        return args.query_file
    split = args.split or "test"
    qmap = ds.queries
    qids = list(ds.query_ids) if split == "all" else ds.split_query_ids(split)
    return qids, [qmap[q] for q in qids]


def _search_on_dask(args):
    """Search the split on Dask, the saved index loaded once per worker.

    Returns ``(dataset, query ids, indices, scores, workers, index check seconds, search seconds)``.
    """
    from jkofast.datasets.beir import load_dataset
    from jkofast.distributed.cluster import dask_client
    from jkofast.distributed.search import index_info, search_on_dask

    if args.index is None:
        raise ValueError("--dask needs --index (a saved index from `jkofast index`, loaded once per worker)")
    if not os.path.isdir(args.index):
        raise ValueError(f"--index {args.index!r} is not a folder")
    if args.chunk_size < 1:
        raise ValueError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    ds = load_dataset(args.dataset, strict=getattr(args, "strict", False))
    with dask_client(args.dask, timeout=args.dask_timeout, warm=False) as client:
        t0 = time.perf_counter()
        info = client.submit(index_info, os.path.abspath(args.index), args.method, "--index", pure=False).result()
        _check_index(ds, info["n_docs"], info["ids"])
        build_s = time.perf_counter() - t0
        qids, texts = _queries(args, ds)
        t0 = time.perf_counter()
        idx, sc, report, workers = search_on_dask(
            client,
            args.index,
            args.method,
            texts,
            min(args.k, ds.n_docs),
            threads=args.threads or 1,
            chunk_size=args.chunk_size,
            return_report=True,
        )
        return ds, qids, idx, sc, report, workers, build_s, time.perf_counter() - t0


def _warm_queries(method: str, texts: list) -> list:
    """Return the queries that compile (or load) the kernels the whole batch ``texts`` runs.

    One query, except for SGR, whose batches of fewer than ``SERIAL_BELOW`` queries run a
    serial twin of its parallel batch kernel, and of fewer than ``PARALLEL_ANALYSIS`` a serial
    twin of its parallel analysis kernel: one query would compile the twins, which a larger
    batch never calls, and then the batch kernels as well.
    """
    if method != "sgr":
        return texts[:1]
    from jkofast.sgr.retriever import PARALLEL_ANALYSIS, SERIAL_BELOW

    for n in (PARALLEL_ANALYSIS, SERIAL_BELOW):
        if len(texts) >= n:
            return texts[:n]
    return texts[:1]


def _search_ahead():
    """Start a child compiling the SGR search kernels when the cache lacks them (or return None).

    The index build compiles and runs the fit's kernels in this process meanwhile (``jkofast._ahead``).
    """
    from jkofast._ahead import compile_ahead
    from jkofast.kernels.sgr import query as _sgr_query

    return compile_ahead(("sgr.search",), (_sgr_query.sgr_query_batch,))


def run(args) -> int:
    """Build or load the index, search the split's queries, write the run."""
    from jkofast._threads import resolve_threads
    from jkofast.commands._common import build_retriever, emit, method_params
    from jkofast.eval.runio import atomic_open, format_run, topk_to_ragged

    if args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    if args.tag is not None and (not args.tag or any(c.isspace() for c in args.tag)):
        raise ValueError(
            f"--tag must be non-empty without whitespace (the TREC line would not read back), got {args.tag!r}"
        )
    from jkofast._io import check_writable, check_writable_dir

    args.query_file = None
    if args.queries is not None:
        if args.split is not None:
            raise ValueError("--queries and --split both name the queries to run; give one")
        if not os.path.isfile(args.queries):
            raise ValueError(f"--queries {args.queries!r} is not a file")
        from jkofast.datasets.beir import read_query_file

        args.query_file = read_query_file(args.queries)  # a bad file fails before the index is built
    if os.path.isdir(args.out):
        raise ValueError(f"--out {args.out!r} is a folder; give a file path")
    check_writable_dir(os.path.dirname(os.path.abspath(args.out)), "--out")  # before the search, not after it
    check_writable(args.out, "--out")
    resolve_threads(args.threads)
    method_params(args)
    workers = None
    if args.dask:
        ds, qids, idx, sc, report, workers, build_s, search_s = _search_on_dask(args)
    else:
        from jkofast._ahead import compile_notice
        from jkofast.warmups import compile_cost

        say = lambda msg: print(f"jkofast search: {msg}", file=sys.stderr, flush=True)  # noqa: E731
        entries = ("sgr",) if args.method == "sgr" else ("text", "index", "topk")
        # cold cache, >= 2 cores, an SGR index to build: a child compiles the search kernels meanwhile
        ahead = _search_ahead() if args.method == "sgr" and not args.index else None
        about = sum(compile_cost(e) for e in entries) - (compile_cost("sgr.search") if ahead is not None else 0)
        try:
            with compile_notice(say, about, enabled=not args.json):
                ds, retr, build_s = _load_index(args) if args.index else build_retriever(args)
                qids, texts = _queries(args, ds)
                if ahead is not None and not ahead.wait_for("sgr.search"):
                    say(f"the compile-ahead process failed ({ahead.error() or 'no message'}); compiling here instead")
                if qids:  # compile (or load) the query kernels, so that the timing below excludes it
                    retr.search(_warm_queries(args.method, texts), min(args.k, ds.n_docs), n_threads=args.threads)
        finally:
            if ahead is not None:
                ahead.close()
        t0 = time.perf_counter()
        # ranks past the corpus are padding that is never written: k = 10**12 asked for 7 TiB
        idx, sc, report = retr.search(texts, min(args.k, ds.n_docs), n_threads=args.threads, return_report=True)
        search_s = time.perf_counter() - t0
    tag = args.tag or f"jkofast-{args.method}"
    off, docs, scores = topk_to_ragged(idx, sc, ds.doc_ids)  # each row up to its first padding entry
    with atomic_open(args.out, fsync=False) as fh:
        fh.write(format_run(qids, off, docs, scores, tag, score_dtype=getattr(sc, "dtype", None)).encode("utf-8"))
    n = len(docs)
    info = {
        "dataset": ds.name,
        "method": args.method,
        "split": None if args.queries else args.split or "test",
        "queries": args.queries,
        "n_queries": len(qids),
        "k": args.k,
        "build_seconds": build_s,
        "search_seconds": search_s,
        "qps": len(qids) / max(search_s, 1e-9),
        "lines": n,
        "out": args.out,
    }
    if workers is not None:
        info["workers"] = workers
    info["unanswered"] = report.to_dict(qids)
    note = report.summary(qids)
    compiled = "compilation on the workers included" if workers is not None else "compilation excluded"
    emit(
        info,
        args.json,
        f"{len(qids)} queries x k={args.k} with {args.method} in {search_s:.3f}s "
        f"({info['qps']:,.0f} q/s, {compiled}"
        f"; build {build_s:.2f}s) -> {args.out} ({n} lines)" + (f"\nnote: {note}" if note else ""),
    )
    return 0
