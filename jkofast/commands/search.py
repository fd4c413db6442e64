"""``jkofast search``: retrieve the top-k documents for a split's queries; write a TREC run."""

from __future__ import annotations

import os
import time

import numpy as np


def write_trec_run(path: str, qids, doc_ids, indices, scores, tag: str) -> int:
    """Write ``qid Q0 docid rank score tag`` lines (rank from 1, padding skipped); returns lines."""
    n = 0
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for qi, qid in enumerate(qids):
            for r in range(indices.shape[1]):
                i = int(indices[qi, r])
                if i < 0:
                    break
                fh.write(f"{qid} Q0 {doc_ids[i]} {r + 1} {float(scores[qi, r]):.6f} {tag}\n")
                n += 1
    return n


def add_parser(sub) -> None:
    from jkofast.commands.index import add_method_args

    p = sub.add_parser("search", help="first-stage retrieval for a split; writes a TREC run")
    add_method_args(p)
    p.add_argument("--split", default="test", help='qrels split whose queries to run, or "all" (default test)')
    p.add_argument("--k", type=int, default=100, help="results per query (default 100)")
    p.add_argument("--index", default=None, help="load a saved index (from `jkofast index`) instead of building")
    p.add_argument("--out", required=True, help="TREC run file to write")
    p.add_argument("--tag", default=None, help="run tag (default jkofast-<method>)")
    p.set_defaults(func=run)


def run(args) -> int:
    from jkofast.commands._common import emit
    from jkofast.commands.index import build
    from jkofast.datasets.beir import load_dataset
    from jkofast.sparse.index import prepare

    if args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    if args.tag is not None and (not args.tag or any(c.isspace() for c in args.tag)):
        raise ValueError(
            f"--tag must be non-empty without whitespace (the TREC line would not read back), got {args.tag!r}"
        )
    if os.path.isdir(args.out):  # failed with IsADirectoryError after the whole search
        raise ValueError(f"--out {args.out!r} is a folder; give a file path")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)  # an unwritable folder fails now
    from jkofast._threads import resolve_threads
    from jkofast.commands.index import method_params

    resolve_threads(args.threads)
    method_params(args)
    prepare()  # the sparse kernels only
    if args.index:
        ds = load_dataset(args.dataset)
        t0 = time.perf_counter()
        if args.method == "sgr":
            from jkofast.sgr.retriever import SparseGeometricRetriever

            retr = SparseGeometricRetriever.load(args.index)
        else:
            from jkofast.sparse.retriever import SparseRetriever

            retr = SparseRetriever.load(args.index)
            if retr.method != args.method:
                raise ValueError(f"--index holds a {retr.method} index, not {args.method}")
        build_s = time.perf_counter() - t0
        # (an SGR index had no n_docs, so one built on another corpus wrote wrong doc ids silently)
        if retr.n_docs != ds.n_docs:
            raise ValueError(f"--index has {retr.n_docs} docs but dataset {ds.name} has {ds.n_docs}")
        saved_ids = getattr(retr, "ids_", None)
        if saved_ids is not None and list(saved_ids) != list(ds.doc_ids):
            raise ValueError(f"--index was built with other document ids than dataset {ds.name}'s")
    else:
        ds, retr, build_s = build(args)
    qids = list(ds.query_ids) if args.split == "all" else ds.split_query_ids(args.split)
    qmap = ds.queries
    t0 = time.perf_counter()
    # ranks past the corpus are padding that is never written: k = 10**12 asked for 7 TiB
    idx, sc = retr.search([qmap[q] for q in qids], min(args.k, ds.n_docs), n_threads=args.threads)
    search_s = time.perf_counter() - t0
    tag = args.tag or f"jkofast-{args.method}"
    n = write_trec_run(args.out, qids, ds.doc_ids, idx, np.asarray(sc), tag)
    info = {
        "dataset": ds.name,
        "method": args.method,
        "split": args.split,
        "n_queries": len(qids),
        "k": args.k,
        "build_seconds": build_s,
        "search_seconds": search_s,
        "qps": len(qids) / max(search_s, 1e-9),
        "lines": n,
        "out": args.out,
    }
    emit(
        info,
        args.json,
        f"{len(qids)} queries x k={args.k} with {args.method} in {search_s:.3f}s "
        f"({info['qps']:,.0f} q/s; build {build_s:.2f}s) -> {args.out} ({n} lines)",
    )
    return 0
