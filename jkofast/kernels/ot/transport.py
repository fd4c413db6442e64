"""Transport term ``W(p, q) = <Π, C>`` of the JKO step and its gradient (SPEC A.4.3, A.4.6-A.4.7).

Three gradient paths, each one kernel (the JKO driver in ``jkofast.kernels.jko.solver``
and ``jkofast.ot.entropic.transport_cost_grad`` call them):

* ``w_unrolled_scaled`` / ``w_unrolled_log`` — the published behaviour: ``<Π, C>`` of a
  cold-started Sinkhorn with exactly ``n_warm + n_grad`` pairs, differentiated by the
  hand-written adjoint of the last ``n_grad`` pairs (warm phase frozen). Scaled (matvec)
  form; the log form when a sum underflows.
* ``w_implicit_counted`` — exact gradient of ``<Π*, C>`` at a converged plan kept in the
  scaled form across calls: the symmetric system of SPEC A.4.7 (Schur form, Jacobi-PCG on
  the tangent space), optional Newton steps on the duals.
* ``w_converged`` — converged plan from the log-domain driver (any ε), then either the
  implicit gradient of ``<Π*, C>`` (``OBJ_TRANSPORT``) or ``OT_ε`` with gradient ``f``
  (``OBJ_ENTROPIC``, envelope theorem).

Operands cross the kernel boundaries as the module-level NamedTuples below: ``GibbsCost``
(``jkofast.kernels.ot.sinkhorn_log``), ``Plan``, ``GibbsOps``, ``Tracked``, ``SinkhornWork``.
``w`` is an (8, M) float64 scratch whose rows are the vectors of the implicit solve.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jkofast import _codes
from jkofast._numba import kernel
from jkofast.kernels.ot.sinkhorn_log import (
    matvec,
    matvec2_lp,
    matvec_lp,
    plan_fill,
    rmatvec,
    scale_normalise,
    sinkhorn_log_solve,
    sinkhorn_log_update_cols,
    sinkhorn_log_update_rows,
    vec_copy,
    vec_fill,
    vec_scale,
)

__all__ = [
    "FLAG_CG",
    "FLAG_SINKHORN",
    "OBJ_ENTROPIC",
    "OBJ_TRANSPORT",
    "GibbsOps",
    "Limits",
    "Plan",
    "Tracked",
    "implicit_solve",
    "schur_pcg",
    "shares_storage",
    "w_converged",
    "w_implicit_counted",
    "w_unrolled_log",
    "w_unrolled_scaled",
]

OK = _codes.OK  # status codes: jkofast._codes
TINY = 1e-280
OBJ_TRANSPORT, OBJ_ENTROPIC = 0, 1
# convergence flags of one transport-term evaluation (the JKO ``diag`` outputs count them)
FLAG_SINKHORN = 1  # Sinkhorn stopped at max_iter above its tolerance
FLAG_CG = 2  # the Schur-system PCG stopped at cg_max above its tolerance
# Newton steps on the duals are inexact: PCG to a 0.1 relative residual, at most 10 steps
# (at eps = 0.05 tighter solves cost more CG steps than the Sinkhorn pairs they save)
NEWTON_RTOL = 0.1
NEWTON_CG_MAX = 10


class Plan(NamedTuple):
    """``Π = scale * diag(u) K diag(v)``; ``KT`` the contiguous transpose of ``K``.

    ``K`` a Gibbs kernel (float64 or float32) or a dense plan with ``u = v = 1``.
    """

    K: np.ndarray
    KT: np.ndarray
    u: np.ndarray
    v: np.ndarray
    scale: float


class GibbsOps(NamedTuple):
    """Operators of the implicit path, one dtype (float64, or float32 to halve the bytes per matvec).

    ``K = Kg``, ``KC = Kg ⊙ C`` and their contiguous transposes; ``xs`` an M scratch of
    the same dtype (matvec operand).
    """

    K: np.ndarray
    KT: np.ndarray
    KC: np.ndarray
    KCT: np.ndarray
    xs: np.ndarray


class Tracked(NamedTuple):
    """The tracked pairs of the unrolled adjoint (``n_grad x M``; ``Gs`` ``(n_grad + 1) x M``).

    Scaled form: ``U, S, V, TT`` = u, row sums, v, column sums of each tracked pair; log
    form: ``U`` holds ``f^(k)`` and ``Gs`` ``g^(k)``.
    """

    U: np.ndarray
    S: np.ndarray
    V: np.ndarray
    TT: np.ndarray
    Gs: np.ndarray


class Limits(NamedTuple):
    """Iteration limits of the converged paths (Sinkhorn pairs, CG tolerance and steps, Newton period)."""

    max_iter: int
    cg_tol: float
    cg_max: int
    newton_every: int


# ----------------------------------------------------------------------------------------
# Unrolled: truncated adjoint of the last n_grad pairs (the published gradient)
# ----------------------------------------------------------------------------------------
@kernel(inline="always")
def _unrolled_forward(Kg, n_warm, n_grad, tr, sk):
    """Cold-started scaled pairs, the last ``n_grad`` stored in ``tr``; False = a sum underflowed."""
    pa, u, y, tmp_m, qb, v, z, tmp_n = sk
    U, S, V, TT, _ = tr
    m = pa.shape[0]
    for j in range(m):
        v[j] = 1.0  # g = 0
    for it in range(n_warm + n_grad):
        k = it - n_warm
        if k >= 0:
            for j in range(m):
                V[k, j] = v[j]
            y_k = S[k]
        else:
            y_k = y
        # scaled_half_step(Kg, False, ...) spelled out: a literal True / False compiled it twice
        matvec(Kg, v, y_k)
        ok, _ = scale_normalise(pa, y_k, tmp_m, TINY)
        if not ok:
            return False
        for i in range(m):
            u[i] = tmp_m[i]
        if k >= 0:
            for i in range(m):
                U[k, i] = u[i]
            rmatvec(Kg, u, TT[k])
            ok, _ = scale_normalise(qb, TT[k], tmp_n, TINY)
            for j in range(m):
                z[j] = TT[k, j]
        else:
            rmatvec(Kg, u, z)
            ok, _ = scale_normalise(qb, z, tmp_n, TINY)
        if not ok:
            return False
        for j in range(m):
            v[j] = tmp_n[j]
    return True


@kernel()
def w_unrolled_scaled(gc, KC, n_warm, n_grad, tr, sk, w, abar):
    """``<Π, C>`` after ``n_warm + n_grad`` cold-started pairs and ``abar = ∂<Π,C>/∂a``.

    Weights ``sk.pa = p``, ``sk.qb = q``. Scaled form: ``Pi = u_i Kg_ij qb_j / t_j`` after
    the last pair; the row/column softmax weights of pair k are ``P_ij = Kg_ij v_j / s_i``
    and ``Q_ij = u_i Kg_ij / t_j``, so the adjoint is 2 matvecs per tracked pair
    (``KC = Kg ⊙ C``). Returns ``(ok, loss)``; ``ok`` False = a sum underflowed (use the
    log form).
    """
    if not _unrolled_forward(gc.Kg, n_warm, n_grad, tr, sk):
        return False, 0.0
    pa, u, y, tmp_m, qb, _, z, tmp_n = sk
    U, S, V, TT, _ = tr
    fbar = w[0]
    gbar = w[1]
    eps = gc.eps
    Kg = gc.Kg
    m = pa.shape[0]
    # plan of the last pair: Pi = u_i Kg_ij W_j with W = qb / t  (t in z)
    for j in range(m):
        y[j] = qb[j] / z[j]
    matvec(KC, y, tmp_m)
    loss = 0.0
    inv = 1.0 / eps
    for i in range(m):
        r = u[i] * tmp_m[i]
        loss += r
        fbar[i] = r * inv
    rmatvec(KC, u, tmp_n)
    for j in range(m):
        gbar[j] = y[j] * tmp_n[j] * inv
    for i in range(m):
        abar[i] = 0.0
    for k in range(n_grad - 1, -1, -1):
        for j in range(m):
            y[j] = gbar[j] / TT[k, j]
        matvec(Kg, y, tmp_m)
        for i in range(m):
            fbar[i] -= U[k, i] * tmp_m[i]
            abar[i] += eps * fbar[i]
            y[i] = fbar[i] / S[k, i]
        rmatvec(Kg, y, tmp_n)
        for j in range(m):
            gbar[j] = -V[k, j] * tmp_n[j]
            fbar[j] = 0.0
    return True, loss


@kernel()
def w_unrolled_log(gc, a, b, n_warm, n_grad, tr, sk, w, abar):
    """Log-domain twin of ``w_unrolled_scaled`` (any eps; M^2 exps per pass); returns the loss.

    ``tr.U`` (n_grad x M) and ``tr.Gs`` ((n_grad+1) x M) store ``f^(k)`` and ``g^(k)``; the
    weights are ``Q_ij = exp((f^k_i + g^k_j - C_ij)/eps - b_j)`` and
    ``P_ij = exp((f^k_i + g^(k-1)_j - C_ij)/eps - a_i)``.  a, b finite.
    """
    C = gc.C
    eps = gc.eps
    Fs = tr.U
    Gs = tr.Gs
    f = sk.u
    g = sk.v
    fbar = w[0]
    gbar = w[1]
    m = a.shape[0]
    inv = 1.0 / eps
    vec_fill(f, 0.0)
    vec_fill(g, 0.0)
    for _ in range(n_warm):
        sinkhorn_log_update_rows(C, eps, a, g, f)
        sinkhorn_log_update_cols(gc.C_T, eps, b, f, g)
    vec_copy(g, Gs[0])
    for k in range(n_grad):
        sinkhorn_log_update_rows(C, eps, a, g, f)
        sinkhorn_log_update_cols(gc.C_T, eps, b, f, g)
        vec_copy(f, Fs[k])
        vec_copy(g, Gs[k + 1])
    loss = 0.0
    vec_fill(gbar, 0.0)
    for i in range(m):
        r = 0.0
        for j in range(m):
            pc = np.exp((f[i] + g[j] - C[i, j]) * inv) * C[i, j]
            r += pc
            gbar[j] += pc
        loss += r
        fbar[i] = r * inv
        abar[i] = 0.0
    vec_scale(gbar, inv)
    for k in range(n_grad - 1, -1, -1):
        for i in range(m):
            s = 0.0
            for j in range(m):
                s += np.exp((Fs[k, i] + Gs[k + 1, j] - C[i, j]) * inv - b[j]) * gbar[j]
            fbar[i] -= s
            abar[i] += eps * fbar[i]
        for j in range(m):
            gbar[j] = 0.0
        for i in range(m):
            fi = fbar[i]
            for j in range(m):
                gbar[j] -= np.exp((Fs[k, i] + Gs[k, j] - C[i, j]) * inv - a[i]) * fi
        for i in range(m):
            fbar[i] = 0.0
    return loss


# ----------------------------------------------------------------------------------------
# Converged plan: implicit gradient (CG) and entropic value
# ----------------------------------------------------------------------------------------
# mirrored by _pit_apply (Pi.T through KT, u and v swapped)
@kernel()
def _pi_apply(pl, x, xs, out):
    """``out = Pi @ x`` (``xs``: scratch in ``pl.K``'s dtype)."""
    uu, vv, sc = pl.u, pl.v, pl.scale
    for j in range(x.shape[0]):
        xs[j] = vv[j] * x[j]
    matvec_lp(pl.K, xs, out)
    for i in range(out.shape[0]):
        out[i] *= sc * uu[i]


# mirror of _pi_apply (KT, u/v swapped): Pi and Pi.T kept as two named kernels, as the CG code calls them
@kernel()
def _pit_apply(pl, x, xs, out):
    """``out = Pi.T @ x`` (through the stored transpose ``pl.KT``)."""
    uu, vv, sc = pl.u, pl.v, pl.scale
    for i in range(x.shape[0]):
        xs[i] = uu[i] * x[i]
    matvec_lp(pl.KT, xs, out)
    for j in range(out.shape[0]):
        out[j] *= sc * vv[j]


@kernel(inline="always")
def _schur_apply(pl, prow, cvec, x, xs, t2, out):
    """``out = (diag(prow) - Pi diag(qinv) Piᵀ) x`` with ``cvec = scale² v² ⊙ qinv`` precomputed.

    ``Pi diag(qinv) Piᵀ x = scale² u ⊙ K (v² ⊙ qinv ⊙ Kᵀ(u ⊙ x))``: two matvecs and three
    O(M) passes.
    """
    uu = pl.u
    m = x.shape[0]
    for i in range(m):
        xs[i] = uu[i] * x[i]
    matvec_lp(pl.KT, xs, t2)
    for j in range(m):
        xs[j] = cvec[j] * t2[j]
    matvec_lp(pl.K, xs, out)
    for i in range(m):
        out[i] = prow[i] * x[i] - uu[i] * out[i]


@kernel()
def schur_pcg(pl, prow, qinv, r, x, thr, cg_max, w, xs):
    """Jacobi-preconditioned CG for ``(diag(prow) - Pi diag(qinv) Piᵀ) x = rhs``.

    ``x`` is the warm start and ``r`` its residual ``rhs - A x`` on entry (overwritten);
    rows 4-7 of ``w`` are scratch. Stops when the preconditioned residual ``rᵀ D⁻¹ r``
    falls to ``thr`` (absolute). Returns ``(converged, n_steps)``: ``converged`` False only
    when ``cg_max`` was reached above ``thr`` (a breakdown ``pᵀAp <= 0`` on this PSD system
    means the residual left the range of A: nothing more to gain, not a failure);
    ``n_steps`` the number of operator applications (2 matvecs each).
    """
    zz, pdir, ap, t1 = w[4], w[5], w[6], w[7]
    m = x.shape[0]
    dinv = np.empty(m)
    cvec = np.empty(m)
    sc2 = pl.scale * pl.scale
    vv = pl.v
    rz = 0.0
    for i in range(m):
        dinv[i] = 1.0 / (prow[i] if prow[i] > TINY else TINY)
        cvec[i] = sc2 * vv[i] * vv[i] * qinv[i]
        zz[i] = r[i] * dinv[i]
        pdir[i] = zz[i]
        rz += r[i] * zz[i]
    k = 0
    while k < cg_max and rz > thr:
        _schur_apply(pl, prow, cvec, pdir, xs, t1, ap)
        pap = 0.0
        for i in range(m):
            pap += pdir[i] * ap[i]
        if not pap > 0.0:
            break
        alpha = rz / pap
        rz_new = 0.0
        for i in range(m):
            x[i] += alpha * pdir[i]
            r[i] -= alpha * ap[i]
            zz[i] = r[i] * dinv[i]
            rz_new += r[i] * zz[i]
        beta = rz_new / rz
        for i in range(m):
            pdir[i] = zz[i] + beta * pdir[i]
        rz = rz_new
        k += 1
    return not (k >= cg_max and rz > thr), k


@kernel(inline="always")
def shares_storage(A, B):
    """Return whether ``A`` and ``B`` start at the same address (an operator passed as its own transpose)."""
    return A.ctypes.data == B.ctypes.data


@kernel(inline="always")
def _implicit_finish(pl, KC, KCT, x, cg_tol, cg_max, w, xs, xs2):
    """``implicit_solve`` once ``w[5]`` holds ``Πᵀx`` (x the warm start); returns ``(loss, ok, n_cg)``.

    ``xs2`` a second scratch in ``xs``'s dtype. When ``KCT`` is ``KC`` itself (a symmetric
    cost: ``transport_operators`` shares the storage), ``KC v`` and ``KCᵀu = KC u`` run as one
    sweep (``matvec2_lp``; each sum in the same order as ``matvec_lp``'s).
    """
    prow, qinv, rr, res, cc, t, ap = w[0], w[1], w[2], w[3], w[4], w[5], w[6]
    uu, vv, sc = pl.u, pl.v, pl.scale
    m = x.shape[0]
    fused = shares_storage(KC, KCT)
    if fused:
        for j in range(m):
            xs[j] = vv[j]
            xs2[j] = uu[j]
        matvec2_lp(KC, xs, xs2, rr, cc)
    else:
        for j in range(m):
            xs[j] = vv[j]
        matvec_lp(KC, xs, rr)
    loss = 0.0
    for i in range(m):
        rr[i] *= sc * uu[i]
        loss += rr[i]
    if not fused:
        for i in range(m):
            xs[i] = uu[i]
        matvec_lp(KCT, xs, cc)
    for j in range(m):
        cc[j] *= sc * vv[j]
        t[j] = qinv[j] * (cc[j] - t[j])
    _pi_apply(pl, t, xs, ap)
    ref_n = 0.0
    for i in range(m):
        res[i] = rr[i] - prow[i] * x[i] - ap[i]
        d = prow[i] if prow[i] > TINY else TINY
        ref_n += rr[i] * rr[i] / d
    ok, n_cg = schur_pcg(pl, prow, qinv, res, x, cg_tol * cg_tol * ref_n, cg_max, w, xs)
    return loss, ok, n_cg


@kernel()
def implicit_solve(pl, KC, KCT, x, cg_tol, cg_max, w, xs):
    """Solve SPEC A.4.7's Schur system for ``x = ∂<Π*,C>/∂p`` (+const) by Jacobi-PCG.

    ``pl`` is the plan ``Π``; ``KC`` (``KCT`` its transpose) is ``pl.K ⊙ C`` with the same
    scalings. ``w[0]`` holds the row sums ``prow`` of Π and ``w[1]`` the inverse column
    sums ``qinv`` (0 where a column is empty); rows 2-7 are scratch. ``x`` holds the warm
    start and receives the solution. The right-hand side is ``rhs = r - Pi diag(qinv) c``
    (``r``, ``c`` the row/column sums of ``Pi ⊙ C``); the warm-start residual
    ``rhs - A x = r - prow ⊙ x - Pi diag(qinv)(c - Piᵀx)`` costs two matvecs, not three.
    PCG stops when the preconditioned residual norm falls below ``cg_tol`` times that of
    ``r``. The system is PSD and singular along 1, its right-hand side sums to 0, so plain
    PCG stays consistent. Returns ``(<Pi,C>, converged, n_cg)`` (``converged`` False:
    ``cg_max`` reached above the tolerance; ``n_cg`` PCG steps).
    """
    _pit_apply(pl, x, xs, w[5])
    return _implicit_finish(pl, KC, KCT, x, cg_tol, cg_max, w, xs, np.empty_like(xs))


@kernel(inline="always")
def _plan_marginals(pl, xs, w):
    """``w[0]`` = row sums of Π, ``w[1]`` = inverse column sums (0 for an empty column)."""
    m = xs.shape[0]
    prow = w[0]
    qinv = w[1]
    ones = np.ones(m)
    _pi_apply(pl, ones, xs, prow)
    _pit_apply(pl, ones, xs, qinv)
    for j in range(m):
        qinv[j] = 1.0 / qinv[j] if qinv[j] > 0.0 else 0.0


@kernel()
def w_converged(gc, KC, a, b, fw, gw, xw, tol, objective, lim, grad_p, sk, w):
    """Proximal term at a converged plan, warm-started from ``(fw, gw)`` (updated in place).

    ``gc`` the ``GibbsCost`` (float64), ``KC = Kg ⊙ C``; ``sk`` the Sinkhorn scratch, ``w``
    (8, M) scratch. ``objective`` OBJ_TRANSPORT: ``<Π*, C>`` and ``grad_p = x`` from
    ``implicit_solve`` (``xw`` warm start, updated). OBJ_ENTROPIC: ``OT_ε = Σ p f + Σ q g
    - ε Σ Π`` and ``grad_p = f``. Returns ``(loss, flags)``: ``FLAG_SINKHORN`` / ``FLAG_CG``
    set when that solve stopped at its iteration cap above its tolerance.
    """
    m = a.shape[0]
    _, st_sk, _, scaled, scale = sinkhorn_log_solve(gc, a, b, fw, gw, lim.max_iter, tol, np.int64(1), TINY, sk)
    flags = FLAG_SINKHORN if st_sk != OK else 0
    if scaled:
        Kmat = gc.Kg
        KCmat = KC
        pl = Plan(Kmat, np.ascontiguousarray(Kmat.T), sk.u, sk.v, scale)
    else:
        C = gc.C
        Kmat = np.empty((m, m))
        plan_fill(C, fw, gw, gc.eps, Kmat)
        KCmat = np.empty((m, m))
        for i in range(m):
            for j in range(m):
                KCmat[i, j] = Kmat[i, j] * C[i, j]
        pl = Plan(Kmat, np.ascontiguousarray(Kmat.T), np.ones(m), np.ones(m), 1.0)
    if objective == OBJ_ENTROPIC:
        _pi_apply(pl, np.ones(m), sk.tmp_m, w[0])
        _pit_apply(pl, np.ones(m), sk.tmp_m, w[1])
        loss = 0.0
        for i in range(m):
            loss += w[0, i] * fw[i] + w[1, i] * gw[i] - gc.eps * w[0, i]
            grad_p[i] = fw[i]
        return loss, flags
    _plan_marginals(pl, sk.tmp_m, w)
    loss, cg_ok, _ = implicit_solve(pl, KCmat, np.ascontiguousarray(KCmat.T), xw, lim.cg_tol, lim.cg_max, w, sk.tmp_m)
    for i in range(m):
        grad_p[i] = xw[i]
    if not cg_ok:
        flags += FLAG_CG
    return loss, flags


@kernel(inline="always")
def _newton_dual_step(ops, pa, u, v, s, t, vmax, alpha, w, tmp_n):
    """One inexact Newton step on the duals of the scaled implicit path (in ``v``, max 1).

    State: the plan ``vmax diag(u) K diag(v)`` after a column update (columns exact) with
    its row sums ``vmax u ⊙ s`` (``s = K v``) and ``t = Kᵀu``. The linearised marginal
    equations reduce to the Schur system of the gradient, ``A α = pa - prow``, solved
    loosely by PCG from zero (``NEWTON_RTOL``, ``NEWTON_CG_MAX``; its convergence is not
    required), then ``v ← v ⊙ exp(-qinv ⊙ Πᵀα)`` (the next row update recomputes u
    exactly). ``alpha`` (M) receives α (scratch); ``w`` rows 0-2 and 4-7 are scratch.
    Returns the number of PCG steps.
    """
    m = pa.shape[0]
    prow, qinv, rhs = w[0], w[1], w[2]
    nthr = 0.0
    for i in range(m):
        prow[i] = vmax * u[i] * s[i]
        cs = vmax * v[i] * t[i]
        qinv[i] = 1.0 / cs if cs > 0.0 else 0.0
        rhs[i] = pa[i] - prow[i]
        alpha[i] = 0.0
        d = prow[i] if prow[i] > TINY else TINY
        nthr += rhs[i] * rhs[i] / d
    pl = Plan(ops.K, ops.KT, u, v, vmax)
    _, n_cg = schur_pcg(pl, prow, qinv, rhs, alpha, NEWTON_RTOL**2 * nthr, np.int64(NEWTON_CG_MAX), w, ops.xs)
    _pit_apply(pl, alpha, ops.xs, tmp_n)
    bmax = -np.inf
    for j in range(m):
        bj = -qinv[j] * tmp_n[j]
        bj = min(max(bj, -10.0), 10.0)
        v[j] *= np.exp(bj)
        if v[j] > bmax:
            bmax = v[j]
    for j in range(m):
        v[j] /= bmax
    return n_cg


@kernel(inline="always")
def _ratio_max(wt, y, out, err_u, err_scale):
    """``out = wt / y`` (0 where ``wt = 0``) and its max; with ``err_u`` also ``|err_scale u ⊙ y - wt|_1``.

    One pass over the three vectors. Returns ``(ok, ymax, err)``; ``ok`` False when a
    positive-mass entry has ``y <= TINY`` or the max is not a positive finite number (the
    underflow test of ``scale_normalise``).
    """
    ok = True
    rmax = 0.0
    err = 0.0
    for i in range(wt.shape[0]):
        err += abs(err_scale * err_u[i] * y[i] - wt[i])
        r = 0.0
        if wt[i] > 0.0:
            if y[i] > TINY:
                r = wt[i] / y[i]
            else:
                ok = False
        out[i] = r
        if r > rmax:
            rmax = r
    if not rmax > 0.0 or not np.isfinite(rmax):
        ok = False
    return ok, rmax, err


@kernel(inline="always")
def _commit(tmp, rmax, wt, out, fill, xs, xs2, xw):
    """``out = tmp / rmax`` (max 1); with ``fill`` also ``xs = out``, ``xs2 = out ⊙ xw``.

    Returns False when a positive-mass entry (``wt > 0``) falls to ``TINY`` or below.
    """
    ok = True
    inv = 1.0 / rmax
    for i in range(tmp.shape[0]):
        oi = tmp[i] * inv
        out[i] = oi
        if fill:
            xs[i] = oi
            xs2[i] = oi * xw[i]
        if wt[i] > 0.0 and oi <= TINY:
            ok = False
    return ok


@kernel()
def w_implicit_counted(ops, tol, lim, v, xw, grad_p, sk, w):
    """Implicit path kept entirely in the scaled form across calls (no exp/log per call), counting its work.

    ``ops`` the ``GibbsOps`` (float64 or float32). ``v`` (the scaled g) persists between
    calls as the warm start; each call runs at least one pair, then pairs until the
    row-marginal L1 error ``|vmax u ⊙ (K v) - pa|_1 < tol`` or ``lim.max_iter``, with
    weights ``sk.pa = p``, ``sk.qb = q``. Every ``lim.newton_every`` pairs without
    convergence (0: never) a Newton step on the duals (``_newton_dual_step``) removes the
    slow inter-cluster modes of plain Sinkhorn. The plan ``vmax diag(u) K diag(v)`` then
    feeds the Schur solve with its own marginals (``xw`` warm start, updated; ``grad_p =
    x``). The column sweep of the first two pairs also gives ``Kᵀ(u ⊙ xw)``
    (``matvec2_lp``, one pass over ``Kᵀ`` for two products), the ``Πᵀx`` of the solve's
    warm-start residual when the call stops there.

    Returns ``(ok, loss, flags, n_pairs, n_row, n_col2, n_col, n_newton_cg, n_cg)``: ``ok``
    False = a sum underflowed (caller falls back to ``w_converged``); ``flags`` as in
    ``w_converged``; then the work (the measuring tools read it; the JKO flow drops it): update
    pairs, then the M x M sweeps by kind: row sweeps ``K v``; column sweeps fused with
    ``Kᵀ(u ⊙ x)`` (``matvec2_lp``); plain column sweeps (``Kᵀu``, or the ``Πᵀx`` of the
    gradient's residual when it was not fused); PCG steps of the Newton steps and of the
    gradient solve (two sweeps each). The gradient's set-up adds three sweeps per call
    (``KC v``, ``KCᵀ u``, ``Π t``), two when ``ops.KCT`` is ``ops.KC`` (a symmetric cost:
    ``KC v`` and ``KC u`` share one ``matvec2_lp`` sweep; ``shares_storage``).
    """
    pa, u, s, tmp_m, qb, _, t, tmp_n = sk
    K, KT, xs = ops.K, ops.KT, ops.xs
    max_iter, newton_every = lim.max_iter, lim.newton_every
    m = pa.shape[0]
    xs2 = np.empty_like(xs)
    tx = w[5]
    tx_ok = False
    vmax = 1.0
    it = 0
    since = 0
    fresh = True
    flags = 0
    n_row = n_col2 = n_col = n_newton_cg = 0
    while True:
        for j in range(m):
            xs[j] = v[j]
        matvec_lp(K, xs, s)
        n_row += 1
        ok, smax, err = _ratio_max(pa, s, tmp_m, u, vmax)
        if not fresh:
            if err < tol:
                break
            if it >= max_iter:
                flags = FLAG_SINKHORN
                break
            if ok and newton_every > 0 and since >= newton_every:
                n_newton_cg += _newton_dual_step(ops, pa, u, v, s, t, vmax, grad_p, w, tmp_n)
                since = 0
                fresh = True
                continue
        if not (ok and _commit(tmp_m, smax, pa, u, True, xs, xs2, xw)):
            return False, 0.0, 0, it, n_row, n_col2, n_col, n_newton_cg, 0
        # Kᵀu, and in the same sweep Kᵀ(u ⊙ x) for the gradient's warm-start residual: worth it
        # while a call is likely to stop after this pair (the first two), a plain sweep after
        tx_ok = it < 2
        if tx_ok:
            matvec2_lp(KT, xs, xs2, t, tx)
            n_col2 += 1
        else:
            matvec_lp(KT, xs, t)
            n_col += 1
        ok, vmax, _ = _ratio_max(qb, t, tmp_n, tmp_n, 0.0)
        if not (ok and _commit(tmp_n, vmax, qb, v, False, xs, xs2, xw)):
            return False, 0.0, 0, it, n_row, n_col2, n_col, n_newton_cg, 0
        it += 1
        since += 1
        fresh = False
    pl = Plan(K, KT, u, v, vmax)
    for i in range(m):
        w[0, i] = vmax * u[i] * s[i]
        cs = vmax * v[i] * t[i]
        w[1, i] = 1.0 / cs if cs > 0.0 else 0.0
    if tx_ok:
        for j in range(m):
            tx[j] *= vmax * v[j]  # Πᵀx
    else:
        _pit_apply(pl, xw, xs, tx)
        n_col += 1
    loss, cg_ok, n_cg = _implicit_finish(pl, ops.KC, ops.KCT, xw, lim.cg_tol, lim.cg_max, w, xs, xs2)
    for i in range(m):
        grad_p[i] = xw[i]
    if not cg_ok:
        flags += FLAG_CG
    return True, loss, flags, it, n_row, n_col2, n_col, n_newton_cg, n_cg
