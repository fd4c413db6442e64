"""Every script in ``examples/`` runs, on its ``--tiny`` setting, and prints what it promises.

The scripts run in subprocesses with this tree first on ``PYTHONPATH`` and the session's
``JKOFAST_CACHE_DIR`` passed through, so they load the kernels the session compiled.  A new
example is picked up by the parametrisation; it must also get a check in ``CHECKS``.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
SCRIPTS = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))
FLOAT = r"[-+]?\d+\.\d+(?:e[-+]\d+)?"


def run_example(name: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "TMPDIR": str(tmp_path),  # the scripts' default output folders land in the test's folder
        "MPLBACKEND": "Agg",
    }
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


def check_rerank(out: str) -> None:
    assert re.search(r"^reranked 5 queries \(\w+ gradient\)", out, re.M)
    for name in ("bm25", "bm25 \\+ jko"):
        m = re.search(rf"^\s*{name}: ndcg@10 ({FLOAT})  recall@10 ({FLOAT})  mrr@10 ({FLOAT})$", out, re.M)
        assert m and all(0.0 <= float(v) <= 1.0 for v in m.groups())


def check_dropin(out: str) -> None:
    m = re.search(r"^run_jko: 2 outer steps, mass (\S+), top-5 documents \[", out, re.M)
    assert m and abs(float(m.group(1)) - 1.0) < 1e-5
    m = re.search(rf"^exact gradient \. v = ({FLOAT}), finite difference ({FLOAT})$", out, re.M)
    assert m and abs(float(m.group(1)) - float(m.group(2))) <= 1e-5 * max(1.0, abs(float(m.group(2))))


def check_sinkhorn(out: str) -> None:
    head = rf"^jkofast: cost <P, C> ({FLOAT}), \d+ iterations, converged True, marginal error ({FLOAT})"
    m = re.search(head, out, re.M)
    assert m and float(m.group(2)) < 1e-8
    if "POT is not installed" not in out:
        m = re.search(rf"^max \|P_jkofast - P_POT\| = ({FLOAT})$", out, re.M)
        assert m and float(m.group(1)) < 1e-8


def check_sgr(out: str) -> None:
    assert re.search(r"^index of 300 documents saved to .* and loaded again: same results$", out, re.M)
    hits = re.findall(r"^'[^']+': (.+)$", out, re.M)
    assert len(hits) == 5 and all(h.strip() for h in hits)


def check_ci(out: str) -> None:
    assert out.startswith("10 queries, 95% percentile-bootstrap intervals")
    rows = re.findall(rf"({FLOAT}) \[({FLOAT}), ({FLOAT})\]", out)
    assert len(rows) == 9  # 2 runs x 3 metrics, then 3 paired differences
    for mean, lo, hi in rows:
        assert float(lo) <= float(mean) <= float(hi)
    assert len(re.findall(r"^bm25 - dense .* (not )?significant$", out, re.M)) == 3


def check_study(out: str) -> None:
    m = re.search(r"^study linear-response on scifact: (\d+) queries, (\d+) rows", out, re.M)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0
    assert "within_target=True" in out
    assert re.search(r"^figures in .*: linear_response\.png$", out, re.M) or "matplotlib is not installed" in out
    assert re.search(r"^results in .*: linear-response\.json, linear-response\.md$", out, re.M)


CHECKS = {
    "dropin_solver.py": check_dropin,
    "evaluate_ci.py": check_ci,
    "rerank_trec_run.py": check_rerank,
    "sgr_index.py": check_sgr,
    "sinkhorn_pot.py": check_sinkhorn,
    "study_plot.py": check_study,
}


def test_every_example_has_a_check():
    assert len(SCRIPTS) >= 6
    assert sorted(CHECKS) == SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_docstring(name):
    """Each script says what it shows and how to run it, on tiny data too."""
    with open(os.path.join(EXAMPLES, name), encoding="utf-8") as fh:
        doc = ast.get_docstring(ast.parse(fh.read()))
    assert doc and "Run it::" in doc
    assert f"python examples/{name} --tiny" in doc


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_runs(name, tmp_path):
    r = run_example(name, tmp_path, "--tiny")
    assert r.returncode == 0, r.stderr[-4000:]
    CHECKS[name](r.stdout)


def test_study_plot_writes_its_files(tmp_path):
    out = tmp_path / "study"
    r = run_example("study_plot.py", tmp_path, "--tiny", "--out", str(out))
    assert r.returncode == 0, r.stderr[-4000:]
    assert (out / "linear-response.json").is_file() and (out / "linear-response.md").is_file()


def test_evaluate_ci_on_files(tmp_path):
    """Own run files: MRR@10 by hand is 1 and 0.75; the paired difference's per-query values are (0.5, 0)."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    (tmp_path / "a.run").write_text("q1 Q0 d1 1 2.0 a\nq1 Q0 d3 2 1.0 a\nq2 Q0 d2 1 2.0 a\nq2 Q0 d3 2 1.0 a\n")
    (tmp_path / "b.run").write_text("q1 Q0 d3 1 2.0 b\nq1 Q0 d1 2 1.0 b\nq2 Q0 d2 1 2.0 b\nq2 Q0 d3 2 1.0 b\n")
    args = ["--run-a", "a.run", "--run-b", "b.run", "--qrels", "qrels.txt", "--n-boot", "200"]
    r = run_example("evaluate_ci.py", tmp_path, *args)
    assert r.returncode == 0, r.stderr[-4000:]
    assert re.search(r"^\s*a\.run mrr@10\s+1\.0000 \[1\.0000, 1\.0000\]$", r.stdout, re.M)
    assert re.search(r"^\s*b\.run mrr@10\s+0\.7500 \[0\.5000, 1\.0000\]$", r.stdout, re.M)
    assert re.search(r"^a\.run - b\.run mrr@10\s+\+0\.2500 \[\+0\.0000, \+0\.5000\] not significant$", r.stdout, re.M)


def test_evaluate_ci_needs_all_three_files(tmp_path):
    r = run_example("evaluate_ci.py", tmp_path, "--run-a", "a.run")
    assert r.returncode == 2
    assert "--run-a, --run-b and --qrels go together" in r.stderr
