"""``jkofast index``: build a sparse index over a BEIR corpus and save it to a folder."""

from __future__ import annotations

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Register ``jkofast index``."""
    from jkofast.commands._common import add_method_args

    p = sub.add_parser("index", help="build and save a sparse index (BM25 / TF-IDF / SGR)")
    add_method_args(p)
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=run)


def run(args) -> int:
    """Build the index and save it."""
    import os

    from jkofast._threads import resolve_threads
    from jkofast.commands._common import build_retriever, emit, method_params
    from jkofast.sparse.index import prepare

    # fail before the build: --threads 0 was accepted silently, an --out that is a file failed
    # with a FileExistsError traceback after the whole build
    resolve_threads(args.threads)
    method_params(args)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out {args.out!r} exists and is not a folder")
    prepare()  # the sparse kernels only
    ds, retr, secs = build_retriever(args)
    retr.save(args.out)
    info = {"dataset": ds.name, "method": args.method, "n_docs": ds.n_docs, "build_seconds": secs, "out": args.out}
    emit(info, args.json, f"indexed {ds.n_docs} docs of {ds.name} with {args.method} in {secs:.2f}s -> {args.out}")
    return 0
