"""jkofast.compat: the published solver module's names, values and input handling (issue #18).

Published values: ``tests/data/published_sinkhorn.npz`` holds the outputs of the published
``log_sinkhorn_loss`` / ``log_sinkhorn_with_duals`` (JKO-RAG ``src/jko.py``, torch 2.13.0 CPU,
float32 tensors under ``torch.no_grad()``) on the 30 pools of the parity fixture, generated once by

    PYTHONPATH=. python benchmarks/tools/compare_published_loss.py --published <JKO-RAG>/src \\
        --write-fixture tests/data/published_sinkhorn.npz --no-speed

(run from a separate environment with torch; jkofast never imports it).  The inputs are built by
``pool_inputs`` of that script from ``jkofast.datasets.beir.parity_fixture_path()``: C from the
float16 pool embeddings (checked here against the stored checksums), the float32 log-marginal
pairs ``wc`` (the stability metric's lifted p0 -> p_T, stored), ``half`` (``wc`` with ``log 0.5``
added to ``log_q``: unequal masses, no renormalisation) and ``dual`` (contrib p_T -> uniform, the
published dual read-out).  Settings: ``SETTINGS`` of the script (eps 0.1 / 80 iterations = the W_C
metric; the defaults of both functions; eps 0.2 / 60 for the read-out).

Tolerance: 1e-5 relative on the loss; the duals within 1e-5 of the pool's largest |f| (|g|).
jkofast computes in float64 and matches the float64 oracle to ~1e-13 (tested below); the
remaining difference is the published float32 rounding (measured: loss <= 4.4e-6 relative,
duals <= 8.8e-6 of the largest entry).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast import compat, numba_threads
from jkofast.compat import _solver as jko_compat

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PUBLISHED = os.path.join(os.path.dirname(__file__), "..", "data", "published_sinkhorn.npz")


def _script():
    path = os.path.join(ROOT, "benchmarks", "tools", "compare_published_loss.py")
    spec = importlib.util.spec_from_file_location("compare_published_loss", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FakeTensor:
    """A foreign array type: only ``__array__`` (what CPU torch / JAX tensors offer NumPy)."""

    def __init__(self, data, fail: str | None = None):
        self._data = np.asarray(data)
        self._fail = fail

    def __array__(self, dtype=None, copy=None):
        if self._fail:
            raise RuntimeError(self._fail)
        return self._data if dtype is None else self._data.astype(dtype)


def _toy(m=6, n=6, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, 4))
    Y = Z if m == n else rng.normal(size=(n, 4))
    Z = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    Y = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    C = (1 - np.clip(Z @ Y.T, -1, 1)) ** 2
    return np.log(rng.dirichlet(np.ones(m))), np.log(rng.dirichlet(np.ones(n))), C


def _oracle(log_p, log_q, C, eps, n_iter):
    f, g, _ = ref.sinkhorn_log_naive(log_p, log_q, C, eps, n_iter)
    return float((ref.plan_naive(f, g, np.asarray(C, np.float64), eps) * C).sum()), f, g


# ----------------------------------------------------------------------------------------------
# names
# ----------------------------------------------------------------------------------------------
def test_every_published_name_resolves():
    names = ["JKOConfig", "jko_step", "log_sinkhorn_loss", "log_sinkhorn_with_duals", "run_jko", "run_jko_with_duals"]
    assert sorted(compat.__all__) == names
    for n in names:
        assert getattr(compat, n) is getattr(jko_compat, n)


# ----------------------------------------------------------------------------------------------
# published values on the fixture pools
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def published():
    script = _script()
    z = np.load(PUBLISHED)
    stored = {k: z[k] for k in z.files}
    fx = script.load_parity_fixture()
    pools = [script.pool_inputs(fx, q) for q in range(stored["C_sum"].shape[0])]
    return script, stored, pools


def test_fixture_inputs_are_the_stored_ones(published):
    _, stored, pools = published
    assert len(pools) == 30 and pools[0]["C"].shape == (200, 200)
    assert_allclose([p["C"].astype(np.float64).sum() for p in pools], stored["C_sum"], rtol=1e-9)
    assert_array_equal(np.stack([p["wc"][0] for p in pools]), stored["wc/log_p"])
    assert_array_equal(np.stack([p["wc"][1] for p in pools]), stored["wc/log_q"])
    assert_array_equal(np.stack([p["dual"][0] for p in pools]), stored["dual/log_p"])
    assert all(p["wc"][0].dtype == np.float32 and p["C"].dtype == np.float32 for p in pools)


@pytest.mark.parametrize(
    "setting", ["wc_eps0.1_it80", "wc_defaults", "wc_duals_defaults", "half_eps0.1_it80", "dual_eps0.2_it60"]
)
def test_matches_the_published_function(published, setting):
    script, stored, pools = published
    pair, eps, n_iter, n_grad, duals = script.SETTINGS[setting]
    want = stored[f"{setting}/loss"]
    for q, pi in enumerate(pools):
        a, b = pi[pair]
        if duals:
            w, f, g = compat.log_sinkhorn_with_duals(a, b, pi["C"], eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
            fp, gp = stored[f"{setting}/f"][q], stored[f"{setting}/g"][q]
            assert f.dtype == g.dtype == np.float32
            assert_allclose(f, fp, rtol=0, atol=1e-5 * np.abs(fp).max())
            assert_allclose(g, gp, rtol=0, atol=1e-5 * np.abs(gp).max())
        else:
            w = compat.log_sinkhorn_loss(a, b, pi["C"], eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
        assert isinstance(w, float)
        assert abs(w - want[q]) <= 1e-5 * abs(want[q]), (setting, q, w, want[q])


def test_the_defaults_are_the_published_ones(published):
    # defaults eps 0.1, n_iter 60 (and n_iter_grad 3 / 0, irrelevant to the value)
    _, stored, pools = published
    a, b = pools[0]["wc"]
    assert compat.log_sinkhorn_loss(a, b, pools[0]["C"]) == compat.log_sinkhorn_loss(
        a, b, pools[0]["C"], eps=0.1, n_iter=60, n_iter_grad=0
    )
    want = stored["wc_defaults/loss"][0]
    assert abs(compat.log_sinkhorn_loss(a, b, pools[0]["C"]) - want) <= 1e-5 * want


# ----------------------------------------------------------------------------------------------
# exact semantics vs the float64 oracle
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("m", "n", "eps", "n_iter", "shift"),
    [
        (6, 6, 0.1, 60, 0.0),
        (7, 5, 0.1, 80, 0.0),
        (6, 6, 0.005, 40, 0.0),
        (6, 6, 0.1, 30, np.log(0.5)),
        (3, 4, 2.0, 1, 3.0),
    ],
)
def test_matches_the_float64_oracle(m, n, eps, n_iter, shift):
    # rectangular C, small eps (the exact log-sum-exp fallback), unequal masses (used as given)
    a, b, C = _toy(m, n)
    b = b + shift
    w, f, g = compat.log_sinkhorn_with_duals(a, b, C, eps=eps, n_iter=n_iter)
    w0, f0, g0 = _oracle(a, b, C, eps, n_iter)
    assert f.dtype == g.dtype == np.float64 and f.shape == (m,) and g.shape == (n,)
    assert_allclose(w, w0, rtol=1e-12)
    assert_allclose(f, f0, rtol=1e-12, atol=1e-12)
    assert_allclose(g, g0, rtol=1e-12, atol=1e-12)
    assert w == compat.log_sinkhorn_loss(a, b, C, eps=eps, n_iter=n_iter, n_iter_grad=0)


def test_zero_mass_entries_and_self_distance():
    a, b, C = _toy()
    a[2] = -np.inf
    w, f, g = compat.log_sinkhorn_with_duals(a, b, C, n_iter=60)
    w0, f0, _ = _oracle(a, b, C, 0.1, 60)
    assert f[2] == -np.inf and np.isfinite(np.delete(f, 2)).all()
    assert_allclose(w, w0, rtol=1e-12)
    # the transport part only: W(p, p) > 0 (SPEC A.4.3)
    assert compat.log_sinkhorn_loss(b, b, C, n_iter=80) > 0


def test_n_iter_grad_is_irrelevant_unless_it_exceeds_n_iter():
    a, b, C = _toy()
    w = compat.log_sinkhorn_loss(a, b, C, n_iter=20)
    assert all(compat.log_sinkhorn_loss(a, b, C, n_iter=20, n_iter_grad=k) == w for k in (0, 3, 8, 20))
    # the published loop runs max(0, n_iter - n_iter_grad) + n_iter_grad pairs
    assert compat.log_sinkhorn_loss(a, b, C, n_iter=2, n_iter_grad=5) == compat.log_sinkhorn_loss(a, b, C, n_iter=5)
    assert_allclose(compat.log_sinkhorn_loss(a, b, C, n_iter=5), _oracle(a, b, C, 0.1, 5)[0], rtol=1e-12)


def test_thread_count_does_not_change_the_value():
    a, b, C = _toy(30, 30)
    with numba_threads(1):
        w1, f1, g1 = compat.log_sinkhorn_with_duals(a, b, C)
    with numba_threads(2):
        w2, f2, g2 = compat.log_sinkhorn_with_duals(a, b, C)
    assert w1 == w2
    assert_array_equal(f1, f2)
    assert_array_equal(g1, g2)


# ----------------------------------------------------------------------------------------------
# array-likes
# ----------------------------------------------------------------------------------------------
def test_loss_accepts_any_array_like():
    a, b, C = _toy()
    w = compat.log_sinkhorn_loss(a, b, C)
    assert compat.log_sinkhorn_loss(a.tolist(), b.tolist(), C.tolist()) == w
    assert compat.log_sinkhorn_loss(FakeTensor(a), FakeTensor(b), FakeTensor(C), eps=FakeTensor(0.1)) == w
    ro = [x.copy() for x in (a, b, C)]
    for x in ro:
        x.setflags(write=False)
    assert compat.log_sinkhorn_loss(*ro) == w
    w32, f32, g32 = compat.log_sinkhorn_with_duals(*(FakeTensor(x.astype(np.float32)) for x in (a, b, C)))
    assert isinstance(w32, float) and f32.dtype == g32.dtype == np.float32
    a32, b32, C32 = (x.astype(np.float32) for x in (a, b, C))
    assert w32 == compat.log_sinkhorn_loss(a32, b32, C32)
    assert_allclose(w32, _oracle(a32, b32, C32, 0.1, 60)[0], rtol=1e-12)


def test_solver_functions_accept_any_array_like():
    rng = np.random.default_rng(1)
    _, _, C = _toy(8, 8)
    K = np.maximum(1 - np.sqrt(C), 0)
    E = -rng.random(8)
    p0 = rng.dirichlet(np.ones(8))
    cfg = compat.JKOConfig(T=2, inner_steps=4, sinkhorn_iter=20, sinkhorn_iter_grad=4)
    p, infos = compat.run_jko(p0, E, C, K, cfg)
    fake = [FakeTensor(x.astype(np.float32)) for x in (p0, E, C, K)]
    p32 = [x.astype(np.float32) for x in (p0, E, C, K)]
    assert_array_equal(compat.run_jko(*fake, cfg, device="cuda")[0], compat.run_jko(*p32, cfg)[0])
    assert_array_equal(compat.run_jko(*(x.tolist() for x in (p0, E, C, K)), cfg)[0], p)
    assert infos == compat.run_jko(p0.tolist(), E, C, K, cfg)[1]
    for a, b in zip(compat.run_jko_with_duals(*fake, cfg), compat.run_jko_with_duals(*p32, cfg), strict=True):
        assert_array_equal(a, b)
    s_fake, i_fake = compat.jko_step(*fake, cfg)
    s_np, i_np = compat.jko_step(*p32, cfg)
    assert_array_equal(s_fake, s_np) and i_fake == i_np
    # JKOConfig fields given as 0-d array-likes (scalar tensors) are read as numbers
    cfg_t = compat.JKOConfig(T=FakeTensor(2), inner_steps=4, sinkhorn_iter=20, sinkhorn_iter_grad=4, h=FakeTensor(0.5))
    assert_array_equal(compat.run_jko(p0, E, C, K, cfg_t)[0], p)


def test_a_tensor_that_cannot_be_converted_is_named():
    a, b, C = _toy()
    grad = FakeTensor(a, fail="Can't call numpy() on Tensor that requires grad.")
    with pytest.raises(TypeError, match=r"log_p: cannot convert FakeTensor.*requires grad.*detach\(\)"):
        compat.log_sinkhorn_loss(grad, b, C)
    _, _, C8 = _toy(8, 8)
    with pytest.raises(TypeError, match="energy: cannot convert"):
        compat.run_jko(np.full(8, 1 / 8), FakeTensor(np.zeros(8), fail="cuda"), C8, C8, compat.JKOConfig())


# ----------------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "exc", "match"),
    [
        (lambda a, b, C: (np.r_[a[:-1], np.nan], b, C, {}), ValueError, "log_p contains NaN or \\+inf"),
        (lambda a, b, C: (a, np.r_[b[:-1], np.inf], C, {}), ValueError, "log_q contains NaN or \\+inf"),
        (lambda a, b, C: (np.full_like(a, -np.inf), b, C, {}), ValueError, "log_p has no finite entry"),
        (lambda a, b, C: (a, b, np.where(np.eye(6, dtype=bool), np.nan, C), {}), ValueError, "C contains NaN or inf"),
        (lambda a, b, C: (a, b, C[:, :-1], {}), ValueError, "C must have shape \\(len\\(log_p\\), len\\(log_q\\)\\)"),
        (lambda a, b, C: (a[:-1], b, C, {}), ValueError, "C must have shape"),
        (lambda a, b, C: (C, b, C, {}), ValueError, "log_p must be 1-dimensional"),
        (lambda a, b, C: (a, b, C, {"eps": 0.0}), ValueError, "eps must be > 0"),
        (lambda a, b, C: (a, b, C, {"eps": -0.1}), ValueError, "eps must be > 0"),
        (lambda a, b, C: (a, b, C, {"eps": np.nan}), ValueError, "eps must be > 0"),
        (lambda a, b, C: (a, b, C, {"n_iter": 0}), ValueError, "n_iter must be >= 1"),
        (lambda a, b, C: (a, b, C, {"n_iter": 2.5}), TypeError, "n_iter must be an integer"),
        (lambda a, b, C: (a, b, C, {"n_iter_grad": -1}), ValueError, "n_iter_grad must be >= 0"),
        (lambda a, b, C: (a, b, C, {"eps": FakeTensor([0.1, 0.2])}), TypeError, "eps must be a number"),
        (lambda a, b, C: (a.astype(complex), b, C, {}), TypeError, "log_p must be a real numeric array"),
    ],
)
def test_bad_input_names_the_argument(change, exc, match):
    a, b, C, kw = change(*_toy())
    with pytest.raises(exc, match=match):
        compat.log_sinkhorn_loss(a, b, C, **kw)
    with pytest.raises(exc, match=match):
        compat.log_sinkhorn_with_duals(a, b, C, **kw)


def test_overflowing_cost_raises():
    a, b, C = _toy()
    with pytest.raises(FloatingPointError, match="log_sinkhorn_loss: non-finite"):
        compat.log_sinkhorn_loss(a + 800.0, b + 800.0, C)


def test_solver_bad_input_still_names_the_argument():
    _, _, C = _toy(8, 8)
    p0 = np.full(8, 1 / 8)
    with pytest.raises(ValueError, match="energy contains NaN"):
        compat.run_jko(p0, np.r_[np.zeros(7), np.nan], C, C, compat.JKOConfig())
    with pytest.raises(ValueError, match="p_prev and energy must have the same length"):
        compat.jko_step(p0[:-1], np.zeros(8), C, C, compat.JKOConfig())
    with pytest.raises(ValueError, match=r"K must have shape \(M, M\) = \(8, 8\)"):
        compat.run_jko(p0, np.zeros(8), C, C[:, :-1], compat.JKOConfig())
    with pytest.raises(TypeError, match="cfg is required"):
        compat.run_jko(p0, np.zeros(8), C, C, None)
    with pytest.raises(TypeError, match=r"cfg\.h must be a number"):
        compat.run_jko(p0, np.zeros(8), C, C, compat.JKOConfig(h=FakeTensor([0.5, 1.0])))
