"""Index-build kernels: token counting, CSR transpose, TF-IDF and BM25 weights.

Layouts: CSR as ``(indptr int64, indices int64, data)`` with indices sorted and unique
within rows (canonical; the wrappers guarantee it).  ``prange`` over documents; each
iteration writes only its own row segment.  Row sums (L2 norms) are serial, so results do
not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel
from jkofast.kernels.sorting import sort_range

__all__ = ["bm25_weights_rows", "compact_counts", "csr_transpose", "sort_count_rows", "tfidf_weights_rows"]


@kernel(parallel=True)
def sort_count_rows(offsets, tokens, sorted_out, row_nnz):
    """Sort each ragged row of token ids and count its distinct ids.

    Row i is ``tokens[offsets[i]:offsets[i+1]]`` (int64); it is written sorted to the same slice
    of ``sorted_out`` and its number of distinct ids to ``row_nnz[i]``.  prange over rows.
    """
    n = offsets.shape[0] - 1
    for i in prange(n):
        a = offsets[i]
        e = offsets[i + 1]
        if e == a:
            row_nnz[i] = 0
            continue
        seg = tokens[a:e].copy()
        sort_range(seg, np.int64(0), np.int64(seg.shape[0]))
        u = 1
        sorted_out[a] = seg[0]
        for j in range(1, e - a):
            sorted_out[a + j] = seg[j]
            if seg[j] != seg[j - 1]:
                u += 1
        row_nnz[i] = u


@kernel(parallel=True)
def compact_counts(offsets, sorted_tok, indptr, indices, counts):
    """Run-length encode each sorted row into canonical CSR ``(indices, counts)`` rows.

    ``indptr`` = cumsum of ``sort_count_rows``' ``row_nnz``; ``indices`` int64 and ``counts``
    (float) are written in place, row i by iteration i.
    """
    n = offsets.shape[0] - 1
    for i in prange(n):
        a = offsets[i]
        e = offsets[i + 1]
        p = indptr[i] - 1
        prev = -1
        for j in range(a, e):
            t = sorted_tok[j]
            if t != prev:
                p += 1
                indices[p] = t
                counts[p] = 0.0
                prev = t
            counts[p] += 1.0


@kernel()
def csr_transpose(indptr, indices, data, n_cols, out_ptr, out_idx, out_data):
    """Counting-sort transpose: CSR (rows x n_cols) -> CSR of the transpose.

    ``out_ptr`` int64 (n_cols + 1), ``out_idx`` int64 (nnz), ``out_data`` (nnz).  Stable: row
    ids come out ascending within each column, so the result is canonical.  Serial
    (O(nnz + n_cols), memory-bound).
    """
    n_rows = indptr.shape[0] - 1
    nnz = indices.shape[0]
    for c in range(n_cols + 1):
        out_ptr[c] = 0
    for j in range(nnz):
        out_ptr[indices[j] + 1] += 1
    for c in range(n_cols):
        out_ptr[c + 1] += out_ptr[c]
    fill = out_ptr[:n_cols].copy()
    for r in range(n_rows):
        for j in range(indptr[r], indptr[r + 1]):
            c = indices[j]
            q = fill[c]
            out_idx[q] = r
            out_data[q] = data[j]
            fill[c] = q + 1


@kernel(parallel=True, fastmath=set(FASTMATH_ARITH))
def bm25_weights_rows(indptr, indices, tf, doc_len, idf, k1, b, avgdl, okapi, out):
    """Per-(doc, term) BM25 weights over CSR rows, in float64 then stored in ``out``.

    ``okapi=True`` (rank_bm25 ``BM25Okapi``): ``idf * tf (k1 + 1) / (tf + k1 (1 - b + b dl/avgdl))``;
    ``okapi=False`` (bm25s lucene / Robertson tfc): ``idf * tf / (tf + k1 (1 - b + b dl/avgdl))``.
    ``idf`` float64 (n_terms,), ``doc_len`` (n_docs,), ``avgdl > 0``.
    """
    n = indptr.shape[0] - 1
    num = k1 + 1.0 if okapi else 1.0
    for i in prange(n):
        norm = k1 * (1.0 - b + b * doc_len[i] / avgdl)
        for j in range(indptr[i], indptr[i + 1]):
            f = tf[j]
            out[j] = idf[indices[j]] * (f * num / (f + norm))


@kernel(parallel=True, fastmath=set(FASTMATH_ARITH))
def tfidf_weights_rows(indptr, indices, tf, idf, out):
    """Raw tf x idf per CSR row, then L2-normalised per row, written to ``out`` (nnz,).

    float64 math; empty or zero rows stay 0, as scikit-learn's ``TfidfTransformer(norm="l2")``.
    prange over rows; the row sum is serial.
    """
    n = indptr.shape[0] - 1
    for i in prange(n):
        s = 0.0
        for j in range(indptr[i], indptr[i + 1]):
            v = tf[j] * idf[indices[j]]
            s += v * v
        inv = 1.0 / np.sqrt(s) if s > 0.0 else 0.0
        for j in range(indptr[i], indptr[i + 1]):
            out[j] = tf[j] * idf[indices[j]] * inv
