"""asv suites for the JKO solver: one query per gradient path, and batched reranking."""

from __future__ import annotations

import numpy as np

from benchmarks.bench_sinkhorn import clustered_pool
from benchmarks.common import PROFILE, SEED, Benchmark
from jkofast import numba_threads


def jko_query_inputs(m=200, seed=SEED, tau0=1.0):
    """A seeded M-pool with SPEC A.4.7's synthetic energy: E = -(0.4 minmax(U) + 0.6 minmax(N))."""
    rng = np.random.default_rng(seed)
    Z, C, K = clustered_pool(m, seed=seed)

    def minmax(x):
        return (x - x.min()) / (x.max() - x.min())

    r = 0.4 * minmax(rng.random(m)) + 0.6 * minmax(rng.normal(size=m))
    x = r / tau0
    p0 = np.exp(x - x.max())
    return Z, p0 / p0.sum(), -r, C, K


# "unrolled32": the unrolled path on float32 Gibbs operators (dtype="float32", the float32 parity path)
GRAD_PATHS = {"unrolled": {"grad": "unrolled"}, "unrolled32": {"grad": "unrolled", "dtype": "float32"}}


class JKOQuery(Benchmark):
    """One M = 200 query, 1 thread: operating point x gradient path (``unrolled32`` = float32 operators)."""

    params = (["base", "tuned"], ["unrolled", "unrolled32", "implicit"])
    param_names = ["config", "grad"]

    def make_inputs(self, config, grad):
        from jkofast.jko import operating_point

        self.cfg = operating_point(config, **GRAD_PATHS.get(grad, {"grad": grad}))
        _, self.p0, self.E, self.C, self.K = jko_query_inputs(tau0=self.cfg.tau0)

    def run(self, config, grad):
        from jkofast.jko import run_jko

        with numba_threads(1):
            run_jko(self.p0, self.E, self.C, self.K, self.cfg)

    def time_run_jko(self, config, grad):
        self.run(config, grad)


class RerankBatch(Benchmark):
    """Batched rerank of 300 pools of M = 200 (dense geometry built in-kernel), tuned/implicit."""

    N_POOLS = 24 if PROFILE == "fast" else 300
    params = ([1, 2],)
    param_names = ["threads"]
    timeout = 1800

    def make_inputs(self, threads):
        zs, es = [], []
        for q in range(self.N_POOLS):
            Z, _, E, _, _ = jko_query_inputs(seed=SEED + q)
            zs.append(Z.astype(np.float32))
            es.append(E)
        self.Z = np.concatenate(zs)
        self.E = np.concatenate(es)
        self.off = np.arange(0, 200 * (self.N_POOLS + 1), 200, dtype=np.int64)

    def run(self, threads):
        from jkofast.jko import operating_point, rerank_batch

        rerank_batch(
            self.E,
            None,
            self.off,
            embeddings=self.Z,
            config=operating_point("tuned", grad="implicit"),
            n_threads=threads,
        )

    def time_rerank_batch(self, threads):
        self.run(threads)


class Float32Speedup(Benchmark):
    """Speed-up of the float32 unrolled path over the float64 one (tuned, M = 200, 1 thread), in one process.

    ``track_speedup``: median float64 time / median float32 time, the two interleaved (best
    comparison under shared load); ``track_l1_vs_float64``: L1 distance of the two p_T (a
    correctness ride-along: float32 rounding, well under the parity bar 5e-3).
    """

    ROUNDS = 2 if PROFILE == "fast" else 7

    def make_inputs(self):
        from jkofast.jko import operating_point

        self.cfgs = [operating_point("tuned", grad="unrolled", dtype=d) for d in ("float64", "float32")]
        _, self.p0, self.E, self.C, self.K = jko_query_inputs(tau0=1.0)

    def run(self):
        from jkofast.jko import run_jko

        with numba_threads(1):
            return [run_jko(self.p0, self.E, self.C, self.K, c) for c in self.cfgs]

    def track_speedup(self):
        import time

        from jkofast.jko import run_jko

        ts = [[], []]
        with numba_threads(1):
            for _ in range(self.ROUNDS):
                for i, c in enumerate(self.cfgs):
                    t0 = time.perf_counter()
                    run_jko(self.p0, self.E, self.C, self.K, c)
                    ts[i].append(time.perf_counter() - t0)
        return float(np.median(ts[0]) / np.median(ts[1]))

    track_speedup.unit = "x"

    def track_l1_vs_float64(self):
        p64, p32 = self.run()
        return float(np.abs(p64 - p32).sum())

    track_l1_vs_float64.unit = "L1"


class CSRGeometry(Benchmark):
    """C, K of one pool of 200 sparse rows (``pool_geometry(csr=...)``, the ``jko_sparse`` row's geometry).

    Rows shaped like SciFact's PPMI-smoothed TF-IDF rows (≈ 550 of 26,000 Zipf-drawn columns, so
    rows share many columns); the CSR cosine is a scatter / gather (bit-identical to a merge join).
    """

    def make_inputs(self):
        import scipy.sparse as sp

        rng = np.random.default_rng(SEED)
        m, v, nnz = 200, 26_000, 550
        p = 1.0 / np.arange(1, v + 1) ** 0.9
        p /= p.sum()
        cols = [np.unique(rng.choice(v, size=nnz, p=p)) for _ in range(m)]
        indptr = np.concatenate([[0], np.cumsum([c.size for c in cols])])
        data = rng.random(int(indptr[-1])).astype(np.float32) + 0.01
        self.X = sp.csr_matrix((data, np.concatenate(cols), indptr), shape=(m, v))

    def run(self):
        from jkofast.jko import pool_geometry

        return pool_geometry(csr=self.X)

    def time_pool_geometry_csr(self):
        self.run()


# The counting copy of the flow ("counter") and, per (suite, pool), its result for that pool. asv runs each
# (pool, stage) in a process of its own, where this holds one result; CI's smoke run
# (benchmarks/tools/ci_benchmarks.py) runs them all in one process, where the six stages of a pool read one
# flow run instead of building the copy and running the flow twelve times.
_FLOW_RUNS: dict = {}


class ImplicitSweeps(Benchmark):
    """M x M products per query of the ``grad="implicit"`` flow (tuned, M = 200), by stage.

    Counted by the serial copy of the flow in ``benchmarks/tools/implicit_limit.py`` (the package's
    own stage kernels and ``w_implicit_counted``) on the
    clustered synthetic pool and the first SciFact parity pool: ``energy`` (``Ks p``),
    ``sinkhorn_row`` / ``sinkhorn_col`` (the update pairs and the row check of the last one),
    ``grad_setup`` (``KC v``, ``KCᵀu``, ``Πᵀx``, ``Π t``), ``pcg`` (gradient and Newton PCG steps,
    two each) and ``passes``: sweeps over the operators, a fused sweep (``Kᵀu`` and ``Kᵀ(u ⊙ x)``,
    or on a symmetric cost ``KC v`` and ``KC u``, in one pass) counted once. The time of those sweeps:
    ``implicit_limit.py``.
    """

    params = (["clustered", "scifact"], ["energy", "sinkhorn_row", "sinkhorn_col", "grad_setup", "pcg", "passes"])
    param_names = ["pool", "stage"]

    def make_inputs(self, pool, stage):
        import os
        import sys

        tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools")
        if tools not in sys.path:
            sys.path.insert(0, tools)
        threads = os.environ.get("NUMBA_NUM_THREADS")
        import implicit_limit as il  # sets NUMBA_NUM_THREADS for its own runs: restored here

        if threads is None:
            os.environ.pop("NUMBA_NUM_THREADS", None)
        else:
            os.environ["NUMBA_NUM_THREADS"] = threads

        import jkofast
        from jkofast.jko import operating_point

        self.il = il
        self.cfg = operating_point("tuned", grad="implicit")
        if pool == "clustered":
            _, p0, E, C, K = jko_query_inputs(tau0=self.cfg.tau0)
            self.pool = (p0, E, C, K)
        else:
            self.pool = il.scifact_pools(self.cfg.tau0)[0][0]
        if "counter" not in _FLOW_RUNS:  # a jitted closure, compiled on each build: one per process
            _FLOW_RUNS["counter"] = il.make_counter(jkofast)
        self.counter = _FLOW_RUNS["counter"]

    def run(self, pool, stage):
        key = ("sweeps", pool)
        if key not in _FLOW_RUNS:  # one counted flow gives every stage's row
            with numba_threads(1):
                _FLOW_RUNS[key] = self.counter(*self.pool, self.cfg)
        ok, _, counts, _ = _FLOW_RUNS[key]
        if not ok:
            raise NotImplementedError  # a fallback step: the scaled path's counts do not apply
        acc = self.il.account(counts, {"matvec_lp_float32_us": 1.0, "matvec_lp_float64_us": 1.0})
        prod, passes = acc["sweeps_per_query"], acc["passes_per_query"]
        return {
            "energy": prod["energy_Ks_p"],
            "sinkhorn_row": prod["sinkhorn_row"],
            "sinkhorn_col": prod["sinkhorn_col"],
            "grad_setup": prod["grad_setup"],
            "pcg": prod["pcg_newton"] + prod["pcg_grad"],
            "passes": sum(passes.values()),
        }[stage]

    def track_sweeps_per_query(self, pool, stage):
        return self.run(pool, stage)

    track_sweeps_per_query.unit = "sweeps"


class ImplicitStages(Benchmark):
    """Time per query of each stage of the ``grad="implicit"`` flow (tuned, M = 200, 1 thread), in ms.

    The counting copy of ``benchmarks/tools/implicit_limit.py`` timed stage by stage with the CPU's
    time-stamp counter (best of 5 runs of the pool): ``log_softmax`` (2M exps per inner step), ``energy``
    (``Ks p`` and its sums), ``warm_start``, ``transport`` (Sinkhorn pairs, set-up, PCG), ``grad_adam``
    (the transport gradient and the Adam step) and ``outer`` (``outer_start``, ``softmax``). The O(M)
    stages are what the sweep counts of ``ImplicitSweeps`` do not see.
    """

    params = (["clustered", "scifact"], ["outer", "log_softmax", "energy", "warm_start", "transport", "grad_adam"])
    param_names = ["pool", "stage"]
    make_inputs = ImplicitSweeps.make_inputs

    def run(self, pool, stage):
        key = ("stages", pool)
        if key not in _FLOW_RUNS:  # one timed flow gives every stage's row
            with numba_threads(1):
                _FLOW_RUNS[key] = self.counter(*self.pool, self.cfg, parts=3, repeats=5)
        ok, _, _, cyc = _FLOW_RUNS[key]
        if not ok:
            raise NotImplementedError  # a fallback step: the scaled path's stages do not apply
        if not hasattr(self, "tick"):
            self.tick = self.il.tsc_per_ms()
        k = ["outer", "log_softmax", "energy", "warm_start", "transport", "grad_adam"].index(stage)
        return float(cyc[k]) / self.tick

    def track_stage_ms(self, pool, stage):
        return self.run(pool, stage)

    track_stage_ms.unit = "ms"
