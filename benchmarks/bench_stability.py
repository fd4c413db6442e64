"""asv suite for the batched stability metric W_C (``jkofast.eval.stability.wc_batch``, SPEC A.7.5).

The shape of the SciFact stability study: G (query, perturbation) groups, each a pair of
200-entry pools overlapping in ~half their documents (union ~300), 5 methods per group, ε 0.1,
80 Sinkhorn pairs, with the two self terms (3 solves per pair).  1 and 2 threads.
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark


def stability_pairs(n_groups: int, n_methods: int = 5, m: int = 200, n_docs: int = 5000, d: int = 384, seed=SEED):
    """Seeded unit corpus rows and ragged (p, q) pairs: per group two pools sharing ~m/2 rows."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n_docs, d)).astype(np.float32)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    pv, pr, qv, qr = [], [], [], []
    for _ in range(n_groups):
        rows = rng.choice(n_docs, m + m // 2, replace=False)
        a, b = rows[:m], rows[m // 2 :]
        for _ in range(n_methods):
            x = rng.random(m) ** 8
            y = rng.random(m) ** 8
            pv.append(x / x.sum())
            qv.append(y / y.sum())
            pr.append(a)
            qr.append(b)
    off = np.arange(len(pv) + 1, dtype=np.int64) * m
    return Z, np.concatenate(pv), off, np.concatenate(pr), np.concatenate(qv), off.copy(), np.concatenate(qr)


class WCBatch(Benchmark):
    """``wc_batch`` with self terms: G groups x 5 methods, pools of 200, 1 and 2 threads."""

    params = ([4] if PROFILE == "fast" else [20, 180], [1, 2])
    param_names = ["n_groups", "n_threads"]

    def make_inputs(self, n_groups, n_threads):
        self.args = stability_pairs(n_groups)

    def run(self, n_groups, n_threads):
        from jkofast.eval.stability import wc_batch

        Z, pv, po, pr, qv, qo, qr = self.args
        return wc_batch(pv, po, pr, qv, qo, qr, Z, n_threads=n_threads)

    def time_wc_batch(self, n_groups, n_threads):
        self.run(n_groups, n_threads)

    def track_debiased_identity(self, n_groups, n_threads):
        """max |debiased − (wc − ½(self_p + self_q))| (correctness rides along; 0 expected)."""
        r = self.run(n_groups, n_threads)
        return float(np.max(np.abs(r.debiased - (r.wc - 0.5 * (r.self_p + r.self_q)))))

    track_debiased_identity.unit = "abs"
