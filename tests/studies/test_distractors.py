"""``jkofast study distractors``: query selection, distractor search, injection, Leakage@10 (SPEC A.7.6)."""

import json

import numpy as np
import pytest
from reference_stability import leakage_naive, ndcg_exp_naive

import jkofast.studies.distractors as dis
from jkofast.studies.common import StudyOptions, pool_inputs, run_study
from jkofast.studies.published import published


def test_select_queries_hand_case_and_seed0_choice():
    qrels = {str(i): {"d": int(i % 3 != 0)} for i in range(1, 31)}  # ids divisible by 3 have only label 0
    ids = [str(i) for i in range(1, 31)]
    elig = [q for q in ids if int(q) % 3 != 0]
    assert dis.select_queries(ids, qrels, 100) == elig
    want = [elig[int(i)] for i in sorted(np.random.default_rng(0).choice(len(elig), 5, replace=False))]
    assert dis.select_queries(ids, qrels, 5) == want
    with pytest.raises(ValueError, match="query sample is empty"):
        dis.select_queries(["1"], {"1": {"d": 0}}, 5)


def test_find_distractors_hand_case():
    # 2-D unit rows at angles 0, 10, 20, ... 80 degrees: the neighbours of row 0 are rows 1, 2, ... in order
    ang = np.deg2rad(np.arange(0, 90, 10))
    Z = np.stack([np.cos(ang), np.sin(ang)], 1).astype(np.float32)
    # gold 0; row 1 known-relevant: skipped; k_max 3 -> 2, 3, 4
    assert dis.find_distractors([0], Z, {1}, 3).tolist() == [2, 3, 4]
    # two golds: the first gold fills k_max, the second contributes nothing (the list is truncated)
    assert dis.find_distractors([0, 8], Z, set(), 2).tolist() == [1, 2]
    # three rows only: gold 0 takes row 1 (row 2 is known-relevant) and runs out; gold 2 then skips
    # itself and the already chosen row 1 and takes row 0
    Z2 = Z[:3]
    assert dis.find_distractors([0, 2], Z2, {2}, 3).tolist() == [1, 0]
    assert dis.find_distractors([0], Z2, {1, 2}, 3).tolist() == []


def test_inject_scores_and_offsets():
    inp = pool_inputs("scifact", "test", query_ids=["1", "3"])
    d = [np.array([5, 7, 9]), np.array([11, 13, 17])]
    bm = np.arange(2 * inp.doc_emb.shape[0], dtype=np.float32).reshape(2, -1)
    ext = dis.inject(inp, d, 2, bm, inp.doc_emb)
    off0 = inp.offsets
    assert np.diff(ext.offsets).tolist() == (np.diff(off0) + 2).tolist()
    for q in range(2):
        a, b = ext.offsets[q], ext.offsets[q + 1]
        rr = inp.rerank[off0[q] : off0[q + 1]]
        np.testing.assert_array_equal(ext.doc_idx[a : b - 2], inp.pools.doc_idx[off0[q] : off0[q + 1]])
        assert ext.doc_idx[b - 2 : b].tolist() == d[q][:2].tolist()
        assert ext.rerank[b - 1] == 0.5 * (rr.min() + rr.max())  # the midpoint of the pool's rerank scores
        np.testing.assert_allclose(ext.dense[b - 2 : b], inp.doc_emb[d[q][:2]] @ inp.query_emb[q], rtol=1e-6)
        assert ext.sparse[b - 2 : b].tolist() == bm[q, d[q][:2]].tolist()
        assert ext.injected[q].tolist() == d[q][:2].tolist()
    assert dis.inject(inp, d, 0, bm, inp.doc_emb).offsets.tolist() == off0.tolist()


def test_eval_counts_duplicates_like_the_published_evaluator():
    doc_ids = [f"d{i}" for i in range(20)]
    top = np.array([[3, 5, 3, 1, -1] + [-1] * 15])
    qrels = {"q": {"d3": 1, "d1": 1, "d9": 0}}
    got = dis._eval(top, ["q"], qrels, doc_ids)
    want = ndcg_exp_naive(["d3", "d5", "d3", "d1"], qrels["q"])
    assert got["ndcg"][0] == pytest.approx(want, rel=1e-12)


@pytest.fixture
def three_queries(monkeypatch):
    monkeypatch.setattr(dis, "QUICK_QUERIES", 3)


def test_quick_study_rows(three_queries, tmp_path):
    res = run_study("distractors", StudyOptions(quick=True, progress=False, out=str(tmp_path), n_threads=2))
    pub = published("distractors")["leakage_ndcg"]["scifact"]
    assert [(r["base_method"], r["n_inject"]) for r in res.rows] == [(m, n) for n in (0, 10) for m in dis.METHODS]
    for r in res.rows:
        assert 0.0 <= r["leakage10"] <= 1.0 and 0.0 <= r["ndcg10"] <= 1.0
        if r["n_inject"] == 0:
            assert r["leakage10"] == 0.0
        assert r["published"]["leakage10"] == pub[r["n_inject"]][r["base_method"]][0]
    jko10 = next(r for r in res.rows if r["method"] == "jko_blend N=10")
    assert len(jko10["leak_diff_vs_kl_blend"]) == 3 and "diff_vs_kl_blend" in jko10
    assert jko10["published_leak_diff_vs_kl_blend"] == [-0.2193, -0.2653, -0.1753]
    doc = json.loads((tmp_path / "distractors.json").read_text())
    assert len(doc["rows"]) == 8 and doc["n_inject"] == [0, 10]
    assert any("BM25" in n for n in res.notes)


def test_leakage_of_the_study_matches_the_oracle(three_queries):
    # the study's leakage on its own read-outs equals the SPEC definition computed naively
    from jkofast.eval.stability import leakage_at_k

    inp = pool_inputs("scifact", "test", query_ids=["1", "3", "5"])
    top = np.array([inp.pools.doc_idx[inp.offsets[q] : inp.offsets[q] + 10] for q in range(3)])
    inj = [top[0, :3], np.array([10**6]), top[2, [0, 0, 9]]]
    got = leakage_at_k(top, inj)
    assert got.tolist() == [leakage_naive(top[q], inj[q]) for q in range(3)] == [0.3, 0.0, 0.2]
