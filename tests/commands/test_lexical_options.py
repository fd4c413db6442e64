"""Lexical options (issue 14): Snowball stemmers, stop-word lists, bm25s parity, SGR presets and --param."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from jkofast.cli import main
from jkofast.pools.retrievers import get_retriever, param_types, presets
from jkofast.text.analyzer import Analyzer
from jkofast.text.stopwords import LUCENE_ENGLISH_STOP_WORDS


def _need_pystemmer():
    return pytest.importorskip("Stemmer", reason='PyStemmer is an optional peer (pip install "jkofast[bench]")')


# ------------------------------------------------------------------ stop-word lists


def test_stopword_lists():
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert Analyzer(stopwords="sklearn") == Analyzer(stopwords="english")
    assert Analyzer(stopwords="sklearn").stop_list() == sorted(ENGLISH_STOP_WORDS)
    assert Analyzer(stopwords="lucene").stop_list() == sorted(LUCENE_ENGLISH_STOP_WORDS)
    assert Analyzer("sklearn", stopwords="bm25s").tokenize("The cat and the hat") == ["cat", "hat"]
    with pytest.raises(ValueError, match="stopwords must be None, one of 'english', 'sklearn', 'lucene', 'bm25s'"):
        Analyzer(stopwords="french")


def test_english_stop_list_read_without_importing_sklearn():
    code = (
        "import sys; from jkofast.text.stopwords import stop_words; "
        "w = stop_words('english'); print(len(w), 'sklearn' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["318", "False"]


def test_english_stop_list_falls_back_to_the_import(monkeypatch):
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from jkofast.text import stopwords

    stopwords._sklearn_stop_words.cache_clear()
    monkeypatch.setattr(stopwords.importlib.util, "find_spec", lambda name: None)
    assert stopwords.stop_words("english") == sorted(ENGLISH_STOP_WORDS)
    monkeypatch.undo()
    stopwords._sklearn_stop_words.cache_clear()
    a = stopwords.stop_words("english")
    a.append("extra")  # a caller's edit does not reach the next call
    assert stopwords.stop_words("english") == sorted(ENGLISH_STOP_WORDS)


def test_bm25s_stopword_list_is_bm25s_english():
    stop = pytest.importorskip("bm25s.stopwords", reason="bm25s is an optional peer (benchmarks / oracles)")
    assert Analyzer(stopwords="bm25s").stop_list() == sorted(stop.STOPWORDS_EN)


# ------------------------------------------------------------------ Snowball stemmers


def test_snowball_stemmer_any_language():
    stemmer = _need_pystemmer()
    text = "The runners were running quickly towards generalizations"
    toks = Analyzer("sklearn", stemmer="snowball-english").tokenize(text)
    assert toks == stemmer.Stemmer("english").stemWords(Analyzer("sklearn").tokenize(text))
    assert toks != Analyzer("sklearn", stemmer="porter").tokenize(text)  # Porter (1980) kept as its own choice
    ru = Analyzer("sklearn", stemmer="snowball-russian").tokenize("книги книгами")
    assert ru == stemmer.Stemmer("russian").stemWords(["книги", "книгами"])
    with pytest.raises(ValueError, match=r"snowball-klingon': unknown language; PyStemmer has .*english"):
        Analyzer(stemmer="snowball-klingon")
    with pytest.raises(ValueError, match="stemmer must be None, 'porter' or 'snowball-<language>'"):
        Analyzer(stemmer="lancaster")


def test_snowball_without_pystemmer_says_how_to_install(monkeypatch):
    from jkofast.text import stemmers

    monkeypatch.setitem(sys.modules, "Stemmer", None)  # import Stemmer -> ImportError
    stemmers.snowball_stemmer.cache_clear()
    try:
        with pytest.raises(ValueError, match=r'pip install "jkofast\[bench\]"'):
            Analyzer(stemmer="snowball-english")
    finally:
        stemmers.snowball_stemmer.cache_clear()


def test_snowball_index_saves_and_loads(tmp_path):
    _need_pystemmer()
    docs = ["running runners run", "the generalization of cats", "cats are running"]
    r = get_retriever("bm25-lucene", stopwords="bm25s", stemmer="snowball-english").fit(docs)
    r.save(tmp_path / "i")
    from jkofast.sparse.retriever import SparseRetriever

    back = SparseRetriever.load(str(tmp_path / "i"))
    assert back.index.vocab.analyzer.stemmer == "snowball-english"
    np.testing.assert_array_equal(back.search(["runs", "cat"], k=3)[0], r.search(["runs", "cat"], k=3)[0])


# ------------------------------------------------------------------ parity with bm25s


def test_bm25_with_bm25s_tokenisation_gives_bm25s_top10():
    """jkofast bm25-lucene + bm25s's tokenisation (stopwords "en", Snowball English) = bm25s's top-10."""
    bm25s = pytest.importorskip("bm25s", reason="bm25s is an optional peer (benchmarks / oracles)")
    stemmer = _need_pystemmer()
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset("scifact")
    docs = ds.doc_texts(" ")[:400]  # a small corpus: the first 400 SciFact documents
    queries = ds.query_texts[:40]
    st = stemmer.Stemmer("english")
    kw = dict(stopwords="en", stemmer=st, return_ids=False, show_progress=False)
    peer = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    peer.index(bm25s.tokenize(docs, **kw), show_progress=False)
    p_idx, p_sc = peer.retrieve(bm25s.tokenize(queries, **kw), k=10, show_progress=False)
    ours = get_retriever("bm25-lucene", stopwords="bm25s", stemmer="snowball-english").fit(docs)
    o_idx, o_sc = ours.search(queries, k=10)
    np.testing.assert_allclose(o_sc, p_sc, rtol=2e-6, atol=1e-6)  # same scores, rank by rank
    for i in range(len(queries)):
        if np.all(np.diff(p_sc[i]) < 0):  # no tie inside the top 10 (ties break differently)
            assert o_idx[i].tolist() == p_idx[i].tolist(), queries[i]
        else:
            assert set(o_idx[i][p_sc[i] > p_sc[i][-1]]) == set(p_idx[i][p_sc[i] > p_sc[i][-1]])


# ------------------------------------------------------------------ registry: presets and parameter types


def test_presets_and_param_types():
    assert presets("sgr") == {"published": {"semantic_neighbours": "lowest_term_id", "ppmi_include_self": True}}
    assert presets("bm25") == {}
    t = param_types("sgr")
    assert t["pool_size"] is int and t["alpha"] is float and t["ppmi_include_self"] is bool
    assert t["semantic_neighbours"] is str
    assert param_types("bm25")["k1"] is float and "epsilon" not in param_types("tfidf")
    with pytest.raises(ValueError, match="unknown method"):
        param_types("nope")


# ------------------------------------------------------------------ CLI


def _ds(tmp_path):
    root = tmp_path / "ds"
    (root / "qrels").mkdir(parents=True)
    docs = [("d1", "solar panels convert sunlight"), ("d2", "wind turbines make power"), ("d3", "the cat sat")]
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": x}) + "\n" for i, x in docs))
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "sunlight power"}\n')
    (root / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    return str(root)


def test_cli_sgr_preset_and_param(tmp_path, capsys):
    ds = _ds(tmp_path)
    out = tmp_path / "sgr"
    argv = ["index", "--dataset", ds, "--method", "sgr", "--preset", "published", "--param", "pool_size=3"]
    assert main([*argv, "--param", "ppmi_include_self=false", "--out", str(out)]) == 0
    params = json.loads((out / "meta.json").read_text())["params"]
    assert params["semantic_neighbours"] == "lowest_term_id"  # from the preset
    assert params["ppmi_include_self"] is False and params["pool_size"] == 3  # --param after --preset
    capsys.readouterr()


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--method", "sgr", "--param", "nope=1"], "--param nope: not a parameter of --method sgr; valid keys: alpha,"),
        (["--method", "bm25", "--param", "k3=1"], "valid keys: b, compounds, epsilon, k1, lowercase"),
        (["--method", "sgr", "--param", "pool_size=2.5"], "--param pool_size=2.5: expected int"),
        (["--method", "sgr", "--param", "tail_gate=maybe"], "expected a boolean"),
        (["--method", "bm25", "--param", "k1"], "expected KEY=VALUE"),
        (["--method", "bm25", "--preset", "published"], "--preset published does not apply to --method bm25"),
        (["--method", "bm25", "--stemmer", "lancaster"], "stemmer must be None, 'porter' or 'snowball-<language>'"),
        (["--method", "sgr", "--param", "semantic_neighbours=nearest"], "semantic_neighbours must be"),
    ],
)
def test_cli_bad_params_exit_2(tmp_path, capsys, argv, match):
    assert main(["index", "--dataset", _ds(tmp_path), *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "jkofast index: error:" in err and match in err


def test_cli_stopwords_and_stemmer_choices(tmp_path, capsys):
    _need_pystemmer()
    ds = _ds(tmp_path)
    out = tmp_path / "i"
    argv = [
        "index",
        "--dataset",
        ds,
        "--method",
        "bm25-lucene",
        "--stopwords",
        "bm25s",
        "--stemmer",
        "snowball-english",
    ]
    assert main([*argv, "--param", "k1=1.2", "--out", str(out)]) == 0
    man = json.loads((out / "manifest.json").read_text())
    assert man["analyzer"]["stopwords"] == "bm25s" and man["analyzer"]["stemmer"] == "snowball-english"
    assert man["params"]["k1"] == 1.2
    assert main(["index", "--dataset", ds, "--method", "tfidf", "--stopwords", "sklearn", "--out", str(out)]) == 0
    assert json.loads((out / "manifest.json").read_text())["analyzer"]["stopwords"] == "english"
    capsys.readouterr()
