"""Streaming, resumable JKO-RAG reranking of a pool file (the library behind ``jkofast rerank``).

Input: a TREC run (``qid Q0 docid rank score tag``) or a 3-column file (``qid docid score``);
each query's lines must be contiguous (their order is the pool order).  The file is read by
:mod:`jkofast.eval`'s block reader (:func:`jkofast.eval.runio.iter_chunks`) and cut into chunks of
``chunk_size`` queries.  Three stages overlap: the calling thread parses chunk i+1 and
prepares it (doc id -> row, pass-through decisions), a kernel thread computes energy/p0 and
runs :func:`jkofast.jko.solver.rerank_batch` (all cores, GIL released) on chunk i -- the only
thread that launches Numba kernels -- and a writer thread formats chunk i-1 and writes it
**atomically** to ``OUT.parts/chunk_NNNNNN.trec``.  A manifest (``OUT.parts/manifest.json``)
fingerprints the input and the settings; on restart, finished chunks are skipped and the
final output, the concatenation of the parts, is byte-identical to an uninterrupted run.

Energy: ``r = minmax(run score)`` per pool, or with user rerank scores (``query-id doc-id
score``, streamed in the pool file's query order, or loaded whole with ``scores_in_memory``)
``r = alpha*minmax(run score) + gamma*minmax(rerank)``; ``E = -r``, ``p0 = softmax_{tau0}(r)``
with the operating point's ``tau0`` (SPEC A.1, A.3).  Geometry: dense rows (cosine) from an
``.npy`` with an ids file, or TF-IDF rows (sparse cosine) of a BEIR ``corpus.jsonl``.

Malformed input lines are reported with their line number and skipped.  A query whose pool
cannot be reranked (unknown doc id, a failed solve) is reported and written unchanged, in its
input order, with its input scores -- never dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat

import numpy as np

from jkofast._io import check_writable, check_writable_dir
from jkofast._numba import WARMUPS
from jkofast._threads import resolve_threads
from jkofast.datasets.beir import read_corpus
from jkofast.eval.runio import ScoreStream, iter_chunks, read_scores
from jkofast.jko._chunks import (
    PreparedChunk,
    energy_p0,
    finish_chunk,
    format_lines,
    prepare_chunk,
    process_chunk,
    solve_chunk,
)
from jkofast.jko._parts import ChunkStore, write_part
from jkofast.jko.config import JKOConfig, batch_config, gradient_path
from jkofast.jko.metric import load_metric
from jkofast.pools.candidates import load_embeddings
from jkofast.sparse.index import TfidfIndex

__all__ = [
    "MULTIRES",
    "DenseGeometry",
    "Geometry",
    "LocalStages",
    "RerankOptions",
    "RerankSummary",
    "TfidfGeometry",
    "check_options",
    "energy_p0",
    "finish_chunk",
    "format_lines",
    "job_config",
    "load_geometry",
    "prepare_chunk",
    "process_chunk",
    "rerank_stream",
    "solve_chunk",
    "warm_rerank_kernels",
    "write_part",
]


@dataclasses.dataclass(frozen=True)
class RerankOptions:
    """Settings of one :func:`rerank_stream` job.

    Attributes
    ----------
    pools, out : str
        Input pool file (TREC 6-column or ``qid docid score``; ``.gz`` ok) and output TREC run.
    embeddings, ids : str, optional
        Dense geometry: ``.npy`` (n_docs, d) L2-normalised rows and one doc id per row.
    tfidf_corpus : str, optional
        TF-IDF geometry from a BEIR ``corpus.jsonl(.gz)`` (instead of ``embeddings``).
    scores : str, optional
        User rerank scores ``query-id doc-id score``, streamed in the pool file's query order,
        or loaded whole (any order) when ``scores_in_memory``.
    alpha, gamma : float
        Weights of the run score and of the user scores in ``r`` (only when ``scores``).
    config : str or JKOConfig
        Operating point (``base``, ``tuned``, ``contrib``, ``fast``) or a config;
        ``mode``, ``alpha_prox`` and ``grad`` override its fields when given.  A named operating
        point runs on the batch gradient path, ``grad="implicit"``; ``grad="unrolled"`` selects
        the published path (:func:`jkofast.jko.config.batch_config`).
    dist : str, optional
        Also write the final distributions p_T (``.npz``: query_ids, offsets, p, status).
    confidence : str, optional
        Also write the Dual-Rank confidence of every query (SPEC A.6.4): one line
        ``qid conf_dual conf_softmax conf_margin`` per query in input order (``nan`` for a
        query passed through); needs a transport term (mode ``wasserstein`` or ``bregman``).
        ``conf_softmax`` reads the user scores when given, else the run scores.
    projection : str, optional
        ``.npz`` of a learned metric (:func:`jkofast.jko.metric.save_metric`, NM-JKO): the cost
        is built from the projected rows (dense ``embeddings`` only).
    k : int
        Keep the top-k lines per query (0 = the whole pool).
    tag : str
        Run tag (6th column), non-empty without whitespace.
    chunk_size : int
        Queries per chunk (the unit of resume).
    threads : int, optional
        Numba threads of the kernel stage (default: all).
    keep_parts : bool
        Keep ``OUT.parts/`` after success.
    multires : {"mr", "sam"}, optional
        Rerank each pool with MR-JKO (spherical k-means groups) or SAM-JKO (groups on
        ``[z, beta*r]``) instead of the vanilla flow (:func:`jkofast.jko._chunks.solve_multires`):
        a coarse flow on ``clusters`` centroids keeps the ``refine`` heaviest groups and a fine
        flow on their members gives ``p`` (exactly 0 elsewhere).  Dense ``embeddings`` only; the
        stages are the SPEC A.8 operating points on the job's gradient path (``grad``).
    clusters, refine : int
        Groups per pool (G; ``max(2, M // 4)`` when G >= M) and kept groups (G_keep).
    beta : float
        β >= 0 of the SAM-JKO features (``multires="sam"``).
    """

    pools: str
    out: str
    embeddings: str | None = None
    ids: str | None = None
    tfidf_corpus: str | None = None
    scores: str | None = None
    scores_in_memory: bool = False
    alpha: float = 0.4
    gamma: float = 0.6
    config: object = "tuned"
    mode: str | None = None
    alpha_prox: float | None = None
    grad: str | None = None
    dist: str | None = None
    confidence: str | None = None
    projection: str | None = None
    k: int = 0
    tag: str = "jkofast"
    chunk_size: int = 1000
    threads: int | None = None
    keep_parts: bool = False
    multires: str | None = None
    clusters: int = 20
    refine: int = 4
    beta: float = 2.0


MULTIRES = ("mr", "sam")


@dataclasses.dataclass
class RerankSummary:
    """What a :func:`rerank_stream` job did (counts over the whole input).

    ``grad_path`` names the path that ran the transport term: ``implicit``, ``unrolled``,
    ``entropic`` or ``none`` (a mode without one).
    """

    queries: int = 0
    reranked_now: int = 0
    skipped_finished: int = 0
    passed_through: int = 0
    malformed_lines: int = 0
    split_queries: int = 0
    chunks: int = 0
    unconverged_queries: int = 0
    unconverged_inner_steps: tuple = (0, 0)
    missing_scores: int = 0
    wall_s: float = 0.0
    compute_s: float = 0.0
    jko_config: object = None
    grad_path: str = ""
    workers: dict = dataclasses.field(default_factory=dict)  # client runs: worker -> queries, chunks, peak RSS

    @property
    def queries_per_s(self) -> float | None:
        """Reranked queries per second of the streaming stage (None when nothing was reranked)."""
        return self.reranked_now / self.compute_s if self.compute_s > 0 else None


# ---------------------------------------------------------------------------------------------
# geometry
# ---------------------------------------------------------------------------------------------
def _id_rows(ids: list, path: str) -> dict:
    """Map doc id -> geometry row.

    A repeated id is an error (every pool holding it would otherwise be passed through as
    'not in the geometry', or silently use the last row).
    """
    row = {d: i for i, d in enumerate(ids)}
    if len(row) != len(ids):
        seen: set = set()
        for i, d in enumerate(ids):
            if d in seen:
                raise ValueError(f"{path}: document id {d!r} is repeated (row {i}); ids must be unique")
            seen.add(d)
    return row


def _map_rows(row: dict, docs: list) -> np.ndarray:
    """Geometry row of every doc id (-1 = unknown), one dict lookup each at C speed."""
    try:
        return np.fromiter(map(row.__getitem__, docs), np.int64, len(docs))
    except KeyError:
        return np.fromiter(map(row.get, docs, repeat(-1)), np.int64, len(docs))


class Geometry:
    """Document rows by id; subclasses set ``row`` (doc id -> row) and define ``gather``."""

    row: dict

    def rows(self, docs) -> np.ndarray:
        """Row of every doc id, -1 for an unknown one."""
        return _map_rows(self.row, docs)


class DenseGeometry(Geometry):
    """Dense document rows (cosine geometry): ``embeddings.npy`` with one doc id per row in ``ids``.

    ``projection``: a learned metric's ``.npz`` (NM-JKO): the cost comes from the projected rows.
    """

    def __init__(self, npy: str, ids_path: str | None, projection: str | None = None):
        if ids_path is None:
            raise ValueError("--embeddings needs --ids (one doc id per row)")
        self.emb, ids = load_embeddings(npy, ids_path)
        self.row = _id_rows(ids, ids_path)
        self.W = None
        if projection:
            self.W = load_metric(projection, d=self.emb.shape[1]).W

    def gather(self, rows):
        """``rerank_batch`` geometry keywords of the given rows."""
        r = np.asarray(rows, np.int64)
        out = {"embeddings": np.ascontiguousarray(self.emb[r], dtype=np.float32)}
        if self.W is not None:
            out["projection"] = self.W
        return out


class TfidfGeometry(Geometry):
    """TF-IDF document rows (sparse cosine geometry) of a BEIR corpus (title + text)."""

    def __init__(self, corpus: str):
        ids, titles, texts = read_corpus(corpus)
        idx = TfidfIndex().fit([(t + " " + x).strip() for t, x in zip(titles, texts, strict=True)])
        self.X = idx.doc_matrix().tocsr()
        self.row = _id_rows(ids, corpus)

    def gather(self, rows):
        """``rerank_batch`` geometry keywords of the given rows."""
        return {"csr": self.X[np.asarray(rows, np.int64)]}


class LocalStages:
    """The kernel and writer stages behind the calling thread (which parses and prepares), in this process.

    Three stages overlap: the caller prepares chunk i+1 while the kernel thread solves chunk i
    (``rerank_batch`` releases the GIL; the only thread launching Numba kernels) and the writer
    thread formats and writes chunk i-1.  At most one chunk waits in each stage.

    The stages of a job answer ``load`` (the geometry), ``warm`` (the kernels), ``start`` (the
    job begins), ``submit_chunk`` and ``flush``, and count unconverged steps in ``n_unconv``;
    :class:`jkofast.distributed.tasks.ClientStages` answer the same on a Dask cluster.
    """

    def __init__(self):
        self.geom = None
        self.n_unconv = np.zeros(3, np.int64)  # queries, Sinkhorn-capped inner steps, CG-capped inner steps

    def load(self, opts: RerankOptions) -> None:
        """Load the job's geometry."""
        self.geom = load_geometry(opts)
        self.multires = bool(opts.multires)
        self.grad = job_config(opts).grad

    def warm(self, say) -> None:
        """Compile / load the kernels a chunk needs before the kernel thread starts."""
        warm_rerank_kernels(say, multires=self.multires, grad=self.grad)

    def start(self, stack, cfg, opts, store, summ, say, tick) -> None:
        """Begin a job: its kernel and writer threads live as long as ``stack``."""
        self.kex = stack.enter_context(ThreadPoolExecutor(max_workers=1))
        self.wex = stack.enter_context(ThreadPoolExecutor(max_workers=1))
        self.cfg, self.opts, self.store, self.summ, self.say, self.tick = cfg, opts, store, summ, say, tick
        self.k_pending = None  # (ci, prepared, kernel future)
        self.w_pending = None  # writer future
        self.n_unconv = np.zeros(3, np.int64)

    def submit_chunk(self, ci: int, chunk, user_scores) -> None:
        """Prepare chunk ``ci`` here and hand it to the kernel stage."""
        self.submit(ci, prepare_chunk(chunk, self.geom, user_scores, self.cfg, self.opts))

    def submit(self, ci: int | None, pr: PreparedChunk | None) -> None:
        """Start solving ``pr`` (chunk ``ci``); hand the previous chunk's result to the writer."""
        done, self.k_pending = self.k_pending, None
        if pr is not None:
            self.k_pending = (ci, pr, self.kex.submit(solve_chunk, pr, self.geom, self.cfg, self.opts))
        if done is not None:
            res = done[2].result()
            if res is not None and res.unconverged is not None:
                self.n_unconv[0] += np.count_nonzero(res.unconverged.any(axis=1))
                self.n_unconv[1:] += res.unconverged.sum(axis=0)
            self._drain_writer()  # at most one chunk being formatted / written
            self.w_pending = self.wex.submit(self._write, done[0], done[1], res)

    def flush(self) -> None:
        """Finish the chunk in the kernel stage and the one in the writer."""
        self.submit(None, None)
        self._drain_writer()

    def _write(self, ci, pr, res):
        text, dist, nbad = finish_chunk(pr, res, self.opts, self.say)
        self.store.write(ci, text, dist)
        return len(pr.chunk), nbad

    def _drain_writer(self) -> None:
        if self.w_pending is not None:
            nq_c, nbad = self.w_pending.result()
            self.w_pending = None
            self.summ.reranked_now += nq_c
            self.summ.passed_through += nbad
            self.tick(nq_c)


def load_geometry(opts: RerankOptions) -> Geometry:
    """Return the job's geometry: dense rows of ``opts.embeddings`` or TF-IDF rows of ``opts.tfidf_corpus``."""
    if opts.embeddings:
        return DenseGeometry(opts.embeddings, opts.ids, opts.projection)
    return TfidfGeometry(opts.tfidf_corpus)


# ---------------------------------------------------------------------------------------------
# the job
# ---------------------------------------------------------------------------------------------
def check_options(opts: RerankOptions) -> None:
    """Reject bad settings before any part is written (messages name the command-line options)."""
    if opts.chunk_size < 1:
        raise ValueError(f"--chunk-size must be >= 1, got {opts.chunk_size}")
    if opts.k < 0:
        raise ValueError(f"--k must be >= 0 (0 = whole pool), got {opts.k}")
    if not opts.tag or any(c.isspace() for c in opts.tag):
        raise ValueError(f"--tag must be non-empty without whitespace, got {opts.tag!r}")
    resolve_threads(opts.threads)
    for name in ("alpha", "gamma"):
        v = getattr(opts, name)
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"--{name} must be finite and >= 0, got {v}")
    if not os.path.isfile(opts.pools):
        raise FileNotFoundError(f"--pools file not found: {opts.pools}")
    if opts.embeddings is None and opts.tfidf_corpus is None:
        raise ValueError("a geometry is required: --embeddings E.npy --ids ids.txt, or --tfidf-corpus corpus.jsonl")
    if opts.projection is not None:
        if opts.embeddings is None:
            raise ValueError("--projection needs --embeddings (it projects the dense rows)")
        if not os.path.isfile(opts.projection):
            raise FileNotFoundError(f"--projection file not found: {opts.projection}")
    for flag, path in (("--out", opts.out), ("--confidence", opts.confidence), ("--dist", opts.dist)):
        if path is not None:  # writable before the work (the folder is created now), not after it
            if os.path.isdir(path):
                raise ValueError(f"{flag} {path!r} is a folder; give a file path")
            check_writable_dir(os.path.dirname(os.path.abspath(path)), flag)
            check_writable(path, flag)
    _check_multires(opts)


def _check_multires(opts: RerankOptions) -> None:
    """``--multires`` settings: a known variant, counts >= 1, a finite beta >= 0, dense rows, a Wasserstein flow."""
    if opts.multires is None:
        return
    if opts.multires not in MULTIRES:
        raise ValueError(f"--multires must be one of {list(MULTIRES)}, got {opts.multires!r}")
    for flag, v in (("--clusters", opts.clusters), ("--refine", opts.refine)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"{flag} must be an integer, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{flag} must be >= 1, got {v}")
    if isinstance(opts.beta, bool) or not isinstance(opts.beta, int | float | np.floating | np.integer):
        raise TypeError(f"--beta must be a real number, got {type(opts.beta).__name__}")
    if not (np.isfinite(opts.beta) and opts.beta >= 0):
        raise ValueError(f"--beta must be finite and >= 0, got {opts.beta}")
    if opts.embeddings is None:
        raise ValueError("--multires needs --embeddings (it clusters the dense rows of each pool)")
    for flag, val in (
        ("--projection", opts.projection),
        ("--confidence", opts.confidence),
        ("--mode", opts.mode),
        ("--alpha-prox", opts.alpha_prox),
    ):
        if val is not None:
            raise ValueError(
                f"--multires does not take {flag}: both of its stages are Wasserstein flows on the cosine "
                "geometry of their own operating points (SPEC A.8)"
            )


def _check_confidence(opts: RerankOptions, cfg) -> None:
    """``--confidence`` reads the duals of a transport term: refuse a mode without one."""
    if opts.confidence and cfg.mode not in ("wasserstein", "bregman"):
        raise ValueError(
            f"--confidence needs a transport term (mode wasserstein or bregman), not mode {cfg.mode!r}: "
            "the dual potentials of the other modes are 0"
        )


def job_config(opts: RerankOptions) -> JKOConfig:
    """Return the job's config: the operating point (a name runs on ``grad="implicit"``), then the overrides.

    ``opts.grad`` always wins; ``opts.mode`` and ``opts.alpha_prox`` change their fields.
    """
    cfg = opts.config if isinstance(opts.config, JKOConfig) else batch_config(opts.config)
    for field in ("grad", "mode", "alpha_prox"):
        val = getattr(opts, field)
        if val is not None:
            cfg = cfg.replace(**{field: val})
    return cfg


def warm_rerank_kernels(say, multires: bool = False, grad: str | None = None) -> None:
    """Warm up only the kernels a chunk uses, not the package.

    The energy, then the JKO batch core (``rerank_batch``), or with ``multires`` the MR/SAM
    flow instead -- it never calls the batch core -- on float32 rows (the stream's gathered
    embeddings) and the job's gradient path ``grad`` only (every path when None).
    """
    # a cold cache on two or more cores: a child compiles the energy and the pool geometry (or the clustering)
    # while this process compiles the flow (the longest compile), then the batch (or MR/SAM) kernel
    child = None
    if not multires:
        from jkofast.jko.solver import _rows_ahead

        child = _rows_ahead()
    elif grad is not None:
        from jkofast.jko.multires import _cluster_ahead

        child = _cluster_ahead()
    steps = [("jkofast.jko.energy", lambda m: WARMUPS["energy"]())]
    if not multires:
        steps.append(("jkofast.jko.solver", lambda m: m._warm_batch(child)))
    elif grad is None:
        steps.append(("jkofast.jko.multires", lambda m: WARMUPS["multires"]()))
    else:
        steps.append(("jkofast.jko.multires", lambda m: m._warm_path(np.float32, grad, child)))
    if child is not None:  # the flow first; the energy then loads what the child compiled
        steps.reverse()
    try:
        for mod, warm in steps:
            try:
                warm(importlib.import_module(mod))
            except Exception as exc:  # a broken warm-up must not stop a batch job: kernels compile lazily
                say(f"warm-up of {mod} failed ({type(exc).__name__}: {exc}); continuing")
    finally:
        if child is not None:
            child.close()


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class _UserScores:
    """The job's user rerank scores, per chunk: loaded whole, streamed in the pool file's query order, or none."""

    def __init__(self, opts: RerankOptions):
        self.all = self.stream = None
        if opts.scores and opts.scores_in_memory:
            self.all = read_scores(opts.scores)
        elif opts.scores:
            self.stream = ScoreStream(opts.scores)

    def for_chunk(self, chunk):
        """Return the scores of a chunk's queries (advances the stream, even for a finished chunk)."""
        if self.all is not None or self.stream is None:
            return self.all
        out = {}
        for qid in chunk.qids:
            block = self.stream.take(qid)
            if block is not None:
                out[qid] = block
        return out

    @property
    def missing(self) -> int:
        """Queries without scores in a streamed score file."""
        return self.stream.missing if self.stream is not None else 0


class _InputChecks:
    """Reports on the pool file as it is read: malformed lines, split queries (counted in the summary)."""

    def __init__(self, pools: str, summ: RerankSummary, say):
        self.pools, self.summ, self.say = pools, summ, say
        self.seen: set = set()  # query ids of earlier blocks: a reappearing id is a split query

    def malformed(self, ln, msg) -> None:
        self.summ.malformed_lines += 1
        self.say(f"{self.pools}:{ln}: malformed line skipped: {msg}")

    def split(self, chunk) -> None:
        for q in chunk.qids:
            if q in self.seen:
                self.summ.split_queries += 1
                self.say(
                    f"query {q!r} reappears after other queries in {self.pools} (its lines "
                    "are not contiguous): each block is reranked and written separately"
                )
            else:
                self.seen.add(q)


def _stream_chunks(opts, stages, store, scores, summ, say, tick) -> float | None:
    """Cut the pool file into chunks, skip the finished ones, submit the others; return when the first was."""
    checks = _InputChecks(opts.pools, summ, say)
    t_first = None
    for ci, chunk in enumerate(iter_chunks(opts.pools, opts.chunk_size, checks.malformed)):
        summ.queries += len(chunk)
        checks.split(chunk)
        scores_c = scores.for_chunk(chunk)  # advances the score stream even for finished chunks
        if store.add(ci):
            summ.skipped_finished += len(chunk)
            tick(len(chunk))
            continue
        if t_first is None:
            t_first = time.perf_counter()
        stages.submit_chunk(ci, chunk, scores_c)
    stages.flush()
    return t_first


def _no_progress(n: int) -> None:
    pass


def rerank_stream(
    opts: RerankOptions,
    *,
    report: Callable[[str], None] | None = None,
    progress: Callable[[int], None] | None = None,
    stages=None,
) -> RerankSummary:
    """Rerank every query of ``opts.pools`` with JKO-RAG; write ``opts.out`` (and ``opts.dist``).

    The pool file is cut into chunks of ``opts.chunk_size`` queries; each finished chunk is
    written atomically into ``OUT.parts/`` (:mod:`jkofast.jko._parts`) and the output is the
    concatenation of the parts in input order, so a job run again resumes from its finished
    chunks, byte-identical to an uninterrupted run.

    Parameters
    ----------
    opts : RerankOptions
        The job.  A named operating point runs on ``grad="implicit"`` unless ``opts.grad`` says
        otherwise (``"unrolled"``: the published path).
    report : callable, optional
        ``report(message)`` for malformed lines, split queries, passed-through queries and a
        failed warm-up (default: a line on stderr).
    progress : callable, optional
        ``progress(n)``: called with 0 when the streaming starts, then with the number of
        queries of each finished or skipped chunk.
    stages : optional
        Where the chunks run: :class:`LocalStages` (default: three overlapping stages in this
        process) or :class:`jkofast.distributed.tasks.ClientStages` (tasks on a Dask cluster;
        :func:`jkofast.distributed.rerank.rerank_on_dask` sets them up).  The output is the
        same bytes either way, and the parts of either resume the other.

    Returns
    -------
    RerankSummary
        Counts over the input (``missing_scores``: queries without user scores in a streamed
        score file; ``unconverged_*``: capped inner steps summed over the job), the gradient
        path that ran and timings.

    Raises
    ------
    ValueError
        Bad settings, a parts folder of another job, a malformed score file, a repeated
        geometry id.
    FileNotFoundError
        A missing input.
    RuntimeError
        A chunk failed on the cluster (e.g. its workers kept dying); the finished parts are
        kept, and the same call resumes from them.
    """
    say = report or _stderr
    check_options(opts)
    cfg = job_config(opts)
    _check_confidence(opts, cfg)
    t0 = time.perf_counter()
    summ = RerankSummary(jko_config=cfg, grad_path=gradient_path(cfg))
    stages = stages if stages is not None else LocalStages()
    stages.load(opts)
    scores = _UserScores(opts)
    stages.warm(say)
    for extra in (opts.dist, opts.confidence):  # like --out's folder: created now, not found missing after the work
        if extra:
            os.makedirs(os.path.dirname(os.path.abspath(extra)), exist_ok=True)
    store = ChunkStore(opts, cfg)
    tick = progress or _no_progress
    tick(0)
    with contextlib.ExitStack() as stack:
        stages.start(stack, cfg, opts, store, summ, say, tick)
        t_first = _stream_chunks(opts, stages, store, scores, summ, say, tick)
    summ.compute_s = time.perf_counter() - t_first if t_first is not None else 0.0
    summ.missing_scores = scores.missing
    store.concat(opts.out, opts.dist, opts.confidence)
    if not opts.keep_parts:
        store.remove()
    summ.chunks = len(store.bases)
    summ.unconverged_queries = int(stages.n_unconv[0])
    summ.unconverged_inner_steps = (int(stages.n_unconv[1]), int(stages.n_unconv[2]))
    summ.wall_s = time.perf_counter() - t0
    return summ
