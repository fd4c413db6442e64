"""Compile ahead (``jkofast._ahead``): the cache probe, when a child starts, its success and failure."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import jkofast._ahead as ahead


def _module(tmp_path, name: str, source: str):
    """Import ``source`` as the new module ``name`` (written to ``tmp_path``; never compiled before)."""
    (tmp_path / f"{name}.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def _fresh_module(tmp_path, name: str):
    """A module with one cached and one uncached njit function, never compiled before."""
    return _module(
        tmp_path,
        name,
        "import numba\n"
        "@numba.njit(cache=True)\n"
        "def twice(x):\n"
        "    return 2 * x\n"
        "@numba.njit\n"
        "def thrice(x):\n"
        "    return 3 * x\n",
    )


def test_cached_probe_follows_the_on_disk_index(tmp_path):
    m = _fresh_module(tmp_path, "ahead_probe_mod")
    assert ahead.cached(m.twice) is False
    assert m.twice(np.int64(4)) == 8
    assert ahead.cached(m.twice) is True
    assert ahead.cached(m.thrice) is None  # no cache: a child could not help


def test_no_child_when_warm_off_or_one_core(tmp_path, monkeypatch):
    m = _fresh_module(tmp_path, "ahead_probe_mod2")
    started = []
    monkeypatch.setattr(ahead.subprocess, "Popen", lambda *a, **k: started.append(a))
    assert ahead.compile_ahead(("topk",), [m.thrice]) is None  # caching off
    monkeypatch.setenv(ahead.ENV_SWITCH, "0")
    assert ahead.compile_ahead(("topk",), [m.twice]) is None
    monkeypatch.delenv(ahead.ENV_SWITCH)  # a child would start from here on (Popen is stubbed)
    monkeypatch.setattr(ahead, "cpu_count", lambda: 1)
    assert ahead.compile_ahead(("topk",), [m.twice]) is None
    monkeypatch.setattr(ahead, "cpu_count", lambda: 2)
    m.twice(np.int64(1))
    assert ahead.compile_ahead(("topk",), [m.twice]) is None  # everything cached already
    assert started == []


@pytest.mark.skipif(ahead.cpu_count() < 2, reason="compile ahead starts a child only with two or more cores")
def test_child_runs_the_entries_and_reports_failure(tmp_path, monkeypatch):
    monkeypatch.delenv(ahead.ENV_SWITCH, raising=False)  # the test session turns compile ahead off
    m = _fresh_module(tmp_path, "ahead_probe_mod3")
    with ahead.compile_ahead(("topk",), [m.twice]) as a:
        assert a.entries == ("topk",)
        assert a.wait() and a.returncode == 0
    bad = ahead.compile_ahead(("no-such-entry",), [m.twice])
    try:
        assert bad.wait() is False and bad.returncode == 2  # `jkofast warmup` refuses the name
        assert isinstance(bad.error(), str)
    finally:
        bad.close()
    early = ahead.compile_ahead(("topk",), [m.twice])
    early.close()  # stopped while it may still run: no exception, a return code, idempotent
    early.close()
    assert early.returncode is not None


@pytest.mark.skipif(ahead.cpu_count() < 2, reason="compile ahead starts a child only with two or more cores")
def test_child_names_each_entry_it_has_done_and_the_caller_waits_for_one(tmp_path, monkeypatch):
    monkeypatch.delenv(ahead.ENV_SWITCH, raising=False)  # the test session turns compile ahead off
    m = _fresh_module(tmp_path, "ahead_probe_mod5")
    with ahead.compile_ahead(("topk", "text"), {"topk": [m.twice], "text": [m.twice]}) as a:
        assert a.entries == ("topk", "text")
        assert a.wait_for("text")  # the later entry: the earlier one is done before it
        assert a.done() == ["topk", "text"]
        assert a.wait_for("topk")
        assert a.wait_for("energy") is False  # not given to the child: the caller compiles it itself
        assert a.wait() and a.returncode == 0
    with ahead.compile_ahead(("no-such-entry",), {"no-such-entry": [m.twice]}) as bad:
        assert bad.wait_for("no-such-entry") is False  # the child ended without it (`jkofast warmup` refused it)
        assert bad.done() == []


def test_per_entry_probes_give_the_child_only_the_entries_not_cached(tmp_path, monkeypatch):
    monkeypatch.delenv(ahead.ENV_SWITCH, raising=False)
    monkeypatch.setattr(ahead, "cpu_count", lambda: 2)
    cached_mod, cold_mod = _fresh_module(tmp_path, "ahead_probe_mod6"), _fresh_module(tmp_path, "ahead_probe_mod7")
    cached_mod.twice(np.int64(1))
    started = []

    class Proc:  # a child that has ended
        returncode = 0

        def __init__(self, cmd, **kwargs):
            started.append(cmd)

        def poll(self):
            return 0

    monkeypatch.setattr(ahead.subprocess, "Popen", Proc)
    a = ahead.compile_ahead(
        ("topk", "text", "energy"), {"topk": [cold_mod.twice], "text": [cached_mod.twice], "energy": [cold_mod.twice]}
    )
    assert a.entries == ("topk", "energy")  # in the order given, the cached one left out
    assert started[0][-1].endswith("['warmup', '--jobs', '1', '--only', 'topk,energy'])\n")
    a.close()
    assert ahead.compile_ahead(("text",), {"text": [cached_mod.twice]}) is None  # all cached: no child
    assert ahead.compile_ahead(("topk",), {"topk": [cold_mod.thrice]}) is None  # caching off: a child could not help
    assert len(started) == 1


def test_child_command_runs_this_processs_jkofast(tmp_path):
    # from a folder holding another "jkofast" (a repository root beside an installed copy), the
    # child must import the same package as this process: its cache entries are per source folder
    import subprocess

    import jkofast

    (tmp_path / "jkofast").mkdir()
    (tmp_path / "jkofast" / "__init__.py").write_text("raise ImportError('the checkout in the current folder')\n")
    (tmp_path / "jkofast" / "__main__.py").write_text("")
    probe = ahead.jkofast_command(["warmup", "--only", "no-such-entry"])
    probe[2] = probe[2].split("\nfrom jkofast.cli")[0] + "\nimport jkofast\nprint(jkofast.__file__)\n"
    out = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == jkofast.__file__


def _nested_module(tmp_path, name: str):
    """A module whose uncached njit ``outer`` calls ``inner`` (the callee compiles inside the caller's compile)."""
    return _module(
        tmp_path,
        name,
        "import numba\n"
        "@numba.njit\n"
        "def inner(x):\n"
        "    return x + 1\n"
        "@numba.njit\n"
        "def outer(x):\n"
        "    return inner(x) * 2\n",
    )


def _announced(estimate):
    """The notice's first line: the estimate the command passes in, rounded, in its sentence."""
    return f"compiling kernels for this machine (once; about {estimate:.0f} s)"


def test_compile_notice_announces_a_cold_cache_once_and_counts(tmp_path):
    m = _nested_module(tmp_path, "ahead_notice_mod")
    lines = []
    with ahead.CompileNotice(lines.append, 42.0, every_s=0.0) as notice:
        assert m.outer(np.int64(1)) == 4
    assert lines[0] == _announced(42.0)
    assert notice.count == 2 and lines[-1].startswith("compiled 2 kernels in ")  # the callee counted
    assert sum("compiling kernels for this machine" in ln for ln in lines) == 1
    quiet = []
    with ahead.CompileNotice(quiet.append, 42.0):
        assert m.outer(np.int64(2)) == 6  # compiled already: nothing to say
    assert quiet == []


def test_compile_notice_of_a_command_is_silent_when_disabled(tmp_path):
    # `rerank`/`search`/`study` with --quiet or --json: no line, even on a cold cache
    m = _nested_module(tmp_path, "ahead_notice_off_mod")
    lines = []
    with ahead.compile_notice(lines.append, 7.0, enabled=False):
        assert m.outer(np.int64(1)) == 4
    assert lines == []
    m2 = _nested_module(tmp_path, "ahead_notice_on_mod")
    with ahead.compile_notice(lines.append, 7.0):
        assert m2.outer(np.int64(1)) == 4
    assert lines[0] == _announced(7.0)


def test_compile_recorder_charges_each_signature_its_own_span(tmp_path, monkeypatch):
    import types

    from jkofast import warmups
    from jkofast.warmups import CompileRecorder

    ticks = iter(range(100))  # a fake clock, one tick further at each reading: outer reads 0 and 3, inner 1 and 2
    monkeypatch.setattr(warmups, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    m = _nested_module(tmp_path, "ahead_recorder_mod")
    with CompileRecorder() as rec:
        m.outer(np.float64(1.0))
    rows = {name.rsplit(".", 1)[-1]: (sig, s) for name, sig, s in rec.rows()}
    assert set(rows) == {"inner", "outer"} and rows["outer"][0] == "(float64)"
    own = {name: ticks_spent for name, (_, ticks_spent) in rows.items()}
    assert own == {"inner": 2 - 1, "outer": (3 - 0) - (2 - 1)}  # the caller's own span excludes its callee's
    with CompileRecorder() as rec:
        m.outer(np.float64(2.0))
    assert rec.rows() == []  # a repeated call compiles nothing
