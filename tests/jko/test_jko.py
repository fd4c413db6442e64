"""JKO solver (jkofast.jko.solver) vs the naive published-algorithm oracle, invariants, bad input, compat API."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast._status import ConvergenceWarning
from jkofast.compat import _solver as compat
from jkofast.jko.solver import JKOConfig, jko_step, operating_point, run_jko, run_jko_with_duals


def toy(m_per=4, d=8, seed=0):
    """The reference's self-test construction (SPEC A.4.9), shrunk to 3 clusters of m_per."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    Z = []
    for c in centres:
        for _ in range(m_per):
            z = c + 0.1 * rng.normal(size=d)
            Z.append(z / np.linalg.norm(z))
    Z = np.stack(Z).astype(np.float32)
    S = Z @ Z.T
    C = ((1.0 - S) ** 2).astype(np.float64)
    C = 0.5 * (C + C.T)
    K = np.maximum(S, 0.0).astype(np.float64)
    M = 3 * m_per
    E = rng.normal(size=M)
    E[:m_per] -= 1.5
    p0 = np.ones(M) / M
    p0[:m_per] *= 1.5
    return p0 / p0.sum(), E, C, K


SMALL = dict(h=0.5, lam=0.05, rho=0.05, sinkhorn_eps=0.1, T=2, inner_steps=6)


@pytest.mark.parametrize(
    "mode, alpha",
    [("wasserstein", 0.5), ("kl", 0.5), ("noproximal", 0.5), ("bregman", 0.5), ("bregman", 0.0), ("bregman", 1.0)],
)
def test_matches_naive_published_loop(mode, alpha):
    p0, E, C, K = toy()
    cfg = JKOConfig(**SMALL, mode=mode, alpha_prox=alpha)
    p, losses = run_jko(p0, E, C, K, cfg, return_losses=True)
    p_ref, l_ref = ref.jko_naive(p0, E, C, K, h=0.5, lam=0.05, rho=0.05, eps=0.1, T=2, inner=6, mode=mode, alpha=alpha)
    assert_allclose(p, p_ref, atol=1e-12, rtol=1e-9)
    assert_allclose(losses, l_ref, rtol=1e-10, atol=1e-12)
    assert p.dtype == np.float64 and p.sum() == pytest.approx(1.0, abs=1e-12) and np.all(p > 0)


def test_bregman_edge_cases_equal_pure_modes():
    p0, E, C, K = toy()
    pw = run_jko(p0, E, C, K, JKOConfig(**SMALL, mode="wasserstein"))
    pk = run_jko(p0, E, C, K, JKOConfig(**SMALL, mode="kl"))
    assert_allclose(run_jko(p0, E, C, K, JKOConfig(**SMALL, mode="bregman", alpha_prox=1.0)), pw, atol=1e-15)
    assert_allclose(run_jko(p0, E, C, K, JKOConfig(**SMALL, mode="bregman", alpha_prox=0.0)), pk, atol=1e-15)
    # alpha is clamped to [0, 1]
    assert_allclose(run_jko(p0, E, C, K, JKOConfig(**SMALL, mode="bregman", alpha_prox=7.0)), pw, atol=1e-15)


def test_jko_step_is_one_outer_step():
    p0, E, C, K = toy()
    cfg = JKOConfig(**SMALL)
    p1 = jko_step(p0, E, C, K, cfg)
    assert_allclose(jko_step(p1, E, C, K, cfg), run_jko(p0, E, C, K, cfg), atol=1e-14)


def test_duals_uniform_target():
    p0, E, C, K = toy()
    cfg = JKOConfig(**SMALL)
    p, f, g = run_jko_with_duals(p0, E, C, K, cfg)
    assert_array_equal(p, run_jko(p0, E, C, K, cfg))
    M = p.size
    f_ref, g_ref, _ = ref.sinkhorn_log_naive(np.log(np.maximum(p, 1e-30)), np.full(M, -np.log(M)), C, 0.1, 60)
    assert_allclose(f, f_ref, atol=1e-12)
    assert_allclose(g, g_ref, atol=1e-12)
    _, f0, g0 = run_jko_with_duals(p0, E, C, K, cfg.replace(mode="kl"))
    assert not f0.any() and not g0.any()


def test_implicit_equals_converged_unroll_and_entropic_differs():
    # with enough fully-unrolled pairs the reference gradient is the exact one, so the
    # implicit fast path must reproduce that flow; the entropic objective is another flow
    p0, E, C, K = toy()
    base = JKOConfig(**{**SMALL, "sinkhorn_eps": 0.5})
    pu = run_jko(p0, E, C, K, base.replace(sinkhorn_iter=300, sinkhorn_iter_grad=300))
    pi = run_jko(p0, E, C, K, base.replace(grad="implicit", tol=1e-12, cg_tol=1e-12))
    pe = run_jko(p0, E, C, K, base.replace(objective="entropic", tol=1e-12))
    # Newton steps on the duals (every pair / never) reach the same converged plans
    for every in (0, 1):
        pn = run_jko(p0, E, C, K, base.replace(grad="implicit", tol=1e-12, cg_tol=1e-12, newton_every=every))
        assert np.abs(pn - pu).sum() < 1e-6
    for p in (pi, pe):
        assert p.sum() == pytest.approx(1.0) and np.all(p > 0)
    assert np.abs(pi - pu).sum() < 1e-6
    assert np.abs(pe - pu).sum() > 1e-3


def test_implicit_defaults_float32_and_adaptive_tol_track_the_tight_float64_flow():
    # default tol (1e-5 + tol_step * |Δp|_1, float32 Gibbs kernels, cg_tol 1e-3) against the
    # tight float64 solve of the same flow; and each relaxation on its own
    # (float32 needs tol and cg_tol >= 1e-5; the adaptive tolerance only lags while p moves
    # fast, so over a tuned-length flow the difference washes out)
    p0, E, C, K = toy()
    base = JKOConfig(**{**SMALL, "sinkhorn_eps": 0.2}, grad="implicit")
    tight = run_jko(p0, E, C, K, base.replace(tol=1e-12, cg_tol=1e-12))
    for cfg, bar in (
        (base.replace(tol_step=0.0), 1e-4),
        (base.replace(tol=1e-5, cg_tol=1e-5), 1e-3),
        (base.replace(tol=1e-6, cg_tol=1e-12), 1e-5),
        (base, 2e-2),
    ):
        assert np.abs(run_jko(p0, E, C, K, cfg) - tight).sum() < bar, cfg
    long = dict(T=5, inner_steps=40)
    tight = run_jko(p0, E, C, K, base.replace(tol=1e-12, cg_tol=1e-12, **long))
    assert np.abs(run_jko(p0, E, C, K, base.replace(**long)) - tight).sum() < 1e-4
    assert base.resolved_tol() == 1e-5 and base.replace(objective="entropic").resolved_tol() == 1e-6
    with pytest.raises(ValueError, match="tol_step"):
        base.replace(tol_step=-1.0).validate()


def test_converged_paths_survive_underflow_fallback():
    # eps small enough that the scaled sums underflow: both converged paths switch to the log form
    p0, E, C, K = toy()
    for kw in (dict(grad="implicit"), dict(objective="entropic")):
        # 50 pairs at eps 0.003 do not converge: said by a ConvergenceWarning, not hidden
        with pytest.warns(ConvergenceWarning, match="run_jko: Sinkhorn stopped at its cap"):
            p = run_jko(
                p0,
                E,
                4 * C,
                K,
                JKOConfig(**{**SMALL, "sinkhorn_eps": 0.003, "T": 1, "inner_steps": 3}, **kw, sinkhorn_max_iter=50),
            )
        assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0)


def test_converged_paths_report_iteration_caps():
    p0, E, C, K = toy()
    base = JKOConfig(**{**SMALL, "T": 1, "inner_steps": 4}, grad="implicit")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # converged solves: silent
        p_ok = run_jko(p0, E, C, K, base)
        run_jko(p0, E, C, K, base.replace(grad="unrolled", sinkhorn_iter=2))  # fixed count by definition
    with pytest.warns(ConvergenceWarning, match=r"implicit-gradient CG stopped at its cap \(cg_max_iter=0"):
        p_cg = run_jko(p0, E, C, K, base.replace(cg_max_iter=0))
    assert np.abs(p_cg - p_ok).sum() > 0  # the capped gradient differs: the warning is not noise
    with pytest.warns(ConvergenceWarning, match=r"Sinkhorn stopped at its cap \(sinkhorn_max_iter=1, tol=1e-12\)"):
        run_jko(p0, E, C, K, base.replace(sinkhorn_max_iter=1, tol=1e-12))


def test_pool_of_one_and_operating_points():
    assert_array_equal(run_jko([1.0], [0.3], [[0.0]], [[1.0]], "tuned"), [1.0])
    t = operating_point("tuned")
    assert (t.h, t.lam, t.rho, t.sinkhorn_eps, t.T, t.inner_steps, t.tau0) == (2.0, 0.1, 0.05, 0.2, 5, 40, 1.0)
    assert operating_point("base") == JKOConfig()  # base = the published defaults (τ0 0.1)
    assert operating_point("fast").T == 2 and operating_point("contrib").inner_steps == 20
    assert operating_point("tuned", grad="implicit").grad == "implicit"
    with pytest.raises(ValueError, match="operating point"):
        operating_point("best")


@pytest.mark.parametrize(
    "change, exc, match",
    [
        (dict(E=[np.nan] + [0.0] * 11), ValueError, "E contains NaN"),
        (dict(p0=[np.inf] + [0.1] * 11), ValueError, "p0 contains NaN"),
        (dict(p0=[-0.1] + [0.1] * 11), ValueError, "p0 must be non-negative"),
        (dict(p0=[0.0] * 12), ValueError, "p0 must have positive total mass"),
        (dict(p0=[0.1] * 11), ValueError, "p0 and E"),
        (dict(C=np.zeros((12, 11))), ValueError, "C must be square"),
        (dict(K=np.zeros((11, 11))), ValueError, "K must be square"),
        (dict(C=np.triu(np.ones((12, 12)))), ValueError, "C must be symmetric"),
        (dict(C=np.full((12, 12), np.nan)), ValueError, "C contains NaN"),
        (dict(K=np.full((12, 12), np.inf)), ValueError, "K contains NaN"),
        (dict(E=[]), ValueError, "E must not be empty"),
        (dict(cfg=JKOConfig(sinkhorn_eps=0.0)), ValueError, "sinkhorn_eps"),
        (dict(cfg=JKOConfig(h=-1.0)), ValueError, "h must be"),
        (dict(cfg=JKOConfig(mode="sinkhorn")), ValueError, "mode must be one of"),
        (dict(cfg=JKOConfig(grad="envelope")), ValueError, "grad must be one of"),
        (dict(cfg=JKOConfig(objective="dual")), ValueError, "objective must be one of"),
        (dict(cfg=JKOConfig(T=1.5)), TypeError, "T must be an integer"),
        (dict(cfg=3), TypeError, "cfg must be"),
        (dict(cfg=JKOConfig(alpha_prox="x")), TypeError, "alpha_prox"),
        (dict(cfg=JKOConfig(alpha_prox=None)), TypeError, "alpha_prox"),
        (dict(E=[1e160] + [0.0] * 11), ValueError, "E has magnitude"),
    ],
)
def test_bad_input(change, exc, match):
    p0, E, C, K = toy()
    args = dict(p0=p0, E=E, C=C, K=K, cfg=JKOConfig(**SMALL))
    args.update(change)
    with pytest.raises(exc, match=match):
        run_jko(args["p0"], args["E"], args["C"], args["K"], args["cfg"])


def test_p0_is_renormalised_and_inputs_untouched():
    p0, E, C, K = toy()
    C0 = C.copy()
    cfg = JKOConfig(**SMALL)
    assert_allclose(run_jko(3 * p0, E, C, K, cfg), run_jko(p0, E, C, K, cfg), atol=1e-15)
    assert_array_equal(C, C0)


def test_compat_api_structures():
    p0, E, C, K = toy()
    cfg = compat.JKOConfig(h=0.5, lam=0.05, rho=0.05, sinkhorn_eps=0.1, T=2, inner_steps=6)
    p, infos = compat.run_jko(
        p0.astype(np.float32), E.astype(np.float32), C.astype(np.float32), K.astype(np.float32), cfg, device="cpu"
    )
    assert p.dtype == np.float32 and p.shape == (12,)
    assert len(infos) == 2 and all(len(i["losses"]) == 6 for i in infos)
    assert all(isinstance(x, float) for x in infos[0]["losses"])
    p_ref, l_ref = ref.jko_naive(
        p0.astype(np.float32),
        E.astype(np.float32),
        C.astype(np.float32),
        K.astype(np.float32),
        h=0.5,
        lam=0.05,
        rho=0.05,
        eps=0.1,
        T=2,
        inner=6,
    )
    assert_allclose(p, p_ref, atol=1e-7)
    assert_allclose(infos[0]["losses"] + infos[1]["losses"], l_ref, rtol=1e-6)
    p2, f, g = compat.run_jko_with_duals(p0, E, C, K, cfg, device="cuda")
    assert p2.dtype == f.dtype == g.dtype == np.float32
    _, f0, g0 = compat.run_jko_with_duals(p0, E, C, K, cfg.replace(mode="noproximal"))
    assert not f0.any() and not g0.any()
    p1, info = compat.jko_step(p0, E, C, K, cfg)
    assert p1.dtype == np.float32 and len(info["losses"]) == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compat.run_jko(p0, E, C, K, cfg)


def test_p0_whose_sum_overflows_is_renormalised():
    # sum(p0) = inf: p0 / sum was all zeros (a silently wrong start); now p0 / max first
    p0, E, C, K = toy()
    cfg = JKOConfig(**SMALL)
    big = p0 / p0.max() * 1e308
    with np.errstate(over="ignore"):
        assert not np.isfinite(big.sum())
        assert_allclose(run_jko(big, E, C, K, cfg), run_jko(p0, E, C, K, cfg), rtol=1e-12, atol=1e-15)


def test_energy_at_the_range_limit_still_moves_p():
    # |E| <= E_MAX (1e150) works: the flow concentrates on the lowest energy as for |E| = 1e3
    from jkofast.jko.solver import pool_geometry

    C, K = pool_geometry(embeddings=np.eye(3))
    a = np.ones(3) / 3
    for s in (1e3, 1e140):
        p = run_jko(a, [s, -s, 0.0], C, K, "base")
        assert int(np.argmax(p)) == 1 and p[1] > 0.99


def test_initial_distribution_extremes_and_bad_tau0():
    from jkofast.jko.solver import initial_distribution

    # -E/tau0 overflows: the limit (all mass on the lowest energy), not NaN
    assert_array_equal(initial_distribution([1e300, -1e300, 0.0], 1e-300), [0.0, 1.0, 0.0])
    assert_array_equal(initial_distribution([5.0, -1e308, -1e308], 1e-9), [0.0, 0.5, 0.5])
    # the ordinary path is unchanged
    E = np.array([0.3, -0.2, 0.1])
    x = -E / 0.5
    e = np.exp(x - x.max())
    assert_array_equal(initial_distribution(E, 0.5), e / e.sum())
    with pytest.raises(ValueError, match="tau0"):
        initial_distribution(E, float("nan"))
    with pytest.raises(ValueError, match="tau0"):
        initial_distribution(E, -1.0)
    with pytest.raises(TypeError, match="tau0"):
        initial_distribution(E, "1")


# ---------------------------------------------------------------------------------------------
# One compiled unit per gradient path (#16 cold start): the wrappers call a lean jko_flow /
# rerank_pools specialisation per path; each must equal the all-paths kernel jko_query (the
# pre-split driver, every token on) bit for bit, retries included.
# ---------------------------------------------------------------------------------------------
def _checked(p0, E, C, K, cfg):
    from jkofast.jko import solver as jko

    return jko._check_pool(p0, E, C, K), cfg.validate()


def _all_paths(p0, E, C, K, cfg, duals):
    """``(status, p, losses, f, g)`` of the all-paths kernel on run_jko's checked inputs."""
    from jkofast.kernels.jko import solver as kj

    (p0, E, C, C_T, Ks), cfg = _checked(p0, E, C, K, cfg)
    m = E.shape[0]
    p, f, g = np.empty(m), np.zeros(m), np.zeros(m)
    losses = np.zeros(cfg.T * cfg.inner_steps)
    st = kj.jko_query(p0, E, C, C_T, Ks, cfg._params(duals), p, losses, f, g, np.zeros(2, np.int64))
    return st, p, losses, f, g


def _lean_status(p0, E, C, K, cfg, **flags):
    """Status of one lean ``jko_flow`` specialisation (``flags``: f64 / fallback of ``_path_tokens``)."""
    from jkofast.jko import solver as jko
    from jkofast.kernels.jko import solver as kj

    (p0, E, C, C_T, Ks), cfg = _checked(p0, E, C, K, cfg)
    m = E.shape[0]
    out = kj.FlowOut(np.empty(m), np.zeros(cfg.T * cfg.inner_steps), np.zeros(m), np.zeros(m), np.zeros(2, np.int64))
    return kj.jko_flow(p0, E, C, C_T, Ks, cfg._params(False), out, *jko._path_tokens(cfg, False, **flags))


def _assert_same_as_all_paths(p0, E, C, K, cfg):
    from jkofast.jko import solver as jko

    p, losses, f, g, _ = jko._run(p0, E, C, K, cfg, True)
    st, p_ref, l_ref, f_ref, g_ref = _all_paths(p0, E, C, K, cfg, True)
    assert st == 0
    for got, want in ((p, p_ref), (losses, l_ref), (f, f_ref), (g, g_ref)):
        assert_array_equal(got, want)


PATHS = {
    "unrolled": {},
    "implicit_float32_operators": {"grad": "implicit"},
    "implicit_float64_operators": {"grad": "implicit", "tol": 1e-8},
    "entropic": {"objective": "entropic"},
    "kl": {"mode": "kl"},
    "noproximal": {"mode": "noproximal"},
    "bregman": {"mode": "bregman", "grad": "implicit"},
    "bregman_alpha0": {"mode": "bregman", "alpha_prox": 0.0},
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_path_specialisation_equals_the_all_paths_kernel(path):
    p0, E, C, K = toy()
    _assert_same_as_all_paths(p0, E, C, K, JKOConfig(**SMALL, **PATHS[path]))


def test_pool_outside_the_float32_range_reruns_with_float64_operators():
    from jkofast.kernels.jko import solver as kj

    p0, E, C, K = toy()
    cfg = JKOConfig(**{**SMALL, "sinkhorn_eps": 0.01}, grad="implicit")
    assert (C.max() - C.min()) / cfg.sinkhorn_eps > kj.LOWP_RANGE  # so Kg leaves the float32 range
    assert _lean_status(p0, E, C, K, cfg) == kj.RETRY_F64
    _assert_same_as_all_paths(p0, E, C, K, cfg)


@pytest.mark.parametrize("grad", ["unrolled", "implicit"])
def test_scaled_underflow_reruns_with_the_fallback_kernel(grad):
    # item 0 far from every item, itself included (its whole row of C >= 3): with a small eps its
    # row of exp(-(C - min C)/eps) underflows float64, so the lean kernel (no log form / no
    # converged-plan fallback compiled in) asks for a rerun, and the rerun equals the all-paths kernel
    from jkofast.kernels.jko import solver as kj

    p0, E, C, K = toy()
    C = C.copy()
    C[0, :] += 3.0
    C[:, 0] += 3.0
    cfg = JKOConfig(**{**SMALL, "sinkhorn_eps": 1e-3}, grad=grad)
    assert _lean_status(p0, E, C, K, cfg, f64=True) == kj.RETRY_FALLBACK
    _assert_same_as_all_paths(p0, E, C, K, cfg)


def test_batch_reruns_only_the_pools_that_ask_for_it():
    # pool 0: one tight cluster (Kg within float32 range), pool 1: three spread clusters (outside):
    # the batch runs pool 0 on float32 operators and reruns pool 1 with float64 ones
    from jkofast.jko.solver import initial_distribution, pool_geometry, rerank_batch

    rng = np.random.default_rng(3)
    tight = np.ones((6, 8)) + 0.05 * rng.normal(size=(6, 8))
    spread = rng.normal(size=(9, 8))
    Z = np.concatenate([tight, spread])
    off = np.array([0, 6, 15], np.int64)
    E = rng.normal(size=15)
    cfg = JKOConfig(**{**SMALL, "sinkhorn_eps": 0.02}, grad="implicit")
    res = rerank_batch(E, None, off, embeddings=Z, config=cfg, return_duals=True, n_threads=2)
    assert_array_equal(res.status, 0)
    spans = []
    for q in range(2):
        lo, hi = off[q], off[q + 1]
        C, K = pool_geometry(embeddings=Z[lo:hi])
        spans.append((C.max() - C.min()) / cfg.sinkhorn_eps)
        st, p, _, f, g = _all_paths(initial_distribution(E[lo:hi], cfg.tau0), E[lo:hi], C, K, cfg, True)
        assert st == 0
        # the batch builds C, K from the rows in-kernel (K not symmetrised): equal to rounding
        assert_allclose(res.pool(q), p, rtol=1e-12, atol=1e-15)
        assert_allclose(res.f[lo:hi], f, rtol=1e-12, atol=1e-12)
        assert_allclose(res.g[lo:hi], g, rtol=1e-12, atol=1e-12)
    from jkofast.kernels.jko import solver as kj

    assert spans[0] <= kj.LOWP_RANGE < spans[1]  # one pool of each kind


def test_a_call_compiles_only_the_kernels_of_its_path():
    # a fresh interpreter, the flow's cache switched off (so its compile types every kernel it calls; those
    # may load from the session's cache): the drop-in's unrolled call must not reach the implicit,
    # converged-plan, log-form or dual read-out kernels
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from numba.core.caching import NullCache\n"
        "from jkofast.jko.solver import JKOConfig, run_jko, pool_geometry\n"
        "from jkofast.kernels.jko import solver as kj\n"
        "from jkofast.kernels.ot import transport as t, sinkhorn_log as s\n"
        "C, K = pool_geometry(embeddings=np.eye(3) + 0.1)\n"
        "kj.jko_flow._cache = NullCache()\n"
        "run_jko(np.full(3, 1 / 3), [-1.0, 0.0, 0.5], C, K, JKOConfig(T=1, inner_steps=2))\n"
        "assert kj.jko_flow.signatures and t.w_unrolled_scaled.signatures\n"
        "for k in (t.w_converged, t.w_implicit_counted, t.w_unrolled_log, s.sinkhorn_log_solve):\n"
        "    assert not k.signatures, k\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    ("entry", "batch", "part"),
    [
        ("jko.flow", "WARMUPS['jko']()", "jko_flow"),  # jkofast run's rerank paths
        ("jko.rows", "WARMUPS['jko']()", "cost_kernel"),  # jkofast rerank's child: the pool geometry
        (
            "jko.flow.duals",  # jkofast study dual-rank's
            "import numpy as np\n"
            "from jkofast.jko.solver import operating_point, rerank_batch\n"
            "cfg = operating_point('contrib', mode='wasserstein', grad='implicit', T=1, inner_steps=2)\n"
            "Z = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], np.float32)\n"
            "E, p0, off = np.zeros(3), np.full(3, 1 / 3), np.array([0, 3])\n"
            "rerank_batch(E, p0, off, embeddings=Z, config=cfg, return_duals=True)\n",
            "jko_flow",
        ),
    ],
)
def test_the_part_warmed_ahead_is_the_one_the_batch_kernel_calls(entry, batch, part):
    # a compile-ahead child compiles a part of a rerank (the flow, the geometry) while the command compiles the
    # rest; a part of other argument types would be compiled twice. In a fresh interpreter, rerank_pools is
    # compiled (its cache switched off, so its call types the part it needs): the part keeps the one signature
    # the entry gave it.
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json\n"
        "from numba.core.caching import NullCache\n"
        "import jkofast.jko.solver  # registers the warm-ups\n"
        "from jkofast._numba import WARMUPS\n"
        "from jkofast.kernels.jko import solver as k\n"
        f"WARMUPS[{entry!r}]()\n"
        "from jkofast.kernels.jko import geometry as g\n"
        f"part = getattr(k, {part!r}, None) or getattr(g, {part!r})\n"
        "before = set(map(str, part.signatures))\n"
        "k.rerank_pools._cache = NullCache()\n"
        f"{batch}\n"
        "assert k.rerank_pools.signatures and before\n"
        "print(json.dumps(sorted(set(map(str, part.signatures)) - before)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_rerank_warm_up_compiles_the_flow_while_a_child_compiles_the_energy_and_geometry(monkeypatch):
    # jkofast rerank (no --multires): the child takes the energy and the pool geometry; this process
    # compiles the flow first, then waits for the child, then compiles the batch kernel, then loads the energy
    from rerank_helpers import warm_up_order

    from jkofast.jko import solver

    patches = {"_warmup_flow": lambda events: events.append("flow")}
    asked, events = warm_up_order(monkeypatch, solver, "_rows_ahead", patches)
    assert asked == [(("energy", "jko.rows"), ["energy", "jko.rows"])]
    assert events == ["flow", "wait", "jko", "energy", "close"]
