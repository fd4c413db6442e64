"""The ``jkofast`` program (``jkofast.cli.program``): ``main``'s status, the collector set aside only at the end."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from jkofast import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _frozen_calls(monkeypatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(1))  # recorded, not done: this process goes on
    return calls


@pytest.mark.parametrize(("argv", "status"), [(["--version"], 0), (["no-such-command"], 2)])
def test_program_exits_with_mains_status_after_setting_the_heap_aside(monkeypatch, capsys, argv, status):
    calls = _frozen_calls(monkeypatch)
    with pytest.raises(SystemExit) as exc:
        cli.program(argv)
    assert exc.value.code == status
    assert calls == [1]
    capsys.readouterr()


def test_main_leaves_the_collector_alone(monkeypatch, capsys):
    calls = _frozen_calls(monkeypatch)
    assert cli.main([]) == 2  # no command: the help, and main's status
    assert calls == [] and gc.isenabled()
    assert "usage: jkofast" in capsys.readouterr().out


def test_the_command_line_writes_everything_before_it_ends(tmp_path):
    # every line of a long answer reaches the pipe, the heap set aside at the very end
    env = dict(os.environ, PYTHONPATH=ROOT, JKOFAST_COMPILE_AHEAD="0")
    run = tmp_path / "run.trec"
    run.write_text("".join(f"q{i} Q0 d{j} {j + 1} {1.0 / (j + 1):.4f} x\n" for i in range(300) for j in range(20)))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i % 20}\t1\n" for i in range(300)))
    argv = ["evaluate", "--run", str(run), "--qrels", str(qrels), "--per-query", "--json"]
    r = subprocess.run(
        [sys.executable, "-m", "jkofast", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["per_query"]  # one JSON document: a cut answer would not parse
    assert sorted(got["query_ids"]) == sorted(f"q{i}" for i in range(300))
    assert len(got["ndcg@10"]) == 300
