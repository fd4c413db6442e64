"""Hand-written gradients of the proximal term vs the naive oracle and central finite differences.

All float64; finite differences are taken in logit space (θ -> a = log_softmax θ), i.e. on the
tangent space of the simplex, where gradients w.r.t. log p are defined up to c·p.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

import reference as ref
from jkofast.ot.entropic import transport_cost_grad


def _pool(m=10, seed=0, d=6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(2, d))
    Z = centres[rng.integers(0, 2, m)] + 0.7 * rng.normal(size=(m, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    C, K = ref.geometry_dense_naive(Z)
    th = rng.normal(size=m)
    b = np.log(rng.dirichlet(np.ones(m)))
    return C, th, b, rng


def _a(th):
    return th - np.log(np.exp(th - th.max()).sum()) - th.max()


def _theta_grad(a, g):
    p = np.exp(a)
    return g - p * g.sum()


@pytest.mark.parametrize("form", ["auto", "log"])
@pytest.mark.parametrize("eps", [0.1, 0.2])
def test_unrolled_matches_naive_adjoint(form, eps):
    C, th, b, _ = _pool()
    a = _a(th)
    val, g = transport_cost_grad(a, b, C, eps, n_iter=60, n_grad=8, form=form)
    val_ref, g_ref = ref.transport_cost_unrolled_naive(a, b, C, eps, 60, 8)
    assert val == pytest.approx(val_ref, rel=1e-12)
    assert_allclose(g, g_ref, atol=1e-13, rtol=1e-10)


@pytest.mark.parametrize("n_iter, n_grad", [(60, 8), (10, 10), (5, 1)])
def test_unrolled_matches_central_fd_with_frozen_warm_phase(n_iter, n_grad):
    C, th, b, rng = _pool(seed=1)
    eps = 0.1
    a = _a(th)
    g0 = ref.warm_g_naive(a, b, C, eps, n_iter, n_grad) if n_iter > n_grad else np.zeros_like(a)
    _, g = transport_cost_grad(a, b, C, eps, n_iter=n_iter, n_grad=n_grad)
    gt = _theta_grad(a, g)
    h = 1e-5
    for _ in range(3):
        d = rng.normal(size=a.size)
        fp = ref.transport_cost_unrolled_value(_a(th + h * d), b, C, eps, n_iter, n_grad, frozen=g0)
        fm = ref.transport_cost_unrolled_value(_a(th - h * d), b, C, eps, n_iter, n_grad, frozen=g0)
        assert (fp - fm) / (2 * h) == pytest.approx(float(gt @ d), rel=1e-7, abs=1e-10)


def _converged_cost(a, b, C, eps):
    f, g, P = ref.converged_plan_naive(a, b, C, eps, n_iter=400)
    return float((P * C).sum())


def _converged_entropic(a, b, C, eps):
    f, g, P = ref.converged_plan_naive(a, b, C, eps, n_iter=400)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = np.where(P > 0, P * (np.log(P) - 1), 0.0)
    return float((P * C).sum() + eps * ent.sum())


@pytest.mark.parametrize("method, oracle", [("implicit", _converged_cost), ("entropic", _converged_entropic)])
def test_converged_gradients_match_central_fd(method, oracle):
    C, th, b, rng = _pool(m=8, seed=2)
    eps = 0.2
    a = _a(th)
    val, g = transport_cost_grad(a, b, C, eps, method=method, tol=1e-13)
    assert val == pytest.approx(oracle(a, b, C, eps), rel=1e-9)
    gt = _theta_grad(a, g)
    h = 1e-5
    for _ in range(3):
        d = rng.normal(size=a.size)
        fd = (oracle(_a(th + h * d), b, C, eps) - oracle(_a(th - h * d), b, C, eps)) / (2 * h)
        assert fd == pytest.approx(float(gt @ d), rel=1e-6, abs=1e-10)


def test_fully_unrolled_converges_to_implicit_and_envelope_differs():
    # SPEC A.4.7: differentiating through a *converged* unroll gives the exact (implicit)
    # gradient of <Pi*, C>; the envelope gradient f (entropic objective) is a different
    # direction at p = q (negative cosine).
    C, th, _, _ = _pool(m=12, seed=3)
    a = _a(th)
    eps = 0.5
    gu = _theta_grad(a, transport_cost_grad(a, a, C, eps, n_iter=400, n_grad=400)[1])
    gi = _theta_grad(a, transport_cost_grad(a, a, C, eps, method="implicit", tol=1e-13)[1])
    ge = _theta_grad(a, transport_cost_grad(a, a, C, eps, method="entropic", tol=1e-13)[1])
    cos = lambda x, y: float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))  # noqa: E731
    assert cos(gu, gi) > 0.99999
    assert cos(ge, gi) < 0.0


def test_bad_input():
    C, th, b, _ = _pool()
    a = _a(th)
    with pytest.raises(ValueError, match="method"):
        transport_cost_grad(a, b, C, 0.1, method="envelope")
    with pytest.raises(ValueError, match="eps"):
        transport_cost_grad(a, b, C, 0.0)
    with pytest.raises(ValueError, match="C must have shape"):
        transport_cost_grad(a, b, C[:-1], 0.1)
    with pytest.raises(ValueError, match="log_p"):
        transport_cost_grad(np.full_like(a, np.nan), b, C, 0.1)


def test_converged_gradient_warns_when_sinkhorn_hits_max_iter():
    import warnings

    from jkofast._status import ConvergenceWarning

    rng = np.random.default_rng(5)
    a = np.log(rng.dirichlet(np.ones(6)))
    b = np.log(rng.dirichlet(np.ones(6)))
    C = rng.random((6, 6))
    C = (C + C.T) / 2
    for method in ("implicit", "entropic"):
        with pytest.warns(ConvergenceWarning, match="transport_cost_grad: Sinkhorn"):
            transport_cost_grad(a, b, C, 0.05, method=method, tol=1e-13, max_iter=2)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            transport_cost_grad(a, b, C, 0.5, method=method, tol=1e-9)
