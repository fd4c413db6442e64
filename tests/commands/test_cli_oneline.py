"""One clean line per message: warnings, interrupts, --json errors, options given without the option they need.

The probe's cases: warnings printed in Python's raw format (library path, line number, source line) by
``tune``, ``search``, ``run``, ``evaluate``; ``rerank --clusters 0`` without ``--multires`` silently
ignored; ``index --check nope --json`` answering in plain text; Ctrl-C to ``rerank`` a full traceback;
``tune`` on qrels whose every label is 0 exiting 0 with every row 0.0000.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from beir_helpers import write_beir
from rerank_helpers import write_inputs

from jkofast.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = [("d1", "Solar", "solar panels"), ("d2", "Wind", "wind turbines"), ("d3", "", "sunlight and wind")]
QUERIES = (("q1", "solar"), ("q2", "wind"))


def _cli(args):
    env = dict(os.environ, PYTHONPATH=ROOT, JKOFAST_COMPILE_AHEAD="0")
    return subprocess.run(
        [sys.executable, "-m", "jkofast", *map(str, args)], capture_output=True, text=True, env=env, timeout=600
    )


def test_warning_is_one_line_naming_the_command(tmp_path):
    # a judgement on a document absent from the corpus: one DataWarning from the library
    ds = write_beir(tmp_path / "b", DOCS, QUERIES, (("q1", "d1", 1), ("q2", "nope", 1)))
    r = _cli(["search", "--dataset", ds, "--out", tmp_path / "run.trec"])
    assert r.returncode == 0, r.stderr
    warn = [ln for ln in r.stderr.splitlines() if "warning" in ln.lower()]
    assert warn and all(ln.startswith("jkofast search: warning: ") for ln in warn), r.stderr
    assert "warnings.warn" not in r.stderr and ".py:" not in r.stderr and "DataWarning" not in r.stderr


def test_library_keeps_its_warning_class(tmp_path):
    from jkofast.datasets.beir import DataWarning, load_dataset

    ds = write_beir(tmp_path / "b", DOCS, QUERIES, (("q1", "d1", 1), ("q2", "nope", 1)))
    with pytest.warns(DataWarning, match="absent from the corpus|not in the corpus|unknown"):
        load_dataset(ds).qrels("test")


def test_interrupt_is_one_line_and_exit_130(monkeypatch, capsys, tmp_path):
    import jkofast.jko.stream as S

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(S, "rerank_stream", interrupted)
    run = write_inputs(tmp_path)
    argv = ["rerank", "--pools", run, "--embeddings", tmp_path / "E.npy", "--ids", tmp_path / "ids.txt"]
    assert main([*map(str, argv), "--out", str(tmp_path / "o.trec")]) == 130
    err = capsys.readouterr().err
    assert err == "jkofast rerank: interrupted: the finished chunks are kept; rerun the same command to resume\n"
    assert not os.path.exists(str(tmp_path / "o.trec") + ".lock")  # the lock goes with the process's work


def test_json_command_reports_errors_as_json(capsys):
    assert main(["index", "--check", "nope", "--json"]) == 2
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    assert rep["exit"] == 2 and rep["command"] == "index" and "not an index folder" in rep["error"]
    assert cap.err.count("\n") == 1


def test_os_error_has_no_raw_errno(monkeypatch, capsys, tmp_path):
    import jkofast.commands.index as I

    def fails(args):
        raise FileNotFoundError(2, "No such file or directory", str(tmp_path / "x.tmp"))

    monkeypatch.setattr(I, "run", fails)
    assert main(["index", "--out", str(tmp_path / "i")]) == 2
    err = capsys.readouterr().err
    assert err == f"jkofast index: error: No such file or directory: {tmp_path / 'x.tmp'}\n"


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--clusters", "0"], "--clusters applies under --multires only"),
        (["--refine", "3"], "--refine applies under --multires only"),
        (["--multires", "mr", "--beta", "1"], "--beta applies under --multires sam only"),
        (["--alpha", "0.5"], "--alpha applies under --scores only"),
        (["--gamma", "0.5"], "--gamma applies under --scores only"),
        (["--scores-in-memory"], "--scores-in-memory applies under --scores only"),
    ],
)
def test_option_without_the_option_it_needs_is_refused(tmp_path, capsys, extra, match):
    run = write_inputs(tmp_path)
    argv = ["rerank", "--pools", run, "--embeddings", tmp_path / "E.npy", "--ids", tmp_path / "ids.txt"]
    assert main([*map(str, argv), "--out", str(tmp_path / "o.trec"), *extra]) == 2
    assert match in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o.trec")


def test_tune_refuses_qrels_without_a_relevant_document(tmp_path, capsys):
    ds = write_beir(tmp_path / "b", DOCS, QUERIES, (("q1", "d1", 0), ("q2", "d2", 0)))
    assert main(["tune", "--dataset", ds]) == 2
    err = capsys.readouterr().err
    assert "no relevant document" in err and "--allow-empty" in err and "test.tsv" in err
    # --allow-empty passes the check (this folder then stops at its missing embeddings)
    assert main(["tune", "--dataset", ds, "--allow-empty"]) == 2
    assert "no relevant document" not in capsys.readouterr().err
