"""The sparse basis: Vocabulary term counts and ``counts_from_token_ids`` (CSR counting kernels)."""

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer

from jkofast.sparse.vocabulary import Vocabulary, counts_from_token_ids
from jkofast.text.analyzer import Analyzer
from jkofast.text.patterns import SKLEARN

TEXTS = [
    "The cat sat on the mat; a cat!",
    "A dog_1 chased THE cat: é-accent Ünïcode 42",
    "",
    "x y z x x",
    "Birds fly over the dog and the cat.",
]


def test_max_features_matches_sklearn_and_doc_len_counts_cut_terms():
    v = Vocabulary(Analyzer(SKLEARN), max_features=3)
    indptr, indices, counts, doc_len = v.fit_transform(TEXTS)
    cv = CountVectorizer(max_features=3)
    X = cv.fit_transform(TEXTS)
    assert v.terms == cv.get_feature_names_out().tolist()
    full = CountVectorizer().fit_transform(TEXTS).toarray().sum(1)
    np.testing.assert_array_equal(doc_len, full)  # SPEC B.2: dl counts out-of-vocabulary tokens
    np.testing.assert_array_equal(np.diff(indptr), np.diff(X.indptr))
    assert counts.sum() == X.sum()


def test_errors():
    v = Vocabulary()
    with pytest.raises(RuntimeError, match="not fitted"):
        v.transform(["a"])
    with pytest.raises(TypeError, match="texts must be a list"):
        v.fit_transform("a single string")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        v.fit_transform(["a", 3])
    with pytest.raises(ValueError, match="must not be empty"):
        v.fit_transform([])
    with pytest.raises(ValueError, match="texts"):
        Vocabulary(Analyzer(SKLEARN)).fit_transform(["a", "b"])  # empty vocabulary
    with pytest.raises(ValueError, match="max_features"):
        Vocabulary(max_features=0)


def test_counts_from_token_ids_matches_naive():
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 7, rng.integers(0, 9)) for _ in range(12)]
    indptr, indices, counts, doc_len, n_terms = counts_from_token_ids(docs, 10)
    assert n_terms == 10
    for i, d in enumerate(docs):
        u, c = np.unique(d, return_counts=True)
        s = slice(indptr[i], indptr[i + 1])
        np.testing.assert_array_equal(indices[s], u)
        np.testing.assert_array_equal(counts[s], c)
        assert doc_len[i] == d.size
    flat = np.concatenate(docs)
    off = np.r_[0, np.cumsum([d.size for d in docs])]
    again = counts_from_token_ids((flat, off))
    np.testing.assert_array_equal(again[1], indices)
    with pytest.raises(ValueError, match="n_terms"):
        counts_from_token_ids(docs, 3)
    with pytest.raises(ValueError, match="non-negative"):
        counts_from_token_ids([np.array([-1, 2])])
    with pytest.raises(TypeError, match="integers"):
        counts_from_token_ids([np.array([1.5])])


def test_token_id_input_is_validated_before_the_kernels():
    # a 2-D document array reached the sort kernel (SystemError, then a heap-corruption abort)
    from jkofast.sparse.index import BM25Index

    with pytest.raises(ValueError, match=r"token_ids\[0\] must be a 1-D array"):
        counts_from_token_ids([np.array([[1, 2]])])
    with pytest.raises(ValueError, match=r"token_ids\[0\] must be a 1-D array"):
        BM25Index().fit_token_ids([np.array([[1, 2]])])
    with pytest.raises(ValueError, match="flat array must be 1-D"):
        counts_from_token_ids((np.array([[1, 2]]), np.array([0, 2])))
    with pytest.raises(TypeError, match="flat array must hold integers"):
        counts_from_token_ids((np.array([1.5, 2.0]), np.array([0, 2])))  # was truncated to ids 1, 2
    # an absurd id sized every per-term table (1e12 + 1 entries: a 74.5 GiB allocation)
    with pytest.raises(ValueError, match="map the ids to a dense range"):
        counts_from_token_ids([np.array([10**12])])
    ip, ix, cnt, dl, V = counts_from_token_ids([np.array([3, 1, 3]), np.array([0])])
    assert ip.tolist() == [0, 2, 3] and ix.tolist() == [1, 3, 0] and cnt.tolist() == [1, 2, 1]
    assert dl.tolist() == [3, 1] and V == 4
