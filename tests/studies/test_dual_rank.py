"""``jkofast study dual-rank`` on a few bundled SciFact test queries: the pipeline vs naive recomputation, outputs."""

import json

import numpy as np
import pytest
from numpy.testing import assert_allclose

import jkofast.studies.dual_rank as dr
from jkofast.cli import main
from jkofast.eval.selective import COVERAGE_GRID, n_keep
from jkofast.jko.solver import operating_point
from jkofast.studies.common import StudyOptions, pool_inputs, run_study

NQ = 4


@pytest.fixture
def few_queries(monkeypatch):
    monkeypatch.setattr(dr, "QUICK_QUERIES", NQ)


def test_pipeline_matches_naive_recomputation():
    inp = pool_inputs("scifact", "test", n_queries=NQ, n_threads=1)
    cfg = operating_point("contrib", grad="implicit")
    run = dr.run_dual_rank(inp, cfg, n_threads=1)
    res, sig, off = run.result, run.signals, inp.offsets
    assert run.ok.all()
    acc = []
    for q in range(NQ):
        p, f = res.p[off[q] : off[q + 1]], res.f[off[q] : off[q + 1]]
        t = int(np.argmax(p))
        assert sig.top1[q] == t and np.diff(off)[q] == 200
        assert_allclose(sig.conf_dual[q], f[t] - np.median(f), rtol=1e-12)
        x = inp.rerank[off[q] : off[q + 1]]
        assert_allclose(sig.conf_softmax[q], np.max(np.exp(x - x.max()) / np.exp(x - x.max()).sum()), rtol=1e-12)
        srt = np.sort(p)[::-1]
        assert_allclose(sig.conf_margin[q], srt[0] - srt[1], rtol=1e-12)
        doc = inp.doc_ids[int(inp.pools.doc_idx[off[q] + t])]
        acc.append(float(doc in inp.qrels[inp.query_ids[q]]))
        assert inp.pools.doc_idx[off[q] + t] == run.metrics["top"][q, 0]  # the read-out's first document
    assert run.top1_acc.tolist() == acc
    for key, (attr, _) in dr.SIGNALS.items():
        conf = getattr(sig, attr)
        order = sorted(range(NQ), key=lambda i: -conf[i])
        for row in run.coverage[key]:
            kept = order[: max(1, round(row["coverage"] * NQ))]
            assert row["n_kept"] == len(kept)
            assert_allclose(row["ndcg10"], np.mean(run.metrics["ndcg_exp"][kept]), rtol=1e-12)
            assert_allclose(row["recall10"], np.mean(run.metrics["recall"][kept]), rtol=1e-12)
            assert_allclose(row["top1_acc"], np.mean(np.array(acc)[kept]), rtol=1e-12)
    cd = sig.conf_dual
    assert run.conf_dual_range == {"min": cd.min(), "median": np.median(cd), "max": cd.max()}
    assert 0.0 <= run.ece <= 1.0


def test_study_result_keys_tables_and_files(few_queries, tmp_path):
    res = run_study("dual-rank", StudyOptions(quick=True, progress=False, out=str(tmp_path), n_threads=1))
    assert res.n_queries == NQ
    assert [r["method"] for r in res.rows] == ["rerank", "jko_dual"]
    jd = res.rows[1]
    assert {"method", "ndcg10", "recall10", "ms_per_query", "diff_vs_rerank", "top1_acc"} <= set(jd)
    assert jd["published"]["ndcg10"] == 0.7105 and jd["grad"] == "implicit"
    cov = res.extra["coverage"]
    assert set(cov) == {"dual", "softmax", "margin"}
    for rows in cov.values():
        assert [r["coverage"] for r in rows] == list(COVERAGE_GRID)
        assert [r["n_kept"] for r in rows] == [n_keep(c, NQ) for c in COVERAGE_GRID]
        assert rows[0]["ndcg10"] == pytest.approx(jd["ndcg10_exp"]) and rows[0]["top1_acc"] == jd["top1_acc"]
    assert res.extra["ece_published"] == 0.1405 and set(res.extra["conf_dual_range"]) == {"min", "median", "max"}
    doc = json.loads((tmp_path / "dual-rank.json").read_text())
    assert {"rows", "coverage", "ece", "conf_dual_range", "timing"} <= set(doc)
    text = (tmp_path / "dual-rank.md").read_text()
    assert "0.809/0.707" in text and "288 s" in text and "softmax" in text and "BM25" in text
    assert any("grad=implicit" in n and "unrolled" in n for n in res.notes)


def test_unrolled_parity_path_runs(few_queries):
    res = dr.study(StudyOptions(progress=False, n_threads=1), grad="unrolled", n_queries=2)
    assert res.rows[1]["grad"] == "unrolled" and res.extra["config"]["grad"] == "unrolled"
    assert [r["n_kept"] for r in res.extra["coverage"]["dual"]][:2] == [2, 2]


def test_study_cli_json(few_queries, capsys):
    assert main(["study", "dual-rank", "--quick", "--json", "--threads", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["study"] == "dual-rank" and doc["n_queries"] == NQ
    assert [r["method"] for r in doc["rows"]][-1] == "jko_dual"
    assert len(doc["coverage"]["margin"]) == len(COVERAGE_GRID) and "ece" in doc


def test_compile_ahead_child_takes_the_flow_with_duals_then_the_metrics(few_queries, monkeypatch):
    # the child's entries (the flow only for the implicit gradient: the one it compiles), and the study's
    # warm-up waits for each just before its first use; the results are those of a run without a child
    asked = []
    monkeypatch.setattr(dr, "compile_ahead", lambda entries, probes: asked.append((entries, sorted(probes))))
    assert dr._ahead("implicit") is None and dr._ahead("unrolled") is None  # (the stub starts nothing)
    assert asked == [
        (("jko.flow.duals", "evaluation"), ["evaluation", "jko.flow.duals"]),
        (("evaluation",), ["evaluation"]),
    ]
    events = []

    class Child:
        entries = ("jko.flow.duals", "evaluation")

        def wait_for(self, entry):
            events.append(entry)
            return True

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            events.append("close")

    opts = StudyOptions(quick=True, progress=False, n_threads=1)
    monkeypatch.setattr(dr, "_ahead", lambda grad: Child())
    with_child = dr.study(opts)
    assert events == ["jko.flow.duals", "evaluation", "close"]
    monkeypatch.setattr(dr, "_ahead", lambda grad: None)
    without = dr.study(opts)
    rows = [[{k: v for k, v in r.items() if k != "ms_per_query"} for r in res.rows] for res in (with_child, without)]
    assert rows[0] == rows[1] and with_child.extra["coverage"] == without.extra["coverage"]
