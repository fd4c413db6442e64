"""Stability metrics of the JKO-RAG paper: the biased transport distance W_C and Leakage@10.

:func:`wc_batch` computes the paraphrase-stability metric of SPEC A.7.5 for many (p, q) pairs —
two distributions over two candidate pools — exactly as published (union lifting, ``+1e-8``
floor and renormalisation, ε 0.1, 80 Sinkhorn pairs from zero duals, transport cost ``<Π, C>``)
and, beyond the paper, the two self-distances ``W_C(p, p)``, ``W_C(q, q)`` on the same union and
the debiased Sinkhorn divergence ``W_C(p, q) − ½W_C(p, p) − ½W_C(q, q)``.  ``W_C`` is not a
divergence: ``W_C(p, p) > 0`` and grows with the spread of p (SPEC A.7.5 "self-distance floor"),
so the published W-vs-KL gap partly measures how concentrated each method's output is.

:func:`leakage_at_k` is the distractor-injection metric of SPEC A.7.6.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from jkofast._codes import OK
from jkofast._numba import register_warmup
from jkofast._threads import numba_threads
from jkofast._validation import as_float_array, check_int, check_offsets, check_positive
from jkofast.kernels.eval import wc as _k

__all__ = ["WCResult", "leakage_at_k", "wc_batch", "wc_distance"]

_TINY = 1e-280  # scaled-sum underflow threshold of the fixed-iteration half-steps (as jko.compat)


class WCResult(NamedTuple):
    """Per-pair output of :func:`wc_batch` (float64 arrays of length n_pairs).

    Attributes
    ----------
    wc : ndarray
        The published (biased) ``W_C(p, q)``.
    self_p, self_q : ndarray or None
        ``W_C(p, p)`` and ``W_C(q, q)`` on the pair's union (``None`` without ``self_terms``).
    debiased : ndarray or None
        ``wc − ½(self_p + self_q)``.
    status : ndarray int
        ``0`` OK; non-zero where a value came out non-finite (that pair's outputs are NaN).
    """

    wc: np.ndarray
    self_p: np.ndarray | None
    self_q: np.ndarray | None
    debiased: np.ndarray | None
    status: np.ndarray


def _ragged(vals, offsets, rows, n_docs: int, name: str):
    """Validate one side's ragged (values, offsets, corpus rows); return float64 / int64 arrays."""
    v = as_float_array(vals, name, dtype=np.float64, ndim=1, allow_empty=True)
    if (v < 0).any():
        raise ValueError(f"{name} must be non-negative (first negative at index {int(np.flatnonzero(v < 0)[0])})")
    off = check_offsets(offsets, v.shape[0], f"{name}_offsets")
    r = np.asarray(rows)
    if r.ndim != 1 or (r.size and r.dtype.kind not in "iu"):
        raise TypeError(f"{name}_rows must be a 1-D integer array of corpus rows, got {r.dtype} {r.shape}")
    r = np.ascontiguousarray(r, dtype=np.int64)
    if r.shape[0] != v.shape[0]:
        raise ValueError(f"{name}_rows has {r.shape[0]} entries for {v.shape[0]} values of {name}")
    if r.size and (r.min() < 0 or r.max() >= n_docs):
        raise ValueError(f"{name}_rows holds a row outside [0, {n_docs}) of doc_emb")
    mass = np.add.reduceat(v, off[:-1]) if v.size else np.zeros(off.shape[0] - 1)
    mass[off[1:] == off[:-1]] = 0.0
    if (mass <= 0).any():
        k = int(np.flatnonzero(mass <= 0)[0])
        raise ValueError(f"{name}: pair {k} has no positive mass (empty pool or all zeros)")
    return v, off, r


def _group(p_off, p_rows, q_off, q_rows):
    """Group pairs by their union of corpus rows; return (order, u_off, u_rows, pair_off)."""
    n = p_off.shape[0] - 1
    keys: dict[bytes, int] = {}
    unions = []
    gid = np.empty(n, np.int64)
    for k in range(n):
        u = np.union1d(p_rows[p_off[k] : p_off[k + 1]], q_rows[q_off[k] : q_off[k + 1]])
        key = u.tobytes()
        if key not in keys:
            keys[key] = len(unions)
            unions.append(u)
        gid[k] = keys[key]
    order = np.argsort(gid, kind="stable")
    counts = np.bincount(gid, minlength=len(unions))
    pair_off = np.zeros(len(unions) + 1, np.int64)
    np.cumsum(counts, out=pair_off[1:])
    u_off = np.zeros(len(unions) + 1, np.int64)
    np.cumsum([u.size for u in unions], out=u_off[1:])
    return order, u_off, np.ascontiguousarray(np.concatenate(unions), dtype=np.int64), pair_off


def _take(vals, off, rows, order):
    """Reorder the ragged segments of one side by ``order``."""
    sizes = np.diff(off)[order]
    new_off = np.zeros(order.shape[0] + 1, np.int64)
    np.cumsum(sizes, out=new_off[1:])
    idx = np.concatenate([np.arange(off[k], off[k + 1]) for k in order]) if order.size else np.zeros(0, np.int64)
    return np.ascontiguousarray(vals[idx]), new_off, np.ascontiguousarray(rows[idx])


def wc_batch(
    p,
    p_offsets,
    p_rows,
    q,
    q_offsets,
    q_rows,
    doc_emb,
    *,
    eps: float = 0.1,
    n_iter: int = 80,
    floor: float = 1e-8,
    self_terms: bool = True,
    n_threads: int | None = None,
) -> WCResult:
    r"""Return the published stability distance ``W_C(p, q)`` of many pairs (SPEC A.7.5), debiased beside it.

    Pair ``k`` compares ``p[p_offsets[k]:p_offsets[k+1]]`` (masses on corpus rows
    ``p_rows[...]``, e.g. a method's output over the original query's pool) with the same
    segment of ``q`` (the output for the perturbed query, over its own pool).  On the union
    ``U`` of both pools' corpus rows (sorted, distinct), each distribution is lifted (masses of a
    repeated row add), ``floor`` is added to every entry and it is renormalised; the cost is
    ``C = (1 − clip(z_iᵀz_j, −1, 1))²`` from ``doc_emb``; log-domain Sinkhorn (SPEC A.4.3) runs
    exactly ``n_iter`` row-then-column pairs from zero duals at ``eps`` and the result is the
    transport cost of the final plan,

    .. math:: W_C(p, q) = \langle \Pi, C \rangle, \quad \Pi_{ij} = e^{(f_i + g_j - C_{ij})/\varepsilon}.

    Parameters
    ----------
    p, q : array_like float (n_p,), (n_q,)
        Flat masses (each pair's segment sums to ~1; used as given, as published).
    p_offsets, q_offsets : array_like int (n_pairs + 1,)
    p_rows, q_rows : array_like int (n_p,), (n_q,)
        Corpus rows (rows of ``doc_emb``) of the masses.
    doc_emb : array_like float32/float64 (n_docs, d)
        L2-normalised corpus embeddings (the dot product is the cosine).
    eps : float
        Sinkhorn ε (0.1 published).
    n_iter : int
        Update pairs (80 published).
    floor : float
        Added to every lifted entry before renormalising (1e-8 published; 0 leaves zeros,
        handled as log 0 = −inf).
    self_terms : bool
        Also compute ``W_C(p, p)``, ``W_C(q, q)`` and the debiased divergence (3 solves per pair).
    n_threads : int or None
        Numba threads (``prange`` over unions; results do not depend on it).

    Returns
    -------
    WCResult

    Raises
    ------
    ValueError
        Mismatched lengths or pair counts, negative or non-finite masses, a pair side without
        positive mass, rows outside ``doc_emb``, ``eps <= 0``, ``n_iter < 1``, ``floor < 0``.
    TypeError
        Non-integer rows, unsupported dtypes.

    Notes
    -----
    Pairs with the same union share one cost matrix and Gibbs kernel (all methods of one
    (query, perturbation)).  Arithmetic is float64 on float32 embeddings; the published code
    is float32 throughout — the two agree to ~1e-6 relative (tests/eval/test_stability.py).

    Examples
    --------
    >>> Z = np.eye(3, dtype=np.float32)
    >>> r = wc_batch([1.0], [0, 1], [0], [0.5, 0.5], [0, 2], [0, 1], Z)
    >>> bool(r.wc[0] > r.debiased[0] > 0)
    True
    """
    E = as_float_array(doc_emb, "doc_emb", ndim=2)
    n_docs = E.shape[0]
    pv, po, pr = _ragged(p, p_offsets, p_rows, n_docs, "p")
    qv, qo, qr = _ragged(q, q_offsets, q_rows, n_docs, "q")
    if po.shape[0] != qo.shape[0]:
        raise ValueError(f"p_offsets describes {po.shape[0] - 1} pairs, q_offsets {qo.shape[0] - 1}")
    eps = check_positive(eps, "eps")
    n_iter = check_int(n_iter, "n_iter", min_value=1)
    floor = check_positive(floor, "floor", strict=False)
    n = po.shape[0] - 1
    out = np.full(n, np.nan)
    spp = np.full(n, np.nan)
    sqq = np.full(n, np.nan)
    st = np.zeros(n, np.int64)
    if n:
        order, u_off, u_rows, pair_off = _group(po, pr, qo, qr)
        pv2, po2, pr2 = _take(pv, po, pr, order)
        qv2, qo2, qr2 = _take(qv, qo, qr, order)
        w = np.empty(n)
        wp = np.empty(n)
        wq = np.empty(n)
        s = np.empty(n, np.int64)
        with numba_threads(n_threads):
            params = (eps, n_iter, floor, _TINY, bool(self_terms))
            _k.wc_groups(E, u_off, u_rows, pair_off, po2, pr2, pv2, qo2, qr2, qv2, params, (w, wp, wq, s))
        out[order], spp[order], sqq[order], st[order] = w, wp, wq, s
    bad = np.flatnonzero(st != OK)
    if bad.size:
        out[bad] = spp[bad] = sqq[bad] = np.nan
        warnings.warn(
            f"wc_batch: {bad.size} pairs produced non-finite values (first pair {int(bad[0])}); their outputs are NaN",
            RuntimeWarning,
            stacklevel=2,
        )
    if not self_terms:
        return WCResult(out, None, None, None, st)
    return WCResult(out, spp, sqq, out - 0.5 * (spp + sqq), st)


def wc_distance(p, p_rows, q, q_rows, doc_emb, **kwargs) -> float:
    """``W_C(p, q)`` of one pair (see :func:`wc_batch`, which takes the same keywords).

    Examples
    --------
    >>> Z = np.eye(2, dtype=np.float32)
    >>> round(wc_distance([1.0], [0], [1.0], [1], Z), 4)
    1.0
    """
    p = np.atleast_1d(np.asarray(p))
    q = np.atleast_1d(np.asarray(q))
    kwargs.setdefault("self_terms", False)
    res = wc_batch(p, [0, p.shape[0]], p_rows, q, [0, q.shape[0]], q_rows, doc_emb, **kwargs)
    return float(res.wc[0])


def leakage_at_k(top_rows, injected, k: int = 10) -> np.ndarray:
    """Per-query Leakage@k of SPEC A.7.6: (number of top-k entries whose id is injected) / k.

    Parameters
    ----------
    top_rows : array_like int (n_queries, >= k)
        Read-out corpus rows per query, best first (``-1`` padding is not counted).  A
        document id may appear twice (an injected distractor already in the original pool):
        every top-k entry whose id is in the injected set counts, the original-pool copy too.
    injected : sequence of array_like int
        The injected corpus rows of each query (N of them; empty for N = 0).
    k : int

    Returns
    -------
    ndarray float64 (n_queries,)

    Raises
    ------
    ValueError
        ``top_rows`` not 2-D with at least k columns, a length mismatch, ``k < 1``.

    Examples
    --------
    >>> leakage_at_k([[5, 7, 5, 1]], [[5]], k=4).tolist()
    [0.5]
    """
    k = check_int(k, "k", min_value=1)
    top = np.asarray(top_rows)
    if top.ndim != 2 or (top.size and top.dtype.kind not in "iu"):
        raise TypeError(f"top_rows must be a 2-D integer array, got {top.dtype} {top.shape}")
    if top.shape[1] < k:
        raise ValueError(f"top_rows has {top.shape[1]} columns, fewer than k = {k}")
    if len(injected) != top.shape[0]:
        raise ValueError(f"injected has {len(injected)} entries for {top.shape[0]} queries")
    out = np.zeros(top.shape[0])
    for qi in range(top.shape[0]):
        inj = np.asarray(injected[qi], np.int64).ravel()
        if inj.size:
            head = top[qi, :k]
            out[qi] = np.count_nonzero(np.isin(head[head >= 0], inj)) / k
    return out


@register_warmup("eval.stability")
def _warmup() -> None:
    """Compile the W_C kernels on a 3-document toy problem (float32 embeddings, as bundled)."""
    Z = np.eye(3, dtype=np.float32)
    wc_batch([0.5, 0.5], [0, 2], [0, 1], [1.0], [0, 1], [2], Z, n_iter=2)
