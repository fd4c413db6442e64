"""Sparse-sparse cosine similarities between CSR rows (merge joins).

CSR ``(indptr int64, indices int64, data float32/float64)``, canonical: indices sorted and
unique within each row (we assume sorted; the wrappers enforce it).  Dot products and norms
are accumulated in float64, serially within a pair, so results do not depend on the thread
count.  ``cos(i, j) = <x_i, x_j> / (|x_i| |x_j|)``, 0 when either row is all-zero, clipped
to [-1, 1].

Used by the reranker to build ground costs ``C = (1 - cos)^2`` and kernels
``K = max(0, cos)`` over candidate pools from TF-IDF rows.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel

__all__ = ["cosine_cross", "cosine_pools", "cosine_rows", "row_dot", "row_norm"]


@kernel(inline="always")
def row_dot(indptr, indices, data, i, j):
    """float64 dot product of CSR rows ``i`` and ``j`` (merge join)."""
    a = indptr[i]
    ae = indptr[i + 1]
    b = indptr[j]
    be = indptr[j + 1]
    s = 0.0
    while a < ae and b < be:
        ia = indices[a]
        ib = indices[b]
        if ia == ib:
            s += np.float64(data[a]) * np.float64(data[b])
            a += 1
            b += 1
        elif ia < ib:
            a += 1
        else:
            b += 1
    return s


@kernel(inline="always")
def row_norm(indptr, data, i):
    """float64 L2 norm of CSR row ``i``."""
    s = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        v = np.float64(data[p])
        s += v * v
    return np.sqrt(s)


@kernel(inline="always")
def _cos(dot, ni, nj):
    """Cosine from a dot product and two norms: 0 when a norm is 0, clipped to [-1, 1]."""
    if ni == 0.0 or nj == 0.0:
        return 0.0
    c = dot / (ni * nj)
    if c > 1.0:
        return 1.0
    if c < -1.0:
        return -1.0
    return c


@kernel()
def _pool_block(indptr, indices, data, rows, buf, out, base):
    """Write the m x m cosine block of ``rows`` into ``out[base:base + m*m]`` (row-major).

    Scatter-gather: row a is scattered into the dense float64 buffer ``buf`` (n_cols,
    all-zero on entry and on exit), then each later row b is a gather over its own non-zeros
    -- no branchy merge.  The sum runs over b's non-zeros in column order; only the common
    columns contribute, so the value equals the merge join's.
    """
    m = rows.shape[0]
    norms = np.empty(m, np.float64)
    for a in range(m):
        norms[a] = row_norm(indptr, data, rows[a])
    for a in range(m):
        ra = rows[a]
        for p in range(indptr[ra], indptr[ra + 1]):
            buf[indices[p]] = data[p]
        out[base + a * m + a] = 1.0 if norms[a] > 0.0 else 0.0
        for b in range(a + 1, m):
            rb = rows[b]
            s = 0.0
            for p in range(indptr[rb], indptr[rb + 1]):
                s += buf[indices[p]] * np.float64(data[p])
            c = _cos(s, norms[a], norms[b])
            out[base + a * m + b] = c
            out[base + b * m + a] = c
        for p in range(indptr[ra], indptr[ra + 1]):
            buf[indices[p]] = 0.0


@kernel()
def cosine_rows(indptr, indices, data, rows, n_cols, out):
    """Pairwise cosine among ``rows`` (int64, m) into ``out`` (m, m) float32/float64, C-contiguous.

    Symmetric; ``out[i, i]`` = 1 for non-zero rows (0 for all-zero rows).  Serial (one pool);
    ``n_cols`` = number of columns (size of the scatter buffer).
    """
    buf = np.zeros(n_cols, np.float64)
    _pool_block(indptr, indices, data, rows, buf, out.reshape(-1), np.int64(0))  # int64 as cosine_pools passes it


@kernel(parallel=True)
def cosine_pools(indptr, indices, data, offsets, n_cols, out_offsets, out):
    """Batched pool cosines: pool ``q`` = rows ``offsets[q]:offsets[q+1]`` (one row per flat candidate).

    Its m_q x m_q block is written row-major at ``out[out_offsets[q]:out_offsets[q+1]]``
    (``out_offsets`` int64 = cumsum of m_q**2, ``out`` flat float32/float64).  ``prange`` over
    pools; each pool owns its scatter buffer and its output block.
    """
    nq = offsets.shape[0] - 1
    for q in prange(nq):
        rows = np.arange(offsets[q], offsets[q + 1])
        buf = np.zeros(n_cols, np.float64)
        _pool_block(indptr, indices, data, rows, buf, out, out_offsets[q])


@kernel(parallel=True)
def cosine_cross(a_ptr, a_idx, a_dat, b_ptr, b_idx, b_dat, n_cols, out):
    """Cosine between every row of A and every row of B into ``out`` (n_a, n_b) float32/float64.

    Both CSR over the same ``n_cols`` columns.  ``prange`` over rows of A (scatter row a,
    gather rows of B); row i of ``out`` is written by iteration i only.
    """
    n_a = a_ptr.shape[0] - 1
    n_b = b_ptr.shape[0] - 1
    nb = np.empty(n_b, np.float64)
    for j in range(n_b):
        nb[j] = row_norm(b_ptr, b_dat, j)
    for i in prange(n_a):
        buf = np.zeros(n_cols, np.float64)
        na = row_norm(a_ptr, a_dat, i)
        for p in range(a_ptr[i], a_ptr[i + 1]):
            buf[a_idx[p]] = a_dat[p]
        for j in range(n_b):
            s = 0.0
            for r in range(b_ptr[j], b_ptr[j + 1]):
                s += buf[b_idx[r]] * np.float64(b_dat[r])
            out[i, j] = _cos(s, na, nb[j])
