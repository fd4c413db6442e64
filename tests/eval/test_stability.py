"""W_C (biased, published; debiased and self floor) and Leakage@10 (SPEC A.7.5, A.7.6)."""

import numpy as np
import pytest
from reference_stability import leakage_naive, wc_published_naive

from jkofast._threads import numba_threads
from jkofast.eval.stability import leakage_at_k, wc_batch, wc_distance


def _unit_rows(n, d=8, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    return Z.astype(np.float32)


def _pairs(seed=1, n_pairs=5, n_docs=30, m=6):
    """Random pairs of pools (overlapping, with repeated rows) and distributions on them."""
    rng = np.random.default_rng(seed)
    P, Q = [], []
    for _ in range(n_pairs):
        pr = rng.integers(0, n_docs, m)
        qr = rng.integers(0, n_docs, m + 1)
        pv = rng.random(m) ** 3
        qv = rng.random(m + 1) ** 3
        P.append((pr, pv / pv.sum()))
        Q.append((qr, qv / qv.sum()))
    return P, Q


def _flat(side):
    off = np.zeros(len(side) + 1, np.int64)
    np.cumsum([r.size for r, _ in side], out=off[1:])
    return np.concatenate([v for _, v in side]), off, np.concatenate([r for r, _ in side])


def test_wc_orthogonal_point_masses_hand_case():
    # U = {0, 1}, C = [[0, 1], [1, 0]]; lifted p = (1, 1e-8)/(1 + 2e-8), q reversed: all mass moves at cost 1
    Z = np.eye(2, dtype=np.float32)
    w = wc_distance([1.0], [0], [1.0], [1], Z)
    assert w == pytest.approx(1.0, abs=1e-7)
    # identical point masses: self-transport of (1, 1e-8) is ~0 (the floor entry carries 1e-8 at cost 1)
    assert wc_distance([1.0], [0], [1.0], [0], Z) < 1e-7


def test_wc_lifting_sums_repeated_ids_and_pads_union():
    # p puts 0.3 + 0.2 on row 4 (repeated id) and 0.5 on row 2; q is the lifted p written once per id,
    # plus zero mass on row 7 (union has 3 ids in both cases): the lifted vectors are identical
    Z = _unit_rows(10)
    a = wc_distance([0.3, 0.5, 0.2], [4, 2, 4], [0.3, 0.3, 0.4], [2, 7, 4], Z)
    b = wc_distance([0.5, 0.5, 0.0], [4, 2, 7], [0.3, 0.3, 0.4], [2, 7, 4], Z)
    assert a == b
    assert a == pytest.approx(wc_published_naive([4, 2, 4], [0.3, 0.5, 0.2], [2, 7, 4], [0.3, 0.3, 0.4], Z), rel=1e-4)


def test_wc_matches_the_published_float32_oracle():
    Z = _unit_rows(30)
    P, Q = _pairs()
    pv, po, pr = _flat(P)
    qv, qo, qr = _flat(Q)
    res = wc_batch(pv, po, pr, qv, qo, qr, Z)
    ref32 = np.array([wc_published_naive(a[0], a[1], b[0], b[1], Z) for a, b in zip(P, Q, strict=True)])
    ref64 = np.array(
        [wc_published_naive(a[0], a[1], b[0], b[1], Z, dtype=np.float64) for a, b in zip(P, Q, strict=True)]
    )
    # float64 kernel vs the float64 oracle: the same computation
    np.testing.assert_allclose(res.wc, ref64, rtol=1e-10, atol=1e-13)
    # vs the published float32 arithmetic: negligible at the metric's scale (values ~0.1 - 1)
    np.testing.assert_allclose(res.wc, ref32, rtol=1e-4, atol=1e-6)
    assert np.all(res.status == 0)


def test_self_terms_and_debiased_definition():
    Z = _unit_rows(30)
    P, Q = _pairs(seed=3)
    pv, po, pr = _flat(P)
    qv, qo, qr = _flat(Q)
    res = wc_batch(pv, po, pr, qv, qo, qr, Z)
    for k, (a, b) in enumerate(zip(P, Q, strict=True)):
        # W(p, p) on the pair's union: q's pool ids enter with zero mass (floor only)
        ids = np.concatenate([a[0], b[0]])
        mass = np.concatenate([a[1], np.zeros(b[0].size)])
        pp = wc_published_naive(ids, mass, ids, mass, Z, dtype=np.float64)
        assert res.self_p[k] == pytest.approx(pp, rel=1e-9)
    np.testing.assert_allclose(res.debiased, res.wc - 0.5 * (res.self_p + res.self_q), rtol=0, atol=0)
    assert np.all(res.self_p > 0) and np.all(res.self_q > 0)  # W_C(p, p) > 0: not a divergence


def test_identical_inputs_give_zero_debiased_and_wc_equal_to_floor():
    Z = _unit_rows(12)
    p = np.array([0.6, 0.3, 0.1])
    res = wc_batch(p, [0, 3], [1, 5, 9], p, [0, 3], [1, 5, 9], Z)
    assert res.wc[0] == res.self_p[0] == res.self_q[0]
    assert res.debiased[0] == 0.0
    # a spread-out p has a larger self floor than a concentrated one (SPEC A.7.5 caveat)
    sharp = wc_batch([0.98, 0.01, 0.01], [0, 3], [1, 5, 9], [0.98, 0.01, 0.01], [0, 3], [1, 5, 9], Z)
    assert sharp.wc[0] < res.wc[0]


def test_grouping_and_threads_do_not_change_results():
    Z = _unit_rows(30)
    P, Q = _pairs(seed=5, n_pairs=4)
    # pairs 0..3 plus the same pools with other masses (same union -> same group)
    rng = np.random.default_rng(9)
    P2 = P + [(r, rng.dirichlet(np.ones(r.size))) for r, _ in P]
    Q2 = Q + [(r, rng.dirichlet(np.ones(r.size))) for r, _ in Q]
    pv, po, pr = _flat(P2)
    qv, qo, qr = _flat(Q2)
    with numba_threads(1):
        one = wc_batch(pv, po, pr, qv, qo, qr, Z)
    with numba_threads(2):
        two = wc_batch(pv, po, pr, qv, qo, qr, Z)
    np.testing.assert_array_equal(one.wc, two.wc)
    np.testing.assert_array_equal(one.debiased, two.debiased)
    for k in range(len(P2)):
        single = wc_batch(P2[k][1], [0, P2[k][0].size], P2[k][0], Q2[k][1], [0, Q2[k][0].size], Q2[k][0], Z)
        assert single.wc[0] == one.wc[k] and single.self_q[0] == one.self_q[k]


def test_without_self_terms():
    Z = _unit_rows(5)
    res = wc_batch([1.0], [0, 1], [0], [1.0], [0, 1], [3], Z, self_terms=False)
    assert res.self_p is None and res.debiased is None and np.isfinite(res.wc[0])


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (dict(p=[-0.1, 1.1]), ValueError, "p must be non-negative"),
        (dict(p=[np.nan, 1.0]), ValueError, "p contains NaN"),
        (dict(p_rows=[0.0, 1.0]), TypeError, "p_rows"),
        (dict(q_rows=[0, 99]), ValueError, "q_rows holds a row outside"),
        (dict(q=[0.0, 0.0]), ValueError, "q: pair 0 has no positive mass"),
        (dict(q_offsets=[0, 1, 2]), ValueError, "pairs"),
        (dict(p_rows=[0]), ValueError, "p_rows has 1 entries"),
        (dict(eps=0.0), ValueError, "eps"),
        (dict(n_iter=0), ValueError, "n_iter"),
        (dict(floor=-1e-8), ValueError, "floor"),
        (dict(doc_emb=np.zeros((4, 2), np.complex64)), TypeError, "doc_emb"),
    ],
)
def test_bad_input(kwargs, exc, match):
    args = dict(p=[0.5, 0.5], p_offsets=[0, 2], p_rows=[0, 1], q=[0.5, 0.5], q_offsets=[0, 2], q_rows=[1, 2])
    args["doc_emb"] = np.eye(4, dtype=np.float32)
    args.update(kwargs)
    opts = {k: args.pop(k) for k in ("eps", "n_iter", "floor") if k in args}
    with pytest.raises(exc, match=match):
        wc_batch(**args, **opts)


def test_leakage_hand_cases():
    # 3 of the top 10 are injected ids; an original-pool copy of injected id 7 counts as well
    top = np.array([[7, 1, 2, 7, 3, 4, 9, 5, 6, 8, 11], [0, 1, 2, 3, 4, 5, 6, 8, 10, -1, -1]])
    inj = [np.array([7, 9, 40]), np.array([], np.int64)]
    got = leakage_at_k(top, inj, k=10)
    assert got.tolist() == [0.3, 0.0]
    assert got[0] == leakage_naive(top[0], inj[0]) and got[1] == leakage_naive(top[1], inj[1])
    assert leakage_at_k([[3, -1]], [[3]], k=2).tolist() == [0.5]


def test_leakage_bad_input():
    with pytest.raises(ValueError, match="fewer than k"):
        leakage_at_k([[1, 2]], [[1]], k=10)
    with pytest.raises(ValueError, match="injected has"):
        leakage_at_k([[1, 2]], [], k=2)
    with pytest.raises(TypeError, match="top_rows"):
        leakage_at_k([1.0, 2.0], [[1]], k=1)
