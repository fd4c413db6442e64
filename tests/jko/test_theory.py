"""Theory building blocks (jkofast.jko.theory): F(p), wc, trajectories, Laplacian bands, directions, radius."""

import numpy as np
import pytest
import reference_theory as ref
from numpy.testing import assert_allclose, assert_array_equal

from jkofast.jko.solver import JKOConfig, jko_step, pool_geometry, rerank_batch, run_jko
from jkofast.jko.theory import (
    RADIUS_GRID,
    TheoryBatch,
    band_direction,
    band_edges,
    certified_radius,
    free_energy,
    gibbs_laplacian,
    topk_preserved,
    wc,
)

SMALL = dict(h=0.5, lam=0.05, rho=0.05, sinkhorn_eps=0.1, inner_steps=5)


def pools(seed=0, sizes=(6, 9)):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(sum(sizes), 5)).astype(np.float32)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    E = -rng.uniform(size=sum(sizes))
    p0 = np.exp(-E / 0.3)
    return Z, off, E, p0


# ---------------------------------------------------------------------------------------------
# F(p) and wc
# ---------------------------------------------------------------------------------------------
def test_free_energy_hand_worked():
    # <p,E> = -0.5; 0.05 * log(1/2) = -0.034657...; ½·0.05·pᵀIp = 0.0125
    assert free_energy([0.5, 0.5], [-1.0, 0.0], np.eye(2)) == pytest.approx(-0.5 + 0.05 * np.log(0.5) + 0.0125)
    # a zero entry is clipped at 1e-30: 1e-30 * log(1e-30) contributes ~ -6.9e-29, not NaN
    assert free_energy([1.0, 0.0], [0.0, 0.0], np.zeros((2, 2))) == pytest.approx(0.0, abs=1e-27)


def test_free_energy_batch_matches_oracle():
    Z, off, E, p0 = pools()
    b = TheoryBatch.from_embeddings(Z, off, n_threads=1)
    rng = np.random.default_rng(1)
    P = rng.uniform(size=(3, off[-1]))
    F = b.free_energy(P, E, [0, 1], 0.07, 0.2)
    for s in range(3):
        for q in range(2):
            sl = slice(off[q], off[q + 1])
            assert F[s, q] == pytest.approx(ref.free_energy(P[s, sl], E[sl], b.kernel(q), 0.07, 0.2), rel=1e-13)


def test_wc_matches_oracle_and_is_biased():
    Z, off, _, _ = pools()
    C, _ = pool_geometry(embeddings=Z[: off[1]])
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(6))
    q = rng.dirichlet(np.ones(6))
    assert wc(p, q, C) == pytest.approx(ref.wc(p, q, C), rel=1e-10)
    # the self-distance floor: wc(p, p) > 0
    assert wc(p, p, C) > 1e-4
    # hand-worked: two points at cost 1 apart, 0.4 of the mass must move
    assert wc([0.5, 0.5], [0.9, 0.1], [[0.0, 1.0], [1.0, 0.0]]) == pytest.approx(0.4, abs=1e-6)


def test_wc_clips_without_renormalising():
    Z, off, _, _ = pools()
    C, _ = pool_geometry(embeddings=Z[: off[1]])
    p = np.array([0.5, 0.5, 0.0, 0.0, 0.0, 0.0])  # zeros -> 1e-12, total mass not renormalised
    q = np.array([0.2, 0.2, 0.2, 0.2, 0.2, 1e-20])
    assert wc(p, q, C) == pytest.approx(ref.wc(p, q, C), rel=1e-10)
    assert wc(2 * p, 2 * q, C) == pytest.approx(ref.wc(2 * p, 2 * q, C), rel=1e-10)  # mass 2 kept as given


def test_wc_batch_pairs_states_and_items():
    Z, off, _, _ = pools()
    b = TheoryBatch.from_embeddings(Z, off, n_threads=2)
    rng = np.random.default_rng(3)
    po = np.array([1, 0, 1])
    ioff = b.items(po)
    P = rng.uniform(size=(2, ioff[-1]))
    Q = rng.uniform(size=(2, ioff[-1]))
    W = b.wc(P, Q, po, n_iter=30)
    for s in range(2):
        for k, q in enumerate(po):
            sl = slice(ioff[k], ioff[k + 1])
            assert W[s, k] == pytest.approx(ref.wc(P[s, sl], Q[s, sl], b.cost(q), 0.1, 30), rel=1e-10)


# ---------------------------------------------------------------------------------------------
# Geometry and trajectories
# ---------------------------------------------------------------------------------------------
def test_geometry_blocks_are_the_solver_geometry():
    Z, off, _, _ = pools()
    b = TheoryBatch.from_embeddings(Z, off)
    for q in range(2):
        C, K = pool_geometry(embeddings=Z[off[q] : off[q + 1]])
        assert_array_equal(b.cost(q), C)
        assert_array_equal(b.kernel(q), K)


@pytest.mark.parametrize("mode", ["wasserstein", "kl"])
def test_trajectory_steps_reproduce_run_jko_bitwise(mode):
    Z, off, E, p0 = pools()
    b = TheoryBatch.from_embeddings(Z, off, n_threads=2)
    cfg = JKOConfig(mode=mode, T=3, **SMALL)
    po = np.array([0, 1, 1])
    ioff = b.items(po)
    EE = np.concatenate([E[: off[1]], E[off[1] :], 0.5 * E[off[1] :]])
    PP = np.concatenate([p0[: off[1]], p0[off[1] :], p0[off[1] :]])
    P = b.trajectories(EE, PP, po, cfg, 3)
    assert P.shape == (4, ioff[-1])
    for k, q in enumerate(po):
        sl = slice(ioff[k], ioff[k + 1])
        C, K = b.cost(q), b.kernel(q)
        # T single steps (fresh Adam per outer step) are the T-step run, to the bit
        assert_array_equal(P[3, sl], run_jko(PP[sl], EE[sl], C, K, cfg))
        # each state is one step from the previous one (jko_step renormalises its input: last-bit rounding)
        for t in range(3):
            assert_allclose(P[t + 1, sl], jko_step(P[t, sl], EE[sl], C, K, cfg), rtol=1e-12, atol=1e-15)
    # and the batched reranker gives the same p_T
    Zi = np.concatenate([Z[off[q] : off[q + 1]] for q in po])
    assert_array_equal(P[3], rerank_batch(EE, PP, ioff, embeddings=Zi, config=cfg).p)


def test_trajectories_thread_invariant():
    Z, off, E, p0 = pools()
    cfg = JKOConfig(T=2, **SMALL)
    out = [TheoryBatch.from_embeddings(Z, off, n_threads=n).trajectories(E, p0, [0, 1], cfg, 2) for n in (1, 2)]
    assert_array_equal(out[0], out[1])


def test_trajectories_t0_is_renormalised_p0():
    Z, off, E, p0 = pools()
    b = TheoryBatch.from_embeddings(Z, off)
    P = b.trajectories(E, p0, [0, 1], JKOConfig(**SMALL), 0)
    assert P.shape == (1, off[-1])
    assert_allclose(P[0, : off[1]], p0[: off[1]] / p0[: off[1]].sum())


# ---------------------------------------------------------------------------------------------
# Laplacian, bands, directions
# ---------------------------------------------------------------------------------------------
def test_laplacian_two_points_hand_worked():
    # Γ = [[0, e], [e, 0]], D = e I  ->  L = [[1, -1], [-1, 1]], eigenvalues 0 and 2
    ev, U = gibbs_laplacian([[0.0, 0.3], [0.3, 0.0]])
    assert_allclose(ev, [0.0, 2.0], atol=1e-12)
    assert_allclose(np.abs(U[:, 0]), [2**-0.5, 2**-0.5])


def test_laplacian_matches_oracle_and_floors_degrees():
    Z, off, _, _ = pools()
    C, _ = pool_geometry(embeddings=Z[: off[1]])
    C[5, :5] = C[:5, 5] = 50.0  # an isolated point: exp(-500) underflows, degree floored at 1e-12
    ev, U = gibbs_laplacian(C)
    L = ref.gibbs_laplacian_matrix(C)
    assert_allclose(U @ np.diag(ev) @ U.T, L, atol=1e-12)
    assert_allclose(U.T @ U, np.eye(6), atol=1e-12)
    assert np.all(np.diff(ev) >= 0) and ev[0] > -1e-12 and ev[-1] < 2 + 1e-12
    assert np.isfinite(ev).all()


def test_band_edges():
    assert band_edges(200, 4).tolist() == [0, 50, 100, 150, 200]
    assert band_edges(10, 3).tolist() == [0, 3, 6, 10]  # floor(linspace(0, 10, 4)) = 0, 3.33, 6.67, 10
    with pytest.raises(ValueError, match="n_bands"):
        band_edges(10, 0)


def test_band_direction_draws_and_normalises():
    Z, off, _, _ = pools()
    _, U = gibbs_laplacian(pool_geometry(embeddings=Z[off[1] :])[0])
    rng = np.random.default_rng(0)
    v1 = band_direction(U, 3, 7, rng)
    v2 = band_direction(U, 0, 9, rng)
    check = np.random.default_rng(0)
    for v, (lo, hi) in ((v1, (3, 7)), (v2, (0, 9))):
        x = U[:, lo:hi] @ check.standard_normal(hi - lo)  # the generator is consumed in call order
        x -= x.mean()
        assert v.dtype == np.float32
        assert_allclose(v, x / np.linalg.norm(x), rtol=1e-6, atol=1e-7)
        assert abs(float(v.astype(np.float64).sum())) < 1e-6
        assert float(np.linalg.norm(v.astype(np.float64))) == pytest.approx(1.0, abs=1e-6)


def test_band_direction_zero_when_constant():
    U = np.full((4, 1), 0.5)  # a constant column: nothing left after subtracting the mean
    v = band_direction(U, 0, 1, np.random.default_rng(0))
    assert v.dtype == np.float32 and not v.any()


def test_band_direction_bad_input():
    U = np.eye(4)
    with pytest.raises(ValueError, match="hi"):
        band_direction(U, 2, 6, np.random.default_rng(0))
    with pytest.raises(ValueError, match="hi"):
        band_direction(U, 2, 2, np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        band_direction(U, 0, 2, 0)


# ---------------------------------------------------------------------------------------------
# Radius rule and preservation
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("preserved", "expected"),
    [
        ([1, 0.9, 1, 1, 1, 1, 1, 1], 0.0),  # breaks at s = 0.1
        ([1, 1, 1, 1, 1, 1, 1, 1], 1.5),  # never breaks
        ([1, 1, 1, 1, 0.8, 1, 1, 1], 0.3),  # breaks at 0.5; later recovery does not count
        ([1, 1, 1, 1, 1, 1, 1, 0.9], 1.0),
    ],
)
def test_certified_radius_rule(preserved, expected):
    assert certified_radius(preserved) == expected
    assert ref.radius(preserved, RADIUS_GRID) == expected


def test_certified_radius_bad_input():
    with pytest.raises(ValueError, match="one entry per grid"):
        certified_radius([1, 1])
    with pytest.raises(ValueError, match="ascending"):
        certified_radius([1, 1, 1], grid=[0.0, 0.2, 0.1])


def test_topk_preserved():
    p = np.array([0.5, 0.2, 0.1, 0.15, 0.05])
    q = np.array([0.1, 0.2, 0.5, 0.15, 0.05])
    assert topk_preserved(p, q, 2) == 0.5  # {0, 1} vs {2, 1}
    assert topk_preserved(p, p, 3) == 1.0


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------
def test_batch_bad_input():
    Z, off, E, p0 = pools()
    b = TheoryBatch.from_embeddings(Z, off)
    with pytest.raises(ValueError, match="pool_of"):
        b.free_energy(p0, E, [0, 2], 0.05, 0.05)
    with pytest.raises(TypeError, match="pool_of"):
        b.wc(p0, p0, [0.0, 1.0])
    with pytest.raises(ValueError, match="E must have"):
        b.trajectories(E[:-1], p0, [0, 1], JKOConfig(**SMALL), 1)
    with pytest.raises(ValueError, match="p0 must be non-negative"):
        b.trajectories(E, -p0, [0, 1], JKOConfig(**SMALL), 1)
    with pytest.raises(ValueError, match="P must have shape"):
        b.free_energy(p0[:-1], E, [0, 1], 0.05, 0.05)
    with pytest.raises(ValueError, match="eps"):
        b.wc(p0, p0, [0, 1], eps=0.0)
    with pytest.raises(ValueError, match="same number of states"):
        b.wc(np.stack([p0, p0]), p0, [0, 1])
    with pytest.raises(ValueError, match="empty pool"):
        TheoryBatch.from_embeddings(Z, [0, 0, off[-1]])
    with pytest.raises(ValueError, match="NaN"):
        TheoryBatch.from_embeddings(np.full((3, 2), np.nan), [0, 3])
    with pytest.raises(ValueError, match="square"):
        wc([0.5, 0.5], [0.5, 0.5], np.zeros((2, 3)))


def test_free_energy_and_wc_thread_invariant():
    Z, off, E, p0 = pools()
    rng = np.random.default_rng(4)
    P = rng.uniform(size=(3, off[-1]))
    out = []
    for n in (1, 2):
        b = TheoryBatch.from_embeddings(Z, off, n_threads=n)
        out.append((b.free_energy(P, E, [0, 1], 0.05, 0.05), b.wc(P, P[::-1], [0, 1], n_iter=10)))
    assert_array_equal(out[0][0], out[1][0])
    assert_array_equal(out[0][1], out[1][1])
