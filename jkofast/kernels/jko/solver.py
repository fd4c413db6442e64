"""JKO inner/outer solver kernels (SPEC A.4.2-A.4.7), float64 throughout.

Layout: one query = ``p0, E`` (M,), ``C, C_T, Ks`` (M x M, ``Ks = (K + Kᵀ)/2``) and the
scalar parameters as one ``JKOParams``. The per-query driver ``jko_query`` is serial and
reads as the stages of SPEC A.4: the proximal weights of the mode (A.4.2), per inner
step ``log_softmax`` → ``energy_terms`` → the transport term of the gradient path →
``kl_term`` → ``adam_step`` (A.4.4), ``softmax`` per outer step, and ``dual_readout``
(A.4.5). ``rerank_pools`` runs it over a range of queries (the wrapper runs several ranges
on threads at once), each query writing only its own slice of the outputs.

One compiled unit per gradient path: ``jko_flow`` and ``rerank_pools`` take *path tokens*
(each ``None`` or ``True``): ``unrolled``, ``log_form`` (the unrolled path's log-domain
fallback), ``unr32`` (the unrolled path on float32 operators,
``jkofast.kernels.ot.unrolled32``), ``imp32`` / ``imp64`` (the implicit path with float32 / float64 operators),
``converged`` (``w_converged``: the entropic objective and the implicit path's fallback)
and ``duals`` (the dual read-out). Numba prunes every branch guarded by ``tok is not None``
when ``tok`` is None, so a call compiles only the kernels its tokens name; the wrappers
(``jkofast.jko.solver``) pick the tokens from the configuration. A lean specialisation
that meets a case it was not compiled for returns an internal retry code (``RETRY_F64``:
the pool needs float64 operators; ``RETRY_FALLBACK``: a scaled sum underflowed) instead of
finishing, and the wrapper reruns that pool from scratch with the token added: every
result is bit-identical to the all-paths kernel ``jko_query`` (every token ``True``), the
reference the specialisations are tested against (``tests/jko/test_jko.py``).

Gradient paths for the transport term ``W(p, q)`` (weight ``w = 1/(2h)``, or ``α/(2h)``;
kernels in ``jkofast.kernels.ot.transport``):

* ``GRAD_UNROLLED`` — the published behaviour: ``<Π, C>`` of a cold-started Sinkhorn with
  exactly ``n_iter`` pairs, differentiated by the hand-written adjoint of the last
  ``n_grad`` pairs (warm phase frozen).  Scaled (matvec) form, log form if a sum underflows;
  with the ``unr32`` token the matvecs run on float32 operators (float32 parity path).
* ``GRAD_IMPLICIT`` — exact gradient of ``<Π*, C>`` at a converged plan: the symmetric
  system of SPEC A.4.7 (Schur form, preconditioned CG on the tangent space); Sinkhorn
  warm-started across inner steps and stopped by ``tol``.
* ``OBJ_ENTROPIC`` — proximal term ``OT_ε(p, q)``; exact gradient ``f`` (envelope theorem).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jkofast import _codes
from jkofast._numba import kernel, native_call
from jkofast.kernels.jko.geometry import cost_kernel
from jkofast.kernels.ot.ieee import div, exp_tab
from jkofast.kernels.ot.sinkhorn_log import (
    GibbsCost,
    SinkhornWork,
    gibbs_cost,
    gibbs_kernel_sym,
    matvec,
    matvec_lp,
    sinkhorn_log_solve,
    vec_copy,
)
from jkofast.kernels.ot.transport import (
    FLAG_CG,
    FLAG_SINKHORN,
    OBJ_ENTROPIC,
    OBJ_TRANSPORT,
    TINY,
    GibbsOps,
    Limits,
    Tracked,
    w_converged,
    w_implicit_counted,
    w_unrolled_log,
    w_unrolled_scaled,
)
from jkofast.kernels.ot.unrolled32 import w_unrolled32

__all__ = [
    "GRAD_IMPLICIT",
    "GRAD_UNROLLED",
    "MODE_BREGMAN",
    "MODE_KL",
    "MODE_NOPROX",
    "MODE_W",
    "RETRY_F64",
    "RETRY_FALLBACK",
    "BatchOut",
    "Flow",
    "FlowOut",
    "JKOOperators",
    "JKOParams",
    "WarmStart",
    "adam_step",
    "add_transport_grad",
    "dual_readout",
    "energy_terms",
    "implicit_warm_start",
    "jko_flow",
    "jko_query",
    "jko_work",
    "kl_term",
    "log_softmax",
    "outer_start",
    "path_status",
    "prox_weights",
    "readout_cost",
    "rerank_pools",
    "softmax",
    "transport_implicit",
    "transport_operators",
    "transport_unrolled",
]

MODE_W, MODE_KL, MODE_NOPROX, MODE_BREGMAN = 0, 1, 2, 3
GRAD_UNROLLED, GRAD_IMPLICIT = 0, 1

OK, NON_FINITE = _codes.OK, _codes.NON_FINITE  # status codes: jkofast._codes
# internal status codes of the lean path specialisations (never returned to a user): rerun the
# pool with float64 implicit operators / with the fallback kernel; MISSING_PATH: the tokens
# do not cover the configured path (a wrapper bug); NO_ENTRY: the flow's entry is not of the
# argument types rerank_pools was compiled with (a wrapper bug)
RETRY_F64, RETRY_FALLBACK, MISSING_PATH, NO_ENTRY = -1, -2, -3, -4

# float32 operators on the implicit path: only when tol, cg_tol >= LOWP_TOL (float32 sums
# carry a relative error ~1e-6, below such tolerances) and max Kg / min Kg <= e^60
LOWP_TOL = 1e-5
LOWP_RANGE = 60.0

BETA1 = 0.9
BETA2 = 0.999
ADAM_EPS = 1e-8
FLOOR = 1e-30


class JKOParams(NamedTuple):
    """Scalar parameters of one JKO flow (``JKOConfig._params`` builds it; SPEC A.4.1).

    Floats: step ``h``, ``lam`` (λ), ``rho`` (ρ), Sinkhorn ``eps`` (ε), ``alpha`` (bregman
    α, unclamped), Adam ``lr``, converged-path ``tol``, ``cg_tol``, ``tol_step``. Ints:
    ``T``, ``inner`` steps, Sinkhorn ``n_iter`` / ``n_grad`` pairs, ``mode`` (``MODE_*``),
    ``grad`` (``GRAD_*``), ``objective`` (``OBJ_*``), ``duals`` (1 = dual read-out),
    ``max_iter`` (converged Sinkhorn pairs), ``cg_max``, ``newton_every``.
    """

    h: float
    lam: float
    rho: float
    eps: float
    alpha: float
    lr: float
    tol: float
    cg_tol: float
    tol_step: float
    T: int
    inner: int
    n_iter: int
    n_grad: int
    mode: int
    grad: int
    objective: int
    duals: int
    max_iter: int
    cg_max: int
    newton_every: int


class JKOOperators(NamedTuple):
    """Per-query operators of the transport and redundancy terms.

    The float64 ``GibbsCost`` and ``KC = Kg ⊙ C`` (1 x 1 without a transport term); the
    implicit path's ``GibbsOps`` in float32 (``lowp``) or float64 (``ops64.K`` is ``Kg``;
    the unused one 1 x 1, or None when its token is not given); ``Ks32`` the float32 ``Ks``
    when ``lowp``.
    """

    gc: GibbsCost
    KC: np.ndarray
    lowp: bool
    ops32: GibbsOps
    ops64: GibbsOps
    Ks32: np.ndarray


class FlowOut(NamedTuple):
    """Outputs of one pool: ``p_out`` (M,), ``losses`` (T*inner,), ``f_out, g_out`` (M,), ``diag`` int64 (2,)."""

    p_out: np.ndarray
    losses: np.ndarray
    f_out: np.ndarray
    g_out: np.ndarray
    diag: np.ndarray


class BatchOut(NamedTuple):
    """Outputs of a batch: flat ``p_out, f_out, g_out`` (n,), ``status`` int32 (nq,), ``diag`` int64 (nq, 2)."""

    p_out: np.ndarray
    f_out: np.ndarray
    g_out: np.ndarray
    status: np.ndarray
    diag: np.ndarray


class Flow(NamedTuple):
    """Per-query vectors (M) of the flow.

    Logits ``theta``, ``a = log_softmax θ``, ``p``, ``b = log q``, iterate ``q``,
    ``gh = ∂L/∂a``, ``kp = Ks p``, Adam ``mom``/``vel``, ``abar`` the transport term's
    gradient.
    """

    theta: np.ndarray
    a: np.ndarray
    p: np.ndarray
    b: np.ndarray
    q: np.ndarray
    gh: np.ndarray
    kp: np.ndarray
    mom: np.ndarray
    vel: np.ndarray
    abar: np.ndarray


class WarmStart(NamedTuple):
    """State carried across inner steps by the converged paths.

    Duals ``fw, gw`` (log form), scaled ``vs`` and gradient ``xw`` of the implicit path
    with their previous values ``vprev``, ``xprev`` (linear extrapolation).
    """

    fw: np.ndarray
    gw: np.ndarray
    vs: np.ndarray
    vprev: np.ndarray
    xw: np.ndarray
    xprev: np.ndarray


# ----------------------------------------------------------------------------------------
# Set-up: weights of the proximal term, operators, scratch
# ----------------------------------------------------------------------------------------
@kernel(inline="always")
def prox_weights(prm):
    """``(w_W, w_KL, use_W, use_KL)`` of the mode (SPEC A.4.2): weights of ``W`` and ``KL``."""
    if prm.mode == MODE_BREGMAN:
        al = min(max(prm.alpha, 0.0), 1.0)
        return al / (2.0 * prm.h), (1.0 - al) / (2.0 * prm.h), al > 0.0, True
    if prm.mode == MODE_W:
        return 1.0 / (2.0 * prm.h), 0.0, True, False
    if prm.mode == MODE_KL:
        return 0.0, 1.0 / (2.0 * prm.h), False, True
    return 0.0, 0.0, False, False


@kernel(inline="always")
def transport_operators(C, C_T, Ks, prm, use_w, implicit, imp32, imp64, unr32):
    """``JKOOperators`` of one pool (``use_w``: a transport term; ``implicit``: its path).

    The implicit path gets transposed copies (every product is a row-dot matvec; on an exactly
    symmetric C the operators themselves, one exp per symmetric pair of Kg), float32
    when the token ``imp32`` is given, the tolerances are loose enough (tol, cg_tol >=
    LOWP_TOL: a float32 operator stalls tighter CG solves) and every Kg entry is a normal
    float32. The unrolled path gets the float32 operators with the token ``unr32`` when every
    Kg entry is a normal float32. ``ops32`` / ``Ks32`` are None without the ``imp32`` and
    ``unr32`` tokens, ``ops64`` without ``imp64``.
    """
    m = C.shape[0]
    mw = m if use_w else 1
    Kg = np.empty((mw, mw))
    KC = np.empty((mw, mw))
    cmin = 0.0
    sym = False
    if use_w:
        cmin, sym = gibbs_kernel_sym(C, prm.eps, Kg)
        for i in range(m):
            for j in range(m):
                KC[i, j] = Kg[i, j] * C[i, j]
    lowp = False
    mi = 1
    unr_ops = unr32 is not None and prm.objective == OBJ_TRANSPORT and prm.grad == GRAD_UNROLLED
    if use_w and ((implicit and (imp32 is not None or imp64 is not None)) or unr_ops):
        mi = m
        cmax = -np.inf
        for i in range(m):
            for j in range(m):
                if C[i, j] > cmax:
                    cmax = C[i, j]
        in_range = (cmax - cmin) / prm.eps <= LOWP_RANGE
        if implicit and imp32 is not None:
            lowp = prm.tol >= LOWP_TOL and prm.cg_tol >= LOWP_TOL and in_range
        elif unr_ops:
            lowp = in_range
    if imp32 is not None or unr32 is not None:
        o32, Ks32 = _operators32(Kg, KC, Ks, mi if lowp else 1, lowp, sym)
    else:
        o32, Ks32 = None, None
    if imp64 is not None:
        o64 = _operators64(Kg, KC, 1 if lowp else mi, sym)
    else:
        o64 = None
    return JKOOperators(GibbsCost(C, C_T, Kg, cmin, prm.eps), KC, lowp, o32, o64, Ks32)


@kernel(inline="always")
def _operators32(Kg, KC, Ks, m32, fill, sym):
    """Float32 ``GibbsOps`` (m32 x m32; 1 x 1 when unused) and ``Ks32``, copied from Kg, KC, Ks when ``fill``.

    With ``sym`` (C exactly symmetric) the transposes are the operators themselves: ``KT`` is
    ``K`` and ``KCT`` is ``KC`` (one array each; ``w_implicit_counted`` reads the shared storage
    as the sign that ``KC v`` and ``KCᵀu`` can share a sweep).
    """
    m = Kg.shape[0]
    f32 = np.float32
    K32 = np.empty((m32, m32), f32)
    KC32 = np.empty((m32, m32), f32)
    if sym:
        KT32 = K32
        KCT32 = KC32
    else:
        KT32 = np.empty((m32, m32), f32)
        KCT32 = np.empty((m32, m32), f32)
    o32 = GibbsOps(K32, KT32, KC32, KCT32, np.empty(m, f32))
    Ks32 = np.empty((m32, m32), f32)
    if fill:
        for i in range(m):
            for j in range(m):
                K32[i, j] = Kg[i, j]
                KC32[i, j] = KC[i, j]
                Ks32[i, j] = Ks[i, j]
        if not sym:
            for i in range(m):
                for j in range(m):
                    KT32[j, i] = Kg[i, j]
                    KCT32[j, i] = KC[i, j]
    return o32, Ks32


@kernel(inline="always")
def _operators64(Kg, KC, m64, sym):
    """Float64 ``GibbsOps``: Kg, KC and their transposes (m64 x m64; 1 x 1 when unused; with ``sym`` Kg, KC)."""
    m = Kg.shape[0]
    if sym and m64 > 1:
        return GibbsOps(Kg, Kg, KC, KC, np.empty(m))
    o64 = GibbsOps(Kg, np.empty((m64, m64)), KC, np.empty((m64, m64)), np.empty(m))
    if m64 > 1:
        KT64 = o64.KT
        KCT64 = o64.KCT
        for i in range(m):
            for j in range(m):
                KT64[j, i] = Kg[i, j]
                KCT64[j, i] = KC[i, j]
    return o64


@kernel(inline="always")
def jko_work(m, ng, unrolled, warm):
    """Allocate the scratch of one query.

    ``Flow``, ``SinkhornWork``, the (8, M) implicit-solve rows, the unrolled path's
    ``Tracked`` pairs (``ng`` of them; None without the token ``unrolled``) and the
    ``WarmStart`` (cold; None without the token ``warm``).
    """
    v = np.empty((18, m))  # the rows of Flow and SinkhornWork
    fl = Flow(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9])
    sk = SinkhornWork(v[10], v[11], v[12], v[13], v[14], v[15], v[16], v[17])
    if unrolled is not None:
        tr = Tracked(np.empty((ng, m)), np.empty((ng, m)), np.empty((ng, m)), np.empty((ng, m)), np.empty((ng + 1, m)))
    else:
        tr = None
    if warm is not None:
        ws = WarmStart(np.zeros(m), np.zeros(m), np.ones(m), np.ones(m), np.zeros(m), np.zeros(m))
    else:
        ws = None
    return fl, sk, np.empty((8, m)), tr, ws


# ----------------------------------------------------------------------------------------
# Stages of one inner step (SPEC A.4.4, gradients A.4.6)
# ----------------------------------------------------------------------------------------
@kernel(inline="always")
def outer_start(q, b, qb, theta, mom, vel):
    """Start of an outer step: ``b = log max(q, 1e-30)``, ``qb = exp(b)``, ``θ = b``, fresh Adam state."""
    for i in range(q.shape[0]):
        b[i] = np.log(max(q[i], FLOOR))
        qb[i] = np.exp(b[i])
        theta[i] = b[i]
        mom[i] = 0.0
        vel[i] = 0.0


# softmax below shares the max/sum sweep but divides by the sum: other rounding, and it gives the iterate
@kernel(inline="always")
def log_softmax(theta, a, p, tab):
    """Set ``a = log_softmax(θ)``, ``p = exp(a)``.

    ``tab`` True: the 2M exps through the inline ``exp_tab`` (the implicit path: the C library's bits on
    glibc with FMA, about 2 ns per exp inline; ``jkofast.kernels.ot.ieee``), else ``np.exp``.
    """
    m = theta.shape[0]
    mx = -np.inf
    for i in range(m):
        if theta[i] > mx:
            mx = theta[i]
    se = 0.0
    if tab:
        for i in range(m):
            se += exp_tab(theta[i] - mx)
    else:
        for i in range(m):
            se += np.exp(theta[i] - mx)
    lse = mx + np.log(se)
    if tab:
        for i in range(m):
            a[i] = theta[i] - lse
            p[i] = exp_tab(a[i])
    else:
        for i in range(m):
            a[i] = theta[i] - lse
            p[i] = np.exp(a[i])


# not log_softmax's p: exp(t - max)/sum rounds unlike exp(t - lse); the outer iterate is pinned bitwise
@kernel(inline="always")
def softmax(theta, q):
    """``q = softmax(θ)`` (the iterate after an outer step)."""
    m = theta.shape[0]
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


@kernel(inline="always")
def energy_terms(E, lam, rho, Ks, op, a, p, kp, gh, imp32):
    """``<p,E> + λ<p,a> + ½ρ pᵀKs p`` (returned) and its gradient w.r.t. ``a`` into ``gh``.

    ``kp = Ks p`` through the float32 ``op.Ks32`` when ``op.lowp`` (compiled only with the
    ``imp32`` token).
    """
    m = p.shape[0]
    if imp32 is not None and op.lowp:
        xs = op.ops32.xs
        for i in range(m):
            xs[i] = p[i]
        matvec_lp(op.Ks32, xs, kp)
    else:
        matvec(Ks, p, kp)
    loss = 0.0
    for i in range(m):
        loss += p[i] * E[i] + lam * p[i] * a[i] + 0.5 * rho * p[i] * kp[i]
        gh[i] = p[i] * E[i] + lam * p[i] * (a[i] + 1.0) + rho * p[i] * kp[i]
    return loss


@kernel(inline="always")
def kl_term(w_kl, a, b, p, gh):
    """``KL(p‖q) = <p, a - b>`` (returned); adds ``w_kl · p ⊙ (a - b + 1)`` to ``gh``."""
    kl = 0.0
    for i in range(p.shape[0]):
        kl += p[i] * (a[i] - b[i])
        gh[i] += w_kl * p[i] * (a[i] - b[i] + 1.0)
    return kl


@kernel(inline="always")
def add_transport_grad(w_w, p, abar, flags, gh, diag):
    """``gh += w_W · p ⊙ abar`` (a p-gradient); count the convergence ``flags`` in ``diag``."""
    for i in range(p.shape[0]):
        gh[i] += w_w * p[i] * abar[i]
    diag[0] += flags & FLAG_SINKHORN
    diag[1] += (flags & FLAG_CG) // FLAG_CG


@kernel(inline="always")
def transport_unrolled(op, n_warm, n_grad, a, b, p, tr, sk, w, abar, log_form, unrolled, unr32):
    """Unrolled path: ``(ok, <Π, C>)`` and ``abar = ∂<Π,C>/∂a``, log form on underflow.

    Float32 operators first (token ``unr32``, ``op.lowp``), then the float64 scaled form
    (token ``unrolled``), then the log form (token ``log_form``). ``ok`` False: every form
    compiled in underflowed.
    """
    pa = sk.pa
    for i in range(p.shape[0]):
        pa[i] = p[i]
    ok, lw = False, 0.0
    if unr32 is not None and op.lowp:
        ok, lw = w_unrolled32(op.ops32, op.gc.eps, n_warm, n_grad, tr, sk, w, abar)
    if not ok and unrolled is not None:
        ok, lw = w_unrolled_scaled(op.gc, op.KC, n_warm, n_grad, tr, sk, w, abar)
    if not ok and log_form is not None:
        lw = w_unrolled_log(op.gc, a, b, n_warm, n_grad, tr, sk, w, abar)
        ok = True
    return ok, lw


@kernel(inline="always")
def implicit_warm_start(p, pa, s_, tol, tol_step, ws):
    """Warm start of the implicit path for inner step ``s_``; returns its Sinkhorn tolerance.

    Sinkhorn only needs to be accurate relative to how far p moved since the previous inner
    step (``pa`` holds it; set to p here): ``tol_eff = max(tol, tol_step * |Δp|_1)``. The
    duals and the gradient move smoothly along the Adam path: from the third inner step on,
    both start from a linear extrapolation of the last two solutions (v in log space,
    renormalised to max 1).
    """
    m = p.shape[0]
    vs, vprev, xw, xprev = ws.vs, ws.vprev, ws.xw, ws.xprev
    dp = 0.0
    for i in range(m):
        dp += abs(p[i] - pa[i])
        pa[i] = p[i]
    if s_ < 3:
        for j in range(m):
            vprev[j] = vs[j]
            xprev[j] = xw[j]
        return max(tol, tol_step * dp) if s_ > 1 else tol
    bm = 0.0
    for j in range(m):
        vj = vs[j]
        if vj > 0.0 and vprev[j] > 0.0:
            vn = vj * div(vj, vprev[j])
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
            vs[j] = div(vs[j], bm)
    else:
        for j in range(m):
            vs[j] = vprev[j]
    return max(tol, tol_step * dp)


@kernel(inline="always")
def transport_implicit(op, prm, lim, s_, p, ws, sk, w, abar, imp32, imp64):
    """Implicit path in the scaled form: ``(ok, <Π*, C>, flags)``, ``abar = ∂<Π*,C>/∂p``.

    ``op.ops32`` when ``op.lowp`` (token ``imp32``), else ``op.ops64`` (token ``imp64``;
    without it the driver has returned ``RETRY_F64`` before). ``ok`` False = a sum
    underflowed: the warm-started log-form duals are reset and the caller switches to
    ``w_converged`` for the rest of the query.
    """
    tol_eff = implicit_warm_start(p, sk.pa, s_, prm.tol, prm.tol_step, ws)
    ok, lw, flags = False, 0.0, 0
    # w_implicit_counted is called here itself (its counts unused): a thin wrapper returning three of its
    # values would be a library of its own, linking it and generating its machine code again (0.8 s of compile)
    if imp32 is not None and op.lowp:
        ok, lw, flags, _, _, _, _, _, _ = w_implicit_counted(op.ops32, tol_eff, lim, ws.vs, ws.xw, abar, sk, w)
    elif imp64 is not None:
        ok, lw, flags, _, _, _, _, _, _ = w_implicit_counted(op.ops64, tol_eff, lim, ws.vs, ws.xw, abar, sk, w)
    if not ok:
        fw, gw = ws.fw, ws.gw
        for i in range(p.shape[0]):
            fw[i] = 0.0
            gw[i] = 0.0
    return ok, lw, flags


@kernel(inline="always")
def adam_step(theta, gh, p, mom, vel, s_, lr):
    """Adam step ``s_`` on θ (PyTorch defaults) with the logit gradient ``gh - p Σ gh``.

    The divisions are ``div`` (IEEE, no zero-divisor test; the divisors are positive), so the update
    loop vectorises.
    """
    sg = 0.0
    for i in range(p.shape[0]):
        sg += gh[i]
    bc1 = 1.0 - BETA1**s_
    bc2s = np.sqrt(1.0 - BETA2**s_)
    step = lr / bc1
    for i in range(p.shape[0]):
        gt = gh[i] - p[i] * sg
        mom[i] += (gt - mom[i]) * (1.0 - BETA1)
        vel[i] = BETA2 * vel[i] + (1.0 - BETA2) * gt * gt
        theta[i] -= div(step * mom[i], div(np.sqrt(vel[i]), bc2s) + ADAM_EPS)


@kernel(inline="always")
def readout_cost(op, C, C_T, eps, use_w, dls, duals):
    """``GibbsCost`` of the dual read-out: the transport term's, or a new one (token ``duals``, no transport term)."""
    if duals is not None and dls and not use_w:
        return gibbs_cost(C, C_T, eps)
    return op.gc


@kernel(inline="always")
def dual_readout(q, gc, n_iter, duals, a, b, sk, out, tok):
    """Write ``out.p_out = q`` and the dual read-out (SPEC A.4.5); return the status.

    With ``duals`` and the token ``tok`` (which compiles the Sinkhorn in): the duals of
    ``n_iter`` cold pairs from ``log max(q, 1e-30)`` to the uniform target, else
    ``f_out = g_out = 0``.
    """
    p_out, f_out, g_out = out.p_out, out.f_out, out.g_out
    m = q.shape[0]
    status = OK
    for i in range(m):
        p_out[i] = q[i]
        f_out[i] = 0.0
        g_out[i] = 0.0
        if not np.isfinite(q[i]):
            status = NON_FINITE
    if tok is not None and duals and status == OK:
        for i in range(m):
            a[i] = np.log(max(q[i], FLOOR))
            b[i] = -np.log(m)
        sinkhorn_log_solve(gc, a, b, f_out, g_out, n_iter, -1.0, np.int64(1), TINY, sk)
    return status


# ----------------------------------------------------------------------------------------
# One query: outer loop, inner Adam
# ----------------------------------------------------------------------------------------
@kernel(inline="always")
def path_status(prm, use_w, unrolled, unr32, imp32, imp64, converged):
    """``OK``, or ``MISSING_PATH`` when the tokens compile no kernel for the configured transport path."""
    if not use_w:
        return OK
    if prm.objective == OBJ_TRANSPORT and prm.grad == GRAD_IMPLICIT:
        if imp32 is None and imp64 is None:
            return MISSING_PATH
    elif prm.objective == OBJ_ENTROPIC:
        if converged is None:
            return MISSING_PATH
    elif unrolled is None and unr32 is None:
        return MISSING_PATH
    return OK


@kernel()
def jko_flow(p0, E, C, C_T, Ks, prm, out, unrolled, log_form, unr32, imp32, imp64, converged, duals):
    """Run the JKO flow for one pool with the kernels the path tokens name.

    Writes ``out`` (a ``FlowOut``): ``p_out`` (M,), ``losses`` (T*inner,), ``f_out, g_out``
    (duals of the final uniform-target Sinkhorn when ``prm.duals`` and the mode has a
    transport term, else zeros) and ``diag`` (int64, 2): the number of inner steps whose
    converged-plan Sinkhorn stopped at ``max_iter`` above its tolerance (``diag[0]``) and
    whose Schur PCG stopped at ``cg_max`` above its tolerance (``diag[1]``) — 0 on the
    unrolled path, whose fixed iteration count is the published definition. Tokens (None
    or True; module docstring): ``unrolled``, ``log_form``, ``unr32``, ``imp32``, ``imp64``,
    ``converged``, ``duals``. Returns a status code, or ``RETRY_F64`` / ``RETRY_FALLBACK``
    (the outputs are then incomplete: rerun with the token added) / ``MISSING_PATH``.
    """
    w_w, w_kl, use_w, use_kl = prox_weights(prm)
    st = path_status(prm, use_w, unrolled, unr32, imp32, imp64, converged)
    if st != OK:
        return st
    losses, diag = out.losses, out.diag
    converged_path = prm.objective == OBJ_ENTROPIC or prm.grad == GRAD_IMPLICIT
    implicit = prm.objective == OBJ_TRANSPORT and prm.grad == GRAD_IMPLICIT
    tab = implicit  # the configured path: exp_tab in log_softmax, also after a fallback to w_converged
    n_grad = min(prm.n_grad, prm.n_iter)
    lim = Limits(prm.max_iter, prm.cg_tol, prm.cg_max, prm.newton_every)
    op = transport_operators(C, C_T, Ks, prm, use_w, implicit, imp32, imp64, unr32)
    if use_w and not op.lowp and ((implicit and imp64 is None) or (not converged_path and unrolled is None)):
        return RETRY_F64
    warm = True if imp32 is not None or imp64 is not None or converged is not None else None
    trk = True if unrolled is not None or unr32 is not None else None
    fl, sk, w, tr, ws = jko_work(p0.shape[0], max(n_grad, 1), trk, warm)
    theta, a, p, b, q, gh, kp, mom, vel, abar = fl
    vec_copy(p0, q)
    diag[0] = 0
    diag[1] = 0
    step_idx = 0
    for _t in range(prm.T):
        outer_start(q, b, sk.qb, theta, mom, vel)
        for s_ in range(1, prm.inner + 1):
            log_softmax(theta, a, p, tab)
            loss = energy_terms(E, prm.lam, prm.rho, Ks, op, a, p, kp, gh, imp32)
            if use_w:
                lw = 0.0
                if implicit and (imp32 is not None or imp64 is not None):
                    implicit, lw, flags = transport_implicit(op, prm, lim, s_, p, ws, sk, w, abar, imp32, imp64)
                    if implicit:
                        add_transport_grad(w_w, p, abar, flags, gh, diag)
                    elif converged is None:
                        return RETRY_FALLBACK
                if converged_path and not implicit:
                    if converged is not None:
                        lw, flags = w_converged(
                            op.gc, op.KC, a, b, ws.fw, ws.gw, ws.xw, prm.tol, prm.objective, lim, abar, sk, w
                        )
                        add_transport_grad(w_w, p, abar, flags, gh, diag)
                elif not converged_path and (unrolled is not None or unr32 is not None):
                    n_warm = prm.n_iter - n_grad
                    ok, lw = transport_unrolled(op, n_warm, n_grad, a, b, p, tr, sk, w, abar, log_form, unrolled, unr32)
                    if not ok:
                        return RETRY_FALLBACK
                    for i in range(p.shape[0]):
                        gh[i] += w_w * abar[i]
                loss += w_w * lw
            if use_kl:
                loss += w_kl * kl_term(w_kl, a, b, p, gh)
            losses[step_idx] = loss
            step_idx += 1
            adam_step(theta, gh, p, mom, vel, s_, prm.lr)
        softmax(theta, q)
    dls = prm.duals != 0 and (prm.mode == MODE_W or prm.mode == MODE_BREGMAN)
    return dual_readout(q, readout_cost(op, C, C_T, prm.eps, use_w, dls, duals), prm.n_iter, dls, a, b, sk, out, duals)


@kernel()
def jko_query(p0, E, C, C_T, Ks, prm, p_out, losses, f_out, g_out, diag):
    """Run the JKO flow for one pool on any path, float64 operators on the unrolled path (never retries).

    The all-paths reference: every wrapper and the theory and multi-resolution kernels call lean
    ``jko_flow`` specialisations (path tokens, retried by the wrapper), whose results the tests
    compare with this one. Outputs and status as ``jko_flow``.
    """
    out = FlowOut(p_out, losses, f_out, g_out, diag)
    return jko_flow(
        p0,
        E,
        C,
        C_T,
        Ks,
        prm,
        out,
        unrolled=True,
        log_form=True,
        unr32=None,
        imp32=True,
        imp64=True,
        converged=True,
        duals=True,
    )


# ----------------------------------------------------------------------------------------
# HIGH LEVEL (kernel): a batch, a range of queries (the wrapper runs ranges on threads)
# ----------------------------------------------------------------------------------------
# jko_flow called by the address of its own machine code: linked, rerank_pools' compile would
# optimise and generate machine code for the whole flow again (jkofast._numba.native_call)
call_flow = native_call(jko_flow, NO_ENTRY)


@kernel()
def rerank_pools(E, p0, offsets, rows, prm, out, status, tok, flow, q0, q1):
    """Rerank the pools ``q0 .. q1 - 1`` of a ragged batch with the path tokens ``tok`` of ``jko_flow`` (serial).

    ``tok``: the tuple ``(unrolled, log_form, unr32, imp32, imp64, converged, duals)``; ``flow``:
    the entry ``(address, key)`` of ``jko_flow``'s machine code for the arguments passed here
    (``jkofast._numba.native_entry``); a pool whose flow entry is of other types gets ``NO_ENTRY``.

    The wrapper runs disjoint query ranges on several threads at once (``jkofast._threads.over_ranges``;
    the GIL is released): a pool costs milliseconds, so this parallelises as a ``prange`` over
    queries would, and the serial kernel compiles in a third of the time.

    Query ``q`` owns the flat range ``offsets[q]:offsets[q+1]``; its C, K come from the
    candidate rows (``rows``: a ``PoolRows``: dense or CSR rows, a projected cost, user
    blocks) in its own scratch. ``out`` is a ``BatchOut`` (its ``status`` field unused:
    ``status`` int32 (nq,) is passed on its own).

    Queries with ``status[q] != 0`` on entry are skipped (rejected by the wrapper, or not
    part of a retry); pools of size 1 get ``p = [1]``. Each query writes its row of
    ``out.diag`` (int64, (nq, 2); see ``jko_flow``) and its status (``RETRY_*`` as
    ``jko_flow``).
    """
    p_out, f_out, g_out, diag = out.p_out, out.f_out, out.g_out, out.diag
    for qi in range(q0, q1):
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
        cost_kernel(rows, qi, lo, hi, C, K)
        res = FlowOut(p_out[lo:hi], np.empty(prm.T * prm.inner), f_out[lo:hi], g_out[lo:hi], diag[qi])
        status[qi] = call_flow(flow, (p0[lo:hi], E[lo:hi], C, C, K, prm, res, *tok))
