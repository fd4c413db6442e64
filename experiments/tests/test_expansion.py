"""experiments/expansion.py (RM3 / graph expansion, weighted scoring, Dirichlet QL, pool propagation)
against naive dense oracles."""

import numpy as np
import pytest
import scipy.sparse as sp
from expansion import (
    dirichlet_ql,
    graph_queries,
    interpolate_queries,
    propagate_scores,
    rm3_queries,
    score_weighted,
    weighted_rows_topn,
)

from jkofast._threads import numba_threads


def _rand_counts(rng, n, V, density=0.3):
    D = rng.integers(0, 4, size=(n, V)).astype(np.float64)
    D[rng.random((n, V)) > density] = 0.0
    return D


def _topn_oracle(e, n_top):
    """Keep the n_top largest positive entries (ties -> lowest index), renormalise."""
    out = np.zeros_like(e)
    order = sorted((i for i in range(e.size) if e[i] > 0), key=lambda i: (-e[i], i))[:n_top]
    if order:
        out[order] = e[order] / e[order].sum()
    return out


def test_weighted_rows_topn_matches_dense_oracle():
    rng = np.random.default_rng(0)
    M = _rand_counts(rng, 7, 12)
    sel_ptr = np.array([0, 3, 3, 5, 7])  # query 1 selects nothing
    sel_rows = np.array([0, 2, 5, 1, 1, 6, 3])  # a row selected twice in query 2
    sel_w = rng.random(7)
    for norm in (False, True):
        for n_top in (1, 3, 50):
            E = weighted_rows_topn(sel_ptr, sel_rows, sel_w, sp.csr_matrix(M), n_top, row_normalise=norm)
            for q in range(4):
                e = np.zeros(12)
                for s in range(sel_ptr[q], sel_ptr[q + 1]):
                    row = M[sel_rows[s]]
                    e += sel_w[s] * (row / row.sum() if norm and row.sum() > 0 else row)
                np.testing.assert_allclose(
                    E[q].toarray().ravel(),
                    _topn_oracle(e, n_top),
                    rtol=1e-12,
                    atol=1e-15,
                )
            assert E[1].nnz == 0
            assert E.has_canonical_format


def test_weighted_rows_topn_ties_keep_lowest_term_and_threads_invariant():
    M = sp.csr_matrix(np.array([[0.0, 1.0, 1.0, 1.0, 0.5]]))
    E = weighted_rows_topn(np.array([0, 1]), np.array([0]), np.array([1.0]), M, 2)
    assert E.indices.tolist() == [1, 2] and np.allclose(E.data, 0.5)
    rng = np.random.default_rng(3)
    M = sp.csr_matrix(_rand_counts(rng, 40, 30))
    sel_ptr = np.arange(0, 121, 3)
    sel_rows = rng.integers(0, 40, 120)
    sel_w = rng.random(120)
    with numba_threads(1):
        a = weighted_rows_topn(sel_ptr, sel_rows, sel_w, M, 5, row_normalise=True)
    with numba_threads(2):
        b = weighted_rows_topn(sel_ptr, sel_rows, sel_w, M, 5, row_normalise=True)
    np.testing.assert_array_equal(a.toarray(), b.toarray())


def test_weighted_rows_topn_validation():
    M = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match="sel_w must be non-negative"):
        weighted_rows_topn([0, 1], [0], [-1.0], M, 2)
    with pytest.raises(ValueError, match="sel_rows must be row indices"):
        weighted_rows_topn([0, 1], [3], [1.0], M, 2)
    with pytest.raises(ValueError, match="M must be non-negative"):
        weighted_rows_topn([0, 1], [0], [1.0], sp.csr_matrix(-np.eye(3)), 2)
    with pytest.raises(ValueError, match="n_top"):
        weighted_rows_topn([0, 1], [0], [1.0], M, 0)


def test_rm3_queries_oracle():
    rng = np.random.default_rng(1)
    D = _rand_counts(rng, 9, 15, 0.5)
    D[4] = 0.0  # an empty feedback document contributes nothing
    Q = _rand_counts(rng, 3, 15, 0.2)
    Q[2] = 0.0  # a query with no known term: pure relevance model
    fb_idx = np.array([[0, 4, 2], [5, 6, -1], [7, 8, 1]])
    fb_sc = np.array([[3.0, 1.0, 2.0], [0.5, 0.5, 9.0], [0.0, 0.0, 0.0]])  # all-zero -> uniform
    for n_terms, lam in ((4, 0.3), (20, 0.5)):
        out = rm3_queries(
            sp.csr_matrix(Q),
            sp.csr_matrix(D),
            fb_idx,
            fb_sc,
            n_terms=n_terms,
            weight=lam,
        ).toarray()
        for q in range(3):
            ok = fb_idx[q] >= 0
            w = fb_sc[q][ok]
            w = w / w.sum() if w.sum() > 0 else np.full(ok.sum(), 1.0 / ok.sum())
            rel = np.zeros(15)
            for d, wd in zip(fb_idx[q][ok], w, strict=True):
                if D[d].sum() > 0:
                    rel += wd * D[d] / D[d].sum()
            rel = _topn_oracle(rel, n_terms)
            qn = Q[q] / Q[q].sum() if Q[q].sum() > 0 else Q[q]
            expect = ((1 - lam) * qn + lam * rel if qn.sum() > 0 else rel) if rel.sum() > 0 else qn
            np.testing.assert_allclose(out[q], expect, rtol=1e-12, atol=1e-15)
        # rows sum to 1 (query 2 has no term: the relevance model alone)
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-12)


def test_rm3_weight_zero_is_the_normalised_query_and_validation():
    rng = np.random.default_rng(2)
    D = sp.csr_matrix(_rand_counts(rng, 5, 8, 0.6))
    Q = _rand_counts(rng, 2, 8, 0.5) + np.eye(2, 8)
    out = rm3_queries(sp.csr_matrix(Q), D, np.array([[0, 1], [2, 3]]), np.ones((2, 2)), weight=0.0).toarray()
    np.testing.assert_allclose(out, Q / Q.sum(axis=1, keepdims=True), rtol=1e-12)
    with pytest.raises(ValueError, match="weight must be in"):
        rm3_queries(sp.csr_matrix(Q), D, np.array([[0, 1], [2, 3]]), np.ones((2, 2)), weight=1.5)
    with pytest.raises(ValueError, match="fb_scores must have the shape"):
        rm3_queries(sp.csr_matrix(Q), D, np.array([[0, 1], [2, 3]]), np.ones((2, 3)))


def test_graph_queries_oracle():
    rng = np.random.default_rng(4)
    A = rng.random((10, 10))
    A[A < 0.6] = 0.0
    Q = _rand_counts(rng, 3, 10, 0.3)
    out = graph_queries(sp.csr_matrix(Q), sp.csr_matrix(A), n_terms=3, weight=0.25).toarray()
    for q in range(3):
        e = _topn_oracle(Q[q] @ A, 3)
        qn = Q[q] / Q[q].sum() if Q[q].sum() > 0 else Q[q]
        np.testing.assert_allclose(out[q], 0.75 * qn + 0.25 * e if e.sum() > 0 else qn, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="A must be"):
        graph_queries(sp.csr_matrix(Q), sp.csr_matrix(np.eye(4)))


def test_interpolate_queries_shapes():
    with pytest.raises(ValueError, match="same shape"):
        interpolate_queries(sp.csr_matrix(np.ones((1, 3))), sp.csr_matrix(np.ones((1, 4))), 0.5)


def test_score_weighted_matches_postings_product():
    from jkofast.sparse.index import BM25Index

    docs = [
        "the cat sat on the mat",
        "dogs chase cats",
        "a cat and a dog",
        "nothing here",
        "",
    ]
    idx = BM25Index("lucene").fit(docs)
    rng = np.random.default_rng(5)
    Qw = rng.random((3, idx.n_terms))
    Qw[Qw < 0.5] = 0.0
    got = score_weighted(idx, sp.csr_matrix(Qw), dtype=np.float64)
    W = idx.postings_matrix().toarray().astype(np.float64)  # (n_docs, V)
    np.testing.assert_allclose(got, Qw @ W.T, rtol=1e-6)
    # integer counts of the analysed queries reproduce score_all
    q_ptr, q_terms, q_w = idx.query_csr(["cat dog", "mat"])
    Q = sp.csr_matrix((q_w, q_terms, q_ptr), shape=(2, idx.n_terms))
    np.testing.assert_allclose(score_weighted(idx, Q), idx.score_all(["cat dog", "mat"]), rtol=1e-6)
    with pytest.raises(ValueError, match="columns"):
        score_weighted(idx, sp.csr_matrix(np.ones((1, idx.n_terms + 1))))


def test_dirichlet_ql_is_rank_equivalent_to_the_log_likelihood():
    rng = np.random.default_rng(6)
    D = _rand_counts(rng, 8, 12, 0.5)
    D[:, 11] = 0.0  # a term absent from the collection is ignored
    Q = _rand_counts(rng, 3, 12, 0.4)
    Q[:, 11] = 1.0
    mu = 50.0
    got = dirichlet_ql(sp.csr_matrix(D), sp.csr_matrix(Q), mu)
    pc = D.sum(axis=0) / D.sum()
    dl = D.sum(axis=1)
    for q in range(3):
        ll = np.array(
            [
                sum(Q[q, w] * np.log((D[d, w] + mu * pc[w]) / (dl[d] + mu)) for w in range(11) if Q[q, w] > 0)
                for d in range(8)
            ]
        )
        const = sum(Q[q, w] * np.log(pc[w]) for w in range(11) if Q[q, w] > 0)  # per-query constant
        np.testing.assert_allclose(got[q], ll - const, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="mu"):
        dirichlet_ql(sp.csr_matrix(D), sp.csr_matrix(Q), 0.0)


def test_propagate_scores_oracle_and_threads():
    rng = np.random.default_rng(7)
    X = rng.random((13, 9))
    X[X < 0.55] = 0.0
    X[4] = 0.0  # a document without terms: no neighbour, keeps its score
    off = np.array([0, 6, 6, 13])  # an empty pool
    r = rng.random(13)
    for k, beta in ((2, 0.3), (10, 1.0)):
        got = propagate_scores(r, off, sp.csr_matrix(X), k=k, beta=beta)
        for q in range(3):
            a, b = off[q], off[q + 1]
            Z = X[a:b]
            nrm = np.linalg.norm(Z, axis=1)
            C = (Z @ Z.T) / np.where(nrm > 0, nrm, 1)[:, None] / np.where(nrm > 0, nrm, 1)[None, :]
            for i in range(b - a):
                s = np.where((np.arange(b - a) != i) & (C[i] > 0), C[i], 0.0)
                nb = sorted((j for j in range(b - a) if s[j] > 0), key=lambda j: (-s[j], j))[:k]
                if nb:
                    expect = (1 - beta) * r[a + i] + beta * np.dot(s[nb], r[a:b][nb]) / s[nb].sum()
                else:
                    expect = r[a + i]
                np.testing.assert_allclose(got[a + i], expect, rtol=1e-6)
        assert got[4] == r[4]
    with numba_threads(1):
        g1 = propagate_scores(r, off, sp.csr_matrix(X), k=3, beta=0.2)
    with numba_threads(2):
        g2 = propagate_scores(r, off, sp.csr_matrix(X), k=3, beta=0.2)
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_array_equal(propagate_scores(r, off, sp.csr_matrix(X), k=3, beta=0.0), r)
    with pytest.raises(ValueError, match="beta"):
        propagate_scores(r, off, sp.csr_matrix(X), beta=1.5)
    with pytest.raises(ValueError, match="rows"):
        propagate_scores(r, off, sp.csr_matrix(X[:5]))


# ---- adversarial inputs (QA review) ---------------------------------------------------------
def test_float_selection_rows_and_graph_arguments_are_named():
    M = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3.0, 1]]))
    with pytest.raises(TypeError, match="sel_rows"):  # 0.5, 1.7 were truncated to rows 0, 1
        weighted_rows_topn([0, 2], [0.5, 1.7], [1.0, 1.0], M, 2)
    with pytest.raises(TypeError, match=r"A must be a scipy\.sparse"):
        graph_queries(M, np.eye(3))
    with pytest.raises(ValueError, match="A must be non-negative"):
        graph_queries(M, -sp.eye(3, format="csr"))


def test_dirichlet_ql_rejects_negative_and_non_finite_counts():
    M = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3.0, 1]]))
    with pytest.raises(ValueError, match="doc_tf must hold non-negative"):  # all-zero scores before
        dirichlet_ql(-M, M)
    with pytest.raises(ValueError, match="doc_tf contains NaN"):  # NaN scores before
        dirichlet_ql(M * np.nan, M)
    with pytest.raises(ValueError, match="Q contains NaN"):
        dirichlet_ql(M, M * np.inf)
    assert np.all(np.isfinite(dirichlet_ql(M, M)))


# --------------------------------------------------------------- QA round 2: bad input


def test_huge_n_terms_equals_the_vocabulary_cap():
    """n_terms = 10**12 asked for a 7 TiB (nq, n_top) table; a row holds at most V terms."""
    D = sp.csr_matrix(np.array([[1.0, 0, 2, 0], [0, 1, 1, 0], [3, 0, 0, 1]]))
    Q = sp.csr_matrix(np.array([[1.0, 0, 0, 0], [0, 0, 1, 0]]))
    fb = np.array([[0, 2], [1, 0]])
    fs = np.array([[1.0, 0.5], [1.0, 0.2]])
    a = rm3_queries(Q, D, fb, fs, n_terms=10**12, weight=0.5)
    b = rm3_queries(Q, D, fb, fs, n_terms=4, weight=0.5)
    np.testing.assert_array_equal(a.toarray(), b.toarray())
    A = sp.csr_matrix(np.array([[0, 1.0, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]]))
    np.testing.assert_array_equal(
        graph_queries(Q, A, n_terms=10**12, weight=0.5).toarray(), graph_queries(Q, A, n_terms=4, weight=0.5).toarray()
    )


def test_negative_or_non_finite_queries_are_named():
    D = sp.csr_matrix(np.array([[1.0, 0, 2, 0], [0, 1, 1, 0], [3, 0, 0, 1]]))
    A = sp.csr_matrix(np.array([[0, 1.0, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]]))
    neg = sp.csr_matrix(np.array([[-1.0, 0, 0, 0]]))
    nan = sp.csr_matrix(np.array([[np.nan, 0, 1.0, 0]]))
    fb, fs = np.array([[0, 2]]), np.array([[1.0, 0.5]])
    for Q, match in ((neg, "Q must be non-negative"), (nan, r"Q\.data contains NaN")):
        with pytest.raises(ValueError, match=match):  # rm3: negative weights / NaN rows returned
            rm3_queries(Q, D, fb, fs, n_terms=2, weight=0.5)
        with pytest.raises(ValueError, match=match):  # graph: the error named sel_w
            graph_queries(Q, A, n_terms=2, weight=0.5)
        with pytest.raises(ValueError, match=match):
            interpolate_queries(Q, sp.csr_matrix((1, 4)), 0.5)
    with pytest.raises(ValueError, match=r"E\.data contains NaN"):  # the NaN row was dropped silently
        interpolate_queries(sp.csr_matrix(np.array([[1.0, 0, 0, 0]])), nan, 0.5)
    # dense input is still taken
    np.testing.assert_allclose(
        interpolate_queries(np.array([[2.0, 0, 0, 0]]), np.zeros((1, 4)), 0.5).toarray(), [[1.0, 0, 0, 0]]
    )


def test_n_terms_errors_name_n_terms():
    Q = sp.csr_matrix(np.array([[1.0, 0]]))
    D = sp.csr_matrix(np.array([[1.0, 1.0]]))
    with pytest.raises(ValueError, match="n_terms must be >= 1"):  # named n_top, an inner argument
        rm3_queries(Q, D, np.array([[0]]), np.array([[1.0]]), n_terms=0)
    with pytest.raises(TypeError, match="n_terms must be an integer"):
        graph_queries(Q, (D.T @ D).tocsr(), n_terms=2.5)
