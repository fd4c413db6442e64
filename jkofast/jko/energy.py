"""Energies and initial distributions over batches of pools (SPEC A.1, A.3).

* ``minmax(x) = (x - min x)/(max x - min x)`` per pool, **all zeros** when
  ``max - min < 1e-9``;
* ``softmax_tau(x) = exp((x - max x)/max(tau, 1e-9))`` normalised, per pool;
* relevance ``r = alpha*minmax(dense) + beta*minmax(sparse) + gamma*minmax(rerank)``
  (a term is added only when its weight is > 0 and its scores exist), energy ``E = -r``,
  initial distribution ``p0 = softmax_{tau0}(r) = softmax(-E/tau0)``.

Everything works on flat arrays + ``offsets`` (see :mod:`jkofast.pools.candidates`).  The min-max
arithmetic runs in the dtype of the scores (float32 first-stage scores give the
reference's float32 values); ``p0`` is float64.

Rerank scores are never computed here (no model is loaded by jkofast): users pass them as
a TREC-style file ``query-id doc-id score`` (:func:`read_score_file`).
"""

from __future__ import annotations

import numbers

import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads
from jkofast._validation import as_float_array, check_offsets, check_positive
from jkofast.eval.runio import read_scores
from jkofast.kernels.pools import baselines as _k

F32_MAX = float(np.finfo(np.float32).max)

__all__ = ["align_scores", "blend", "energy_and_p0", "minmax", "read_score_file", "softmax_tau"]


def _flat(x, offsets, name):
    a = as_float_array(x, name, ndim=1, allow_empty=True)
    off = check_offsets(offsets if offsets is not None else [0, a.shape[0]], a.shape[0])
    return a, off


def minmax(x, offsets=None, *, n_threads: int | None = None) -> np.ndarray:
    """Per-pool min-max normalisation with the ``1e-9`` rule.

    Parameters
    ----------
    x : float32/float64 (n_total,)
        Flat scores.
    offsets : int (nq + 1,) or None
        Pool boundaries; ``None`` = one pool.

    Returns
    -------
    ndarray, same dtype as ``x``: ``(x - min)/(max - min)`` per pool, zeros where
    ``max - min < 1e-9``.

    Examples
    --------
    >>> minmax(np.array([1.0, 3.0, 2.0, 5.0, 5.0]), [0, 3, 5]).tolist()
    [0.0, 1.0, 0.5, 0.0, 0.0]
    """
    a, off = _flat(x, offsets, "x")
    out = np.empty_like(a)
    with numba_threads(n_threads):
        _k.minmax_segments(a, off, out)
        if a.size and not np.isfinite(out).all():
            # max - min overflowed (a range wider than the dtype's max): min-max is scale-free,
            # so redo those pools on x/2 (exact), whose range fits
            bad = np.zeros(a.shape[0], bool)
            cs = np.concatenate([[0], np.cumsum(~np.isfinite(out))])
            for q in np.flatnonzero(cs[off[1:]] > cs[off[:-1]]):
                bad[off[q] : off[q + 1]] = True
            half = np.empty_like(a)
            _k.minmax_segments(a * a.dtype.type(0.5), off, half)
            out[bad] = half[bad]
    return out


def softmax_tau(x, offsets=None, tau: float = 1.0, *, n_threads: int | None = None) -> np.ndarray:
    """Per-pool ``softmax((x - max x)/max(tau, 1e-9))`` in float64.

    Examples
    --------
    >>> softmax_tau(np.array([0.0, 0.0]), tau=0.1).tolist()
    [0.5, 0.5]
    """
    a, off = _flat(x, offsets, "x")
    tau = check_positive(tau, "tau", strict=False)
    out = np.empty(a.shape[0], np.float64)
    with numba_threads(n_threads):
        _k.softmax_segments(a, off, tau, out)
    return out


# keyword signature alike to energy_and_p0's (and pools_from_lists'): defaults differ (0 here, the main blend there)
def blend(
    offsets,
    *,
    dense=None,
    sparse=None,
    rerank=None,
    alpha: float = 0.0,
    beta: float = 0.0,
    gamma: float = 0.0,
    n_threads: int | None = None,
) -> np.ndarray:
    """Relevance ``r = alpha*minmax(dense) + beta*minmax(sparse) + gamma*minmax(rerank)``.

    A term is added only when its weight is > 0 and its scores are given (the published
    library's rule), in the order dense, sparse, rerank.  Returns float32 when every used
    score array is float32, else float64; all zeros when no term applies.
    """
    off = np.asarray(offsets)
    if off.ndim != 1 or off.size < 1:
        raise ValueError(f"offsets must be a 1-D array with at least one entry, got shape {off.shape}")
    off = check_offsets(off, int(off[-1]) if off.dtype.kind in "iu" else 0)
    n_total = int(off[-1])
    terms = []
    for name, x, w, wname in (
        ("dense", dense, alpha, "alpha"),
        ("sparse", sparse, beta, "beta"),
        ("rerank", rerank, gamma, "gamma"),
    ):
        if isinstance(w, bool) or not isinstance(w, numbers.Real):
            raise TypeError(f"{wname} (weight of {name}) must be a real number, got {type(w).__name__}")
        w = float(w)
        if not np.isfinite(w) or w < 0:
            raise ValueError(f"weight of {name} ({wname}) must be finite and >= 0, got {w}")
        if w > 0 and x is not None:
            a = as_float_array(x, name, ndim=1, allow_empty=True)
            if a.shape[0] != n_total:
                raise ValueError(f"{name} has {a.shape[0]} entries, offsets say {n_total}")
            terms.append((w, minmax(a, off, n_threads=n_threads)))
    dt = np.float32 if all(t.dtype == np.float32 for _, t in terms) else np.float64
    r = np.zeros(n_total, dt)
    for w, t in terms:
        r = r + dt(w) * t if dt == np.float32 else r + w * t
    return r


# signature repeats blend's keywords with the main-table defaults (0.4, 0, 0.6); the body delegates to blend
def energy_and_p0(
    offsets,
    *,
    dense=None,
    sparse=None,
    rerank=None,
    alpha: float = 0.4,
    beta: float = 0.0,
    gamma: float = 0.6,
    tau0: float = 0.1,
    n_threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Energy ``E = -r`` (float64) and ``p0 = softmax_{tau0}(r)`` (float64), flat per pool.

    Defaults are the main-table blend (alpha, gamma) = (0.4, 0.6), beta = 0.
    """
    r = blend(
        offsets, dense=dense, sparse=sparse, rerank=rerank, alpha=alpha, beta=beta, gamma=gamma, n_threads=n_threads
    )
    p0 = softmax_tau(r, offsets, tau0, n_threads=n_threads)
    return -r.astype(np.float64), p0


def read_score_file(path) -> dict:
    """Read user rerank scores: ``query-id doc-id score`` per line (tabs or spaces).

    Also accepts 6-column TREC run lines (``qid Q0 docid rank score tag``) and ``.gz`` files.
    A first line whose score field is not a number is treated as a header.  The file is read
    by :mod:`jkofast.eval`'s reader (:func:`jkofast.eval.runio.read_scores`).

    Returns
    -------
    dict
        ``{qid: {docid: float}}``; a repeated ``(qid, docid)`` keeps its last score.

    Raises
    ------
    ValueError
        Malformed line (reported with its 1-based line number), a non-finite score or one
        outside the float32 range.
    """
    return read_scores(path)


def align_scores(scores: dict, query_ids, offsets, doc_ids_flat) -> tuple[np.ndarray, int]:
    """Flat float32 array of user scores aligned with a batch of pools.

    A pool document without a score gets the smallest score of its query (so it maps to 0
    under min-max); a query without any score gets zeros (its min-max term is then 0).
    Returns ``(flat scores, number of missing (query, doc) pairs)``.

    Raises
    ------
    ValueError
        ``len(query_ids) != len(offsets) - 1``, offsets not ending at ``len(doc_ids_flat)``, or
        a score that is not finite in float32 (named with its query and document).
    """
    query_ids = list(query_ids)
    off = check_offsets(offsets, len(doc_ids_flat))
    if len(query_ids) != off.shape[0] - 1:
        raise ValueError(f"query_ids has {len(query_ids)} entries, offsets describe {off.shape[0] - 1} pools")
    out = np.zeros(int(off[-1]), np.float32)
    missing = 0
    for q, qid in enumerate(query_ids):
        a, b = int(off[q]), int(off[q + 1])
        sq = scores.get(str(qid), {})
        vals = [sq.get(str(d)) for d in doc_ids_flat[a:b]]
        for d, v in zip(doc_ids_flat[a:b], vals, strict=True):
            if v is not None and not (isinstance(v, numbers.Real) and abs(v) <= F32_MAX):
                raise ValueError(f"scores[{str(qid)!r}][{str(d)!r}] = {v!r} is not a finite float32 score")
        present = [v for v in vals if v is not None]
        floor = min(present) if present else 0.0
        for j, v in enumerate(vals):
            if v is None:
                missing += 1
                out[a + j] = floor
            else:
                out[a + j] = v
    return out, missing


@register_warmup("energy")
def _warmup() -> None:
    off = np.array([0, 3], np.int64)
    for dt in (np.float32, np.float64):
        x = np.array([1.0, 3.0, 2.0], dt)
        minmax(x, off)
        softmax_tau(x, off, 0.1)
