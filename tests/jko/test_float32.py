"""The float32 parity path (``dtype="float32"``): float32 Gibbs operators on the unrolled path.

Parity with the published solver on the 30 fixture pools is in ``test_parity.py``
(``test_float32_path_*``). Here: the float32 transport kernel against a NumPy oracle of the same
algorithm, agreement with the float64 path and the naive float64 loop, the float64 reruns
(outside the float32 range), batch = single pool, thread invariance, bad input.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast.jko.solver import JKOConfig, operating_point, pool_geometry, rerank_batch, run_jko, run_jko_with_duals


def pool(m=12, d=8, seed=0, spread=0.3):
    """Three clusters of unit vectors (cosine geometry), energies with a preferred cluster."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d))
    Z = np.repeat(centres, m // 3, axis=0) + spread * rng.normal(size=(m, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    C, K = pool_geometry(embeddings=Z)
    E = rng.normal(size=m)
    E[: m // 3] -= 1.0
    p0 = np.exp(-E)
    return Z, p0 / p0.sum(), E, C, K


SMALL = dict(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=2, inner_steps=6, tau0=1.0)


def _unrolled_oracle(p, q, C, eps, n_warm, n_grad, dtype):
    """NumPy twin of ``w_unrolled32``: scaled pairs with matvecs in ``dtype``, the rest float64.

    Returns ``(loss, abar)`` by the hand-written adjoint of the last ``n_grad`` pairs.
    """
    Kg = np.exp(-(C - C.min()) / eps)
    K32, KC32 = Kg.astype(dtype), (Kg * C).astype(dtype)

    def mv(A, x):
        return (A @ x.astype(dtype)).astype(np.float64)

    v = np.ones(p.size)
    U, S, V, TT = [], [], [], []
    for it in range(n_warm + n_grad):
        s = mv(K32, v)
        u = p / s
        u /= u.max()
        t = mv(K32.T, u)
        if it >= n_warm:
            U.append(u), S.append(s), V.append(v), TT.append(t)
        v = q / t
        v /= v.max()
    y = q / t
    r = u * mv(KC32, y)
    fbar = r / eps
    gbar = y * mv(KC32.T, u) / eps
    abar = np.zeros(p.size)
    for k in range(n_grad - 1, -1, -1):
        fbar = fbar - U[k] * mv(K32, gbar / TT[k])
        abar += eps * fbar
        gbar = -V[k] * mv(K32.T, fbar / S[k])
        fbar = np.zeros(p.size)
    return r.sum(), abar


def test_float32_kernel_matches_its_numpy_oracle():
    from jkofast.kernels.jko import solver as kj
    from jkofast.kernels.ot.sinkhorn_log import GibbsCost, SinkhornWork, gibbs_kernel
    from jkofast.kernels.ot.transport import Tracked
    from jkofast.kernels.ot.unrolled32 import w_unrolled32

    _, p, _, C, _ = pool()
    m, eps, n_warm, n_grad = p.size, 0.2, 7, 3
    q = np.linspace(1.0, 2.0, m)
    q /= q.sum()
    Kg = np.empty((m, m))
    cmin = gibbs_kernel(C, eps, Kg)
    KC = Kg * C
    ops, _ = kj._operators32(Kg, KC, np.zeros((m, m)), m, True, False)
    v = np.empty((8, m))
    sk = SinkhornWork(p.copy(), v[1], v[2], v[3], q.copy(), v[5], v[6], v[7])
    tr = Tracked(*(np.empty((n_grad, m)) for _ in range(4)), np.empty((n_grad + 1, m)))
    abar = np.empty(m)
    ok, loss = w_unrolled32(ops, GibbsCost(C, C, Kg, cmin, eps).eps, n_warm, n_grad, tr, sk, np.empty((8, m)), abar)
    loss_ref, abar_ref = _unrolled_oracle(p, q, C, eps, n_warm, n_grad, np.float32)
    assert ok
    # float32 sums in another order than NumPy's: agreement to float32 rounding
    assert loss == pytest.approx(loss_ref, rel=2e-6)
    assert_allclose(abar, abar_ref, rtol=2e-5, atol=2e-6 * np.abs(abar_ref).max())
    # and the oracle itself is the float64 algorithm up to float32 rounding
    loss64, abar64 = _unrolled_oracle(p, q, C, eps, n_warm, n_grad, np.float64)
    assert loss_ref == pytest.approx(loss64, rel=1e-5)
    assert_allclose(abar_ref, abar64, rtol=1e-3, atol=1e-4 * np.abs(abar64).max())


@pytest.mark.parametrize("mode", ["wasserstein", "bregman"])
def test_float32_agrees_with_float64_and_the_naive_loop(mode):
    _, p0, E, C, K = pool()
    cfg = JKOConfig(**SMALL, mode=mode)
    p64, l64 = run_jko(p0, E, C, K, cfg, return_losses=True)
    p32, l32 = run_jko(p0, E, C, K, cfg.replace(dtype="float32"), return_losses=True)
    p_ref, _ = ref.jko_naive(p0, E, C, K, h=2.0, lam=0.1, rho=0.05, eps=0.2, T=2, inner=6, mode=mode, alpha=0.5)
    assert p32.dtype == np.float64 and p32.sum() == pytest.approx(1.0, abs=1e-12)
    assert not np.array_equal(p32, p64)  # another computation ...
    assert np.abs(p32 - p64).sum() <= 1e-4  # ... to float32 rounding
    assert np.abs(p32 - p_ref).sum() <= 1e-4
    assert_allclose(l32, l64, rtol=1e-5)
    assert np.argsort(-p32, kind="stable")[:4].tolist() == np.argsort(-p64, kind="stable")[:4].tolist()


def test_float32_duals_agree_with_float64():
    _, p0, E, C, K = pool()
    cfg = JKOConfig(**SMALL)
    p64, f64, g64 = run_jko_with_duals(p0, E, C, K, cfg)
    p32, f32, g32 = run_jko_with_duals(p0, E, C, K, cfg.replace(dtype="float32"))
    assert_allclose(p32, p64, atol=1e-5)
    assert_allclose(f32, f64, atol=1e-4)
    assert_allclose(g32, g64, atol=1e-4)


def test_pool_outside_the_float32_range_runs_in_float64():
    # (max C - min C)/eps > 60: Kg entries below the float32 range; the pool runs exactly the float64 path
    _, p0, E, C, K = pool(spread=1.0)
    cfg = JKOConfig(**{**SMALL, "sinkhorn_eps": 0.02})
    assert (C.max() - C.min()) / 0.02 > 60
    p64, l64 = run_jko(p0, E, C, K, cfg, return_losses=True)
    p32, l32 = run_jko(p0, E, C, K, cfg.replace(dtype="float32"), return_losses=True)
    assert_array_equal(p32, p64)
    assert_array_equal(l32, l64)


def test_other_paths_ignore_dtype():
    _, p0, E, C, K = pool()
    for kw in ({"grad": "implicit"}, {"objective": "entropic"}, {"mode": "kl"}):
        cfg = JKOConfig(**SMALL, **kw)
        assert_array_equal(run_jko(p0, E, C, K, cfg.replace(dtype="float32")), run_jko(p0, E, C, K, cfg))


@pytest.mark.parametrize("sparse", [False, True])
def test_batch_equals_single_pool_and_is_thread_invariant(sparse):
    import scipy.sparse as sp

    parts = [pool(m=m, seed=s) for m, s in ((9, 1), (12, 2), (6, 3))]
    Z = np.concatenate([p[0] for p in parts])
    E = np.concatenate([p[2] for p in parts])
    off = np.array([0, 9, 21, 27], np.int64)
    cfg = operating_point("tuned", T=2, inner_steps=5, dtype="float32")
    rows = {"csr": sp.csr_matrix(Z)} if sparse else {"embeddings": Z}
    r1 = rerank_batch(E, None, off, config=cfg, return_duals=True, n_threads=1, **rows)
    r2 = rerank_batch(E, None, off, config=cfg, return_duals=True, n_threads=2, **rows)
    assert_array_equal(r1.status, 0)
    assert_array_equal(r1.p, r2.p)
    assert_array_equal(r1.f, r2.f)
    from jkofast.jko.solver import initial_distribution

    for q in range(3):
        lo, hi = off[q], off[q + 1]
        C, K = pool_geometry(**({"csr": rows["csr"][lo:hi]} if sparse else {"embeddings": rows["embeddings"][lo:hi]}))
        p, f, g = run_jko_with_duals(initial_distribution(E[lo:hi], cfg.tau0), E[lo:hi], C, K, cfg)
        # The batch driver and the single-pool driver are separate compiled units: with Numba 0.68 one
        # pool's float64 read-out differs in the last bits between them (1 ulp of p, ~1e-15 of f);
        # the batch is bit-identical across thread counts (above).
        assert_allclose(r1.pool(q), p, rtol=1e-14, atol=0)
        assert_allclose(r1.f[lo:hi], f, rtol=1e-13, atol=1e-15)


def test_dtype_option_forms_and_bad_values():
    assert JKOConfig(dtype=np.float32).validate().dtype == "float32"
    assert JKOConfig(dtype=np.dtype("float64")).validate().dtype == "float64"
    assert operating_point("tuned", dtype="float32").dtype == "float32"
    for bad in ("float16", "int64", "double32"):
        with pytest.raises(ValueError, match="dtype"):
            JKOConfig(dtype=bad).validate()
    with pytest.raises(TypeError, match="dtype"):
        JKOConfig(dtype=3.5).validate()
    _, p0, E, C, K = pool()
    with pytest.raises(ValueError, match="dtype"):
        run_jko(p0, E, C, K, JKOConfig(dtype="half"))
    with pytest.raises(ValueError, match="dtype"):
        rerank_batch(E, None, np.array([0, E.size]), embeddings=pool()[0], config=JKOConfig(dtype="float16"))


def test_bad_pool_input_is_still_rejected_on_the_float32_path():
    _, p0, E, C, K = pool()
    cfg = JKOConfig(**SMALL, dtype="float32")
    E_bad = E.copy()
    E_bad[2] = np.nan
    with pytest.raises(ValueError, match="E"):
        run_jko(p0, E_bad, C, K, cfg)
    with pytest.raises(ValueError, match="C"):
        run_jko(p0, E, C[:, :-1], K, cfg)
    # a batch with one bad query reports it and keeps the others
    Z = np.concatenate([pool(seed=1)[0], pool(seed=2)[0]])
    En = np.concatenate([E, E_bad])
    res = rerank_batch(En, None, np.array([0, 12, 24]), embeddings=Z, config=cfg, n_threads=1)
    assert res.status[0] == 0 and res.status[1] != 0 and 1 in res.errors
    assert np.isfinite(res.pool(0)).all() and np.isnan(res.pool(1)).all()
