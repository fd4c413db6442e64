"""asv suites for NM-JKO (SPEC A.6.2): one InfoNCE + gradient + AdamW step, one training epoch,
and batched reranking with the learned cost ``C^W`` against the raw-cosine cost.

The training kernels are serial (one step per query, each needing the previous W; see
``jkofast/kernels/jko/metric.py`` for the measured reason); the ``threads`` parameter shows
that their time does not depend on it, and matters for the rerank suite (prange over pools).
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark
from jkofast import numba_threads

R, D, M = 64, 384, 200


def nm_training_inputs(n_queries, m=M, d=D, seed=SEED):
    """Seeded unit-norm query / pool rows (float64) with 2 gold rows per pool (positions 3 and 7)."""
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((n_queries, d))
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    Z = rng.standard_normal((n_queries * m, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    off = np.arange(n_queries + 1, dtype=np.int64) * m
    gold = np.zeros(n_queries * m, bool)
    gold[off[:-1] + 3] = True
    gold[off[:-1] + 7] = True
    return Q, off, Z, gold


class InfoNCEStep(Benchmark):
    """One training step at M = 200, d = 384, r = 64: InfoNCE value + gradient in W, then AdamW."""

    params = ([1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        from jkofast.jko.metric import init_projection

        self.Q, self.off, self.Z, self.gold = nm_training_inputs(1)
        self.W = init_projection(R, D)
        self.m1 = np.zeros_like(self.W)
        self.m2 = np.zeros_like(self.W)
        from jkofast.kernels.jko import metric as k

        self.work = k.infonce_work(R, D, M)

    def run(self, threads):
        from jkofast.kernels.jko import metric as k

        with numba_threads(threads):
            k.infonce_grad(self.W, self.Q[0], self.Z, 0, M, self.gold, True, self.work)
            k.adamw_step(self.W, self.work.G, self.m1, self.m2, 1, 5e-3, 1e-4, 0.9, 0.999, 1e-8)

    def time_infonce_grad_adamw_step(self, threads):
        self.run(threads)

    def track_gradient_fd_residual(self, threads):
        """Max |hand-written - central-difference| / max |gradient| on a tiny query (r 3, d 6, M 8)."""
        from jkofast.kernels.jko import metric as k

        rng = np.random.default_rng(SEED)
        W, zq, Zp = rng.standard_normal((3, 6)), rng.standard_normal(6), rng.standard_normal((8, 6))
        gold = np.zeros(8, bool)
        gold[[2, 5]] = True
        work = k.infonce_work(3, 6, 8)

        def loss(Wx, want=False):
            return k.infonce_grad(Wx, zq, Zp, 0, 8, gold, want, work)[0]

        loss(W, True)
        g = work.G.copy()
        fd = np.zeros_like(W)
        h = 1e-6
        for i in np.ndindex(W.shape):
            e = np.zeros_like(W)
            e[i] = h
            fd[i] = (loss(W + e) - loss(W - e)) / (2 * h)
        return float(np.abs(g - fd).max() / np.abs(g).max())

    track_gradient_fd_residual.unit = "relative"


class TrainEpoch(Benchmark):
    """One epoch of ``train_metric`` (79 synthetic queries of M = 200 as SciFact; 10 in the fast profile)."""

    N_QUERIES = 10 if PROFILE == "fast" else 79
    params = ([1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        self.Q, self.off, self.Z, self.gold = nm_training_inputs(self.N_QUERIES)

    def run(self, threads):
        from jkofast.jko.metric import train_metric

        with numba_threads(threads):
            train_metric(self.Q, self.off, self.Z, self.gold, epochs=1)

    def time_train_epoch(self, threads):
        self.run(threads)


class ProjectedCostRerank(Benchmark):
    """``rerank_batch`` at the contrib point on M = 200 pools: raw-cosine C vs the learned ``C^W`` (r = 64)."""

    N_POOLS = 4 if PROFILE == "fast" else 40
    params = (["cosine", "projected"], [1, 2])
    param_names = ["cost", "threads"]
    timeout = 1200

    def make_inputs(self, cost, threads):
        from jkofast.jko.metric import init_projection

        rng = np.random.default_rng(SEED)
        _, self.off, Z, _ = nm_training_inputs(self.N_POOLS)
        self.Z = Z.astype(np.float32)
        r = np.concatenate([np.sort(rng.random(M))[::-1] for _ in range(self.N_POOLS)])
        self.E = -r
        self.W = None if cost == "cosine" else init_projection(R, D) + 0.05 * rng.standard_normal((R, D))

    def run(self, cost, threads):
        from jkofast.jko import operating_point, rerank_batch

        rerank_batch(
            self.E,
            None,
            self.off,
            embeddings=self.Z,
            config=operating_point("contrib"),
            n_threads=threads,
            projection=self.W,
        )

    def time_rerank_batch(self, cost, threads):
        self.run(cost, threads)
