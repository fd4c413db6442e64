"""Main job building blocks (tiny): tuning stream check values, train-query protocol, metrics,
read-out, the sparse-only recipe, and a 4-query end-to-end smoke run of the SciFact job."""

import numpy as np
import pytest

from jkofast.pools.candidates import Pools
from jkofast.studies.readout import evaluate_topk, readout_topk
from jkofast.studies.tuning import SEARCH_SPACE, sample_configs, select_best, train_queries

KEYS = [k for k, _ in SEARCH_SPACE]


def _ndcg_recall_one(ranked, rel: dict, k: int, gain: str):
    """nDCG@k and Recall@k of one ranking of doc ids through the eval wing (jkofast.eval.metrics)."""
    from jkofast.eval.metrics import evaluate

    res = evaluate({"q": list(ranked)}, {"q": rel}, metrics=(f"ndcg@{k}", f"recall@{k}"), gain=gain, tie_break="given")
    return float(res.per_query[f"ndcg@{k}"][0]), float(res.per_query[f"recall@{k}"][0])


def test_tuning_stream_matches_appendix_1():
    c = [tuple(x[k] for k in KEYS) for x in sample_configs(25)]
    assert c[0] == (0.1, 0.005, 0.05, 0.05, 2, 15, 0.05, 1.0, 0)
    assert c[1] == (2.0, 0.05, 0, 0.05, 1, 15, 0.1, 1.0, 0)
    assert c[9] == (0.2, 0.005, 0.05, 0.1, 3, 15, 0.1, 1.0, 0.6)
    assert c[11] == (2.0, 0.1, 0.05, 0.2, 5, 40, 1.0, 0.4, 0.3)
    assert c[5][-2:] == (0, 0)  # config 6: alpha = gamma = 0 (scores 0 without running)
    # the first 20 of the stream are the NFCorpus/FiQA configs
    assert sample_configs(20) == sample_configs(25)[:20]


def test_train_queries_protocol():
    import random

    qrels = {str(i): {"d": 1} for i in (5, 3, 9, 1, 7)}
    got = train_queries(qrels, ["1", "3", "5", "7"], n=3, seed=0)
    exp = ["5", "3", "1", "7"]  # dict order, filtered by known ids
    random.Random(0).shuffle(exp)
    assert got == exp[:3]


def test_select_best_first_strict_max():
    assert select_best([0.1, 0.3, 0.3, 0.2]) == 1
    assert select_best([0.0]) == 0


def test_metrics_hand_computed():
    # relevant docs a (1), b (1); ranking [x, a, y, b]
    rel = {"a": 1, "b": 1, "z": 0}
    nd, rec = _ndcg_recall_one(["x", "a", "y", "b"], rel, 10, "linear")
    dcg = 1 / np.log2(3) + 1 / np.log2(5)
    idcg = 1 + 1 / np.log2(3)
    assert nd == pytest.approx(dcg / idcg) and rec == 1.0
    # graded: exponential gain differs from linear
    rel2 = {"a": 2}
    lin, _ = _ndcg_recall_one(["x", "a"], rel2, 10, "linear")
    ex, _ = _ndcg_recall_one(["x", "a"], rel2, 10, "exponential")
    assert lin == pytest.approx(ex) == pytest.approx(1 / np.log2(3))
    out = evaluate_topk(np.array([[1, 0, -1]]), ["q"], {"q": {"d0": 1}}, ["d0", "d1"], k=10)
    assert out["ndcg"][0] == pytest.approx(1 / np.log2(3)) and out["recall"][0] == 1.0


def test_readout_topk_maps_to_corpus_rows():
    P = Pools(["a", "b"], np.array([0, 3, 5]), np.array([10, 11, 12, 20, 21]), np.zeros(5, np.float32))
    top = readout_topk(np.array([0.2, 0.5, 0.3, 0.1, 0.9]), P, 2)
    assert top.tolist() == [[11, 12], [21, 20]]


def test_main_job_smoke_tiny():
    from jkofast.studies.main_job import run_main_job

    res = run_main_job(
        "scifact",
        n_queries=4,
        config="fast",
        include_sgr=False,
        progress=False,
        methods=("hybrid_rrf", "blend", "mmr", "dpp_map", "kl_blend", "jko_blend"),
    )
    assert res.n_queries == 4
    s = res.summary()
    for name in ("bm25", "dense", "hybrid_rrf", "blend", "mmr", "dpp_map", "kl_blend", "jko_blend"):
        assert 0.0 <= s["methods"][name]["ndcg@10"] <= 1.0
    assert "diff_vs_hybrid_rrf" in s["methods"]["blend"]
    assert 0.0 < res.pool_recall <= 1.0
    assert "nDCG@10" in res.table()


def test_main_job_rows_wait_for_compile_ahead_and_keep_table_order(monkeypatch):
    # the JKO rows wait for the child's JKO flow, the SGR row (after the dense JKO rows) fits, then waits
    # for its search kernels, but the table keeps its order; a failed child is reported and the job compiles them itself
    import jkofast.studies.main_job as mj
    from jkofast.sgr.retriever import SparseGeometricRetriever

    events = []

    class FailedChild:
        entries = ("jko.flow", "sgr.search")
        returncode = 1

        def wait_for(self, entry):
            events.append(f"wait_for {entry}")
            return False

        def wait(self):
            events.append("wait")
            return False

        def error(self):
            return "boom"

        def close(self):
            events.append("close")

    fit = SparseGeometricRetriever.fit

    def recorded_fit(self, *a, **k):
        events.append("fit")
        return fit(self, *a, **k)

    monkeypatch.setattr(mj, "_start_ahead", lambda opts, dense: FailedChild())
    monkeypatch.setattr(SparseGeometricRetriever, "fit", recorded_fit)
    want = ("blend", "sgr", "kl_blend")
    res = mj.run_main_job("scifact", n_queries=3, config="fast", progress=False, methods=want)
    assert list(res.methods) == ["bm25", "dense", "blend", "sgr", "kl_blend"]
    assert events == ["wait_for jko.flow", "wait", "fit", "wait_for sgr.search", "wait", "close"]
    assert any(n.startswith("JKO kernels: the compile-ahead process failed (boom)") for n in res.notes)
    assert any(n.startswith("SGR kernels: the compile-ahead process failed (boom)") for n in res.notes)
    assert mj._row_order({"a": 1, "jko_tuned": 2, "sgr": 3}) == {"a": 1, "sgr": 3, "jko_tuned": 2}
    assert mj._row_order({"a": 1, "sgr": 3}) == {"a": 1, "sgr": 3}


def test_compile_ahead_entries_follow_the_rows_that_run():
    from jkofast.studies.main_job import MainJobOptions, _ahead_probes

    def entries(dense=True, **kw):
        return list(_ahead_probes(MainJobOptions(**kw).checked(), dense))

    # the default rows: JKO, then SGR last, then the table's bootstrap (with the metrics, cached by then)
    assert entries() == ["jko.flow", "sgr.search", "evaluation"]
    assert entries(dense=False) == ["jko.flow", "sgr.search", "evaluation"]  # jko_sparse needs no embeddings
    assert entries(grad="unrolled") == ["sgr.search", "evaluation"]  # the child's flow is the implicit gradient's
    assert entries(methods=("jko_blend",), dense=False) == []  # a JKO row that cannot run without embeddings
    assert entries(methods=("blend", "kl_blend")) == ["jko.flow", "evaluation"]
    assert entries(include_sgr=False) == ["jko.flow", "evaluation"]
    assert entries(methods=("sgr",), sparse="sgr") == []  # SGR as the first stage: needed at once


def test_cli_has_run_and_demo():
    from jkofast.cli import build_parser

    p = build_parser()
    a = p.parse_args(["demo", "--quick"])
    b = p.parse_args(["run", "--dataset", "scifact", "--json"])
    assert a.func is b.func and a.quick and b.json


def test_main_job_user_scores_file(tmp_path):
    """--scores with the BM25 scores themselves reproduces the default (BM25 stand-in) run."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.pools.retrievers import get_retriever
    from jkofast.studies.main_job import run_main_job

    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")[:3]
    S = get_retriever("bm25").fit(ds.doc_texts(". ")).score_all([ds.queries[q] for q in qids])
    with open(tmp_path / "s.tsv", "w") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for i, q in enumerate(qids):
            fh.writelines(f"{q}\t{d}\t{float(S[i, j])!r}\n" for j, d in enumerate(ds.doc_ids))
    kw = dict(n_queries=3, include_sgr=False, progress=False, methods=("blend", "mmr"))
    a = run_main_job("scifact", **kw)
    b = run_main_job("scifact", scores_file=str(tmp_path / "s.tsv"), **kw)
    for m in ("blend", "mmr"):
        np.testing.assert_array_equal(a.methods[m]["ndcg"], b.methods[m]["ndcg"])
    assert any("user scores" in n and "(0 pool pairs missing)" in n for n in b.notes)


def test_sparse_only_recipe_tiny():
    from jkofast.studies.main_job import run_main_job

    res = run_main_job("scifact", n_queries=3, include_sgr=False, progress=False, methods=("jko_sparse",))
    assert 0.0 <= res.summary()["methods"]["jko_sparse"]["ndcg@10"] <= 1.0
    assert any("Porter" in n and "no transformer" in n for n in res.notes)


def test_sparse_recipe_is_the_train_selected_point():
    """SPARSE_RECIPE = the point experiments/sparse_only_v3.py selected on train
    (experiments/results/sparse_only_v3.json: tokens word, stop english, title x4; geometry ppmi;
    JKO point mild_fast_h8_T1)."""
    from jkofast.studies.sparse_recipe import SPARSE_RECIPE, sparse_analyzer
    from jkofast.text.analyzer import Analyzer

    assert (SPARSE_RECIPE.title_repeats, SPARSE_RECIPE.pool_size) == (4, 200)
    assert (SPARSE_RECIPE.ppmi_terms, SPARSE_RECIPE.ppmi_weight) == (12, 0.5)
    assert SPARSE_RECIPE.jko_params() == dict(h=8.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=1, inner_steps=15, tau0=1.0)
    cfg = SPARSE_RECIPE.jko_config("unrolled")
    assert (cfg.mode, cfg.grad, cfg.h, cfg.T) == ("wasserstein", "unrolled", 8.0, 1)
    # \w+ tokens (1-character tokens kept), English stop-words, Porter
    assert (
        sparse_analyzer() == sparse_analyzer(SPARSE_RECIPE) == Analyzer("word", stopwords="english", stemmer="porter")
    )
    assert sparse_analyzer().tokenize("IL-6 in type 2 diabetes") == ["il", "6", "type", "2", "diabet"]


def test_sparse_only_inputs_pools_energy_geometry():
    """Pools = top-200 of BM25 lucene built directly with the recipe's analyser over title x4 + text,
    r = its minmax score per pool, X = the PPMI-smoothed rows of the pool documents."""
    import dataclasses

    from jkofast.datasets.beir import load_dataset
    from jkofast.sparse.index import BM25Index
    from jkofast.studies.sparse_recipe import SPARSE_RECIPE, SparseRecipeCorpus, sparse_only_inputs, title_texts
    from jkofast.text.analyzer import Analyzer

    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")[:3]
    qs = [ds.queries[q] for q in qids]
    sc = SparseRecipeCorpus.for_recipe(ds)
    P, r, X = sparse_only_inputs(ds, qs, qids, corpus=sc)
    assert np.diff(P.offsets).tolist() == [200, 200, 200] and r.shape == (600,)
    an = Analyzer("word", stopwords="english", stemmer="porter")
    S = BM25Index("lucene", analyzer=an).fit(title_texts(ds, 4)).score_all(qs)
    for i in range(3):  # the pool = top-200 of that BM25, r = its minmax score
        top = np.argsort(-S[i], kind="stable")[:200]
        assert set(P.doc_idx[P.offsets[i] : P.offsets[i + 1]]) == set(top)
        si = S[i, P.doc_idx[P.offsets[i] : P.offsets[i + 1]]].astype(np.float64)
        np.testing.assert_allclose(
            r[P.offsets[i] : P.offsets[i + 1]], (si - si.min()) / (si.max() - si.min()), rtol=1e-12
        )
    Y = sc.ppmi_geometry(12, 0.5)
    assert Y.shape == (ds.n_docs, sc.V) and Y.has_canonical_format and Y.dtype == np.float32
    assert np.all(np.diff(Y.indptr)[np.diff(sc.doc_tf.indptr) > 0] > 0)  # non-empty docs keep a row
    np.testing.assert_array_equal(X.toarray(), Y[P.doc_idx].toarray())
    # x + 0.5 s / |s| with s >= 0: the TF-IDF row is kept, the added part has norm 0.5 (or 0)
    D = (Y.astype(np.float64) - sc.tfidf.doc_matrix().astype(np.float64)).tocsr()
    assert D.min() >= -1e-6
    n = np.sqrt(np.asarray(D.multiply(D).sum(axis=1)).ravel())
    np.testing.assert_allclose(n[n > 1e-3], 0.5, rtol=1e-4)
    with pytest.raises(ValueError, match="corpus was built"):
        sparse_only_inputs(ds, qs, qids, recipe=dataclasses.replace(SPARSE_RECIPE, title_repeats=3), corpus=sc)
    with pytest.raises(TypeError, match="recipe must be a SparseRecipe"):
        sparse_only_inputs(ds, qs, qids, recipe={"title_repeats": 4})


def test_rerank_blocks_equals_one_batch():
    import scipy.sparse as sp

    from jkofast.jko.solver import JKOConfig, rerank_batch
    from jkofast.studies.readout import rerank_blocks

    rng = np.random.default_rng(3)
    sizes = [5, 1, 7, 4, 6, 3, 8]
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(off[-1])
    X = sp.random(n, 40, density=0.25, random_state=3, format="csr") + sp.eye(n, 40, format="csr")
    E = -rng.random(n)
    p0 = rng.random(n) + 0.1
    E[off[2]] = np.nan  # a bad query keeps its index in the merged result
    cfg = JKOConfig(h=1.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=1, inner_steps=4, grad="implicit", tau0=1.0)
    one = rerank_batch(E, p0, off, csr=X, config=cfg)
    blk = rerank_blocks(E, p0, off, X, cfg, block=3)
    np.testing.assert_array_equal(blk.p, one.p)
    np.testing.assert_array_equal(blk.status, one.status)
    np.testing.assert_array_equal(blk.unconverged, one.unconverged)
    assert blk.errors == one.errors and list(blk.errors) == [2]


def test_rerank_blocks_rows_gathers_each_block_from_the_corpus_rows():
    # rows= picks pool entries from corpus rows block by block: equal to passing the gathered
    # rows; a corpus row may serve several pools
    E, off, X, cfg = _blocks_case()
    rows = np.array([4, 0, 7, 7, 1, 2, 3, 8, 0], np.int64)
    from jkofast.studies.readout import rerank_blocks

    got = rerank_blocks(E, None, off, X, cfg, block=2, rows=rows)
    want = rerank_blocks(E, None, off, X[rows], cfg, block=2)
    np.testing.assert_array_equal(got.p, want.p)
    np.testing.assert_array_equal(got.status, want.status)
    for bad, match in ((rows[:-1], "one per pool entry"), (rows + 0.5, "integers"), (rows + 1, r"\[0, 9\)")):
        with pytest.raises(ValueError, match=match):
            rerank_blocks(E, None, off, X, cfg, rows=bad)


# ------------------------------------------------------------- QA round 2: bad arguments


def _blocks_case():
    import scipy.sparse as sp

    from jkofast.jko.solver import JKOConfig

    off = np.array([0, 3, 5, 9], np.int64)
    X = sp.random(9, 12, density=0.4, random_state=1, format="csr") + sp.eye(9, 12, format="csr")
    E = -np.random.default_rng(1).random(9)
    cfg = JKOConfig(h=1.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=1, inner_steps=3, grad="implicit", tau0=1.0)
    return E, off, X, cfg


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(block=0), ValueError, "block must be >= 1"),  # range() arg 3 must not be zero
        (dict(block=-1), ValueError, "block must be >= 1"),  # returned np.empty garbage as p
        (dict(block=1.5), TypeError, "block must be an integer"),
    ],
)
def test_rerank_blocks_bad_block(kw, exc, match):
    from jkofast.studies.readout import rerank_blocks

    E, off, X, cfg = _blocks_case()
    with pytest.raises(exc, match=match):
        rerank_blocks(E, None, off, X, cfg, **kw)


def test_rerank_blocks_checks_offsets_p0_and_rows():
    from jkofast.jko.solver import rerank_batch
    from jkofast.studies.readout import rerank_blocks

    E, off, X, cfg = _blocks_case()
    with pytest.raises(ValueError, match="offsets"):  # the last pool was dropped silently
        rerank_blocks(E, None, off[:-1], X, cfg)
    with pytest.raises(ValueError, match="p0 and energy"):
        rerank_blocks(E, np.ones(4), off, X, cfg)
    with pytest.raises(ValueError, match="csr must have one row per pool entry"):
        rerank_blocks(E, None, off, X[:5], cfg)
    # p0=None (uniform start) like rerank_batch: was "'NoneType' object is not subscriptable"
    np.testing.assert_array_equal(
        rerank_blocks(E, None, off, X, cfg, block=2).p, rerank_batch(E, None, off, csr=X, config=cfg).p
    )


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(methods="jko_blend"), TypeError, "methods must be a tuple"),  # was split into letters
        (dict(n_queries=0), ValueError, "n_queries must be >= 1"),
        (dict(n_queries=-1), ValueError, "n_queries must be >= 1"),  # dropped the last query
        (dict(config="nope", methods=("jko_blend",)), ValueError, "unknown operating point"),
        (dict(grad="nope", methods=("jko_blend",)), ValueError, "grad must be one of"),
        (dict(sparse="nope"), ValueError, "sparse must be one of"),
        (dict(n_threads=0), ValueError, "n_threads must be >= 1"),
        (dict(scores_file="/nonexistent/s.tsv"), FileNotFoundError, "scores_file"),
    ],
)
def test_main_job_arguments_checked_before_loading(kw, exc, match):
    from jkofast.studies.main_job import run_main_job

    # a dataset that does not exist: the argument error must come before any stage
    with pytest.raises(exc, match=match):
        run_main_job("/nonexistent/beir", progress=False, **kw)


def test_sparse_recipe_corpus_arguments():
    from jkofast.datasets.beir import load_dataset
    from jkofast.studies.sparse_recipe import SparseRecipeCorpus, sparse_analyzer

    ds = load_dataset("scifact")
    with pytest.raises(ValueError, match="title_repeats must be >= 0"):
        SparseRecipeCorpus(ds, -1, sparse_analyzer())
    with pytest.raises(TypeError, match="analyzer must be"):
        SparseRecipeCorpus(ds, 4, "word")


def test_sparse_recipe_corpus_one_analysis_equals_separate_fits():
    from types import SimpleNamespace

    from jkofast.sparse.index import BM25Index, TfidfIndex
    from jkofast.studies.sparse_recipe import SparseRecipeCorpus, sparse_analyzer, title_texts

    ds = SimpleNamespace(
        titles=["Running cats", "", "Dogs and cats"],
        texts=["The cats were running quickly.", "A dog runs; dogs ran.", "Cats chase running dogs."],
    )
    an = sparse_analyzer()
    sc = SparseRecipeCorpus(ds, 2, an)
    texts = title_texts(ds, 2)
    bm, tf = BM25Index("lucene", analyzer=an).fit(texts), TfidfIndex(an).fit(texts)
    for mine, ref in ((sc.bm25, bm), (sc.tfidf, tf)):
        assert mine.vocab.terms == ref.vocab.terms
        for name in ("term_ptr", "post_docs", "post_w", "doc_len", "idf"):
            np.testing.assert_array_equal(getattr(mine, name), getattr(ref, name))
    ptr, terms, cnt = bm.vocab.transform(texts)
    np.testing.assert_array_equal(sc.doc_tf.indptr, ptr)
    np.testing.assert_array_equal(sc.doc_tf.indices, terms)
    np.testing.assert_array_equal(sc.doc_tf.data, cnt)
    q = ["running dogs", "cat"]
    np.testing.assert_array_equal(sc.bm25_scores(q), bm.score_all(q))
    np.testing.assert_array_equal(sc.tfidf.transform(q).toarray(), tf.transform(q).toarray())


def test_evaluate_topk_refuses_inconsistent_rankings():
    doc_ids = ["d0", "d1", "d2"]
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    ok = np.array([[1, 0, -1], [2, 1, 0]])
    np.testing.assert_array_equal(evaluate_topk(ok, ["q1", "q2"], qrels, doc_ids, k=2)["ndcg"], [1.0, 1.0])
    for top, qids, exc, match in (
        (np.array([[1, 1, 1], [2, 1, 0]]), ["q1", "q2"], ValueError, r"top_rows\[0\].*repeats"),  # nDCG 2.13
        (ok, ["q1", "q1"], ValueError, "query_ids holds duplicates"),  # one ranking lost
        (ok[:1], ["q1", "q2"], ValueError, "top_rows has 1 rows for 2"),  # IndexError
        (np.vstack([ok, ok[:1]]), ["q1", "q2"], ValueError, "top_rows has 3 rows"),  # extra row ignored
        (np.array([[5, 0, -1], [2, 1, 0]]), ["q1", "q2"], ValueError, "beyond the 3 doc_ids"),  # IndexError
        (ok.astype(float), ["q1", "q2"], TypeError, "top_rows must be a 2-D integer array"),
    ):
        with pytest.raises(exc, match=match):
            evaluate_topk(top, qids, qrels, doc_ids, k=2)


def test_main_table_variants():
    """The published main table's *_blend_dense (0.7, 0.3) and *_rerank (0, 1) rows run on request."""
    import numpy as np

    from jkofast.jko.energy import energy_and_p0
    from jkofast.jko.solver import rerank_batch
    from jkofast.studies.common import pool_inputs
    from jkofast.studies.main_job import ALL_METHODS, JKO_VARIANTS, run_main_job

    want = ("noprox_blend_dense", "kl_blend_dense", "jko_blend_dense", "noprox_rerank", "kl_rerank", "jko_rerank")
    assert set(want) <= set(ALL_METHODS)
    assert JKO_VARIANTS["jko_rerank"] == ("wasserstein", 0.0, 1.0)
    assert JKO_VARIANTS["kl_blend_dense"] == ("kl", 0.7, 0.3)
    res = run_main_job("scifact", n_queries=3, config="fast", include_sgr=False, progress=False, methods=want)
    s = res.summary()
    for name in want:
        assert 0.0 <= s["methods"][name]["ndcg@10"] <= 1.0
    # jko_rerank is JKO on the rerank-only energy: the same top-20 as rerank_batch with (0, 1)
    from jkofast.jko.solver import operating_point

    inp = pool_inputs("scifact", n_queries=3)
    cfg = operating_point("fast").replace(grad="implicit")
    E, p0 = energy_and_p0(inp.offsets, dense=inp.pools.dense, rerank=inp.rerank, alpha=0.0, gamma=1.0, tau0=cfg.tau0)
    p = rerank_batch(E, p0, inp.offsets, embeddings=inp.Z, config=cfg).p
    top = readout_topk(p, inp.pools)
    ref = res.methods["jko_rerank"]

    np.testing.assert_array_equal(
        evaluate_topk(top, inp.query_ids, inp.qrels, inp.doc_ids)["ndcg"], np.asarray(ref["ndcg"])
    )
