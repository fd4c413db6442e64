"""Kernels of the theory experiments E1–E4 (SPEC A.7.7): pool geometry, flows, F(p) and wc, batched.

Layout: a batch of *pools* (geometry) and a batch of *items* (one energy/initial distribution
each) that point into it. Pool ``q`` owns the M_q x M_q blocks ``C[boff[q]:boff[q+1]]`` and
``K[...]`` (row-major float64, from ``pool_blocks``); item ``b`` owns the flat range
``ioff[b]:ioff[b+1]`` of the item arrays and uses the geometry of pool ``pool_of[b]`` (same
size). Stacked states ``P`` (S states of every item) are flat: state ``s`` of item ``b`` is
``P[s*n + ioff[b] : s*n + ioff[b+1]]`` with ``n = ioff[-1]``.

Every kernel runs ``prange`` over items (or item x state pairs), except ``jko_items``, a serial
kernel over a range of items that the wrapper runs on several threads; each item writes only its
own outputs and computes serially, so results do not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast import _codes
from jkofast._numba import kernel
from jkofast.kernels.jko.geometry import cost_kernel_dense
from jkofast.kernels.jko.solver import FlowOut, call_flow
from jkofast.kernels.ot.fixed import sinkhorn_fixed_log

__all__ = ["free_energy_items", "jko_items", "pool_blocks", "wc_items"]

OK = _codes.OK
FREE_ENERGY_FLOOR = 1e-30  # F(p): p clipped at 1e-30 (SPEC A.7.7)
WC_FLOOR = 1e-12  # wc(p, q): both clipped at 1e-12, no renormalisation
TINY = 1e-280  # smallest trusted scaled row sum in float64 (jkofast.ot.sinkhorn.TINY)


@kernel()
def _block(X, start, m):
    """Copy of the row-major m x m block of the flat ``X`` at ``start`` (a fresh C-contiguous array)."""
    out = np.empty((m, m))
    for i in range(m):
        for j in range(m):
            out[i, j] = X[start + i * m + j]
    return out


@kernel(parallel=True)
def pool_blocks(Z, offsets, boff, C, K):
    """Fill the geometry blocks of every pool (``prange`` over pools).

    ``Z`` (n, d) float32/float64 rows, pool ``q`` = rows ``offsets[q]:offsets[q+1]``;
    ``C``, ``K`` flat float64 (``boff[-1]``,): ``C = (1 - S)^2``, ``K = max(0, S)``,
    ``S = clip(cos, -1, 1)`` (``cost_kernel_dense``, the construction of ``rerank_batch``).
    """
    nq = offsets.shape[0] - 1
    for q in prange(nq):
        lo = offsets[q]
        m = offsets[q + 1] - lo
        Cb = np.empty((m, m))
        Kb = np.empty((m, m))
        cost_kernel_dense(Z, lo, lo + m, np.bool_(True), Cb, Kb)  # the argument types of pool_geometry's call
        start = boff[q]
        for i in range(m):
            for j in range(m):
                C[start + i * m + j] = Cb[i, j]
                K[start + i * m + j] = Kb[i, j]


@kernel()
def jko_items(E, P0, ioff, pool_of, boff, C, K, prm, T, P, status, tok, flow, b0, b1):
    """Per-outer-step trajectories ``p_0 .. p_T`` of the items ``b0 .. b1 - 1`` (serial).

    ``prm`` is a ``JKOParams`` with ``T = 1``: each outer step is one ``jko_flow`` call from
    the previous iterate (fresh Adam state, θ restarted at ``log p_t``, as inside a
    ``T``-step run, so ``p_T`` is bit-identical to one call with ``T`` steps). ``tok``: the
    path tokens of ``jko_flow``, the tuple ``(unrolled, log_form, unr32, imp32, imp64,
    converged, duals)``; ``flow``: the entry of its machine code for the arguments passed here
    (``jkofast._numba.native_entry``; an item whose flow entry is of other types gets ``NO_ENTRY``).
    ``P`` flat ((T+1)·n,): state t of item b at ``t*n + ioff[b]``; state 0 = ``P0``. Items
    with ``status[b] != 0`` on entry are skipped (done, or not part of a retry); an item's
    ``status`` (int32) becomes its first non-OK step status
    (``RETRY_*`` as ``jko_flow``: the wrapper reruns the item with the token added; its later
    states are left as they are). The wrapper runs disjoint item ranges on several threads.
    """
    n = ioff[ioff.shape[0] - 1]
    for b in range(b0, b1):
        if status[b] != 0:
            continue
        lo = ioff[b]
        hi = ioff[b + 1]
        m = hi - lo
        for i in range(m):
            P[lo + i] = P0[lo + i]
        if m == 1:
            for t in range(1, T + 1):
                P[t * n + lo] = 1.0
            continue
        q = pool_of[b]
        Cb = _block(C, boff[q], m)
        Kb = _block(K, boff[q], m)
        losses = np.empty(prm.T * prm.inner)
        f = np.empty(m)
        g = np.empty(m)
        diag = np.zeros(2, np.int64)
        for t in range(T):
            res = FlowOut(P[(t + 1) * n + lo : (t + 1) * n + hi], losses, f, g, diag)
            st = call_flow(flow, (P[t * n + lo : t * n + hi], E[lo:hi], Cb, Cb, Kb, prm, res, *tok))
            if st != OK:
                status[b] = st
                break


@kernel(parallel=True)
def free_energy_items(P, n_states, E, ioff, pool_of, boff, K, lam, rho, out):
    """``F(p) = <p,E> + λ Σ p log p + ½ρ pᵀKp`` of every (state, item), p clipped at 1e-30.

    ``P`` flat (n_states·n,), ``E`` (n,) float64, ``out`` (n_states·nb,) float64: state s of
    item b at ``s*nb + b``. Float64 sums in index order.
    """
    n = ioff[ioff.shape[0] - 1]
    nb = ioff.shape[0] - 1
    for k in prange(n_states * nb):
        s = k // nb
        b = k - s * nb
        lo = ioff[b]
        m = ioff[b + 1] - lo
        start = boff[pool_of[b]]
        base = s * n + lo
        lin = 0.0
        ent = 0.0
        quad = 0.0
        for i in range(m):
            pi = max(P[base + i], FREE_ENERGY_FLOOR)
            lin += pi * E[lo + i]
            ent += pi * np.log(pi)
            kp = 0.0
            for j in range(m):
                kp += K[start + i * m + j] * max(P[base + j], FREE_ENERGY_FLOOR)
            quad += pi * kp
        out[k] = lin + lam * ent + 0.5 * rho * quad


@kernel(parallel=True)
def wc_items(P, Q, n_states, ioff, pool_of, boff, C, eps, n_iter, out, status):
    """``wc(p, q)`` of every (state, item) pair: ``<Π, C>`` after ``n_iter`` cold Sinkhorn pairs.

    Log-marginals ``log max(p, 1e-12)``, ``log max(q, 1e-12)`` used as given (no
    renormalisation), row update first, zero init (``sinkhorn_fixed_log``, the published
    loss). ``P``, ``Q`` flat (n_states·n,), ``out`` / ``status`` (n_states·nb,) as in
    ``free_energy_items``.
    """
    n = ioff[ioff.shape[0] - 1]
    nb = ioff.shape[0] - 1
    for k in prange(n_states * nb):
        s = k // nb
        b = k - s * nb
        lo = ioff[b]
        m = ioff[b + 1] - lo
        Cb = _block(C, boff[pool_of[b]], m)
        la = np.empty(m)
        lb = np.empty(m)
        base = s * n + lo
        for i in range(m):
            la[i] = np.log(max(P[base + i], WC_FLOOR))
            lb[i] = np.log(max(Q[base + i], WC_FLOOR))
        Kg = np.empty((m, m))
        Kg_T = np.empty((m, m))
        f = np.zeros(m)
        g = np.zeros(m)
        wm = np.empty(m)
        sm = np.empty(m)
        wn = np.empty(m)
        sn = np.empty(m)
        cost, st = sinkhorn_fixed_log(Cb, Cb, Kg, Kg_T, la, lb, eps, n_iter, TINY, f, g, wm, sm, wn, sn)
        out[k] = cost
        status[k] = st
