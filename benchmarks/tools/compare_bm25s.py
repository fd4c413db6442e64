"""Side-by-side: jkofast BM25 (lucene) vs bm25s (numba backend), same process, 1 thread.

Measures, on SciFact (bundled) and on a seeded synthetic Zipf corpus of integer token ids:

* build time (text -> index: analyser + index; and token ids -> index),
* top-10 / top-1000 queries per second with pre-tokenised queries (bm25s: lists of token
  ids, ``backend_selection="numba"``; jkofast: query CSR, ``BM25Index.search_csr``), plus
  jkofast's end-to-end QPS from query text.

Usage::

    python benchmarks/tools/compare_bm25s.py                   # SciFact + 200k-doc synthetic
    python benchmarks/tools/compare_bm25s.py --n-docs 50000    # smaller synthetic corpus
    python benchmarks/tools/compare_bm25s.py --json out.json

Times are the best of ``--repeat`` runs after one warm-up call (compilation excluded); the
two libraries are timed alternately, so load on a shared machine affects both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.common import zipf_corpus


def best_time(fn, repeat):
    fn()  # warm-up (Numba compilation / caches)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def best_pair(fa, fb, repeat):
    """Best times of ``fa`` and ``fb`` measured alternately (a shared machine's load then
    hits both alike)."""
    fa()
    fb()
    ta = tb = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fa()
        ta = min(ta, time.perf_counter() - t0)
        t0 = time.perf_counter()
        fb()
        tb = min(tb, time.perf_counter() - t0)
    return ta, tb


def run_pair(label, ours_build, bm_build, ours_search, bm_search, ours_text_search, n_q, repeat, results):
    row = {"corpus": label}
    row["build_s_jkofast"], row["build_s_bm25s"] = best_pair(ours_build, bm_build, max(1, repeat // 2))
    for k in (10, 1000):
        t_o, t_b = best_pair(lambda k=k: ours_search(k), lambda k=k: bm_search(k), repeat)
        row[f"qps@{k}_jkofast"] = n_q / t_o
        row[f"qps@{k}_bm25s"] = n_q / t_b
        row[f"speedup@{k}"] = t_b / t_o
        if ours_text_search is not None:
            row[f"qps@{k}_jkofast_text"] = n_q / best_time(lambda k=k: ours_text_search(k), repeat)
    results.append(row)
    print(json.dumps(row, indent=1), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-docs", type=int, default=200_000)
    ap.add_argument("--n-terms", type=int, default=100_000)
    ap.add_argument("--mean-len", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import bm25s

    import jkofast
    from jkofast._threads import numba_threads
    from jkofast.datasets.beir import load_dataset
    from jkofast.sparse.index import BM25Index, prepare

    prepare()
    results = []
    with numba_threads(1):
        # ---------------- SciFact ----------------
        ds = load_dataset("scifact")
        docs = ds.doc_texts(" ")
        queries = list(ds.query_texts)  # all 1109 queries
        ours = BM25Index("lucene").fit(docs)
        q_csr = ours.query_csr(queries)
        bm = bm25s.BM25(backend="numba")
        bm.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
        q_tok = bm25s.tokenize(queries, stopwords="en", show_progress=False, return_ids=False)
        # pre-tokenised ids in bm25s's vocabulary; queries with no known token get the first id
        q_ids = [[bm.vocab_dict[t] for t in q if t in bm.vocab_dict] or [0] for q in q_tok]

        def bm_build():
            r = bm25s.BM25(backend="numba")
            r.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)

        run_pair(
            "scifact (5183 docs, 1109 queries)",
            lambda: BM25Index("lucene").fit(docs),
            bm_build,
            lambda k: ours.search_csr(*q_csr, k=k, n_threads=1),
            lambda k: bm.retrieve(q_ids, k=k, show_progress=False, n_threads=1, backend_selection="numba"),
            lambda k: ours.search(queries, k=k, n_threads=1),
            len(queries),
            args.repeat,
            results,
        )
        # ---------------- synthetic Zipf ----------------
        if not args.skip_synthetic:
            t0 = time.perf_counter()
            flat, offsets, zq = zipf_corpus(args.n_docs, args.n_terms, args.mean_len)
            print(
                f"synthetic corpus generated in {time.perf_counter() - t0:.1f}s "
                f"({args.n_docs} docs, {flat.size} tokens)",
                flush=True,
            )
            doc_lists = [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(args.n_docs)]
            vocab = {str(i): i for i in range(args.n_terms)}
            ours_z = BM25Index("lucene").fit_token_ids((flat, offsets), args.n_terms)
            zq_flat = np.concatenate(zq)
            zq_off = np.r_[0, np.cumsum([q.size for q in zq])].astype(np.int64)
            zq_csr = ours_z._token_query_csr((zq_flat, zq_off))

            def bm_build_z():
                r = bm25s.BM25(backend="numba")
                r.index(bm25s.tokenization.Tokenized(ids=doc_lists, vocab=vocab), show_progress=False)
                return r

            bm_z = bm_build_z()
            present = bm_z.unique_token_ids_set
            zq_lists = [[t for t in q.tolist() if t in present] or [next(iter(present))] for q in zq]
            run_pair(
                f"synthetic Zipf ({args.n_docs} docs, {len(zq)} queries)",
                lambda: BM25Index("lucene").fit_token_ids((flat, offsets), args.n_terms),
                bm_build_z,
                lambda k: ours_z.search_csr(*zq_csr, k=k, n_threads=1),
                lambda k: bm_z.retrieve(zq_lists, k=k, show_progress=False, n_threads=1, backend_selection="numba"),
                None,
                len(zq),
                args.repeat,
                results,
            )
    meta = {
        "jkofast": jkofast.__version__,
        "bm25s": bm25s.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "threads": 1,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "results": results}, fh, indent=2)
    return results


if __name__ == "__main__":
    main()
