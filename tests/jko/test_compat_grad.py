"""jkofast.compat.log_sinkhorn_loss_and_grad: the published loss's truncated gradients (issue #28, item 2).

The oracle is ``reference_ot.published_loss_grad_naive``: the published ``log_sinkhorn_loss`` (JKO-RAG
``src/jko.py``) ported to float64 NumPy with its reverse mode written out step by step (detached warm
pairs, ``n_iter_grad`` tracked pairs, the final plan).  The kernel's gradients equal it to 1e-10 of
each gradient's largest entry on the 30 parity-fixture pools, and equal central finite differences of
the truncated function (warm duals frozen at their values: ``published_loss_frozen``).
"""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np
import pytest
import reference_ot as ref
from numpy.testing import assert_allclose

from jkofast import compat
from jkofast._numba import WARMUPS
from jkofast.compat import _solver as jko_compat

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RTOL = 1e-10

# (pair, eps, n_iter, n_iter_grad): the published defaults, the W_C metric, unequal masses, the dual
# read-out marginals, the NM-JKO end-to-end call (eps 0.2, 30 pairs, 4 tracked), all pairs tracked
SETTINGS = [
    ("wc", 0.1, 60, 3),
    ("wc", 0.1, 80, 3),
    ("half", 0.1, 80, 3),
    ("dual", 0.2, 60, 8),
    ("wc", 0.2, 30, 4),
    ("wc", 0.1, 2, 5),
    ("wc", 0.1, 40, 0),
]


def _close(got, want, rtol=RTOL):
    """Within ``rtol`` of the largest entry of ``want`` (entries near zero carry no relative meaning)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    assert_allclose(got, want, rtol=rtol, atol=rtol * max(float(np.abs(want).max()), 1e-300))


def _toy(m=6, n=5, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, 4))
    Y = rng.normal(size=(n, 4))
    Z = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    Y = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    C = (1 - np.clip(Z @ Y.T, -1, 1)) ** 2
    return np.log(rng.dirichlet(np.ones(m))), np.log(rng.dirichlet(np.ones(n))), C


@pytest.fixture(scope="module")
def pools():
    path = os.path.join(ROOT, "benchmarks", "tools", "compare_published_loss.py")
    spec = importlib.util.spec_from_file_location("compare_published_loss", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    fx = script.load_parity_fixture()
    return [script.pool_inputs(fx, q) for q in range(fx["pool_emb_f16"].shape[0])]


# ----------------------------------------------------------------------------------------------
# values: the float64 port of the published function, finite differences
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("pair", "eps", "n_iter", "n_grad"), SETTINGS)
def test_matches_the_float64_port_on_the_fixture_pools(pools, pair, eps, n_iter, n_grad):
    assert len(pools) == 30
    for pi in pools:
        a, b = (x.astype(np.float64) for x in pi[pair])
        C = pi["C"].astype(np.float64)
        loss, ga, gb, gC = compat.log_sinkhorn_loss_and_grad(a, b, C, eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
        w0, ga0, gb0, gC0 = ref.published_loss_grad_naive(a, b, C, eps, n_iter, n_grad)
        assert_allclose(loss, w0, rtol=1e-12)
        # the value is the existing drop-in's, bit for bit
        assert loss == compat.log_sinkhorn_loss(a, b, C, eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
        if n_grad:
            _close(ga, ga0)
            _close(gb, gb0)
        else:  # nothing tracked: only the plan's direct use of C has a gradient
            assert not ga.any() and not gb.any()
        _close(gC, gC0)


@pytest.mark.parametrize(
    ("m", "n", "eps", "n_iter", "n_grad"),
    [(6, 5, 0.1, 20, 3), (6, 6, 0.2, 30, 4), (4, 7, 0.5, 2, 4), (5, 5, 0.1, 10, 0), (3, 4, 1.0, 1, 1)],
)
def test_matches_central_finite_differences(m, n, eps, n_iter, n_grad):
    a, b, C = _toy(m, n)
    n_warm = max(0, n_iter - n_grad)
    f0, g0, _ = ref.sinkhorn_log_naive(a, b, C, eps, n_warm)

    def loss(a_, b_, C_):
        return ref.published_loss_frozen(a_, b_, C_, eps, f0, g0, n_grad)

    h = 1e-6
    fd_a = [(loss(a + h * e, b, C) - loss(a - h * e, b, C)) / (2 * h) for e in np.eye(m)]
    fd_b = [(loss(a, b + h * e, C) - loss(a, b - h * e, C)) / (2 * h) for e in np.eye(n)]
    fd_C = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            E = np.zeros((m, n))
            E[i, j] = h
            fd_C[i, j] = (loss(a, b, C + E) - loss(a, b, C - E)) / (2 * h)
    w, ga, gb, gC = compat.log_sinkhorn_loss_and_grad(a, b, C, eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
    assert_allclose(w, loss(a, b, C), rtol=1e-12)
    assert_allclose(ga, fd_a, rtol=1e-6, atol=1e-7)
    assert_allclose(gb, fd_b, rtol=1e-6, atol=1e-7)
    assert_allclose(gC, fd_C, rtol=1e-6, atol=1e-7)


def test_underflowing_rows_and_columns_take_the_exact_path():
    # eps 0.002 and rows / columns shifted by 2-3 cost units: their scaled sums underflow to 0
    a, b, C = _toy(6, 6, seed=3)
    C = C + np.r_[2.0, 0, 0, 0, 0, 0][:, None] + np.r_[0, 0, 3.0, 0, 0, 0][None, :]
    for n_iter, n_grad in ((40, 3), (3, 3)):
        got = compat.log_sinkhorn_loss_and_grad(a, b, C, eps=0.002, n_iter=n_iter, n_iter_grad=n_grad)
        want = ref.published_loss_grad_naive(a, b, C, 0.002, n_iter, n_grad)
        assert_allclose(got[0], want[0], rtol=1e-12)
        for x, y in zip(got[1:], want[1:]):
            assert np.isfinite(x).all()
            _close(x, y, rtol=1e-9)


def test_zero_mass_entries_get_a_zero_gradient():
    a, b, C = _toy(6, 6)
    a[2] = -np.inf
    b[4] = -np.inf
    w, ga, gb, gC = compat.log_sinkhorn_loss_and_grad(a, b, C, n_iter=30, n_iter_grad=5)
    w0, ga0, gb0, gC0 = ref.published_loss_grad_naive(a, b, C, 0.1, 30, 5)
    assert ga[2] == 0 and gb[4] == 0 and not gC[2].any() and not gC[:, 4].any()
    for x, y in ((ga, ga0), (gb, gb0), (gC, gC0)):
        assert np.isfinite(x).all()
        _close(x, y)


def test_grad_output_scales_and_dtypes_follow_C():
    a, b, C = _toy()
    w, ga, gb, gC = compat.log_sinkhorn_loss_and_grad(a, b, C, n_iter=20)
    w2, ga2, gb2, gC2 = compat.log_sinkhorn_loss_and_grad(a, b, C, n_iter=20, grad_output=-2.5)
    assert w2 == w
    for x, y in ((ga, ga2), (gb, gb2), (gC, gC2)):
        assert_allclose(y, -2.5 * x, rtol=1e-15)
    w32, *g32 = compat.log_sinkhorn_loss_and_grad(a.astype(np.float32), b, C.astype(np.float32), n_iter=20)
    assert isinstance(w32, float) and all(x.dtype == np.float32 for x in g32)
    assert ga.dtype == gb.dtype == gC.dtype == np.float64
    assert ga.shape == (6,) and gb.shape == (5,) and gC.shape == (6, 5)


def test_the_input_arrays_are_not_modified():
    a, b, C = _toy()
    copies = [x.copy() for x in (a, b, C)]
    compat.log_sinkhorn_loss_and_grad(a, b, C)
    for x, y in zip((a, b, C), copies):
        np.testing.assert_array_equal(x, y)


# ----------------------------------------------------------------------------------------------
# bad input: the checks of log_sinkhorn_loss, and bounded iteration counts
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "exc", "match"),
    [
        (lambda a, b, C: (np.r_[a[:-1], np.nan], b, C, {}), ValueError, "log_p contains NaN or \\+inf"),
        (lambda a, b, C: (a, np.r_[b[:-1], np.inf], C, {}), ValueError, "log_q contains NaN or \\+inf"),
        (lambda a, b, C: (np.full_like(a, -np.inf), b, C, {}), ValueError, "log_p has no finite entry"),
        (lambda a, b, C: (a, b, np.where(C > 0.5, np.nan, C), {}), ValueError, "C contains NaN or inf"),
        (lambda a, b, C: (a, b, C[:, :-1], {}), ValueError, "C must have shape \\(len\\(log_p\\), len\\(log_q\\)\\)"),
        (lambda a, b, C: (C, b, C, {}), ValueError, "log_p must be 1-dimensional"),
        (lambda a, b, C: (a, b, C, {"eps": 0.0}), ValueError, "eps must be > 0"),
        (lambda a, b, C: (a, b, C, {"n_iter": 0}), ValueError, "n_iter must be >= 1"),
        (lambda a, b, C: (a, b, C, {"n_iter": 2.5}), TypeError, "n_iter must be an integer"),
        (lambda a, b, C: (a, b, C, {"n_iter_grad": -1}), ValueError, "n_iter_grad must be >= 0"),
        (lambda a, b, C: (a, b, C, {"n_iter": 2**63}), ValueError, "n_iter must be <= 10000000"),
        (lambda a, b, C: (a, b, C, {"n_iter_grad": 10**7 + 1}), ValueError, "n_iter_grad must be <= 10000000"),
        (lambda a, b, C: (a.astype(complex), b, C, {}), TypeError, "log_p must be a real numeric array"),
    ],
)
def test_bad_input_names_the_argument(change, exc, match):
    a, b, C, kw = change(*_toy())
    with pytest.raises(exc, match=match):
        compat.log_sinkhorn_loss_and_grad(a, b, C, **kw)
    with pytest.raises(exc, match=match):
        compat.log_sinkhorn_loss(a, b, C, **kw)
    with pytest.raises(exc, match=match):
        compat.log_sinkhorn_with_duals(a, b, C, **kw)


def test_bad_grad_output_and_overflow():
    a, b, C = _toy()
    with pytest.raises(ValueError, match="grad_output must be finite"):
        compat.log_sinkhorn_loss_and_grad(a, b, C, grad_output=np.nan)
    with pytest.raises(TypeError, match="grad_output must be a real number"):
        compat.log_sinkhorn_loss_and_grad(a, b, C, grad_output="1")
    with pytest.raises(FloatingPointError, match="log_sinkhorn_loss_and_grad: non-finite"):
        compat.log_sinkhorn_loss_and_grad(a + 800.0, b + 800.0, C)


# ----------------------------------------------------------------------------------------------
# packaging: names, warm-up, the torch extra
# ----------------------------------------------------------------------------------------------
def test_names_and_warmup_entry():
    assert compat.log_sinkhorn_loss_and_grad is jko_compat.log_sinkhorn_loss_and_grad
    # not a published name: the published module's list is unchanged
    assert "log_sinkhorn_loss_and_grad" not in compat.__all__
    WARMUPS["jko.compat.grad"]()


def test_the_torch_adapter_without_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    monkeypatch.delitem(sys.modules, "jkofast.compat.torch", raising=False)
    with pytest.raises(ImportError, match=r'pip install "jkofast\[torch\]"'):
        importlib.import_module("jkofast.compat.torch")
    monkeypatch.delitem(sys.modules, "jkofast.compat.torch", raising=False)


# ----------------------------------------------------------------------------------------------
# second order: the Hessian-vector product (what create_graph=True torch callers need)
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("m", "n", "eps", "n_iter", "n_grad"), [(5, 4, 0.3, 4, 4), (6, 6, 0.1, 3, 5), (4, 5, 0.5, 1, 1)]
)
def test_hvp_matches_finite_differences_of_the_gradient(m, n, eps, n_iter, n_grad):
    # every pair tracked (n_iter <= n_iter_grad), so perturbing the inputs moves no detached warm dual
    a, b, C = _toy(m, n, seed=m + n)
    rng = np.random.default_rng(7)
    v = (rng.normal(size=m), rng.normal(size=n), rng.normal(size=(m, n)))
    h = 1e-5
    plus = compat.log_sinkhorn_loss_and_grad(a + h * v[0], b + h * v[1], C + h * v[2], eps, n_iter, n_grad)
    minus = compat.log_sinkhorn_loss_and_grad(a - h * v[0], b - h * v[1], C - h * v[2], eps, n_iter, n_grad)
    got = jko_compat.log_sinkhorn_loss_hvp(a, b, C, *v, eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
    for x, p, q in zip(got, plus[1:], minus[1:]):
        _close(x, (p - q) / (2 * h), rtol=1e-7)


def test_hvp_is_symmetric_and_holds_the_warm_duals():
    # <u, H v> = <v, H u> (the truncated loss is a scalar function), also with detached warm pairs
    a, b, C = _toy(6, 5)
    a[1] = -np.inf
    rng = np.random.default_rng(8)
    u = (rng.normal(size=6), rng.normal(size=5), rng.normal(size=(6, 5)))
    v = (rng.normal(size=6), rng.normal(size=5), rng.normal(size=(6, 5)))
    Hu = jko_compat.log_sinkhorn_loss_hvp(a, b, C, *u, eps=0.1, n_iter=30, n_iter_grad=4)
    Hv = jko_compat.log_sinkhorn_loss_hvp(a, b, C, *v, eps=0.1, n_iter=30, n_iter_grad=4)
    assert all(np.isfinite(x).all() for x in Hu) and Hu[0][1] == 0
    uHv = sum(float(np.vdot(x, y)) for x, y in zip(u, Hv))
    vHu = sum(float(np.vdot(x, y)) for x, y in zip(v, Hu))
    assert_allclose(uHv, vHu, rtol=1e-10)
    with pytest.raises(ValueError, match="the direction must have shapes"):
        jko_compat.log_sinkhorn_loss_hvp(a, b, C, u[0][:-1], u[1], u[2])
