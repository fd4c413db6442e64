"""The sweeps of a ``grad="implicit"`` step: fused set-up products and their counts.

The gradient's set-up products ``KC v`` and ``KCᵀu`` ride in the Sinkhorn sweeps of a call's
first two pairs (``matvec_pair_lp``, ``matvec3_lp``). Oracles: NumPy products for the fused
matvecs; for a call, the unfused ``implicit_solve`` on the plan the call stopped at (same warm
start) and the cost ``Σ Π ⊙ C`` of that plan in float64. Invariants: which sweeps are fused
(the first two pairs), how many set-up sweeps are left, and ``w_implicit_counted`` = the first
nine counts of ``w_implicit_account``.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

import reference as ref
from jkofast.kernels.ot import transport as kt
from jkofast.kernels.ot.sinkhorn_log import SinkhornWork, matvec3_lp, matvec_pair_lp


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m, n", [(1, 1), (3, 7), (9, 9)])
def test_fused_matvecs_are_the_products(dtype, m, n):
    rng = np.random.default_rng(10 * m + n)
    A, B = rng.random((m, n)).astype(dtype), rng.random((m, n)).astype(dtype)
    x1, x2 = rng.random(n).astype(dtype), rng.random(n).astype(dtype)
    o1, o2, o3 = (np.full(m, np.nan) for _ in range(3))
    rtol = 1e-13 if dtype == np.float64 else 2e-6
    A64, B64, y1, y2 = (z.astype(np.float64) for z in (A, B, x1, x2))
    matvec_pair_lp(A, B, x1, o1, o2)
    assert_allclose(o1, A64 @ y1, rtol=rtol)
    assert_allclose(o2, B64 @ y1, rtol=rtol)
    o1[:], o2[:] = np.nan, np.nan
    matvec3_lp(A, B, x1, x2, o1, o2, o3)
    assert_allclose(o1, A64 @ y1, rtol=rtol)
    assert_allclose(o2, A64 @ y2, rtol=rtol)
    assert_allclose(o3, B64 @ y1, rtol=rtol)


def _pool(m=12, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(3, 5))[rng.integers(0, 3, m)] + 0.6 * rng.normal(size=(m, 5))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    C, _ = ref.geometry_dense_naive(Z)
    return C, rng.dirichlet(np.ones(m)), rng.dirichlet(np.ones(m))


def _ops(C, eps, dtype):
    K = np.exp(-(C - C.min()) / eps)
    KC = K * C
    T = np.ascontiguousarray
    return kt.GibbsOps(*(z.astype(dtype) for z in (K, T(K.T), KC, T(KC.T))), np.empty(C.shape[0], dtype))


def _call(ops, p, q, tol, v, x, newton_every=0):
    m = p.size
    rows = np.zeros((8, m))
    rows[0], rows[4] = p, q
    sk = SinkhornWork(*rows)
    w, grad = np.zeros((8, m)), np.zeros(m)
    out = kt.w_implicit_account(ops, tol, kt.Limits(5000, 1e-10, 10 * m, newton_every), v, x, grad, sk, w)
    return out, grad, sk, w


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_set_up_equals_the_unfused_solve_on_the_same_plan(dtype):
    C, p, q = _pool()
    ops = _ops(C, 0.2, dtype)
    v, x = np.ones(p.size), np.zeros(p.size)
    _call(ops, p, q, 1e-10, v, x)  # converge at p, then a warm-started step to p1
    p1 = p * np.exp(0.05 * np.random.default_rng(1).normal(size=p.size))
    p1 /= p1.sum()
    x0 = x.copy()
    (ok, loss, flags, n_pairs, n_row, *_, n_row2, n_setup), grad, sk, w = _call(ops, p1, q, 1e-2, v, x)
    assert ok and flags == 0 and 1 <= n_pairs <= 2
    assert n_row2 == n_pairs and n_setup == 1  # both set-up products came with the sweeps
    # the plan the call stopped at: vmax diag(u) K diag(v), vmax from its stored row sums
    u = sk.u.copy()
    K64 = ops.K.astype(np.float64)
    vmax = float(np.median(w[0] / (u * (K64 @ v))))
    P = vmax * u[:, None] * K64 * v[None, :]
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    assert_allclose(w[0], P.sum(1), rtol=rtol)
    assert loss == pytest.approx(float((P * C).sum()), rel=rtol)
    # the unfused solve on that plan from the same warm start gives the same gradient
    w2 = np.zeros((8, p.size))
    w2[0], w2[1] = w[0], w[1]
    pl = kt.Plan(ops.K, ops.KT, u, v, vmax)
    loss2, _, _ = kt.implicit_solve(pl, ops.KC, ops.KCT, x0, 1e-10, 10 * p.size, w2, np.empty(p.size, dtype))
    assert loss2 == pytest.approx(loss, rel=rtol)
    assert_allclose(x0 - x0.mean(), grad - grad.mean(), atol=1e3 * rtol * np.abs(grad).max())


def test_a_long_call_computes_the_set_up_apart_and_counts_match_the_nine():
    C, p, q = _pool(seed=2)
    ops = _ops(C, 0.1, np.float64)
    n = p.size
    r, grad, _, _ = _call(ops, p, q, 1e-10, np.ones(n), np.zeros(n))
    ok, _, _, n_pairs, n_row, n_col2, n_col, _, _, n_row2, n_setup = r
    assert ok and n_pairs > 2
    # fused: the column sweeps of pairs 1-2 and the row checks after them; the stop comes later
    assert n_col2 == 2 and n_row2 == 2 and n_row == n_pairs + 1
    assert n_setup == 3 and n_col == n_pairs - 2 + 1  # KC v, KCᵀu, Π t; Πᵀx a plain column sweep
    r9 = kt.w_implicit_counted(
        ops,
        1e-10,
        kt.Limits(5000, 1e-10, 10 * n, 0),
        np.ones(n),
        np.zeros(n),
        np.zeros(n),
        SinkhornWork(*np.vstack([p, np.zeros((3, n)), q, np.zeros((3, n))])),
        np.zeros((8, n)),
    )
    assert r9 == r[:9]
