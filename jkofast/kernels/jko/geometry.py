"""Per-pool geometry: ``S = clip(cos, -1, 1)``, ``C = (1 - S)^2``, ``K = max(0, S)``.

Written into caller scratch (M x M float64), from dense rows ``Z[lo:hi]`` or from the CSR
rows ``lo:hi`` of ``(indptr, indices, data)`` (sparse cosine by merge-join; indices sorted
and unique within rows, int64 — ``check_csr`` guarantees it). Both matrices come out
exactly symmetric (each pair is computed once and mirrored). Zero rows have cosine 0
with everything (and 0 with themselves).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel
from jkofast.kernels.sparse.cosine import row_dot

__all__ = ["PoolRows", "cost_kernel", "cost_kernel_csr", "cost_kernel_dense"]

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
    """C, K of the CSR rows ``lo:hi`` by sparse cosine (merge-join over sorted indices)."""
    m = hi - lo
    nrm = np.empty(m)
    for i in range(m):
        x = np.sqrt(row_dot(indptr, indices, data, lo + i, lo + i))
        nrm[i] = x if x > 0.0 else np.inf
    for i in range(m):
        for j in range(i, m):
            s = row_dot(indptr, indices, data, lo + i, lo + j) / (nrm[i] * nrm[j])
            C[i, j] = s
            C[j, i] = s
    _fill_from_sim(C, C, K)


class PoolRows(NamedTuple):
    """The geometry rows of a flat candidate list.

    Dense ``Z`` (``dense`` True; ``normalise`` as in ``cost_kernel_dense``) or CSR
    ``(indptr, indices, data)``; the other side empty.
    """

    dense: bool
    Z: np.ndarray
    normalise: bool
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray


@kernel()
def cost_kernel(rows, lo, hi, C, K):
    """C, K of the candidates ``lo:hi`` of ``rows`` (a ``PoolRows``), dense or CSR."""
    if rows.dense:
        cost_kernel_dense(rows.Z, lo, hi, rows.normalise, C, K)
    else:
        cost_kernel_csr(rows.indptr, rows.indices, rows.data, lo, hi, C, K)
