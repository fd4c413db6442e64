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
    from dask_inputs import loopback_client

    with loopback_client(distributed, logging.ERROR) as client:
        yield client
