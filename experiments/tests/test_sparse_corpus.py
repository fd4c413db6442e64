"""experiments/sparse_corpus.py: the search space of the sparse-only searches (recipe dicts, query
models, signals, geometries), moved out of jkofast.studies with its tests; and the product point
(jkofast.studies.sparse_recipe) reproduced bit for bit by its dict form."""

import numpy as np
import pytest
from sparse_corpus import (
    SPARSE_GEOMETRIES,
    SPARSE_RECIPE,
    SparseCorpus,
    check_recipe,
    sparse_analyzer,
    sparse_only_inputs,
    title_texts,
)


def test_dict_recipe_reproduces_the_product_recipe():
    from jkofast.datasets.beir import load_dataset
    from jkofast.studies import sparse_recipe

    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")[:4]
    qs = [ds.queries[q] for q in qids]
    sc = SparseCorpus(ds, SPARSE_RECIPE["title_repeats"], analyzer=sparse_analyzer(SPARSE_RECIPE))
    P, r, X = sparse_only_inputs(ds, qs, qids, corpus=sc)
    Q, s, Y = sparse_recipe.sparse_only_inputs(ds, qs, qids, corpus=sc)
    np.testing.assert_array_equal(P.offsets, Q.offsets)
    np.testing.assert_array_equal(P.doc_idx, Q.doc_idx)
    np.testing.assert_array_equal(r, s)
    assert (X != Y).nnz == 0 and X.dtype == Y.dtype
    assert sparse_analyzer(SPARSE_RECIPE) == sparse_recipe.sparse_analyzer()


def test_sparse_only_recipe_tiny():
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")[:2]
    recipe = {**SPARSE_RECIPE, "weights": {"base": 0.8, "tfs": 0.2}}
    P, r, X = sparse_only_inputs(ds, [ds.queries[q] for q in qids], qids, recipe=recipe)
    assert np.diff(P.offsets).tolist() == [200, 200] and r.shape == (400,) and X.shape[0] == 400
    for i in range(2):  # minmax per pool: weights sum to 1 -> r in [0, 1], the BM25 top doc first
        ri = r[P.offsets[i] : P.offsets[i + 1]]
        assert 0.0 <= ri.min() and ri.max() <= 1.0 + 1e-12
    with pytest.raises(ValueError, match="unknown sparse-only signals"):
        sparse_only_inputs(ds, ["x"], ["q"], recipe={**SPARSE_RECIPE, "weights": {"dense": 1.0}})


def test_sparse_only_recipe_components():
    """Every recipe key of the v2 search (query model, own pool, QL signal, propagation,
    geometries) builds consistent pools, energies and geometry rows."""
    from expansion import propagate_scores

    from jkofast.datasets.beir import load_dataset
    from jkofast.jko.energy import minmax

    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")[:2]
    qs = [ds.queries[q] for q in qids]
    sc = SparseCorpus(ds, SPARSE_RECIPE["title_repeats"], analyzer=sparse_analyzer(SPARSE_RECIPE))
    for geo in SPARSE_GEOMETRIES:
        Y = sc.geometry(geo)
        assert Y.shape[0] == ds.n_docs and Y.has_canonical_format and Y.dtype == np.float32
        assert np.all(np.diff(Y.indptr)[np.diff(sc.doc_tf.indptr) > 0] > 0)  # non-empty docs keep a row
    rm3 = {"kind": "rm3", "fb_docs": 3, "n_terms": 10, "weight": 0.3}
    base = {
        **SPARSE_RECIPE,
        "query": rm3,
        "pool": "own",
        "weights": {"first": 0.8, "ql1000": 0.2},
        "propagation": None,
        "geometry": "ppmi",
    }
    P, r, X = sparse_only_inputs(ds, qs, qids, recipe=base, corpus=sc)
    S1 = sc.first_stage(rm3, qs)
    for i in range(2):  # own pool = the query model's top-200, in its score order
        top = np.argsort(-S1[i], kind="stable")[:200]
        assert set(P.doc_idx[P.offsets[i] : P.offsets[i + 1]]) == set(top)
    rows = np.repeat(np.arange(2), np.diff(P.offsets))
    expect = 0.8 * minmax(S1[rows, P.doc_idx].astype(np.float64), P.offsets) + 0.2 * minmax(
        sc.signal("ql1000", qs)[rows, P.doc_idx].astype(np.float64), P.offsets
    )
    np.testing.assert_allclose(r, expect, rtol=1e-12)
    np.testing.assert_array_equal(X.toarray(), sc.geometry("ppmi")[P.doc_idx].toarray())
    prop = {"k": 5, "beta": 0.2}
    _, r2, _ = sparse_only_inputs(ds, qs, qids, recipe={**base, "propagation": prop}, corpus=sc)
    Xt = sc.geometry("tfidf")[P.doc_idx]
    np.testing.assert_allclose(r2, propagate_scores(r, P.offsets, Xt, **prop), rtol=1e-12)
    with pytest.raises(ValueError, match="unknown sparse geometry"):
        sparse_only_inputs(ds, qs, qids, recipe={**base, "geometry": "minilm"}, corpus=sc)
    with pytest.raises(ValueError, match="unknown query model"):
        sparse_only_inputs(ds, qs, qids, recipe={**base, "query": {"kind": "dense"}}, corpus=sc)


def test_sparse_only_analyser_options():
    """Recipe keys token_pattern / stopwords / compounds: defaults = the first attempts' analyser;
    another analyser gives the pools of a BM25 lucene index built directly with it."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.sparse.index import BM25Index
    from jkofast.text import Analyzer
    from jkofast.text.patterns import SKLEARN

    old = Analyzer(SKLEARN, stopwords="english", stemmer="porter")
    assert sparse_analyzer() == old == sparse_analyzer({"title_repeats": 3})
    assert sparse_analyzer({"token_pattern": "sklearn", "stopwords": "english", "compounds": False}) == old
    # the third attempt's recipe: \w+ tokens (1-character tokens kept), English stop-words
    assert sparse_analyzer(SPARSE_RECIPE) == Analyzer("word", stopwords="english", stemmer="porter")
    an = sparse_analyzer({"token_pattern": "word", "stopwords": "lucene", "compounds": True})
    assert an == Analyzer("word", stopwords="lucene", stemmer="porter", compounds=True)
    assert an.tokenize("IL-6 in type 2 diabetes") == ["il", "6", "type", "2", "diabet", "il6"]

    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")[:3]
    qs = [ds.queries[q] for q in qids]
    recipe = {**SPARSE_RECIPE, "title_repeats": 4, "token_pattern": "word", "stopwords": None}
    sc = SparseCorpus(ds, 4, analyzer=sparse_analyzer(recipe))
    assert sc.tfidf.n_terms == sc.V and {"2", "6"} <= set(sc.bm25.vocab.terms)
    P, r, X = sparse_only_inputs(ds, qs, qids, recipe=recipe, corpus=sc)
    S = BM25Index("lucene", analyzer=Analyzer("word", stemmer="porter")).fit(title_texts(ds, 4)).score_all(qs)
    for i in range(3):  # the pool = top-200 of that BM25, r = its minmax score
        top = np.argsort(-S[i], kind="stable")[:200]
        assert set(P.doc_idx[P.offsets[i] : P.offsets[i + 1]]) == set(top)
        si = S[i, P.doc_idx[P.offsets[i] : P.offsets[i + 1]]].astype(np.float64)
        np.testing.assert_allclose(
            r[P.offsets[i] : P.offsets[i + 1]], (si - si.min()) / (si.max() - si.min()), rtol=1e-12
        )
    assert X.shape == (600, sc.V)
    with pytest.raises(ValueError, match="corpus was built"):
        sparse_only_inputs(ds, qs, qids, recipe={**recipe, "stopwords": "english"}, corpus=sc)
    with pytest.raises(ValueError, match="corpus was built"):
        sparse_only_inputs(ds, qs, qids, recipe={**recipe, "title_repeats": 3}, corpus=sc)


def test_sparse_recipe_and_corpus_arguments():
    from jkofast.datasets.beir import load_dataset

    for recipe, exc, match in (
        ({}, ValueError, "missing key"),  # KeyError
        ({**SPARSE_RECIPE, "geomtry": "tfidf"}, ValueError, "unknown key.*geomtry"),  # typo fell back silently
        ({**SPARSE_RECIPE, "weights": {"first": float("nan")}}, ValueError, r"weights.*finite"),  # NaN energies
        ({**SPARSE_RECIPE, "weights": {}}, ValueError, "non-empty"),
        ({**SPARSE_RECIPE, "pool": "bogus"}, ValueError, r"recipe\['pool'\]"),  # meant 'base' silently
        ({**SPARSE_RECIPE, "title_repeats": 1.5}, TypeError, "title_repeats"),
        ([1], TypeError, "recipe must be a dict"),
    ):
        with pytest.raises(exc, match=match):
            check_recipe(recipe)
    check_recipe(SPARSE_RECIPE)
    ds = load_dataset("scifact")
    with pytest.raises(ValueError, match="title_repeats must be >= 0"):
        SparseCorpus(ds, title_repeats=-1)
    with pytest.raises(TypeError, match="analyzer must be"):
        SparseCorpus(ds, analyzer="word")
