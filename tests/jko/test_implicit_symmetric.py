"""The implicit path on a symmetric cost: transposes stored as the operators themselves.

``transport_operators`` stores ``KT`` as ``K`` and ``KCT`` as ``KC`` exactly when C is
symmetric entry for entry; ``w_implicit_counted`` then computes ``KC v`` and ``KC u`` in one
``matvec2_lp`` sweep, and ``gibbs_kernel_sym`` computes one exp per symmetric pair.
Invariants: the shared operators equal the transposes the asymmetric branch builds, the
fused set-up returns the same bits as the set-up with separate transposes (loss, gradient,
duals, counts), ``gibbs_kernel_sym`` the same bits as ``gibbs_kernel``, and the fused
set-up matches the dense oracle of SPEC A.4.7.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

import reference as ref
from jkofast.jko import operating_point
from jkofast.kernels.jko.solver import transport_operators
from jkofast.kernels.ot import transport as kt
from jkofast.kernels.ot.sinkhorn_log import SinkhornWork, gibbs_kernel, gibbs_kernel_sym


def _pool(m=14, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, 4))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    C, _ = ref.geometry_dense_naive(Z)
    C = 0.5 * (C + C.T)  # exactly symmetric
    return C, rng.dirichlet(np.ones(m)), rng.dirichlet(np.ones(m))


def _ops(C, eps, dtype, shared):
    K = np.exp(-(C - C.min()) / eps)
    KC = K * C
    K, KC = K.astype(dtype), KC.astype(dtype)
    if shared:
        return kt.GibbsOps(K, K, KC, KC, np.empty(C.shape[0], dtype))
    return kt.GibbsOps(K, np.ascontiguousarray(K.T), KC, np.ascontiguousarray(KC.T), np.empty(C.shape[0], dtype))


def _call(ops, p, q, tol, cg_tol, newton_every=0, v=None, x=None):
    m = p.size
    work = np.zeros((8, m))
    work[0], work[4] = p, q
    sk = SinkhornWork(*work)
    w = np.zeros((8, m))
    v = np.ones(m) if v is None else v.copy()
    x = np.zeros(m) if x is None else x.copy()
    grad = np.zeros(m)
    out = kt.w_implicit_counted(ops, tol, kt.Limits(5000, cg_tol, 10 * m, newton_every), v, x, grad, sk, w)
    return out, grad, v, x


def test_shares_storage_names_the_same_array_only():
    A = np.ones((4, 4), np.float32)
    assert kt.shares_storage(A, A)
    assert not kt.shares_storage(A, A.copy())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("newton_every", [0, 2])
def test_fused_setup_is_bit_identical_to_separate_transposes(dtype, newton_every):
    C, p, q = _pool(seed=1)
    tol, cg_tol = (1e-10, 1e-9) if dtype == np.float64 else (1e-5, 1e-4)
    v = x = None
    rng = np.random.default_rng(0)
    for _ in range(3):  # warm-started calls with a moving target, as along the flow
        qs = q + 0.01 * rng.random(q.size)
        qs /= qs.sum()
        a, ga, va, xa = _call(_ops(C, 0.2, dtype, False), p, qs, tol, cg_tol, newton_every, v, x)
        b, gb, vb, xb = _call(_ops(C, 0.2, dtype, True), p, qs, tol, cg_tol, newton_every, v, x)
        assert a == b
        assert np.array_equal(ga, gb) and np.array_equal(va, vb) and np.array_equal(xa, xb)
        v, x = va, xa


def test_fused_setup_matches_the_dense_oracle():
    C, p, q = _pool(seed=2)
    eps = 0.2
    (ok, loss, flags, *_), grad, _, _ = _call(_ops(C, eps, np.float64, True), p, q, 1e-12, 1e-11)
    assert ok and flags == 0
    f, g, P = ref.converged_plan_naive(np.log(p), np.log(q), C, eps, n_iter=5000)
    m = p.size
    A = np.block([[np.diag(P.sum(1)), P], [P.T, np.diag(P.sum(0))]])
    rhs = np.concatenate([(P * C).sum(1), (P * C).sum(0)])
    x_ref = np.linalg.lstsq(A, rhs, rcond=None)[0][:m]
    x_ref -= x_ref.mean()
    assert loss == pytest.approx(float((P * C).sum()), rel=1e-9)
    assert_allclose(grad - grad.mean(), x_ref, atol=1e-8 * np.abs(x_ref).max())


@pytest.mark.parametrize("symmetric", [True, False])
def test_operators_share_the_transposes_exactly_when_the_cost_is_symmetric(symmetric):
    C, _, _ = _pool(m=9, seed=3)
    if not symmetric:
        C[2, 5] += 1e-9  # within the wrapper's symmetry check, not exactly symmetric
    Ks = np.eye(C.shape[0])
    prm = operating_point("tuned", grad="implicit")._params(False)
    op = transport_operators(C, np.ascontiguousarray(C.T), Ks, prm, True, True, True, True, None)
    assert op.lowp
    ops = op.ops32
    assert kt.shares_storage(ops.K, ops.KT) == symmetric
    assert kt.shares_storage(ops.KC, ops.KCT) == symmetric
    # either way the stored transposes are the transposes, entry for entry
    Kg = op.gc.Kg
    assert np.array_equal(ops.KT, np.ascontiguousarray(Kg.T).astype(np.float32))
    assert np.array_equal(ops.KCT, np.ascontiguousarray((Kg * C).T).astype(np.float32))


@pytest.mark.parametrize("symmetric", [True, False])
def test_gibbs_kernel_sym_matches_gibbs_kernel_bit_for_bit(symmetric):
    C, _, _ = _pool(m=11, seed=4)
    if not symmetric:
        C[7, 1] = np.nextafter(C[7, 1], np.inf)
        C[0, 3] += 0.25
    K_ref = np.empty_like(C)
    K_sym = np.full_like(C, np.nan)
    cmin_ref = gibbs_kernel(C, 0.2, K_ref)
    cmin, sym = gibbs_kernel_sym(C, 0.2, K_sym)
    assert cmin == cmin_ref and sym == symmetric
    assert np.array_equal(K_sym, K_ref)
