import re

import numpy as np
import pytest
import reference as ref
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

from jkofast.text import SKLEARN, WORD, Analyzer, Vocabulary, counts_from_token_ids

TEXTS = [
    "The cat sat on the mat; a cat!",
    "A dog_1 chased THE cat: é-accent Ünïcode 42",
    "",
    "x y z x x",
    "Birds fly over the dog and the cat.",
]


def test_word_pattern_matches_jko_rag_tokeniser():
    an = Analyzer("word")
    for t in TEXTS:
        assert an.tokenize(t) == ref.sparse_tokenize_word(t) == re.findall(r"\w+", t.lower())


def test_sklearn_pattern_and_stopwords():
    an = Analyzer("sklearn", stopwords="english")
    toks = an.tokenize(TEXTS[0])
    assert toks == ["cat", "sat", "mat", "cat"]  # 1-char "a" dropped, stop-words removed
    assert not set(toks) & ENGLISH_STOP_WORDS
    assert Analyzer(SKLEARN).tokenize("a bc") == ["bc"]
    assert Analyzer(WORD, lowercase=False).tokenize("Ab c") == ["Ab", "c"]
    with pytest.raises(ValueError, match="stopwords"):
        Analyzer(stopwords="french")
    with pytest.raises(TypeError, match="token_pattern"):
        Analyzer(token_pattern=3)
    a = Analyzer(SKLEARN, stopwords=["cat", "mat"])
    assert Analyzer.from_dict(a.to_dict()) == a


@pytest.mark.parametrize("pattern", [WORD, SKLEARN])
@pytest.mark.parametrize("stop", [None, "english"])
def test_counts_equal_countvectorizer(pattern, stop):
    v = Vocabulary(Analyzer(pattern, stopwords=stop))
    indptr, indices, counts, doc_len = v.fit_transform(TEXTS)
    cv = CountVectorizer(token_pattern=pattern, stop_words=None if stop is None else "english")
    X = cv.fit_transform(TEXTS).toarray()
    assert v.terms == cv.get_feature_names_out().tolist()
    assert indptr.dtype == np.int64 and indices.dtype == np.int64 and counts.dtype == np.float64
    dense = np.zeros_like(X, dtype=float)
    for i in range(len(TEXTS)):
        s = slice(indptr[i], indptr[i + 1])
        assert np.all(np.diff(indices[s]) > 0)  # canonical
        dense[i, indices[s]] = counts[s]
    np.testing.assert_array_equal(dense, X)
    np.testing.assert_array_equal(doc_len, X.sum(1))
    # transform keeps repetition, drops unknown terms
    qp, qi, qc = v.transform(["cat cat zebra", ""])
    assert qp.tolist()[-1] == qi.size
    np.testing.assert_array_equal(qc, cv.transform(["cat cat zebra"]).data)


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
