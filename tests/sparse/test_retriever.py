import json
import os

import numpy as np
import pytest

from jkofast.cli import main
from jkofast.datasets.beir import load_dataset
from jkofast.pools.retrievers import METHODS, get_retriever
from jkofast.sparse.index import BM25Index, TfidfIndex
from jkofast.sparse.retriever import SparseRetriever

DOCS = ["the cat sat on the mat", "the dog chased the cat", "birds fly", "a mat, a rug"]


@pytest.mark.parametrize("method", ["bm25", "bm25-lucene", "tfidf"])
def test_interface(method):
    r = get_retriever(method).fit(DOCS)
    assert r.n_docs == 4 and r.method == method
    ids, sc = r.search(["cat mat", "zebra"], k=6)
    assert ids.shape == sc.shape == (2, 6) and ids.dtype == np.int64 and sc.dtype == np.float32
    assert ids[0, 0] == 0 and ids[0, 4] == -1 and np.isneginf(sc[:, 4:]).all()
    full = r.score_all(["cat mat", "zebra"])
    assert full.shape == (2, 4) and full.dtype == np.float32
    np.testing.assert_array_equal(sc[:, :4], np.take_along_axis(full, ids[:, :4], 1))


def test_registry_params_and_defaults():
    r = get_retriever("bm25")
    assert isinstance(r.index, BM25Index) and r.index.variant == "okapi" and r.doc_sep == ". "
    assert r.index.vocab.analyzer.token_pattern == r"(?u)\w+" and r.index.vocab.analyzer.stopwords is None
    r = get_retriever("bm25-lucene")
    assert r.index.variant == "lucene" and r.index.vocab.analyzer.stopwords == "english" and r.doc_sep == " "
    r = get_retriever("bm25-lucene", stopwords=None, k1=1.2, b=0.5)
    assert r.index.vocab.analyzer.stopwords is None and r.index.k1 == 1.2 and r.index.b == 0.5
    r = get_retriever("tfidf", max_features=3)
    assert isinstance(r.index, TfidfIndex) and r.fit(DOCS).index.n_terms == 3
    with pytest.raises(ValueError, match="unknown method"):
        get_retriever("splade")
    with pytest.raises(ValueError, match="unknown parameter"):
        get_retriever("bm25", k3=1.0)
    with pytest.raises(ValueError, match="unknown parameter"):
        get_retriever("tfidf", k1=1.0)
    assert set(METHODS) == {"bm25", "bm25-lucene", "tfidf", "sgr"}


def test_sgr_is_lazy():
    r = get_retriever("sgr")
    assert type(r).__name__ == "SparseGeometricRetriever"


def test_save_load(tmp_path):
    r = get_retriever("bm25-lucene").fit(DOCS)
    r.save(str(tmp_path / "ix"))
    back = SparseRetriever.load(str(tmp_path / "ix"))
    assert back.method == "bm25-lucene"
    np.testing.assert_array_equal(back.search(["cat"], 3)[0], r.search(["cat"], 3)[0])


def _read_trec(path):
    with open(path) as fh:
        return [ln.split() for ln in fh]


def test_cli_index_and_search_tiny(tmp_path, data_dir, capsys):
    tiny = os.path.join(data_dir, "beir_tiny")
    out = tmp_path / "run.trec"
    assert main(["search", "--dataset", tiny, "--method", "bm25", "--k", "3", "--out", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_queries"] == 3 and info["lines"] == 9
    rows = _read_trec(out)
    assert [r[0] for r in rows[::3]] == ["2", "3", "10"]
    assert all(len(r) == 6 and r[1] == "Q0" and r[5] == "jkofast-bm25" for r in rows)
    assert [int(r[3]) for r in rows[:3]] == [1, 2, 3]
    ds = load_dataset(tiny)
    exp_ids, exp_sc = get_retriever("bm25").fit(ds.doc_texts(". ")).search(["dog"], 3)
    assert [r[2] for r in rows[:3]] == [ds.doc_ids[i] for i in exp_ids[0]]
    # index then search from the saved index: same run
    ix = tmp_path / "ix"
    assert main(["index", "--dataset", tiny, "--method", "bm25", "--out", str(ix), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_docs"] == 5
    out2 = tmp_path / "run2.trec"
    assert (
        main(["search", "--dataset", tiny, "--method", "bm25", "--index", str(ix), "--k", "3", "--out", str(out2)]) == 0
    )
    assert "3 queries" in capsys.readouterr().out
    assert _read_trec(out2) == rows
    # k > n_docs: padding is not written
    opts = "--method tfidf --split all --k 9 --tag t".split()
    assert main(["search", "--dataset", tiny, *opts, "--out", str(out2)]) == 0
    assert len(_read_trec(out2)) == 4 * 5
    assert main(["search", "--dataset", tiny, "--k", "0", "--out", str(out2)]) == 2
    assert main(["search", "--dataset", tiny, "--split", "dev", "--out", str(out2)]) == 2


def test_cli_search_scifact(tmp_path, capsys):
    out = tmp_path / "run.trec"
    opts = "--dataset scifact --method bm25-lucene --k 10 --json --threads 1".split()
    assert main(["search", *opts, "--out", str(out)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_queries"] == 300 and info["lines"] == 3000


def test_registry_refuses_a_non_analyzer_and_sgr_has_the_common_attributes():
    with pytest.raises(TypeError, match=r"analyzer must be a jkofast\.text\.Analyzer"):
        get_retriever("bm25", analyzer="word")  # failed later with an AttributeError
    r = get_retriever("sgr", pool_size=3).fit(DOCS)
    assert r.n_docs == 4 and r.doc_sep == " "  # SGR had neither (the search CLI's corpus check skipped it)
    ids, _ = r.search(["cat", "", "zebra"], k=10)  # k beyond the corpus: padded
    assert ids.shape == (3, 10) and (ids[1:] == -1).all() and (ids[0, 4:] == -1).all()
    with pytest.raises(ValueError, match="texts must not be empty"):
        get_retriever("sgr").fit([])
