"""asv suites: the proximal term's cost over the paper's step settings, and 8 vs all tracked Sinkhorn pairs.

* :class:`ProximalGrid` — the paper's solver micro-benchmark grid: mode {W, KL, no proximal} x
  (T, inner steps, Sinkhorn pairs) in {(3, 40, 60), (2, 25, 40), (2, 20, 30)}, base λ, ρ, ε, h, the
  last 8 pairs tracked (the published gradient, ``grad="unrolled"``); inputs as published: unit rows
  ``Z ~ N(0, 1)``, ``E ~ N(0, 1)``, ``p0 = softmax(-E / 0.1)`` from ``default_rng(0)``; M = 200 x d 384
  (``fast`` profile: M = 64 x d 32). KL and no-proximal steps run no Sinkhorn at all.
* :class:`TrackedPairs` — the base point's W solve with the last 8 of 60 pairs differentiated vs all
  60 (the paper's "about 20x faster" claim; ``benchmarks/tools/tracked_iterations.py`` measures it
  beside the published solver).
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark
from jkofast import numba_threads

# (T, inner_steps, sinkhorn_iter) of the paper's solver micro-benchmark
STEP_SETTINGS = {"T3_in40_sk60": (3, 40, 60), "T2_in25_sk40": (2, 25, 40), "T2_in20_sk30": (2, 20, 30)}
MODES = {"W": "wasserstein", "KL": "kl", "noprox": "noproximal"}


def micro_inputs(m: int, d: int, seed: int = SEED):
    """The paper's micro-benchmark inputs: ``p0, E, C, K`` of ``m`` unit rows of ``N(0, 1)^d``."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    E = rng.normal(size=m)
    x = -E / 0.1
    p0 = np.exp(x - x.max())
    S = np.clip(Z @ Z.T, -1.0, 1.0)
    return p0 / p0.sum(), E, (1.0 - S) ** 2, np.maximum(S, 0.0)


SHAPE = (64, 32) if PROFILE == "fast" else (200, 384)


class ProximalGrid(Benchmark):
    """One query, 1 thread: proximal mode x the paper's three (T, inner, Sinkhorn) settings."""

    params = (list(MODES), list(STEP_SETTINGS))
    param_names = ["mode", "steps"]

    def make_inputs(self, mode, steps):
        from jkofast.jko import operating_point

        T, inner, sk = STEP_SETTINGS[steps]
        self.cfg = operating_point(
            "base", mode=MODES[mode], T=T, inner_steps=inner, sinkhorn_iter=sk, sinkhorn_iter_grad=8, grad="unrolled"
        )
        self.p0, self.E, self.C, self.K = micro_inputs(*SHAPE)

    def run(self, mode, steps):
        from jkofast.jko import run_jko

        with numba_threads(1):
            run_jko(self.p0, self.E, self.C, self.K, self.cfg)

    def time_run_jko(self, mode, steps):
        self.run(mode, steps)


class TrackedPairs(Benchmark):
    """The base point's W solve, 1 thread: the last 8 of 60 Sinkhorn pairs differentiated, or all 60."""

    params = ([8, 60],)
    param_names = ["tracked"]

    def make_inputs(self, tracked):
        from jkofast.jko import operating_point

        self.cfg = operating_point("base", sinkhorn_iter_grad=tracked, grad="unrolled")
        self.p0, self.E, self.C, self.K = micro_inputs(*SHAPE)

    def run(self, tracked):
        from jkofast.jko import run_jko

        with numba_threads(1):
            run_jko(self.p0, self.E, self.C, self.K, self.cfg)

    def time_run_jko(self, tracked):
        self.run(tracked)
