"""Ranking metrics vs pytrec_eval and naive oracles; bootstrap CIs vs the SPEC loop."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast import numba_threads
from jkofast.eval.fastread import read_run_arrays
from jkofast.eval.metrics import (
    bootstrap_ci,
    evaluate,
    evaluate_codes,
    paired_bootstrap_diff,
    parse_metric,
)
from jkofast.eval.trec import QrelsArrays, RunArrays, read_qrels, read_run

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
SCIFACT_RUN = os.path.join(DATA, "metrics_scifact_bm25_top30.tsv.gz")
SCIFACT_QRELS = os.path.join(DATA, "metrics_scifact_qrels_test.tsv")

METRICS = ["ndcg@1", "ndcg@3", "ndcg@10", "ndcg", "recall@3", "recall@10", "p@1", "p@5", "p@10", "map", "map@5", "mrr"]


def synthetic(seed: int, n_queries: int = 30, n_docs: int = 40, score_levels: int = 4, long_ids: bool = False):
    """Random runs/qrels covering the edge cases: coarse scores (many ties), graded,
    label-0 and negative labels, unjudged docs, empty runs, queries without relevant
    docs, queries only in the run or only in the qrels, ids whose string order differs
    from their numeric order."""
    rng = np.random.default_rng(seed)
    docs = [str(i) for i in range(n_docs)] + ["d9", "d10", "D", "é", "z"]
    if long_ids:  # ids spanning several 8-byte words, sharing long prefixes
        docs = [f"MED-doc-{d}-{'x' * (i % 3)}" for i, d in enumerate(docs)] + ["MED-doc-"]
    run, qrels = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        n_ret = int(rng.integers(0, 15))
        chosen = rng.choice(len(docs), n_ret, replace=False)
        run[qid] = {docs[i]: float(rng.integers(0, score_levels)) / 2 for i in chosen}
        n_j = int(rng.integers(1, 8))
        judged = rng.choice(len(docs), n_j, replace=False)
        # labels in {-1, 0, 1, 2, 3}; at least one non-negative label per query
        # (pytrec_eval 0.5 loops forever on a query whose labels are all negative)
        labels = rng.integers(-1, 4, n_j)
        labels[0] = abs(labels[0])
        qrels[qid] = {docs[i]: int(v) for i, v in zip(judged, labels)}
        if q % 7 == 3:
            qrels[qid] = {docs[i]: 0 for i in judged}  # no relevant document
        if q % 11 == 5:
            run[qid] = {}  # empty run
    run["only_in_run"] = {"1": 1.0}
    qrels["only_in_qrels"] = {"1": 1}
    run["no_judgments"] = {"1": 1.0}
    qrels["no_judgments"] = {}  # pytrec_eval skips it
    return run, qrels


def _pytrec(run, qrels, metrics):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    req = {ref.pytrec_measure(m)[0] for m in metrics}
    res = pytrec_eval.RelevanceEvaluator(qrels, req).evaluate(run)
    return {m: {q: v[ref.pytrec_measure(m)[1]] for q, v in res.items()} for m in metrics}


def _check_against(res, expected):
    for m, by_q in expected.items():
        assert sorted(by_q) == sorted(res.query_ids)
        got = dict(zip(res.query_ids, res.per_query[m].tolist()))
        for q, v in by_q.items():
            assert abs(got[q] - v) <= 1e-9, (m, q, got[q], v)


@pytest.mark.parametrize("seed,long_ids", [(0, False), (1, False), (2, True), (3, True)])
def test_matches_pytrec_eval_synthetic(seed, long_ids):
    run, qrels = synthetic(seed, long_ids=long_ids)
    res = evaluate(run, qrels, METRICS)
    _check_against(res, _pytrec(run, qrels, METRICS))
    assert res.query_ids == [q for q in run if qrels.get(q)]
    # array input (de-duplication path) and the integer-code fallback give the same
    ra = RunArrays.from_dict(run)
    b = evaluate(ra, qrels, METRICS)
    for m in METRICS:
        assert_array_equal(res.per_query[m], b.per_query[m])


def test_integer_code_fallback_for_huge_ids(monkeypatch):
    import jkofast.eval.metrics as ev

    run, qrels = synthetic(6, long_ids=True)
    a = evaluate(run, qrels, METRICS)
    monkeypatch.setattr(ev, "MAX_ID_ROWS_BYTES", 0)
    assert ev._id_rows(["a"], ["b"]) is None
    b = evaluate(run, qrels, METRICS)
    c = evaluate(RunArrays.from_dict(run), qrels, METRICS)
    d = evaluate(run, qrels, METRICS, tie_break="given")
    monkeypatch.setattr(ev, "MAX_ID_ROWS_BYTES", 1 << 30)
    e = evaluate(run, qrels, METRICS, tie_break="given")
    for m in METRICS:
        assert_array_equal(a.per_query[m], b.per_query[m])
        assert_array_equal(a.per_query[m], c.per_query[m])
        assert_array_equal(d.per_query[m], e.per_query[m])


def test_id_rows_compare_like_strcmp_on_utf8():
    import itertools

    from jkofast.eval.metrics import _id_rows

    ids = [
        "",
        "a",
        "ab",
        "abcdefgh",
        "abcdefghi",
        "abcdefgh\x7f",
        "b",
        "é",
        "éa",
        "ÿ",
        "10",
        "9",
        "\U0001f600",
        "zzzzzzzzzzzzzzzzz",
    ]
    r, q = _id_rows(ids, ["x"])
    assert r.shape == (len(ids), 3) and q.shape == (1, 3)
    for i, j in itertools.product(range(len(ids)), repeat=2):
        assert (tuple(r[i]) < tuple(r[j])) == (ids[i].encode() < ids[j].encode())
    with pytest.raises(ValueError, match="NUL"):
        _id_rows(["a\x00b"], [])


def test_matches_naive_trec_eval_oracle():
    run, qrels = synthetic(5)
    res = evaluate(run, qrels, METRICS)
    _check_against(res, ref.trec_eval_metrics(run, qrels, METRICS))


def test_mrr_at_k_matches_pytrec_recip_rank_of_truncated_run():
    run, qrels = synthetic(3)
    for k in (1, 3, 10):
        trunc = {q: {d: run[q][d] for d in ref.trec_eval_order(run[q])[:k]} for q in run}
        expected = _pytrec(trunc, qrels, ["mrr"])["mrr"]
        r = evaluate(run, qrels, [f"mrr@{k}"])
        got = dict(zip(r.query_ids, r[f"mrr@{k}"].tolist()))
        for q, v in expected.items():
            assert abs(got[q] - v) <= 1e-9


def test_tie_break_is_doc_id_descending_string_order():
    # '9' > '10' as strings: trec_eval ranks '9' first among equal scores
    qrels = {"q": {"10": 1}}
    res = evaluate({"q": {"9": 1.0, "10": 1.0}}, qrels, ["mrr"])
    assert res["mrr"][0] == 0.5
    res = evaluate({"q": {"9": 1.0, "10": 1.0 + 1e-6}}, qrels, ["mrr"])
    assert res["mrr"][0] == 1.0


def test_scores_tie_at_float32_precision():
    # 1 + 5e-8 rounds to 1.0f (a tie, broken by doc id: 'b' first); 1 + 1e-7 does not
    qrels = {"q": {"a": 1}}
    assert evaluate({"q": {"a": 1.0 + 5e-8, "b": 1.0}}, qrels, ["mrr"])["mrr"][0] == 0.5
    assert evaluate({"q": {"a": 1.0 + 1e-7, "b": 1.0}}, qrels, ["mrr"])["mrr"][0] == 1.0
    pytrec_eval = pytest.importorskip("pytrec_eval")
    for eps in (5e-8, 1e-7):
        r = {"q": {"a": 1.0 + eps, "b": 1.0}}
        exp = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(r)
        assert evaluate(r, qrels, ["mrr"])["mrr"][0] == exp["q"]["recip_rank"]


def _scifact():
    return read_run(SCIFACT_RUN), read_qrels(SCIFACT_QRELS)


def test_matches_pytrec_eval_on_scifact():
    run, qrels = _scifact()
    assert len(run) == 300 and all(len(v) == 30 for v in run.values())
    metrics = ["ndcg@10", "ndcg@5", "ndcg", "recall@10", "recall@30", "p@10", "map", "map@10", "mrr"]
    res = evaluate(run, qrels, metrics)
    _check_against(res, _pytrec(run, qrels, metrics))
    # tie-heavy variant: scores rounded to one decimal
    coarse = {q: {d: round(s, 1) for d, s in v.items()} for q, v in run.items()}
    res = evaluate(coarse, qrels, metrics)
    _check_against(res, _pytrec(coarse, qrels, metrics))


def test_array_run_equals_dict_run_and_dedupes_last_wins():
    run, qrels = synthetic(7)
    ra = RunArrays.from_dict(run)
    a = evaluate(run, qrels, METRICS)
    b = evaluate(ra, qrels, METRICS)
    assert a.query_ids == b.query_ids
    for m in METRICS:
        assert_array_equal(a.per_query[m], b.per_query[m])
    # duplicates in array form: the last occurrence wins, as in a dict built line by line
    ids = np.array(["x", "y", "x", "z"])
    sc = np.array([5.0, 2.0, 1.0, 3.0])
    r_arr = evaluate((["q"], np.array([0, 4]), ids, sc), {"q": {"x": 1}}, ["mrr", "p@3"])
    r_dict = evaluate({"q": {"x": 1.0, "y": 2.0, "z": 3.0}}, {"q": {"x": 1}}, ["mrr", "p@3"])
    assert_array_equal(r_arr["mrr"], r_dict["mrr"])
    assert r_arr["mrr"][0] == pytest.approx(1 / 3)
    assert r_arr.n_ret[0] == 3
    # qrels in array form too
    c = evaluate(run, QrelsArrays.from_dict(qrels), METRICS)
    for m in METRICS:
        assert_array_equal(a.per_query[m], c.per_query[m])


def test_scifact_arrays_path_matches_dict_path():
    run, qrels = _scifact()
    ra = read_run_arrays(SCIFACT_RUN)
    a = evaluate(run, qrels, ["ndcg@10", "map"])
    b = evaluate(ra, qrels, ["ndcg@10", "map"])
    assert_array_equal(a["ndcg@10"], b["ndcg@10"])
    assert_array_equal(a["map"], b["map"])


@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_given_order_matches_published_evaluator(gain):
    rng = np.random.default_rng(11)
    ranked, qrels = {}, {}
    for q in range(25):
        n = int(rng.integers(0, 12))
        ranked[f"q{q}"] = [f"d{int(i)}" for i in rng.integers(0, 10, n)]  # duplicates
        judged = rng.choice(10, int(rng.integers(1, 6)), replace=False)
        qrels[f"q{q}"] = {f"d{int(i)}": int(rng.integers(-1, 4)) for i in judged}
    lens = [len(v) for v in ranked.values()]
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    ids = np.array([d for v in ranked.values() for d in v], dtype=str)
    scores = rng.random(off[-1])  # ignored in "given" mode
    res = evaluate((list(ranked), off, ids, scores), qrels, METRICS, gain=gain, tie_break="given")
    _check_against(res, ref.jko_metrics(ranked, qrels, METRICS, gain=gain))
    # the same as ranked lists {qid: [doc ids]}
    res2 = evaluate(ranked, qrels, METRICS, gain=gain, tie_break="given")
    for m in METRICS:
        assert_array_equal(res.per_query[m], res2.per_query[m])
    # a ranked list in trec_eval mode: list order kept, duplicates dropped (last wins)
    r3 = evaluate({"q": ["a", "b", "a"]}, {"q": {"a": 1}}, ["mrr"])
    assert r3["mrr"][0] == 0.5 and r3.n_ret[0] == 2


def test_exponential_gain_trec_order_vs_oracle():
    run, qrels = synthetic(4)
    res = evaluate(run, qrels, ["ndcg@3", "ndcg@10"], gain="exponential")
    for q, i in zip(res.query_ids, range(len(res.query_ids))):
        ranked = ref.trec_eval_order(run[q])
        for m, k in (("ndcg@3", 3), ("ndcg@10", 10)):
            exp = ref.metric_one(ranked, qrels[q], "ndcg", k, gain="exponential")
            assert abs(res[m][i] - exp) <= 1e-12


def test_linear_ndcg_matches_sklearn_on_binary_and_graded():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(2)
    n = 12
    rel = rng.integers(0, 4, n)
    score = rng.permutation(n).astype(float)  # no ties
    docs = [f"d{i}" for i in range(n)]
    run = {"q": dict(zip(docs, score.tolist()))}
    qrels = {"q": dict(zip(docs, rel.tolist()))}
    for k in (3, 5, 12):
        got = evaluate(run, qrels, [f"ndcg@{k}"])[f"ndcg@{k}"][0]
        assert_allclose(got, sk.ndcg_score(rel[None], score[None], k=k), rtol=1e-12)


def test_invariants_ndcg_range_and_ideal_ranking():
    run, qrels = synthetic(8)
    res = evaluate(run, qrels, METRICS)
    for m in METRICS:
        v = res.per_query[m]
        assert np.all((v >= 0) & (v <= 1)), m
    # the ideal ranking (labels descending) scores nDCG = 1 wherever a label is > 0
    ideal = {q: {d: float(lab) for d, lab in qrels[q].items()} for q in qrels}
    r = evaluate(ideal, qrels, ["ndcg@5", "ndcg", "map", "mrr"])
    for i, q in enumerate(r.query_ids):
        has_rel = any(v > 0 for v in qrels[q].values())
        for m in ("ndcg@5", "ndcg", "map", "mrr"):
            assert r[m][i] == pytest.approx(1.0 if has_rel else 0.0), (m, q)


def test_missing_queries_skip_or_zero():
    run, qrels = synthetic(9)
    skip = evaluate(run, qrels, ["ndcg@10"])
    zero = evaluate(run, qrels, ["ndcg@10"], missing="zero")
    assert "only_in_qrels" not in skip.query_ids
    assert zero.query_ids[: len(skip.query_ids)] == skip.query_ids
    assert zero.query_ids[len(skip.query_ids) :] == ["only_in_qrels"]
    assert zero["ndcg@10"][-1] == 0.0
    assert "only_in_run" not in zero.query_ids


def test_thread_invariance():
    run, qrels = synthetic(10, n_queries=60)
    with numba_threads(1):
        a = evaluate(run, qrels, METRICS)
    with numba_threads(2):
        b = evaluate(run, qrels, METRICS)
    c = evaluate(run, qrels, METRICS, n_threads=2)
    for m in METRICS:
        assert_array_equal(a.per_query[m], b.per_query[m])
        assert_array_equal(a.per_query[m], c.per_query[m])


def test_evaluate_codes_kernel_interface():
    # two queries; codes are lexicographic ranks; ties broken by code descending
    names, vals, n_ret = evaluate_codes(
        [0, 3, 3], [5, 7, 6], [1.0, 1.0, 2.0], [0, 1, 2], [5, 9], [1, 1], ["mrr", "recall@2"]
    )
    assert names == ["mrr", "recall@2"]
    # ranking of query 0: code 6 (2.0), then 7, then 5 -> relevant 5 at rank 3
    assert_allclose(vals[:, 0], [1 / 3, 0.0])
    assert_allclose(vals[:, 1], [0.0, 0.0])
    assert_array_equal(n_ret, [3, 0])
    with pytest.raises(TypeError, match="run_codes"):
        evaluate_codes([0, 1], [1.5], [1.0], [0, 0], [], [], ["mrr"])
    with pytest.raises(ValueError, match="same number of queries"):
        evaluate_codes([0, 1], [1], [1.0], [0, 0, 0], [], [], ["mrr"])


def test_parse_metric_aliases_and_errors():
    assert parse_metric("NDCG@10") == ("ndcg@10", 0, 10)
    assert parse_metric("ndcg_cut_10")[0] == "ndcg@10"
    assert parse_metric("ndcg_cut.5")[0] == "ndcg@5"
    assert parse_metric("P_10")[0] == "p@10"
    assert parse_metric("precision@3")[0] == "p@3"
    assert parse_metric("recip_rank")[0] == "mrr"
    assert parse_metric("map_cut_100")[0] == "map@100"
    for bad in ("foo@10", "ndcg@0", "recall", "p", "ndcg@x"):
        with pytest.raises(ValueError):
            parse_metric(bad)
    with pytest.raises(TypeError):
        parse_metric(10)


def test_bad_input_errors():
    run, qrels = {"q": {"a": 1.0}}, {"q": {"a": 1}}
    with pytest.raises(ValueError, match="gain"):
        evaluate(run, qrels, gain="log")
    with pytest.raises(ValueError, match="tie_break"):
        evaluate(run, qrels, tie_break="random")
    with pytest.raises(ValueError, match="missing"):
        evaluate(run, qrels, missing="drop")
    with pytest.raises(ValueError, match="NaN"):
        evaluate({"q": {"a": float("nan")}}, qrels)
    with pytest.raises(TypeError, match="run"):
        evaluate([1, 2], qrels)
    with pytest.raises(TypeError, match="qrels"):
        evaluate(run, [1])
    with pytest.raises(ValueError, match="offsets"):
        evaluate((["q"], np.array([0, 2]), np.array(["a"]), np.array([1.0])), qrels)
    with pytest.raises(ValueError, match="unique"):
        evaluate((["q", "q"], np.array([0, 1, 2]), np.array(["a", "b"]), np.array([1.0, 2.0])), qrels)
    with pytest.raises(ValueError, match="at least one"):
        evaluate(run, qrels, [])


def test_bytes_and_unicode_id_arrays():
    run, qrels = synthetic(13)
    a = evaluate(run, qrels, METRICS)
    ra = RunArrays.from_dict(run)
    assert ra.doc_ids.dtype.kind == "U"
    ascii_q = {q: v for q, v in run.items() if all(d.isascii() for d in v)}
    rb = RunArrays.from_dict(ascii_q)
    rb.doc_ids = rb.doc_ids.astype("S")
    b = evaluate(rb, qrels, METRICS)
    c = evaluate(ascii_q, qrels, METRICS)
    for m in METRICS:
        assert_array_equal(b.per_query[m], c.per_query[m])
        assert_array_equal(a.per_query[m], evaluate(ra, qrels, METRICS).per_query[m])
    with pytest.raises(ValueError, match="integers"):
        evaluate({"q": {"a": 1.0}}, {"q": {"a": 1.5}})


def test_empty_inputs():
    res = evaluate({}, {"q": {"a": 1}}, ["ndcg@10"])
    assert res.query_ids == [] and res["ndcg@10"].shape == (0,)
    assert res.means == {"ndcg@10": 0.0}
    assert res.summary() == {"ndcg@10": {"mean": 0.0}}
    res = evaluate({"q": {}}, {"q": {"a": 1}}, ["ndcg@10", "p@10"])
    assert_array_equal(res["ndcg@10"], [0.0])
    assert res.n_ret[0] == 0


def test_summary_uses_bootstrap_ci():
    run, qrels = synthetic(12)
    res = evaluate(run, qrels, ["ndcg@10"])
    s = res.summary()["ndcg@10"]
    m, lo, hi = ref.bootstrap_ci_loop(res["ndcg@10"])
    assert (s["mean"], s["lo"], s["hi"]) == (m, lo, hi)
    assert res.summary(ci=False)["ndcg@10"] == {"mean": m}


# ---------------------------------------------------------------- bootstrap


@pytest.mark.parametrize(
    "n,n_boot,alpha,seed", [(1, 50, 0.05, 0), (7, 300, 0.1, 3), (300, 2000, 0.05, 0), (301, 123, 0.05, 42)]
)
def test_bootstrap_ci_identical_to_naive_loop(n, n_boot, alpha, seed):
    x = np.random.default_rng(n).random(n)
    got = bootstrap_ci(x, n_boot=n_boot, alpha=alpha, seed=seed)
    assert tuple(got) == ref.bootstrap_ci_loop(x, n_boot, alpha, seed)
    assert got.lo <= got.mean <= got.hi or n == 1


def test_bootstrap_ci_blocks_do_not_change_numbers():
    # a large n forces several blocks of replicates
    x = np.random.default_rng(0).random(5000)
    assert tuple(bootstrap_ci(x, n_boot=900)) == ref.bootstrap_ci_loop(x, 900)


def test_bootstrap_fresh_generator_and_paired_diff():
    rng = np.random.default_rng(1)
    a, b = rng.random(50), rng.random(50)
    assert bootstrap_ci(a) == bootstrap_ci(a)
    assert paired_bootstrap_diff(a, b) == bootstrap_ci(a - b)
    d = paired_bootstrap_diff(a + 1.0, a)
    assert d.lo == pytest.approx(1.0) and d.hi == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap_diff(a, b[:3])
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci(a, alpha=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci(a, n_boot=0)
    with pytest.raises(ValueError, match="x"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="x"):
        bootstrap_ci([1.0, float("nan")])


# ---------------------------------------------------------------- CLI


def test_cli_evaluate_with_qrels_file(capsys):
    from jkofast.cli import main

    rc = main(
        [
            "evaluate",
            "--qrels",
            SCIFACT_QRELS,
            "--run",
            SCIFACT_RUN,
            "--metrics",
            "ndcg@10,recall@10",
            "--json",
            "--n-boot",
            "200",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    run, qrels = _scifact()
    res = evaluate(run, qrels, ["ndcg@10", "recall@10"])
    assert out["n_queries"] == 300
    m = out["metrics"]["ndcg@10"]
    assert m["mean"] == pytest.approx(res.means["ndcg@10"], abs=1e-12)
    assert (m["lo"], m["hi"]) == tuple(bootstrap_ci(res["ndcg@10"], n_boot=200)[1:])
    rc = main(["evaluate", "--qrels", SCIFACT_QRELS, "--run", SCIFACT_RUN])
    text = capsys.readouterr().out
    assert rc == 0 and "ndcg@10" in text and "95% CI" in text


def test_cli_evaluate_errors(capsys, tmp_path):
    from jkofast.cli import main

    assert main(["evaluate", "--run", SCIFACT_RUN]) == 2  # neither --dataset nor --qrels
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 x\n")
    assert main(["evaluate", "--qrels", SCIFACT_QRELS, "--run", str(bad)]) == 2
    assert "bad.trec:2" in capsys.readouterr().err


def test_hypothesis_matches_naive_oracle():
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies
    ids = st.sampled_from(["a", "b", "c", "10", "9", "ab", "é", "long-document-id-1"])
    runs = st.dictionaries(ids, st.sampled_from([0.0, 0.5, 1.0, -1.0, 2.0]), max_size=8)
    qrels_s = st.dictionaries(ids, st.integers(-1, 3), max_size=6)

    @hyp.settings(max_examples=40, deadline=None)
    @hyp.given(runs, qrels_s, st.sampled_from(["linear", "exponential"]))
    def check(run_q, qrels_q, gain):
        run, qrels = {"q": run_q}, {"q": qrels_q}
        res = evaluate(run, qrels, METRICS, gain=gain)
        if not qrels_q:  # no judgments: the query is not evaluated (pytrec_eval)
            assert res.query_ids == []
            return
        ranked = ref.trec_eval_order(run_q)
        for m in METRICS:
            kind, k = ref.split_metric(m)
            exp = ref.metric_one(ranked, qrels_q, kind, k, gain=gain)
            assert abs(res[m][0] - exp) <= 1e-12, (m, res[m][0], exp)

    check()


def test_cli_evaluate_with_bundled_dataset(capsys):
    """``--dataset scifact`` (the copy bundled in the package) gives the same numbers as
    ``--qrels`` with the test split file."""
    from jkofast.cli import main
    from jkofast.datasets.beir import bundled_path

    if not os.path.isdir(bundled_path("scifact")):
        pytest.skip("bundled SciFact is absent")
    args = ["evaluate", "--run", SCIFACT_RUN, "--metrics", "ndcg@10,map", "--json", "--n-boot", "100"]
    assert main([*args, "--dataset", "scifact", "--split", "test"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main([*args, "--qrels", SCIFACT_QRELS]) == 0
    b = json.loads(capsys.readouterr().out)
    assert a["metrics"] == b["metrics"] and a["n_queries"] == 300
    assert main([*args, "--dataset", "scifact", "--split", "nosuchsplit"]) == 2


# ---- adversarial inputs (QA review) ---------------------------------------------------------
def test_exponential_gain_overflow_is_rejected():
    from jkofast.eval.metrics import evaluate_codes

    run = {"q1": {"d1": 2.0, "d2": 1.0}}
    # 2**2000 - 1 overflowed to inf: nDCG = inf/inf = NaN silently
    with pytest.raises(ValueError, match="qrels: label 2000 overflows"):
        evaluate(run, {"q1": {"d2": 2000}}, ["ndcg@10"], gain="exponential")
    with pytest.raises(ValueError, match="qrels_labels"):
        evaluate_codes([0, 2], [1, 2], [2.0, 1.0], [0, 1], [2], [5000], ["ndcg@10"], gain="exponential")
    # the linear gain and labels up to the limit are fine: one relevant doc at rank 2
    r = evaluate(run, {"q1": {"d2": 1000}}, ["ndcg@10"], gain="exponential")
    assert r.means["ndcg@10"] == pytest.approx(1 / np.log2(3))
    assert evaluate(run, {"q1": {"d2": 2000}}, ["ndcg@10"]).means["ndcg@10"] == pytest.approx(1 / np.log2(3))


def test_evaluate_codes_rejects_duplicate_qrels_codes():
    from jkofast.eval.metrics import evaluate_codes

    # code 2 judged twice in query 0: recall@10 was 0.5 instead of 1 (documented precondition)
    with pytest.raises(ValueError, match="qrels_codes must be unique within a query: code 2"):
        evaluate_codes([0, 2], [1, 2], [2.0, 1.0], [0, 2], [2, 2], [1, 1], ["recall@10"])
    names, v, _ = evaluate_codes(
        [0, 2, 3], [1, 2, 2], [2.0, 1.0, 1.0], [0, 1, 2], [2, 2], [1, 1], ["recall@10"]
    )  # the same code in two queries is fine
    assert v.tolist() == [[1.0, 1.0]]


def test_malformed_run_and_qrels_values_are_named():
    qrels = {"q1": {"d2": 1}}
    with pytest.raises(TypeError, match=r"run\['q1'\] must be a dict"):
        evaluate({"q1": 5}, qrels)
    with pytest.raises(TypeError, match=r"qrels\['q1'\] must be a dict"):
        evaluate({"q1": {"d2": 1.0}}, {"q1": 5})
    with pytest.raises(TypeError, match=r"run\['q1'\]\['d1'\] must be a number"):
        evaluate({"q1": {"d1": "x"}}, qrels)
    with pytest.raises(TypeError, match="run: scores"):
        evaluate((["q1"], [0, 2], ["d1", "d2"], ["a", "b"]), qrels)
    with pytest.raises(TypeError, match="metrics"):
        evaluate({"q1": {"d2": 1.0}}, qrels, None)
    with pytest.raises(ValueError, match="cutoff"):  # OverflowError before
        evaluate({"q1": {"d2": 1.0}}, qrels, ["ndcg@99999999999999999999"])


def test_bootstrap_arguments_and_overflowing_values():
    with pytest.raises(TypeError, match="alpha"):
        bootstrap_ci([0.0, 1.0], alpha="x")
    with pytest.raises(TypeError, match="seed"):
        bootstrap_ci([0.0, 1.0], seed="x")
    with pytest.raises(ValueError, match="seed"):
        bootstrap_ci([0.0, 1.0], seed=-1)
    # the sum overflowed: mean inf, interval NaN; the CI is scale-equivariant (powers of two exact)
    x = np.array([1.0, 1.0, 0.5, 0.25])
    big = bootstrap_ci(x * 2.0**1020)
    small = bootstrap_ci(x)
    assert big == pytest.approx(tuple(v * 2.0**1020 for v in small), rel=1e-12)
    with pytest.raises(ValueError, match="a - b overflows"):
        paired_bootstrap_diff([1e308], [-1e308])


@pytest.mark.parametrize("as_arrays", [False, True])
def test_nan_scores_of_one_query_keep_the_others(as_arrays):
    from jkofast.eval.metrics import BadQueryError, BadQueryWarning

    rng = np.random.default_rng(7)
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(0, 3)) for j in range(6)} for i in range(5)}
    run = {f"q{i}": {f"d{j}": float(rng.random()) for j in range(8)} for i in range(5)}
    bad_run = {q: dict(r) for q, r in run.items()}
    bad_run["q1"]["d3"] = float("nan")
    bad_run["q4"]["d0"] = float("nan")
    good = {q: r for q, r in run.items() if q not in ("q1", "q4")}
    expect = evaluate(good, qrels, ["ndcg@5", "recall@5"])

    def as_input(r):
        if not as_arrays:
            return r
        qs = list(r)
        off = np.concatenate([[0], np.cumsum([len(r[q]) for q in qs])])
        return RunArrays(
            qs, off, np.array([d for q in qs for d in r[q]]), np.array([v for q in qs for v in r[q].values()])
        )

    with pytest.raises(BadQueryError, match=r"2 of 5 queries have invalid input") as ei:
        evaluate(as_input(bad_run), qrels, ["ndcg@5", "recall@5"])
    err = ei.value
    assert isinstance(err, ValueError) and sorted(err.errors) == ["q1", "q4"]
    assert "'q1'" in str(err) and "'q4'" in str(err)
    assert err.result.query_ids == expect.query_ids == ["q0", "q2", "q3"]
    for m in ("ndcg@5", "recall@5"):
        assert_array_equal(err.result[m], expect[m])
    with pytest.warns(BadQueryWarning, match="left out of the result"):
        res = evaluate(as_input(bad_run), qrels, ["ndcg@5", "recall@5"], errors="skip")
    assert res.query_ids == expect.query_ids and res.means == expect.means
    # the given order never reads the scores: NaN is not an error there
    evaluate(as_input(bad_run), qrels, ["ndcg@5"], tie_break="given")
    with pytest.raises(ValueError, match="errors must be"):
        evaluate(run, qrels, errors="ignore")


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 256, 257, 1000, 1025, 4099, 20000])
def test_resample_means_are_numpy_means_bit_for_bit(n):
    """The bootstrap kernel's pairwise sums are NumPy's x[idx].mean(axis=1) to the last bit."""
    from jkofast import numba_threads
    from jkofast.kernels.eval.bootstrap import resample_means

    rng = np.random.default_rng(n)
    for x in (
        rng.random(n),
        rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n),  # wide range: order matters
        np.where(rng.random(n) < 0.5, -0.0, 0.0),  # signed zeros
    ):
        idx = rng.integers(0, n, (5, n))
        ref = x[idx].mean(axis=1)
        for t in (1, 2):
            out = np.empty(5)
            with numba_threads(t):
                resample_means(x, idx, out)
            assert out.tobytes() == ref.tobytes()
