"""Fixed-iteration log-domain Sinkhorn on given log-marginals: the published standalone loss (SPEC A.4.3).

``sinkhorn_fixed_log`` runs exactly ``n_iter`` update pairs from zero duals, row update first,

    f_i <- eps * (log_a_i - LSE_j((g_j - C_ij)/eps))
    g_j <- eps * (log_b_j - LSE_i((f_i - C_ij)/eps))

and returns the transport cost ``sum_ij exp((f_i + g_j - C_ij)/eps) * C_ij`` of the final plan.
The log-marginals are used as given: no renormalisation (the published loss does none either, so
unnormalised inputs such as ``log(clip(p, 1e-12))`` give the published value).

Each half-step uses the **scaled** form: with the fixed Gibbs kernel ``Kg = exp(-(C - min C)/eps)``,
``LSE_j((g_j - C_ij)/eps) = (max g - min C)/eps + log (Kg v)_i`` where ``v_j = exp((g_j - max g)/eps)``:
one M x N multiply-add matvec plus M exps and logs instead of M x N exps.  A row whose sum falls to
``tiny`` or below (small eps: the terms underflow) is recomputed by the exact max-shifted
log-sum-exp, so the result is exact in float64 for any eps.

Serial on purpose: the calls this serves are single pools of a few hundred items, where a parallel
sweep per half-step costs more than the sweep itself; results are therefore thread-count independent.

Preconditions (checked by the wrapper :func:`jkofast.compat._solver.log_sinkhorn_loss`): float64
C-contiguous arrays; ``C`` finite, shape (M, N); ``C_T`` its contiguous transpose; ``Kg``/``Kg_T``
(M, N)/(N, M) work arrays; ``log_a`` (M,) and ``log_b`` (N,) finite or -inf with at least one finite
entry each; ``eps > 0``; ``n_iter >= 0``; ``f`` (M,), ``g`` (N,) zero on entry (overwritten);
``wm``/``sm`` (M,) and ``wn``/``sn`` (N,) scratch.  Status: ``OK``, or ``NON_FINITE`` when the cost
or a dual came out NaN or +inf.
"""

from __future__ import annotations

import numpy as np

from jkofast import _codes
from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel
from jkofast.kernels.ot.sinkhorn_log import matvec as _matvec

__all__ = ["gibbs_fill", "plan_cost", "sinkhorn_fixed_log", "update_duals"]

_ARITH = set(FASTMATH_ARITH)  # numba wants a set, _config holds a frozenset


# sinkhorn_log.gibbs_kernel plus a Kg_T fill, which this module's column half-step reads; kept as two kernels
@kernel()
def gibbs_fill(C, eps, Kg, Kg_T):
    """Fill ``Kg = exp(-(C - min C)/eps)`` and ``Kg_T`` its transpose (entries in (0, 1]); return ``min C``."""
    m, n = C.shape
    cmin = np.inf
    for i in range(m):
        for j in range(n):
            if C[i, j] < cmin:
                cmin = C[i, j]
    inv = 1.0 / eps
    for i in range(m):
        for j in range(n):
            Kg[i, j] = np.exp(-(C[i, j] - cmin) * inv)
    for j in range(n):
        for i in range(m):
            Kg_T[j, i] = Kg[i, j]
    return cmin


@kernel()
def update_duals(Kg, C, cmin, eps, tiny, log_w, other, v, s, out):
    """One half-step: ``out_i = eps * (log_w_i - LSE_j((other_j - C_ij)/eps))`` for every row i of ``C``.

    ``Kg`` is the Gibbs kernel of ``C`` (same orientation), ``cmin`` its shift; ``v`` (len(other),) and
    ``s`` (len(out),) are scratch.  Rows with ``log_w_i = -inf`` get ``-inf``; rows whose scaled sum is
    at or below ``tiny`` are recomputed with the exact max-shifted log-sum-exp.
    """
    m, n = C.shape
    inv = 1.0 / eps
    omax = -np.inf
    for j in range(n):
        if other[j] > omax:
            omax = other[j]
    for j in range(n):
        v[j] = np.exp((other[j] - omax) * inv)
    # plan_cost repeats this max-shifted v prologue; inline in both (then Kg@v here, (Kg*C)@v there)
    _matvec(Kg, v, s)
    shift = (omax - cmin) * inv
    for i in range(m):
        if log_w[i] == -np.inf:
            out[i] = -np.inf
        elif s[i] > tiny:
            out[i] = eps * (log_w[i] - shift - np.log(s[i]))
        else:
            # exact LSE row as in sinkhorn_log_update_rows, here only for rows whose scaled sum underflows
            mx = -np.inf
            for j in range(n):
                t = (other[j] - C[i, j]) * inv
                if t > mx:
                    mx = t
            acc = 0.0
            for j in range(n):
                acc += np.exp((other[j] - C[i, j]) * inv - mx)
            out[i] = eps * (log_w[i] - mx - np.log(acc))


@kernel(fastmath=_ARITH)
def _matvec_hadamard(A, B, x, out):
    """``out = (A * B) @ x`` (elementwise product, then matvec); serial, one row at a time."""
    m, n = A.shape
    for i in range(m):
        s = 0.0
        for j in range(n):
            s += A[i, j] * B[i, j] * x[j]
        out[i] = s


@kernel()
def plan_cost(C, Kg, cmin, f, g, eps, tiny, v, s):
    """``sum_ij exp((f_i + g_j - C_ij)/eps) * C_ij``, the transport cost of the plan of ``(f, g)``.

    Scaled like the half-steps: row i contributes ``exp(log r_i + (f_i + max g - cmin)/eps)`` with
    ``r_i = sum_j Kg_ij C_ij exp((g_j - max g)/eps)``; a row with ``r_i <= tiny`` (underflow, or
    zero / negative costs) is summed exactly entry by entry.  ``v`` (N,), ``s`` (M,) scratch.
    """
    m, n = C.shape
    inv = 1.0 / eps
    gmax = -np.inf
    for j in range(n):
        if g[j] > gmax:
            gmax = g[j]
    for j in range(n):
        v[j] = np.exp((g[j] - gmax) * inv)
    # same max-shifted v as update_duals; the sweep after it differs ((Kg*C)@v, a scalar total)
    _matvec_hadamard(Kg, C, v, s)
    total = 0.0
    for i in range(m):
        if f[i] == -np.inf:
            continue
        if s[i] > tiny:
            total += np.exp(np.log(s[i]) + (f[i] + gmax - cmin) * inv)
        else:
            r = 0.0
            for j in range(n):
                r += np.exp((f[i] + g[j] - C[i, j]) * inv) * C[i, j]
            total += r
    return total


@kernel()
def sinkhorn_fixed_log(C, C_T, Kg, Kg_T, log_a, log_b, eps, n_iter, tiny, f, g, wm, sm, wn, sn):
    """Exactly ``n_iter`` row-then-column pairs from the duals in ``f``, ``g``; returns ``(cost, status)``.

    ``f``, ``g`` hold the final duals on return; ``cost`` is ``<Pi, C>`` of the final plan.
    """
    cmin = gibbs_fill(C, eps, Kg, Kg_T)
    for _ in range(n_iter):
        update_duals(Kg, C, cmin, eps, tiny, log_a, g, wn, sm, f)
        update_duals(Kg_T, C_T, cmin, eps, tiny, log_b, f, wm, sn, g)
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
