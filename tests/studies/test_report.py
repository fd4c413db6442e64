"""``jkofast study report``: runs the registered studies, one Markdown report, failures reported."""

import json

import pytest

import jkofast.studies._report as report
import jkofast.studies.bw_sweep as bw
import jkofast.studies.common as common
from jkofast.cli import main


def _broken(opts):
    raise RuntimeError("boom")


@pytest.fixture
def two_studies(monkeypatch):
    reg = {
        "bw-sweep": common.STUDIES["bw-sweep"],
        "broken": ("tests_broken_study:study", "a study that fails"),
        "report": common.STUDIES["report"],
    }
    monkeypatch.setattr(common, "STUDIES", reg)
    monkeypatch.setattr(report, "STUDIES", reg)
    monkeypatch.setattr(bw, "QUICK_QUERIES", 2)
    import sys
    import types

    mod = types.ModuleType("tests_broken_study")
    mod.study = _broken
    monkeypatch.setitem(sys.modules, "tests_broken_study", mod)


def test_report_gathers_tables_and_reports_failures(two_studies, tmp_path):
    res = common.run_study("report", common.StudyOptions(quick=True, progress=False, out=str(tmp_path)))
    status = {s["study"]: s for s in res.extra["studies"]}
    assert status["bw-sweep"]["ok"] and not status["broken"]["ok"]
    assert "RuntimeError: boom" in status["broken"]["error"]
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# jkofast study report: scifact (--quick)")
    assert "## bw-sweep" in md and "bw_jko_a25" in md and "**failed**" in md
    assert json.loads((tmp_path / "bw-sweep.json").read_text())["n_queries"] == 2
    assert json.loads((tmp_path / "report.json").read_text())["studies"][0]["study"] == "bw-sweep"


def test_report_needs_out(capsys):
    assert main(["study", "report", "--quick"]) == 2
    assert "needs --out" in capsys.readouterr().err


def test_report_has_a_bw_stability_section(monkeypatch, tmp_path):
    """The stability study runs with BW-JKO at BW_ALPHAS beside its methods; its bw rows are a section."""
    import jkofast.studies.stability as st

    reg = {"stability": common.STUDIES["stability"], "report": common.STUDIES["report"]}
    monkeypatch.setattr(report, "STUDIES", reg)
    seen = []

    def fake_run(name, opts):
        seen.append(opts.methods)
        rows = [
            {
                "method": m,
                "wc_mean": 0.3,
                "self_floor_mean": 0.1,
                "wc_debiased_mean": 0.2,
                "ndcg10": 0.6,
                "ndcg10_ci": [0.5, 0.7],
                "recall10": 0.8,
                "ms_per_query": None,
            }
            for m in opts.methods
            if m != "dense_topk"
        ]
        return common.StudyResult(name, "scifact", 2, rows, blocks=["the stability table"])

    monkeypatch.setattr(report, "run_study", fake_run)
    common.run_study("report", common.StudyOptions(quick=True, progress=False, out=str(tmp_path)))
    assert seen == [(*st.METHODS, *(f"bw:{a:g}" for a in st.BW_ALPHAS))]
    md = (tmp_path / "report.md").read_text()
    sec = md.split("## bw-stability", 1)[1]
    assert md.index("## stability") < md.index("## bw-stability")
    assert [ln.split()[0] for ln in sec.splitlines() if ln.startswith(("kl_", "bw:", "jko_"))] == [
        "kl_rerank",
        *(f"bw:{a:g}" for a in st.BW_ALPHAS),
        "jko_rerank",
    ]
