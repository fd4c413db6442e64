"""Session-wide test setup: one warm-up, oracles importable as ``reference``."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # `import reference` for the naive oracles

DATA = os.path.join(os.path.dirname(__file__), "data")


@pytest.fixture(scope="session", autouse=True)
def _warm_kernels():
    """Compile (or load from cache) every kernel once per session, on tiny inputs."""
    import jkofast

    jkofast.warmup()
    yield


@pytest.fixture(scope="session")
def data_dir() -> str:
    return DATA
