"""``jkofast study nm-jko``: training on the train split, vanilla vs learned cost on the test split."""

import json
import types

import numpy as np
import pytest

import jkofast.studies.nm_jko as nm
from jkofast.cli import main
from jkofast.datasets.beir import load_dataset
from jkofast.jko.metric import load_metric
from jkofast.studies.common import StudyOptions, run_study
from jkofast.studies.published import published
from jkofast.studies.tuning import train_queries


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(nm, "QUICK_TEST", 3)
    monkeypatch.setattr(nm, "QUICK_TUNING", 4)
    monkeypatch.setattr(nm, "QUICK_EPOCHS", 2)


def test_nm_jko_quick_rows_training_and_metric_file(tiny, tmp_path):
    res = run_study("nm-jko", StudyOptions(quick=True, progress=False, out=str(tmp_path)))
    assert [r["method"] for r in res.rows] == ["jko_blend", "nm_jko"]
    for r in res.rows:
        assert {"method", "ndcg10", "recall10", "ms_per_query"} <= set(r)
        assert 0.0 <= r["ndcg10"] <= 1.0 and isinstance(r["ms_per_query"], float)
    assert res.rows[0]["published"] == published("nm_jko")["rows"]["jko_blend"]
    assert res.rows[1]["published"]["ndcg10"] == published("nm_jko")["rows"]["nm_jko"]["ndcg10"]
    d = res.rows[1]["diff_vs_jko_blend"]
    assert d[1] <= d[0] <= d[2]
    tr = res.extra["training"]
    assert tr["epochs"] == 2 and tr["n_tuning"] == 4 and 1 <= tr["n_train"] == tr["n_eligible"] <= 4
    assert tr["published"]["n_train"] == 79 and np.isfinite(tr["final_loss"])
    assert {"train_seconds", "train_cpu_seconds"} <= set(tr)
    assert "time_ratio" in res.extra  # reported, never bounded (speed belongs in asv)
    met = load_metric(tmp_path / nm.W_FILE, d=384)
    assert met.W.shape == (64, 384) and met.n_train == tr["n_train"] and met.epochs == 2
    assert met.final_loss == pytest.approx(tr["final_loss"])
    text = res.table()
    assert "n_train effective" in text and "79" in text and "--quick" in text and "BM25" in text
    doc = json.loads((tmp_path / "nm-jko.json").read_text())
    assert doc["training"]["n_train"] == tr["n_train"]


def test_training_queries_follow_the_protocol(tiny):
    opts = StudyOptions(quick=True, progress=False)
    metric, sel, info = nm.train_split_metric(opts, 6, 1)
    ds = load_dataset("scifact")
    tuning = train_queries(ds.qrels("train"), ds.query_ids, n=6, seed=0)
    assert info["n_tuning"] == 6 and set(sel.query_ids) <= set(tuning)
    # eligible = gold (any qrels doc) in the pool; the kept ones are the default_rng(0) shuffle of them
    off = info["inputs"].offsets
    assert info["inputs"].query_ids == tuning
    eligible = [i for i in range(6) if sel.gold_mask[off[i] : off[i + 1]].any()]
    np.random.default_rng(0).shuffle(eligible)
    np.testing.assert_array_equal(sel.index, eligible)
    assert metric.n_train == len(eligible) and metric.epochs == 1


def test_no_train_split_falls_back_to_vanilla(tiny, monkeypatch):
    monkeypatch.setattr(nm, "train_split_metric", lambda *a, **k: (None, None, {"n_tuning": 0, "pool_seconds": 0}))
    res = run_study("nm-jko", StudyOptions(quick=True, progress=False))
    a, b = res.rows
    assert a["ndcg10"] == b["ndcg10"] and b["diff_vs_jko_blend"] == [0.0, 0.0, 0.0]
    assert "training" not in res.extra and any("falls back to vanilla" in n for n in res.notes)


def test_gold_mask_counts_any_label():
    pools = types.SimpleNamespace(doc_idx=np.array([0, 1, 2, 1]))
    inp = types.SimpleNamespace(
        Z=np.zeros((4, 2)),
        offsets=np.array([0, 2, 4]),
        query_ids=["q1", "q2"],
        qrels={"q1": {"b": 0}, "q2": {"c": 1}},
        doc_ids=["a", "b", "c"],
        pools=pools,
    )
    np.testing.assert_array_equal(nm._gold_mask(inp), [False, True, True, False])


def test_nm_jko_cli_json(tiny, capsys):
    assert main(["study", "nm-jko", "--quick", "--json", "--threads", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in doc["rows"]] == ["jko_blend", "nm_jko"]
    assert doc["training"]["epochs"] == 2 and "time_ratio" in doc
