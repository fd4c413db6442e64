"""asv suites for the theory experiments (SPEC A.7.7) and the linear-response check.

* ``FreeEnergyBatch`` — F(p) of every state of a batch of M = 200 pools (``prange`` over items);
* ``WcBatch`` — the theory ``wc`` (80 cold Sinkhorn pairs) over a batch of pairs;
* ``LaplacianBands`` — Gibbs-affinity Laplacian, eigendecomposition, bands and one direction per band;
* ``LinearResponseJVP`` — the exact step (Newton) and the implicit JVP of 8 directions, W and KL.
"""

from __future__ import annotations

import numpy as np

from benchmarks.bench_sinkhorn import clustered_pool
from benchmarks.common import PROFILE, SEED, Benchmark, jk
from jkofast import numba_threads

N_POOLS = 4 if PROFILE == "fast" else 40


def _pools(n_pools, m=200):
    zs, rs = [], []
    rng = np.random.default_rng(SEED)
    for q in range(n_pools):
        Z, _, _ = clustered_pool(m, seed=SEED + q)
        zs.append(Z.astype(np.float32))
        rs.append(rng.random(m))
    return np.concatenate(zs), np.arange(0, m * (n_pools + 1), m, dtype=np.int64), np.concatenate(rs)


class FreeEnergyBatch(Benchmark):
    """F(p_t), t = 0..5, of N_POOLS pools of M = 200 (E1's evaluation), 1 and 2 threads."""

    params = ([1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        th = jk("jkofast.jko.theory")
        Z, off, r = _pools(N_POOLS)
        self.batch = th.TheoryBatch.from_embeddings(Z, off, n_threads=threads)
        rng = np.random.default_rng(SEED)
        self.P = rng.dirichlet(np.ones(200), size=(6, N_POOLS)).reshape(6, -1)
        self.E = -r
        self.po = np.arange(N_POOLS)

    def run(self, threads):
        self.batch.free_energy(self.P, self.E, self.po, 0.05, 0.05)

    def time_free_energy(self, threads):
        self.run(threads)


class WcBatch(Benchmark):
    """wc(p_{t-1}, p_t) of 5 state pairs of N_POOLS pools (E1's velocity), 1 and 2 threads."""

    params = ([1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        th = jk("jkofast.jko.theory")
        Z, off, _ = _pools(N_POOLS)
        self.batch = th.TheoryBatch.from_embeddings(Z, off, n_threads=threads)
        rng = np.random.default_rng(SEED)
        P = rng.dirichlet(np.ones(200), size=(6, N_POOLS)).reshape(6, -1)
        self.P, self.Q = P[:-1], P[1:]
        self.po = np.arange(N_POOLS)

    def run(self, threads):
        self.batch.wc(self.P, self.Q, self.po)

    def time_wc(self, threads):
        self.run(threads)


class LaplacianBands(Benchmark):
    """Gibbs Laplacian of one M = 200 pool, eigh, 4 bands, one direction per band (1 BLAS thread)."""

    def make_inputs(self):
        _, self.C, _ = clustered_pool(200)

    def run(self):
        from threadpoolctl import threadpool_limits

        th = jk("jkofast.jko.theory")
        with threadpool_limits(limits=1, user_api="blas"):
            _, U = th.gibbs_laplacian(self.C)
            e = th.band_edges(200, 4)
            rng = np.random.default_rng(SEED)
            for b in range(4):
                th.band_direction(U, e[b], e[b + 1], rng)

    def time_laplacian_bands(self):
        self.run()


class LinearResponseJVP(Benchmark):
    """Exact step (damped Newton, residual < 1e-11) + implicit JVP of 8 directions, M = 200."""

    params = (["wasserstein", "kl"],)
    param_names = ["mode"]

    def make_inputs(self, mode):
        from jkofast.jko.solver import JKOConfig

        _, C, K = clustered_pool(200)
        rng = np.random.default_rng(SEED)
        r = rng.random(200)
        self.E = -r
        x = r / 0.1
        self.q = np.exp(x - x.max())
        self.q /= self.q.sum()
        self.C, self.K = C, K
        self.cfg = JKOConfig(mode=mode, objective="entropic" if mode == "wasserstein" else "transport")
        V = rng.normal(size=(200, 8))
        self.V = V - V.mean(axis=0)

    def run(self, mode):
        from threadpoolctl import threadpool_limits

        lr = jk("jkofast.jko.linear_response")
        with threadpool_limits(limits=1, user_api="blas"), numba_threads(1):
            sol = lr.solve_step(self.E, self.q, self.C, self.K, self.cfg, tol=1e-11)
            lr.jvp(sol, self.V)

    def time_step_and_jvp(self, mode):
        self.run(mode)

    def track_jvp_fd_rel_err(self, mode):
        """Relative error of the JVP against central differences (s = 1e-3) along the first direction."""
        from threadpoolctl import threadpool_limits

        lr = jk("jkofast.jko.linear_response")
        with threadpool_limits(limits=1, user_api="blas"):
            sol = lr.solve_step(self.E, self.q, self.C, self.K, self.cfg, tol=1e-11)
            v = self.V[:, 0]
            a = lr.jvp(sol, v)
            s = 1e-3
            fd = (
                lr.solve_step(self.E + s * v, self.q, self.C, self.K, self.cfg, tol=1e-11, start=sol).p
                - lr.solve_step(self.E - s * v, self.q, self.C, self.K, self.cfg, tol=1e-11, start=sol).p
            ) / (2 * s)
        return float(np.linalg.norm(fd - a) / np.linalg.norm(a))
