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
    assert rows["c"]["verdict"] == "ok"  # a speed-up never fails
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
    assert tool.parse_dumps(prefix) == {"metrics": 123, "bm25_topk": 456}
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
