"""benchmarks/tools/ci_benchmarks.py: CI's asv smoke run covers every suite over three commits."""

import importlib.util
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..")
PATH = os.path.join(ROOT, "benchmarks", "tools", "ci_benchmarks.py")


def _tool():
    spec = importlib.util.spec_from_file_location("ci_benchmarks", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_three_consecutive_commits_run_every_suite_once():
    tool = _tool()
    names = tool.suites(ROOT)
    assert names and all(n.startswith("bench_") for n in names)
    runs = [set(tool.select(names, n, ["jkofast/sgr/_engine.py"])) for n in (40, 41, 42)]
    assert set().union(*runs) == set(names)
    assert sum(len(r) for r in runs) == len(names)  # each exactly once
    assert all(len(r) < len(names) for r in runs)


def test_changed_suites_and_shared_code_and_unknown_history():
    tool = _tool()
    names = ["bench_a", "bench_b", "bench_c", "bench_d"]
    got = tool.select(names, 3, ["benchmarks/bench_c.py", "README.md", "benchmarks/tools/x.py"])
    assert got == {
        "bench_a": "rotation group 0",
        "bench_c": "changed by the last commit",
        "bench_d": "rotation group 0",
    }
    assert set(tool.select(names, 3, ["benchmarks/common.py"])) == set(names)
    assert set(tool.select(names, None, [])) == set(names)
    assert set(tool.select(names, 3, None)) == set(names)


def test_regex_matches_exactly_the_picked_suites():
    tool = _tool()
    rx = re.compile(tool.regex({"bench_jko": "", "bench_sgr": ""}))
    assert rx.search("bench_jko.ImplicitSweeps.track_sweeps_per_query")
    assert rx.search("bench_sgr.SGRSyntheticQuery.time_search_200_queries")
    assert not rx.search("bench_jko_extra.X.time_y") and not rx.search("bench_sinkhorn.X.time_y")


def test_the_command_prints_a_regex_and_all_runs_everything():
    env = {**os.environ, "JKOFAST_CI_BENCH": "all"}
    out = subprocess.run([sys.executable, PATH, "--explain"], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip().startswith("^(") and "JKOFAST_CI_BENCH=all" in out.stderr
    n = len(_tool().suites(ROOT))
    assert out.stdout.count("|") == n - 1
