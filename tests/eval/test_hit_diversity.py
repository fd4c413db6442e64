"""``evaluate``: Hit@k (trec_eval success_k) and Diversity@k (SPEC A.7.1) against naive oracles."""

import numpy as np
import pytest
import reference_metrics as refm
from numpy.testing import assert_allclose

from jkofast.eval.metrics import evaluate, parse_metric


def _data(seed=0, nq=12, nd=30):
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(nd)]
    run, qrels = {}, {}
    for q in range(nq):
        ids = rng.choice(nd, size=int(rng.integers(0, 15)), replace=False)
        # coarse scores: many ties, so trec_eval's id-descending tie-break matters
        run[f"q{q}"] = {docs[i]: float(rng.integers(0, 4)) for i in ids}
        rel = rng.choice(nd, size=int(rng.integers(1, 5)), replace=False)
        qrels[f"q{q}"] = {docs[i]: int(rng.integers(0, 3)) for i in rel}
    Z = rng.normal(size=(nd, 6))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    return run, qrels, docs, Z


def test_parse_hit_and_diversity():
    assert parse_metric("hit@10") == ("hit@10", 5, 10)
    assert parse_metric("success_5")[0] == "hit@5"
    assert parse_metric("div@10")[0] == "diversity@10"
    for bad in ("hit", "diversity"):
        with pytest.raises(ValueError, match="needs a cutoff"):
            parse_metric(bad)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_hit_matches_oracle(k):
    run, qrels, _, _ = _data()
    res = evaluate(run, qrels, [f"hit@{k}"])
    ref = refm.trec_eval_metrics(run, qrels, [f"hit@{k}"])[f"hit@{k}"]
    assert_allclose(res[f"hit@{k}"], [ref[q] for q in res.query_ids])


def test_hit_matches_pytrec_eval_success():
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="peer oracle (pip install pytrec-eval-terrier)")
    run, qrels, _, _ = _data(seed=3)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"success.1,5,10"})
    ref = ev.evaluate(run)
    res = evaluate(run, qrels, ["hit@1", "hit@5", "hit@10"])
    for k in (1, 5, 10):
        assert_allclose(res[f"hit@{k}"], [ref[q][f"success_{k}"] for q in res.query_ids])


@pytest.mark.parametrize("tie_break", ["trec_eval", "given"])
def test_diversity_matches_oracle(tie_break):
    run, qrels, docs, Z = _data(seed=1)
    emb = dict(zip(docs, Z, strict=True))
    if tie_break == "given":
        run = {q: list(d) for q, d in run.items()}
    res = evaluate(run, qrels, ["ndcg@10", "diversity@10"], tie_break=tie_break, embeddings=(docs, Z))
    for i, q in enumerate(res.query_ids):
        ranked = run[q] if tie_break == "given" else refm.trec_eval_order(run[q])
        assert res["diversity@10"][i] == pytest.approx(refm.diversity_one(ranked, emb, 10), abs=1e-12)
    same = evaluate(run, qrels, ["diversity@10", "ndcg@10"], tie_break=tie_break, embeddings=emb)
    assert_allclose(same["diversity@10"], res["diversity@10"])
    assert_allclose(same["ndcg@10"], res["ndcg@10"])  # the label metrics are unaffected by the order asked


def test_diversity_hand_case():
    Z = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}, "r": {"a": 1.0}}
    qrels = {"q": {"a": 1}, "r": {"a": 1}}
    res = evaluate(run, qrels, ["diversity@3"], embeddings=(["a", "b", "c"], Z))
    # q: pairs (a,b) 1, (a,c) 0, (b,c) 1 -> 2/3; r: one document -> 0
    assert_allclose(res["diversity@3"], [2 / 3, 0.0])


def test_diversity_bad_input():
    run, qrels, docs, Z = _data()
    with pytest.raises(ValueError, match="needs embeddings"):
        evaluate(run, qrels, ["diversity@10"])
    with pytest.raises(ValueError, match="no embedding for ranked document"):
        evaluate(run, qrels, ["diversity@10"], embeddings=(docs[:3], Z[:3]))
    with pytest.raises(ValueError, match="one row per doc id"):
        evaluate(run, qrels, ["diversity@10"], embeddings=(docs, Z[:5]))
    with pytest.raises(TypeError, match="embeddings must be"):
        evaluate(run, qrels, ["diversity@10"], embeddings=Z)
    Zn = Z.copy()
    Zn[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        evaluate(run, qrels, ["diversity@10"], embeddings=(docs, Zn))
