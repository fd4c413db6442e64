"""asv suites for Dual-Rank (SPEC A.6.4): the batched confidence read-out and the selective-coverage evaluation."""

from __future__ import annotations

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark
from jkofast import numba_threads


def _module(path: str):
    """Import a Dual-Rank module; commits before it existed skip the benchmark (NotImplementedError)."""
    import importlib

    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        raise NotImplementedError(f"{path} does not exist in this commit") from exc


def synthetic_pools(n_pools: int, m: int = 200, seed: int = SEED):
    """Seeded flat p (normalised per pool), f, rerank logits and offsets of ``n_pools`` pools of ``m``."""
    rng = np.random.default_rng(seed)
    off = np.arange(0, m * (n_pools + 1), m, dtype=np.int64)
    p = rng.gamma(0.5, size=n_pools * m)
    p /= np.repeat(np.add.reduceat(p, off[:-1]), m)
    f = 0.2 * np.log(p) + 0.05 * rng.normal(size=p.size)
    logits = 3.0 * rng.normal(size=p.size)
    return p, f, logits, off


class ConfidenceReadout(Benchmark):
    """conf_dual / softmax-max / margin of 300 pools of M = 200 (fast profile: 24), 1 and 2 threads."""

    N_POOLS = 24 if PROFILE == "fast" else 300
    params = ([1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        self.conf = _module("jkofast.jko.confidence")
        self.p, self.f, self.logits, self.off = synthetic_pools(self.N_POOLS)

    def run(self, threads):
        with numba_threads(threads):
            self.conf.confidence_signals(self.p, self.f, self.logits, self.off)

    def time_confidence_signals(self, threads):
        self.run(threads)

    def track_conf_dual_max_abs_error(self, threads):
        """Largest |conf_dual - (f[argmax p] - median f)| over the pools (NumPy oracle)."""
        s = self.conf.confidence_signals(self.p, self.f, self.logits, self.off)
        m = int(self.off[1])
        P, F = self.p.reshape(-1, m), self.f.reshape(-1, m)
        want = F[np.arange(P.shape[0]), P.argmax(axis=1)] - np.median(F, axis=1)
        return float(np.max(np.abs(s.conf_dual - want)))


class SelectiveCoverage(Benchmark):
    """Coverage curves of three signals over the published grid plus the rank ECE, n queries."""

    params = ([300, 1000],)
    param_names = ["n_queries"]

    def make_inputs(self, n_queries):
        self.sel = _module("jkofast.eval.selective")
        rng = np.random.default_rng(SEED)
        self.conf = [np.round(rng.normal(size=n_queries), 2) for _ in range(3)]  # with ties
        self.metrics = {
            "ndcg10": rng.random(n_queries),
            "recall10": rng.random(n_queries),
            "top1_acc": rng.integers(0, 2, n_queries).astype(float),
        }
        self.top1_f = rng.normal(size=n_queries)

    def run(self, n_queries):
        for c in self.conf:
            self.sel.selective_coverage(c, self.metrics)
        self.sel.ece_rank(self.top1_f, self.metrics["top1_acc"])

    def time_coverage_and_ece(self, n_queries):
        self.run(n_queries)
