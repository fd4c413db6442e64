"""Queries a retriever cannot answer are reported, and SGR's "no routed document" gets the lexical fallback.

A term that is never among a document's top TF-IDF terms has no branch and no routing row, so a
query made of such terms routes no document (kernel status EMPTY with known terms).  The tiny
corpus below makes "common" such a term (``n_memberships=1``, ``cooc_top=1``).
"""

import math

import numpy as np
import pytest

from jkofast.pools.retrievers import get_retriever
from jkofast.sgr.config import SGRConfig
from jkofast.sgr.retriever import SparseGeometricRetriever
from jkofast.sparse.report import NO_KNOWN_TERM, NO_ROUTED_DOC, OK, SearchReport

DOCS = [
    "apple apple apple common",
    "cherry cherry cherry common common",
    "melon melon melon common kiwi",
    "lemon lemon lemon common common lime",
    "apple cherry cherry cherry common",
    "grape grape grape grape",
]
SMALL = dict(n_memberships=1, cooc_top=1, pool_size=5)
# "common": known, routes nothing; "apple": routed; "zzz" / "": no known term
QUERIES = ["common", "apple", "zzz", "", "common common zzz"]


def _oracle_bm25(docs, query, k1=1.2, b=0.75, binary=False):
    """Dense float64 BM25 (Lucene idf, (k1 + 1) numerator) of the distinct query tokens, per document."""
    toks = [d.split() for d in docs]
    n = len(toks)
    avgdl = sum(map(len, toks)) / n
    out = np.zeros(n)
    for q in sorted(set(query.split())):
        df = sum(q in t for t in toks)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, t in enumerate(toks):
            f = min(t.count(q), 1) if binary else t.count(q)
            if f:
                out[i] += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(t) / avgdl))
    return out


def _ranked(scores, k):
    """Positive-score rows by score desc, ties to the lowest row, at most ``k``."""
    rows = np.flatnonzero(scores > 0)
    return rows[np.lexsort((rows, -scores[rows]))][:k]


@pytest.fixture(scope="module")
def retr():
    return SparseGeometricRetriever(**SMALL).fit(DOCS)


def test_report_statuses_and_summary(retr):
    idx, sc, rep = retr.search(QUERIES, k=3, return_report=True)
    assert isinstance(rep, SearchReport)
    assert rep.status.tolist() == [NO_ROUTED_DOC, OK, NO_KNOWN_TERM, NO_KNOWN_TERM, NO_ROUTED_DOC]
    assert rep.fallback.tolist() == [True, False, False, False, True]
    assert rep.n_results.tolist() == (idx >= 0).sum(axis=1).tolist()
    assert rep.empty.tolist() == [2, 3]
    assert rep.counts() == {"no_known_term": 2, "no_routed_document": 2, "fallback": 2, "empty": 2}
    names = ["q0", "q1", "q2", "q3", "q4"]
    text = rep.summary(names)
    assert "2 queries with no known term (q2, q3): 2 with no result" in text
    assert "2 queries with no routed document (q0, q4): 2 answered by the lexical fallback" in text
    assert rep.to_dict(names)["no_routed_document_queries"] == ["q0", "q4"]
    assert rep.summary(names, max_names=1).count("+1 more") == 2
    # the plain call returns the same rows, as a pair
    idx2, sc2 = retr.search(QUERIES, k=3)
    np.testing.assert_array_equal(idx, idx2)
    np.testing.assert_array_equal(sc, sc2)


@pytest.mark.parametrize("postings", [True, False])
def test_lexical_fallback_matches_bm25_oracle(postings):
    r = SparseGeometricRetriever(**SMALL, postings=postings).fit(DOCS)
    for q in ("common", "common common zzz"):
        idx, sc, rep = r.search([q], k=4, return_report=True)
        assert rep.status[0] == NO_ROUTED_DOC and rep.fallback[0]
        ref = _oracle_bm25(DOCS, q, binary=not postings)
        want = _ranked(ref, 4)
        np.testing.assert_array_equal(idx[0, : want.size], want)
        assert (idx[0, want.size :] == -1).all()
        np.testing.assert_allclose(sc[0, : want.size], ref[want], rtol=1e-6)
        assert (np.diff(sc[0, : want.size]) < 0).all()  # strictly decreasing, ties capped as search's


def test_fallback_tie_goes_to_lowest_row_and_pool_size_caps(retr):
    # docs 2 and 4 hold "common" once in 5 tokens: equal BM25, lower row first, then capped below
    ref = _oracle_bm25(DOCS, "common")
    assert ref[2] == ref[4]
    idx, sc = retr.search(["common"], k=10)
    assert idx[0].tolist()[:5] == [1, 3, 0, 2, 4] and (idx[0, 5:] == -1).all()  # pool_size = 5
    assert sc[0, 4] == np.nextafter(sc[0, 3], np.float32(-np.inf))


def test_none_is_the_published_output(retr):
    lex_idx, lex_sc = retr.search(QUERIES, k=3)
    r = SparseGeometricRetriever(**SMALL, empty_fallback="none").fit(DOCS)
    idx, sc, rep = r.search(QUERIES, k=3, return_report=True)
    # the published rows: the kernel's pool, untouched (empty rows for no routed document)
    pool = r.pool(QUERIES)
    np.testing.assert_array_equal(idx, pool.doc[:, :3])
    assert not rep.fallback.any() and rep.status[0] == NO_ROUTED_DOC and rep.n_results[0] == 0
    assert "2 with no result" in rep.summary()
    # queries the method answers are byte-identical under both settings
    ok = rep.status == OK
    np.testing.assert_array_equal(idx[ok], lex_idx[ok])
    assert idx[ok].tobytes() == lex_idx[ok].tobytes() and sc[ok].tobytes() == lex_sc[ok].tobytes()
    # set_params switches it on a fitted index without a rebuild
    r.set_params(empty_fallback="lexical")
    np.testing.assert_array_equal(r.search(QUERIES, k=3)[0], lex_idx)


def test_fallback_thread_invariant_and_counts_path(retr):
    qs = QUERIES * 8  # >= SERIAL_BELOW: the parallel kernel
    a = retr.search(qs, k=3, n_threads=1)
    b = retr.search(qs, k=3, n_threads=2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    # search_counts reports and falls back the same way
    import scipy.sparse as sp

    j = retr.vocabulary_["common"]
    q = sp.csr_matrix(([2.0], ([0], [j])), shape=(1, retr.n_terms_))
    r2 = SparseGeometricRetriever(**SMALL).fit(DOCS)
    idx, _, rep = r2.search_counts(q, k=3, return_report=True)
    assert rep.status[0] == NO_ROUTED_DOC and rep.fallback[0]
    np.testing.assert_array_equal(idx[0], retr.search(["common"], k=3)[0][0])


def test_config_switch_checked_and_saved(tmp_path):
    assert SGRConfig().empty_fallback == "lexical"
    with pytest.raises(ValueError, match="empty_fallback"):
        SGRConfig(empty_fallback="bm25")
    with pytest.raises(TypeError, match="return_report"):
        r0 = SparseGeometricRetriever(**SMALL).fit(DOCS)
        r0.search(["common"], k=3, return_report=1)
    assert SGRConfig(empty_fallback=None).empty_fallback == "none"  # --param empty_fallback=none
    r = SparseGeometricRetriever(**SMALL, empty_fallback="none").fit(DOCS)
    r.save(str(tmp_path / "ix"))
    back = SparseGeometricRetriever.load(str(tmp_path / "ix"))
    assert back.config.empty_fallback == "none"
    assert back.search(["common"], k=3)[0].tolist() == [[-1, -1, -1]]


@pytest.mark.parametrize("method", ["bm25", "bm25-lucene", "tfidf"])
def test_sparse_no_known_term_reported(method):
    r = get_retriever(method).fit(DOCS)
    idx, sc, rep = r.search(["apple", "zzz qqq", ""], k=3, return_report=True)
    assert rep.status.tolist() == [OK, NO_KNOWN_TERM, NO_KNOWN_TERM]
    # nothing matched: every document scores 0, the row is corpus-order filler
    assert rep.filler.tolist() == [False, True, True]
    assert idx[1].tolist() == [0, 1, 2] and (sc[1] == 0).all()
    assert "2 queries with no known term (q1, q2): 2 filled with score-0 documents" in rep.summary(["q0", "q1", "q2"])
    plain = r.search(["apple", "zzz qqq", ""], k=3)
    assert len(plain) == 2
    with pytest.raises(TypeError, match="return_report"):
        r.search(["apple"], k=3, return_report="yes")
    np.testing.assert_array_equal(plain[0], idx)


def test_report_from_outputs_edge_cases():
    rep = SearchReport.from_outputs(np.zeros((0, 3), np.int64), [])
    assert rep.n_queries == 0 and rep.summary() == "" and rep.counts()["empty"] == 0
    rep = SearchReport.from_outputs(np.array([[3, -1], [-1, -1]]), [OK, OK])
    assert rep.summary(["a", "b"]) == "1 query with no result (b)"
