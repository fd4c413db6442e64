"""Linear response of a converged JKO step (jkofast.jko.linear_response): JVP and HVPs vs finite differences."""

import warnings

import numpy as np
import pytest
import reference_theory as ref
from numpy.testing import assert_allclose

from jkofast._status import ConvergenceWarning
from jkofast.jko import linear_response as lr
from jkofast.jko.solver import JKOConfig, pool_geometry, run_jko

W_CFG = JKOConfig(mode="wasserstein", objective="entropic")
KL_CFG = JKOConfig(mode="kl")


def tiny(m=6, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, 4))
    C, K = pool_geometry(embeddings=Z)
    E = -rng.uniform(size=m)
    q = np.exp(-E / 0.3)
    return E, q / q.sum(), C, K


def tangent(m, seed):
    v = np.random.default_rng(seed).normal(size=m)
    v -= v.mean()
    return v / np.linalg.norm(v)


def central(fn, x, v, s):
    return (fn(x + s * v) - fn(x - s * v)) / (2 * s)


# ---------------------------------------------------------------------------------------------
# Hessian-vector products of each term vs finite differences of its gradient
# ---------------------------------------------------------------------------------------------
def test_hvp_entropy_redundancy_kl():
    E, q, C, K = tiny()
    p = np.random.default_rng(1).dirichlet(np.ones(6))
    v = tangent(6, 2)
    Ks = 0.5 * (K + K.T)
    s = 1e-5
    assert_allclose(lr.hvp_entropy(p, v, 0.05), central(lambda x: lr.grad_entropy(x, 0.05), p, v, s), rtol=1e-7)
    assert_allclose(
        lr.hvp_redundancy(Ks, v, 0.05), central(lambda x: lr.grad_redundancy(Ks, x, 0.05), p, v, s), rtol=1e-7
    )
    assert_allclose(lr.hvp_kl(p, v), central(lambda x: lr.grad_kl(x, q), p, v, s), rtol=1e-7)


def test_ot_duals_converge_and_f_is_the_gradient():
    E, q, C, K = tiny()
    p = np.random.default_rng(1).dirichlet(np.ones(6))
    f, g, err = lr.ot_duals(p, q, C, 0.1)
    assert err < 1e-13
    P = np.exp((f[:, None] + g[None, :] - C) / 0.1)
    assert_allclose(P.sum(axis=1), p, rtol=1e-12)
    assert_allclose(P.sum(axis=0), q, rtol=1e-12)
    # f is the gradient of OT_eps(., q) on the tangent space (oracle: plain converged Sinkhorn)
    v = tangent(6, 3)
    s = 1e-5
    d = (ref.entropic_ot(p + s * v, q, C, 0.1, 3000)[0] - ref.entropic_ot(p - s * v, q, C, 0.1, 3000)[0]) / (2 * s)
    assert f @ v == pytest.approx(d, rel=1e-6)


def test_hvp_ot_vs_finite_differences_of_f():
    E, q, C, K = tiny()
    p = np.random.default_rng(1).dirichlet(np.ones(6))
    f, g, _ = lr.ot_duals(p, q, C, 0.1)
    v = tangent(6, 4)

    def f_centred(x):
        fx = lr.ot_duals(x, q, C, 0.1, (f, g))[0]
        return fx - fx.mean()

    hv = lr.hvp_ot(p, q, C, 0.1, f, g, v)
    assert abs(hv.sum()) < 1e-12
    assert_allclose(hv, central(f_centred, p, v, 1e-5), rtol=1e-6, atol=1e-9 * np.abs(hv).max())
    # symmetric positive semi-definite on the tangent space
    w = tangent(6, 5)
    assert w @ hv == pytest.approx(v @ lr.hvp_ot(p, q, C, 0.1, f, g, w), rel=1e-9)
    assert v @ hv > 0


# ---------------------------------------------------------------------------------------------
# The exact step
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", [W_CFG, KL_CFG, JKOConfig(mode="noproximal")], ids=["W", "KL", "noprox"])
def test_solve_step_stationary(cfg):
    E, q, C, K = tiny()
    sol = lr.solve_step(E, q, C, K, cfg, tol=1e-11)
    assert sol.residual < 1e-11
    assert sol.p.sum() == pytest.approx(1.0, abs=1e-14) and np.all(sol.p > 0)


def test_kl_step_closed_form():
    E, q, C, K = tiny()
    cfg = KL_CFG.replace(rho=0.0, h=0.7, lam=0.03)
    assert_allclose(lr.solve_step(E, q, C, K, cfg).p, ref.kl_step_closed_form(E, q, 0.03, 0.7), rtol=1e-11)


def test_noprox_jacobian_closed_form():
    E, q, C, K = tiny()
    cfg = JKOConfig(mode="noproximal", rho=0.0, lam=0.05)
    sol = lr.solve_step(E, q, C, K, cfg)
    V = np.stack([tangent(6, k) for k in range(3)], axis=1)
    assert_allclose(lr.jvp(sol, V), ref.noprox_jacobian(sol.p, 0.05) @ V, rtol=1e-9, atol=1e-13)


def test_adam_approaches_the_exact_kl_step():
    E, q, C, K = tiny()
    sol = lr.solve_step(E, q, C, K, KL_CFG)
    assert_allclose(run_jko(q, E, C, K, KL_CFG.replace(T=1, inner_steps=300)), sol.p, atol=1e-6)


def test_adam_approaches_the_exact_entropic_step():
    E, q, C, K = tiny()
    sol = lr.solve_step(E, q, C, K, W_CFG)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pa = run_jko(q, E, C, K, W_CFG.replace(T=1, inner_steps=300, tol=1e-10))
    # Adam at lr 0.1 does not converge exactly; it gets within a few 1e-2 in L1 of the minimiser
    assert np.abs(pa - sol.p).sum() < 0.05


# ---------------------------------------------------------------------------------------------
# JVP vs finite differences on a tiny pool (target 1e-5 relative)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", [W_CFG, KL_CFG], ids=["W", "KL"])
@pytest.mark.parametrize("m", [5, 8])
def test_jvp_matches_central_differences(cfg, m):
    E, q, C, K = tiny(m, seed=m)
    sol = lr.solve_step(E, q, C, K, cfg, tol=1e-12)
    V = np.stack([tangent(m, 10 + k) for k in range(3)], axis=1)
    A = lr.jvp(sol, V)
    assert_allclose(A.sum(axis=0), 0.0, atol=1e-14)
    s = 1e-4
    for k in range(3):
        v = V[:, k]
        fd = (
            lr.solve_step(E + s * v, q, C, K, cfg, tol=1e-12, start=sol).p
            - lr.solve_step(E - s * v, q, C, K, cfg, tol=1e-12, start=sol).p
        ) / (2 * s)
        assert np.linalg.norm(fd - A[:, k]) / np.linalg.norm(A[:, k]) < 1e-5


def test_jvp_is_symmetric_negative_on_the_tangent_space():
    E, q, C, K = tiny()
    sol = lr.solve_step(E, q, C, K, W_CFG)
    v, w = tangent(6, 1), tangent(6, 2)
    assert w @ lr.jvp(sol, v) == pytest.approx(v @ lr.jvp(sol, w), rel=1e-8)
    assert v @ lr.jvp(sol, v) < 0  # raising the energy along v moves mass against v
    # a constant shift of E changes nothing
    assert_allclose(lr.jvp(sol, np.ones(6)), 0.0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------
def test_bad_input():
    E, q, C, K = tiny()
    with pytest.raises(ValueError, match="objective='entropic'"):
        lr.solve_step(E, q, C, K, JKOConfig(mode="wasserstein"))
    with pytest.raises(ValueError, match="mode"):
        lr.solve_step(E, q, C, K, JKOConfig(mode="bregman"))
    with pytest.raises(ValueError, match="q must be strictly positive"):
        lr.solve_step(E, np.r_[q[:-1], 0.0], C, K, KL_CFG)
    with pytest.raises(ValueError, match="C must have shape"):
        lr.solve_step(E, q, C[:-1], K, KL_CFG)
    with pytest.raises(ValueError, match="lam"):
        lr.solve_step(E, q, C, K, KL_CFG.replace(lam=0.0))
    sol = lr.solve_step(E, q, C, K, KL_CFG)
    with pytest.raises(ValueError, match="start must be a StepSolution"):
        lr.solve_step(E[:5], q[:5], C[:5, :5], K[:5, :5], KL_CFG, start=sol)
    with pytest.raises(ValueError, match="V must have shape"):
        lr.jvp(sol, np.ones(5))
