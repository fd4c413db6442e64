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
the dot products / squared distances over the d coordinates are ``FASTMATH_ARITH`` leaves
(deterministic for given inputs, independent of the thread count). Float64 in and out:
``X`` (M, d) float64 rows, ``init`` (G,) int64 distinct row indices, ``assign`` (M,) int64 and
``cent`` (G, d) float64 written in place. Each kernel returns the number of assignment passes
run (the last one is the pass that found no change, unless ``max_iter`` stopped the loop).
"""

from __future__ import annotations

import numpy as np

from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel

__all__ = ["NORM_FLOOR", "cluster_pool", "sam_kmeans", "spherical_kmeans"]

NORM_FLOOR = 1e-8  # centroid norm floor of the published k-means

_ARITH = set(FASTMATH_ARITH)


@kernel(fastmath=_ARITH)
def _dot(A, i, B, j):
    """``<A[i], B[j]>`` over the columns of ``A`` (pure arithmetic leaf)."""
    s = 0.0
    for k in range(A.shape[1]):
        s += A[i, k] * B[j, k]
    return s


@kernel(fastmath=_ARITH)
def _sqdist(A, i, B, j):
    """``‖A[i] - B[j]‖²`` over the columns of ``A`` (pure arithmetic leaf)."""
    s = 0.0
    for k in range(A.shape[1]):
        x = A[i, k] - B[j, k]
        s += x * x
    return s


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

    ``X`` (M, d) float64 L2-normalised rows; ``init`` (G,) int64; writes ``assign`` (M,)
    int64 and ``cent`` (G, d) float64 (L2-normalised). Returns the number of assignment passes.
    """
    m, d = X.shape
    G = init.shape[0]
    for g in range(G):
        for k in range(d):
            cent[g, k] = X[init[g], k]
        _normalise_row(cent, g)
    assign[:] = 0
    S = np.empty((G, d))
    counts = np.empty(G, np.int64)
    passes = 0
    for _ in range(max_iter):
        passes += 1
        changed = False
        for i in range(m):
            best = 0
            bs = _dot(X, i, cent, 0)
            for g in range(1, G):
                s = _dot(X, i, cent, g)
                if s > bs:  # strict: ties keep the lowest group index
                    best = g
                    bs = s
            if best != assign[i]:
                changed = True
                assign[i] = best
        if not changed:
            break
        _member_sums(X, assign, S, counts)
        for g in range(G):
            if counts[g] > 0:  # an empty group keeps its previous centroid
                for k in range(d):
                    cent[g, k] = S[g, k] / counts[g]
                _normalise_row(cent, g)
    return passes


@kernel()
def sam_kmeans(X, rel, beta, init, max_iter, assign, cent):
    """Relevance-aware k-means on ``[z_i, β·rel_i]`` (SAM-JKO); see the module docstring.

    ``X`` (M, d) float64 rows, ``rel`` (M,) float64, ``beta`` >= 0; ``init`` (G,) int64;
    writes ``assign`` (M,) int64 and ``cent`` (G, d) float64: the first d centroid
    coordinates, L2-normalised. Returns the number of assignment passes.
    """
    m, d = X.shape
    G = init.shape[0]
    cz = np.empty((G, d))  # the embedding part of the (d + 1)-dimensional centroids
    cr = np.empty(G)  # their relevance coordinate
    rs = np.empty(G)
    for g in range(G):
        for k in range(d):
            cz[g, k] = X[init[g], k]
        cr[g] = beta * rel[init[g]]
    assign[:] = 0
    S = np.empty((G, d))
    counts = np.empty(G, np.int64)
    passes = 0
    for _ in range(max_iter):
        passes += 1
        changed = False
        for i in range(m):
            ri = beta * rel[i]
            x = ri - cr[0]
            best = 0
            bd = _sqdist(X, i, cz, 0) + x * x
            for g in range(1, G):
                x = ri - cr[g]
                dist = _sqdist(X, i, cz, g) + x * x
                if dist < bd:  # strict: ties keep the lowest group index
                    best = g
                    bd = dist
            if best != assign[i]:
                changed = True
                assign[i] = best
        if not changed:
            break
        _member_sums(X, assign, S, counts)
        rs[:] = 0.0
        for i in range(m):
            rs[assign[i]] += beta * rel[i]
        for g in range(G):
            if counts[g] > 0:  # an empty group keeps its previous centroid
                for k in range(d):
                    cz[g, k] = S[g, k] / counts[g]
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
