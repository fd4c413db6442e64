"""Energies and initial distributions (SPEC A.1, A.3): min-max rule, softmax floor, blends, score files."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast import numba_threads
from jkofast.datasets.beir import parity_fixture_path
from jkofast.jko.energy import align_scores, blend, energy_and_p0, minmax, read_score_file, softmax_tau

OFF = np.array([0, 4, 4, 7, 9], np.int64)  # includes an empty pool


def _x(dt):
    return np.array([1.0, 5.0, 3.0, 5.0, 2.0, 2.0 + 5e-10, 2.0, -1.0, 7.0], dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_minmax_matches_oracle_and_keeps_dtype(dt):
    x = _x(dt)
    out = minmax(x, OFF)
    assert out.dtype == dt
    for a, b in itertools.pairwise(OFF):
        if b > a:
            assert_array_equal(out[a:b], ref.minmax_naive(x[a:b]))
    # the 1e-9 rule: pool 2 spans 5e-10 (float64) -> all zeros
    if dt == np.float64:
        assert_array_equal(out[4:7], 0.0)


@pytest.mark.parametrize("tau", [1e-12, 0.1, 1.0])
def test_softmax_tau(tau):
    x = _x(np.float64)
    p = softmax_tau(x, OFF, tau)
    for a, b in itertools.pairwise(OFF):
        if b > a:
            assert_allclose(p[a:b], ref.softmax_naive(x[a:b], tau), rtol=1e-12)
            assert abs(p[a:b].sum() - 1) < 1e-12
    # tau floored at 1e-9: no NaN, mass on the maxima
    assert np.isfinite(softmax_tau(x, OFF, 0.0)).all()


def test_blend_energy_p0_reference_recipe():
    rng = np.random.default_rng(0)
    dense = rng.random(9).astype(np.float32)
    bm25 = (10 * rng.random(9)).astype(np.float32)
    off = np.array([0, 5, 9])
    E, p0 = energy_and_p0(off, dense=dense, rerank=bm25, alpha=0.4, gamma=0.6, tau0=0.1)
    for a, b in itertools.pairwise(off):
        r = 0.4 * ref.minmax_naive(dense[a:b]) + 0.6 * ref.minmax_naive(bm25[a:b])
        assert r.dtype == np.float32
        assert_array_equal(-E[a:b], r.astype(np.float64))
        assert_allclose(p0[a:b], ref.softmax_naive(r, 0.1), rtol=1e-6)
    # weights 0 or missing scores add nothing
    assert_array_equal(blend(off, dense=dense, alpha=0.0, gamma=1.0), 0.0)
    r = blend(off, dense=dense, sparse=bm25, alpha=1.0, beta=0.5)
    assert_allclose(r[:5], ref.minmax_naive(dense[:5]) + 0.5 * ref.minmax_naive(bm25[:5]), rtol=1e-6)
    with pytest.raises(ValueError, match="dense"):
        blend(off, dense=dense[:3], alpha=1.0)


def test_thread_invariance():
    rng = np.random.default_rng(1)
    x = rng.random(300)
    off = np.arange(0, 301, 30)
    with numba_threads(1):
        a = minmax(x, off), softmax_tau(x, off, 0.3)
    with numba_threads(2):
        b = minmax(x, off), softmax_tau(x, off, 0.3)
    assert_array_equal(a[0], b[0])
    assert_array_equal(a[1], b[1])


def test_errors():
    with pytest.raises(ValueError, match="x"):
        minmax(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="offsets"):
        minmax(np.array([1.0, 2.0]), [0, 3])
    with pytest.raises(TypeError, match="x"):
        minmax(np.array(["a"]))


def test_score_file_roundtrip(tmp_path):
    f = tmp_path / "s.tsv"
    f.write_text("query-id\tcorpus-id\tscore\nq1\td1\t2.5\nq1 d2 -1\nq2 Q0 d9 1 0.25 run\n")
    s = read_score_file(str(f))
    assert s == {"q1": {"d1": 2.5, "d2": -1.0}, "q2": {"d9": 0.25}}
    flat, missing = align_scores(s, ["q1", "q2"], [0, 3, 4], ["d2", "d1", "d7", "d9"])
    assert flat.tolist() == [-1.0, 2.5, -1.0, 0.25] and missing == 1
    bad = tmp_path / "b.tsv"
    bad.write_text("q1 d1 1\nq1 d2\n")
    with pytest.raises(ValueError, match=":2:"):
        read_score_file(str(bad))


FIX = parity_fixture_path()


def test_energy_recipe_reproduces_parity_fixture():
    """E and p0 built here + the core's rerank_batch reproduce the published p_T (3 pools)."""

    from jkofast.datasets.beir import load_dataset
    from jkofast.jko import solver as jko

    z = np.load(FIX)
    sel = [0, 7, 19]
    m = z["cand_idx"].shape[1]
    off = np.arange(0, (len(sel) + 1) * m, m)
    dense = z["dense_pool"][sel].ravel()
    bm25 = z["bm25_pool"][sel].ravel()
    E, p0 = energy_and_p0(off, dense=dense, rerank=bm25, alpha=0.4, gamma=0.6, tau0=0.1)
    demb, _ = load_dataset("scifact").embeddings()
    Z = demb[z["cand_idx"][sel].ravel()]
    res = jko.rerank_batch(E, p0, off, embeddings=Z, config="base", grad="unrolled", normalise=False)  # published path
    assert (res.status == 0).all()
    np.testing.assert_allclose(res.p.reshape(len(sel), m), z["base_wasserstein/p_T"][sel], atol=1e-5)


# ---- adversarial inputs (QA review) ---------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_minmax_range_wider_than_the_dtype(dt):
    big = np.finfo(dt).max
    x = np.array([-big, big, 0.0, 1.0, 3.0, 2.0], dt)  # pool 0's max - min overflows (was NaN)
    out = minmax(x, [0, 3, 6])
    assert out.dtype == dt
    assert_allclose(out[:3], [0.0, 1.0, 0.5], atol=1e-6)
    assert_array_equal(out[3:], minmax(x[3:]))  # other pools untouched
    assert_array_equal(minmax(x[3:]), ref.minmax_naive(x[3:]))


def test_weights_tau_and_offsets_are_named():
    x = np.array([1.0, 3.0, 2.0])
    with pytest.raises(TypeError, match="tau"):
        softmax_tau(x, None, "0.1")
    with pytest.raises(ValueError, match="tau"):
        softmax_tau(x, None, -1.0)
    with pytest.raises(TypeError, match="alpha"):
        blend([0, 3], dense=x, alpha="a")
    with pytest.raises(ValueError, match="offsets"):
        blend([0, 2, 1, 3], dense=x, alpha=0.0)  # returned zeros for non-monotone offsets
    with pytest.raises(ValueError, match="offsets"):
        blend([[0, 3]], dense=x, alpha=1.0)
    with pytest.raises(TypeError, match="offsets"):
        blend([0.0, 3.0], dense=x, alpha=1.0)


def test_align_scores_checks_query_ids_and_score_range():
    s = {"a": {"d1": 1.0}}
    with pytest.raises(ValueError, match="query_ids"):  # the second pool was zero-filled silently
        align_scores(s, ["a"], [0, 1, 2], ["d1", "d2"])
    with pytest.raises(ValueError, match="offsets"):
        align_scores(s, ["a"], [0, 3], ["d1", "d2"])
    with pytest.raises(ValueError, match=r"scores\['a'\]\['d1'\]"):  # cast to float32 inf
        align_scores({"a": {"d1": 1e39, "d2": 1.0}}, ["a"], [0, 2], ["d1", "d2"])
    with pytest.raises(ValueError, match=r"scores\['a'\]\['d1'\]"):
        align_scores({"a": {"d1": float("nan")}}, ["a"], [0, 1], ["d1"])


def test_score_file_rejects_scores_beyond_float32(tmp_path):
    f = tmp_path / "s.tsv"
    f.write_text("q1 d1 1\nq1 d2 1e39\n")
    with pytest.raises(ValueError, match=r"s\.tsv:2: .*float32"):
        read_score_file(str(f))
