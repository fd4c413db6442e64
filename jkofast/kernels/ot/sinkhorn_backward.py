"""Hand-written reverse sweep of the published fixed-iteration log-domain Sinkhorn loss (SPEC A.4.3).

The published ``log_sinkhorn_loss`` runs ``n_warm = max(0, n_iter - n_iter_grad)`` update pairs detached
(their duals are constants), then ``n_track = n_iter_grad`` tracked pairs, row update first,

    f_k = eps * (log_a - LSE_j((g_{k-1} - C)/eps)),    g_k = eps * (log_b - LSE_i((f_k - C)/eps)),

and returns ``L = sum_ij Pi_ij C_ij`` with ``Pi = exp((f_T + g_T - C)/eps)``.  Its gradient w.r.t.
``log_a``, ``log_b`` and ``C`` flows through the tracked pairs and the final plan only (C's use in the
warm pairs is detached too).  With the row softmax ``P^k_ij = exp((g_{k-1,j} - C_ij)/eps)`` / row sum and
the column softmax ``Q^k_ij = exp((f_k,i - C_ij)/eps)`` / column sum, the reverse sweep is

    plan:    fbar_i = sum_j Pi_ij C_ij / eps,  gbar_j = sum_i Pi_ij C_ij / eps,  Cbar_ij = Pi_ij (1 - C_ij/eps)
    pair k (k = T .. 1), column half-step first:
             bbar_j += eps gbar_j,  fbar_i -= sum_j Q^k_ij gbar_j,  Cbar_ij += Q^k_ij gbar_j
             abar_i += eps fbar_i,  gbar_j = -sum_i P^k_ij fbar_i,  Cbar_ij += P^k_ij fbar_i

(``fbar`` of ``f_k`` has no other use: ``f_{k+1}`` reads ``g_k`` only.)  The softmax weights use the scaled
form of :mod:`jkofast.kernels.ot.fixed`: ``Q^k_ij = Kg_ij u_i / s_j`` with ``u_i = exp((f_k,i - max f_k)/eps)``
and ``s = Kg^T u``, so a half-step costs one matvec and one fused sweep, no M x N exps; a row or column
whose scaled sum is at or below ``tiny`` is recomputed by the exact max-shifted log-sum-exp.  The final
plan is evaluated entry by entry (exact exps).  Strict IEEE throughout (log-domain code); serial (the
single pools this serves are a few hundred items), hence thread-count independent.

Preconditions (checked by :func:`jkofast.compat._solver.log_sinkhorn_loss_and_grad`): float64 C-contiguous
arrays; ``C`` finite (M, N), ``C_T`` its contiguous transpose, ``Kg``/``Kg_T`` (M, N)/(N, M) work arrays;
``log_a`` (M,), ``log_b`` (N,) finite or -inf with at least one finite entry each; ``eps > 0``;
``n_warm >= 0``; ``F`` (T + 1, M) and ``G`` (T + 1, N) with ``F[0]``, ``G[0]`` zero on entry.
"""

from __future__ import annotations

import numpy as np

from jkofast import _codes
from jkofast._numba import kernel
from jkofast.kernels.ot.fixed import gibbs_fill, plan_cost, update_duals
from jkofast.kernels.ot.sinkhorn_log import matvec as _matvec

__all__ = ["sinkhorn_fixed_log_backward", "sinkhorn_fixed_log_tracked"]


@kernel()
def sinkhorn_fixed_log_tracked(C, C_T, Kg, Kg_T, log_a, log_b, eps, n_warm, tiny, F, G, wm, sm, wn, sn):
    """Run the published loss keeping its tracked iterates; return ``(cost, status)``.

    ``n_warm`` pairs update ``F[0]``, ``G[0]`` in place (the detached warm start, the same operations as
    :func:`jkofast.kernels.ot.fixed.sinkhorn_fixed_log`, so the cost is bit-identical to it for
    ``n_warm + T`` pairs); tracked pair ``k = 1 .. T`` writes ``F[k]`` then ``G[k]``.  ``Kg``/``Kg_T`` hold
    the Gibbs kernel on return (the backward reuses both).  ``wm``/``sm`` (M,) and
    ``wn``/``sn`` (N,) scratch.  Status ``OK``, or ``NON_FINITE`` when the cost or a final dual is NaN/+inf.
    """
    cmin = gibbs_fill(C, eps, Kg, Kg_T)
    f0 = F[0]
    g0 = G[0]
    for _ in range(n_warm):
        update_duals(Kg, C, cmin, eps, tiny, log_a, g0, wn, sm, f0)
        update_duals(Kg_T, C_T, cmin, eps, tiny, log_b, f0, wm, sn, g0)
    n_track = F.shape[0] - 1
    for k in range(1, n_track + 1):
        update_duals(Kg, C, cmin, eps, tiny, log_a, G[k - 1], wn, sm, F[k])
        update_duals(Kg_T, C_T, cmin, eps, tiny, log_b, F[k], wm, sn, G[k])
    f = F[n_track]
    g = G[n_track]
    status = _codes.OK
    for i in range(f.shape[0]):
        if np.isnan(f[i]) or f[i] == np.inf:
            status = _codes.NON_FINITE
    for j in range(g.shape[0]):
        if np.isnan(g[j]) or g[j] == np.inf:
            status = _codes.NON_FINITE
    cost = plan_cost(C, Kg, cmin, f, g, eps, tiny, wn, sm)
    if not np.isfinite(cost):
        status = _codes.NON_FINITE
    return cost, status


@kernel()
def _scaled_weights(x, eps, out):
    """``out_i = exp((x_i - max x)/eps)`` (0 for ``x_i = -inf``)."""
    xmax = -np.inf
    for i in range(x.shape[0]):
        if x[i] > xmax:
            xmax = x[i]
    inv = 1.0 / eps
    for i in range(x.shape[0]):
        out[i] = np.exp((x[i] - xmax) * inv)


@kernel()
def _exact_softmax(Crow, other, eps, out):
    """``out_j = softmax_j((other_j - Crow_j)/eps)`` by the max-shifted log-sum-exp (underflowing rows)."""
    inv = 1.0 / eps
    mx = -np.inf
    for j in range(Crow.shape[0]):
        t = (other[j] - Crow[j]) * inv
        if t > mx:
            mx = t
    acc = 0.0
    for j in range(Crow.shape[0]):
        acc += np.exp((other[j] - Crow[j]) * inv - mx)
    lse = mx + np.log(acc)
    for j in range(Crow.shape[0]):
        out[j] = np.exp((other[j] - Crow[j]) * inv - lse)


@kernel()
def _plan_adjoint(C, f, g, eps, fbar, gbar, grad_C):
    """Adjoint of ``L = sum_ij exp((f_i + g_j - C_ij)/eps) C_ij``: writes ``fbar``, ``gbar``, ``grad_C``."""
    m, n = C.shape
    inv = 1.0 / eps
    for j in range(n):
        gbar[j] = 0.0
    for i in range(m):
        acc = 0.0
        for j in range(n):
            c = C[i, j]
            p = np.exp((f[i] + g[j] - c) * inv)
            pc = p * c * inv
            grad_C[i, j] = p - pc
            acc += pc
            gbar[j] += pc
        fbar[i] = acc


@kernel()
def _column_adjoint(C_T, Kg, Kg_T, f, eps, tiny, gbar, fbar, grad_C, u, s, w, q):
    """Reverse the column half-step ``g = eps (log_b - LSE_i((f_i - C_ij)/eps))``.

    Subtracts ``Q gbar`` from ``fbar`` (which holds the plan's part for the last pair, zeros otherwise)
    and adds ``Q_ij gbar_j`` to ``grad_C``; ``u``/``q`` (M,) and ``s``/``w`` (N,) scratch.
    """
    m, n = Kg.shape
    _scaled_weights(f, eps, u)
    _matvec(Kg_T, u, s)
    for j in range(n):
        w[j] = gbar[j] / s[j] if s[j] > tiny else 0.0
    for i in range(m):
        if u[i] == 0.0:
            continue
        acc = 0.0
        for j in range(n):
            t = Kg[i, j] * w[j]
            grad_C[i, j] += u[i] * t
            acc += t
        fbar[i] -= u[i] * acc
    for j in range(n):
        if s[j] <= tiny and gbar[j] != 0.0:
            _exact_softmax(C_T[j], f, eps, q)
            for i in range(m):
                t = q[i] * gbar[j]
                grad_C[i, j] += t
                fbar[i] -= t


@kernel()
def _row_adjoint(C, Kg, g_prev, eps, tiny, fbar, gbar_prev, grad_C, v, s, q):
    """Reverse the row half-step ``f = eps (log_a - LSE_j((g_prev_j - C_ij)/eps))``.

    Writes ``gbar_prev = -P^T fbar`` and adds ``P_ij fbar_i`` to ``grad_C``; ``v``/``q`` (N,), ``s`` (M,) scratch.
    """
    m, n = Kg.shape
    _scaled_weights(g_prev, eps, v)
    _matvec(Kg, v, s)
    for j in range(n):
        gbar_prev[j] = 0.0
    for i in range(m):
        if fbar[i] == 0.0:
            continue
        if s[i] > tiny:
            w = fbar[i] / s[i]
            for j in range(n):
                t = Kg[i, j] * v[j] * w
                grad_C[i, j] += t
                gbar_prev[j] -= t
        else:
            _exact_softmax(C[i], g_prev, eps, q)
            for j in range(n):
                t = q[j] * fbar[i]
                grad_C[i, j] += t
                gbar_prev[j] -= t


@kernel()
def sinkhorn_fixed_log_backward(C, C_T, Kg, Kg_T, eps, tiny, F, G, grad_a, grad_b, grad_C, wk_m, wk_n):
    """Gradients of the loss of :func:`sinkhorn_fixed_log_tracked` w.r.t. ``log_a``, ``log_b``, ``C``.

    ``Kg``/``Kg_T``, ``F``, ``G`` as that kernel left them (``T = F.shape[0] - 1`` tracked pairs; ``F[0]``,
    ``G[0]`` the constant warm duals).  Overwrites ``grad_a`` (M,), ``grad_b`` (N,), ``grad_C`` (M, N)
    with ``dL/dlog_a``, ``dL/dlog_b``, ``dL/dC`` (for an upstream gradient of 1).  ``wk_m`` (3, M) and
    ``wk_n`` (4, N) scratch (or more rows).  No status: the forward's status covers the inputs.
    """
    n_track = F.shape[0] - 1
    fbar = wk_m[0]
    gbar = wk_n[0]
    gprev = wk_n[1]
    for i in range(grad_a.shape[0]):
        grad_a[i] = 0.0
    for j in range(grad_b.shape[0]):
        grad_b[j] = 0.0
    _plan_adjoint(C, F[n_track], G[n_track], eps, fbar, gbar, grad_C)
    for k in range(n_track, 0, -1):
        for j in range(grad_b.shape[0]):
            grad_b[j] += eps * gbar[j]
        if k < n_track:
            for i in range(fbar.shape[0]):
                fbar[i] = 0.0
        _column_adjoint(C_T, Kg, Kg_T, F[k], eps, tiny, gbar, fbar, grad_C, wk_m[1], wk_n[2], wk_n[3], wk_m[2])
        for i in range(grad_a.shape[0]):
            grad_a[i] += eps * fbar[i]
        _row_adjoint(C, Kg, G[k - 1], eps, tiny, fbar, gprev, grad_C, wk_n[2], wk_m[1], wk_n[3])
        for j in range(gbar.shape[0]):
            gbar[j] = gprev[j]
