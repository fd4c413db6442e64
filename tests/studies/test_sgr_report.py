"""``jkofast study sgr-report``: route recall against the routed set of SPEC B.6, the ablation and
reference rows, the full metric set, the command."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from beir_helpers import write_beir
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast.cli import main
from jkofast.pools.retrievers import get_retriever
from jkofast.sgr.retriever import SparseGeometricRetriever
from jkofast.studies.sgr_report import ABLATIONS, METRICS, ranking_metrics, route_recall

SMALL = dict(centre_size=8, code_size=5, cooc_top=4, assoc_k=6, route_k=4, route_budget=6, pool_size=8)


def _corpus(n_docs=40, n_words=30, seed=1):
    rng = np.random.default_rng(seed)
    words = [f"w{i:02d}" for i in range(n_words)]
    prob = 1.0 / np.arange(1, n_words + 1) ** 0.8
    prob /= prob.sum()
    return [" ".join(rng.choice(words, size=int(rng.integers(3, 16)), p=prob)) for _ in range(n_docs)]


QUERIES = ["w00 w03 w07", "w01 w12 w20", "w05", "w09 w02 w28 w13", "w07 unknownword", "w25 w26 w27", "nothing"]


@pytest.fixture(scope="module")
def setup():
    docs = _corpus()
    ids = [f"d{i}" for i in range(len(docs))]
    rng = np.random.default_rng(2)
    qids = [f"q{i}" for i in range(len(QUERIES))]
    qrels = {q: {ids[j]: 1 for j in rng.choice(len(docs), 3, replace=False)} for q in qids[:-2]}
    qrels[qids[0]]["d_absent"] = 1  # a judged document absent from the corpus is not counted
    qrels[qids[1]][ids[0]] = 0  # label 0: not relevant
    r = SparseGeometricRetriever(**SMALL).fit(docs, ids=ids)
    return r, docs, ids, qids, qrels


def _routed_set(r, text):
    """U of SPEC B.6 spelled out: every document in a routed branch (the oracle's routing)."""
    ix = r._ix
    qi, qt, qv = r.transform_queries([text])
    V = r.n_terms_
    q = np.zeros(V)
    q[qt] = qv.astype(np.float64)
    G = np.zeros((V, V))
    for t in range(V):
        lo, hi = ix["g_indptr"][t], ix["g_indptr"][t + 1]
        G[t, ix["g_idx"][lo:hi]] = ix["g_val"][lo:hi]
    if not q.any():
        return set()
    rt, _ = ref.sgr_route(q, G, r.params["alpha"], r.params["route_budget"])
    bi, mem_doc = ix["b_indptr"], ix["mem_doc"]
    return {int(d) for j in rt for d in mem_doc[bi[j] : bi[j + 1]]}


def test_route_recall_is_the_share_of_relevant_documents_in_the_routed_set(setup):
    r, docs, ids, qids, qrels = setup
    before = r.config
    rr = route_recall(r, QUERIES, qids, qrels, ids, P=4)
    assert r.config == before  # the retriever's parameters are restored
    hits = total = 0
    per = []
    pool = r.pool(QUERIES, P=4)
    pool_rec = []
    for i, (q, text) in enumerate(zip(qids, QUERIES, strict=True)):
        U = _routed_set(r, text)
        assert rr.n_routed[i] == len(U)
        rel = {ids.index(d) for d, lab in qrels.get(q, {}).items() if lab > 0 and d in ids}
        if not rel:
            assert math.isnan(rr.per_query[i])
            continue
        per.append(len(rel & U) / len(rel))
        hits, total = hits + len(rel & U), total + len(rel)
        pool_rec.append(len(rel & set(pool.doc[i, : pool.n[i]].tolist())) / len(rel))
        assert rr.per_query[i] == pytest.approx(per[-1])
    assert rr.macro == pytest.approx(np.mean(per))
    assert rr.micro == pytest.approx(hits / total)
    assert rr.pool_recall == pytest.approx(np.mean(pool_rec))
    assert 0 < rr.macro < 1  # the fixture reaches some relevant documents and misses others
    d = rr.to_dict()
    assert d["n_queries_judged"] == len(per) and d["routed_docs_max"] == int(rr.n_routed.max())


def test_route_recall_ignores_the_bm25_additions_and_checks_its_input(setup):
    r, docs, ids, qids, qrels = setup
    plain = route_recall(r, QUERIES, qids, qrels, ids)
    fused = SparseGeometricRetriever(**SMALL, bm25_candidates=20, bm25_weight=1.0).fit(docs, ids=ids)
    rr = route_recall(fused, QUERIES, qids, qrels, ids)
    assert_array_equal(rr.n_routed, plain.n_routed)
    assert_allclose(rr.per_query, plain.per_query)
    assert fused.config.bm25_candidates == 20
    with pytest.raises(ValueError, match="query_ids"):
        route_recall(r, QUERIES[:2], qids, qrels, ids)
    with pytest.raises(ValueError, match="doc_ids"):
        route_recall(r, QUERIES, qids, qrels, ids[:-1])


def test_each_ablation_row_is_the_retriever_with_that_term_zeroed(setup):
    from jkofast.studies.sgr_report import _query_params

    r, docs, ids, qids, qrels = setup
    base = r.search(QUERIES, 10)[0]
    changed = 0
    assert {k for c in ABLATIONS.values() for k in c} == {"w_tail", "w_lex", "w_sem", "w_rare", "eta", "lam_m", "lam_d"}
    for change in ABLATIONS.values():
        assert all(v == 0 for v in change.values())
        with _query_params(r, **change):
            got = r.search(QUERIES, 10)
        fresh = SparseGeometricRetriever(**SMALL, **change).fit(docs, ids=ids).search(QUERIES, 10)
        assert_array_equal(got[0], fresh[0])
        assert_array_equal(got[1], fresh[1])
        changed += not np.array_equal(got[0], base)
    assert r.search(QUERIES, 10)[0].tolist() == base.tolist()  # restored
    assert changed >= 3  # the terms matter on this fixture: the rows are not all the same ranking


def test_all_routed_row_scores_every_routed_document(setup):
    """P = the largest |U|: the pool is all of U and the order is the oracle's with that P."""
    from jkofast.studies.sgr_report import _query_params

    r, docs, ids, qids, qrels = setup
    width = int(route_recall(r, QUERIES, qids, qrels, ids).n_routed.max())
    assert width > SMALL["pool_size"]  # the shortlist prunes on this fixture
    ix = r._ix
    sem = {
        t: list(zip(ix["sem_idx"][ix["sem_indptr"][t] : ix["sem_indptr"][t + 1]].tolist(),
                    ix["sem_val"][ix["sem_indptr"][t] : ix["sem_indptr"][t + 1]].astype(np.float64).tolist()))
        for t in range(r.n_terms_)
    }  # fmt: skip
    with _query_params(r, pool_size=width):
        top = r.search(QUERIES, 10)[0]
        pool = r.pool(QUERIES)
        p = r.params
    for i, text in enumerate(QUERIES):
        U = _routed_set(r, text)
        assert pool.n[i] == len(U)
        if not U:
            continue
        qi, qt, qv = r.transform_queries([text])
        q = np.zeros(r.n_terms_)
        q[qt] = qv.astype(np.float64)
        o = ref.sgr_query(ix, q, p, sem)
        n = min(10, len(U))
        assert top[i, :n].tolist() == list(o["order"][:n])


def test_tfidf_cosine_row_is_exact_cosine(setup):
    from sklearn.feature_extraction.text import TfidfVectorizer

    r, docs, ids, qids, qrels = setup
    vec = TfidfVectorizer(token_pattern=r"(?u)\b\w\w+\b").fit(docs)
    cos = (vec.transform(QUERIES) @ vec.transform(docs).T).toarray()
    top, sc = get_retriever("tfidf", max_features=50_000).fit(docs).search(QUERIES, 10)
    for i in range(len(QUERIES)):
        n = min(10, int((cos[i] > 0).sum()))  # past the matching documents the order is padding
        got = top[i][:n]
        assert (got >= 0).all()
        assert_allclose(cos[i, got], np.sort(cos[i])[::-1][:n], rtol=1e-5, atol=1e-7)


def _naive(ranked, rel):
    top = ranked[:10]
    hits = [1.0 if d in rel else 0.0 for d in top]
    dcg = sum(h / math.log2(i + 2) for i, h in enumerate(hits))
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(rel), 10)))
    first = next((i for i, h in enumerate(hits) if h), None)
    return {
        "ndcg@10": dcg / idcg if idcg else 0.0,
        "mrr@10": 0.0 if first is None else 1 / (first + 1),
        "p@10": sum(hits) / 10,
        "recall@10": sum(hits) / len(rel) if rel else 0.0,
        "hit@10": float(any(hits)),
    }


def test_full_metric_set_matches_naive_definitions(setup):
    r, docs, ids, qids, qrels = setup
    top = r.search(QUERIES, 10)[0]
    m = ranking_metrics(top, qids, qrels, ids)
    assert set(m) == set(METRICS)
    for i, q in enumerate(qids):
        rel = {d for d, lab in qrels.get(q, {}).items() if lab > 0}
        want = _naive([ids[j] for j in top[i] if j >= 0], rel)
        for k in METRICS:
            assert m[k][i] == pytest.approx(want[k]), (q, k)


def test_study_command_prints_every_row(tmp_path, capsys):
    docs = _corpus(60, seed=4)
    rng = np.random.default_rng(5)
    qs = [(f"q{i}", " ".join(rng.choice([f"w{j:02d}" for j in range(30)], 3))) for i in range(8)]
    qrels = [(q, f"d{j}", 1) for q, _ in qs for j in rng.choice(60, 2, replace=False)]
    root = write_beir(tmp_path / "beir", [(f"d{i}", "", t) for i, t in enumerate(docs)], qs, qrels)
    assert main(["study", "sgr-report", "--dataset", root, "--json", "--threads", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = [row["method"] for row in out["rows"]]
    assert names == ["frozen", "defaults", *ABLATIONS, "all routed", "tfidf cosine"]
    for row in out["rows"]:
        assert {"ndcg10", "mrr10", "p10", "recall10", "hit10"} <= set(row)
        assert 0 <= row["hit10"] <= 1 and row["p10"] <= row["hit10"]
        if row["method"] != "frozen":
            assert "diff_vs_frozen" in row
    rr = out["route_recall"]
    assert set(rr) == {"frozen", "defaults"}  # no published figures outside SciFact
    # the final score is computed on U only: no row's recall exceeds the routed set's
    assert out["rows"][0]["recall10"] <= rr["frozen"]["macro"] + 1e-12
    assert main(["study", "sgr-report", "--dataset", root, "--threads", "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "route recall" in text and "MRR@10" in text and "zero w_lex" in text
