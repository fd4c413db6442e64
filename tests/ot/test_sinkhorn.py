"""Log-domain Sinkhorn (jkofast.sinkhorn_log) and entropic OT gradients (jkofast.ot.entropic)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast import ConvergenceWarning, sinkhorn_log
from jkofast.ot.entropic import entropic_ot


def _problem(m=7, n=9, seed=0, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    Y = rng.normal(size=(n, d))
    C = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1) / d
    a = rng.random(m) + 0.1
    b = rng.random(n) + 0.1
    return a / a.sum(), b / b.sum(), C


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fixed_iterations_match_naive(dtype):
    a, b, C = _problem()
    res = sinkhorn_log(a, b, C.astype(dtype), 0.1, max_iter=25, tol=None)
    assert res.f.dtype == dtype and res.g.dtype == dtype
    f, g, _ = ref.sinkhorn_log_naive(np.log(a), np.log(b), C.astype(dtype).astype(np.float64), 0.1, 25)
    atol = 1e-12 if dtype == np.float64 else 2e-5
    assert_allclose(res.f, f, atol=atol)
    assert_allclose(res.g, g, atol=atol)
    assert res.n_iter == 25 and res.converged
    P = ref.plan_naive(f, g, C.astype(dtype).astype(np.float64), 0.1)
    assert res.cost == pytest.approx(float((P * C.astype(dtype)).sum()), rel=1e-10 if dtype == np.float64 else 1e-5)
    assert res.marginal_error == pytest.approx(np.abs(P.sum(1) - a).sum(), rel=1e-6 if dtype == np.float64 else 1e-3)


@pytest.mark.parametrize("eps", [0.05, 0.01, 2e-3, 5e-4])
def test_small_eps_scaled_and_log_forms_agree_with_naive(eps):
    # small eps makes the scaled (matvec) form underflow for some rows -> log-form fallback
    a, b, C = _problem(seed=3)
    C = C * 4.0
    res = sinkhorn_log(a, b, C, eps, max_iter=30, tol=None)
    f, g, _ = ref.sinkhorn_log_naive(np.log(a), np.log(b), C, eps, 30)
    assert np.all(np.isfinite(res.f)) and np.all(np.isfinite(res.g))
    assert_allclose(res.f, f, atol=1e-9, rtol=1e-12)
    assert_allclose(res.g, g, atol=1e-9, rtol=1e-12)


def test_fallback_is_exercised():
    from jkofast.kernels.ot import sinkhorn_log as k

    a, b, C = _problem(seed=3)
    C = C * 4.0
    used = {}
    for eps in (0.05, 5e-4):
        Kg = np.empty_like(C)
        cmin = k.gibbs_kernel(C, eps, Kg)
        wk = k.SinkhornWork(*[np.zeros(7) for _ in range(4)], *[np.zeros(9) for _ in range(4)])
        f, g = np.zeros(7), np.zeros(9)
        gc = k.GibbsCost(C, C.T.copy(), Kg, cmin, eps)
        out = k.sinkhorn_log_solve(gc, np.log(a), np.log(b), f, g, 30, -1.0, 1, 1e-280, wk)
        used[eps] = out[3]
    assert used == {0.05: True, 5e-4: False}


def test_zero_mass_entries():
    a, b, C = _problem()
    a[2] = 0.0
    b[[0, 5]] = 0.0
    res = sinkhorn_log(a, b, C, 0.2, max_iter=2000, tol=1e-10)
    assert res.f[2] == -np.inf and res.g[0] == -np.inf and res.g[5] == -np.inf
    P = res.plan(C, 0.2)
    assert np.all(np.isfinite(P))
    assert_allclose(P.sum(1), a / a.sum(), atol=1e-9)
    assert_allclose(P.sum(0), b / b.sum(), atol=1e-12)


def test_tolerance_and_warm_start():
    a, b, C = _problem(seed=1)
    res = sinkhorn_log(a, b, C, 0.1, tol=1e-10, check_every=1)
    assert res.converged and res.marginal_error < 1e-10
    P = res.plan(C, 0.1)
    assert_allclose(P.sum(1), a, atol=1e-9)
    assert_allclose(P.sum(0), b, atol=1e-12)
    warm = sinkhorn_log(a, b, C, 0.1, tol=1e-10, check_every=1, warm_start=(res.f, res.g))
    assert warm.n_iter < res.n_iter and warm.converged
    assert_allclose(warm.f, res.f, atol=1e-8)


def test_convergence_warning():
    a, b, C = _problem()
    with pytest.warns(ConvergenceWarning):
        res = sinkhorn_log(a, b, C, 0.01, max_iter=1, tol=1e-12)
    assert not res.converged


def test_matches_pot_plan():
    ot = pytest.importorskip("ot")
    a, b, C = _problem(seed=2)
    P_pot = ot.sinkhorn(a, b, C, 0.1, method="sinkhorn_log", numItermax=5000, stopThr=1e-13)
    res = sinkhorn_log(a, b, C, 0.1, max_iter=5000, tol=1e-13, check_every=1)
    assert_allclose(res.plan(C, 0.1), P_pot, atol=1e-10)


def test_read_only_inputs_and_determinism():
    a, b, C = _problem()
    for x in (a, b, C):
        x.setflags(write=False)
    r1 = sinkhorn_log(a, b, C, 0.1, max_iter=20, tol=None)
    r2 = sinkhorn_log(a, b, C, 0.1, max_iter=20, tol=None)
    assert_array_equal(r1.f, r2.f)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(eps=0.0), ValueError, "eps"),
        (dict(eps=-1.0), ValueError, "eps"),
        (dict(C=np.full((7, 9), np.nan)), ValueError, "C"),
        (dict(C=np.zeros((7, 8))), ValueError, "C must have shape"),
        (dict(a=-np.ones(7)), ValueError, "a must be non-negative"),
        (dict(b=np.zeros(9)), ValueError, "b must have positive total mass"),
        (dict(C=np.zeros((7, 9), complex)), TypeError, "C"),
        (dict(max_iter=0), ValueError, "max_iter"),
    ],
)
def test_bad_input(kwargs, exc, match):
    a, b, C = _problem()
    args = dict(a=a, b=b, C=C, eps=0.1)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        sinkhorn_log(args.pop("a"), args.pop("b"), args.pop("C"), args.pop("eps"), **args)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 6), st.integers(2, 6), st.integers(0, 10_000), st.floats(0.05, 2.0))
def test_column_marginal_exact_after_each_pair(m, n, seed, eps):
    a, b, C = _problem(m, n, seed)
    res = sinkhorn_log(a, b, C, eps, max_iter=3, tol=None)
    assert_allclose(res.plan(C, eps).sum(0), b, rtol=1e-10, atol=1e-14)


def test_entropic_ot_gradients_centred_and_match_fd():
    a, b, C = _problem(5, 6, seed=4)
    eps = 0.3
    r = entropic_ot(a, b, C, eps, tol=1e-13, max_iter=20000)
    assert abs(r.grad_a.sum()) < 1e-12 and abs(r.grad_b.sum()) < 1e-12
    # grad_C is the plan exp((f_i + g_j - C_ij) / eps) of the solve, and cost = <plan, C>
    assert_allclose(r.grad_C, np.exp((r.f[:, None] + r.g[None, :] - C) / eps), rtol=1e-12)
    assert_allclose(r.cost, float((r.grad_C * C).sum()), rtol=1e-12)
    rng = np.random.default_rng(0)
    d = rng.normal(size=a.size)
    d -= d.mean()  # tangent direction of the simplex
    h = 1e-6
    fd = (
        entropic_ot(a + h * d, b, C, eps, tol=1e-14, max_iter=20000).value
        - entropic_ot(a - h * d, b, C, eps, tol=1e-14, max_iter=20000).value
    ) / (2 * h)
    assert fd == pytest.approx(float(r.grad_a @ d), rel=1e-6, abs=1e-9)
    # dC direction: derivative of the value is <Pi, dC>
    dC = rng.normal(size=C.shape)
    fdC = (
        entropic_ot(a, b, C + h * dC, eps, tol=1e-14, max_iter=20000).value
        - entropic_ot(a, b, C - h * dC, eps, tol=1e-14, max_iter=20000).value
    ) / (2 * h)
    assert fdC == pytest.approx(float((r.grad_C * dC).sum()), rel=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m, n", [(1, 1), (5, 3), (8, 7), (9, 1)])
def test_matvec_lp_sums_in_the_operand_dtype(dtype, m, n):
    from jkofast.kernels.ot.sinkhorn_log import matvec_lp

    rng = np.random.default_rng(m * 10 + n)
    A = rng.random((m, n)).astype(dtype)
    x = rng.random(n).astype(dtype)
    out = np.full(m, np.nan)
    matvec_lp(A, x, out)
    ref_ = A.astype(np.float64) @ x.astype(np.float64)
    assert_allclose(out, ref_, rtol=1e-14 if dtype == np.float64 else 1e-6)


# ---- adversarial inputs (QA review) ---------------------------------------------------------
def test_bad_warm_start_and_plan_arguments_are_named():
    C = np.array([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(TypeError, match="warm_start"):
        sinkhorn_log([0.5, 0.5], [0.5, 0.5], C, 0.1, warm_start=0)
    with pytest.raises(ValueError, match="warm_start"):
        sinkhorn_log([0.5, 0.5], [0.5, 0.5], C, 0.1, warm_start=(np.zeros(2),))
    res = sinkhorn_log([0.5, 0.5], [0.5, 0.5], C, 0.1)
    with pytest.raises(ValueError, match="C must have shape"):
        res.plan(np.zeros((3, 3)), 0.1)  # would read f, g out of bounds
    with pytest.raises(ValueError, match="eps"):
        res.plan(C, float("nan"))
    with pytest.raises(ValueError, match="eps"):
        res.plan(C, 0.0)
    with pytest.raises(ValueError, match="C contains NaN"):
        res.plan(np.array([[0.0, np.nan], [1.0, 0.0]]), 0.1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weights_whose_sum_overflows_are_normalised(dtype):
    # a = b = 1e308 (float64) or 3e38 (float32) each: the total mass overflows the dtype; the
    # solve must equal the uniform-weight one instead of returning f = -inf, g = NaN
    big = np.finfo(dtype).max / 1.5
    C = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]], dtype)
    w = np.full(3, big, dtype)
    with np.errstate(over="ignore"):
        r = sinkhorn_log(w, w, C, 0.5, max_iter=20, tol=None)
    u = sinkhorn_log(np.ones(3, dtype), np.ones(3, dtype), C, 0.5, max_iter=20, tol=None)
    assert np.all(np.isfinite(r.f)) and np.all(np.isfinite(r.g))
    assert_allclose(r.f, u.f, rtol=1e-6, atol=1e-7)
    assert_allclose(r.g, u.g, rtol=1e-6, atol=1e-7)


def test_transport_cost_grad_validates_tol_and_max_iter():
    from jkofast.ot.entropic import transport_cost_grad

    la = np.log(np.full(3, 1 / 3))
    C = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    with pytest.raises(ValueError, match="tol"):
        transport_cost_grad(la, la, C, 0.1, method="implicit", tol=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        transport_cost_grad(la, la, C, 0.1, method="implicit", max_iter=-5)
    with pytest.raises(TypeError, match="max_iter"):
        transport_cost_grad(la, la, C, 0.1, method="implicit", max_iter=2.5)
