"""Shared pieces of the asv suites: the base class, the layout-compatible import helper and the
seeded input generators.  Fixed seeds: values here must not be changed, only appended.

* wall-clock timer (threaded kernels: process_time would sum CPUs);
* profile from ``JKOFAST_BENCH_PROFILE`` (``fast``: one repeat, small sizes);
* warm-up is structural: ``setup`` builds inputs, then calls ``self.run()`` once, so
  Numba compilation is never timed;
* thread count pinned inside ``run`` via ``numba_threads``.

asv times the *current* suites against every commit it is asked about (``asv continuous``,
``asv run A..B``), so a suite must import the package of any commit: the module paths that
moved in the commit "layout: wings" go through :func:`jk`, which tries the current path and
falls back to the path before it.  Names that are public in both layouts
(``jkofast.sinkhorn_log``, ``jkofast.numba_threads``, ``jkofast.jko.run_jko`` /
``operating_point`` / ``rerank_batch``, ``jkofast.sgr.SparseGeometricRetriever``) are imported
directly.
"""

from __future__ import annotations

import abc
import importlib
import os
import timeit

import numpy as np

__all__ = [
    "MOVED",
    "PROFILE",
    "SEED",
    "SHARED_DATA",
    "Benchmark",
    "jk",
    "make_metric_data",
    "synthetic_texts",
    "zipf_corpus",
]

PROFILE = os.environ.get("JKOFAST_BENCH_PROFILE", "regular")
SEED = 0
SHARED_DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))

# Current module path -> the module it lived in before: the commit "layout: wings", and the
# streaming reranker's move from the CLI command into the library (jko.stream, eval.runio).
MOVED = {
    "jkofast.datasets.beir": "jkofast.data",
    "jkofast.eval.metrics": "jkofast.evaluation",
    "jkofast.eval.runio": "jkofast.commands.rerank",
    "jkofast.eval.trec": "jkofast.trec",
    "jkofast.jko.energy": "jkofast.energy",
    "jkofast.jko.solver": "jkofast.jko",
    "jkofast.jko.stream": "jkofast.commands.rerank",
    "jkofast.kernels.eval.metrics": "jkofast.kernels.ranking_metrics",
    "jkofast.pools.baselines": "jkofast.baselines",
    "jkofast.pools.candidates": "jkofast.pools",
    "jkofast.pools.retrievers": "jkofast.sparse.retriever",
    "jkofast.sgr.retriever": "jkofast.sgr",
    "jkofast.sparse.index": "jkofast.index",
    "jkofast.sparse.retriever": "jkofast.retriever",
    "jkofast.studies.main_job": "jkofast.pipeline",
}


def jk(path: str):
    """Import the jkofast module ``path`` (its current name); on a commit before the layout
    change, import the module it was split from (``MOVED``).  A missing dependency inside the
    module is re-raised, not mistaken for the old layout."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        old = MOVED.get(path)
        if old is None or not (path == missing or path.startswith(missing + ".")):
            raise
    return jk(old)


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

    # CI's smoke run (benchmarks/tools/ci_benchmarks.py) sets it on a time_ benchmark's instance: nothing is
    # timed there, and the one call of the benchmark runs the work (a track_ keeps the warm-up: it may read
    # what run() left).
    skip_warmup = False

    def setup(self, *params):
        self.make_inputs(*params)
        if not self.skip_warmup:
            self.run(*params)  # warm-up: compile / load cache outside the timer


def synthetic_texts(n_docs: int, n_queries: int, n_words: int = 60_000, seed: int = SEED):
    """Zipf-distributed word ids rendered as tokens ``t<id>`` (doc length ~ 40-80)."""
    rng = np.random.default_rng(seed)
    words = np.array([f"t{i}" for i in range(n_words)])
    p = 1.0 / np.arange(1, n_words + 1) ** 1.05
    p /= p.sum()
    lens = rng.integers(40, 81, size=n_docs)
    flat = rng.choice(n_words, size=int(lens.sum()), p=p)
    bounds = np.concatenate([[0], np.cumsum(lens)])
    docs = [" ".join(words[flat[bounds[i] : bounds[i + 1]]]) for i in range(n_docs)]
    qlen = rng.integers(4, 12, size=n_queries)
    queries = [" ".join(words[rng.choice(n_words, size=int(n), p=p)]) for n in qlen]
    return docs, queries


def zipf_corpus(n_docs, n_terms, mean_len, seed=0, n_queries=1000, q_len=(3, 8), q_skip=50):
    """Seeded synthetic corpus of token ids: doc lengths ~ Poisson(mean_len) (>= 1), tokens ~
    Zipf(1.07) over ``n_terms`` ranks; queries draw 3-8 tokens from the same law restricted to
    ranks >= q_skip (the most frequent ranks act as stop-words).  Returns (flat, offsets, queries)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_terms + 1) ** 1.07
    p /= p.sum()
    lens = np.maximum(rng.poisson(mean_len, n_docs), 1).astype(np.int64)
    offsets = np.zeros(n_docs + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = rng.choice(n_terms, size=int(offsets[-1]), p=p).astype(np.int64)
    pq = p[q_skip:] / p[q_skip:].sum()
    qlens = rng.integers(q_len[0], q_len[1] + 1, n_queries)
    queries = [q_skip + rng.choice(n_terms - q_skip, size=int(m), p=pq) for m in qlens]
    return flat, offsets, queries


def make_metric_data(n_queries: int, depth: int, n_docs: int = 200_000, seed: int = 0):
    """Seeded synthetic run and qrels dicts: ``depth`` scored docs per query, 3 judged among them
    and 2 judged at random (labels 1-2).  Returns (run, qrels)."""
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(n_queries):
        docs = rng.choice(n_docs, depth, replace=False)
        scores = np.sort(np.round(rng.gamma(2.0, 2.0, depth), 4))[::-1]
        run[f"q{q}"] = {f"doc{d}": float(s) for d, s in zip(docs, scores)}
        judged = np.concatenate([docs[rng.choice(depth, 3, replace=False)], rng.choice(n_docs, 2)])
        qrels[f"q{q}"] = {f"doc{d}": int(rng.integers(1, 3)) for d in judged}
    return run, qrels
