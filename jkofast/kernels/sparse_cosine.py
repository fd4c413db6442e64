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
    if ni == 0.0 or nj == 0.0:
        return 0.0
    c = dot / (ni * nj)
    if c > 1.0:
        return 1.0
    if c < -1.0:
        return -1.0
    return c


@kernel()
def cosine_rows(indptr, indices, data, rows, out):
    """Pairwise cosine among ``rows`` (int64, m): ``out`` (m, m) float32/float64, symmetric;
    ``out[i, i]`` = 1 for non-zero rows (0 for all-zero rows).  Serial (one pool)."""
    m = rows.shape[0]
    norms = np.empty(m, np.float64)
    for a in range(m):
        norms[a] = row_norm(indptr, data, rows[a])
    for a in range(m):
        out[a, a] = 1.0 if norms[a] > 0.0 else 0.0
        for b in range(a + 1, m):
            c = _cos(row_dot(indptr, indices, data, rows[a], rows[b]), norms[a], norms[b])
            out[a, b] = c
            out[b, a] = c


@kernel(parallel=True)
def cosine_pools(indptr, indices, data, offsets, out_offsets, out):
    """Batched pool cosines: pool ``q`` = rows ``offsets[q]:offsets[q+1]`` (contiguous, one per
    flat candidate).  Its m_q x m_q block is written row-major at
    ``out[out_offsets[q]:out_offsets[q+1]]`` (``out_offsets`` = cumsum of m_q**2).
    ``prange`` over pools."""
    nq = offsets.shape[0] - 1
    for q in prange(nq):
        a0 = offsets[q]
        m = offsets[q + 1] - a0
        base = out_offsets[q]
        norms = np.empty(m, np.float64)
        for a in range(m):
            norms[a] = row_norm(indptr, data, a0 + a)
        for a in range(m):
            out[base + a * m + a] = 1.0 if norms[a] > 0.0 else 0.0
            for b in range(a + 1, m):
                c = _cos(row_dot(indptr, indices, data, a0 + a, a0 + b), norms[a], norms[b])
                out[base + a * m + b] = c
                out[base + b * m + a] = c


@kernel(parallel=True)
def cosine_cross(a_ptr, a_idx, a_dat, b_ptr, b_idx, b_dat, out):
    """Cosine between every row of A and every row of B: ``out`` (n_a, n_b).  Both CSR over the
    same column space.  ``prange`` over rows of A."""
    n_a = a_ptr.shape[0] - 1
    n_b = b_ptr.shape[0] - 1
    nb = np.empty(n_b, np.float64)
    for j in range(n_b):
        nb[j] = row_norm(b_ptr, b_dat, j)
    for i in prange(n_a):
        na = row_norm(a_ptr, a_dat, i)
        for j in range(n_b):
            s = 0.0
            p = a_ptr[i]
            pe = a_ptr[i + 1]
            r = b_ptr[j]
            re = b_ptr[j + 1]
            while p < pe and r < re:
                ia = a_idx[p]
                ib = b_idx[r]
                if ia == ib:
                    s += np.float64(a_dat[p]) * np.float64(b_dat[r])
                    p += 1
                    r += 1
                elif ia < ib:
                    p += 1
                else:
                    r += 1
            out[i, j] = _cos(s, na, nb[j])
