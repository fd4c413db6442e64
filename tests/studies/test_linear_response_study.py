"""``jkofast study linear-response``: implicit JVP of a converged JKO step vs finite differences, on SciFact."""

import json

import pytest

import jkofast.studies.linear_response as lrs
from jkofast.studies.common import StudyOptions, run_study


@pytest.fixture
def one_query(monkeypatch):
    monkeypatch.setattr(lrs, "QUICK_QUERIES", 1)
    monkeypatch.setattr(lrs, "N_DIRS", 1)
    monkeypatch.setattr(lrs, "S_VALUES", (1e-3,))
    monkeypatch.setattr(lrs, "ADAM_QUERIES", 1)
    monkeypatch.setattr(lrs, "ADAM_STEPS", 20)


def test_linear_response_study(one_query, tmp_path):
    res = run_study("linear-response", StudyOptions(quick=True, progress=False, out=str(tmp_path), n_threads=1))
    assert [(r["mode"], r["band"]) for r in res.rows] == [(m, b) for m in ("wasserstein", "kl") for b in range(4)]
    for r in res.rows:
        assert r["n"] == 1
        assert r["rel_err"] <= lrs.TARGET and r["within_target"]
        assert r["gain"] > 0 and r["gain_fd"] == pytest.approx(r["gain"], rel=1e-3)
        assert set(r["rel_err_by_s"]) == {"0.001"}
    for mode in ("wasserstein", "kl"):
        assert res.extra["steps"][mode][0]["residual"] < lrs.STEP_TOL
        assert res.extra["adam"][mode][0]["adam_l1"] >= 0
    doc = json.loads((tmp_path / "linear-response.json").read_text())
    assert len(doc["rows"]) == 8
    md = (tmp_path / "linear-response.md").read_text()
    assert "rel_err" in md and "BM25" in md and "objective='entropic'" in md
