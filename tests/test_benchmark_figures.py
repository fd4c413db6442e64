"""The Benchmarks page shows the figures of ``benchmarks/results/headline.json``, as they stand.

``benchmarks/tools/plot_benchmarks.py`` draws them; run here into a temporary folder, it must give
the figures the page shows: the same files, with the same labels and numbers (the text of each SVG,
which matplotlib keeps as comments; the drawing itself may differ between matplotlib versions).
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHOWN = ROOT / "docs" / "_static" / "bench"


def labels(svg: pathlib.Path) -> list[str]:
    """The text of the figure, in drawing order (matplotlib writes each label as a comment)."""
    return re.findall(r"<!-- (.*?) -->", svg.read_text(encoding="utf-8"))


def test_the_page_shows_every_figure():
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    shown = re.findall(r"^```\{image\} _static/bench/(\S+\.svg)$", page, re.M)
    assert sorted(shown) == sorted(p.name for p in SHOWN.glob("*.svg"))
    assert len(shown) == 4


def test_the_figures_are_those_of_the_results_file(tmp_path):
    pytest.importorskip("matplotlib", reason='the plot extra: pip install "jkofast[plot]"')
    tool = ROOT / "benchmarks" / "tools" / "plot_benchmarks.py"
    r = subprocess.run([sys.executable, str(tool), "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    drawn = sorted(p.name for p in tmp_path.glob("*.svg"))
    assert drawn == sorted(p.name for p in SHOWN.glob("*.svg"))
    for name in drawn:
        now = labels(tmp_path / name)
        assert now and now == labels(SHOWN / name), f"{name}: run benchmarks/tools/plot_benchmarks.py"
