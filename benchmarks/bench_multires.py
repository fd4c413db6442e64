"""asv suites for MR-JKO / SAM-JKO (SPEC A.6.3): clustering, the two-stage solve, at 1 and 2 threads.

Pools: M = 200 MiniLM-like rows (20 clusters, :func:`benchmarks.bench_sinkhorn.clustered_pool`)
with a seeded relevance; G = 20, G_keep = 4, the reported fine config (SPEC A.8 "MR/SAM fine
(reported)"), as the SciFact SAM-JKO runs.

:class:`MultiresStream`: the streamed batch path (``jkofast rerank --multires sam`` through
:func:`jkofast.jko.stream.rerank_stream`: parse, solve, write the parts and the output) against the
vanilla ``--grad implicit`` job on the same pool file, at M = 500, 1000, 2000.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from benchmarks.bench_sinkhorn import clustered_pool
from benchmarks.common import PROFILE, SEED, Benchmark

N_POOLS = 24 if PROFILE == "fast" else 300
M = 200


def multires_pools(n_pools=N_POOLS, m=M, seed=SEED):
    """``n_pools`` seeded pools: flat float32 rows, relevance in [0, 1], offsets."""
    zs, rs = [], []
    for q in range(n_pools):
        Z, _, _ = clustered_pool(m, seed=seed + q)
        rng = np.random.default_rng(seed + q)
        zs.append(Z.astype(np.float32))
        rs.append(rng.random(m))
    return np.concatenate(zs), np.concatenate(rs), np.arange(0, m * (n_pools + 1), m, dtype=np.int64)


class MultiresClustering(Benchmark):
    """Clustering of every pool (both JKO stages at T = 0): spherical vs SAM (β = 2) k-means."""

    params = (["kmeans", "sam"], [1, 2])
    param_names = ["clustering", "threads"]

    def make_inputs(self, clustering, threads):
        from jkofast.jko.multires import coarse_config, fine_config

        self.Z, self.rel, self.off = multires_pools()
        self.co = coarse_config(T=0)
        self.fi = fine_config(reported=True, T=0)

    def run(self, clustering, threads):
        from jkofast.jko.multires import multires_rerank

        return multires_rerank(
            self.rel, self.off, self.Z, G=20, G_keep=4, clustering=clustering, sam_beta=2.0,
            coarse=self.co, fine=self.fi, n_threads=threads,
        )  # fmt: skip

    def time_clustering(self, clustering, threads):
        self.run(clustering, threads)

    def track_lloyd_passes(self, clustering, threads):
        """Mean assignment passes per pool (<= 30): a change of the clustering shows here."""
        return float(self.run(clustering, threads).lloyd_passes.mean())


class MultiresSolve(Benchmark):
    """SAM-JKO (β = 2, G 20, G_keep 4, reported fine config): clustering + coarse + fine solve."""

    params = (["unrolled", "implicit"], [1, 2])
    param_names = ["grad", "threads"]

    def make_inputs(self, grad, threads):
        from jkofast.jko.multires import coarse_config, fine_config

        self.Z, self.rel, self.off = multires_pools()
        self.co = coarse_config(grad=grad)
        self.fi = fine_config(reported=True, grad=grad)

    def run(self, grad, threads):
        from jkofast.jko.multires import multires_rerank

        return multires_rerank(
            self.rel, self.off, self.Z, G=20, G_keep=4, clustering="sam", sam_beta=2.0,
            coarse=self.co, fine=self.fi, n_threads=threads,
        )  # fmt: skip

    def time_multires(self, grad, threads):
        self.run(grad, threads)

    def track_refined_pool_size(self, grad, threads):
        """Mean refined pool size (the fine problem's M)."""
        return float(self.run(grad, threads).pool_size.mean())


class MultiresVsVanilla(Benchmark):
    """Vanilla contrib JKO on the same pools (``E = -rel``, ``p0 = softmax(rel)``): the speed-up's denominator."""

    params = (["unrolled", "implicit"], [1, 2])
    param_names = ["grad", "threads"]

    def make_inputs(self, grad, threads):
        from jkofast.jko.solver import operating_point

        self.Z, self.rel, self.off = multires_pools()
        self.cfg = operating_point("contrib", grad=grad)

    def run(self, grad, threads):
        from jkofast.jko.solver import rerank_batch

        rerank_batch(-self.rel, None, self.off, embeddings=self.Z, config=self.cfg, n_threads=threads)

    def time_vanilla(self, grad, threads):
        self.run(grad, threads)


STREAM_M = [500, 1000] if PROFILE == "fast" else [500, 1000, 2000]
STREAM_POOLS = 2 if PROFILE == "fast" else 6


def write_stream_inputs(folder, n_pools=STREAM_POOLS, m=500, d=384, n_clusters=20, seed=SEED):
    """Write ``E.npy`` (``n_pools * m`` unit rows in ``n_clusters`` clusters), ``ids.txt`` and a TREC
    ``run.trec`` of ``n_pools`` pools of ``m`` distinct documents with seeded scores; return the run's path."""
    rng = np.random.default_rng(seed)
    n = n_pools * m
    centres = rng.normal(size=(n_clusters, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    Z = centres[rng.integers(0, n_clusters, n)] + 0.05 * rng.normal(size=(n, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    np.save(os.path.join(folder, "E.npy"), Z.astype(np.float32))
    with open(os.path.join(folder, "ids.txt"), "w") as fh:
        fh.write("".join(f"d{i}\n" for i in range(n)))
    run = os.path.join(folder, "run.trec")
    with open(run, "w") as fh:
        for q in range(n_pools):
            docs = rng.permutation(np.arange(q * m, (q + 1) * m))
            score = np.sort(rng.random(m))[::-1] * 20
            fh.write("".join(f"q{q} Q0 d{d} {r + 1} {s:.4f} bm25\n" for r, (d, s) in enumerate(zip(docs, score))))
    return run


class MultiresStream(Benchmark):
    """One streamed rerank job over ``STREAM_POOLS`` pools of M: SAM-JKO (β 2, G 20, G_keep 4) vs vanilla implicit."""

    params = (["sam", "vanilla"], STREAM_M, [1, 2])
    param_names = ["method", "M", "threads"]
    timeout = 1200

    def make_inputs(self, method, m, threads):
        self.dir = tempfile.mkdtemp(prefix="jkofast-bench-stream-")
        self.run_file = write_stream_inputs(self.dir, m=m)

    def teardown(self, method, m, threads):
        if getattr(self, "dir", None):  # a skipped setup made no folder
            shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, method, m, threads):
        from jkofast.jko.stream import RerankOptions, rerank_stream

        opts = RerankOptions(
            pools=self.run_file,
            out=os.path.join(self.dir, f"{method}.trec"),
            embeddings=os.path.join(self.dir, "E.npy"),
            ids=os.path.join(self.dir, "ids.txt"),
            grad="implicit",
            threads=threads,
            multires=None if method == "vanilla" else method,
        )
        return rerank_stream(opts, report=lambda msg: None)

    def time_rerank_stream(self, method, m, threads):
        self.run(method, m, threads)

    def track_queries_per_s(self, method, m, threads):
        """Reranked queries per second of the streaming stage."""
        return self.run(method, m, threads).queries_per_s
