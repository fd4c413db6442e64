"""Faults: a worker process killed mid-chunk costs a retry of that chunk, and the output keeps its bytes;
a client run interrupted on one scheduler resumes on another from the finished parts."""

import logging
import os
import signal
import threading
import time

import pytest
from dask_inputs import loopback_client, write_pools
from rerank_helpers import interrupted_after

from jkofast.jko.stream import RerankOptions, rerank_stream

distributed = pytest.importorskip("distributed")


def _busy_worker(client, timeout=60.0):
    """A worker with a rerank task assigned (executing: one task thread each), once one exists."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        for addr, keys in client.processing().items():
            if any("jkofast-rerank" in str(k) for k in keys):
                return addr
        time.sleep(0.01)
    raise AssertionError("no worker got a rerank task")


def test_killed_worker_and_scheduler_restart(tmp_path, dask_client):
    from jkofast.distributed.rerank import rerank_on_dask

    run = write_pools(tmp_path, nq=60, m=50, n_docs=400, d=16)
    kw = dict(pools=run, embeddings=str(tmp_path / "E.npy"), ids=str(tmp_path / "ids.txt"), config="tuned")
    kw.update(chunk_size=5, threads=1)
    ref = rerank_stream(RerankOptions(out=str(tmp_path / "ref.trec"), **kw), report=lambda m: None)
    expected = (tmp_path / "ref.trec").read_bytes()
    box: dict = {}

    def job(out, **more):
        try:
            box["summ"] = rerank_on_dask(RerankOptions(out=str(tmp_path / out), **kw, **more), client, report=print)
        except BaseException as exc:
            box["exc"] = exc

    with loopback_client(distributed, logging.CRITICAL) as client:
        # 1. kill a worker process (SIGKILL, by its pid) while it holds a chunk
        th = threading.Thread(target=job, args=("killed.trec",))
        th.start()
        parts = tmp_path / "killed.trec.parts"
        t_end = time.monotonic() + 60
        while not any(p.name.endswith(".trec") for p in parts.glob("chunk_*")) and time.monotonic() < t_end:
            time.sleep(0.01)
        victim = _busy_worker(client)
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        th.join(300)
        assert not th.is_alive() and "exc" not in box, box.get("exc")
        summ = box.pop("summ")
        assert (tmp_path / "killed.trec").read_bytes() == expected
        # no chunk lost, none counted twice (a retried chunk is counted by the worker that finished it)
        assert summ.reranked_now == ref.reranked_now == summ.queries
        assert sum(w["queries"] for w in summ.workers.values()) == summ.queries
        assert sum(w["chunks"] for w in summ.workers.values()) == summ.chunks == ref.chunks == 13
        assert victim not in client.scheduler_info()["workers"]
        # 2. a client run interrupted after 4 chunks, then this scheduler goes away
        with interrupted_after(4):
            job("resumed.trec")
        assert "injected" in str(box.pop("exc"))
    assert len(list((tmp_path / "resumed.trec.parts").glob("chunk_*.trec"))) == 4
    # ... and the next invocation, on another scheduler, resumes from the finished parts
    summ = rerank_on_dask(RerankOptions(out=str(tmp_path / "resumed.trec"), **kw), dask_client, report=print)
    assert summ.skipped_finished == 20 and summ.reranked_now == summ.queries - 20 == 41
    assert (tmp_path / "resumed.trec").read_bytes() == expected
