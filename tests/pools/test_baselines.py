"""Pool baselines (SPEC A.5) vs naive oracles, hand-checked orders, ties, thread invariance."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

import reference as ref
from jkofast import numba_threads
from jkofast.pools.baselines import dpp_map, inpool_rrf, mmr, positions_to_docs, topk_by_score


def _pools(seed, sizes=(7, 1, 12, 5), d=6, dt=np.float64):
    rng = np.random.default_rng(seed)
    off = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=off[1:])
    n = off[-1]
    Z = rng.normal(size=(n, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    return off, rng.random(n).astype(dt), rng.random(n).astype(dt), Z.astype(dt)


def test_topk_by_score_hand_and_ties():
    idx = topk_by_score(np.array([0.5, 0.9, 0.9, 0.1, 3.0]), [0, 4, 5], 3)
    assert idx.tolist() == [[1, 2, 0], [0, -1, -1]]


def test_inpool_rrf_hand_checked():
    # pool ranks: sparse (3,2,1) -> 0,1,2 ; dense (1,3,2) -> 2,0,1
    # fused: d0 1/61+1/63, d1 1/62+1/61, d2 1/63+1/62 -> d1, d0, d2
    assert inpool_rrf([3.0, 2.0, 1.0], [1.0, 3.0, 2.0], [0, 3], 3).tolist() == [[1, 0, 2]]
    # exact tie in both scores: pool ranks by lowest position, fused tie -> lowest position
    assert inpool_rrf([1.0, 1.0], [1.0, 1.0], [0, 2], 2).tolist() == [[0, 1]]


@pytest.mark.parametrize("seed", [0, 1])
def test_inpool_rrf_oracle(seed):
    off, s, d, _ = _pools(seed)
    s[2] = s[3]  # a tie
    got = inpool_rrf(s, d, off, 4)
    for q in range(len(off) - 1):
        a, b = off[q], off[q + 1]
        exp = ref.inpool_rrf_naive(s[a:b], d[a:b], 4)
        assert got[q, : len(exp)].tolist() == exp


def test_mmr_hand_checked():
    # docs 0 and 1 identical direction, 2 orthogonal; rel 1.0, 0.9, 0.5
    Z = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    rel = np.array([1.0, 0.9, 0.5])
    # pick 0 (rel); then 1: 0.45 - 0.5 = -0.05, 2: 0.25 - 0 = 0.25 -> 2; then 1
    assert mmr(rel, Z, [0, 3], 3).tolist() == [[0, 2, 1]]
    # strict > with ascending scan: equal scores keep the lower position
    assert mmr(np.array([0.5, 0.5, 0.5]), np.eye(3), [0, 3], 3).tolist() == [[0, 1, 2]]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_mmr_oracle(dt):
    off, rel, _, Z = _pools(2, dt=dt)
    got = mmr(rel, Z, off, 6)
    for q in range(len(off) - 1):
        a, b = off[q], off[q + 1]
        exp = ref.mmr_naive(rel[a:b], Z[a:b], 6)
        assert got[q, : len(exp)].tolist() == exp
        assert (got[q, len(exp) :] == -1).all()


def test_dpp_hand_checked_and_fill_up():
    # two identical docs: after picking the first, the second's residual is only delta
    Z = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    rel = np.array([1.0, 0.9, 0.2])
    got = dpp_map(rel, Z, [0, 3], 3)[0].tolist()
    # d = r^2 + 1e-3: 1.001, 0.811, 0.041 -> 0; then doc 1 residual ~ (0.9 - 0.9/1.0005)^2 + 1e-3
    # is 1e-3 + ~2e-7 < doc 2's 0.041 -> 2, then 1
    assert got == [0, 2, 1]
    assert got == ref.dpp_map_naive(rel, Z, 3)
    # zero embeddings: every residual is delta; picks follow the first argmax each time
    assert dpp_map(rel, np.zeros((3, 2)), [0, 3], 2).tolist() == [ref.dpp_map_naive(rel, np.zeros((3, 2)), 2)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_dpp_oracle(dt):
    off, rel, _, Z = _pools(4, dt=dt, d=3)  # d=3 < k: residuals vanish, fill-up rule kicks in
    got = dpp_map(rel, Z, off, 8)
    for q in range(len(off) - 1):
        a, b = off[q], off[q + 1]
        exp = ref.dpp_map_naive(rel[a:b].astype(np.float64), Z[a:b], 8)
        assert got[q, : len(exp)].tolist() == exp
        assert len(set(exp)) == len(exp) == min(8, b - a)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 9))
def test_mmr_dpp_are_permutation_prefixes(seed, k):
    off, rel, _, Z = _pools(seed, sizes=(5, 9))
    for f in (mmr, dpp_map):
        out = f(rel, Z, off, k)
        for q in range(2):
            m = off[q + 1] - off[q]
            row = out[q][out[q] >= 0]
            assert len(row) == min(k, m) and len(set(row.tolist())) == len(row) and row.max() < m


def test_thread_invariance():
    off, s, d, Z = _pools(5, sizes=(20,) * 9)
    res = []
    for n in (1, 2):
        with numba_threads(n):
            res.append([inpool_rrf(s, d, off, 5), mmr(s, Z, off, 5), dpp_map(s, Z, off, 5), topk_by_score(s, off, 5)])
    for a, b in zip(*res, strict=True):
        assert_array_equal(a, b)


def test_positions_to_docs_and_errors():
    pos = np.array([[1, 0], [0, -1]])
    assert positions_to_docs(pos, [0, 2, 3], np.array([10, 11, 12])).tolist() == [[11, 10], [12, -1]]
    assert positions_to_docs(np.full((2, 2), -1), [0, 0, 0], np.zeros(0, np.int64)).tolist() == [[-1, -1]] * 2
    # empty pools are fine everywhere
    assert topk_by_score(np.zeros(0), [0, 0], 2).tolist() == [[-1, -1]]
    assert mmr(np.zeros(0), np.zeros((0, 2)), [0, 0], 2).tolist() == [[-1, -1]]
    assert dpp_map(np.zeros(0), np.zeros((0, 2)), [0, 0], 2).tolist() == [[-1, -1]]
    assert inpool_rrf(np.zeros(0), np.zeros(0), [0, 0], 2).tolist() == [[-1, -1]]
    with pytest.raises(ValueError, match="embeddings"):
        mmr(np.ones(3), np.ones((2, 2)), [0, 3], 2)
    with pytest.raises(ValueError, match="lam"):
        mmr(np.ones(3), np.ones((3, 2)), [0, 3], 2, lam=2.0)
    with pytest.raises(ValueError, match="scores"):
        topk_by_score(np.array([np.nan]), [0, 1], 1)
    with pytest.raises(TypeError, match="k"):
        dpp_map(np.ones(3), np.ones((3, 2)), [0, 3], 2.5)


# ---- adversarial inputs (QA review) ---------------------------------------------------------
def test_positions_to_docs_validates_positions():
    off, doc = [0, 3, 5], np.arange(10, 15)
    assert positions_to_docs(np.array([[0, 2], [1, -1]]), off, doc).tolist() == [[10, 12], [14, -1]]
    with pytest.raises(ValueError, match=r"pos\[0, 1\] = 5 is outside pool 0"):
        positions_to_docs(np.array([[0, 5], [1, 0]]), off, doc)  # mapped to pool 1's docs silently
    with pytest.raises(ValueError, match=r"pos\[1, 0\] = 2 is outside pool 1"):
        positions_to_docs(np.array([[0, 1], [2, 0]]), off, doc)
    with pytest.raises(ValueError, match=r"pos\[0, 1\] = -5"):
        positions_to_docs(np.array([[0, -5], [1, 0]]), off, doc)
    with pytest.raises(ValueError, match="pos must have shape"):
        positions_to_docs(np.array([[0, 1]]), off, doc)  # broadcast over the pools silently
    with pytest.raises(TypeError, match="pos"):
        positions_to_docs(np.array([[0.5, 1.0], [0.0, 1.0]]), off, doc)
    with pytest.raises(ValueError, match="offsets"):
        positions_to_docs(np.array([[0, 1], [0, 1]]), off, doc[:3])  # was clipped to the last doc


def test_mmr_dpp_parameters_and_overflowing_embeddings():
    rel = np.array([1.0, 3.0, 2.0])
    Z = np.eye(3)
    with pytest.raises(TypeError, match="lam"):
        mmr(rel, Z, [0, 3], 2, lam="0.5")
    with pytest.raises(TypeError, match="delta"):
        dpp_map(rel, Z, [0, 3], 2, delta=None)
    # dot products of 1e200-rows overflow: MMR returned one pick and -1 padding for a full pool
    with pytest.raises(ValueError, match=r"embeddings.*overflow"):
        mmr(rel, Z * 1e200, [0, 3], 3)
    with pytest.raises(ValueError, match=r"embeddings.*overflow"):
        dpp_map(rel, Z * 1e200, [0, 3], 3)


# ---- one bad pool in a batch: reported, the others kept --------------------------------------
def _corrupt(a, i, v=np.nan):
    a = a.copy()
    a[i] = v
    return a


@pytest.mark.parametrize("method", ["topk", "rrf", "mmr", "dpp"])
def test_bad_pool_is_reported_and_the_others_kept(method):
    from jkofast.pools.baselines import BadPoolError, BadPoolWarning

    off, s, d, Z = _pools(3)
    k = 4
    run = {
        "topk": lambda s, d, Z, o, **kw: topk_by_score(s, o, k, **kw),
        "rrf": lambda s, d, Z, o, **kw: inpool_rrf(s, d, o, k, **kw),
        "mmr": lambda s, d, Z, o, **kw: mmr(s, Z, o, k, **kw),
        "dpp": lambda s, d, Z, o, **kw: dpp_map(s, Z, o, k, **kw),
    }[method]
    # pool 2 (positions 8..19) gets a NaN; for the embedding methods pool 0 also gets an inf row
    bad = {2: ("rel" if method in ("mmr", "dpp") else "scores" if method == "topk" else "sparse")}
    s_bad = _corrupt(s, int(off[2]) + 3)
    Z_bad = Z
    if method in ("mmr", "dpp"):
        Z_bad = Z.copy()
        Z_bad[int(off[0]) + 1, 2] = np.inf
        bad[0] = "embeddings"
    # the oracle for the good pools: the same call on the good pools alone
    good = [q for q in range(len(off) - 1) if q not in bad]
    keep = np.concatenate([np.arange(off[q], off[q + 1]) for q in good])
    sub_off = np.concatenate([[0], np.cumsum(np.diff(off)[good])])
    expect = run(s[keep], d[keep], Z[keep], sub_off)
    with pytest.raises(BadPoolError) as ei:
        run(s_bad, d, Z_bad, off)
    err = ei.value
    assert isinstance(err, ValueError)
    assert sorted(err.errors) == sorted(bad)
    for q, name in bad.items():
        assert name in err.errors[q] and f"pool {q}" in err.errors[q]
        assert name in str(err)
        assert (err.result[q] == -1).all()
    assert_array_equal(err.result[good], expect)
    with pytest.warns(BadPoolWarning, match=f"{len(bad)} of 4 pools"):
        out = run(s_bad, d, Z_bad, off, errors="skip")
    assert_array_equal(out, err.result)
    with pytest.raises(ValueError, match="errors must be"):
        run(s, d, Z, off, errors="ignore")


def test_all_pools_bad_and_overflowing_rows_are_per_pool():
    from jkofast.pools.baselines import BadPoolError

    off, s, _, Z = _pools(4, sizes=(3, 4))
    Z_big = Z.copy()
    Z_big[4] *= 1e200  # pool 1 only: its dot products overflow
    with pytest.raises(BadPoolError, match="1 of 2 pools") as ei:
        mmr(s, Z_big, off, 3)
    assert list(ei.value.errors) == [1] and "overflow" in ei.value.errors[1]
    assert_array_equal(ei.value.result[0], mmr(s[:3], Z[:3], [0, 3], 3)[0])
    with pytest.raises(BadPoolError, match="2 of 2 pools") as ei:
        topk_by_score(np.full(7, np.inf), off, 2)
    assert (ei.value.result == -1).all()
