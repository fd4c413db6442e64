"""jkofast.compat.torch: the drop-in as a torch.autograd.Function (issue #28, item 2).

``published_loss`` below is the published ``log_sinkhorn_loss`` (JKO-RAG ``src/jko.py``,
``_log_sinkhorn_core``) written out in torch: detached warm pairs under ``no_grad``, ``n_iter_grad``
tracked pairs, then ``<Pi, C>``; its autograd gradients are the reference.  float64: equal to 1e-10 of
each gradient's largest entry; float32: within the published float32 run's own rounding (its distance
to the float64 run).  torch is an optional extra: this module is skipped without it.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from jkofast.compat.torch import log_sinkhorn_loss, log_sinkhorn_with_duals  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def published_loss(log_p, log_q, C, eps=0.1, n_iter=60, n_iter_grad=3):
    minus_C_over_eps = -C / eps
    f = torch.zeros(C.shape[0], dtype=C.dtype)
    g = torch.zeros(C.shape[1], dtype=C.dtype)
    with torch.no_grad():
        for _ in range(max(0, n_iter - n_iter_grad)):
            f = eps * (log_p.detach() - torch.logsumexp(minus_C_over_eps + (g / eps)[None, :], dim=1))
            g = eps * (log_q.detach() - torch.logsumexp(minus_C_over_eps + (f / eps)[:, None], dim=0))
    for _ in range(n_iter_grad):
        f = eps * (log_p - torch.logsumexp(minus_C_over_eps + (g / eps)[None, :], dim=1))
        g = eps * (log_q - torch.logsumexp(minus_C_over_eps + (f / eps)[:, None], dim=0))
    T = torch.exp((f[:, None] + g[None, :] - C) / eps)
    return (T * C).sum()


def _grads(fn, a, b, C, dtype, **kw):
    ts = [torch.tensor(np.asarray(x, np.float64), dtype=dtype, requires_grad=True) for x in (a, b, C)]
    loss = fn(*ts, **kw)
    loss.backward()
    return loss, [t.grad.to(torch.float64).numpy() for t in ts]


def _close(got, want, rtol):
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))


@pytest.fixture(scope="module")
def pools():
    path = os.path.join(ROOT, "benchmarks", "tools", "compare_published_loss.py")
    spec = importlib.util.spec_from_file_location("compare_published_loss", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    fx = script.load_parity_fixture()
    return [script.pool_inputs(fx, q) for q in range(0, 30, 6)]


@pytest.mark.parametrize(
    ("pair", "eps", "n_iter", "n_grad"), [("wc", 0.1, 60, 3), ("half", 0.1, 80, 3), ("wc", 0.2, 30, 4)]
)
def test_float64_gradients_equal_the_published_autograd(pools, pair, eps, n_iter, n_grad):
    for pi in pools:
        a, b = pi[pair]
        kw = {"eps": eps, "n_iter": n_iter, "n_iter_grad": n_grad}
        w, got = _grads(log_sinkhorn_loss, a, b, pi["C"], torch.float64, **kw)
        w0, want = _grads(published_loss, a, b, pi["C"], torch.float64, **kw)
        assert w.dtype == torch.float64 and w.shape == ()
        np.testing.assert_allclose(w.item(), w0.item(), rtol=1e-12)
        for x, y in zip(got, want):
            _close(x, y, 1e-10)


def test_float32_gradients_within_the_published_float32_rounding(pools):
    kw = {"eps": 0.1, "n_iter": 60, "n_iter_grad": 3}
    for pi in pools:
        a, b = pi["wc"]
        w, got = _grads(log_sinkhorn_loss, a, b, pi["C"], torch.float32, **kw)
        w32, pub32 = _grads(published_loss, a, b, pi["C"], torch.float32, **kw)
        _, pub64 = _grads(published_loss, a, b, pi["C"], torch.float64, **kw)
        assert w.dtype == torch.float32
        np.testing.assert_allclose(w.item(), w32.item(), rtol=1e-5)
        for x, y32, y64 in zip(got, pub32, pub64):
            # jkofast's float32 result is the float64 gradient rounded once; the published float32 run
            # sits at its own rounding distance from it
            envelope = np.abs(y32 - y64).max() * 2 + 1e-6 * np.abs(y64).max()
            assert np.abs(x - y32).max() <= envelope
            _close(x, y64, 1e-6)


def test_gradcheck_on_a_tiny_fully_tracked_case():
    # gradcheck differentiates numerically through every pair, so no pair may be detached (n_iter <= n_iter_grad)
    rng = np.random.default_rng(1)
    a = torch.tensor(np.log(rng.dirichlet(np.ones(4))), requires_grad=True)
    b = torch.tensor(np.log(rng.dirichlet(np.ones(3))), requires_grad=True)
    C = torch.tensor(rng.uniform(0, 1, size=(4, 3)), requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y, z: log_sinkhorn_loss(x, y, z, 0.3, 4, 4), (a, b, C))


def test_only_inputs_that_require_grad_get_one_scaled_by_the_upstream_gradient():
    rng = np.random.default_rng(2)
    a = torch.tensor(np.log(rng.dirichlet(np.ones(5))))
    b = torch.tensor(np.log(rng.dirichlet(np.ones(5))))
    C = torch.tensor(rng.uniform(0, 1, size=(5, 5)), requires_grad=True)
    (3.0 * log_sinkhorn_loss(a, b, C, n_iter=20)).backward()
    C2 = C.detach().clone().requires_grad_(True)
    published_loss(a, b, C2, n_iter=20).backward()
    assert a.grad is None and b.grad is None
    _close(C.grad.numpy(), 3.0 * C2.grad.numpy(), 1e-10)
    with torch.no_grad():
        out = log_sinkhorn_loss(a, b, C)
    assert not out.requires_grad


def test_with_duals_matches_the_published_duals():
    rng = np.random.default_rng(3)
    a = torch.tensor(np.log(rng.dirichlet(np.ones(6))), dtype=torch.float32)
    b = torch.tensor(np.log(rng.dirichlet(np.ones(6))), dtype=torch.float32)
    C = torch.tensor(rng.uniform(0, 1, size=(6, 6)), dtype=torch.float32, requires_grad=True)
    w, f, g = log_sinkhorn_with_duals(a, b, C, eps=0.2)
    assert f.dtype == g.dtype == w.dtype == torch.float32 and not f.requires_grad and w.requires_grad
    np.testing.assert_allclose(w.item(), published_loss(a, b, C, eps=0.2, n_iter_grad=0).item(), rtol=1e-5)
    w.backward()
    assert C.grad is not None and torch.isfinite(C.grad).all()


def test_bad_input():
    a = torch.zeros(3)
    C = torch.zeros(3, 3)
    with pytest.raises(TypeError, match=r"log_p must be a torch\.Tensor"):
        log_sinkhorn_loss(np.zeros(3), a, C)
    with pytest.raises(TypeError, match="C must be float32 or float64"):
        log_sinkhorn_loss(a, a, torch.zeros(3, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="n_iter must be <= 10000000"):
        log_sinkhorn_loss(a, a, C, n_iter=2**63)
    with pytest.raises(ValueError, match="log_q contains NaN"):
        log_sinkhorn_loss(a, torch.full((3,), float("nan")), C)


def _nm_jko_second_order(fn, C0, theta0, log_q, n_iter, n_grad, eps=0.2):
    # the NM-JKO end-to-end pattern: the inner gradient in theta (create_graph=True), a loss on the
    # updated theta, its gradient w.r.t. the cost C
    C = C0.clone().requires_grad_(True)
    theta = theta0.clone().requires_grad_(True)
    w = fn(torch.log_softmax(theta, 0), log_q, C, eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
    (grad,) = torch.autograd.grad(w, theta, create_graph=True)
    p = torch.softmax(theta - 0.1 * grad, 0)
    (p * torch.arange(p.shape[0], dtype=p.dtype)).sum().backward()
    return C.grad.numpy(), theta.grad.numpy()


@pytest.mark.parametrize(("n_iter", "n_grad"), [(30, 4), (3, 5), (60, 3)])
def test_second_order_equals_the_published_double_backward(pools, n_iter, n_grad):
    for pi in pools[:2]:
        C0 = torch.tensor(pi["C"], dtype=torch.float64)
        theta0 = torch.tensor(pi["wc"][0], dtype=torch.float64)
        log_q = torch.tensor(pi["wc"][1], dtype=torch.float64)
        got = _nm_jko_second_order(log_sinkhorn_loss, C0, theta0, log_q, n_iter, n_grad)
        want = _nm_jko_second_order(published_loss, C0, theta0, log_q, n_iter, n_grad)
        for x, y in zip(got, want):
            _close(x, y, 1e-9)


def test_gradgradcheck_and_no_third_derivative():
    rng = np.random.default_rng(4)
    a = torch.tensor(np.log(rng.dirichlet(np.ones(4))), requires_grad=True)
    b = torch.tensor(np.log(rng.dirichlet(np.ones(3))), requires_grad=True)
    C = torch.tensor(rng.uniform(0, 1, size=(4, 3)), requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda x, y, z: log_sinkhorn_loss(x, y, z, 0.3, 3, 3), (a, b, C))
    (gC,) = torch.autograd.grad(log_sinkhorn_loss(a, b, C, n_iter=5), C, create_graph=True)
    (ga,) = torch.autograd.grad(gC.sum(), a, retain_graph=True)
    assert torch.isfinite(ga).all()
    with pytest.raises(RuntimeError, match="differentiable twice: a third derivative"):
        torch.autograd.grad(gC.sum(), a, create_graph=True)
