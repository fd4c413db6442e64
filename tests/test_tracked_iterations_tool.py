"""benchmarks/tools/tracked_iterations.py: 8 vs all tracked Sinkhorn pairs; the published side skips, saying why."""

import importlib.util
import math
import os

import numpy as np
import pytest

PATH = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "tools", "tracked_iterations.py")


def _tool():
    spec = importlib.util.spec_from_file_location("tracked_iterations", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_published_side_skips_clearly(tmp_path):
    tool = _tool()
    assert tool.published_module(None)[2] == "no --published DIR given"
    why = tool.published_module(str(tmp_path))[2]
    assert why.endswith("jko.py not found") and str(tmp_path) in why


def test_jkofast_side_measures_both_levels_and_reports_the_ratio(monkeypatch, capsys, tmp_path):
    tool = _tool()
    data = tool.pools(1)
    d = data[0]
    assert d["C"].shape == d["K"].shape == (200, 200) and d["E"].shape == d["p0"].shape == (200,)
    assert d["p0"].sum() == pytest.approx(1.0, abs=1e-6) and np.all(d["K"] >= 0)
    monkeypatch.setattr(tool, "pools", lambda n: data)
    out = tmp_path / "t.json"
    assert tool.main(["--pools", "1", "--repeat", "1", "--json", str(out)]) == 0
    text = capsys.readouterr()
    assert "published solver skipped: no --published DIR given" in text.err + text.out
    import json

    doc = json.loads(out.read_text())
    assert set(doc["ratio_all_over_8"]) == {"jkofast/loss", "jkofast/solve"}
    for key in ("jkofast/loss/8", "jkofast/loss/60", "jkofast/solve/8", "jkofast/solve/60"):
        assert math.isfinite(doc["times"][key]["median_ms"])  # every configuration was recorded
    r = doc["ratio_all_over_8"]["jkofast/loss"]["wall"]
    assert r == pytest.approx(
        doc["times"]["jkofast/loss/60"]["median_ms"] / doc["times"]["jkofast/loss/8"]["median_ms"]
    )
