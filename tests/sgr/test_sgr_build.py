"""SparseGeometricRAG index build (SPEC B.2-B.5) vs the naive oracles in reference_sgr."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast._threads import numba_threads
from jkofast.sgr.retriever import SparseGeometricRetriever

SMALL = dict(
    n_memberships=4,
    centre_size=8,
    code_size=5,
    cooc_top=4,
    assoc_k=6,
    route_k=4,
    route_budget=6,
    pool_size=8,
    n_eligible=4,
    n_diverse=5,
)


def synthetic_corpus(n_docs=24, n_words=30, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i:02d}" for i in range(n_words)]
    prob = 1.0 / np.arange(1, n_words + 1) ** 0.8
    prob /= prob.sum()
    docs = []
    for _ in range(n_docs):
        n = int(rng.integers(3, 16))
        docs.append(" ".join(rng.choice(words, size=n, p=prob)))
    docs[3] = ""  # empty document
    docs[5] = "w07 w07 x"  # one term (fewer than F), plus a 1-char token (not a term)
    return docs


@pytest.fixture(scope="module")
def corpus():
    return synthetic_corpus()


@pytest.fixture(scope="module")
def built(corpus):
    r = SparseGeometricRetriever(reliability_float16=False, **SMALL).fit(corpus)
    X, idf, dl, _ = ref.sgr_tfidf(corpus)
    return r, X, idf, dl


def test_tfidf_basis(built):
    """The binary support is the non-zero pattern of X (the TF-IDF values themselves are
    checked through the centres and codes below); idf and dl as the oracle."""
    r, X, idf, dl = built
    ix = r._ix
    Sk = np.zeros(X.shape, bool)
    for d in range(X.shape[0]):
        s, e = ix["s_indptr"][d], ix["s_indptr"][d + 1]
        Sk[d, ix["s_idx"][s:e]] = True
    assert_array_equal(Sk, X != 0)
    assert_allclose(ix["idf"], idf, rtol=1e-12)
    assert_array_equal(ix["dl"], dl)
    assert dl[3] == 0 and dl[5] == 2  # "x" is not a token


def _oracle_positions(ix, mems):
    """Index of each oracle membership (doc-major order) in the stored (branch-major)
    arrays; a membership is identified by its (document, branch) pair."""
    where = {(int(d), int(j)): i for i, (d, j) in enumerate(zip(ix["mem_doc"], ix["mem_branch"], strict=True))}
    assert len(where) == len(mems) == ix["mem_doc"].shape[0]
    return np.array([where[(d, j)] for d, j, _ in mems], np.int64)


def test_memberships(built):
    r, X, _, _ = built
    ix = ref.wide_view(r._ix, r.params)
    mems = ref.sgr_memberships(X, SMALL["n_memberships"])
    pos = _oracle_positions(ix, mems)
    assert_allclose(ix["mem_m"][pos], [m for _, _, m in mems], rtol=1e-6)
    # stored branch-major (then by doc), so that b_mem is the identity
    assert np.all(np.diff(ix["mem_branch"]) >= 0)
    assert_array_equal(ix["b_mem"], np.arange(ix["mem_doc"].shape[0]))
    # memberships of a document sum to 1; the empty doc has none; doc 5 has one
    sums = np.bincount(ix["mem_doc"], weights=ix["mem_m"], minlength=X.shape[0])
    has = np.bincount(ix["mem_doc"], minlength=X.shape[0])
    assert_allclose(sums[has > 0], 1.0, rtol=1e-6)
    assert has[3] == 0 and has[5] == 1
    # branch postings list each branch's memberships in ascending doc order
    for j in range(r.n_terms_):
        ms = ix["b_mem"][ix["b_indptr"][j] : ix["b_indptr"][j + 1]]
        assert np.all(ix["mem_branch"][ms] == j)
        assert np.all(np.diff(ix["mem_doc"][ms]) > 0)


def test_centres(built):
    r, X, _, _ = built
    ix = ref.wide_view(r._ix, r.params)
    mems = ref.sgr_memberships(X, SMALL["n_memberships"])
    C = ref.sgr_centres(X, mems, SMALL["centre_size"])
    Ck = np.zeros_like(C)
    for j in range(r.n_terms_):
        a, b = ix["c_indptr"][j], ix["c_indptr"][j + 1]
        assert np.all(np.diff(ix["c_terms"][a:b]) > 0)
        assert b - a <= SMALL["centre_size"]
        Ck[j, ix["c_terms"][a:b]] = ix["c_vals"][a:b]
    assert_allclose(Ck, C, rtol=1e-6, atol=1e-7)
    assert_allclose(ix["c_norm"], np.linalg.norm(Ck, axis=1), rtol=1e-6)


def test_codes_and_reliability(built):
    r, X, _, _ = built
    ix = ref.wide_view(r._ix, r.params)
    mems = ref.sgr_memberships(X, SMALL["n_memberships"])
    C = ref.sgr_centres(X, mems, SMALL["centre_size"])
    codes = ref.sgr_codes(X, C, mems, SMALL["code_size"])
    W = ref.sgr_reliability(codes, mems, r.n_terms_)
    pos = _oracle_positions(ix, mems)
    for mo, (t, s, c) in enumerate(codes):
        m = pos[mo]
        n = ix["code_count"][m]
        assert n == min(SMALL["code_size"], np.count_nonzero(X[mems[mo][0]]))
        assert_array_equal(ix["code_term"][m, :n], t)
        assert_array_equal(ix["code_sign"][m, :n], s)
        assert_allclose(ix["code_cval"][m, :n], c, rtol=1e-7)
        assert_allclose(ix["code_w"][m, :n], W[mo], rtol=1e-6)
        # padding: -1, or the dtype's maximum once stored as uint16 (V <= 65,535)
        pad = -1 if ix["code_term"].dtype.kind == "i" else np.iinfo(ix["code_term"].dtype).max
        assert np.all(ix["code_term"][m, n:] == pad)
    # weights have mean 1 over each branch's distinct (j, t) entries
    for j in np.unique(ix["mem_branch"]):
        ms = np.flatnonzero(ix["mem_branch"] == j)
        wt = {}
        for m in ms:
            for a in range(ix["code_count"][m]):
                wt[int(ix["code_term"][m, a])] = ix["code_w"][m, a]
        assert_allclose(np.mean(list(wt.values())), 1.0, rtol=1e-6)


def test_reliability_float16_and_occurrence_mean(corpus):
    X = ref.sgr_tfidf(corpus)[0]
    mems = ref.sgr_memberships(X, 4)
    codes = ref.sgr_codes(X, ref.sgr_centres(X, mems, 8), mems, 5)
    r16 = SparseGeometricRetriever(**SMALL).fit(corpus)
    rocc = SparseGeometricRetriever(reliability_float16=False, reliability_mean="occurrence", **SMALL).fit(corpus)
    W = ref.sgr_reliability(codes, mems, r16.n_terms_)
    Wocc = ref.sgr_reliability(codes, mems, r16.n_terms_, weighted_mean=True)
    w16, wocc = ref.wide_view(r16._ix, r16.params), ref.wide_view(rocc._ix, rocc.params)
    p16, pocc = _oracle_positions(w16, mems), _oracle_positions(wocc, mems)
    for m in range(len(codes)):
        n = w16["code_count"][p16[m]]
        assert_array_equal(w16["code_w"][p16[m], :n], W[m].astype(np.float16).astype(np.float32))
        assert_allclose(wocc["code_w"][pocc[m], :n], Wocc[m], rtol=1e-6)


@pytest.mark.parametrize("include_self", [False, True])
def test_term_graphs(corpus, include_self):
    r = SparseGeometricRetriever(ppmi_include_self=include_self, **SMALL).fit(corpus)
    X = ref.sgr_tfidf(corpus)[0]
    A = ref.sgr_ppmi(X, SMALL["cooc_top"], SMALL["assoc_k"], include_self=include_self)
    G = ref.sgr_second_order(A, SMALL["route_k"])
    ix = r._ix
    V = r.n_terms_
    Ak = np.zeros((V, V))
    Gk = np.zeros((V, V))
    for t in range(V):
        a, b = ix["a_indptr"][t], ix["a_indptr"][t + 1]
        assert np.all(np.diff(ix["a_idx"][a:b]) > 0)
        Ak[t, ix["a_idx"][a:b]] = ix["a_val"][a:b]
        a, b = ix["g_indptr"][t], ix["g_indptr"][t + 1]
        assert np.all(np.diff(ix["g_idx"][a:b]) > 0)
        Gk[t, ix["g_idx"][a:b]] = ix["g_val"][a:b]
    assert_allclose(Ak, A, rtol=1e-6, atol=1e-9)
    assert_allclose(Gk, G, rtol=1e-5, atol=1e-7)
    assert np.all(np.diag(Gk) == 0)
    assert (np.diag(Ak) > 0).any() == include_self or not include_self


@pytest.mark.parametrize("n_chunks", [1, 3])
def test_second_order_graph_ties_go_to_the_lowest_term_id(n_chunks):
    # rows of four entries 0.5 are unit rows and every cosine is an exact multiple of 0.25, so rows
    # are full of exact ties: the kept neighbours must be the largest, ties -> lowest term id
    import scipy.sparse as sp

    from jkofast.kernels.sgr.build import second_order_graph

    rng = np.random.default_rng(7)
    V, n_cols, n_keep = 14, 9, 3
    dense = np.zeros((V, n_cols))
    for term in range(V):
        dense[term, rng.choice(n_cols, 4, replace=False)] = 0.5
    A, AT = sp.csr_matrix(dense), sp.csr_matrix(dense.T)
    nbr = np.full((V, n_keep), -1, np.int32)
    val = np.zeros((V, n_keep))
    cnt = np.zeros(V, np.int64)
    args = (A.indptr.astype(np.int64), A.indices.astype(np.int32), A.data, AT.indptr.astype(np.int64))
    args += (AT.indices.astype(np.int32), AT.data, V, n_keep, n_chunks, nbr, val, cnt)
    second_order_graph(*args, 0, n_chunks)  # every chunk on this thread
    G = dense @ dense.T
    np.fill_diagonal(G, 0.0)
    for term in range(V):
        cand = [k for k in range(V) if G[term, k] > 0]
        keep = sorted(sorted(cand, key=lambda k: (-G[term, k], k))[:n_keep])
        assert cnt[term] == len(keep)
        assert nbr[term, : cnt[term]].tolist() == keep
        assert_array_equal(val[term, : cnt[term]], G[term, keep])
    assert any(len(set(G[term][G[term] > 0])) < (G[term] > 0).sum() for term in range(V))  # ties were there to break


@pytest.mark.parametrize("mode", ["strongest", "lowest_term_id"])
def test_semantic_neighbour_lists(built, mode):
    r = built[0]
    r.set_params(semantic_neighbours=mode, semantic_k=2)
    try:
        ix = r._ix
        for t in range(r.n_terms_):
            a, b = ix["a_indptr"][t], ix["a_indptr"][t + 1]
            ids, vals = ix["a_idx"][a:b], ix["a_val"][a:b]
            if mode == "lowest_term_id":
                want = ids[:2]
            else:
                want = np.sort(ids[ref.sgr_top(vals, ids, 2)])
            s, e = ix["sem_indptr"][t], ix["sem_indptr"][t + 1]
            assert_array_equal(ix["sem_idx"][s:e], want)
    finally:
        r.set_params(semantic_neighbours="strongest", semantic_k=16)


def test_build_thread_invariance(corpus):
    with numba_threads(1):
        r1 = SparseGeometricRetriever(**SMALL).fit(corpus, n_threads=1)
    r2 = SparseGeometricRetriever(**SMALL).fit(corpus, n_threads=2)
    for k, v in r1._ix.items():
        assert_array_equal(v, r2._ix[k], err_msg=k)


def test_build_bad_input():
    with pytest.raises(ValueError, match="'d1'"):
        SparseGeometricRetriever().fit(["aa bb", "bb cc", "cc"], ids=["d0", "d1", "d1"])
    with pytest.raises(ValueError, match="texts"):
        SparseGeometricRetriever().fit(["", "a", "!"])
    with pytest.raises(TypeError, match="texts"):
        SparseGeometricRetriever().fit("just one string")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        SparseGeometricRetriever().fit(["aa", 3])
    with pytest.raises(ValueError, match="ids and texts"):
        SparseGeometricRetriever().fit(["aa bb"], ids=["a", "b"])
    with pytest.raises(ValueError, match="semantic_neighbours"):
        SparseGeometricRetriever(semantic_neighbours="best")
    with pytest.raises(TypeError, match="unknown"):
        SparseGeometricRetriever(poolsize=3)
    with pytest.raises(ValueError, match="pool_size"):
        SparseGeometricRetriever(pool_size=0)


def test_tiny_corpus_smaller_than_f_and_s():
    r = SparseGeometricRetriever().fit(["aa", "aa bb", ""])  # < F terms, < S coordinates
    idx, sc = r.search(["bb aa"], k=5)
    assert idx[0, 0] in (0, 1) and np.isfinite(sc[0, 0])
    assert set(idx[0][idx[0] >= 0].tolist()) <= {0, 1}


def test_term_doc_bitsets_and_uint16_support(built):
    """Derived query arrays: a document bitset for every term with 32·df >= N (bit d set
    iff d contains t, checked against the postings), none for the others; the binary
    support is stored as uint16 with the same term ids."""
    r, X, _, _ = built
    ix = r._ix
    N, V = r.n_docs_, r.n_terms_
    df = np.diff(ix["t_indptr"])
    rows = ix["tb_row"]
    assert_array_equal(rows >= 0, (df > 0) & (32 * df >= N))
    assert_array_equal(rows[rows >= 0], np.arange(int((rows >= 0).sum())))
    for t in range(V):
        if rows[t] < 0:
            continue
        words = ix["tb_bits"][rows[t]]
        bits = [(int(words[d >> 6]) >> (d & 63)) & 1 for d in range(N)]
        want = np.zeros(N, np.int64)
        want[r._query.term_docs(t)] = 1
        assert_array_equal(bits, want)
    assert ix["s_idx"].dtype == np.uint16
    assert_array_equal(ix["s_idx"].astype(np.int64), np.nonzero(X)[1])
