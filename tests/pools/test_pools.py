"""Global hybrid RRF pools (SPEC A.2.6): hand-checked orders incl. ties, oracle, invariants."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import reference as ref
from jkofast import numba_threads
from jkofast.datasets.beir import parity_fixture_path
from jkofast.pools.candidates import Pools, build_pools, rrf_fuse, top_lists


def test_hand_checked_order_with_ties():
    # sparse list: 10, 11, 12; dense list: 12, 13, 10
    # 10: 1/61 + 1/63 ; 12: 1/63 + 1/61 (equal: 10 was inserted first -> wins)
    # 11: 1/62 ; 13: 1/62 (tie: 11 is a BM25-list doc -> before 13)
    cand, fused, n = rrf_fuse([[10, 11, 12]], [[12, 13, 10]], M=4)
    assert cand.tolist() == [[10, 12, 11, 13]]
    assert n.tolist() == [4]
    assert fused[0, 0] == fused[0, 1] == 1 / 61 + 1 / 63
    assert fused[0, 2] == fused[0, 3] == 1 / 62


def test_dense_only_docs_after_sparse_on_ties():
    # 7 only dense at rank 0, 5 only sparse at rank 0 -> tie 1/61, sparse doc first
    cand, _, _ = rrf_fuse([[5]], [[7]], M=2)
    assert cand.tolist() == [[5, 7]]
    cand, _, _ = rrf_fuse([[5]], [[7]], M=1)
    assert cand.tolist() == [[5]]


def test_padding_and_sparse_only():
    cand, fused, n = rrf_fuse([[3, -1, 4]], None, M=4)
    assert cand.tolist() == [[3, 4, -1, -1]]
    assert n.tolist() == [2]
    assert fused[0, 1] == 1 / 63  # -1 still occupies list position 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_dict_oracle(seed):
    rng = np.random.default_rng(seed)
    nq, N, n_list, M = 4, 60, 25, 20
    s = np.stack([rng.permutation(N)[:n_list] for _ in range(nq)])
    d = np.stack([rng.permutation(N)[:n_list] for _ in range(nq)])
    cand, fused, n = rrf_fuse(s, d, M=M)
    for q in range(nq):
        ids, sc = ref.rrf_pool_naive(s[q], d[q], M)
        assert cand[q, : n[q]].tolist() == ids
        np.testing.assert_allclose(fused[q, : n[q]], sc, rtol=0, atol=0)


def test_thread_invariance():
    rng = np.random.default_rng(3)
    s = np.stack([rng.permutation(80)[:30] for _ in range(9)])
    d = np.stack([rng.permutation(80)[:30] for _ in range(9)])
    with numba_threads(1):
        a = rrf_fuse(s, d, M=25)
    with numba_threads(2):
        b = rrf_fuse(s, d, M=25)
    for x, y in zip(a, b, strict=True):
        assert_array_equal(x, y)


def test_errors():
    with pytest.raises(TypeError, match="sparse_idx"):
        rrf_fuse([[0.5, 1.0]])
    with pytest.raises(ValueError, match="duplicate"):
        rrf_fuse([[1, 1]])
    with pytest.raises(ValueError, match="same number of rows"):
        rrf_fuse([[1, 2]], [[1], [2]])
    with pytest.raises(ValueError, match="M"):
        rrf_fuse([[1, 2]], M=0)


def test_build_pools_from_score_matrices():
    rng = np.random.default_rng(0)
    S = rng.random((3, 40)).astype(np.float32)
    D = rng.random((3, 40)).astype(np.float32)
    P = build_pools(S, D, query_ids=["a", "b", "c"], each_n=10, M=12)
    assert P.n_queries == 3 and P.offsets.tolist() == [0, 12, 24, 36]
    for q in range(3):
        ids, _ = ref.rrf_pool_naive(np.argsort(-S[q], kind="stable")[:10], np.argsort(-D[q], kind="stable")[:10], 12)
        assert P.doc_idx[P.pool(q)].tolist() == ids
        assert_array_equal(P.sparse[P.pool(q)], S[q, ids])
        assert_array_equal(P.dense[P.pool(q)], D[q, ids])
    sub = P.subset([2, 0])
    assert sub.query_ids == ["c", "a"]
    assert_array_equal(sub.doc_idx[:12], P.doc_idx[24:36])
    # sparse-only: the sparse top-M in rank order
    P1 = build_pools(S, None, each_n=10, M=5)
    for q in range(3):
        assert P1.doc_idx[P1.pool(q)].tolist() == list(np.argsort(-S[q], kind="stable")[:5])


def test_pools_save_load(tmp_path):
    P = build_pools(np.random.default_rng(1).random((2, 9)), None, query_ids=["x", "y"], each_n=5, M=4)
    P.save(tmp_path / "p.npz")
    Q = Pools.load(str(tmp_path / "p.npz"))
    assert Q.query_ids == ["x", "y"]
    assert_array_equal(Q.doc_idx, P.doc_idx)
    assert Q.dense is None


def test_top_lists_ties_lowest_index():
    idx, val = top_lists(np.array([[1.0, 2.0, 2.0, 0.0]]), 3)
    assert idx.tolist() == [[1, 2, 0]]


FIX = parity_fixture_path()


def test_scifact_fixture_pools():
    """Pools of 30 real SciFact queries vs the published pools (BM25 rank_bm25 + MiniLM).

    The reference breaks exact first-stage score ties arbitrarily (unstable argsort), jkofast
    by lowest corpus row, so pools may differ only where two tied documents swap ranks.
    """
    rank_bm25 = pytest.importorskip("rank_bm25")
    import re

    from jkofast.datasets.beir import load_dataset
    from jkofast.pools.candidates import dense_scores

    z = np.load(FIX)
    ds = load_dataset("scifact")
    qids = [str(q) for q in z["query_ids"]]
    tok = [re.findall(r"\w+", t.lower()) for t in ds.doc_texts(". ")]
    bm = rank_bm25.BM25Okapi(tok)
    qtext = ds.queries
    S = np.stack([bm.get_scores(re.findall(r"\w+", qtext[q].lower())).astype(np.float32) for q in qids])
    demb, qemb = ds.embeddings()
    qrow = {q: i for i, q in enumerate(ds.query_ids)}
    Dn = dense_scores(demb, qemb[[qrow[q] for q in qids]])
    P = build_pools(S, Dn, query_ids=qids)
    cand = P.doc_idx.reshape(30, 200)
    same = (cand == z["cand_idx"]).all(axis=1)
    assert same.sum() >= 26
    for q in np.flatnonzero(~same):
        assert set(cand[q]) == set(z["cand_idx"][q]) or len(set(cand[q]) ^ set(z["cand_idx"][q])) <= 4
    assert_array_equal(P.sparse.reshape(30, 200)[same], z["bm25_pool"][same])
    np.testing.assert_allclose(P.dense.reshape(30, 200)[same], z["dense_pool"][same], atol=1e-6)


def test_dense_search_and_scores():
    from jkofast.pools.candidates import dense_scores, dense_search

    rng = np.random.default_rng(2)
    D = rng.normal(size=(40, 6)).astype(np.float32)
    Q = rng.normal(size=(3, 6)).astype(np.float32)
    full = Q.astype(np.float64) @ D.T.astype(np.float64)
    np.testing.assert_allclose(dense_scores(D, Q), full, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dense_scores(D, Q, per_query=False), full, rtol=1e-5, atol=1e-5)
    idx, val = dense_search(D, Q, 4, batch=2)
    for q in range(3):
        assert idx[q].tolist() == list(np.argsort(-dense_scores(D, Q)[q], kind="stable")[:4])
    with pytest.raises(ValueError, match="dimensions"):
        dense_scores(D, Q[:, :3])


def test_pools_from_lists_fills_missing_scores_with_list_minimum():
    from jkofast.pools.candidates import pools_from_lists

    s_idx = np.array([[4, 2, -1]])
    s_val = np.array([[3.0, 1.0, -np.inf]], np.float32)
    d_idx = np.array([[2, 7, 4]])
    d_val = np.array([[0.9, 0.8, 0.1]], np.float32)
    P = pools_from_lists(s_idx, s_val, d_idx, d_val, M=4, query_ids=["q"])
    ids, _ = ref.rrf_pool_naive(s_idx[0], d_idx[0], 4)
    assert P.doc_idx.tolist() == ids  # [2, 4, 7]
    exp_sparse = {4: 3.0, 2: 1.0, 7: 1.0}  # 7 is not in the sparse list -> its minimum
    exp_dense = {2: 0.9, 7: 0.8, 4: 0.1}
    assert P.sparse.tolist() == [exp_sparse[d] for d in ids]
    np.testing.assert_allclose(P.dense, [exp_dense[d] for d in ids], rtol=1e-6)


# ---- adversarial inputs (QA review) ---------------------------------------------------------
def test_pools_query_positions_are_checked():
    from jkofast.pools.candidates import QueryIndexError

    P = build_pools(np.random.default_rng(0).random((2, 6)), M=3)
    for q in (-1, 2):  # -1 gave slice(6, 0) / negative offsets silently
        with pytest.raises(QueryIndexError, match="in \\[0, 2\\)"):
            P.pool(q)
        with pytest.raises(ValueError, match="queries"):
            P.subset([0, q])
    with pytest.raises(TypeError, match="q must be an integer"):
        P.pool(1.0)
    with pytest.raises(TypeError, match="queries"):
        P.subset([0.0])
    s = P.subset([1])
    assert_array_equal(s.doc_idx, P.doc_idx[P.pool(1)])


def test_rrf_fuse_rejects_ids_below_minus_one():
    with pytest.raises(ValueError, match=r"sparse_idx\[0, 1\] = -5"):  # was taken as padding
        rrf_fuse([[5, -5]], [[3, 9]], M=3)
    with pytest.raises(ValueError, match=r"dense_idx\[0, 0\] = -2"):
        rrf_fuse([[5, 3]], [[-2, 9]], M=3)


def test_pools_from_lists_and_dense_search_arguments():
    from jkofast.pools.candidates import dense_scores, dense_search, pools_from_lists

    with pytest.raises(ValueError, match="query_ids"):
        pools_from_lists([[0, 1]], [[2.0, 1.0]], query_ids=["a", "b"], M=3)
    with pytest.raises(ValueError, match="sparse_val"):  # IndexError before
        pools_from_lists([[0, 1]], [[2.0]], M=3)
    with pytest.raises(ValueError, match="sparse_val"):
        pools_from_lists([[0, 1], [2, 3]], [[2.0, 1.0]], M=3)
    with pytest.raises(ValueError, match="dense_val"):
        pools_from_lists([[0, 1]], [[2.0, 1.0]], [[1, 2]], None, M=3)
    with pytest.raises(ValueError, match="sparse_val contains NaN"):
        pools_from_lists([[0, 1]], [[2.0, np.nan]], M=3)
    D, Q = np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32)[:2]
    for b in (0, -1):  # -1 returned uninitialised memory as results
        with pytest.raises(ValueError, match="batch"):
            dense_search(D, Q, 2, batch=b)
        with pytest.raises(ValueError, match="batch"):
            dense_scores(D, Q, per_query=False, batch=b)
    idx, _ = dense_search(D, Q, 1, batch=1)
    assert idx.tolist() == [[0], [1]]


def test_recall_checks_doc_ids_cover_the_pools():
    P = build_pools(np.random.default_rng(0).random((2, 5)), M=3)
    with pytest.raises(ValueError, match="doc_ids has 1 ids"):  # IndexError before
        P.recall({"0": {"x": 1}}, ["a"])
    ids = [f"d{i}" for i in range(5)]
    rel = ids[int(P.doc_idx[0])]
    assert P.recall({"0": {rel: 1, "nowhere": 1}}, ids) == 0.5


def test_query_index_error_is_one_class():
    from jkofast.jko import solver as jko
    from jkofast.pools import candidates as pools

    assert jko.QueryIndexError is pools.QueryIndexError
    assert issubclass(pools.QueryIndexError, IndexError) and issubclass(pools.QueryIndexError, ValueError)
