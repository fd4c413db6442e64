"""Pool baselines with the published definitions (SPEC A.5), batched over pools.

All functions take flat per-pool arrays + ``offsets`` (see :mod:`jkofast.pools.candidates`) and return
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

A pool with a NaN/inf score or embedding entry (or embeddings whose dot products would
overflow) is a *bad pool*: the other pools are still ranked, and ``errors`` says what
happens to it — ``"raise"`` (default) raises :class:`BadPoolError` (a ``ValueError`` naming
the argument and the pools; its ``.result`` holds every other pool's ranking, ``-1`` rows
for the bad ones, and ``.errors`` maps pool index -> reason); ``"skip"`` returns that array
and emits a :class:`BadPoolWarning` with the same list.  Global mistakes (wrong lengths,
offsets, dtypes, ``k``) still raise at once.
"""

from __future__ import annotations

import warnings

import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads, over_ranges
from jkofast._validation import (
    PartialBatchError,
    PartialBatchWarning,
    as_float_array,
    check_int,
    check_offsets,
    check_positive,
    keep_segments,
    segment_any,
    summarise_errors,
)
from jkofast.kernels.pools import baselines as _k

__all__ = ["BadPoolError", "BadPoolWarning", "dpp_map", "inpool_rrf", "mmr", "positions_to_docs", "topk_by_score"]

# embeddings beyond this size make the raw dot products of MMR / DPP overflow
_EMB_MAX = 1e150


class BadPoolError(PartialBatchError):
    """Some pools of a batch had invalid input (a ``ValueError``).

    Attributes
    ----------
    result : int64 ndarray (nq, k)
        The rankings of every other pool; the bad pools' rows are ``-1``.
    errors : dict[int, str]
        Pool index -> reason.
    """


class BadPoolWarning(PartialBatchWarning):
    """``errors="skip"``: some pools were left unranked (``-1`` rows); the message lists them."""


def _scores(x, off, name, dtype=None):
    """Coerce; non-finite entries are left for :func:`_bad_pools` (per-pool errors)."""
    a = as_float_array(x, name, ndim=1, allow_empty=True, dtype=dtype, finite=False)
    if a.shape[0] != off[-1]:
        raise ValueError(f"{name} has {a.shape[0]} entries, offsets say {int(off[-1])}")
    return a


def _emb(emb, off):
    Z = as_float_array(emb, "embeddings", ndim=2, allow_empty=True, finite=False)
    if Z.shape[0] != off[-1]:
        raise ValueError(f"embeddings has {Z.shape[0]} rows, offsets say {int(off[-1])}")
    return Z


def _bad_pools(off, scores: dict, Z=None) -> dict:
    """Map pool index -> reason for every pool with invalid input.

    Invalid: a non-finite score / embedding entry, or embedding entries so large that the dot
    products overflow (rows should be unit).
    """
    errors: dict[int, str] = {}
    checks = [(name, ~np.isfinite(a), "contains NaN or inf") for name, a in scores.items()]
    if Z is not None and Z.size:
        finite = np.isfinite(Z).all(axis=1)
        checks.append(("embeddings", ~finite, "contains NaN or inf"))
        # a row with NaN or inf is reported by the check above first (the first reason of a pool is kept)
        with np.errstate(invalid="ignore"):
            rowmax = np.maximum(Z.max(axis=1), -Z.min(axis=1)).astype(np.float64)
        big = finite & (rowmax > _EMB_MAX)
        checks.append(
            (
                "embeddings",
                big,
                f"has entries above {_EMB_MAX:.0e}: its dot products overflow (the rows should be L2-normalised)",
            )
        )
    for name, flag, why in checks:
        for q in np.flatnonzero(segment_any(flag, off)).tolist():
            i = int(np.argmax(flag[off[q] : off[q + 1]]))  # first flagged position in the pool
            errors.setdefault(q, f"{name} {why} (pool {q}, position {i})")
    return errors


def _run_pools(off, k, scores: dict, Z, errors_mode: str, fn) -> np.ndarray:
    """Run ``fn(sub_off, scores..., Z, idx)`` on the good pools and apply ``errors_mode``."""
    if errors_mode not in ("raise", "skip"):
        raise ValueError(f"errors must be 'raise' or 'skip', got {errors_mode!r}")
    nq = off.shape[0] - 1
    errors = _bad_pools(off, scores, Z)
    idx = np.full((nq, k), -1, np.int64)
    if not errors:
        fn(off, *scores.values(), Z, idx)
        return idx
    keep = np.ones(nq, bool)
    keep[list(errors)] = False
    arrays = (*scores.values(), *(() if Z is None else (Z,)))
    sub_off, sub_arrays = keep_segments(off, keep, *arrays)
    if keep.any():
        sub = np.full((int(np.count_nonzero(keep)), k), -1, np.int64)
        sub_arrays = [np.ascontiguousarray(a) for a in sub_arrays]
        fn(sub_off, *sub_arrays[: len(scores)], None if Z is None else sub_arrays[-1], sub)
        idx[keep] = sub
    msg = summarise_errors(dict(sorted(errors.items())), nq, "pools")
    if errors_mode == "raise":
        raise BadPoolError(
            msg + "; the other pools' rankings are in this error's .result, -1 rows for these", idx, errors
        )
    warnings.warn(msg + "; their rows are -1", BadPoolWarning, stacklevel=3)
    return idx


def _offsets(offsets, x):
    n = np.asarray(x).shape[0]
    return check_offsets(offsets, n)


def topk_by_score(scores, offsets, k: int = 20, *, errors: str = "raise", n_threads: int | None = None) -> np.ndarray:
    """Top-k pool positions by one score per pool (descending; ties -> lowest position).

    Parameters
    ----------
    scores : float32/float64 (n_total,)
    offsets : int (nq + 1,)
    k : int
    errors : {"raise", "skip"}
        What a pool with a NaN/inf score does (module docstring); the others are ranked.

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

    def fn(o, a, _Z, idx):
        val = np.empty(idx.shape, a.dtype)
        with numba_threads(n_threads):
            _k.topk_segments(a, o, k, idx, val)

    return _run_pools(off, k, {"scores": s}, None, errors, fn)


def inpool_rrf(
    sparse, dense, offsets, k: int = 20, *, k_rrf: int = 60, errors: str = "raise", n_threads: int | None = None
) -> np.ndarray:
    """In-pool hybrid RRF (``hybrid_rrf``): fuse the pool ranks of two scores.

    ``fused_i = 1/(k_rrf + rank_sparse(i) + 1) + 1/(k_rrf + rank_dense(i) + 1)`` with
    0-based ranks *within the pool* (not the global ranks that built it), then top-k.
    ``errors`` (``"raise"`` / ``"skip"``): what a pool with a NaN/inf score does (module docstring).

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

    def fn(o, a, b, _Z, idx):
        val = np.empty(idx.shape, np.float64)
        with numba_threads(n_threads):
            _k.inpool_rrf_segments(a, b, o, k_rrf, k, idx, val)

    return _run_pools(off, k, {"sparse": s, "dense": d}, None, errors, fn)


def mmr(
    rel, embeddings, offsets, k: int = 20, *, lam: float = 0.5, errors: str = "raise", n_threads: int | None = None
) -> np.ndarray:
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
    errors : {"raise", "skip"}
        What a pool with a NaN/inf ``rel`` / embedding entry does (module docstring).
    """
    k = check_int(k, "k", min_value=1)
    lam = check_positive(lam, "lam", strict=False)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    # steps as in dpp_map, own kernel/params; a shared wrapper would shift _run_pools' stacklevel=3 warning
    off = _offsets(offsets, rel)
    r = _scores(rel, off, "rel", np.float64)
    Z = _emb(embeddings, off)

    def fn(o, a, Zs, idx):
        over_ranges(_k.mmr_segments, o.shape[0] - 1, n_threads, a, Zs, o, lam, k, idx)

    return _run_pools(off, k, {"rel": r}, Z, errors, fn)


def dpp_map(
    rel, embeddings, offsets, k: int = 20, *, delta: float = 1e-3, errors: str = "raise", n_threads: int | None = None
) -> np.ndarray:
    """Greedy DPP MAP, Gram-Schmidt form (SPEC A.5), float64.

    The published quality is ``rel = minmax(0.4*minmax(dense) + 0.6*minmax(rerank))``
    (compute it with :func:`jkofast.jko.energy.blend` and :func:`jkofast.jko.energy.minmax`).
    Unfilled slots are completed by descending ``max(rel, 1e-8)`` (lower position first).
    ``errors`` (``"raise"`` / ``"skip"``): what a pool with invalid input does (module docstring).
    """
    k = check_int(k, "k", min_value=1)
    delta = check_positive(delta, "delta", strict=False)
    # steps as in mmr, own kernel/params; a shared wrapper would shift _run_pools' stacklevel=3 warning
    off = _offsets(offsets, rel)
    r = _scores(rel, off, "rel", np.float64)
    Z = _emb(embeddings, off)

    def fn(o, a, Zs, idx):
        over_ranges(_k.dpp_map_segments, o.shape[0] - 1, n_threads, a, Zs, o, k, delta, idx)

    return _run_pools(off, k, {"rel": r}, Z, errors, fn)


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
        raise ValueError(
            f"pos[{q}, {j}] = {int(pos[q, j])} is outside pool {q} (size {int(size[q, 0])}); "
            "positions are local to their pool, -1 = padding"
        )
    if doc_idx.size == 0:
        return np.full(pos.shape, -1, np.int64)
    flat = off[:-1, None] + pos
    out = np.where(pos >= 0, doc_idx[np.clip(flat, 0, doc_idx.size - 1)], -1)
    return out.astype(np.int64)


@register_warmup("baselines")
def _warmup() -> None:
    """Compile what the main job runs: float32 / float64 scores, float32 embedding rows."""
    _warmup_rows(np.float32)


@register_warmup("baselines.float64")
def _warmup_float64() -> None:
    """Compile the float64 embedding rows of ``mmr`` / ``dpp_map``."""
    _warmup_rows(np.float64)


def _warmup_rows(z_dtype) -> None:
    """Run every baseline on 3-element scores of both float dtypes and ``z_dtype`` embedding rows."""
    off = np.array([0, 3], np.int64)
    for dt in (np.float32, np.float64):
        x = np.array([1.0, 3.0, 2.0], dt)
        Z = np.eye(3, dtype=z_dtype)
        topk_by_score(x, off, 2)
        inpool_rrf(x, x[::-1].copy(), off, 2)
        mmr(x, Z, off, 2)
        dpp_map(x, Z, off, 2)
