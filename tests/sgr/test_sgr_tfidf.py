"""The SGR index's counts and TF-IDF rows: scikit-learn's arrays bit for bit, without scikit-learn."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer
from sklearn.preprocessing import normalize

import reference as ref
from jkofast._threads import over_ranges
from jkofast.kernels.sgr.build import l2_rows_in_order
from jkofast.sgr import _tfidf
from jkofast.sgr.retriever import TOKEN_PATTERN, SparseGeometricRetriever
from jkofast.text.analyzer import Analyzer
from jkofast.text.scripts import script_tokenizer

TEXTS = [
    "The cat sat on the mat; the cat sat again",
    "Ünïcode naïve café, ČŘ İstanbul and the ﬁne print",
    "",
    "a b c",  # no token of two characters
    "zeta alpha alpha zeta beta gamma alpha",
    "gamma delta the cat 42 x1 x2 __ z9_q",
    "dog_1 chased THE cat: é-accent Ünïcode 42",
] * 3


def _index_arrays(texts_or_counts, **params):
    """``(X, counts, dl, idf, terms)`` as the retriever hands them to its build."""
    got = {}

    def build(self, X, counts, dl, idf, n_threads):
        got.update(X=X, C=counts, dl=dl, idf=idf, terms=self.terms_)

    r = SparseGeometricRetriever(**params)
    r._build = build.__get__(r)
    r.fit(texts_or_counts)
    return got


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def _assert_same_csr(a, b):
    a, b = a.tocsr(), b.tocsr()
    assert a.shape == b.shape
    assert_array_equal(a.indptr, b.indptr)
    assert_array_equal(a.indices, b.indices)
    _same_bits(a.data, b.data)


@pytest.mark.parametrize("max_features", [50_000, 9])
def test_fit_gives_scikit_learns_counts_tfidf_idf_and_dl(max_features):
    got = _index_arrays(TEXTS, max_features=max_features)
    cv = CountVectorizer(analyzer=script_tokenizer(TOKEN_PATTERN), max_features=max_features, dtype=np.float32)
    C = cv.fit_transform(TEXTS)
    tr = TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)
    X = tr.fit_transform(C).tocsr().astype(np.float32)
    X.sort_indices()
    C = C.tocsr()
    C.sort_indices()
    assert got["terms"] == cv.get_feature_names_out().tolist()
    if max_features == 9:
        assert len(got["terms"]) == 9  # the cut was made
    _assert_same_csr(got["X"], X)
    _assert_same_csr(got["C"], C)
    _same_bits(got["idf"], np.asarray(tr.idf_, np.float64))
    assert_array_equal(got["dl"], [len(script_tokenizer(TOKEN_PATTERN)(t)) for t in TEXTS])


def test_a_cut_at_large_term_frequencies_is_scikit_learns_own(monkeypatch):
    # frequencies of 2**24 and more leave the cut to scikit-learn (its float32 sums); the same arrays here
    want = _tfidf.count_matrix(TEXTS, Analyzer(TOKEN_PATTERN), 9)
    monkeypatch.setattr(_tfidf, "EXACT_F32", 1)
    got = _tfidf.count_matrix(TEXTS, Analyzer(TOKEN_PATTERN), 9)
    assert got[4] == want[4]  # terms
    for a, b in zip(got[:4] + got[5:], want[:4] + want[5:], strict=True):
        _same_bits(a, b)


def test_fit_from_counts_gives_scikit_learns_tfidf_with_counts_of_every_size():
    # counts of 1e9 next to counts of 1: float64 row sums that round
    rng = np.random.default_rng(3)
    dense = rng.integers(0, 4, (30, 12)).astype(np.float32)
    dense[::3, 5] = 1e9
    dense[1::4, 0] = 3e8
    C = sp.csr_matrix(dense)
    got = _index_arrays(C)
    tr = TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)
    X = tr.fit_transform(C).tocsr().astype(np.float32)
    X.sort_indices()
    _assert_same_csr(got["X"], X)
    _same_bits(got["idf"], np.asarray(tr.idf_, np.float64))


def _shuffled_rows(n_rows=40, seed=0):
    """A float32 CSR whose rows are stored out of column order, with values of very different sizes.

    Every fourth row holds 3e9 and seven 30s, the large value stored first but in the last column:
    their float64 sum of squares depends on the order of addition (each 900 added to 9e18 is lost).
    """
    rng = np.random.default_rng(seed)
    indptr = np.zeros(n_rows + 1, np.int64)
    cols, vals = [], []
    for i in range(n_rows):
        if i % 4 == 0:
            c, v = np.array([19, 0, 1, 2, 3, 4, 5, 6]), np.array([3e9] + [30.0] * 7)
        else:
            k = int(rng.integers(0, 9))
            c = rng.permutation(20)[:k]
            v = rng.choice([1.0, 3.0, 7e4, 5e7], k) * rng.uniform(0.5, 2.0, k)
        cols.append(c)
        vals.append(v.astype(np.float32))
        indptr[i + 1] = indptr[i] + len(c)
    return indptr, np.concatenate(cols).astype(np.int64), np.concatenate(vals).astype(np.float32)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_l2_rows_in_order_is_the_oracle_and_scikit_learns_normalize(n_threads):
    indptr, stored_cols, stored = _shuffled_rows()
    n = indptr.shape[0] - 1
    # canonical (column-sorted) arrays and, per row, the canonical positions in stored order
    rows = np.repeat(np.arange(n), np.diff(indptr))
    canon = np.lexsort((stored_cols, rows))
    order = np.empty_like(canon)
    order[canon] = np.arange(canon.shape[0])
    x = stored[canon].copy()
    over_ranges(l2_rows_in_order, n, n_threads, indptr, order, x)
    _same_bits(x, ref.sgr_l2_rows_in_order(indptr, order, stored[canon]))
    S = sp.csr_matrix((stored.copy(), stored_cols, indptr), shape=(n, 20))
    Y = normalize(S, norm="l2", copy=True)  # scikit-learn sums each row in its stored order
    _same_bits(x, Y.data[canon])


def test_count_matrix_orders_rows_as_scikit_learn_stores_them():
    analyzer = Analyzer(TOKEN_PATTERN)
    indptr, indices, counts, _, terms, order = _tfidf.count_matrix(["bb aa cc aa", "cc dd bb"], analyzer, None)
    assert terms == ["aa", "bb", "cc", "dd"]
    assert_array_equal(indices, [0, 1, 2, 1, 2, 3])
    # first seen: bb, aa, cc, dd -> row 0 stored as bb, aa, cc; row 1 as bb, cc, dd
    assert_array_equal(order, [1, 0, 2, 3, 4, 5])


def test_fit_raises_on_a_corpus_without_tokens():
    with pytest.raises(ValueError, match="no token matches"):
        SparseGeometricRetriever().fit(["a b", "", "c"])


def test_fitting_from_texts_does_not_import_scikit_learn():
    code = (
        "import sys\n"
        "from jkofast.sgr.retriever import SparseGeometricRetriever\n"
        "SparseGeometricRetriever(pool_size=3).fit(['aa bb', 'bb cc', 'cc aa dd'])\n"
        "print('sklearn' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
