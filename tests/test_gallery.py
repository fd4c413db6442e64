"""The gallery scripts (``examples/gallery/plot_*.py``) run, print what they promise and draw a figure.

The documentation build runs them too (sphinx-gallery, a failing script fails the build); this test
runs them without Sphinx, in one subprocess with the Agg backend, each from its own folder as the
build does, saving every figure it leaves open. The speed example runs a second time with POT made
unimportable, the path a reader without the ``bench`` extra takes. It also checks what the site
needs of each script: a title, ``# %%`` cells, lines that fit the page's column, and a place on the
Examples page.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GALLERY = ROOT / "examples" / "gallery"
SCRIPTS = sorted(p.name for p in GALLERY.glob("plot_*.py"))
FLOAT = r"[-+]?\d+\.\d+"

# Runs each script as __main__ with plt.show() a no-op, saves the figures it leaves open, and prints a
# JSON line per script: its name, stdout and the PNG files written.
RUNNER = textwrap.dedent(
    """
    import contextlib, io, json, os, runpy, sys
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.show = lambda *a, **k: None
    gallery, out = sys.argv[1], sys.argv[2]
    for name in sys.argv[3:]:
        label = name
        if name.endswith(":no-pot"):
            name = name[: -len(":no-pot")]
            label = name.replace(".py", "-no-pot.py")
            sys.modules["ot"] = None  # `import ot` now raises ImportError
        os.chdir(gallery)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            runpy.run_path(os.path.join(gallery, name), run_name="__main__")
        files = []
        for i, n in enumerate(plt.get_fignums()):
            path = os.path.join(out, f"{label}-{i}.png")
            plt.figure(n).savefig(path)
            files.append(path)
        plt.close("all")
        print(json.dumps({"script": label, "stdout": buf.getvalue(), "figures": files}))
    """
)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """``{script: {"stdout": ..., "figures": [...]}}`` of one subprocess running every gallery script."""
    out = tmp_path_factory.mktemp("gallery")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "MPLBACKEND": "Agg",
    }
    args = [str(GALLERY), str(out), *SCRIPTS, "plot_4_speed.py:no-pot"]
    r = subprocess.run([sys.executable, "-c", RUNNER, *args], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    results = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return {d["script"]: d for d in results}


def test_the_gallery_has_its_four_topics():
    assert SCRIPTS == [
        "plot_1_ndcg_methods.py",
        "plot_2_rerank_ci.py",
        "plot_3_transport_plan.py",
        "plot_4_speed.py",
    ]


@pytest.mark.parametrize("name", [*SCRIPTS, "plot_4_speed-no-pot.py"])
def test_each_script_draws_a_figure(ran, name):
    figures = ran[name]["figures"]
    assert figures
    for f in figures:
        with open(f, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", [*SCRIPTS, "plot_4_speed-no-pot.py"])
def test_printed_lines_fit_the_column(ran, name):
    assert max(len(line) for line in ran[name]["stdout"].splitlines()) <= 79


def _ci_rows(out: str) -> list[tuple[str, float, float, float]]:
    rows = re.findall(rf"^(.+?)\s+nDCG@10 ({FLOAT})  \[({FLOAT}), ({FLOAT})\]$", out, re.M)
    return [(n, float(m), float(lo), float(hi)) for n, m, lo, hi in rows]


def test_ndcg_per_method(ran):
    rows = _ci_rows(ran["plot_1_ndcg_methods.py"]["stdout"])
    assert [r[0] for r in rows] == [
        "BM25",
        "dense (MiniLM)",
        "BM25 + dense, RRF",
        "blended energy, p0",
        "JKO-RAG rerank",
    ]
    for _, mean, lo, hi in rows:
        assert 0.0 < lo <= mean <= hi < 1.0


def test_rerank_before_and_after(ran):
    out = ran["plot_2_rerank_ci.py"]["stdout"]
    means = re.findall(
        rf"^(\S+)\s+before ({FLOAT}) \[({FLOAT}), ({FLOAT})\]\s+after ({FLOAT}) \[({FLOAT}), ({FLOAT})\]$",
        out,
        re.M,
    )
    assert [m[0] for m in means] == ["ndcg@10", "mrr@10", "recall@10"]
    for row in means:
        before, before_lo, before_hi, after, after_lo, after_hi = map(float, row[1:])
        assert before_lo <= before <= before_hi and after_lo <= after <= after_hi
    diffs = re.findall(rf"difference ({FLOAT}) \[({FLOAT}), ({FLOAT})\], (not )?significant$", out, re.M)
    assert len(diffs) == 3
    for (d, lo, hi, neg), row in zip(diffs, means):
        assert float(lo) <= float(d) <= float(hi)
        assert abs(float(d) - (float(row[4]) - float(row[1]))) <= 1e-4  # after - before, both rounded
        assert (neg == "") == (float(lo) > 0 or float(hi) < 0)


def test_transport_plan(ran):
    out = ran["plot_3_transport_plan.py"]["stdout"]
    m = re.search(rf"^<plan, C> = ({FLOAT}) after (\d+) iterations, marginal error (\S+)$", out, re.M)
    assert m and float(m.group(1)) > 0 and float(m.group(3)) < 1e-8
    m = re.search(rf"^mass kept in place \(trace of the plan\): ({FLOAT})$", out, re.M)
    assert m and 0.0 < float(m.group(1)) <= 1.0
    assert re.search(r"^relevant documents at ranks \[\d+(, \d+)*\] before, \[\d+(, \d+)*\] after$", out, re.M)


def test_speed_with_and_without_pot(ran):
    out = ran["plot_4_speed.py"]["stdout"]
    recorded = json.loads((ROOT / "benchmarks/results/headline.json").read_text(encoding="utf-8"))
    peers = [r["peer"] for r in recorded["speedups"] if r["peer"].startswith(("POT", "published torch"))]
    assert any(p.startswith("published torch") for p in peers)
    for text in (out, ran["plot_4_speed-no-pot.py"]["stdout"]):
        for p in peers:
            assert re.search(rf"^\S+x against {re.escape(p)}$", text, re.M), p
    rows = re.findall(r"^M = +(\d+): jkofast +(\S+) µs/pair(.*)$", out, re.M)
    assert [int(r[0]) for r in rows] == [25, 50, 100, 200]  # one row per pool size
    if importlib.util.find_spec("ot") is None:
        assert "POT is not installed" in out
    else:
        for _, _, rest in rows:
            m = re.search(r", plans within (\S+)$", rest)
            # POT updates the columns first, jkofast the rows: the plans differ by about the marginal error
            assert m and float(m.group(1)) < 1e-4
    no_pot = ran["plot_4_speed-no-pot.py"]["stdout"]
    assert "POT is not installed (pip install pot): jkofast is timed alone" in no_pot
    assert "POT " not in "".join(re.findall(r"^M = .*$", no_pot, re.M))


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_is_a_gallery_page(name):
    """A title (the docstring's first line, underlined), ``# %%`` cells, code lines that fit the column."""
    text = (GALLERY / name).read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(text)) or ""
    title, underline = [*doc.splitlines(), "", ""][:2]
    assert title and underline == "=" * len(title)
    assert text.count("\n# %%\n") >= 2
    assert max(len(line) for line in text.splitlines()) <= 79  # the column of a page with both sidebars
    assert "plt.show()" in text


def test_examples_page_shows_the_gallery():
    page = (ROOT / "docs" / "examples.md").read_text(encoding="utf-8")
    header = (GALLERY / "GALLERY_HEADER.rst").read_text(encoding="utf-8").rstrip().splitlines()[-1]
    m = re.search(r"\.\. include:: gallery/index\.rst\n\s+:start-after: (.+)\n", page)
    assert m and m.group(1) == header  # the thumbnails are included from the generated index
    conf = (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    assert '"examples_dirs": "../examples/gallery"' in conf and '"gallery_dirs": "gallery"' in conf
