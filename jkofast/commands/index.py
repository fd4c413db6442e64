"""``jkofast index``: build a sparse index over a BEIR corpus and save it to a folder."""

from __future__ import annotations

import time

METHODS = ("bm25", "bm25-lucene", "tfidf", "sgr")


def add_method_args(p) -> None:
    """Arguments shared by ``index`` and ``search``."""
    p.add_argument("--dataset", default="scifact", help='"scifact" (bundled) or a BEIR folder path')
    p.add_argument("--method", default="bm25", choices=METHODS, help="retriever (default bm25 = Okapi, rank_bm25)")
    p.add_argument("--k1", type=float, default=None, help="BM25 k1 (default 1.5)")
    p.add_argument("--b", type=float, default=None, help="BM25 b (default 0.75)")
    p.add_argument(
        "--stopwords",
        choices=("english", "none"),
        default=None,
        help="stop-word list (default: english for bm25-lucene, none otherwise)",
    )
    p.add_argument(
        "--stemmer",
        choices=("porter", "none"),
        default=None,
        help="stem tokens (Porter 1980) after stop-word removal (default none)",
    )
    p.add_argument("--max-features", type=int, default=None, help="keep the most frequent terms only")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default all)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def method_params(args) -> dict:
    """Retriever parameters from the shared options; an option the method does not take is an
    error (``--method sgr --stemmer porter`` used to build an unstemmed index silently)."""
    ignored = []
    if args.method not in ("bm25", "bm25-lucene"):
        ignored += [o for o, v in (("--k1", args.k1), ("--b", args.b)) if v is not None]
    if args.method == "sgr":
        ignored += [
            o
            for o, v in (
                ("--stopwords", args.stopwords),
                ("--stemmer", getattr(args, "stemmer", None)),
                ("--max-features", args.max_features),
            )
            if v is not None
        ]
    if ignored:
        raise ValueError(f"{', '.join(ignored)} do(es) not apply to --method {args.method}")
    params = {}
    if args.method in ("bm25", "bm25-lucene"):
        if args.k1 is not None:
            params["k1"] = args.k1
        if args.b is not None:
            params["b"] = args.b
    if args.method != "sgr":
        if args.stopwords is not None:
            params["stopwords"] = None if args.stopwords == "none" else "english"
        if args.max_features is not None:
            params["max_features"] = args.max_features
        if getattr(args, "stemmer", None) not in (None, "none"):
            params["stemmer"] = args.stemmer
    return params


def build(args):
    """Load the dataset and fit the retriever; returns ``(dataset, retriever, seconds)``."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.sparse.retriever import DOC_SEP, get_retriever

    ds = load_dataset(args.dataset)
    retr = get_retriever(args.method, **method_params(args))
    texts = ds.doc_texts(DOC_SEP[args.method])
    t0 = time.perf_counter()
    if args.method == "sgr":  # the SGR build runs Numba kernels: --threads applies
        retr.fit(texts, ids=ds.doc_ids, n_threads=args.threads)  # saved: search checks them
    else:
        retr.fit(texts)
    return ds, retr, time.perf_counter() - t0


def add_parser(sub) -> None:
    p = sub.add_parser("index", help="build and save a sparse index (BM25 / TF-IDF / SGR)")
    add_method_args(p)
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=run)


def run(args) -> int:
    import os

    from jkofast._threads import resolve_threads
    from jkofast.commands._common import emit
    from jkofast.sparse.index import prepare

    # fail before the build: --threads 0 was accepted silently, an --out that is a file failed
    # with a FileExistsError traceback after the whole build
    resolve_threads(args.threads)
    method_params(args)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out {args.out!r} exists and is not a folder")
    prepare()  # the sparse kernels only
    ds, retr, secs = build(args)
    retr.save(args.out)
    info = {"dataset": ds.name, "method": args.method, "n_docs": ds.n_docs, "build_seconds": secs, "out": args.out}
    emit(info, args.json, f"indexed {ds.n_docs} docs of {ds.name} with {args.method} in {secs:.2f}s -> {args.out}")
    return 0
