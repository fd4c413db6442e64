"""Clustering of one candidate pool for MR-JKO / SAM-JKO (SPEC A.6.3, step 2).

Both variants are Lloyd iterations from caller-given initial rows ``init`` (the wrapper draws
``numpy.random.default_rng(0).choice(M, G, replace=False)``), at most ``max_iter`` of them,
with the published stopping rule: the assignments start **all zero**, each iteration first
re-assigns every point and stops as soon as no assignment changed, else recomputes the
centroids. So when the very first pass assigns every point to group 0 the loop stops with the
initial centroids (the all-zero start "did not change"); and after the last allowed iteration
the centroids are those of the last assignment. A group without members keeps its previous
centroid.

* ``spherical_kmeans`` (MR-JKO): assign by the largest dot product with the L2-normalised
  centroids (the rows are the pool's L2-normalised embeddings, so this is the cosine);
  centroid = member mean, L2-normalised (norm floor 1e-8).
* ``sam_kmeans`` (SAM-JKO): features ``x_i = [z_i, β·rel_i]`` (d + 1 coordinates, not
  renormalised), assignment by the smallest squared Euclidean distance, centroid = plain
  member mean; the returned centroids are the first d coordinates, L2-normalised (floor 1e-8).

Ties pick the **lowest group index** (strict comparisons, strict IEEE in the drivers); only
the dot products over the d coordinates are ``FASTMATH_ARITH`` leaves (deterministic for given
inputs, independent of the thread count). The dot products sum in the dtype of the rows:
float32 in MR-JKO, like the published float32 code (half the bytes and twice the SIMD lanes of
float64); norms, means and centroids are float64. The SAM distance is evaluated as
``‖z‖² − 2<z, c> + ‖c‖² + (β·rel − c_rel)²`` (the published code subtracts first), so one
blocked dot-product pass serves both variants; the pass is bound by reading the centroids,
which a block of 8 points reads once.

``X`` (M, d) float32 (or float64) rows, ``init`` (G,) int64 distinct row indices, ``assign``
(M,) int64 and ``cent`` (G, d) float64 written in place. Each kernel returns the number of
assignment passes run (the last one is the pass that found no change, unless ``max_iter``
stopped the loop).
"""

from __future__ import annotations

import numpy as np

from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel

__all__ = ["NORM_FLOOR", "cluster_pool", "sam_kmeans", "spherical_kmeans"]

NORM_FLOOR = 1e-8  # centroid norm floor of the published k-means

_ARITH = set(FASTMATH_ARITH)
BLOCK = 8  # points per block of the assignment pass


@kernel(fastmath=_ARITH)
def _dot(A, i, B, j):
    """``<A[i], B[j]>`` over the columns of ``A`` (pure arithmetic leaf)."""
    s = 0.0
    for k in range(A.shape[1]):
        s += A[i, k] * B[j, k]
    return s


@kernel(fastmath=_ARITH)
def _dots_block(A, i, B, g, out):
    """``out[j] = <A[i + j], B[g]>`` for j < 8 (pure arithmetic leaf).

    Eight rows of ``A`` against one row of ``B``: each row of ``B`` is read once per block
    (the pass over the centroids is bound by reading them, not by the multiply-adds).
    """
    z = np.float32(0.0)  # float32 sums for float32 rows (float64 for float64 rows)
    s0 = z
    s1 = z
    s2 = z
    s3 = z
    s4 = z
    s5 = z
    s6 = z
    s7 = z
    for k in range(A.shape[1]):
        c = B[g, k]
        s0 += A[i, k] * c
        s1 += A[i + 1, k] * c
        s2 += A[i + 2, k] * c
        s3 += A[i + 3, k] * c
        s4 += A[i + 4, k] * c
        s5 += A[i + 5, k] * c
        s6 += A[i + 6, k] * c
        s7 += A[i + 7, k] * c
    out[0] = s0
    out[1] = s1
    out[2] = s2
    out[3] = s3
    out[4] = s4
    out[5] = s5
    out[6] = s6
    out[7] = s7


@kernel()
def _assign(X, xx, C, cc, xr, cr, sam, assign):
    """One assignment pass; returns whether an assignment changed.

    Score of point i and group g: ``<x_i, c_g>`` (largest wins) for spherical k-means; for SAM
    the squared distance ``‖x_i‖² - 2<x_i, c_g> + ‖c_g‖² + (xr_i - cr_g)²`` (smallest wins;
    ``xx``, ``cc`` the squared norms). Groups are scanned in ascending order with a strict
    comparison, so ties keep the lowest index. Points go in blocks of ``BLOCK`` through
    ``_dots_block``, the remainder one by one (each point always takes the same path).
    """
    m = X.shape[0]
    G = C.shape[0]
    buf = np.empty(BLOCK)
    best = np.zeros(BLOCK, np.int64)
    bv = np.empty(BLOCK)
    changed = False
    i0 = np.int64(0)  # not a bare 0: a literal would compile _dots_block and _dot a second time
    while i0 < m:
        nb = BLOCK if i0 + BLOCK <= m else 1
        for g in range(G):
            if nb == BLOCK:
                _dots_block(X, i0, C, g, buf)
            else:
                buf[0] = _dot(X, i0, C, g)
            for j in range(nb):
                i = i0 + j
                if sam:
                    x = xr[i] - cr[g]
                    v = (xx[i] - 2.0 * buf[j] + cc[g]) + x * x
                    better = v < bv[j]
                else:
                    v = buf[j]
                    better = v > bv[j]
                if g == 0 or better:  # strict: ties keep the lowest group index
                    best[j] = g
                    bv[j] = v
        for j in range(nb):
            if best[j] != assign[i0 + j]:
                changed = True
                assign[i0 + j] = best[j]
        i0 += nb
    return changed


@kernel(fastmath=_ARITH)
def _sqnorm(A, i):
    """``‖A[i]‖²`` accumulated in float64 (pure arithmetic leaf)."""
    s = 0.0
    for k in range(A.shape[1]):
        x = np.float64(A[i, k])
        s += x * x
    return s


@kernel()
def _set_row(src, g, dst):
    """``dst[g] = src[g]`` (cast to ``dst``'s dtype)."""
    for k in range(src.shape[1]):
        dst[g, k] = src[g, k]


@kernel()
def _normalise_row(C, g):
    """``C[g] /= max(‖C[g]‖, 1e-8)``."""
    n = np.sqrt(_dot(C, g, C, g))
    n = max(n, NORM_FLOOR)
    for k in range(C.shape[1]):
        C[g, k] = C[g, k] / n


@kernel()
def _member_sums(X, assign, S, counts):
    """Per group: sum of the member rows into ``S`` (G, d) and member count (index order)."""
    S[:, :] = 0.0
    counts[:] = 0
    for i in range(X.shape[0]):
        g = assign[i]
        counts[g] += 1
        for k in range(X.shape[1]):
            S[g, k] += X[i, k]


@kernel()
def spherical_kmeans(X, init, max_iter, assign, cent):
    """Spherical k-means of the rows of ``X`` (MR-JKO); see the module docstring.

    ``X`` (M, d) float32/float64 L2-normalised rows; ``init`` (G,) int64; writes ``assign`` (M,)
    int64 and ``cent`` (G, d) float64 (L2-normalised). Returns the number of assignment passes.
    """
    d = X.shape[1]
    G = init.shape[0]
    cw = np.empty((G, d), X.dtype)  # the centroids in the rows' dtype, for the assignment pass
    for g in range(G):
        for k in range(d):
            cent[g, k] = X[init[g], k]
        _normalise_row(cent, g)
        _set_row(cent, g, cw)
    assign[:] = 0
    S = np.empty((G, d))
    counts = np.empty(G, np.int64)
    unused = np.empty(0)
    passes = 0
    for _ in range(max_iter):
        passes += 1
        if not _assign(X, unused, cw, unused, unused, unused, False, assign):
            break
        _member_sums(X, assign, S, counts)
        for g in range(G):
            if counts[g] > 0:  # an empty group keeps its previous centroid
                for k in range(d):
                    cent[g, k] = S[g, k] / counts[g]
                _normalise_row(cent, g)
                _set_row(cent, g, cw)
    return passes


@kernel()
def sam_kmeans(X, rel, beta, init, max_iter, assign, cent):
    """Relevance-aware k-means on ``[z_i, β·rel_i]`` (SAM-JKO); see the module docstring.

    ``X`` (M, d) float32/float64 rows, ``rel`` (M,) float64, ``beta`` >= 0; ``init`` (G,) int64;
    writes ``assign`` (M,) int64 and ``cent`` (G, d) float64: the first d centroid
    coordinates, L2-normalised. Returns the number of assignment passes.
    """
    m, d = X.shape
    G = init.shape[0]
    cz = np.empty((G, d))  # the embedding part of the (d + 1)-dimensional centroids
    cw = np.empty((G, d), X.dtype)  # cz in the rows' dtype, for the assignment pass
    cr = np.empty(G)  # their relevance coordinate
    rs = np.empty(G)
    for g in range(G):
        for k in range(d):
            cz[g, k] = X[init[g], k]
        _set_row(cz, g, cw)
        cr[g] = beta * rel[init[g]]
    assign[:] = 0
    S = np.empty((G, d))
    counts = np.empty(G, np.int64)
    xx = np.empty(m)
    xr = np.empty(m)
    for i in range(m):
        xx[i] = _sqnorm(X, i)
        xr[i] = beta * rel[i]
    cc = np.empty(G)
    passes = 0
    for _ in range(max_iter):
        passes += 1
        for g in range(G):
            cc[g] = _sqnorm(cw, g)
        if not _assign(X, xx, cw, cc, xr, cr, True, assign):
            break
        _member_sums(X, assign, S, counts)
        rs[:] = 0.0
        for i in range(m):
            rs[assign[i]] += xr[i]
        for g in range(G):
            if counts[g] > 0:  # an empty group keeps its previous centroid
                for k in range(d):
                    cz[g, k] = S[g, k] / counts[g]
                _set_row(cz, g, cw)
                cr[g] = rs[g] / counts[g]
    for g in range(G):
        for k in range(d):
            cent[g, k] = cz[g, k]
        _normalise_row(cent, g)
    return passes


@kernel()
def cluster_pool(X, rel, sam, beta, init, max_iter, assign, cent):
    """``sam_kmeans`` when ``sam`` else ``spherical_kmeans`` (``rel``, ``beta`` unused then)."""
    if sam:
        return sam_kmeans(X, rel, beta, init, max_iter, assign, cent)
    return spherical_kmeans(X, init, max_iter, assign, cent)
