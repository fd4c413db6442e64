"""Session-wide test setup: one warm-up, oracles importable as ``reference``."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis: a bounded example count in CI ("ci", the default), a long run locally with HYPOTHESIS_PROFILE=dev.
settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile("dev", max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# No test waits on a compile-ahead child (`jkofast run` starts one on a cold cache): the session warm-up
# below and CI's `jkofast warmup --all` step fill the cache; tests/test_ahead.py turns it back on for its tests.
os.environ.setdefault("JKOFAST_COMPILE_AHEAD", "0")

sys.path.insert(0, os.path.dirname(__file__))  # `import reference` for the naive oracles
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fuzz"))  # the fuzz strategies (`import mutate`)

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
