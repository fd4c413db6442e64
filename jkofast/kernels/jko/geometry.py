"""Per-pool geometry: ``S = clip(cos, -1, 1)``, ``C = (1 - S)^2``, ``K = max(0, S)``.

Written into caller scratch (M x M float64), from dense rows ``Z[lo:hi]`` or from the CSR
rows ``lo:hi`` of ``(indptr, indices, data)`` (sparse cosine: scatter / gather; indices sorted
and unique within rows, int64 — ``check_csr`` guarantees it). Both matrices come out
exactly symmetric (each pair is computed once and mirrored). Zero rows have cosine 0
with everything (and 0 with themselves).

Custom geometries (SPEC A.6.2, the ablations of A.7.8), per pool in the same kernel:

* a **projected cost** ``C^W = (1 − clip(cos(W z_i, W z_j), −1, 1))²`` from the dense rows
  projected by ``W`` (r x d; projected row norms floored at 1e-8, as published); K stays on
  the raw rows' cosine;
* **user blocks**: one M x M cost block and/or kernel block per pool, flat (row-major) at
  ``boff[q]``; a missing one comes from the rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel
from jkofast.kernels.sparse.cosine import row_dot

__all__ = ["PoolRows", "cost_kernel", "cost_kernel_csr", "cost_kernel_dense", "projected_cost"]

NORM_FLOOR = 1e-8  # projected row norms (published: clamp(min=1e-8))

_ARITH = set(FASTMATH_ARITH)


@kernel(fastmath=_ARITH)
def _dot_dense(Z, i, j):
    s = 0.0
    for k in range(Z.shape[1]):
        s += np.float64(Z[i, k]) * np.float64(Z[j, k])
    return s


@kernel()
def _fill_from_sim(S, C, K):
    m = S.shape[0]
    for i in range(m):
        for j in range(m):
            x = S[i, j]
            if x > 1.0:
                x = 1.0
            elif x < -1.0:
                x = -1.0
            C[i, j] = (1.0 - x) * (1.0 - x)
            K[i, j] = x if x > 0.0 else 0.0


@kernel()
def cost_kernel_dense(Z, lo, hi, normalise, C, K):
    """C, K of the pool ``Z[lo:hi]`` (rows float32/float64) into ``C, K`` (M x M float64).

    ``normalise``: divide dot products by the row norms (cosine); False uses ``Z Zᵀ``
    as given (the published construction for L2-normalised embeddings).
    """
    m = hi - lo
    nrm = np.ones(m)
    if normalise:
        for i in range(m):
            x = np.sqrt(_dot_dense(Z, lo + i, lo + i))
            nrm[i] = x if x > 0.0 else np.inf
    for i in range(m):
        for j in range(i, m):
            s = _dot_dense(Z, lo + i, lo + j) / (nrm[i] * nrm[j])
            C[i, j] = s
            C[j, i] = s
    _fill_from_sim(C, C, K)


@kernel()
def cost_kernel_csr(indptr, indices, data, lo, hi, C, K):
    """C, K of the CSR rows ``lo:hi`` by sparse cosine (row i scattered, rows j gathered).

    Row i is scattered into a dense float64 buffer and each row j >= i gathers from it: the
    dot product adds the same products in the same (ascending column) order as a merge join
    of the two rows, plus exact zeros, so the result equals the merge join bit for bit at
    O(nnz_j) per pair instead of O(nnz_i + nnz_j) branchy steps.
    """
    m = hi - lo
    nrm = np.empty(m)
    for i in range(m):
        x = np.sqrt(row_dot(indptr, indices, data, lo + i, lo + i))
        nrm[i] = x if x > 0.0 else np.inf
    ncol = 0
    for p in range(indptr[lo], indptr[hi]):
        if indices[p] >= ncol:
            ncol = indices[p] + 1
    buf = np.zeros(ncol)
    for i in range(m):
        for p in range(indptr[lo + i], indptr[lo + i + 1]):
            buf[indices[p]] = data[p]
        for j in range(i, m):
            s = 0.0
            for p in range(indptr[lo + j], indptr[lo + j + 1]):
                s += buf[indices[p]] * np.float64(data[p])
            s = s / (nrm[i] * nrm[j])
            C[i, j] = s
            C[j, i] = s
        for p in range(indptr[lo + i], indptr[lo + i + 1]):
            buf[indices[p]] = 0.0
    _fill_from_sim(C, C, K)


@kernel(fastmath=_ARITH)
def _project_rows(Z, W, lo, Y, nrm):
    """``Y[i] = W z_{lo+i}`` (float64 accumulation) and ``nrm[i] = max(|Y[i]|, 1e-8)`` (an arithmetic leaf)."""
    m = Y.shape[0]
    r = W.shape[0]
    d = W.shape[1]
    for i in range(m):
        s2 = 0.0
        for k in range(r):
            acc = 0.0
            for t in range(d):
                acc += W[k, t] * np.float64(Z[lo + i, t])
            Y[i, k] = acc
            s2 += acc * acc
        nrm[i] = max(np.sqrt(s2), NORM_FLOOR)


@kernel(fastmath=_ARITH)
def _dot_rows(Y, i, j):
    s = 0.0
    for k in range(Y.shape[1]):
        s += Y[i, k] * Y[j, k]
    return s


@kernel()
def projected_cost(Z, W, lo, hi, C):
    """``C^W`` of the pool ``Z[lo:hi]`` projected by ``W`` (r x d) into ``C`` (M x M float64).

    ``y_i = W z_i`` (float64 accumulation), ``S_ij = y_i·y_j / (max(|y_i|, 1e-8) max(|y_j|, 1e-8))``,
    ``C_ij = (1 − clip(S_ij, −1, 1))²``; exactly symmetric.
    """
    m = hi - lo
    Y = np.zeros((m, W.shape[0]))
    nrm = np.empty(m)
    _project_rows(Z, W, lo, Y, nrm)
    for i in range(m):
        for j in range(i, m):
            s = _dot_rows(Y, i, j) / (nrm[i] * nrm[j])
            if s > 1.0:
                s = 1.0
            elif s < -1.0:
                s = -1.0
            c = (1.0 - s) * (1.0 - s)
            C[i, j] = c
            C[j, i] = c


class PoolRows(NamedTuple):
    """The geometry of a flat candidate list.

    Dense ``Z`` (``dense`` True; ``normalise`` as in ``cost_kernel_dense``) or CSR
    ``(indptr, indices, data)``; the other side empty (both empty when user blocks give C
    and K). ``W``: the cost's projection (r x d float64; 0 x 0 = none, dense rows only).
    ``cblk`` / ``kblk``: flat float64 user cost / kernel blocks (empty = from the rows), pool
    ``q``'s M x M block row-major at ``boff[q]`` (int64, nq + 1); the kernel blocks are
    symmetric (the wrapper symmetrises them, as ``run_jko`` does).
    """

    dense: bool
    Z: np.ndarray
    normalise: bool
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    W: np.ndarray
    cblk: np.ndarray
    kblk: np.ndarray
    boff: np.ndarray


@kernel()
def _copy_block(blk, start, M):
    m = M.shape[0]
    for i in range(m):
        for j in range(m):
            M[i, j] = blk[start + i * m + j]


@kernel()
def cost_kernel(rows, qi, lo, hi, C, K):
    """C, K of pool ``qi`` (candidates ``lo:hi``) of ``rows`` (a ``PoolRows``).

    Cosine geometry of the dense or CSR rows; then the projected cost (``rows.W``) replaces
    C, and user blocks replace C and/or K.
    """
    user_c = rows.cblk.shape[0] > 0
    user_k = rows.kblk.shape[0] > 0
    if not (user_c and user_k):
        if rows.dense:
            cost_kernel_dense(rows.Z, lo, hi, rows.normalise, C, K)
            if rows.W.shape[0] > 0 and not user_c:
                projected_cost(rows.Z, rows.W, lo, hi, C)
        else:
            cost_kernel_csr(rows.indptr, rows.indices, rows.data, lo, hi, C, K)
    if user_c:
        _copy_block(rows.cblk, rows.boff[qi], C)
    if user_k:
        _copy_block(rows.kblk, rows.boff[qi], K)
