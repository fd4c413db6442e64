"""benchmarks/tools/instructions.py: the comparison, threshold and override logic (no valgrind
needed), and one count of the cheapest family where valgrind is installed."""

import importlib.util
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
PATH = os.path.join(ROOT, "benchmarks", "tools", "instructions.py")


def _tool():
    spec = importlib.util.spec_from_file_location("instructions_tool", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


tool = _tool()


def test_threshold_is_strict_growth_only():
    base = {"a": 1_000_000, "b": 1_000_000, "c": 1_000_000, "d": 1_000_000}
    tree = {"a": 1_020_000, "b": 1_020_001, "c": 900_000, "d": 1_030_000}
    rows = {r["family"]: r for r in tool.compare(tree, base, threshold=0.02)}
    assert rows["a"]["verdict"] == "ok"  # exactly +2 %: within
    assert rows["b"]["verdict"] == "regression"
    assert rows["c"]["verdict"] == "ok"  # a smaller count never fails
    assert rows["d"]["verdict"] == "regression"
    assert rows["d"]["ratio"] == pytest.approx(1.03)
    assert [r["family"] for r in tool.compare(tree, base, threshold=0.05) if r["verdict"] != "ok"] == []


def test_accepted_line_overrides_only_its_family(tmp_path):
    f = tmp_path / "accepted.txt"
    f.write_text("# family reason\nsgr_query the tail gate now runs on every query  # issue 99\n\n")
    accepted = tool.read_accepted(str(f))
    assert accepted == {"sgr_query": "the tail gate now runs on every query"}
    rows = tool.compare({"sgr_query": 110, "metrics": 110}, {"sgr_query": 100, "metrics": 100}, 0.02, accepted)
    assert [(r["family"], r["verdict"]) for r in rows] == [("sgr_query", "accepted"), ("metrics", "regression")]
    text = tool.table(rows, accepted)
    assert "sgr_query" in text and "the tail gate now runs on every query" in text and "1.1000" in text


def test_accepted_line_without_reason_is_refused(tmp_path):
    f = tmp_path / "accepted.txt"
    f.write_text("metrics\n")
    with pytest.raises(ValueError, match=r"accepted.txt:1: 'metrics' needs a reason"):
        tool.read_accepted(str(f))
    assert tool.read_accepted(str(tmp_path / "absent.txt")) == {}


def test_families_on_one_side_never_fail():
    rows = tool.compare({"new_family": 5, "x": 10}, {"x": 10, "old_family": 7})
    assert [(r["family"], r["verdict"]) for r in rows] == [("new_family", "new"), ("x", "ok"), ("old_family", "gone")]


def test_checked_in_accepted_file_parses_and_names_known_families():
    accepted = tool.read_accepted()
    assert set(accepted) <= set(tool.families())


def test_parse_dumps_reads_one_total_per_family(tmp_path):
    prefix = str(tmp_path / "cg.out")
    for i, (fam, n) in enumerate([("metrics", 123), ("bm25_topk", 456)], 1):
        (tmp_path / f"cg.out.{i}").write_text(
            f"version: 1\ndesc: Trigger: Client Request: {fam}\nevents: Ir\ntotals: {n}\n"
        )
    # each family's child and the parent also write a final dump at exit, empty outside the regions
    (tmp_path / "cg.out.77").write_text("version: 1\ndesc: Trigger: Program termination\nevents: Ir\ntotals: 0\n")
    assert tool.parse_dumps(prefix) == {"metrics": 123, "bm25_topk": 456}
    (tmp_path / "cg.out.78").write_text("version: 1\ndesc: Trigger: Program termination\nevents: Ir\ntotals: 5\n")
    with pytest.raises(RuntimeError, match="counted outside a family's region"):
        tool.parse_dumps(prefix)
    os.remove(tmp_path / "cg.out.78")
    (tmp_path / "cg.out.3").write_text("version: 1\ntotals: 9\n")
    with pytest.raises(RuntimeError, match="not a per-family callgrind dump"):
        tool.parse_dumps(prefix)


@pytest.mark.skipif(tool.unavailable() is not None, reason=str(tool.unavailable()))
def test_count_cheapest_family_under_callgrind():
    # the harness end to end: warm-up, counted child (the region only), dump parsing
    counts = tool.count(names=["sinkhorn_log"])
    assert set(counts) == {"sinkhorn_log"}
    # 20 log-domain iterations on a 200 x 200 cost: at least one instruction per entry and pass,
    # far below the interpreter's start (~1e9): the count is the region, not the process
    assert 200 * 200 * 20 < counts["sinkhorn_log"] < 200_000_000


def test_native_run_lists_each_familys_imports_apart():
    # each family runs in its own fork: a module one family imported is not listed for the next
    # (two stand-in families that import one module each and compile nothing)
    import json
    import subprocess
    import sys

    code = """
import importlib, sys
sys.path.insert(0, sys.argv[1])
import instr_workloads as w
def family(module):
    return lambda: (importlib.import_module(module), lambda: None)[1]
w.FAMILIES.clear()
w.FAMILIES.update(stop=family("jkofast.text.stopwords"), trec=family("jkofast.eval.trec"))
sys.exit(w._main(["--native", "stop", "trec", "stop"]))
"""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, os.path.join(ROOT, "benchmarks")], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    stop, trec = set(report["families"]["stop"]), set(report["families"]["trec"])
    assert os.path.join("text", "stopwords.py") in stop - trec
    assert os.path.join("eval", "trec.py") in trec - stop
    assert "__init__.py" in stop & trec and set(report["imported"]) == stop | trec


def test_listing_run_keeps_the_callers_settings_and_cache(monkeypatch):
    # the imports are listed with the caller's CPU, switches and kernel cache (CI's warm-up filled it),
    # not the counted child's pinned environment; jkofast comes from the tree
    import json
    import subprocess

    seen = {}

    def fake_run(cmd, env, capture_output, text):
        seen.update(cmd=cmd, env=env)
        report = {"families": {"metrics": ["eval/metrics.py"]}}
        return subprocess.CompletedProcess(cmd, 0, stdout="log line\n" + json.dumps(report), stderr="")

    monkeypatch.setenv("JKOFAST_CACHE_DIR", "/machine/cache")
    monkeypatch.setenv("NUMBA_BOUNDSCHECK", "1")
    monkeypatch.delenv("NUMBA_CPU_NAME", raising=False)
    monkeypatch.setattr(tool.subprocess, "run", fake_run)
    got = tool.list_imports("/the/tree", ["metrics"])
    assert got == {"metrics": ["eval/metrics.py"]}
    assert seen["cmd"][1:] == [tool.WORKLOADS, "--native", "metrics"]
    env = seen["env"]
    assert env["JKOFAST_CACHE_DIR"] == "/machine/cache" and env["NUMBA_BOUNDSCHECK"] == "1"
    assert "NUMBA_CPU_NAME" not in env and env["PYTHONPATH"].split(os.pathsep)[0] == "/the/tree"


def _workloads():
    spec = importlib.util.spec_from_file_location(
        "instr_workloads_mod", os.path.join(ROOT, "benchmarks", "instr_workloads.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_client_request_ir_parses_for_each_architecture(arch):
    # the IR parser checks the inline assembly's constraints against the call (count, syntax)
    import llvmlite.binding as llvm

    ir = _workloads().request_ir(arch)
    mod = llvm.parse_assembly(ir)
    mod.verify()
    if arch == "aarch64":
        # valgrind.h's arm64 preamble and marker, in its registers
        assert "ror x12, x12, #3 ; ror x12, x12, #13 ; ror x12, x12, #51 ; ror x12, x12, #61" in ir
        assert "orr x10, x10, x10" in ir and '"={x3},{x4},0,' in ir


_AARCH64_CODEGEN = """
import sys
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
mod = llvm.parse_assembly(sys.stdin.read())
mod.triple = "aarch64-unknown-linux-gnu"
mod.verify()
tm = llvm.Target.from_triple(mod.triple).create_target_machine()
print("object bytes", len(tm.emit_object(mod)))
"""


def test_client_request_code_generation_for_aarch64():
    # Code generation for an aarch64 target (no arm64 machine needed; nothing is run): instruction
    # selection must place the default and the result in x3 and the argument block in x4.  llvmlite
    # wheels register the assembler parser of the native target only, so on an x86-64 host LLVM
    # stops where it would assemble the inline text ("we don't have an asm parser"), after the
    # register allocation this checks; an arm64 host emits the object.
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-c", _AARCH64_CODEGEN],
        input=_workloads().request_ir("aarch64"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = res.stdout + res.stderr
    assert "couldn't allocate" not in out and "error:" not in out.replace("LLVM ERROR", ""), out
    assert ("object bytes" in res.stdout and res.returncode == 0) or (
        "we don't have an asm parser for this target" in out
    ), out
    # the check can fail: a register valgrind does not read is refused at the same stage
    bad = _workloads().request_ir("aarch64").replace("={x3}", "={x99}")
    res = subprocess.run(
        [sys.executable, "-c", _AARCH64_CODEGEN], input=bad, capture_output=True, text=True, timeout=120
    )
    assert "couldn't allocate output register for constraint '{x99}'" in res.stdout + res.stderr


def test_child_environment_is_reduced_and_pins_the_target(monkeypatch):
    monkeypatch.setenv("JKOFAST_SOME_LONG_VARIABLE", "x" * 100)
    monkeypatch.setenv("PWD", "/a/checkout/path")
    env = tool.child_env("/tree", "/cache")
    assert "JKOFAST_SOME_LONG_VARIABLE" not in env and "PWD" not in env
    assert env["PYTHONPATH"] == "/tree" and env["NUMBA_NUM_THREADS"] == "1" and env["PYTHONHASHSEED"] == "0"
    assert env["PYTHONPYCACHEPREFIX"].startswith("/cache")
    if tool.ARCH == "x86_64":
        assert env["NUMBA_CPU_NAME"] == "haswell" and "x86_rep_movsb_threshold" in env["GLIBC_TUNABLES"]


def test_same_paths_slots_are_fixed_and_exclusive(tmp_path):
    # two counts at once get two slots; each slot's path is the same string whatever the checkout
    with tool._SamePaths(str(tmp_path / "pyc")) as a, tool._SamePaths(str(tmp_path / "pyc")) as b:
        assert a.dir != b.dir and len(a.dir) == len(b.dir)
        assert os.path.dirname(a.dir) == os.path.join(tool.tempfile.gettempdir(), "jkofast-instr")
        t = a.copy("t", ROOT, "benchmarks")
        assert os.path.isfile(os.path.join(t, "benchmarks", "instr_workloads.py"))
        assert not os.path.islink(os.path.join(t, "benchmarks"))
    assert not os.path.exists(a.dir)


def _git(repo, *args):
    import subprocess

    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_changed_inputs_per_family_only_when_code_a_family_uses_changed(tmp_path, monkeypatch):
    # a tiny repository: the proof compares the tree's jkofast/ with a commit's, file by file
    pkg = tmp_path / "jkofast"
    for rel, text in {
        "__init__.py": "x = 1\n",
        "used.py": '"""Doc."""\n\n\ndef f(a):\n    """Add one."""\n    return a + 1  # one\n',
        "other.py": "w = 5\n",
        "cli.py": "z = 3\n",
        "kernels/__init__.py": "",
        "kernels/unused_kernel.py": "k = 4\n",
        "points.json": "{}\n",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    monkeypatch.setattr(tool, "ROOT", str(tmp_path))
    imported = {"a": ["__init__.py", "used.py"], "b": ["__init__.py", "other.py"]}

    def changed():
        return tool.for_families(tool.changed_files("HEAD", str(tmp_path)), imported)

    assert changed() == {"a": [], "b": []}
    # neither imported nor read, a kernel included: no count can move
    (pkg / "cli.py").write_text("z = 30\n")
    (pkg / "kernels/unused_kernel.py").write_text("k = 40\n")
    (pkg / "new_module.py").write_text("q = 1\n")
    assert changed() == {"a": [], "b": []}
    # docstrings, comments and layout are not code
    (pkg / "used.py").write_text('"""Another doc."""\n\ndef f(a):\n    """Add 1 to a."""\n    return a + 1\n')
    assert changed() == {"a": [], "b": []}
    # code a family imports: that family only
    (pkg / "used.py").write_text('def f(a):\n    """Add one."""\n    return a + 2\n')
    assert changed() == {"a": ["used.py"], "b": []}
    (pkg / "other.py").write_text("w = 6\n")
    assert changed() == {"a": ["used.py"], "b": ["other.py"]}
    # a data file, or a module removed since the base: every family
    for rel in ("used.py", "other.py"):
        _git(tmp_path, "checkout", "-q", "--", f"jkofast/{rel}")
    (pkg / "points.json").write_text("[]\n")
    assert changed() == {"a": ["points.json"], "b": ["points.json"]}
    _git(tmp_path, "checkout", "-q", "--", "jkofast/points.json")
    (pkg / "cli.py").unlink()
    got = changed()
    assert got["a"] == got["b"] == ["removed: cli.py"]


def test_code_digest_ignores_docstrings_comments_and_layout_only():
    base = b'"""M."""\nclass A:\n    """C."""\n    def f(self):\n        """F."""\n        return "x"\n'
    same = b"class A:\n\n    def f(self):  # note\n        return 'x'\n"
    assert tool._code_digest(base) == tool._code_digest(same)
    # a changed statement or literal is code
    assert tool._code_digest(base) != tool._code_digest(
        b"class A:\n    def f(self):\n        x = 1\n        return 'x'\n"
    )
    assert tool._code_digest(base) != tool._code_digest(base.replace(b'"x"', b'"y"'))
    # an empty body after the docstring keeps its meaning (None), source that does not parse is compared as bytes
    assert tool._code_digest(b'def g():\n    """Only a docstring."""\n') == tool._code_digest(b"def g():\n    pass\n")
    assert tool._code_digest(b"def (") != tool._code_digest(b"def  (")


def test_sgr_build_workload_runs_the_index_build_natively(monkeypatch):
    # outside valgrind the client requests are no-ops: the workload is the calibration of its 500 documents
    monkeypatch.syspath_prepend(os.path.abspath(ROOT))
    run = _workloads().build("sgr_build")
    geometry = run()
    assert geometry.n_calibration == 500 and geometry.g_indptr[-1] > 0


def test_harness_cache_follows_its_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("JKOFAST_INSTRUCTIONS_CACHE", str(tmp_path))
    assert tool.default_cache_dir() == str(tmp_path)
    monkeypatch.delenv("JKOFAST_INSTRUCTIONS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tool.default_cache_dir() == str(tmp_path / "xdg" / "jkofast" / "instructions")
