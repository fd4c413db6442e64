"""One writer per output: the lock file (jkofast._lock) and every writing command, with real processes.

The probe's cases: two ``index --method sgr --out SAME`` at once ended in a ``Bus error`` (exit 135) or a raw
``[Errno 2]`` / ``[Errno 17]`` on the other build's temp files; two ``rerank`` to one ``--out`` and two
``embed`` of one folder ended in a raw ``[Errno 2]``.  Now the second writer exits 2 at once, one line
naming the holder (pid, host, command), and a lock left by a process that died is taken over.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest
from beir_helpers import TINY_DOCS, TINY_QUERIES, write_beir
from rerank_helpers import write_inputs

from jkofast._lock import OutputLocked, lock_path, output_lock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS, QUERIES = TINY_DOCS, TINY_QUERIES


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["JKOFAST_COMPILE_AHEAD"] = "0"
    return env


def _cli(args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "jkofast", *map(str, args)], capture_output=True, text=True, env=_env(), **kw
    )


@pytest.fixture
def holder():
    """Start a real process that holds the lock of an output (as a writer mid-way does) until killed."""
    procs = []

    def start(out, command="jkofast index"):
        code = (
            "import sys; from jkofast._lock import output_lock\n"
            f"with output_lock({str(out)!r}, {command!r}):\n    print('held', flush=True); sys.stdin.read()\n"
        )
        p = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env()
        )
        assert p.stdout.readline().strip() == "held"
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def _refused(r, holder_pid):
    """The second writer: exit 2, one line naming the holder, no raw Errno, no traceback."""
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and "Errno" not in r.stderr
    assert "is being written by another process" in r.stderr
    assert f"pid {holder_pid} on {socket.gethostname()}" in r.stderr


def test_lock_is_exclusive_reentrant_and_removed(tmp_path, holder):
    out = tmp_path / "idx"
    with output_lock(out, "jkofast x") as path:
        assert path == lock_path(out) == str(out) + ".lock"
        rec = json.load(open(path))
        assert rec["pid"] == os.getpid() and rec["command"] == "jkofast x"
        with output_lock(out, "jkofast x"):  # the same process again: held once
            pass
        assert os.path.isfile(path)
    assert not os.path.exists(path)
    p = holder(out, "jkofast rerank")
    with pytest.raises(OutputLocked, match=f"pid {p.pid} on .*jkofast rerank"):
        with output_lock(out, "jkofast y"):
            pass


def test_lock_of_a_dead_process_is_taken_over(tmp_path, holder):
    out = tmp_path / "run.trec"
    p = holder(out)
    os.kill(p.pid, signal.SIGKILL)  # dies holding it: the file stays, the OS lock goes
    p.wait()
    assert os.path.isfile(lock_path(out))
    with output_lock(out, "jkofast rerank"):
        assert json.load(open(lock_path(out)))["pid"] == os.getpid()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lock_inputs")
    ds = write_beir(root / "beir", DOCS, QUERIES, (("q1", "d1", 1), ("q2", "d4", 1)))
    pools = write_inputs(root)
    return {"ds": ds, "pools": pools, "E": root / "E.npy", "ids": root / "ids.txt"}


# command -> (arguments, the output it locks); OUT is the test's output path
CASES = {
    "index-bm25": (lambda i, o: ["index", "--method", "bm25", "--dataset", i["ds"], "--out", o], "OUT"),
    "index-sgr": (lambda i, o: ["index", "--method", "sgr", "--dataset", i["ds"], "--out", o, "--quiet"], "OUT"),
    "rerank": (
        lambda i, o: ["rerank", "--pools", i["pools"], "--embeddings", i["E"], "--ids", i["ids"], "--out", o],
        "OUT",
    ),
    "search": (lambda i, o: ["search", "--dataset", i["ds"], "--out", o], "OUT"),
    "run --runs": (lambda i, o: ["run", "--dataset", i["ds"], "--runs", o, "--quick"], "OUT"),
    "run --per-query": (lambda i, o: ["run", "--dataset", i["ds"], "--per-query", o, "--quick"], "OUT"),
    "study": (lambda i, o: ["study", "distractors", "--quick", "--out", o], "OUT"),
    "tune": (lambda i, o: ["tune", "--dataset", i["ds"], "--out", o], "OUT"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_second_writer_exits_2_naming_the_holder(case, inputs, tmp_path, holder):
    make, _ = CASES[case]
    out = tmp_path / "out"
    p = holder(out, f"jkofast {case.split()[0].split('-')[0]}")
    r = _cli(make(inputs, out), timeout=300)
    _refused(r, p.pid)
    assert not out.exists()  # nothing written beside the holder's work


def test_embed_second_writer(inputs, tmp_path, holder):
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    from encode.encode_helpers import write_tiny_bert

    model = write_tiny_bert(tmp_path / "tiny-bert")
    ds = shutil.copytree(inputs["ds"], tmp_path / "beir")
    out = os.path.join(ds, "embeddings", "tiny-bert")
    os.makedirs(os.path.dirname(out))
    p = holder(out, "jkofast embed")
    _refused(_cli(["embed", "--dataset", ds, "--model", model, "--quiet"], timeout=300), p.pid)
    assert not os.path.exists(out)
    p.kill()
    p.wait()
    r = _cli(["embed", "--dataset", ds, "--model", model, "--quiet"], timeout=600)  # the dead holder's lock
    assert r.returncode == 0, r.stderr
    assert os.path.isfile(os.path.join(out, "docs.npy")) and not os.path.exists(lock_path(out))


@pytest.mark.parametrize("case", ["index-sgr", "rerank"])
def test_two_real_writers_at_once(case, inputs, tmp_path):
    """Both started together: each exits 0 or 2 (lock message), never a crash or a raw Errno; the output checks."""
    make, _ = CASES[case]
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "jkofast", *map(str, make(inputs, out))]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())]
    procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()))
    results = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    assert sorted(rc for rc, _, _ in results)[0] == 0
    for rc, _, err in results:
        assert rc in (0, 2) and "Errno" not in err and "Traceback" not in err, err
        if rc == 2:
            assert "is being written by another process" in err
    assert not os.path.exists(lock_path(out))
    if case == "index-sgr":
        assert _cli(["index", "--check", out]).returncode == 0
    else:
        lines = out.read_text().splitlines()
        assert lines and all(len(ln.split()) == 6 for ln in lines)
