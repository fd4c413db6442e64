"""``jkofast study report``: runs the registered studies, one Markdown report, failures reported."""

import json

import pytest

import jkofast.studies.bw_sweep as bw
import jkofast.studies.common as common
import jkofast.studies.report as report
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
