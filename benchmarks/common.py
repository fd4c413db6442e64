"""Shared asv base class.  Fixed seeds: values here must not be changed, only appended.

* wall-clock timer (threaded kernels: process_time would sum CPUs);
* profile from ``JKOFAST_BENCH_PROFILE`` (``fast``: one repeat, small sizes);
* warm-up is structural: ``setup`` builds inputs, then calls ``self.run()`` once, so
  Numba compilation is never timed;
* thread count pinned inside ``run`` via ``numba_threads``.
"""

from __future__ import annotations

import abc
import os
import timeit

PROFILE = os.environ.get("JKOFAST_BENCH_PROFILE", "regular")
SEED = 0
SHARED_DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


class Benchmark(abc.ABC):
    timer = timeit.default_timer
    processes = 1
    timeout = 600
    if PROFILE == "fast":
        warmup_time = 0
        repeat = 1
        number = 1
        min_run_count = 1

    @abc.abstractmethod
    def make_inputs(self, *params):
        """Build seeded inputs (called in setup)."""

    @abc.abstractmethod
    def run(self, *params):
        """The timed work."""

    def setup(self, *params):
        self.make_inputs(*params)
        self.run(*params)  # warm-up: compile / load cache outside the timer
