"""Clustering kernels of MR-JKO / SAM-JKO (SPEC A.6.3 step 2) against the naive oracles."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast.jko.multires import cluster_rows, initial_rows
from jkofast.kernels.jko import cluster as kc


def _blobs(n_per, centres, spread, seed):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, 6))
    Z = np.repeat(c, n_per, axis=0) + spread * rng.normal(size=(centres * n_per, 6))
    Z = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    return Z.astype(np.float32).astype(np.float64), rng.random(centres * n_per)


def _run(kind, X, rel, beta, init, n_iter=30):
    # float32 rows, as multires_rerank clusters them (the oracles get the same values in float64)
    X = np.asarray(X, np.float32)
    assign = np.empty(X.shape[0], np.int64)
    cent = np.empty((init.shape[0], X.shape[1]))
    if kind == "sam":
        n = kc.sam_kmeans(X, rel, beta, init, n_iter, assign, cent)
    else:
        n = kc.spherical_kmeans(X, init, n_iter, assign, cent)
    return assign, cent, n


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spherical_kmeans_matches_oracle(seed):
    Z, _ = _blobs(5, 4, 0.6, seed)
    init = initial_rows(Z.shape[0], 5)
    a, c, n = _run("kmeans", Z, None, 0.0, init)
    ra, rc, rn = ref.mr_spherical_kmeans_naive(Z, init)
    assert_array_equal(a, ra)
    assert n == rn
    assert_allclose(c, rc, rtol=0, atol=1e-12)
    assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("beta", [0.0, 0.5, 2.0, 4.0])
def test_sam_kmeans_matches_oracle(beta):
    Z, rel = _blobs(6, 3, 0.5, 7)
    init = initial_rows(Z.shape[0], 4)
    a, c, n = _run("sam", Z, rel, beta, init)
    ra, rc, rn = ref.mr_sam_kmeans_naive(Z, rel, beta, init)
    assert_array_equal(a, ra)
    assert n == rn
    assert_allclose(c, rc, rtol=0, atol=1e-12)


def test_sam_beta_pulls_relevance_into_groups():
    # two identical directions, relevance 0 / 1: with a large beta the groups split by relevance
    Z = np.tile([1.0, 0.0], (6, 1))
    rel = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    init = np.array([0, 3], np.int64)
    a, _, _ = _run("sam", Z, rel, 4.0, init)
    assert_array_equal(a, [0, 0, 0, 1, 1, 1])
    a0, _, n0 = _run("sam", Z, rel, 0.0, init)
    assert_array_equal(a0, 0)  # beta = 0: all distances tie, lowest group index wins
    assert n0 == 1


def test_first_pass_all_zero_stops_with_initial_centroids():
    # rows 0 and 1 are identical and are the initial rows: every point ties between groups 0 and 1,
    # the lowest index wins, the all-zero start "did not change": one pass, centroids untouched
    # (group 1 has no member and keeps its initial, normalised row)
    Z = np.array([[2.0, 0.0], [2.0, 0.0], [1.0, 0.2], [1.0, -0.3]])
    init = np.array([0, 1], np.int64)
    a, c, n = _run("kmeans", Z, None, 0.0, init)
    assert n == 1
    assert_array_equal(a, 0)
    assert_allclose(c, [[1.0, 0.0], [1.0, 0.0]], atol=0)


def test_empty_group_keeps_its_centroid():
    # rows 1 and 2 are duplicates and both initial rows: group 2 always loses the tie to group 1
    Z = np.array([[1.0, 0.0], [0.0, 3.0], [0.0, 3.0], [0.9, 0.1], [0.0, 0.9]])
    init = np.array([0, 1, 2], np.int64)
    a, c, n = _run("kmeans", Z, None, 0.0, init)
    assert_array_equal(a, [0, 1, 1, 0, 1])
    assert_allclose(c[2], [0.0, 1.0], atol=0)  # never a member: the normalised initial row
    m0 = Z[[0, 3]].mean(axis=0)
    assert_allclose(c[0], m0 / np.linalg.norm(m0), atol=1e-15)
    ra, rc, rn = ref.mr_spherical_kmeans_naive(Z, init)
    assert_array_equal(a, ra)
    assert_allclose(c, rc, atol=1e-15)
    assert n == rn == 2


@pytest.mark.parametrize("kind", ["kmeans", "sam"])
def test_iteration_cap(kind):
    Z, rel = _blobs(5, 4, 1.0, 3)
    init = initial_rows(Z.shape[0], 6)
    for cap in (1, 2):
        a, c, n = _run(kind, Z, rel, 1.0, init, n_iter=cap)
        if kind == "sam":
            ra, rc, rn = ref.mr_sam_kmeans_naive(Z, rel, 1.0, init, n_iter=cap)
        else:
            ra, rc, rn = ref.mr_spherical_kmeans_naive(Z, init, n_iter=cap)
        assert n == rn <= cap
        assert_array_equal(a, ra)
        assert_allclose(c, rc, atol=1e-12)


def test_initial_rows_is_the_published_draw():
    for M, G in ((200, 20), (13, 3), (5, 5)):
        assert_array_equal(initial_rows(M, G), np.random.default_rng(0).choice(M, G, replace=False))


def test_cluster_rows_wrapper():
    Z, rel = _blobs(4, 3, 0.5, 5)
    Zs = 3.0 * Z  # normalise=True divides the rows by their norms
    a, c, n = cluster_rows(Zs, 3)
    ra, rc, rn = ref.mr_spherical_kmeans_naive(Z, initial_rows(12, 3))
    assert_array_equal(a, ra)
    assert_allclose(c, rc, atol=1e-12)
    assert n == rn
    a, c, n = cluster_rows(Z.astype(np.float32), 3, clustering="sam", rel=rel, sam_beta=2.0, init=[0, 5, 9])
    ra, rc, rn = ref.mr_sam_kmeans_naive(Z.astype(np.float32), rel, 2.0, np.array([0, 5, 9]))
    assert_array_equal(a, ra)
    assert_allclose(c, rc, atol=1e-6)
    with pytest.raises(ValueError, match="G must be <= the number of rows"):
        cluster_rows(Z, 13)
    with pytest.raises(ValueError, match="rel is required"):
        cluster_rows(Z, 3, clustering="sam")
    with pytest.raises(ValueError, match="init must hold 3 distinct"):
        cluster_rows(Z, 3, init=[0, 0, 1])
    with pytest.raises(ValueError, match="sam_beta must be >= 0"):
        cluster_rows(Z, 3, clustering="sam", rel=rel, sam_beta=-1.0)
    with pytest.raises(ValueError, match="clustering must be one of"):
        cluster_rows(Z, 3, clustering="spectral")
