"""Pool baselines with the published definitions (SPEC A.5), batched over pools.

All functions take flat per-pool arrays + ``offsets`` (see :mod:`jkofast.pools`) and return
``(nq, k)`` int64 **local pool positions** (``-1``-padded when a pool has fewer than k
documents); map them to corpus rows with :func:`positions_to_docs`.

* :func:`topk_by_score` — top-k of the pool by any single score (``rerank``, blend read-out);
* :func:`inpool_rrf` — ``hybrid_rrf``: RRF (constant 60) of the *pool* ranks of the sparse
  and dense scores;
* :func:`mmr` — Maximal Marginal Relevance, ``lambda = 0.5``, ascending scan, strict ``>``;
* :func:`dpp_map` — greedy DPP MAP in the Gram-Schmidt form, ``delta = 1e-3``, float64,
  with the fill-up rule.

Ties break by the lowest pool position (the reference's unstable argsorts break them
arbitrarily; SPEC A.1).
"""

from __future__ import annotations

import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads
from jkofast._validation import as_float_array, check_int, check_offsets, check_positive
from jkofast.kernels import baselines as _k

__all__ = ["dpp_map", "inpool_rrf", "mmr", "positions_to_docs", "topk_by_score"]


def _scores(x, off, name, dtype=None):
    a = as_float_array(x, name, ndim=1, allow_empty=True, dtype=dtype)
    if a.shape[0] != off[-1]:
        raise ValueError(f"{name} has {a.shape[0]} entries, offsets say {int(off[-1])}")
    return a


def _emb(emb, off):
    Z = as_float_array(emb, "embeddings", ndim=2, allow_empty=True)
    if Z.shape[0] != off[-1]:
        raise ValueError(f"embeddings has {Z.shape[0]} rows, offsets say {int(off[-1])}")
    if Z.size:
        big = max(float(Z.max()), -float(Z.min()))
        if big > 1e150:  # the similarities are raw dot products: they would overflow to inf/NaN
            raise ValueError(f"embeddings has entries up to {big:.3g}; its dot products overflow "
                             "(the rows should be L2-normalised)")
    return Z


def _offsets(offsets, x):
    n = np.asarray(x).shape[0]
    return check_offsets(offsets, n)


def topk_by_score(scores, offsets, k: int = 20, *, n_threads: int | None = None) -> np.ndarray:
    """Top-k pool positions by one score per pool (descending; ties -> lowest position).

    Parameters
    ----------
    scores : float32/float64 (n_total,)
    offsets : int (nq + 1,)
    k : int

    Returns
    -------
    int64 (nq, k), ``-1``-padded.

    Examples
    --------
    >>> topk_by_score(np.array([0.1, 0.9, 0.5, 2.0]), [0, 3, 4], 2).tolist()
    [[1, 2], [0, -1]]
    """
    k = check_int(k, "k", min_value=1)
    off = _offsets(offsets, scores)
    s = _scores(scores, off, "scores")
    if np.isnan(s).any():
        raise ValueError("scores contains NaN")
    nq = off.shape[0] - 1
    idx = np.full((nq, k), -1, np.int64)
    val = np.empty((nq, k), s.dtype)
    with numba_threads(n_threads):
        _k.topk_segments(s, off, k, idx, val)
    return idx


def inpool_rrf(sparse, dense, offsets, k: int = 20, *, k_rrf: int = 60,
               n_threads: int | None = None) -> np.ndarray:
    """In-pool hybrid RRF (``hybrid_rrf``): fuse the pool ranks of two scores.

    ``fused_i = 1/(k_rrf + rank_sparse(i) + 1) + 1/(k_rrf + rank_dense(i) + 1)`` with
    0-based ranks *within the pool* (not the global ranks that built it), then top-k.

    Examples
    --------
    >>> inpool_rrf(np.array([3.0, 2.0, 1.0]), np.array([1.0, 3.0, 2.0]), [0, 3], 3).tolist()
    [[1, 0, 2]]
    """
    k = check_int(k, "k", min_value=1)
    k_rrf = check_int(k_rrf, "k_rrf", min_value=0)
    off = _offsets(offsets, sparse)
    s = _scores(sparse, off, "sparse", np.float64)  # only ranks matter: one compiled variant
    d = _scores(dense, off, "dense", np.float64)
    nq = off.shape[0] - 1
    idx = np.full((nq, k), -1, np.int64)
    val = np.empty((nq, k), np.float64)
    with numba_threads(n_threads):
        _k.inpool_rrf_segments(s, d, off, k_rrf, k, idx, val)
    return idx


def mmr(rel, embeddings, offsets, k: int = 20, *, lam: float = 0.5,
        n_threads: int | None = None) -> np.ndarray:
    """Maximal Marginal Relevance per pool (SPEC A.5).

    First pick = highest ``rel``; afterwards ``lam*rel_i - (1 - lam)*max_{j selected} z_i.z_j``
    (unclipped cosine of the given rows), scanning positions in ascending order and keeping
    the incumbent unless a score is strictly greater.  The published ``rel`` is
    ``minmax(rerank)``.

    Parameters
    ----------
    rel : float (n_total,)
    embeddings : float (n_total, d), one row per flat pool entry (L2-normalised)
    offsets : int (nq + 1,)
    k : int
    lam : float in [0, 1]
    """
    k = check_int(k, "k", min_value=1)
    lam = check_positive(lam, "lam", strict=False)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    off = _offsets(offsets, rel)
    r = _scores(rel, off, "rel", np.float64)
    Z = _emb(embeddings, off)
    nq = off.shape[0] - 1
    idx = np.full((nq, k), -1, np.int64)
    with numba_threads(n_threads):
        _k.mmr_segments(r, Z, off, lam, k, idx)
    return idx


def dpp_map(rel, embeddings, offsets, k: int = 20, *, delta: float = 1e-3,
            n_threads: int | None = None) -> np.ndarray:
    """Greedy DPP MAP, Gram-Schmidt form (SPEC A.5), float64.

    The published quality is ``rel = minmax(0.4*minmax(dense) + 0.6*minmax(rerank))``
    (compute it with :func:`jkofast.energy.blend` and :func:`jkofast.energy.minmax`).
    Unfilled slots are completed by descending ``max(rel, 1e-8)`` (lower position first).
    """
    k = check_int(k, "k", min_value=1)
    delta = check_positive(delta, "delta", strict=False)
    off = _offsets(offsets, rel)
    r = _scores(rel, off, "rel", np.float64)
    Z = _emb(embeddings, off)
    nq = off.shape[0] - 1
    idx = np.full((nq, k), -1, np.int64)
    with numba_threads(n_threads):
        _k.dpp_map_segments(r, Z, off, k, delta, idx)
    return idx


def positions_to_docs(pos, offsets, doc_idx) -> np.ndarray:
    """Map ``(nq, k)`` local pool positions to corpus rows (``-1`` stays ``-1``).

    Raises
    ------
    TypeError
        Non-integer ``pos``.
    ValueError
        ``pos`` not 2-D with one row per pool, ``offsets`` not ending at ``len(doc_idx)``, or a
        position outside its pool (other than the ``-1`` padding).
    """
    doc_idx = np.asarray(doc_idx)
    if doc_idx.ndim != 1:
        raise ValueError(f"doc_idx must be 1-D, got shape {doc_idx.shape}")
    off = check_offsets(offsets, doc_idx.shape[0])
    pos = np.asarray(pos)
    if pos.dtype.kind not in "iu":
        raise TypeError(f"pos must be an integer array, got dtype {pos.dtype}")
    pos = pos.astype(np.int64, copy=False)
    nq = off.shape[0] - 1
    if pos.ndim != 2 or pos.shape[0] != nq:
        raise ValueError(f"pos must have shape (n_pools, k) = ({nq}, k), got {pos.shape}")
    size = np.diff(off)[:, None]
    bad = (pos < -1) | (pos >= size)
    if bad.any():
        q, j = (int(v[0]) for v in np.nonzero(bad))
        raise ValueError(f"pos[{q}, {j}] = {int(pos[q, j])} is outside pool {q} (size {int(size[q, 0])}); "
                         "positions are local to their pool, -1 = padding")
    if doc_idx.size == 0:
        return np.full(pos.shape, -1, np.int64)
    flat = off[:-1, None] + pos
    out = np.where(pos >= 0, doc_idx[np.clip(flat, 0, doc_idx.size - 1)], -1)
    return out.astype(np.int64)


@register_warmup("baselines")
def _warmup() -> None:
    off = np.array([0, 3], np.int64)
    for dt in (np.float32, np.float64):
        x = np.array([1.0, 3.0, 2.0], dt)
        Z = np.eye(3, dtype=dt)
        topk_by_score(x, off, 2)
        inpool_rrf(x, x[::-1].copy(), off, 2)
        mmr(x, Z, off, 2)
        dpp_map(x, Z, off, 2)
