"""asv suites for the log-domain Sinkhorn kernel (jkofast.sinkhorn_log).

Times ``N_ITER`` update pairs from a cold start (fixed count, no tolerance) on a seeded
clustered pool with the JKO geometry ``C = (1 - cos)^2``; divide by ``N_ITER`` for the
per-iteration figure (``benchmarks/tools/compare_peers.py`` prints it next to POT's).
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark, jk

N_ITER = 100


def clustered_pool(m, d=384, n_clusters=20, seed=SEED):
    """Unit rows in ``n_clusters`` clusters (within-cluster cosine ~0.5), like MiniLM pools."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    Z = centres[np.arange(m) % n_clusters] + 0.05 * rng.normal(size=(m, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    S = np.clip(Z @ Z.T, -1, 1)
    return Z, (1 - S) ** 2, np.maximum(S, 0)


class SinkhornIteration(Benchmark):
    """``N_ITER`` pairs at ε = 0.1, M in {200, 1000}, float64 / float32."""

    params = ([200] if PROFILE == "fast" else [200, 1000], ["float64", "float32"])
    param_names = ["M", "dtype"]

    def make_inputs(self, m, dtype):
        rng = np.random.default_rng(SEED)
        _, C, _ = clustered_pool(m)
        self.C = C.astype(dtype)
        a = rng.random(m) + 0.01
        self.a = (a / a.sum()).astype(dtype)
        self.b = np.full(m, 1.0 / m, dtype)

    def run(self, m, dtype):
        from jkofast import sinkhorn_log

        return sinkhorn_log(self.a, self.b, self.C, 0.1, max_iter=N_ITER, tol=None)

    def time_sinkhorn_100_pairs(self, m, dtype):
        self.run(m, dtype)

    def track_marginal_error(self, m, dtype):
        """Row-marginal L1 error after N_ITER pairs (correctness rides along)."""
        return float(self.run(m, dtype).marginal_error)

    track_marginal_error.unit = "L1"


class SinkhornSmallEps(Benchmark):
    """The log-form fallback: ε = 0.002 makes the scaled sums underflow (M = 200, float64)."""

    params = ([200],)
    param_names = ["M"]

    def make_inputs(self, m):
        _, C, _ = clustered_pool(m)
        self.C = 4.0 * C
        self.a = np.full(m, 1.0 / m)

    def run(self, m):
        from jkofast import sinkhorn_log

        return sinkhorn_log(self.a, self.a, self.C, 0.002, max_iter=20, tol=None)

    def time_sinkhorn_20_pairs_log_form(self, m):
        self.run(m)


class CompatLogSinkhornLoss(Benchmark):
    """``jkofast.compat.log_sinkhorn_loss`` at the W_C metric's setting (ε 0.1, 80 pairs), float32 inputs, 1 thread.

    The published stability scripts call this function for every pair of distributions they compare;
    ``benchmarks/tools/compare_published_loss.py`` times the published torch function beside it.
    """

    params = ([200] if PROFILE == "fast" else [200, 400],)
    param_names = ["M"]

    def make_inputs(self, m):
        try:
            from jkofast.compat import log_sinkhorn_loss  # noqa: F401  (absent before 6cabd34)
        except ImportError:
            raise NotImplementedError from None
        rng = np.random.default_rng(SEED)
        _, C, _ = clustered_pool(m)
        self.C = C.astype(np.float32)
        p, q = rng.random(m) + 0.01, rng.random(m) + 0.01
        self.log_p = np.log(p / p.sum()).astype(np.float32)
        self.log_q = np.log(q / q.sum()).astype(np.float32)

    def run(self, m):
        from jkofast import numba_threads
        from jkofast.compat import log_sinkhorn_loss

        with numba_threads(1):
            return log_sinkhorn_loss(self.log_p, self.log_q, self.C, eps=0.1, n_iter=80)

    def time_log_sinkhorn_loss_80_pairs(self, m):
        self.run(m)


class PotSinkhornLog(Benchmark):
    """POT's ``ot.bregman.sinkhorn_log`` on the same inputs as ``SinkhornIteration`` (the peer, float64).

    ``N_ITER`` iterations, no stopping threshold (``stopThr=0``); ``track_speedup_vs_pot`` times
    both libraries side by side in one process (best of 3) and returns POT / jkofast. Skipped
    when POT is not installed (``pip install POT``; it is in the ``bench`` extra).
    """

    params = ([200] if PROFILE == "fast" else [200, 1000],)
    param_names = ["M"]

    def make_inputs(self, m):
        try:
            import ot
        except ImportError as exc:  # asv skips a benchmark whose setup raises NotImplementedError
            raise NotImplementedError("POT is not installed") from exc
        self.ot = ot
        rng = np.random.default_rng(SEED)
        _, self.C, _ = clustered_pool(m)
        a = rng.random(m) + 0.01
        self.a = a / a.sum()
        self.b = np.full(m, 1.0 / m)

    def run(self, m):
        return self.ot.bregman.sinkhorn_log(self.a, self.b, self.C, 0.1, numItermax=N_ITER, stopThr=0.0)

    def time_pot_sinkhorn_log_100_iterations(self, m):
        self.run(m)

    def track_speedup_vs_pot(self, m):
        """POT time / jkofast time for ``N_ITER`` iterations, same inputs, measured back to back."""
        import timeit

        from jkofast import sinkhorn_log

        def mine():
            sinkhorn_log(self.a, self.b, self.C, 0.1, max_iter=N_ITER, tol=None)

        mine()
        t_pot = min(timeit.repeat(lambda: self.run(m), number=1, repeat=3))
        t_jk = min(timeit.repeat(mine, number=1, repeat=3))
        return t_pot / t_jk

    track_speedup_vs_pot.unit = "x"


class ImplicitStep(Benchmark):
    """The work of a ``grad="implicit"`` step: M x M sweeps per warm-started step, and one sweep's price.

    A step is one ``w_implicit_counted`` call as the JKO flow makes it: ε 0.2 on the clustered
    pool, float32 operators, p moved by |Δp|₁ ≈ 0.017 (a typical Adam step of the tuned flow)
    and back, tolerance ``0.1 |Δp|₁``, CG tolerance 1e-3. ``track_sweeps_per_step``: row and
    column sweeps (a fused ``matvec2_lp`` counts 1.5), the three set-up sweeps and two per PCG
    step. ``time_matvec_lp``: one float32 200 x 200 sweep (includes Numba's dispatch from
    Python, ~0.3 µs). Time per query and the whole account: ``bench_jko`` and
    ``benchmarks/tools/implicit_limit.py``.
    """

    params = ([200],)
    param_names = ["M"]

    def make_inputs(self, m):
        tr = jk("jkofast.kernels.ot.transport")
        sl = jk("jkofast.kernels.ot.sinkhorn_log")
        if not hasattr(tr, "w_implicit_counted"):  # before the counted kernel
            raise NotImplementedError
        self.tr, self.sl = tr, sl
        rng = np.random.default_rng(SEED)
        _, C, _ = clustered_pool(m)
        K = np.exp(-(C - C.min()) / 0.2)
        f32 = np.float32
        self.ops = tr.GibbsOps(
            K.astype(f32),
            np.ascontiguousarray(K.T).astype(f32),
            (K * C).astype(f32),
            np.ascontiguousarray((K * C).T).astype(f32),
            np.empty(m, f32),
        )
        p0 = rng.dirichlet(np.ones(m))
        p1 = p0 * np.exp(0.1 * rng.normal(size=m))
        self.ps = (p0, p1 / p1.sum())
        self.lim = tr.Limits(1000, 1e-3, 200, 8)
        self.A = rng.random((m, m)).astype(f32)
        self.xa, self.out = rng.random(m).astype(f32), np.empty(m)

    def run(self, m):
        """Converge at p0, then the two steps p0 -> p1 -> p0; returns the sweeps per step."""
        tr, sl = self.tr, self.sl
        m = self.ps[0].size
        sk = sl.SinkhornWork(*np.zeros((8, m)))
        sk.qb[:] = self.ps[0]
        sk.pa[:] = self.ps[0]
        w = np.zeros((8, m))
        v, x, g = np.ones(m), np.zeros(m), np.zeros(m)
        tr.w_implicit_counted(self.ops, 1e-6, self.lim, v, x, g, sk, w)
        tol = 0.1 * float(np.abs(self.ps[1] - self.ps[0]).sum())
        n = 0.0
        for p in (self.ps[1], self.ps[0]):
            sk.pa[:] = p
            r = tr.w_implicit_counted(self.ops, tol, self.lim, v, x, g, sk, w)
            n += r[4] + 1.5 * r[5] + r[6] + 3 + 2 * (r[7] + r[8])
        sl.matvec_lp(self.A, self.xa, self.out)
        return n / 2

    def track_sweeps_per_step(self, m):
        return self.run(m)

    track_sweeps_per_step.unit = "sweeps"

    def time_matvec_lp(self, m):
        self.sl.matvec_lp(self.A, self.xa, self.out)
