"""Unrolled transport term on float32 Gibbs operators (the float32 parity path, SPEC A.4.3, A.4.6).

``w_unrolled32`` is ``jkofast.kernels.ot.transport.w_unrolled_scaled`` with every matvec on the
float32 operators of a ``GibbsOps`` (``K = Kg``, ``KT = Kgᵀ``, ``KC = Kg ⊙ C``, ``KCT``,
contiguous, float32; ``xs`` an M float32 scratch): each product is a row-dot ``matvec_lp``
whose sums run in float32 (eight lanes per SIMD register instead of four; the published
solver computes in float32 throughout), while the scalings ``u, v``, the tracked pairs, the
loss and the adjoint accumulations stay float64. Each half-step normalises in two
branch-free passes straight into ``u`` / ``v``, the second also writing the float32 operand
of the next matvec. Same cold start, same ``n_warm + n_grad`` pairs, same
hand-written adjoint of the last ``n_grad`` pairs.

Float32 range: the caller builds the operators only when every ``Kg`` entry is a normal float32
(``(max C - min C)/ε <= 60``); inside, a scaled sum or normalised scaling at or below
``TINY32`` (the float32 image of an underflow) or a non-finite loss returns ``ok = False`` and
the caller evaluates that step in float64.
"""

from __future__ import annotations

import numpy as np

from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel
from jkofast.kernels.ot.sinkhorn_log import matvec_lp

__all__ = ["TINY32", "w_unrolled32"]

# smallest trusted scaled sum / scaling on the float32 path: 1e-30 keeps every float32 operand
# (scalings, ratios up to ~1e30 in the adjoint) normal and finite
TINY32 = 1e-30


@kernel(fastmath=FASTMATH_ARITH)
def _ratio32(w, y, tmp):
    """``tmp = w / y`` where ``w > 0`` (0 elsewhere); return ``(max tmp, count of w > 0 with y <= TINY32)``.

    Branch-free (selects), so it vectorises; ``scale_normalise``'s first pass.
    """
    tmax = 0.0
    bad = 0
    for i in range(w.shape[0]):
        wi = w[i]
        yi = y[i]
        use = (wi > 0.0) & (yi > TINY32)
        bad += (wi > 0.0) & (yi <= TINY32)
        r = wi / yi if use else 0.0
        tmp[i] = r
        tmax = max(tmax, r)
    return tmax, bad


@kernel(fastmath=FASTMATH_ARITH)
def _scale32(w, tmp, inv, xs):
    """``tmp *= inv``, ``xs = tmp`` in float32 (the next matvec's operand); count w > 0 with tmp <= TINY32."""
    bad = 0
    for i in range(w.shape[0]):
        t = tmp[i] * inv
        tmp[i] = t
        xs[i] = t
        bad += (w[i] > 0.0) & (t <= TINY32)
    return bad


@kernel(inline="always")
def _half_step32(A, w, xs, y, tmp):
    """``y = A @ xs`` (float32), ``tmp = w / y`` normalised to max 1, ``xs = tmp``; False = underflow.

    ``scale_normalise`` of the float64 path in two vectorised passes, the float32 copy of the
    result fused into the second (it is the next half-step's operand).
    """
    matvec_lp(A, xs, y)
    tmax, bad = _ratio32(w, y, tmp)
    if bad > 0 or not tmax > 0.0 or not np.isfinite(tmax):
        return False
    return _scale32(w, tmp, 1.0 / tmax, xs) == 0


@kernel(inline="always")
def _forward32(ops, n_warm, n_grad, tr, sk):
    """Cold-started scaled pairs through ``ops`` (float32), the last ``n_grad`` stored in ``tr``; False = underflow."""
    pa, u, y, _, qb, v, z, _ = sk
    U, S, V, TT, _ = tr
    K, KT, xs = ops.K, ops.KT, ops.xs
    m = pa.shape[0]
    for j in range(m):
        v[j] = 1.0  # g = 0
        xs[j] = 1.0
    for it in range(n_warm + n_grad):
        k = it - n_warm
        if k >= 0:
            for j in range(m):
                V[k, j] = v[j]
            ok = _half_step32(K, pa, xs, S[k], u)
        else:
            ok = _half_step32(K, pa, xs, y, u)
        if not ok:
            return False
        if k >= 0:
            for i in range(m):
                U[k, i] = u[i]
            ok = _half_step32(KT, qb, xs, TT[k], v)
            for j in range(m):
                z[j] = TT[k, j]
        else:
            ok = _half_step32(KT, qb, xs, z, v)
        if not ok:
            return False
    return True


@kernel(inline="always")
def _lp(A, x, xs, out):
    """``out = A @ x`` through the float32 scratch ``xs`` (``xs = x`` rounded to A's dtype)."""
    for j in range(x.shape[0]):
        xs[j] = x[j]
    matvec_lp(A, xs, out)


@kernel()
def w_unrolled32(ops, eps, n_warm, n_grad, tr, sk, w, abar):
    """``<Π, C>`` after ``n_warm + n_grad`` cold-started pairs and ``abar = ∂<Π,C>/∂a``, float32 operators.

    ``ops`` a float32 ``GibbsOps`` of the pool (``K``, ``KT``, ``KC``, ``KCT``, ``xs``); weights
    ``sk.pa = p``, ``sk.qb = q``; ``tr`` the ``Tracked`` pairs (n_grad x M, float64); ``w`` (>= 2, M)
    float64 scratch. As ``w_unrolled_scaled``: the plan of the last pair ``Π_ij = u_i Kg_ij qb_j /
    t_j``, the adjoint two matvecs per tracked pair. Returns ``(ok, loss)``; ``ok`` False: an
    underflow below ``TINY32`` or a non-finite result (evaluate the step in float64).
    """
    if not _forward32(ops, n_warm, n_grad, tr, sk):
        return False, 0.0
    pa, u, y, tmp_m, qb, _, z, tmp_n = sk
    U, S, V, TT, _ = tr
    xs = ops.xs
    fbar = w[0]
    gbar = w[1]
    m = pa.shape[0]
    for j in range(m):
        y[j] = qb[j] / z[j]
    _lp(ops.KC, y, xs, tmp_m)
    loss = 0.0
    inv = 1.0 / eps
    for i in range(m):
        r = u[i] * tmp_m[i]
        loss += r
        fbar[i] = r * inv
    _lp(ops.KCT, u, xs, tmp_n)
    for j in range(m):
        gbar[j] = y[j] * tmp_n[j] * inv
    for i in range(m):
        abar[i] = 0.0
    for k in range(n_grad - 1, -1, -1):
        for j in range(m):
            y[j] = gbar[j] / TT[k, j]
        _lp(ops.K, y, xs, tmp_m)
        for i in range(m):
            fbar[i] -= U[k, i] * tmp_m[i]
            abar[i] += eps * fbar[i]
            y[i] = fbar[i] / S[k, i]
        _lp(ops.KT, y, xs, tmp_n)
        for j in range(m):
            gbar[j] = -V[k, j] * tmp_n[j]
            fbar[j] = 0.0
    ok = np.isfinite(loss)
    for i in range(m):
        if not np.isfinite(abar[i]):
            ok = False
    return ok, loss
