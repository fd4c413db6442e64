"""``--dask`` bad input: exit 2 with ``jkofast rerank: error: ...`` before any work (no cluster needed)."""

import socket
import sys

import pytest
from dask_inputs import rerank_args, write_pools

from jkofast.cli import main
from jkofast.distributed.cluster import DaskUnavailableError, parse_scheduler


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("local:1", ("local", 1)),
        ("local:16", ("local", 16)),
        ("tcp://127.0.0.1:8786", ("address", "tcp://127.0.0.1:8786")),
        ("10.0.0.5:8786", ("address", "tcp://10.0.0.5:8786")),
        ("tls://sched.example:8786", ("address", "tls://sched.example:8786")),
    ],
)
def test_parse_scheduler(spec, want):
    assert parse_scheduler(spec) == want


@pytest.mark.parametrize(
    "spec", ["local:0", "local:-1", "local:", "local", "local:two", "sched", "tcp://host", "://h:1"]
)
def test_bad_scheduler_exits_2_before_work(tmp_path, capsys, spec):
    run = write_pools(tmp_path)
    out = str(tmp_path / "x.trec")
    assert main([*rerank_args(run, out), "--dask", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jkofast rerank: error: --dask") and repr(spec) in err
    assert not (tmp_path / "x.trec.parts").exists()


def test_search_bad_scheduler_exits_2(tmp_path, capsys):
    out = str(tmp_path / "s.trec")
    assert main(["search", "--index", str(tmp_path), "--out", out, "--dask", "local:0"]) == 2
    assert "jkofast search: error: --dask local:N" in capsys.readouterr().err


def test_missing_dask_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    run = write_pools(tmp_path)
    assert main([*rerank_args(run, str(tmp_path / "x.trec")), "--dask", "local:2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jkofast rerank: error:") and 'pip install "jkofast[distributed]"' in err
    with pytest.raises(DaskUnavailableError):  # an ImportError and a ValueError
        from jkofast.distributed.cluster import require_dask

        require_dask()


def test_unreachable_scheduler_fails_within_the_timeout(tmp_path, capsys):
    pytest.importorskip("distributed")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = write_pools(tmp_path)
    args = [*rerank_args(run, str(tmp_path / "x.trec")), "--dask", f"tcp://127.0.0.1:{port}", "--dask-timeout", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "jkofast rerank: error: cannot reach the Dask scheduler at tcp://127.0.0.1:" in err
    assert not (tmp_path / "x.trec.parts").exists()  # nothing started


def test_bad_settings_fail_before_the_cluster_starts(tmp_path, capsys, monkeypatch):
    distributed = pytest.importorskip("distributed", reason='the distributed extra: pip install "jkofast[distributed]"')

    def no_cluster(*a, **k):  # a LocalCluster started here would be work done before the check
        raise AssertionError("a LocalCluster was started before the settings were checked")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    run = write_pools(tmp_path)
    assert main([*rerank_args(run, str(tmp_path / "x.trec")), "--dask", "local:2", "--chunk-size", "0"]) == 2
    assert "--chunk-size must be >= 1" in capsys.readouterr().err
