"""The published stability metric W_C (SPEC A.7.5), batched over many (p, q) pairs.

For a pair of distributions over two candidate pools (corpus rows ``p_rows`` with masses
``p_val``, likewise ``q``), on the union ``U`` = sorted distinct corpus rows of both pools:

1. lift each distribution onto ``U`` (a row repeated inside a pool sums its masses), add
   ``floor`` (1e-8) to every entry and renormalise;
2. cost ``C_ij = (1 - clip(z_i·z_j, -1, 1))²`` from the corpus embeddings (unit rows: the dot
   product is the cosine); the diagonal is not forced to 0 (float rounding, as published);
3. the Sinkhorn core of SPEC A.4.3 — zero duals, exactly ``n_iter`` row-then-column update
   pairs at ``eps`` — and the transport cost ``<Π, C>`` of the final plan (no entropy term).

Pairs are grouped by their union (all methods of one (query, perturbation) share one pool
pair, hence one ``C`` and one Gibbs kernel); ``prange`` runs over groups and every group
writes only its own pairs' outputs, so results do not depend on the thread count.  With
``self_terms`` the two self-distances ``W_C(p, p)`` and ``W_C(q, q)`` on the same ``U`` (same
floor, same ``C``) are computed too: the debiased Sinkhorn divergence is
``W_C(p, q) − ½W_C(p, p) − ½W_C(q, q)``.

Arithmetic: the Gram entries are float64 sums of float32 (or float64) products, the Sinkhorn
half-steps and the plan cost are the float64 kernels of :mod:`jkofast.kernels.ot.fixed`
(scaled form, exact log-sum-exp fallback on underflow).  The reference runs float32; the
difference is far below the metric's scale (tests/eval/test_stability.py measures it).

Preconditions (checked by :func:`jkofast.eval.stability.wc_batch`): ``emb`` C-contiguous
(n_docs, d) float32 or float64; ``u_off`` (G + 1,) int64 with ``u_rows`` sorted distinct
corpus rows per group; ``pair_off`` (G + 1,) int64 over pairs ordered by group; ragged
``p_off/p_rows/p_val`` and ``q_off/q_rows/q_val`` (one segment per pair, rows inside the
pair's group union, values finite, >= 0, positive total); ``eps > 0``; ``n_iter >= 1``;
outputs (n_pairs,) preallocated.  Status per pair: ``OK`` or ``NON_FINITE``.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast import _codes
from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel
from jkofast.kernels.ot.fixed import plan_cost, update_duals
from jkofast.kernels.ot.sinkhorn_log import gibbs_kernel
from jkofast.kernels.sorting import searchsorted_left

__all__ = ["lift_log", "union_cost", "wc_fixed", "wc_groups"]

_ARITH = set(FASTMATH_ARITH)  # numba wants a set, _config holds a frozenset


@kernel(fastmath=_ARITH)
def _dot(emb, i, j):
    """``emb[i]·emb[j]`` summed in float64 (pure arithmetic leaf)."""
    s = 0.0
    for t in range(emb.shape[1]):
        s += np.float64(emb[i, t]) * np.float64(emb[j, t])
    return s


@kernel()
def union_cost(emb, rows, C):
    """Fill the symmetric ``C_ij = (1 - clip(emb[rows_i]·emb[rows_j], -1, 1))²`` (float64)."""
    n = rows.shape[0]
    for i in range(n):
        for j in range(i, n):
            s = _dot(emb, rows[i], rows[j])
            s = min(1.0, max(-1.0, s))
            c = (1.0 - s) * (1.0 - s)
            C[i, j] = c
            C[j, i] = c


@kernel()
def lift_log(U, rows, val, floor, out):
    """``out = log(normalise(lift(val) + floor))`` on the sorted union ``U``.

    ``lift`` sums the masses of ``val`` at the position of each ``rows`` entry in ``U``
    (binary search; every row is in ``U``); as published, ``val`` is used as given (a
    distribution, summing to 1 up to rounding): the floor is added, then the whole is
    renormalised.
    """
    n = U.shape[0]
    for i in range(n):
        out[i] = 0.0
    for k in range(rows.shape[0]):
        pos = searchsorted_left(U, rows[k])
        out[pos] += val[k]
    s = 0.0
    for i in range(n):
        out[i] += floor
        s += out[i]
    for i in range(n):
        out[i] = np.log(out[i] / s)


@kernel()
def wc_fixed(C, Kg, cmin, log_a, log_b, eps, n_iter, tiny, f, g, wm, sm, wn, sn):
    """``<Π, C>`` after exactly ``n_iter`` pairs from zero duals (``C`` symmetric, so ``Cᵀ = C``).

    The loop of :func:`jkofast.kernels.ot.fixed.sinkhorn_fixed_log` with the Gibbs kernel
    computed once by the caller (one per union, shared by every pair of the group).
    Returns ``(cost, status)``.
    """
    for i in range(f.shape[0]):
        f[i] = 0.0
        g[i] = 0.0
    for _ in range(n_iter):
        update_duals(Kg, C, cmin, eps, tiny, log_a, g, wn, sm, f)
        update_duals(Kg, C, cmin, eps, tiny, log_b, f, wm, sn, g)
    status = _codes.OK
    for i in range(f.shape[0]):
        if np.isnan(f[i]) or f[i] == np.inf or np.isnan(g[i]) or g[i] == np.inf:
            status = _codes.NON_FINITE
    cost = plan_cost(C, Kg, cmin, f, g, eps, tiny, wn, sm)
    if not np.isfinite(cost):
        status = _codes.NON_FINITE
    return cost, status


@kernel(parallel=True)
def wc_groups(emb, u_off, u_rows, pair_off, p_off, p_rows, p_val, q_off, q_rows, q_val, params, out):
    """W_C of every pair, ``prange`` over union groups.

    Group ``g`` owns the union ``u_rows[u_off[g]:u_off[g+1]]`` and pairs
    ``pair_off[g]:pair_off[g+1]``. ``params = (eps, n_iter, floor, tiny, self_terms)``;
    ``out = (wc, w_pp, w_qq, status)`` is written per pair (``w_pp``/``w_qq`` untouched when
    ``self_terms`` is False).
    """
    eps, n_iter, floor, tiny, self_terms = params
    wc, w_pp, w_qq, status = out
    n_groups = u_off.shape[0] - 1
    for gi in prange(n_groups):
        U = u_rows[u_off[gi] : u_off[gi + 1]]
        n = U.shape[0]
        C = np.empty((n, n))
        union_cost(emb, U, C)
        Kg = np.empty((n, n))
        cmin = gibbs_kernel(C, eps, Kg)
        la = np.empty(n)
        lb = np.empty(n)
        f = np.empty(n)
        g = np.empty(n)
        wm = np.empty(n)
        sm = np.empty(n)
        wn = np.empty(n)
        sn = np.empty(n)
        for k in range(pair_off[gi], pair_off[gi + 1]):
            lift_log(U, p_rows[p_off[k] : p_off[k + 1]], p_val[p_off[k] : p_off[k + 1]], floor, la)
            lift_log(U, q_rows[q_off[k] : q_off[k + 1]], q_val[q_off[k] : q_off[k + 1]], floor, lb)
            cost, st = wc_fixed(C, Kg, cmin, la, lb, eps, n_iter, tiny, f, g, wm, sm, wn, sn)
            wc[k] = cost
            if self_terms:
                c_pp, st_pp = wc_fixed(C, Kg, cmin, la, la, eps, n_iter, tiny, f, g, wm, sm, wn, sn)
                c_qq, st_qq = wc_fixed(C, Kg, cmin, lb, lb, eps, n_iter, tiny, f, g, wm, sm, wn, sn)
                w_pp[k] = c_pp
                w_qq[k] = c_qq
                if st == _codes.OK:
                    st = st_pp if st_pp != _codes.OK else st_qq
            status[k] = st
