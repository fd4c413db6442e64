"""Cost of the open-time integrity checks of an SGR index (docs/integrity.md, issue #26).

Usage:
    python benchmarks/tools/index_check_cost.py --passages 1000000 [--postings-per-passage 40]
    python benchmarks/tools/index_check_cost.py --index DIR

``--passages N``: ``jkofast.sgr._persist.check_ranges`` (every id, pointer and sentinel the query
kernels index with) on arrays with the shapes and dtypes of an N-passage index (V = 50,000 terms,
4 memberships and ``--postings-per-passage`` support entries per passage, codes of 16 slots),
with and without postings; CPU time (``time.process_time``: the numbers hold on a shared
machine), min of 3.  ``--index DIR``: the CPU time of ``SparseGeometricRetriever.load(DIR,
mmap=True)`` with the checks and with them disabled (range checks and per-open checksums), of
``verify=True`` and of ``check_index``, min of 5 (2 for the last two).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def _best(f, n: int) -> float:
    b = float("inf")
    for _ in range(n):
        t0 = time.process_time()
        f()
        b = min(b, time.process_time() - t0)
    return b


def synthetic(N: int, per: int) -> None:
    from jkofast.sgr import _persist as persist
    from jkofast.sgr.config import SGRConfig

    V, F, S = 50_000, 4, 16
    M, nnz = N * F, N * per
    ct = (np.arange(M * S, dtype=np.int64) % V).astype(np.uint16).reshape(M, S)
    ct[::5, 12:] = 65_535
    ix = {
        "idf": np.ones(V),
        "dl": np.random.default_rng(0).integers(1, 200, N).astype(np.uint16),
        "s_indptr": np.arange(N + 1, dtype=np.uint32) * per,
        "s_idx": (np.arange(nnz, dtype=np.int64) % V).astype(np.uint16),
        "mem_doc": np.repeat(np.arange(N, dtype=np.int32), F),
        "code_term": ct,
    }
    # the compressed postings (format 3) of that support
    import scipy.sparse as sp

    from jkofast.sgr.layout import compress_postings

    csc = sp.csr_matrix((np.ones(nnz, np.float32), ix["s_idx"], ix["s_indptr"].astype(np.int64)), (N, V)).tocsc()
    csc.sort_indices()
    ix["t_indptr"] = csc.indptr.astype(np.int64)
    ix.update(compress_postings(ix["t_indptr"], csc.indices, csc.data))
    del csc
    for post in (False, True):
        cfg = SGRConfig(postings=post)
        t = _best(lambda cfg=cfg: persist.check_ranges(ix, cfg, "x"), 3)
        print(f"N={N:,} postings={post}: check_ranges {t:.3f} s CPU = {t / N * 1e6:.3f} us/passage", flush=True)


def saved(path: str) -> None:
    from jkofast.sgr import _persist as persist
    from jkofast.sgr.retriever import SparseGeometricRetriever as R

    R.load(path, mmap=True)  # page cache and kernels warm
    with_checks = _best(lambda: R.load(path, mmap=True), 5)
    r = R.load(path, mmap=True)
    ranges = _best(lambda: persist.check_ranges(r._ix, r.config, path), 5)
    keep = persist.check_ranges, persist.OPEN_CHECKSUM_BYTES
    persist.check_ranges, persist.OPEN_CHECKSUM_BYTES = (lambda *a, **k: None), -1
    try:
        without = _best(lambda: R.load(path, mmap=True), 5)
    finally:
        persist.check_ranges, persist.OPEN_CHECKSUM_BYTES = keep
    verify = _best(lambda: R.load(path, mmap=True, verify=True), 2)
    check = _best(lambda: persist.check_index(path), 2)
    N = r.n_docs_
    print(
        f"N={N:,}: load(mmap=True) {with_checks:.3f} s CPU with the checks, {without:.3f} s without "
        f"(+{with_checks - without:.3f} s = {(with_checks - without) / N * 1e6:.2f} us/passage; check_ranges "
        f"{ranges:.3f} s = {ranges / N * 1e6:.2f} us/passage); verify=True {verify:.3f} s; check_index {check:.3f} s"
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=None)
    ap.add_argument("--postings-per-passage", type=int, default=40)
    ap.add_argument("--index", default=None)
    args = ap.parse_args(argv)
    if args.index:
        saved(args.index)
    if args.passages:
        synthetic(args.passages, args.postings_per_passage)


if __name__ == "__main__":
    main()
