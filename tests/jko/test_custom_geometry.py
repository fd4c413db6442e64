"""rerank_batch with custom geometry: a projected cost (NM-JKO, SPEC A.6.2) and user cost/kernel blocks."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast import numba_threads
from jkofast.jko.solver import JKOConfig, pool_geometry, rerank_batch, run_jko
from jkofast.kernels.jko.geometry import projected_cost

CFG = JKOConfig(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=2, inner_steps=5, tau0=1.0)
SIZES = [6, 1, 9, 4, 7]


def batch(sizes=SIZES, d=5, seed=0):
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    Z = rng.normal(size=(n, d)).astype(np.float32)
    return -rng.random(n), rng.random(n) + 0.05, off, Z


def projected_cost_naive(Z, W):
    """C^W by the published recipe: rows Z Wᵀ, norms clamped at 1e-8, cos clipped to [-1, 1]."""
    Y = np.asarray(Z, np.float64) @ np.asarray(W, np.float64).T
    Y = Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-8)
    return (1.0 - np.clip(Y @ Y.T, -1.0, 1.0)) ** 2


def test_projected_cost_kernel_matches_oracle():
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(7, 5))
    W = rng.normal(size=(3, 5))
    W[1] = 0.0
    C = np.empty((4, 4))
    projected_cost(Z, W, 2, 6, C)
    assert_allclose(C, projected_cost_naive(Z[2:6], W), atol=1e-12)
    assert_array_equal(C, C.T)
    Wz = np.zeros((2, 5))  # every projected row is 0: norms floored, cos 0, C = 1 everywhere
    projected_cost(Z, Wz, 0, 4, C)
    assert_array_equal(C, np.ones((4, 4)))


def test_projection_equals_per_query_run_jko_with_projected_cost():
    E, p0, off, Z = batch()
    W = np.random.default_rng(2).normal(size=(3, Z.shape[1]))
    res = rerank_batch(E, p0, off, embeddings=Z, projection=W, config=CFG)
    assert not res.status.any()
    for q in range(len(SIZES)):
        lo, hi = off[q], off[q + 1]
        _, K = pool_geometry(embeddings=Z[lo:hi])  # K stays on the raw cosine
        C = projected_cost_naive(Z[lo:hi], W)
        p = run_jko(p0[lo:hi], E[lo:hi], C, K, CFG)
        assert_allclose(res.pool(q), p, atol=1e-9, rtol=0)


def test_identity_projection_is_the_cosine_geometry():
    E, p0, off, Z = batch()
    plain = rerank_batch(E, p0, off, embeddings=Z, config=CFG)
    proj = rerank_batch(E, p0, off, embeddings=Z, projection=np.eye(Z.shape[1]), config=CFG)
    assert_allclose(proj.p, plain.p, atol=1e-9, rtol=0)


def test_projection_changes_the_result():
    E, p0, off, Z = batch()
    plain = rerank_batch(E, p0, off, embeddings=Z, config=CFG)
    W = np.random.default_rng(3).normal(size=(2, Z.shape[1]))
    proj = rerank_batch(E, p0, off, embeddings=Z, projection=W, config=CFG)
    assert np.abs(proj.p - plain.p).max() > 1e-6


@pytest.mark.parametrize("form", ["list", "flat"])
def test_user_blocks_equal_the_rows_geometry(form):
    E, p0, off, Z = batch()
    Cs, Ks = zip(*(pool_geometry(embeddings=Z[off[q] : off[q + 1]]) for q in range(len(SIZES))), strict=True)
    if form == "flat":
        Cs = np.concatenate([c.ravel() for c in Cs])
        Ks = np.concatenate([k.ravel() for k in Ks])
    plain = rerank_batch(E, p0, off, embeddings=Z, config=CFG)
    blocks = rerank_batch(E, p0, off, cost_blocks=list(Cs) if form == "list" else Cs, kernel_blocks=Ks, config=CFG)
    assert_array_equal(blocks.p, plain.p)


def test_cost_block_only_keeps_the_rows_kernel():
    E, p0, off, Z = batch()
    rng = np.random.default_rng(4)
    Cs = []
    for m in SIZES:
        A = rng.random((m, m)) * 4
        Cs.append(np.triu(A) + np.triu(A, 1).T)  # symmetric, like the ablations' random_C
    res = rerank_batch(E, p0, off, embeddings=Z, cost_blocks=Cs, config=CFG)
    for q in range(len(SIZES)):
        lo, hi = off[q], off[q + 1]
        _, K = pool_geometry(embeddings=Z[lo:hi])
        assert_array_equal(res.pool(q), run_jko(p0[lo:hi], E[lo:hi], Cs[q], K, CFG))


def test_kernel_blocks_are_symmetrised_and_csr_rows_give_the_cost():
    E, p0, off, _ = batch()
    X = sp.random(int(off[-1]), 20, density=0.4, random_state=0, format="csr")
    X.data += 0.1
    rng = np.random.default_rng(5)
    Ks = [rng.random((m, m)) for m in SIZES]
    res = rerank_batch(E, p0, off, csr=X, kernel_blocks=Ks, config=CFG)
    sym = rerank_batch(E, p0, off, csr=X, kernel_blocks=[0.5 * (k + k.T) for k in Ks], config=CFG)
    assert_array_equal(res.p, sym.p)
    q = 2
    lo, hi = off[q], off[q + 1]
    C, _ = ref.geometry_csr_naive(X[lo:hi])
    assert_allclose(res.pool(q), run_jko(p0[lo:hi], E[lo:hi], C, Ks[q], CFG), atol=1e-9, rtol=0)


def test_bad_blocks_reject_only_their_pool():
    E, p0, off, Z = batch()
    Cs = [pool_geometry(embeddings=Z[off[q] : off[q + 1]])[0] for q in range(len(SIZES))]
    Cs[0] = Cs[0][:, :-1]  # not square
    Cs[2] = Cs[2].copy()
    Cs[2][0, 1] = np.nan
    Cs[3] = Cs[3] + np.triu(np.ones_like(Cs[3]), 1)  # not symmetric
    res = rerank_batch(E, p0, off, embeddings=Z, cost_blocks=Cs, config=CFG)
    assert list(np.flatnonzero(res.status)) == [0, 2, 3]
    assert "cost_blocks[0]" in res.errors[0] and "square" in res.errors[0]
    assert "NaN" in res.errors[2] and "symmetric" in res.errors[3]
    assert np.isnan(res.pool(0)).all()
    lo, hi = off[4], off[5]
    K = pool_geometry(embeddings=Z[lo:hi])[1]
    assert_array_equal(res.pool(4), run_jko(p0[lo:hi], E[lo:hi], Cs[4], K, CFG))


def test_bad_custom_geometry_arguments():
    E, p0, off, Z = batch()
    with pytest.raises(ValueError, match="projection must have shape"):
        rerank_batch(E, p0, off, embeddings=Z, projection=np.eye(3), config=CFG)
    with pytest.raises(ValueError, match="projection"):
        rerank_batch(E, p0, off, embeddings=Z, projection=np.full((2, 5), np.nan), config=CFG)
    with pytest.raises(ValueError, match="projection needs dense"):
        rerank_batch(E, p0, off, csr=sp.csr_matrix(Z.astype(np.float64)), projection=np.eye(5), config=CFG)
    with pytest.raises(ValueError, match="cost_blocks and kernel_blocks"):
        rerank_batch(E, p0, off, cost_blocks=[np.zeros((m, m)) for m in SIZES], config=CFG)
    with pytest.raises(ValueError, match="one M x M block per pool"):
        rerank_batch(E, p0, off, embeddings=Z, cost_blocks=np.zeros(5), config=CFG)
    with pytest.raises(ValueError, match="one block per pool"):
        rerank_batch(E, p0, off, embeddings=Z, cost_blocks=[np.zeros((6, 6))], config=CFG)
    with pytest.raises(TypeError, match="cost_blocks"):
        rerank_batch(E, p0, off, embeddings=Z, cost_blocks="C.npy", config=CFG)


def test_projection_thread_count_invariant():
    E, p0, off, Z = batch(sizes=[8, 5, 9, 6, 7, 4])
    W = np.random.default_rng(6).normal(size=(4, Z.shape[1]))
    with numba_threads(1):
        a = rerank_batch(E, p0, off, embeddings=Z, projection=W, config=CFG, n_threads=1)
    b = rerank_batch(E, p0, off, embeddings=Z, projection=W, config=CFG, n_threads=2)
    assert_array_equal(a.p, b.p)
