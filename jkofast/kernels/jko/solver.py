"""JKO inner/outer solver kernels (SPEC A.4.2-A.4.7), float64 throughout.

Layout: one query = ``p0, E`` (M,), ``C, C_T, Ks`` (M x M, ``Ks = (K + Kᵀ)/2``), scalar
parameters packed as ``fp`` (float64) and ``ip`` (int64) — see ``FP_*`` / ``IP_*``.
The per-query driver ``jko_query`` is serial; ``rerank_dense`` / ``rerank_csr`` run it
under ``prange`` over queries, each query writing only its own slice of the outputs.

Gradient paths for the transport term ``W(p, q)`` (weight ``w = 1/(2h)``, or ``α/(2h)``):

* ``GRAD_UNROLLED`` — the published behaviour: ``<Π, C>`` of a cold-started Sinkhorn with
  exactly ``n_iter`` pairs, differentiated by the hand-written adjoint of the last
  ``n_grad`` pairs (warm phase frozen).  Scaled (matvec) form, log form if a sum underflows.
* ``GRAD_IMPLICIT`` — exact gradient of ``<Π*, C>`` at a converged plan: the symmetric
  system of SPEC A.4.7 (Schur form, preconditioned CG on the tangent space); Sinkhorn
  warm-started across inner steps and stopped by ``tol``.
* ``OBJ_ENTROPIC`` — proximal term ``OT_ε(p, q)``; exact gradient ``f`` (envelope theorem).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast import _codes
from jkofast._numba import kernel
from jkofast.kernels.jko.geometry import cost_kernel_csr, cost_kernel_dense
from jkofast.kernels.ot.sinkhorn_log import (
    gibbs_kernel,
    matvec,
    matvec_lp,
    plan_fill,
    rmatvec,
    scaled_half_step,
    scaled_half_step_lp,
    sinkhorn_log_solve,
    sinkhorn_log_update_cols,
    sinkhorn_log_update_rows,
)

# fp layout
FP_H, FP_LAM, FP_RHO, FP_EPS, FP_ALPHA, FP_LR, FP_TOL, FP_CG_TOL, FP_TOL_STEP = 0, 1, 2, 3, 4, 5, 6, 7, 8
N_FP = 9
# ip layout
IP_T, IP_INNER, IP_NITER, IP_NGRAD, IP_MODE, IP_GRAD, IP_OBJ, IP_DUALS, IP_MAXIT, IP_CGMAX, IP_NEWTON = range(11)
N_IP = 11

MODE_W, MODE_KL, MODE_NOPROX, MODE_BREGMAN = 0, 1, 2, 3
GRAD_UNROLLED, GRAD_IMPLICIT = 0, 1
OBJ_TRANSPORT, OBJ_ENTROPIC = 0, 1

OK, NON_FINITE = _codes.OK, _codes.NON_FINITE  # status codes: jkofast._codes
TINY = 1e-280
# convergence flags of one inner step's transport term (``diag`` outputs count them)
FLAG_SINKHORN = 1  # Sinkhorn stopped at max_iter above its tolerance
FLAG_CG = 2  # the Schur-system PCG stopped at cg_max above its tolerance

# float32 operators on the implicit path: only when tol, cg_tol >= LOWP_TOL (float32 sums
# carry a relative error ~1e-6, below such tolerances) and max Kg / min Kg <= e^60
LOWP_TOL = 1e-5
LOWP_RANGE = 60.0
# Newton steps on the duals are inexact: PCG to a 0.1 relative residual, at most 10 steps
# (at eps = 0.05 tighter solves cost more CG steps than the Sinkhorn pairs they save)
NEWTON_RTOL = 0.1
NEWTON_CG_MAX = 10

BETA1 = 0.9
BETA2 = 0.999
ADAM_EPS = 1e-8
FLOOR = 1e-30


# ----------------------------------------------------------------------------------------
# LOW LEVEL: transport term with the truncated unrolled adjoint
# ----------------------------------------------------------------------------------------
@kernel()
def w_unrolled_scaled(Kg, KC, pa, qb, eps, n_warm, n_grad, U, S, V, TT, u, v, y, z, tmp_m, tmp_n, fbar, gbar, abar):
    """``<Π, C>`` after ``n_warm + n_grad`` cold-started pairs and ``abar = ∂<Π,C>/∂a``.

    Scaled form: ``Pi = u_i Kg_ij qb_j / t_j`` after the last pair; the row/column softmax
    weights of pair k are ``P_ij = Kg_ij v_j / s_i`` and ``Q_ij = u_i Kg_ij / t_j``, so the
    adjoint is 2 matvecs per tracked pair. ``U, S, V, TT`` (n_grad x M) store the tracked
    pairs. Returns ``(ok, loss)``; ``ok`` False = a sum underflowed (use the log form).
    """
    m = pa.shape[0]
    for j in range(m):
        v[j] = 1.0  # g = 0
    n_tot = n_warm + n_grad
    for it in range(n_tot):
        k = it - n_warm
        if k >= 0:
            for j in range(m):
                V[k, j] = v[j]
            ok, _ = scaled_half_step(Kg, False, pa, v, S[k], tmp_m, TINY)
        else:
            ok, _ = scaled_half_step(Kg, False, pa, v, y, tmp_m, TINY)
        if not ok:
            return False, 0.0
        for i in range(m):
            u[i] = tmp_m[i]
        if k >= 0:
            for i in range(m):
                U[k, i] = u[i]
            ok, _ = scaled_half_step(Kg, True, qb, u, TT[k], tmp_n, TINY)
            for j in range(m):
                z[j] = TT[k, j]
        else:
            ok, _ = scaled_half_step(Kg, True, qb, u, z, tmp_n, TINY)
        if not ok:
            return False, 0.0
        for j in range(m):
            v[j] = tmp_n[j]
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
def w_unrolled_log(C, C_T, a, b, eps, n_warm, n_grad, Fs, Gs, f, g, fbar, gbar, abar):
    """Log-domain twin of ``w_unrolled_scaled`` (any eps; M^2 exps per pass).

    ``Fs`` (n_grad x M) and ``Gs`` ((n_grad+1) x M) store ``f^(k)`` and ``g^(k)``; the
    weights are ``Q_ij = exp((f^k_i + g^k_j - C_ij)/eps - b_j)`` and
    ``P_ij = exp((f^k_i + g^(k-1)_j - C_ij)/eps - a_i)``.  a, b finite.
    """
    m = a.shape[0]
    inv = 1.0 / eps
    for i in range(m):
        f[i] = 0.0
        g[i] = 0.0
    for _ in range(n_warm):
        sinkhorn_log_update_rows(C, eps, a, g, f)
        sinkhorn_log_update_cols(C_T, eps, b, f, g)
    for j in range(m):
        Gs[0, j] = g[j]
    for k in range(n_grad):
        sinkhorn_log_update_rows(C, eps, a, g, f)
        sinkhorn_log_update_cols(C_T, eps, b, f, g)
        for i in range(m):
            Fs[k, i] = f[i]
            Gs[k + 1, i] = g[i]
    loss = 0.0
    for j in range(m):
        gbar[j] = 0.0
    for i in range(m):
        r = 0.0
        for j in range(m):
            pc = np.exp((f[i] + g[j] - C[i, j]) * inv) * C[i, j]
            r += pc
            gbar[j] += pc
        loss += r
        fbar[i] = r * inv
        abar[i] = 0.0
    for j in range(m):
        gbar[j] *= inv
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
@kernel()
def _pi_apply(Kmat, KTmat, uu, vv, sc, x, xs, out):
    """``out = Pi @ x`` with ``Pi = sc * diag(uu) Kmat diag(vv)`` (``xs``: scratch in Kmat's dtype)."""
    for j in range(x.shape[0]):
        xs[j] = vv[j] * x[j]
    matvec_lp(Kmat, xs, out)
    for i in range(out.shape[0]):
        out[i] *= sc * uu[i]


@kernel()
def _pit_apply(Kmat, KTmat, uu, vv, sc, x, xs, out):
    """``out = Pi.T @ x`` (through the stored transpose ``KTmat``)."""
    for i in range(x.shape[0]):
        xs[i] = uu[i] * x[i]
    matvec_lp(KTmat, xs, out)
    for j in range(out.shape[0]):
        out[j] *= sc * vv[j]


@kernel()
def _schur_apply(Kmat, KTmat, uu, vv, sc, prow, qinv, x, xs, t2, out):
    """``out = (diag(prow) - Pi diag(1/q) Piᵀ) x``."""
    _pit_apply(Kmat, KTmat, uu, vv, sc, x, xs, t2)
    for j in range(t2.shape[0]):
        t2[j] *= qinv[j]
    _pi_apply(Kmat, KTmat, uu, vv, sc, t2, xs, out)
    for i in range(out.shape[0]):
        out[i] = prow[i] * x[i] - out[i]


@kernel()
def implicit_solve(Kmat, KTmat, KCmat, KCTmat, uu, vv, sc, prow, qinv, x, cg_tol, cg_max, w3, w4, w5, w6, w7, w8, xs):
    """Solve SPEC A.4.7's Schur system for ``x = ∂<Π*,C>/∂p`` (+const) by Jacobi-PCG.

    ``Pi = sc * diag(uu) Kmat diag(vv)`` (``KCmat`` the same with ``Kmat ⊙ C``; ``KTmat``,
    ``KCTmat`` the transposes), ``prow`` its row sums and ``qinv`` the inverse column sums
    (0 where a column is empty); ``x`` holds the warm start and receives the solution. The
    right-hand side is ``rhs = r - Pi diag(qinv) c`` (``r``, ``c`` the row/column sums of
    ``Pi ⊙ C``); the warm-start residual ``rhs - A x = r - prow ⊙ x - Pi diag(qinv)(c - Piᵀx)``
    costs two matvecs, not three. PCG stops when the preconditioned residual norm falls
    below ``cg_tol`` times that of ``r``. The system is PSD and singular along 1, its
    right-hand side sums to 0, so plain PCG stays consistent. Returns ``(<Pi,C>, iterations,
    converged)`` (``converged`` False: ``cg_max`` reached above the tolerance).
    """
    m = x.shape[0]
    rr, res, cc, t, ap = w3, w4, w5, w6, w7
    for j in range(m):
        xs[j] = vv[j]
    matvec_lp(KCmat, xs, rr)
    loss = 0.0
    for i in range(m):
        rr[i] *= sc * uu[i]
        loss += rr[i]
        xs[i] = uu[i]
    matvec_lp(KCTmat, xs, cc)
    for j in range(m):
        cc[j] *= sc * vv[j]
    _pit_apply(Kmat, KTmat, uu, vv, sc, x, xs, t)
    for j in range(m):
        t[j] = qinv[j] * (cc[j] - t[j])
    _pi_apply(Kmat, KTmat, uu, vv, sc, t, xs, ap)
    ref_n = 0.0
    for i in range(m):
        res[i] = rr[i] - prow[i] * x[i] - ap[i]
        d = prow[i] if prow[i] > TINY else TINY
        ref_n += rr[i] * rr[i] / d
    k, ok = schur_pcg(Kmat, KTmat, uu, vv, sc, prow, qinv, res, x, cg_tol * cg_tol * ref_n, cg_max, w5, w6, w7, w8, xs)
    return loss, k, ok


@kernel()
def schur_pcg(Kmat, KTmat, uu, vv, sc, prow, qinv, r, x, thr, cg_max, zz, pdir, ap, t1, xs):
    """Jacobi-preconditioned CG for ``(diag(prow) - Pi diag(qinv) Piᵀ) x = rhs``.

    ``x`` is the warm start and ``r`` its residual ``rhs - A x`` on entry (overwritten).
    Stops when the preconditioned residual ``rᵀ D⁻¹ r`` falls to ``thr`` (absolute).
    Returns ``(iterations, converged)``; ``converged`` is False only when ``cg_max`` was
    reached above ``thr`` (a breakdown ``pᵀAp <= 0`` on this PSD system means the residual
    left the range of A: nothing more to gain, not a failure).
    """
    m = x.shape[0]
    rz = 0.0
    for i in range(m):
        d = prow[i] if prow[i] > TINY else TINY
        zz[i] = r[i] / d
        pdir[i] = zz[i]
        rz += r[i] * zz[i]
    k = 0
    while k < cg_max and rz > thr:
        _schur_apply(Kmat, KTmat, uu, vv, sc, prow, qinv, pdir, xs, t1, ap)
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
            d = prow[i] if prow[i] > TINY else TINY
            zz[i] = r[i] / d
            rz_new += r[i] * zz[i]
        beta = rz_new / rz
        for i in range(m):
            pdir[i] = zz[i] + beta * pdir[i]
        rz = rz_new
        k += 1
    return k, not (k >= cg_max and rz > thr)


@kernel()
def w_converged(
    C,
    C_T,
    Kg,
    KC,
    cmin,
    a,
    b,
    eps,
    fw,
    gw,
    tol,
    max_iter,
    objective,
    xw,
    cg_tol,
    cg_max,
    grad_p,
    pa,
    qb,
    u,
    v,
    s,
    t,
    tmp_m,
    tmp_n,
    w1,
    w2,
    w3,
    w4,
    w5,
    w6,
    w7,
    w8,
):
    """Proximal term at a converged plan, warm-started from ``(fw, gw)`` (updated in place).

    ``objective`` OBJ_TRANSPORT: ``<Π*, C>`` and ``grad_p = x`` from ``implicit_solve``
    (``xw`` warm start, updated). OBJ_ENTROPIC: ``OT_ε = Σ p f + Σ q g - ε Σ Π`` and
    ``grad_p = f``. Returns ``(loss, flags)``: ``FLAG_SINKHORN`` / ``FLAG_CG`` set when that
    solve stopped at its iteration cap above its tolerance.
    """
    m = a.shape[0]
    _, st_sk, _, scaled, scale = sinkhorn_log_solve(
        C, C_T, Kg, cmin, a, b, eps, fw, gw, max_iter, tol, 1, 1, True, TINY, pa, qb, u, v, s, t, tmp_m, tmp_n
    )
    if scaled:
        Kmat = Kg
        KCmat = KC
        uu = u
        vv = v
        sc = scale
    else:
        Kmat = np.empty((m, m))
        plan_fill(C, fw, gw, eps, Kmat)
        KCmat = np.empty((m, m))
        for i in range(m):
            for j in range(m):
                KCmat[i, j] = Kmat[i, j] * C[i, j]
        uu = np.ones(m)
        vv = np.ones(m)
        sc = 1.0
    KTmat = np.ascontiguousarray(Kmat.T)
    ones = np.ones(m)
    if objective == OBJ_ENTROPIC:
        _pi_apply(Kmat, KTmat, uu, vv, sc, ones, tmp_m, w1)
        _pit_apply(Kmat, KTmat, uu, vv, sc, ones, tmp_m, w2)
        loss = 0.0
        for i in range(m):
            loss += w1[i] * fw[i] + w2[i] * gw[i] - eps * w1[i]
            grad_p[i] = fw[i]
        return loss, FLAG_SINKHORN if st_sk != OK else 0
    KCTmat = np.ascontiguousarray(KCmat.T)
    _pi_apply(Kmat, KTmat, uu, vv, sc, ones, tmp_m, w1)
    _pit_apply(Kmat, KTmat, uu, vv, sc, ones, tmp_m, w2)
    for j in range(m):
        w2[j] = 1.0 / w2[j] if w2[j] > 0.0 else 0.0
    loss, _, cg_ok = implicit_solve(
        Kmat, KTmat, KCmat, KCTmat, uu, vv, sc, w1, w2, xw, cg_tol, cg_max, w3, w4, w5, w6, w7, w8, tmp_m
    )
    for i in range(m):
        grad_p[i] = xw[i]
    flags = FLAG_SINKHORN if st_sk != OK else 0
    if not cg_ok:
        flags += FLAG_CG
    return loss, flags


@kernel()
def w_implicit_scaled(
    Kop,
    KTop,
    KCop,
    KCTop,
    pa,
    qb,
    tol,
    max_iter,
    newton_every,
    u,
    v,
    s,
    t,
    tmp_m,
    tmp_n,
    xw,
    cg_tol,
    cg_max,
    grad_p,
    w1,
    w2,
    w3,
    w4,
    w5,
    w6,
    w7,
    w8,
    xs,
):
    """Implicit path kept entirely in the scaled form across inner steps (no exp/log per step).

    ``Kop = Kg`` (``KTop`` its transpose, ``KCop``/``KCTop`` the same for ``Kg ⊙ C``), in
    float64 or float32 (``xs``: an M scratch of the same dtype; float32 halves the bytes
    each matvec streams, see ``jko_query``). ``v`` (the scaled g) persists between calls as
    the warm start; each call runs at least one pair, then pairs until the row-marginal L1
    error ``|vmax u ⊙ (Kg v) - pa|_1 < tol`` or ``max_iter``. Every ``newton_every`` pairs
    without convergence (0: never) a Newton step on the duals is taken: the linearised
    marginal equations reduce to the same Schur system as the gradient, ``A α = pa - prow``,
    solved loosely by PCG from zero (``NEWTON_RTOL``, ``NEWTON_CG_MAX``), then
    ``v ← v ⊙ exp(-qinv ⊙ Πᵀα)`` (the next row update recomputes u exactly). This removes
    the slow inter-cluster modes of plain Sinkhorn. The plan ``vmax diag(u) Kg diag(v)``
    then feeds ``implicit_solve`` with its own marginals. Returns ``(ok, loss, flags)``;
    ``ok`` False = a sum underflowed (caller falls back to the log path); ``flags`` as in
    ``w_converged``.
    """
    m = pa.shape[0]
    vmax = 1.0
    it = 0
    since = 0
    fresh = True
    flags = 0
    while True:
        ok, _ = scaled_half_step_lp(Kop, pa, v, xs, s, tmp_m, TINY)
        if not fresh:
            err = 0.0
            for i in range(m):
                err += abs(vmax * u[i] * s[i] - pa[i])
            if err < tol:
                break
            if it >= max_iter:
                flags = FLAG_SINKHORN
                break
            if ok and newton_every > 0 and since >= newton_every:
                nthr = 0.0
                for i in range(m):
                    w1[i] = vmax * u[i] * s[i]
                    cs = vmax * v[i] * t[i]
                    w2[i] = 1.0 / cs if cs > 0.0 else 0.0
                    w3[i] = pa[i] - w1[i]
                    grad_p[i] = 0.0
                    d = w1[i] if w1[i] > TINY else TINY
                    nthr += w3[i] * w3[i] / d
                schur_pcg(
                    Kop, KTop, u, v, vmax, w1, w2, w3, grad_p, NEWTON_RTOL**2 * nthr, NEWTON_CG_MAX, w5, w6, w7, w8, xs
                )  # an inexact Newton step: its convergence is not required
                _pit_apply(Kop, KTop, u, v, vmax, grad_p, xs, tmp_n)
                bmax = -np.inf
                for j in range(m):
                    bj = -w2[j] * tmp_n[j]
                    bj = min(max(bj, -10.0), 10.0)
                    v[j] *= np.exp(bj)
                    if v[j] > bmax:
                        bmax = v[j]
                for j in range(m):
                    v[j] /= bmax
                since = 0
                fresh = True
                continue
        if not ok:
            return False, 0.0, 0
        for i in range(m):
            u[i] = tmp_m[i]
        ok, vmax = scaled_half_step_lp(KTop, qb, u, xs, t, tmp_n, TINY)
        if not ok:
            return False, 0.0, 0
        for j in range(m):
            v[j] = tmp_n[j]
        it += 1
        since += 1
        fresh = False
    for i in range(m):
        w1[i] = vmax * u[i] * s[i]
        cs = vmax * v[i] * t[i]
        w2[i] = 1.0 / cs if cs > 0.0 else 0.0
    loss, _, cg_ok = implicit_solve(
        Kop, KTop, KCop, KCTop, u, v, vmax, w1, w2, xw, cg_tol, cg_max, w3, w4, w5, w6, w7, w8, xs
    )
    for i in range(m):
        grad_p[i] = xw[i]
    if not cg_ok:
        flags += FLAG_CG
    return True, loss, flags


# ----------------------------------------------------------------------------------------
# One query: outer loop, inner Adam
# ----------------------------------------------------------------------------------------
@kernel()
def jko_query(p0, E, C, C_T, Ks, fp, ip, p_out, losses, f_out, g_out, diag):
    """Run the JKO flow for one pool; writes ``p_out`` (M,), ``losses`` (T*inner,),
    ``f_out, g_out`` (duals of the final uniform-target Sinkhorn when ``ip[IP_DUALS]``
    and the mode has a transport term, else zeros) and ``diag`` (int64, 2): the number of
    inner steps whose converged-plan Sinkhorn stopped at ``max_iter`` above its tolerance
    (``diag[0]``) and whose Schur PCG stopped at ``cg_max`` above its tolerance
    (``diag[1]``) — 0 on the unrolled path, whose fixed iteration count is the published
    definition. Returns a status code."""
    m = p0.shape[0]
    h = fp[FP_H]
    lam = fp[FP_LAM]
    rho = fp[FP_RHO]
    eps = fp[FP_EPS]
    alpha = fp[FP_ALPHA]
    lr = fp[FP_LR]
    tol = fp[FP_TOL]
    cg_tol = fp[FP_CG_TOL]
    tol_step = fp[FP_TOL_STEP]
    T = ip[IP_T]
    inner = ip[IP_INNER]
    n_iter = ip[IP_NITER]
    n_grad = min(ip[IP_NGRAD], n_iter)
    mode = ip[IP_MODE]
    grad = ip[IP_GRAD]
    objective = ip[IP_OBJ]
    max_iter = ip[IP_MAXIT]
    cg_max = ip[IP_CGMAX]
    newton = ip[IP_NEWTON]
    n_warm = n_iter - n_grad

    if mode == MODE_BREGMAN:
        al = min(max(alpha, 0.0), 1.0)
        w_w = al / (2.0 * h)
        w_kl = (1.0 - al) / (2.0 * h)
        use_w = al > 0.0
        use_kl = True
    elif mode == MODE_W:
        w_w = 1.0 / (2.0 * h)
        w_kl = 0.0
        use_w = True
        use_kl = False
    elif mode == MODE_KL:
        w_w = 0.0
        w_kl = 1.0 / (2.0 * h)
        use_w = False
        use_kl = True
    else:
        w_w = 0.0
        w_kl = 0.0
        use_w = False
        use_kl = False
    converged_path = objective == OBJ_ENTROPIC or grad == GRAD_IMPLICIT
    implicit_scaled = objective == OBJ_TRANSPORT and grad == GRAD_IMPLICIT

    mw = m if use_w else 1
    Kg = np.empty((mw, mw))
    KC = np.empty((mw, mw))
    cmin = 0.0
    if use_w:
        cmin = gibbs_kernel(C, eps, Kg)
        for i in range(m):
            for j in range(m):
                KC[i, j] = Kg[i, j] * C[i, j]
    # implicit path: transposed copies (every product is a row-dot matvec), float32 when the
    # tolerances are loose enough (tol, cg_tol >= LOWP_TOL: a float32 operator stalls tighter
    # CG solves) and every Kg entry is a normal float32
    lowp = False
    mi = 1
    if implicit_scaled and use_w:
        mi = m
        cmax = -np.inf
        for i in range(m):
            for j in range(m):
                if C[i, j] > cmax:
                    cmax = C[i, j]
        lowp = tol >= LOWP_TOL and cg_tol >= LOWP_TOL and (cmax - cmin) / eps <= LOWP_RANGE
    m32 = mi if lowp else 1
    m64 = 1 if lowp else mi
    K32 = np.empty((m32, m32), np.float32)
    KT32 = np.empty((m32, m32), np.float32)
    KC32 = np.empty((m32, m32), np.float32)
    KCT32 = np.empty((m32, m32), np.float32)
    Ks32 = np.empty((m32, m32), np.float32)
    KT64 = np.empty((m64, m64))
    KCT64 = np.empty((m64, m64))
    if lowp:
        for i in range(m):
            for j in range(m):
                K32[i, j] = Kg[i, j]
                KT32[j, i] = Kg[i, j]
                KC32[i, j] = KC[i, j]
                KCT32[j, i] = KC[i, j]
                Ks32[i, j] = Ks[i, j]
    elif mi > 1:
        for i in range(m):
            for j in range(m):
                KT64[j, i] = Kg[i, j]
                KCT64[j, i] = KC[i, j]
    xs32 = np.empty(m, np.float32)
    vprev = np.ones(m)
    xprev = np.zeros(m)
    xs64 = np.empty(m)
    ng = max(n_grad, 1)
    U = np.empty((ng, m))
    S = np.empty((ng, m))
    V = np.empty((ng, m))
    TT = np.empty((ng, m))
    Gs = np.empty((ng + 1, m))
    u = np.empty(m)
    v = np.empty(m)
    y = np.empty(m)
    z = np.empty(m)
    tmp_m = np.empty(m)
    tmp_n = np.empty(m)
    fbar = np.empty(m)
    gbar = np.empty(m)
    abar = np.empty(m)
    pa = np.empty(m)
    qb = np.empty(m)
    fw = np.zeros(m)
    gw = np.zeros(m)
    vs = np.ones(m)  # scaled g of the implicit path (warm start across inner steps)
    xw = np.zeros(m)
    wk = np.empty((8, m))
    theta = np.empty(m)
    a = np.empty(m)
    p = np.empty(m)
    b = np.empty(m)
    q = np.empty(m)
    gh = np.empty(m)
    kp = np.empty(m)
    mom = np.empty(m)
    vel = np.empty(m)
    for i in range(m):
        q[i] = p0[i]
    status = OK
    step_idx = 0
    diag[0] = 0
    diag[1] = 0
    fl = 0
    for _t in range(T):
        for i in range(m):
            b[i] = np.log(max(q[i], FLOOR))
            qb[i] = np.exp(b[i])
            theta[i] = b[i]
            mom[i] = 0.0
            vel[i] = 0.0
        for s_ in range(1, inner + 1):
            # a = log_softmax(theta), p = exp(a)
            mx = -np.inf
            for i in range(m):
                if theta[i] > mx:
                    mx = theta[i]
            se = 0.0
            for i in range(m):
                se += np.exp(theta[i] - mx)
            lse = mx + np.log(se)
            for i in range(m):
                a[i] = theta[i] - lse
                p[i] = np.exp(a[i])
            if lowp:
                for i in range(m):
                    xs32[i] = p[i]
                matvec_lp(Ks32, xs32, kp)
            else:
                matvec(Ks, p, kp)
            loss = 0.0
            for i in range(m):
                loss += p[i] * E[i] + lam * p[i] * a[i] + 0.5 * rho * p[i] * kp[i]
                gh[i] = p[i] * E[i] + lam * p[i] * (a[i] + 1.0) + rho * p[i] * kp[i]
            if use_w:
                if implicit_scaled:
                    # Sinkhorn only needs to be accurate relative to how far p moved since the
                    # previous inner step (warm start): tol_eff = max(tol, tol_step * |Δp|_1)
                    dp = 0.0
                    for i in range(m):
                        dp += abs(p[i] - pa[i])
                        pa[i] = p[i]
                    tol_eff = max(tol, tol_step * dp) if s_ > 1 else tol
                    # the duals and the gradient move smoothly along the Adam path: from the
                    # third inner step on, warm-start both from a linear extrapolation of the
                    # last two solutions (v in log space, renormalised to max 1)
                    if s_ >= 3:
                        bm = 0.0
                        for j in range(m):
                            vj = vs[j]
                            if vj > 0.0 and vprev[j] > 0.0:
                                vn = vj * (vj / vprev[j])
                            else:
                                vn = vj
                            vprev[j] = vj
                            vs[j] = vn
                            if vn > bm:
                                bm = vn
                            xj = xw[j]
                            xw[j] = 2.0 * xj - xprev[j]
                            xprev[j] = xj
                        if bm > 0.0 and np.isfinite(bm):
                            for j in range(m):
                                vs[j] /= bm
                        else:
                            for j in range(m):
                                vs[j] = vprev[j]
                    else:
                        for j in range(m):
                            vprev[j] = vs[j]
                            xprev[j] = xw[j]
                    if lowp:
                        ok, lw, fl = w_implicit_scaled(
                            K32,
                            KT32,
                            KC32,
                            KCT32,
                            pa,
                            qb,
                            tol_eff,
                            max_iter,
                            newton,
                            u,
                            vs,
                            y,
                            z,
                            tmp_m,
                            tmp_n,
                            xw,
                            cg_tol,
                            cg_max,
                            abar,
                            wk[0],
                            wk[1],
                            wk[2],
                            wk[3],
                            wk[4],
                            wk[5],
                            wk[6],
                            wk[7],
                            xs32,
                        )
                    else:
                        ok, lw, fl = w_implicit_scaled(
                            Kg,
                            KT64,
                            KC,
                            KCT64,
                            pa,
                            qb,
                            tol_eff,
                            max_iter,
                            newton,
                            u,
                            vs,
                            y,
                            z,
                            tmp_m,
                            tmp_n,
                            xw,
                            cg_tol,
                            cg_max,
                            abar,
                            wk[0],
                            wk[1],
                            wk[2],
                            wk[3],
                            wk[4],
                            wk[5],
                            wk[6],
                            wk[7],
                            xs64,
                        )
                    if ok:
                        for i in range(m):
                            gh[i] += w_w * p[i] * abar[i]
                        diag[0] += fl & FLAG_SINKHORN
                        diag[1] += (fl & FLAG_CG) // FLAG_CG
                    else:
                        implicit_scaled = False  # log-form fallback for the rest of the query
                        for i in range(m):
                            fw[i] = 0.0
                            gw[i] = 0.0
                if use_w and not implicit_scaled and converged_path:
                    lw, fl = w_converged(
                        C,
                        C_T,
                        Kg,
                        KC,
                        cmin,
                        a,
                        b,
                        eps,
                        fw,
                        gw,
                        tol,
                        max_iter,
                        objective,
                        xw,
                        cg_tol,
                        cg_max,
                        abar,
                        pa,
                        qb,
                        u,
                        v,
                        y,
                        z,
                        tmp_m,
                        tmp_n,
                        wk[0],
                        wk[1],
                        wk[2],
                        wk[3],
                        wk[4],
                        wk[5],
                        wk[6],
                        wk[7],
                    )
                    diag[0] += fl & FLAG_SINKHORN
                    diag[1] += (fl & FLAG_CG) // FLAG_CG
                    # restore qb (the solver's scratch) for the next step
                    for i in range(m):
                        qb[i] = np.exp(b[i])
                    for i in range(m):
                        gh[i] += w_w * p[i] * abar[i]
                elif not converged_path:
                    for i in range(m):
                        pa[i] = p[i]
                    ok, lw = w_unrolled_scaled(
                        Kg, KC, pa, qb, eps, n_warm, n_grad, U, S, V, TT, u, v, y, z, tmp_m, tmp_n, fbar, gbar, abar
                    )
                    if not ok:
                        lw = w_unrolled_log(C, C_T, a, b, eps, n_warm, n_grad, U, Gs, u, v, fbar, gbar, abar)
                    for i in range(m):
                        gh[i] += w_w * abar[i]
                loss += w_w * lw
            if use_kl:
                kl = 0.0
                for i in range(m):
                    kl += p[i] * (a[i] - b[i])
                    gh[i] += w_kl * p[i] * (a[i] - b[i] + 1.0)
                loss += w_kl * kl
            losses[step_idx] = loss
            step_idx += 1
            sg = 0.0
            for i in range(m):
                sg += gh[i]
            bc1 = 1.0 - BETA1**s_
            bc2s = np.sqrt(1.0 - BETA2**s_)
            step = lr / bc1
            for i in range(m):
                gt = gh[i] - p[i] * sg
                mom[i] += (gt - mom[i]) * (1.0 - BETA1)
                vel[i] = BETA2 * vel[i] + (1.0 - BETA2) * gt * gt
                theta[i] -= step * mom[i] / (np.sqrt(vel[i]) / bc2s + ADAM_EPS)
        # q <- softmax(theta)
        mx = -np.inf
        for i in range(m):
            if theta[i] > mx:
                mx = theta[i]
        se = 0.0
        for i in range(m):
            q[i] = np.exp(theta[i] - mx)
            se += q[i]
        for i in range(m):
            q[i] /= se
    for i in range(m):
        p_out[i] = q[i]
        f_out[i] = 0.0
        g_out[i] = 0.0
        if not np.isfinite(q[i]):
            status = NON_FINITE
    if ip[IP_DUALS] != 0 and (mode == MODE_W or mode == MODE_BREGMAN) and status == OK:
        for i in range(m):
            a[i] = np.log(max(q[i], FLOOR))
            b[i] = -np.log(m)
        if not use_w:
            cmin = 0.0
            Kg = np.empty((m, m))
            cmin = gibbs_kernel(C, eps, Kg)
        sinkhorn_log_solve(
            C, C_T, Kg, cmin, a, b, eps, f_out, g_out, n_iter, -1.0, 1, 0, True, TINY, pa, qb, u, v, y, z, tmp_m, tmp_n
        )
    return status


# ----------------------------------------------------------------------------------------
# HIGH LEVEL (kernels): batches, prange over queries
# ----------------------------------------------------------------------------------------
@kernel(parallel=True)
def rerank_dense(E, p0, offsets, Z, normalise, fp, ip, p_out, f_out, g_out, status, diag):
    """Ragged batch with dense geometry rows ``Z`` (one per flat candidate).

    Queries with ``status[q] != 0`` on entry are skipped (rejected by the wrapper);
    pools of size 1 get ``p = [1]``.  Each query builds C, K in its own scratch and writes
    its row of ``diag`` (int64, (nq, 2); see ``jko_query``).
    """
    nq = offsets.shape[0] - 1
    T = ip[IP_T]
    inner = ip[IP_INNER]
    for qi in prange(nq):
        if status[qi] != 0:
            continue
        lo = offsets[qi]
        hi = offsets[qi + 1]
        m = hi - lo
        if m == 1:
            p_out[lo] = 1.0
            f_out[lo] = 0.0
            g_out[lo] = 0.0
            continue
        C = np.empty((m, m))
        K = np.empty((m, m))
        cost_kernel_dense(Z, lo, hi, normalise, C, K)
        losses = np.empty(T * inner)
        status[qi] = jko_query(
            p0[lo:hi], E[lo:hi], C, C, K, fp, ip, p_out[lo:hi], losses, f_out[lo:hi], g_out[lo:hi], diag[qi]
        )


@kernel(parallel=True)
def rerank_csr(E, p0, offsets, indptr, indices, data, fp, ip, p_out, f_out, g_out, status, diag):
    """As ``rerank_dense`` with sparse-cosine geometry from CSR rows (one per candidate)."""
    nq = offsets.shape[0] - 1
    T = ip[IP_T]
    inner = ip[IP_INNER]
    for qi in prange(nq):
        if status[qi] != 0:
            continue
        lo = offsets[qi]
        hi = offsets[qi + 1]
        m = hi - lo
        if m == 1:
            p_out[lo] = 1.0
            f_out[lo] = 0.0
            g_out[lo] = 0.0
            continue
        C = np.empty((m, m))
        K = np.empty((m, m))
        cost_kernel_csr(indptr, indices, data, lo, hi, C, K)
        losses = np.empty(T * inner)
        status[qi] = jko_query(
            p0[lo:hi], E[lo:hi], C, C, K, fp, ip, p_out[lo:hi], losses, f_out[lo:hi], g_out[lo:hi], diag[qi]
        )
