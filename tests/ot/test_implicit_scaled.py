"""The scaled implicit path (``w_implicit_counted``) and its matvecs.

Oracles: the naive converged plan (tests/reference_ot.py) and a dense least-squares solve of
SPEC A.4.7's (2M) system for ``∂<Π*,C>/∂p``; central finite differences of the converged
cost; NumPy products for the matvecs. Invariants: the returned plan's marginals (rows exact,
columns within ``tol``), gradients centred before comparison (defined up to a constant),
Newton steps on or off reach the same point, warm starts. The kernels are serial; the batched
flow that calls them under ``prange`` is checked for thread-count invariance in
tests/jko/test_rerank_batch.py (``test_thread_invariance[implicit]``).
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

import reference as ref
from jkofast.kernels.ot import transport as kt
from jkofast.kernels.ot.sinkhorn_log import SinkhornWork, matvec2_lp, matvec_lp


def _pool(m=12, seed=0, d=5):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d))
    Z = centres[rng.integers(0, 3, m)] + 0.6 * rng.normal(size=(m, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    C, _ = ref.geometry_dense_naive(Z)
    p = rng.dirichlet(np.ones(m))
    q = rng.dirichlet(np.ones(m))
    return C, p, q


def _ops(C, eps, dtype):
    K = np.exp(-(C - C.min()) / eps)
    KC = K * C
    return kt.GibbsOps(
        K.astype(dtype),
        np.ascontiguousarray(K.T).astype(dtype),
        KC.astype(dtype),
        np.ascontiguousarray(KC.T).astype(dtype),
        np.empty(C.shape[0], dtype),
    )


def _work(p, q):
    m = p.size
    v = np.zeros((8, m))
    v[0] = p
    v[4] = q
    return SinkhornWork(*v)


def _call(C, p, q, eps, *, dtype=np.float64, tol=1e-12, cg_tol=1e-11, max_iter=20000, newton_every=0, v=None, x=None):
    m = p.size
    ops = _ops(C, eps, dtype)
    sk = _work(p, q)
    w = np.zeros((8, m))
    v = np.ones(m) if v is None else v
    x = np.zeros(m) if x is None else x
    grad = np.zeros(m)
    lim = kt.Limits(max_iter, cg_tol, 10 * m, newton_every)
    out = kt.w_implicit_counted(ops, tol, lim, v, x, grad, sk, w)
    return out, grad, sk, w, v, x


def implicit_grad_naive(p, q, C, eps):
    """``∂<Π*,C>/∂p`` (centred) from the dense (2M) system of SPEC A.4.7, least squares."""
    f, g, P = ref.converged_plan_naive(np.log(p), np.log(q), C, eps, n_iter=5000)
    m = p.size
    A = np.block([[np.diag(P.sum(1)), P], [P.T, np.diag(P.sum(0))]])
    rhs = np.concatenate([(P * C).sum(1), (P * C).sum(0)])
    sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
    x = sol[:m]
    return float((P * C).sum()), x - x.mean()


def _converged_cost(p, q, C, eps):
    _, _, P = ref.converged_plan_naive(np.log(p), np.log(q), C, eps, n_iter=5000)
    return float((P * C).sum())


# ---- matvecs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m, n", [(1, 1), (3, 7), (8, 8), (13, 5)])
def test_matvec2_lp_is_two_products(dtype, m, n):
    rng = np.random.default_rng(m * 100 + n)
    A = rng.random((m, n)).astype(dtype)
    x1 = rng.random(n).astype(dtype)
    x2 = rng.normal(size=n).astype(dtype)
    o1, o2, o3 = np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan)
    matvec2_lp(A, x1, x2, o1, o2)
    matvec_lp(A, x1, o3)
    A64 = A.astype(np.float64)
    rtol = 1e-13 if dtype == np.float64 else 2e-6
    assert_allclose(o1, A64 @ x1.astype(np.float64), rtol=rtol)
    scale = np.abs(A64) @ np.abs(x2.astype(np.float64))  # x2 has both signs: bound by the absolute sums
    assert np.all(np.abs(o2 - A64 @ x2.astype(np.float64)) <= rtol * scale)
    assert_allclose(o1, o3, rtol=rtol)


# ---- the implicit kernel ------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.1, 0.2])
def test_gradient_and_cost_match_the_dense_oracle(eps):
    C, p, q = _pool()
    (ok, loss, flags, n_sk, *_, n_cg), grad, _, _, _, _ = _call(C, p, q, eps)
    assert ok and flags == 0 and n_sk >= 1 and n_cg >= 1
    val_ref, x_ref = implicit_grad_naive(p, q, C, eps)
    assert loss == pytest.approx(val_ref, rel=1e-9)
    assert_allclose(grad - grad.mean(), x_ref, atol=1e-8 * np.abs(x_ref).max())


def test_gradient_matches_central_differences_on_the_simplex():
    C, p, q = _pool(m=8, seed=3)
    eps = 0.2
    _, grad, _, _, _, _ = _call(C, p, q, eps)
    rng = np.random.default_rng(1)
    h = 1e-6
    for _ in range(2):
        d = rng.normal(size=p.size)
        d -= d.mean()  # tangent to the simplex
        fd = (_converged_cost(p + h * d, q, C, eps) - _converged_cost(p - h * d, q, C, eps)) / (2 * h)
        assert fd == pytest.approx(float(grad @ d), rel=1e-6, abs=1e-10)


def test_plan_marginals_columns_exact_rows_within_tol():
    C, p, q = _pool(seed=1)
    tol = 1e-6
    (ok, _, flags, n_pairs, n_row, n_col2, n_col, *_), _, sk, w, v, _ = _call(C, p, q, 0.2, tol=tol, cg_tol=1e-8)
    assert ok and flags == 0
    # w[0] = row sums of the plan, w[1] = inverse column sums (the last update is a column update)
    assert np.abs(w[0] - p).sum() < tol
    assert_allclose(1.0 / w[1], q, rtol=1e-12)
    assert v.max() == pytest.approx(1.0)  # v stays normalised to max 1
    # sweep counts: a row sweep per pair plus the last check, a column sweep per pair plus Πᵀx
    # when the last pair's sweep did not give it (only the first two are fused)
    assert n_row == n_pairs + 1 and n_col2 == min(n_pairs, 2) and n_col == n_pairs - n_col2 + (n_pairs > 2)


@pytest.mark.parametrize("newton_every", [1, 3])
def test_newton_steps_reach_the_same_point(newton_every):
    C, p, q = _pool(seed=2)
    (ok0, l0, _, n0, *_, ncg0, _), g0, _, _, _, _ = _call(C, p, q, 0.1, newton_every=0)
    (ok1, l1, _, n1, *_, ncg1, _), g1, _, _, _, _ = _call(C, p, q, 0.1, newton_every=newton_every)
    assert ok0 and ok1 and ncg0 == 0 and ncg1 > 0
    assert n1 < n0  # the Newton steps remove the slow modes
    assert l1 == pytest.approx(l0, rel=1e-10)
    assert_allclose(g1 - g1.mean(), g0 - g0.mean(), atol=1e-8 * np.abs(g0).max())


def test_warm_start_of_a_converged_point_needs_one_iteration():
    C, p, q = _pool(seed=4)
    (_, l0, *_, n_cg0), g0, _, _, v, x = _call(C, p, q, 0.2, tol=1e-10)
    (ok, l1, flags, n_sk, *_, n_cg), g1, _, _, _, _ = _call(C, p, q, 0.2, tol=1e-9, v=v.copy(), x=x.copy())
    assert ok and flags == 0 and n_sk == 1 and n_cg < n_cg0 / 2
    assert l1 == pytest.approx(l0, rel=1e-9)
    assert_allclose(g1, g0, atol=1e-7 * np.abs(g0).max())


def test_float32_operators_agree_with_float64_at_their_tolerance():
    C, p, q = _pool(m=30, seed=5)
    (ok64, l64, *_), g64, _, _, _, _ = _call(C, p, q, 0.2, tol=1e-5, cg_tol=1e-4)
    (ok32, l32, *_), g32, _, _, _, _ = _call(C, p, q, 0.2, dtype=np.float32, tol=1e-5, cg_tol=1e-4)
    assert ok64 and ok32
    assert l32 == pytest.approx(l64, rel=1e-4)
    _, x_ref = implicit_grad_naive(p, q, C, 0.2)
    assert np.abs((g32 - g32.mean()) - x_ref).max() <= 1e-3 * np.abs(x_ref).max()


def test_iteration_cap_sets_the_sinkhorn_flag_and_underflow_asks_for_the_fallback():
    C, p, q = _pool(seed=6)
    (ok, _, flags, n_sk, *_), _, _, _, _, _ = _call(C, p, q, 0.05, tol=1e-14, max_iter=2)
    assert ok and n_sk == 2 and flags & kt.FLAG_SINKHORN
    # eps so small that a row sum of the scaled kernel underflows: ok False (caller falls back)
    (ok, *_), _, _, _, _, _ = _call(C * 50, p, q, 1e-3)
    assert not ok


def test_zero_mass_entries_stay_out_of_the_plan():
    C, p, q = _pool(seed=7)
    p[[1, 4]] = 0.0
    p /= p.sum()
    q[2] = 0.0
    q /= q.sum()
    (ok, loss, flags, *_), grad, _, w, v, _ = _call(C, p, q, 0.2, tol=1e-11)
    assert ok and flags == 0 and np.all(np.isfinite(grad))
    assert w[0, 1] == 0.0 and w[0, 4] == 0.0 and w[1, 2] == 0.0 and v[2] == 0.0
    keep_r, keep_c = p > 0, q > 0
    val_ref, x_ref = implicit_grad_naive(p[keep_r], q[keep_c], C[np.ix_(keep_r, keep_c)], 0.2)
    assert loss == pytest.approx(val_ref, rel=1e-8)
    gk = grad[keep_r]
    assert_allclose(gk - gk.mean(), x_ref, atol=1e-7 * np.abs(x_ref).max())
