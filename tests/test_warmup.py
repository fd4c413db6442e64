"""``jkofast.warmup``: entry selection, and the default set covers what the main job calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from beir_helpers import write_beir

import jkofast.warmups as w
from jkofast._numba import WARMUPS

# the per-feature variants moved out of the default set (they compile on first use)
MOVED = ("topk.variants", "index.variants", "baselines.float64", "evaluation.all")


@pytest.fixture
def recorded(monkeypatch):
    """Replace every registered warm-up by a stub that records its name."""
    w._import_wrappers()
    calls = []
    for name in list(WARMUPS):
        monkeypatch.setitem(WARMUPS, name, lambda name=name: calls.append(name))
    return calls


def test_all_runs_every_entry_once(recorded):
    ran = w.warmup(features="all")
    assert sorted(recorded) == sorted(WARMUPS) == sorted(ran)


def test_default_runs_the_default_set_and_leaves_the_rest(recorded):
    ran = w.warmup()
    assert recorded == list(w.DEFAULT) == list(ran)
    lazy = w.lazy_entries()
    assert set(lazy) | set(w.DEFAULT) == set(WARMUPS) and not set(lazy) & set(w.DEFAULT)
    assert set(MOVED) <= set(lazy)


def test_named_entries_and_unknown_names(recorded):
    assert list(w.warmup(features=["index.variants", "topk"])) == ["index.variants", "topk"]
    assert recorded == ["index.variants", "topk"]
    with pytest.raises(ValueError, match="features"):
        w.warmup(features=["index", "no-such-entry"])


def test_homes_name_the_module_registering_each_entry():
    w._import_wrappers()
    assert {name: fn.__module__ for name, fn in WARMUPS.items()} == w._HOMES


def test_named_entries_import_only_their_modules():
    # a fresh interpreter: the warm-up of two entries imports their wrapper modules, not the package's others
    code = (
        "import sys, jkofast.warmups as w\n"
        "w._import_for(['jko.flow', 'evaluation'])\n"
        "print(sorted(m for m in ('jkofast.jko.solver', 'jkofast.eval.metrics', 'jkofast.sgr.retriever',"
        " 'jkofast.studies.main_job') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[0] == "['jkofast.eval.metrics', 'jkofast.jko.solver']"


def test_moved_entries_run():
    # the variants no longer in the default set still compile and run when asked for
    assert set(w.warmup(features=list(MOVED))) == set(MOVED)


def test_units_keep_every_entry_once_costliest_first():
    names = ["jko", "evaluation", "baselines", "pools", "index", "topk", "text", "energy"]
    units = w._units(names)
    assert sorted(n for unit in units for n in unit) == sorted(names)
    cost = [sum(w._COST.get(n, w._COST_OTHER) for n in unit) for unit in units]
    assert cost == sorted(cost, reverse=True)
    assert w._units(["topk"]) == [["topk"]]
    assert sorted(w._units(["a", "b", "c"])) == [["a"], ["b"], ["c"]]


def test_an_entry_built_on_another_runs_after_it_in_its_process():
    # "sgr.build" compiles on top of "sgr"'s kernels: one unit (one process), always after it
    for names in (["sgr.build", "multires", "sgr", "theory", "jko"], ["sgr", "sgr.build"]):
        units = w._units(names)
        assert sorted(n for unit in units for n in unit) == sorted(names)
        (home,) = [unit for unit in units if "sgr" in unit]
        assert home.index("sgr.build") == home.index("sgr") + 1
    assert sorted(w._units(["sgr.build", "topk"])) == [["sgr.build"], ["topk"]]  # alone: an entry like any
    # the flows and the SGR search a compile-ahead child takes: in `warmup --all`, after the entries that
    # compile them anyway (two processes would compile them twice at once)
    w._import_wrappers()  # every entry registered
    units = w._units(sorted(WARMUPS))
    parts = (("jko.flow", "jko"), ("jko.rows", "jko"), ("jko.flow.duals", "jko.paths"), ("sgr.search", "sgr"))
    for part, whole in (*parts, ("multires.cluster", "multires")):
        (home,) = [unit for unit in units if part in unit]
        assert home.index(part) > home.index(whole) == 0


def test_claimed_units_run_once_across_processes(monkeypatch, tmp_path):
    # every process walks the same units, costliest first; a unit runs in the process that claims it first
    ran = []
    fake = {n: (lambda n=n: ran.append(n)) for n in ("sgr", "sgr.build", "multires", "topk", "text")}
    monkeypatch.setattr(w, "WARMUPS", fake)
    names = ["topk", "sgr.build", "text", "multires", "sgr"]
    assert w._units(names)[0] == ["sgr", "sgr.build"] and ["topk"] in w._units(names)
    (tmp_path / "multires").touch()  # another process holds this one
    first = w._run_claimed(names, str(tmp_path), verbose=False)
    assert ran == ["sgr", "sgr.build", "text", "topk"] and list(first) == ran
    assert w._run_claimed(names, str(tmp_path), verbose=False) == {}  # all claimed: a later process runs none
    assert ran == ["sgr", "sgr.build", "text", "topk"]


def test_parallel_warmup_runs_each_entry_once_across_processes():
    ran = w.warmup(features=["topk", "text"], processes=2)
    assert list(ran) == ["topk", "text"]
    with pytest.raises(ValueError, match="processes"):
        w.warmup(features=["topk"], processes=0)


def test_parallel_warmup_compiles_a_failed_childs_entries_here(recorded, monkeypatch):
    import subprocess

    class Failed:
        returncode = 3

        def __init__(self, cmd, **kw):
            self.cmd = cmd

        def communicate(self):
            return b"", b"Traceback ...\nRuntimeError: boom\n"

    monkeypatch.setattr(subprocess, "Popen", Failed)
    ran = w.warmup(features=["index.variants", "topk"], processes=2)
    assert sorted(recorded) == ["index.variants", "topk"] and list(ran) == ["index.variants", "topk"]


def test_warmup_cli_jobs(capsys):
    from jkofast.cli import main

    assert main(["warmup", "--only", "topk,text", "--jobs", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"compiled", "processes", "wall_s"} <= out.keys()  # the report's fields
    assert set(out["compiled"]) == {"topk", "text"} and out["processes"] == 2
    assert main(["warmup", "--only", "topk", "--jobs", "-1"]) == 2
    assert "--jobs" in capsys.readouterr().out


DOCS = [
    ("d1", "Solar", "solar panels convert sunlight"),
    ("d2", "Wind", "wind turbines make power"),
    ("d3", "", "sunlight and wind"),
    ("d4", "Cat", "the cat sat on mat"),
    ("d5", "Dog", "dog and cat"),
    ("d6", "River", "rain fills the river"),
]
QUERIES = (("q1", "solar panels sunlight"), ("q2", "cat mat"), ("q3", "river rain"))
QRELS = (("q1", "d1", 1), ("q2", "d4", 1), ("q3", "d6", 2))


def _tiny_beir_with_embeddings(root) -> str:
    """A 6-document BEIR folder with random float16 'MiniLM' embeddings (the bundled layout)."""
    write_beir(root, DOCS, QUERIES, QRELS)
    emb = os.path.join(root, "embeddings", "minilm-l6-v2")
    os.makedirs(emb)
    rng = np.random.default_rng(0)
    for name, n in (("docs", len(DOCS)), ("queries", len(QUERIES))):
        x = rng.normal(size=(n, 8))
        np.save(os.path.join(emb, f"{name}.npy"), (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16))
    return str(root)


# after warmup(), the main job's default rows add no compiled signature to any kernel (SGR's
# kernels aside, also those jko_sparse's geometry calls: the lazily compiled "sgr" entry): a
# warm-up on other argument types than the job's real calls (dtype, layout, literal arguments)
# would leave the job to compile its own
COVER = """
import json, sys
import jkofast
from jkofast._numba import REGISTRY
from jkofast.studies.main_job import DEFAULT_METHODS, run_main_job

jkofast.warmup()
jkofast.warmup(features=["sgr"])  # the SGR kernels jko_sparse's geometry calls, and their callees (top-k)
before = {k: set(map(str, d.signatures)) for k, d in REGISTRY.items()}
methods = tuple(m for m in DEFAULT_METHODS if m != "sgr")
res = run_main_job(sys.argv[1], progress=False, methods=methods, include_sgr=False)
assert set(methods) <= set(res.methods), sorted(res.methods)
new = {k: sorted(set(map(str, d.signatures)) - before.get(k, set())) for k, d in REGISTRY.items()}
print(json.dumps({k: v for k, v in new.items() if v and not k.startswith("jkofast.kernels.sgr.")}))
"""


def test_default_set_covers_the_main_job(tmp_path):
    ds = _tiny_beir_with_embeddings(tmp_path / "beir")
    out = subprocess.run([sys.executable, "-c", COVER, ds], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    new = json.loads(out.stdout.strip().splitlines()[-1])
    assert new == {}, f"compiled by the main job after warmup(): {new}"


def _warmup_cli(args: list, cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "JKOFAST_CACHE_DIR")}
    env["JKOFAST_CACHE_DIR"] = cache
    code = "import sys\nfrom jkofast.cli import main\nsys.exit(main(sys.argv[1:]))"
    out = subprocess.run(
        [sys.executable, "-c", code, "warmup", *args, "--json"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_warmup_report_lists_compiled_signatures_then_cached_ones_and_clear_empties(tmp_path):
    cache = str(tmp_path / "cache")
    cold = _warmup_cli(["--only", "energy", "--report"], cache)
    kernels = {k["kernel"]: k for k in cold["kernels"]}
    mm = kernels["jkofast.kernels.pools.baselines.minmax_segments"]
    assert len(mm["signatures"]) == 2  # the entry's float32 and float64 calls, nothing else
    assert not any(r["cached"] for k in kernels.values() for r in k["signatures"])  # an empty cache: all compiled
    warm = _warmup_cli(["--only", "energy", "--report"], cache)
    assert {k["kernel"] for k in warm["kernels"]} == set(kernels)
    assert all(r["cached"] for k in warm["kernels"] for r in k["signatures"])  # loaded, not compiled
    (tmp_path / "cache" / "mine").mkdir()
    (tmp_path / "cache" / "mine" / "notes.txt").write_text("not a kernel")
    cleared = _warmup_cli(["--clear"], cache)
    assert cleared["files"] > 0
    assert not list((tmp_path / "cache").rglob("*.nbi"))
    assert (tmp_path / "cache" / "mine" / "notes.txt").exists()  # only Numba's files are removed
