"""benchmarks/tools/ci_benchmarks.py: CI's asv smoke run executes every benchmark and fails on a broken one."""

import importlib.util
import os
import subprocess
import sys
import textwrap

ROOT = os.path.join(os.path.dirname(__file__), "..")
PATH = os.path.join(ROOT, "benchmarks", "tools", "ci_benchmarks.py")


def _tool():
    spec = importlib.util.spec_from_file_location("ci_benchmarks", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_suites(root):
    """A benchmarks folder of two suites: parameters, setup_cache, a skip, a broken track_ and a raising time_."""
    bench = root / "benchmarks"
    bench.mkdir()
    (bench / "__init__.py").write_text("")
    log = root / "calls.txt"
    (bench / "bench_good.py").write_text(
        textwrap.dedent(f"""
        LOG = {str(log)!r}

        def _log(*a):
            with open(LOG, "a") as f:
                f.write(" ".join(map(str, a)) + "\\n")

        class Params:
            params = ([1, 2], ["a", "b"])
            param_names = ["n", "s"]

            def setup(self, n, s):
                _log("setup", n, s)

            def teardown(self, n, s):
                _log("teardown", n, s)

            def time_it(self, n, s):
                _log("time", n, s)

            def track_value(self, n, s):
                return float(n)

        class Cached:
            def setup_cache(self):
                _log("setup_cache")
                with open("cache_file.txt", "w") as f:  # in the working directory, as asv suites write
                    f.write("41")
                return 41

            def track_cached(self, c):
                return c + 1

            def time_cached(self, c):
                _log("cached", c)

        class Skips:
            def setup(self):
                raise NotImplementedError("needs an extra")

            def time_never(self):
                _log("never")
        """)
    )
    (bench / "bench_bad.py").write_text(
        textwrap.dedent("""
        class Broken:
            def time_raises(self):
                raise RuntimeError("boom")

            def track_not_a_number(self):
                return "x"
        """)
    )
    return log


def test_every_benchmark_and_parameter_runs_once_and_a_broken_one_fails(tmp_path, monkeypatch):
    # the fake folder is imported as the package ``benchmarks``: the repository's own must not be in the way
    for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    tool = _tool()
    log = _fake_suites(tmp_path)
    monkeypatch.chdir(tmp_path)
    benches = {b.name: b for b in tool.discover(str(tmp_path))}
    assert set(benches) == {
        "bench_bad.Broken.time_raises",
        "bench_bad.Broken.track_not_a_number",
        "bench_good.Cached.time_cached",
        "bench_good.Cached.track_cached",
        "bench_good.Params.time_it",
        "bench_good.Params.track_value",
        "bench_good.Skips.time_never",
    }
    assert tool.n_params(benches["bench_good.Params.time_it"]) == 4
    caches: dict = {}
    b = benches["bench_good.Params.time_it"]
    for idx in range(tool.n_params(b)):
        tool.run_one(b, idx, caches)
    tool.run_one(benches["bench_good.Cached.time_cached"], 0, caches)
    tool.run_one(benches["bench_good.Cached.track_cached"], 0, caches)
    tool.run_one(benches["bench_good.Skips.time_never"], 0, caches)
    lines = log.read_text().splitlines()
    assert lines == [
        *[x for n in (1, 2) for s in "ab" for x in (f"setup {n} {s}", f"time {n} {s}", f"teardown {n} {s}")],
        "setup_cache",  # once for both benchmarks of the class
        "cached 41",
    ]
    for name, err in (
        ("bench_bad.Broken.time_raises", RuntimeError),
        ("bench_bad.Broken.track_not_a_number", AssertionError),
    ):
        try:
            tool.run_one(benches[name], 0, caches)
        except err:
            pass
        else:
            raise AssertionError(f"{name} did not fail")


def test_the_command_exits_2_naming_the_broken_benchmarks(tmp_path):
    _fake_suites(tmp_path)
    out = subprocess.run([sys.executable, PATH, "--root", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "bench_bad.Broken.time_raises FAILED" in out.stderr and "boom" in out.stderr
    assert "track_ returned str 'x', not a number" in out.stderr
    assert "bench_good.Params.time_it[3] ok" in out.stdout
    assert "7 benchmarks of 2 suites, 13 parameter combinations, 2 failed" in out.stdout
    assert not (tmp_path / "cache_file.txt").exists()  # setup_cache ran in a scratch folder, since removed


def test_lists_every_suite_of_the_repository():
    out = subprocess.run([sys.executable, PATH, "--list"], capture_output=True, text=True, check=True, cwd=ROOT)
    listed = {line.split(".")[0] for line in out.stdout.splitlines()}
    assert listed == set(_tool().suites(os.path.abspath(ROOT)))
