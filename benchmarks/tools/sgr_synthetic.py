"""SparseGeometricRAG vs bm25s on the synthetic corpus of the asv suites (Zipf vocabulary of
60k words, 40-80 tokens per document, 4-11-word Zipf queries; ``benchmarks/bench_sgr.py``).

Usage:
    python benchmarks/tools/sgr_synthetic.py [--docs 200000] [--queries 200] [--repeats 3] [--json F]
                                    [--before REV] [--no-postings] [--save DIR]

One process: the SGR index is built once (2 threads, timed; index bytes per document), bm25s
(numba backend) likewise; then text in -> top-10 out for the same queries, tokenisation
included for both, at 1 and 2 threads, SGR with the tail gate off (the default, the frozen
method) and on (the optional gate of the post-benchmark variant), all contenders
interleaved, best of ``--repeats``.  Also reports the median number of routed documents
per query and the median Σ df of the query terms (the postings bm25s adds).  ``--before
REV`` also times that revision's SGR (its whole package exported and renamed, as
``sgr_eval.py --before`` does, so older layouts work too) in the same interleaved loop, and
checks that both return the same ids and scores.  ``--no-postings`` builds the compact index
(``postings=False``: no inverted lexical postings, the rescue scans the support; same scores);
the index bytes per document are printed per structure (``index_nbytes(breakdown=True)``).
``--save DIR`` also saves the index (format 3) and times ``load(DIR, mmap=True)`` and the
first search after it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

from benchmarks.bench_sgr import synthetic_texts  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--before", default=None)
    ap.add_argument("--no-postings", action="store_true")
    ap.add_argument("--save", default=None)
    args = ap.parse_args(argv)

    import bm25s

    from jkofast._threads import numba_threads
    from jkofast.sgr.retriever import SparseGeometricRetriever

    docs, queries = synthetic_texts(args.docs, args.queries)
    out: dict = {"docs": args.docs, "queries": args.queries}
    kw = {"postings": False} if args.no_postings else {}
    SparseGeometricRetriever(**kw).fit(docs[:50], n_threads=2).search(queries[:4])  # compile
    t0 = time.perf_counter()
    r = SparseGeometricRetriever(**kw).fit(docs, n_threads=2)
    out["sgr_build_2t_s"] = time.perf_counter() - t0
    out["postings"] = not args.no_postings
    out["sgr_index_bytes_per_doc"] = r.index_nbytes() / r.n_docs_
    out["sgr_index_bytes_per_doc_breakdown"] = {k: v / r.n_docs_ for k, v in r.index_nbytes(breakdown=True).items()}
    print("bytes per document by structure:", json.dumps(out["sgr_index_bytes_per_doc_breakdown"]), flush=True)
    if args.save:
        r.save(args.save)
        want = r.search(queries, k=10, n_threads=1)
        t0 = time.perf_counter()
        r = SparseGeometricRetriever.load(args.save, mmap=True)
        out["sgr_load_mmap_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = r.search(queries[:1], k=10, n_threads=1)
        out["sgr_first_query_after_load_s"] = time.perf_counter() - t0
        got = r.search(queries, k=10, n_threads=1)
        out["sgr_mmap_identical"] = bool(np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1]))
        print(
            f"load(mmap=True) {out['sgr_load_mmap_s']:.2f} s, first query {out['sgr_first_query_after_load_s']:.2f} s, "
            f"identical to in-memory = {out['sgr_mmap_identical']}",
            flush=True,
        )
    out["sgr_index_bytes_per_doc_all_arrays"] = r.index_nbytes(False) / r.n_docs_
    out["n_terms"] = r.n_terms_
    print(
        f"SGR build (2 threads) {out['sgr_build_2t_s']:.1f} s, "
        f"{out['sgr_index_bytes_per_doc']:,.0f} B/doc (query path)",
        flush=True,
    )
    t0 = time.perf_counter()
    ret = bm25s.BM25(backend="numba")
    ret.index(bm25s.tokenize(docs, stopwords=None, show_progress=False), show_progress=False)
    out["bm25s_build_s"] = time.perf_counter() - t0
    ret.retrieve(bm25s.tokenize(queries[:4], stopwords=None, show_progress=False), k=10, show_progress=False)
    pool = r.pool(queries, P=10)
    out["median_routed_docs"] = float(np.median(pool.n_routed_docs))
    qi, qt, _ = r.transform_queries(queries)
    df = np.diff(r._ix["t_indptr"])  # (kept without postings: the document frequencies)
    out["median_sum_df"] = float(np.median([df[qt[qi[i] : qi[i + 1]]].sum() for i in range(len(queries))]))

    rold = None
    if args.before:
        from sgr_eval import _load_revision

        rold = _load_revision(args.before)().fit(docs, n_threads=2)
        a, b = r.search(queries, k=10), rold.search(queries, k=10)
        out["before_rev"] = args.before
        out["before_identical"] = bool(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))
        print(f"{args.before} vs working tree: ids and scores identical = {out['before_identical']}", flush=True)

    def sgr(gate, nt):
        r.set_params(tail_gate=gate)
        r.search(queries, k=10, n_threads=nt)

    def bm(nt):
        with numba_threads(nt):
            tok = bm25s.tokenize(queries, stopwords=None, show_progress=False)
            ret.retrieve(tok, k=10, n_threads=nt, show_progress=False)

    for nt in (1, 2):
        fns = {
            "sgr": lambda nt=nt: sgr(False, nt),
            "sgr_tail_gate": lambda nt=nt: sgr(True, nt),
            "bm25s": lambda nt=nt: bm(nt),
        }
        if rold is not None:
            # (no set_params: an older revision rebuilt its semantic lists on every call)
            fns["sgr_before"] = lambda nt=nt: rold.search(queries, k=10, n_threads=nt)
        for fn in fns.values():
            fn()
        ts: dict = {k: [] for k in fns}
        for _ in range(args.repeats):
            for k, fn in fns.items():
                t = time.perf_counter()
                fn()
                ts[k].append(time.perf_counter() - t)
        for k in fns:
            out[f"{k}_{nt}t_ms_per_query"] = 1e3 * min(ts[k]) / len(queries)
        print(
            f"{nt} thread(s), ms/query: "
            + " | ".join(f"{k} {out[f'{k}_{nt}t_ms_per_query']:.3f}" for k in fns)
            + f" | SGR / bm25s {out[f'sgr_{nt}t_ms_per_query'] / out[f'bm25s_{nt}t_ms_per_query']:.2f}",
            flush=True,
        )
    r.set_params(tail_gate=False)
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
