"""Log-domain Sinkhorn kernels (SPEC A.4.3): f from rows, then g from columns.

Two interchangeable forms of each half-step, both keeping the duals ``f, g`` in the log
domain:

* **scaled** — the Gibbs kernel ``Kg = exp(-(C - min C)/eps)`` is fixed for a given
  ``(C, eps)``, so ``LSE_j((g_j - C_ij)/eps)`` is ``(max g - min C)/eps + log (Kg v)_i`` with
  ``v_j = exp((g_j - max g)/eps)``: one M x N multiply-add matvec plus M exps and logs per
  half-step instead of M x N exps.  Exact as long as no row sum underflows; every half-step
  reports whether some row (with finite log-marginal) fell below ``tiny`` — then the
  caller falls back to
* **log** — the textbook log-sum-exp with a max shift per row/column, exact for any
  eps (small eps, C/eps in the thousands, zero-mass entries with log 0 = -inf).

Preconditions (not checked here; the wrappers in ``jkofast.ot.sinkhorn`` / ``jkofast.jko.solver``
do): C-contiguous arrays of one float dtype, ``C_T`` a contiguous transpose of ``C``,
``eps > 0``, ``log_a``/``log_b`` finite or -inf with at least one finite entry each.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jkofast import _codes
from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel

__all__ = [
    "GibbsCost",
    "SinkhornWork",
    "exp_weights",
    "gibbs_cost",
    "gibbs_kernel",
    "gibbs_kernel_sym",
    "log_to_scaled",
    "matvec",
    "matvec2_lp",
    "matvec_lp",
    "plan_cost",
    "plan_fill",
    "rmatvec",
    "row_marginal_error",
    "scale_normalise",
    "scaled_half_step",
    "scaled_half_step_lp",
    "scaled_to_log",
    "sinkhorn_log_solve",
    "sinkhorn_log_update_cols",
    "sinkhorn_log_update_rows",
    "vec_copy",
    "vec_fill",
    "vec_scale",
]

_ARITH = set(FASTMATH_ARITH)  # numba wants a set, _config holds a frozenset

# status codes: jkofast._codes (re-exported here for the wrappers that read them from this module)
OK, NOT_CONVERGED, NON_FINITE = _codes.OK, _codes.NOT_CONVERGED, _codes.NON_FINITE


# ----------------------------------------------------------------------------------------
# LOW LEVEL: matvecs (pure arithmetic leaves) and the Gibbs kernel
# ----------------------------------------------------------------------------------------
# fixed._matvec copies this (kept apart: fixed.py pins the published loss; this one may be retuned)
@kernel(fastmath=_ARITH)
def matvec(A, x, out):
    """``out = A @ x``: dot products, four rows at a time so each ``x_j`` load feeds 4 FMAs.

    Serial; the summation order depends only on the shape (never on threads).
    """
    m, n = A.shape
    i = 0
    while i + 4 <= m:
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for j in range(n):
            xj = x[j]
            s0 += A[i, j] * xj
            s1 += A[i + 1, j] * xj
            s2 += A[i + 2, j] * xj
            s3 += A[i + 3, j] * xj
        out[i] = s0
        out[i + 1] = s1
        out[i + 2] = s2
        out[i + 3] = s3
        i += 4
    while i < m:
        s = 0.0
        for j in range(n):
            s += A[i, j] * x[j]
        out[i] = s
        i += 1


@kernel(fastmath=_ARITH)
def rmatvec(A, x, out):
    """``out = A.T @ x`` as row axpys, four rows per sweep over ``out`` (vectorises over columns)."""
    m, n = A.shape
    for j in range(n):
        out[j] = 0.0
    i = 0
    while i + 4 <= m:
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        for j in range(n):
            out[j] += A[i, j] * x0 + A[i + 1, j] * x1 + A[i + 2, j] * x2 + A[i + 3, j] * x3
        i += 4
    while i < m:
        xi = x[i]
        for j in range(n):
            out[j] += A[i, j] * xi
        i += 1


# twin of matvec: one row per sweep, sums in the operands' type (matvec's always in float64)
@kernel(fastmath=_ARITH)
def matvec_lp(A, x, out):
    """``out = A @ x`` summed in the dtype of ``A[i, j] * x[j]`` (float32 when both are float32).

    One row per sweep: LLVM splits each row's sum over several SIMD accumulators, so the
    sweep runs at the load-port limit (about 1 µs for a float32 200 x 200 matrix); four
    rows per sweep, or a sum started from its first product, measured 1.3-1.5x slower.
    The accumulator starts as a float32 zero and takes the operands' type (float64 sums
    for float64 operands). ``out`` may be float64. Serial; the summation order depends
    only on the shape.
    """
    m, n = A.shape
    for i in range(m):
        s = np.float32(0.0)
        for j in range(n):
            s += A[i, j] * x[j]
        out[i] = s


@kernel(fastmath=_ARITH)
def matvec2_lp(A, x1, x2, out1, out2):
    """``out1 = A @ x1`` and ``out2 = A @ x2`` in one sweep over ``A`` (as ``matvec_lp``).

    Each entry of ``A`` is loaded once for both products: about 1.5x the time of one
    ``matvec_lp`` instead of 2x.
    """
    m, n = A.shape
    for i in range(m):
        s1 = np.float32(0.0)
        s2 = np.float32(0.0)
        for j in range(n):
            a = A[i, j]
            s1 += a * x1[j]
            s2 += a * x2[j]
        out1[i] = s1
        out2[i] = s2


# fixed.gibbs_fill is this plus a Kg_T fill (the solver here never needs Kg_T); kept as two kernels
@kernel()
def gibbs_kernel(C, eps, Kg):
    """Fill ``Kg = exp(-(C - min C)/eps)`` (entries in (0, 1]); return ``min C``."""
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
    return cmin


@kernel()
def gibbs_kernel_sym(C, eps, Kg):
    """``gibbs_kernel`` for a square C, one exp per pair ``C[i, j] == C[j, i]``; returns ``(min C, symmetric)``.

    Every entry holds the same bits as ``gibbs_kernel``'s (equal costs give equal entries);
    ``symmetric`` is True when every pair was equal (then ``Kg`` is exactly symmetric).
    """
    m = C.shape[0]
    cmin = np.inf
    for i in range(m):
        for j in range(m):
            if C[i, j] < cmin:
                cmin = C[i, j]
    inv = 1.0 / eps
    sym = True
    for i in range(m):
        Kg[i, i] = np.exp(-(C[i, i] - cmin) * inv)
        for j in range(i + 1, m):
            kij = np.exp(-(C[i, j] - cmin) * inv)
            Kg[i, j] = kij
            if C[j, i] == C[i, j]:
                Kg[j, i] = kij
            else:
                Kg[j, i] = np.exp(-(C[j, i] - cmin) * inv)
                sym = False
    return cmin, sym


@kernel()
def _vmax(x):
    mx = -np.inf
    for i in range(x.shape[0]):
        if x[i] > mx:
            mx = x[i]
    return mx


# ----------------------------------------------------------------------------------------
# Scaled half-steps.  State: g_j = eps*log(v_j) + G with max v = 1 (and likewise f, u, F).
# Row update f_i = eps*(a_i - LSE_j((g_j - C_ij)/eps)) becomes u_i ∝ a_i / (Kg v)_i, i.e.
# a matvec and M divisions; the scalar shifts carry the log-domain offsets exactly.
# ----------------------------------------------------------------------------------------
@kernel()
def scaled_half_step(Kg, transpose, w, x, y, tmp, tiny):
    """``y = Kg @ x`` (or ``Kg.T @ x``), ``tmp = w / y`` normalised to max 1.

    Returns ``(ok, tmax)``; ``ok`` is False when a positive-mass entry has ``y <= tiny`` or
    a normalised ``tmp`` at or below ``tiny`` (underflow: the caller switches to the log
    form). ``tmp`` is not committed by this function.
    """
    if transpose:
        rmatvec(Kg, x, y)
    else:
        matvec(Kg, x, y)
    return scale_normalise(w, y, tmp, tiny)


@kernel()
def scaled_half_step_lp(Kop, w, x, xs, y, tmp, tiny):
    """``scaled_half_step`` through ``matvec_lp``: ``xs = x`` (in ``Kop``'s dtype), ``y = Kop @ xs``.

    With float32 ``Kop`` and ``xs`` the matvec streams half the bytes and sums in float32
    (relative error ~1e-6); ``y``, ``tmp`` stay float64. Transposes are passed as matrices.
    """
    for j in range(x.shape[0]):
        xs[j] = x[j]
    matvec_lp(Kop, xs, y)
    return scale_normalise(w, y, tmp, tiny)


@kernel()
def scale_normalise(w, y, tmp, tiny):
    """``tmp = w / y`` normalised to max 1; ``(ok, tmax)`` as in ``scaled_half_step``."""
    n = w.shape[0]
    ok = True
    tmax = 0.0
    for i in range(n):
        if w[i] > 0.0:
            if y[i] > tiny:
                tmp[i] = w[i] / y[i]
                if tmp[i] > tmax:
                    tmax = tmp[i]
            else:
                ok = False
                tmp[i] = 0.0
        else:
            tmp[i] = 0.0
    if not ok or not tmax > 0.0 or not np.isfinite(tmax):
        return False, 1.0
    inv = 1.0 / tmax
    for i in range(n):
        tmp[i] = tmp[i] * inv
        if w[i] > 0.0 and tmp[i] <= tiny:
            ok = False
    return ok, tmax


@kernel()
def scaled_to_log(x, shift, eps, out):
    """``out_i = eps*log(x_i) + shift`` (x_i = 0 -> -inf)."""
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            out[i] = eps * np.log(x[i]) + shift
        else:
            out[i] = -np.inf


@kernel()
def log_to_scaled(f, eps, out):
    """``out_i = exp((f_i - max f)/eps)``; returns ``max f``."""
    fmax = _vmax(f)
    inv = 1.0 / eps
    for i in range(f.shape[0]):
        out[i] = np.exp((f[i] - fmax) * inv)
    return fmax


@kernel()
def exp_weights(log_a, tiny, out):
    """``out = exp(log_a)``; returns False if a finite entry underflows to ``<= tiny``."""
    ok = True
    for i in range(log_a.shape[0]):
        out[i] = np.exp(log_a[i])
        if log_a[i] != -np.inf and out[i] <= tiny:
            ok = False
    return ok


@kernel()
def sinkhorn_log_update_rows(C, eps, log_a, g, f_out):
    """Row half-step, pure log domain with a max shift per row (strict IEEE)."""
    m, n = C.shape
    inv = 1.0 / eps
    for i in range(m):
        if log_a[i] == -np.inf:
            f_out[i] = -np.inf
            continue
        # exact LSE row, also fixed.update_duals' underflow fallback; here every row (strict IEEE path)
        mx = -np.inf
        for j in range(n):
            x = (g[j] - C[i, j]) * inv
            if x > mx:
                mx = x
        s = 0.0
        for j in range(n):
            s += np.exp((g[j] - C[i, j]) * inv - mx)
        f_out[i] = eps * (log_a[i] - mx - np.log(s))


@kernel()
def sinkhorn_log_update_cols(C_T, eps, log_b, f, g_out):
    """Column half-step, pure log domain, over rows of the contiguous transpose ``C_T``."""
    sinkhorn_log_update_rows(C_T, eps, log_b, f, g_out)


@kernel()
def row_marginal_error(log_a, f_old, f_new, eps):
    """L1 row-marginal error of the plan of ``(f_old, g)`` given the next row update.

    Row sums of ``exp((f_old_i + g_j - C_ij)/eps)`` are ``a_i * exp((f_old_i - f_new_i)/eps)``,
    so the error costs M exps and no pass over C.
    """
    err = 0.0
    inv = 1.0 / eps
    for i in range(log_a.shape[0]):
        if log_a[i] == -np.inf:
            continue
        err += abs(np.exp(log_a[i]) * (np.exp((f_old[i] - f_new[i]) * inv) - 1.0))
    return err


# ----------------------------------------------------------------------------------------
# Driver: fixed iterations or tolerance, optional warm start (f, g given in place)
# ----------------------------------------------------------------------------------------
class GibbsCost(NamedTuple):
    """One cost matrix and its Gibbs kernel for one ``eps`` (crosses kernel boundaries).

    ``C`` (M x N) and ``C_T`` its contiguous transpose, ``Kg = exp(-(C - cmin)/eps)``
    (``gibbs_kernel``), all of one float dtype; ``cmin``, ``eps`` float64.
    """

    C: np.ndarray
    C_T: np.ndarray
    Kg: np.ndarray
    cmin: float
    eps: float


class SinkhornWork(NamedTuple):
    """Scratch of ``sinkhorn_log_solve``: four vectors of length M, four of length N.

    After a solve that ended in the scaled form, ``u, v`` (with the returned ``scale``)
    give the plan ``Pi = scale * u_i Kg_ij v_j``; ``pa = exp(log_a)``, ``qb = exp(log_b)``.
    """

    pa: np.ndarray
    u: np.ndarray
    s: np.ndarray
    tmp_m: np.ndarray
    qb: np.ndarray
    v: np.ndarray
    t: np.ndarray
    tmp_n: np.ndarray


@kernel()
def gibbs_cost(C, C_T, eps):
    """``GibbsCost`` of ``C`` (float64 kernel, freshly allocated)."""
    Kg = np.empty(C.shape)
    cmin = gibbs_kernel(C, eps, Kg)
    return GibbsCost(C, C_T, Kg, cmin, eps)


@kernel()
def vec_copy(src, dst):
    """``dst[:] = src`` as a plain loop (a slice assignment costs far more compile time)."""
    for i in range(src.shape[0]):
        dst[i] = src[i]


@kernel()
def vec_fill(x, value):
    """``x[:] = value`` as a plain loop."""
    for i in range(x.shape[0]):
        x[i] = value


@kernel()
def vec_scale(x, c):
    """``x *= c`` as a plain loop."""
    for i in range(x.shape[0]):
        x[i] *= c


@kernel()
def _check_due(it, max_iter, tol, check_every):
    """Whether the row-marginal error is computed after ``it`` pairs."""
    return it > 0 and (it >= max_iter or (tol > 0 and it % check_every == 0))


@kernel()
def _underflows(w, x, tiny):
    """Whether a positive-mass entry (``w > 0``) has ``x <= tiny``."""
    for j in range(w.shape[0]):
        if w[j] > 0.0 and x[j] <= tiny:
            return True
    return False


@kernel()
def _row_error(vmax, u, s, pa):
    """L1 row-marginal error of the scaled plan: row sums ``vmax * u_i * (Kg v)_i`` vs ``pa``."""
    err = 0.0
    for i in range(pa.shape[0]):
        err += abs(vmax * u[i] * s[i] - pa[i])
    return err


@kernel()
def _solve_log(C, C_T, eps, log_a, log_b, f, g, it, max_iter, tol, check_every, tmp_m):
    """Pure log form of ``sinkhorn_log_solve`` from pair ``it`` on; returns ``(it, err)``."""
    err = np.inf
    while True:
        sinkhorn_log_update_rows(C, eps, log_a, g, tmp_m)
        if _check_due(it, max_iter, tol, check_every):
            err = row_marginal_error(log_a, f, tmp_m, eps)
            if err < tol or it >= max_iter:
                break
        vec_copy(tmp_m, f)
        sinkhorn_log_update_cols(C_T, eps, log_b, f, g)
        it += 1
    return it, err


@kernel()
def sinkhorn_log_solve(gc, log_a, log_b, f, g, max_iter, tol, check_every, tiny, wk):
    """Run up to ``max_iter`` update pairs (f from rows, then g from columns) in place.

    ``gc`` is the ``GibbsCost`` of the problem; ``f, g`` hold the start (zeros = the
    reference's cold start) and receive the result. With ``tol > 0`` the row-marginal L1
    error of the current pair is checked every ``check_every`` pairs and the solve stops
    once it is ``< tol``; with ``tol <= 0`` exactly ``max_iter`` pairs run (reference
    semantics).

    The matvec form (state ``u, v`` with offsets, scratch ``wk``) runs first and falls back
    to the log form for the rest of the solve as soon as a sum underflows (a positive-mass
    entry at or below ``tiny``). On return in the scaled form, ``wk.u, wk.v`` and the
    returned ``scale`` give the plan ``Pi = scale * u_i Kg_ij v_j``. The scaled phase stays
    in this body on purpose: as a kernel of its own it cost ~10 % more compile time.

    Returns ``(n_iter, status, err, scaled, scale)``; ``status`` OK, NOT_CONVERGED (``tol``
    not reached) or NON_FINITE.
    """
    C, C_T, Kg, cmin, eps = gc
    pa, u, s, tmp_m, qb, v, t, tmp_n = wk
    it = np.int64(0)  # not a bare 0: a literal would compile _check_due a second time (docs/develop.md)
    err = np.inf
    scale = 1.0
    done = False
    scaled = exp_weights(log_a, tiny, pa) and exp_weights(log_b, tiny, qb)
    if scaled:
        G = log_to_scaled(g, eps, v)
        scaled = not _underflows(qb, v, tiny)
    if scaled:
        F = 0.0
        vmax = 1.0
        col_fail = False
        while True:
            # scaled_half_step(Kg, False / True, ...) spelled out: a literal bool compiles it twice
            matvec(Kg, v, s)
            ok, smax = scale_normalise(pa, s, tmp_m, tiny)
            if _check_due(it, max_iter, tol, check_every):
                err = _row_error(vmax, u, s, pa)
                if it >= max_iter or err < tol:
                    done = True
                    scale = vmax
                    break
            if not ok:
                break
            vec_copy(tmp_m, u)
            # f_i = eps*(a_i - log s_i) - (G - cmin) = eps*log(u_i) + F
            F = eps * np.log(smax) - G + cmin
            rmatvec(Kg, u, t)
            ok, vmax = scale_normalise(qb, t, tmp_n, tiny)
            if not ok:
                # (u, F) committed, (v, G) still the previous column state: finish this pair in log form
                scaled_to_log(u, F, eps, f)
                scaled_to_log(v, G, eps, g)
                sinkhorn_log_update_cols(C_T, eps, log_b, f, g)
                it += 1
                col_fail = True
                break
            vec_copy(tmp_n, v)
            G = eps * np.log(vmax) - F + cmin
            it += 1
        # done, or left the loop on a row underflow: (u, F), (v, G) form the last complete pair
        if not col_fail and it > 0:
            scaled_to_log(u, F, eps, f)
        if not col_fail:
            scaled_to_log(v, G, eps, g)
    if not done:
        it, err = _solve_log(C, C_T, eps, log_a, log_b, f, g, it, max_iter, tol, check_every, tmp_m)
    status = OK if tol <= 0 or err < tol else NOT_CONVERGED
    if not np.isfinite(err):
        status = NON_FINITE
    return it, status, err, done, scale


@kernel()
def plan_cost(C, f, g, eps):
    """``<Pi, C>`` and total mass of ``Pi_ij = exp((f_i + g_j - C_ij)/eps)`` (log 0 -> 0)."""
    m, n = C.shape
    inv = 1.0 / eps
    cost = 0.0
    mass = 0.0
    for i in range(m):
        if f[i] == -np.inf:
            continue
        for j in range(n):
            if g[j] == -np.inf:
                continue
            pij = np.exp((f[i] + g[j] - C[i, j]) * inv)
            cost += pij * C[i, j]
            mass += pij
    return cost, mass


@kernel()
def plan_fill(C, f, g, eps, P):
    """Dense plan ``P_ij = exp((f_i + g_j - C_ij)/eps)`` (0 where a potential is -inf)."""
    m, n = C.shape
    inv = 1.0 / eps
    for i in range(m):
        for j in range(n):
            if f[i] == -np.inf or g[j] == -np.inf:
                P[i, j] = 0.0
            else:
                P[i, j] = np.exp((f[i] + g[j] - C[i, j]) * inv)
