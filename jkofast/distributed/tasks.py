"""The Dask side of a streaming rerank job: chunks as tasks on workers, collected by the client.

:class:`ClientStages` are the stages of :func:`jkofast.jko.stream.rerank_stream` on a cluster: the
client parses the pool file into the single-machine job's chunks and submits each as one task
(:func:`rerank_chunk_task`); a worker prepares, solves and writes the chunk's part atomically into
``OUT.parts/`` with the job's geometry loaded once per process (:func:`rerank_chunk`), and the
client collects the counts and messages in input order.  The parts are those of the local job, so
either resumes the other.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import threading
import uuid
import warnings

import numpy as np

from jkofast._threads import numba_threads
from jkofast.distributed.cluster import require_dask, worker_name
from jkofast.eval.runio import Chunk
from jkofast.jko.stream import (
    Geometry,
    RerankOptions,
    finish_chunk,
    load_geometry,
    prepare_chunk,
    solve_chunk,
    warm_rerank_kernels,
    write_part,
)

__all__ = [
    "ClientStages",
    "client_checks",
    "pack_chunk",
    "rerank_chunk",
    "rerank_chunk_task",
    "unpack_chunk",
    "worker_options",
]

_WORKER_GEOMETRY: dict = {}  # per process: the geometry of the last job, loaded once (memory-mapped rows)
_WORKER_LOCK = threading.Lock()  # one kernel launch at a time per process (workqueue layer), one geometry load
_WORKER_WARM: list = []


def _worker_geometry(opts: RerankOptions) -> Geometry:
    """Return the job's geometry in this process, loaded on first use and kept for the next chunks."""
    paths = (opts.embeddings, opts.ids, opts.tfidf_corpus, opts.projection)
    key = tuple((p, os.stat(p).st_mtime_ns) if p else None for p in paths)
    geom = _WORKER_GEOMETRY.get(key)
    if geom is None:
        _WORKER_GEOMETRY.clear()  # one job's geometry at a time
        geom = _WORKER_GEOMETRY[key] = load_geometry(opts)
    return geom


def pack_chunk(chunk: Chunk) -> tuple:
    """Return a chunk as five flat objects (doc ids and score strings joined by line feeds) for a task.

    One string per column pickles as a copy of its bytes, where a list of strings costs one
    object per line; ids and score strings hold no whitespace, so the join is reversible.
    """
    return (chunk.qids, chunk.off, "\n".join(chunk.docs), "\n".join(chunk.sstr), chunk.vals)


def unpack_chunk(packed: tuple) -> Chunk:
    """Inverse of :func:`pack_chunk`."""
    qids, off, docs, sstr, vals = packed
    n = int(off[-1]) if len(off) else 0
    return Chunk(qids, off, docs.split("\n") if n else [], sstr.split("\n") if n else [], vals)


def rerank_chunk(opts: RerankOptions, cfg, chunk: Chunk, user_scores, say) -> tuple:
    """Rerank one chunk in this process with the job's cached geometry.

    Returns
    -------
    text : str
        The chunk's TREC lines (as the single-machine job writes them).
    dist : dict
        Its part of ``--dist`` (query ids, pool sizes, p as float32, status).
    n_passed : int
        Queries written unchanged (reported through ``say``).
    unconverged : tuple of int
        Queries with a capped inner step, capped Sinkhorn steps, capped CG steps.
    """
    with _WORKER_LOCK:
        geom = _worker_geometry(opts)
        warm = f"multires/{cfg.grad}" if opts.multires else "jko"
        if warm not in _WORKER_WARM:
            warm_rerank_kernels(say, multires=bool(opts.multires), grad=cfg.grad)
            _WORKER_WARM.append(warm)
        pr = prepare_chunk(chunk, geom, user_scores, cfg, opts)
        with numba_threads(opts.threads):  # the energy kernels too: the worker's thread budget
            res = solve_chunk(pr, geom, cfg, opts)
    unconv = (0, 0, 0)
    if res is not None and res.unconverged is not None:
        capped = res.unconverged.sum(axis=0)
        unconv = (int(np.count_nonzero(res.unconverged.any(axis=1))), int(capped[0]), int(capped[1]))
    text, dist, nbad = finish_chunk(pr, res, opts, say)
    return text, dist, nbad, unconv


def rerank_chunk_task(opts: RerankOptions, cfg, ci: int, packed: tuple, user_scores) -> dict:
    """Rerank chunk ``ci`` (packed by :func:`pack_chunk`) and write its part atomically: one Dask task.

    ``opts`` carries absolute paths and ``opts.threads`` (this worker's Numba threads).
    Returns the chunk's counts, its messages (in order) and this worker's name and peak RSS.
    """
    messages: list = []
    text, dist, nbad, unconv = rerank_chunk(opts, cfg, unpack_chunk(packed), user_scores, messages.append)
    write_part(opts.out + ".parts", ci, text, dist if opts.dist else None, dist.get("_conf"))
    return {
        "ci": ci,
        "queries": len(packed[0]),
        "passed": nbad,
        "unconverged": unconv,
        "messages": messages,
        "worker": worker_name(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def client_checks(opts: RerankOptions) -> None:
    """Check what the client can of the geometry without loading it (the workers load it)."""
    if opts.embeddings and opts.ids is None:
        raise ValueError("--embeddings needs --ids (one doc id per row)")
    for flag, path in (("--embeddings", opts.embeddings), ("--ids", opts.ids), ("--tfidf-corpus", opts.tfidf_corpus)):
        if path and not os.path.isfile(path):
            raise FileNotFoundError(f"{flag} file not found: {path}")


def worker_options(opts: RerankOptions) -> RerankOptions:
    """Return the options a task needs, with absolute paths (a worker's working folder is its own)."""
    fields = ("pools", "out", "embeddings", "ids", "tfidf_corpus", "dist", "confidence", "projection")
    absp = {f: os.path.abspath(getattr(opts, f)) for f in fields if getattr(opts, f)}
    return dataclasses.replace(opts, **absp, scores=None)


class ClientStages:
    """Chunks as tasks on a Dask client, at most ``window`` in flight; results collected as they finish.

    The stages of :func:`jkofast.jko.stream.rerank_stream` when the work runs on a cluster: the
    client checks what it can of the geometry (the workers load it), each chunk becomes a task
    (:func:`rerank_chunk_task`) and the client collects the counts.  Messages (passed-through
    queries) are reported in input order; a task that fails (e.g. its workers kept dying: Dask's
    ``allowed-failures``) cancels the rest and raises -- the finished parts stay for a resume.
    """

    def __init__(self, client):
        self.client = client
        self.n_unconv = np.zeros(3, np.int64)

    def load(self, opts: RerankOptions) -> None:
        """Check the geometry files here; the workers load them."""
        client_checks(opts)

    def warm(self, say) -> None:
        """Nothing to warm here: :func:`jkofast.distributed.cluster.dask_client` warms the workers."""

    def start(self, stack, cfg, opts, store, summ, say, tick) -> None:
        """Begin a job (``stack``: unused; the client outlives the job)."""
        self.cfg, self.store, self.summ, self.say, self.tick = cfg, store, summ, say, tick
        self.wopts = worker_options(opts)
        self.window = max(2, 2 * sum(self.client.nthreads().values()))
        self.ac = require_dask().as_completed()
        self.ci_of: dict = {}  # future key -> chunk index
        self.order: list = []  # submitted chunks, in input order
        self.messages: dict = {}  # finished chunk -> its messages, until reported
        self.n_said = 0
        self.n_unconv = np.zeros(3, np.int64)
        self.job = uuid.uuid4().hex[:8]

    def submit_chunk(self, ci: int, chunk: Chunk, user_scores) -> None:
        """Submit chunk ``ci`` as a task; first wait while ``window`` tasks are in flight."""
        while len(self.ci_of) >= self.window:
            self._collect(next(self.ac))
        if user_scores is not None:  # a task gets its chunk's queries only
            user_scores = {q: user_scores[q] for q in chunk.qids if q in user_scores}
        with warnings.catch_warnings():
            # a chunk of ~2,000+ pools passes Dask's 10 MB "large graph" mark: it travels once, by design
            # (inside the task, so a worker lost mid-chunk costs a rerun, not a lost input)
            warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
            fut = self.client.submit(
                rerank_chunk_task,
                self.wopts,
                self.cfg,
                ci,
                pack_chunk(chunk),
                user_scores,
                key=f"jkofast-rerank-{self.job}-{ci:06d}",
                pure=False,
            )
        self.ci_of[fut.key] = ci
        self.order.append(ci)
        self.ac.add(fut)

    def flush(self) -> None:
        """Wait for every task in flight."""
        while self.ci_of:
            self._collect(next(self.ac))

    def _collect(self, fut) -> None:
        ci = self.ci_of.pop(fut.key)
        try:
            r = fut.result()
        except Exception as exc:
            self.client.cancel([f for f in self.ac.futures if f.key in self.ci_of])
            self.ci_of.clear()
            if isinstance(exc, ValueError | TypeError | OSError):  # bad input or settings, as without a client
                raise
            raise RuntimeError(
                f"chunk {ci} failed on the cluster ({type(exc).__name__}: {exc}); the finished chunks "
                f"are kept in {self.store.dir}: run the same job again to resume"
            ) from exc
        if not os.path.exists(os.path.join(self.store.dir, f"chunk_{ci:06d}.trec")):
            raise RuntimeError(
                f"a worker wrote chunk {ci} but this client does not see it in {self.store.dir}: the "
                "output folder must be on a filesystem shared by the client and the workers"
            )
        summ = self.summ
        summ.reranked_now += r["queries"]
        summ.passed_through += r["passed"]
        self.n_unconv += r["unconverged"]
        w = summ.workers.setdefault(r["worker"], {"queries": 0, "chunks": 0, "peak_rss_mb": 0.0})
        w["queries"] += r["queries"]
        w["chunks"] += 1
        w["peak_rss_mb"] = max(w["peak_rss_mb"], r["peak_rss_mb"])
        self.messages[ci] = r["messages"]
        while self.n_said < len(self.order) and self.order[self.n_said] in self.messages:
            for msg in self.messages.pop(self.order[self.n_said]):
                self.say(msg)
            self.n_said += 1
        self.tick(r["queries"])
