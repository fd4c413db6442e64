"""The analyser (jkofast.text): token patterns, stop lists, stemmers, compounds; its counts equal CountVectorizer's."""

import re

import numpy as np
import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

import reference as ref
from jkofast.sparse.vocabulary import Vocabulary
from jkofast.text.analyzer import Analyzer
from jkofast.text.patterns import COMPOUND, SKLEARN, WORD
from jkofast.text.stemmers import porter_stem
from jkofast.text.stopwords import LUCENE_ENGLISH_STOP_WORDS

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


# Porter (1980): expected stems derived by hand from the paper's rules (its own step examples,
# carried through the remaining steps), plus the consonant-y and measure edge cases.
PORTER_CASES = {
    # step 1a
    "caresses": "caress",
    "ponies": "poni",
    "ties": "ti",
    "caress": "caress",
    "cats": "cat",
    # step 1b (+ the cleanup after -ed/-ing), then steps 2-5
    "feed": "feed",
    "agreed": "agre",
    "plastered": "plaster",
    "bled": "bled",
    "motoring": "motor",
    "sing": "sing",
    "conflated": "conflat",
    "troubled": "troubl",
    "sized": "size",
    "hopping": "hop",
    "tanned": "tan",
    "falling": "fall",
    "hissing": "hiss",
    "fizzed": "fizz",
    "failing": "fail",
    "filing": "file",
    # step 1c
    "happy": "happi",
    "sky": "sky",
    # step 2 (m > 0)
    "relational": "relat",
    "conditional": "condit",
    "rational": "ration",
    "valenci": "valenc",
    "hesitanci": "hesit",
    "digitizer": "digit",
    "conformabli": "conform",
    "radicalli": "radic",
    "differentli": "differ",
    "vileli": "vile",
    "analogousli": "analog",
    "vietnamization": "vietnam",
    "predication": "predic",
    "operator": "oper",
    "feudalism": "feudal",
    "decisiveness": "decis",
    "hopefulness": "hope",
    "callousness": "callous",
    "formaliti": "formal",
    "sensitiviti": "sensit",
    "sensibiliti": "sensibl",
    # step 3 (m > 0)
    "triplicate": "triplic",
    "formative": "form",
    "formalize": "formal",
    "electriciti": "electr",
    "electrical": "electr",
    "hopeful": "hope",
    "goodness": "good",
    # step 4 (m > 1; -ion only after s/t; longest suffix only: -ement before -ment before -ent)
    "revival": "reviv",
    "allowance": "allow",
    "inference": "infer",
    "airliner": "airlin",
    "gyroscopic": "gyroscop",
    "adjustable": "adjust",
    "defensible": "defens",
    "irritant": "irrit",
    "replacement": "replac",
    "adjustment": "adjust",
    "dependent": "depend",
    "adoption": "adopt",
    "homologou": "homolog",
    "communism": "commun",
    "activate": "activ",
    "angulariti": "angular",
    "homologous": "homolog",
    "effective": "effect",
    "bowdlerize": "bowdler",
    # step 5
    "probate": "probat",
    "rate": "rate",
    "cease": "ceas",
    "controll": "control",
    "roll": "roll",
    # several steps; a leading y is a consonant; no length guard (paper, not the C reference)
    "generalization": "gener",
    "oscillators": "oscil",
    "ying": "ying",
    "yy": "yy",
    "is": "i",
}


def test_porter_rule_cases():
    got = {w: porter_stem(w) for w in PORTER_CASES}
    assert got == PORTER_CASES


def test_porter_matches_nltk_original_algorithm():
    porter = pytest.importorskip("nltk.stem.porter")
    ps = porter.PorterStemmer(mode=porter.PorterStemmer.ORIGINAL_ALGORITHM)
    words = set(PORTER_CASES) | {t for text in TEXTS for t in re.findall(r"\w+", text.lower())}
    words |= {"yearly", "syzygy", "abbey", "toy", "tying", "agreement", "sensational", "troubles", "ceased"}
    for w in sorted(words):
        assert porter_stem(w) == ps.stem(w), w


def test_stemming_analyzer_and_vocabulary():
    an = Analyzer(SKLEARN, stopwords="english", stemmer="porter")
    assert an.tokenize("The cats were running; relational ponies") == ["cat", "run", "relat", "poni"]
    assert Analyzer.from_dict(an.to_dict()) == an
    old_manifest = {"token_pattern": WORD, "lowercase": True, "stopwords": None}
    assert Analyzer.from_dict(old_manifest).stemmer is None
    assert Analyzer(stemmer="none").stemmer is None
    with pytest.raises(ValueError, match="stemmer"):
        Analyzer(stemmer="snowball")
    # Vocabulary's one-pass analysis = the analyser callable; stop-words go before stemming
    texts = [*TEXTS, "Was it ceased? The cease hoping hopes"]
    v = Vocabulary(an)
    indptr, indices, counts, doc_len = v.fit_transform(texts)
    cv = an.vectorizer()
    X = cv.fit_transform(texts)
    assert v.terms == cv.get_feature_names_out().tolist()
    np.testing.assert_array_equal(X.toarray(), _dense(indptr, indices, counts, X.shape))
    np.testing.assert_array_equal(doc_len, X.sum(1).A1)
    qp, qi, qc = v.transform(["hoped HOPING cats", "the"])
    np.testing.assert_array_equal(
        _dense(qp, qi, qc, (2, len(v.terms))), cv.transform(["hoped HOPING cats", "the"]).toarray()
    )


def _dense(indptr, indices, counts, shape):
    out = np.zeros(shape)
    for i in range(shape[0]):
        out[i, indices[indptr[i] : indptr[i + 1]]] = counts[indptr[i] : indptr[i + 1]]
    return out


def test_stemmer_through_registry_save_load_and_cli(tmp_path, data_dir, capsys):
    import json
    import os

    from jkofast.cli import main
    from jkofast.pools.retrievers import get_retriever
    from jkofast.sparse.retriever import SparseRetriever

    docs = ["the cats are running", "a cat runs", "dogs bark"]
    r = get_retriever("bm25-lucene", stemmer="porter").fit(docs)
    assert r.index.vocab.analyzer.stemmer == "porter" and "run" in r.index.vocab.terms
    idx, sc = r.search(["running cat"], 2)
    assert idx.tolist() == [[0, 1]] and sc[0, 0] == sc[0, 1] > 0  # cats/cat and running/runs both match
    r.save(str(tmp_path / "ix"))
    back = SparseRetriever.load(str(tmp_path / "ix"))
    assert back.index.vocab.analyzer.stemmer == "porter"
    np.testing.assert_array_equal(back.score_all(["running cat"]), r.score_all(["running cat"]))
    assert get_retriever("tfidf", stemmer="porter").index.vocab.analyzer.stemmer == "porter"
    with pytest.raises(ValueError, match="stemmer"):
        get_retriever("bm25", stemmer="lancaster")
    tiny = os.path.join(data_dir, "beir_tiny")
    out = tmp_path / "run.trec"
    opts = "--method bm25-lucene --stemmer porter --k 2 --json".split()
    assert main(["search", "--dataset", tiny, *opts, "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["lines"] == 6
    assert (
        main(["index", "--dataset", tiny, "--method", "bm25", "--stemmer", "porter", "--out", str(tmp_path / "ix2")])
        == 0
    )
    assert SparseRetriever.load(str(tmp_path / "ix2")).index.vocab.analyzer.stemmer == "porter"


IL6 = "IL-6 in type 2 diabetes, one of many"


@pytest.mark.parametrize(
    ("pattern", "stop", "compounds", "expect"),
    [
        # hand-checked: sklearn drops 1-char tokens ("6", "2"); sklearn's list stops in/one/of/many,
        # Lucene's 33 words stop in/of only; compounds add the hyphen-free "il6" after the pattern's tokens
        ("sklearn", "english", False, ["il", "type", "diabetes"]),
        ("sklearn", "lucene", False, ["il", "type", "diabetes", "one", "many"]),
        ("sklearn", None, False, ["il", "in", "type", "diabetes", "one", "of", "many"]),
        ("word", "english", False, ["il", "6", "type", "2", "diabetes"]),
        ("word", "lucene", False, ["il", "6", "type", "2", "diabetes", "one", "many"]),
        ("word", None, False, ["il", "6", "in", "type", "2", "diabetes", "one", "of", "many"]),
        ("sklearn", "english", True, ["il", "type", "diabetes", "il6"]),
        ("sklearn", "lucene", True, ["il", "type", "diabetes", "one", "many", "il6"]),
        ("word", None, True, ["il", "6", "in", "type", "2", "diabetes", "one", "of", "many", "il6"]),
    ],
)
def test_analyser_options_il6(pattern, stop, compounds, expect):
    an = Analyzer(pattern, stopwords=stop, compounds=compounds)
    assert an.tokenize(IL6) == expect
    # Vocabulary's one-pass analysis counts exactly these tokens
    v = Vocabulary(an)
    indptr, indices, counts, doc_len = v.fit_transform([IL6])
    assert v.terms == sorted(set(expect)) and doc_len.tolist() == [len(expect)]
    got = {v.terms[j]: c for j, c in zip(indices, counts, strict=True)}
    assert got == {t: float(expect.count(t)) for t in set(expect)}


def test_lucene_stop_list_and_compounds():
    assert len(LUCENE_ENGLISH_STOP_WORDS) == 33 and {"a", "the", "with", "such"} <= LUCENE_ENGLISH_STOP_WORDS
    assert LUCENE_ENGLISH_STOP_WORDS < ENGLISH_STOP_WORDS | {"such", "will"}
    assert Analyzer(stopwords="lucene").stop_list() == sorted(LUCENE_ENGLISH_STOP_WORDS)
    assert re.findall(COMPOUND, "t\u2010cell-mediated covid-19 a - b x--y 5-ht") == [
        "t\u2010cell-mediated",
        "covid-19",
        "5-ht",
    ]  # lone/double hyphens join nothing
    an = Analyzer(SKLEARN, stopwords="english", stemmer="porter", compounds=True)
    # parts (1-char "t" dropped, "19" kept), then the joined compounds; stemming after the stop list
    assert an.tokenize("T\u2010cell-mediated COVID-19 cases") == [
        "cell",
        "mediat",
        "covid",
        "19",
        "case",
        "tcellmedi",
        "covid19",
    ]
    assert Analyzer.from_dict(an.to_dict()) == an
    assert Analyzer.from_dict({"token_pattern": WORD, "lowercase": True, "stopwords": None}).compounds is False
    with pytest.raises(TypeError, match="compounds"):
        Analyzer(compounds="yes")
    with pytest.raises(ValueError, match="lucene"):
        Analyzer(stopwords="snowball")


@pytest.mark.parametrize("stem", [None, "porter"])
@pytest.mark.parametrize("stop", [None, "lucene"])
def test_compound_vocabulary_equals_vectorizer(stem, stop):
    """Vocabulary's one-pass analysis with compounds = CountVectorizer over the analyser callable."""
    texts = [*TEXTS, "IL-6 and IL-6R: anti-inflammatory T\u2010cells, type-2 diabetes", IL6]
    an = Analyzer(SKLEARN, stopwords=stop, stemmer=stem, compounds=True)
    v = Vocabulary(an)
    indptr, indices, counts, doc_len = v.fit_transform(texts)
    cv = an.vectorizer()
    X = cv.fit_transform(texts).toarray()
    assert v.terms == cv.get_feature_names_out().tolist()
    assert "il6r" in v.terms and "type2" in v.terms
    dense = np.zeros_like(X, dtype=float)
    for i in range(len(texts)):
        dense[i, indices[indptr[i] : indptr[i + 1]]] = counts[indptr[i] : indptr[i + 1]]
    np.testing.assert_array_equal(dense, X)
    np.testing.assert_array_equal(doc_len, X.sum(1))
    qp, qi, qc = v.transform(["il-6 il-6 zebra"])
    assert sorted(v.terms[j] for j in qi) == ["il", "il6"] and qc.tolist() == [2.0, 2.0]


def test_invalid_token_pattern_fails_at_construction():
    with pytest.raises(ValueError, match="token_pattern '\\(' is not a valid regular expression"):
        Analyzer(token_pattern="(")


# ------------------------------------------------------------- QA round 2: Analyzer options


@pytest.mark.parametrize("pattern", ["", r"\s*", r"x?"])
def test_token_pattern_matching_the_empty_string_is_refused(pattern):
    # every gap between characters became an empty-string term in the vocabulary
    with pytest.raises(ValueError, match=r"token_pattern .* matches the empty string"):
        Analyzer(token_pattern=pattern)


def test_lowercase_must_be_bool_and_tokenize_takes_str():
    with pytest.raises(TypeError, match="lowercase must be a bool"):
        Analyzer(lowercase="no")  # bool("no") is True: lowercased silently
    assert Analyzer(lowercase=np.bool_(False)).tokenize("Ab CD") == ["Ab", "CD"]
    with pytest.raises(TypeError, match="text must be a str"):
        Analyzer().tokenize(None)  # was AttributeError


def test_vocabulary_and_indexes_refuse_a_non_analyzer():
    from jkofast.sparse.index import BM25Index, TfidfIndex

    for make in (
        lambda: Vocabulary(analyzer="word"),
        lambda: BM25Index("lucene", analyzer="word"),
        lambda: TfidfIndex(analyzer="word"),
    ):
        with pytest.raises(TypeError, match=r"analyzer must be a jkofast\.text\.Analyzer"):
            make()
