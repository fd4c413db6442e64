"""asv suite for the drop-in's gradients: ``jkofast.compat.log_sinkhorn_loss_and_grad``.

Forward (the published fixed-iteration loss) plus the hand-written backward through the last
``n_iter_grad`` pairs, on a seeded clustered pool with the JKO geometry, one thread. Settings: the
published defaults (ε = 0.1, 60 pairs, 3 tracked) and the NM-JKO end-to-end call (ε = 0.2, 30 pairs,
4 tracked). The published torch forward + ``backward()`` is compared in
``benchmarks/tools/compare_dropin_grad.py`` (it needs torch and the published module).
"""

from __future__ import annotations

import numpy as np

from benchmarks.bench_sinkhorn import clustered_pool
from benchmarks.common import PROFILE, SEED, Benchmark
from jkofast import numba_threads

SETTINGS = {"defaults": (0.1, 60, 3), "nm_jko_e2e": (0.2, 30, 4)}


class DropinLossAndGrad(Benchmark):
    """Loss and gradients w.r.t. log_p, log_q and C at M = 200 (and 1000 outside the fast profile)."""

    params = ([200] if PROFILE == "fast" else [200, 1000], list(SETTINGS))
    param_names = ["M", "setting"]

    def make_inputs(self, m, setting):
        from jkofast import compat

        if not hasattr(compat, "log_sinkhorn_loss_and_grad"):
            raise NotImplementedError("no drop-in gradients at this commit")
        rng = np.random.default_rng(SEED)
        _, self.C, _ = clustered_pool(m)
        self.log_p = np.log(rng.dirichlet(np.ones(m)))
        self.log_q = np.full(m, -np.log(m))

    def run(self, m, setting):
        from jkofast import compat

        eps, n_iter, n_grad = SETTINGS[setting]
        with numba_threads(1):
            return compat.log_sinkhorn_loss_and_grad(self.log_p, self.log_q, self.C, eps, n_iter, n_grad)

    def time_loss_and_grad(self, m, setting):
        self.run(m, setting)

    def track_grad_C_norm(self, m, setting):
        """Frobenius norm of dL/dC (correctness rides along: changes only if the gradient does)."""
        return float(np.linalg.norm(self.run(m, setting)[3]))
