"""A LocalCluster over loopback for the distributed tests (two worker processes, one thread each)."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(scope="module")
def dask_client():
    """A client of a 2-worker LocalCluster on 127.0.0.1 (spawned processes; the workers inherit NUMBA_CACHE_DIR).

    Module scope: not kept through the rest of the suite (package scope lasts the session for a folder
    without ``__init__.py``).
    """
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        from jkofast.distributed.cluster import _warm_worker

        client.run(_warm_worker)
        yield client
