"""Streaming, resumable JKO-RAG reranking of a pool file (the library behind ``jkofast rerank``).

Input: a TREC run (``qid Q0 docid rank score tag``) or a 3-column file (``qid docid score``);
each query's lines must be contiguous (their order is the pool order).  The file is read by
the eval wing's block reader (:func:`jkofast.eval.runio.iter_chunks`) and cut into chunks of
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
import hashlib
import json
import os
import socket
import sys
import threading
import time
import uuid
import warnings
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from operator import itemgetter

import numpy as np

from jkofast.eval.runio import Chunk, ScoreStream, atomic_open, format_run, iter_chunks, read_scores

__all__ = [
    "DenseGeometry",
    "RerankOptions",
    "RerankSummary",
    "TfidfGeometry",
    "format_lines",
    "pack_chunk",
    "rerank_chunk",
    "rerank_chunk_task",
    "rerank_stream",
    "unpack_chunk",
    "write_part",
]

FMT_VERSION = 1  # of the chunk store (manifest + parts)


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
        ``mode``, ``alpha_prox`` and ``grad`` override its fields when given.
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
    fail_after_chunks : int, optional
        Test hook: raise ``RuntimeError`` before processing chunk N (an interruption).
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
    fail_after_chunks: int | None = None


@dataclasses.dataclass
class RerankSummary:
    """What a :func:`rerank_stream` job did (counts over the whole input)."""

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


class _Geometry:
    """Document rows by id; subclasses set ``row`` (doc id -> row) and define ``gather``."""

    row: dict

    def rows(self, docs) -> np.ndarray:
        """Row of every doc id, -1 for an unknown one."""
        return _map_rows(self.row, docs)


class DenseGeometry(_Geometry):
    """Dense document rows (cosine geometry): ``embeddings.npy`` with one doc id per row in ``ids``.

    ``projection``: a learned metric's ``.npz`` (NM-JKO): the cost comes from the projected rows.
    """

    def __init__(self, npy: str, ids_path: str | None, projection: str | None = None):
        from jkofast.pools.candidates import load_embeddings

        if ids_path is None:
            raise ValueError("--embeddings needs --ids (one doc id per row)")
        self.emb, ids = load_embeddings(npy, ids_path)
        self.row = _id_rows(ids, ids_path)
        self.W = None
        if projection:
            from jkofast.jko.metric import load_metric

            self.W = load_metric(projection, d=self.emb.shape[1]).W

    def gather(self, rows):
        """``rerank_batch`` geometry keywords of the given rows."""
        r = np.asarray(rows, np.int64)
        out = {"embeddings": np.ascontiguousarray(self.emb[r], dtype=np.float32)}
        if self.W is not None:
            out["projection"] = self.W
        return out


class TfidfGeometry(_Geometry):
    """TF-IDF document rows (sparse cosine geometry) of a BEIR corpus (title + text)."""

    def __init__(self, corpus: str):
        from jkofast.datasets.beir import read_corpus
        from jkofast.sparse.index import TfidfIndex

        ids, titles, texts = read_corpus(corpus)
        idx = TfidfIndex().fit([(t + " " + x).strip() for t, x in zip(titles, texts, strict=True)])
        self.X = idx.doc_matrix().tocsr()
        self.row = _id_rows(ids, corpus)

    def gather(self, rows):
        """``rerank_batch`` geometry keywords of the given rows."""
        return {"csr": self.X[np.asarray(rows, np.int64)]}


# ---------------------------------------------------------------------------------------------
# per-chunk work: prepare (calling thread) | solve (kernel thread) | finish (writer thread)
# ---------------------------------------------------------------------------------------------
def align_chunk_scores(scores: dict, qids, off, docs) -> np.ndarray:
    """Return float32 user scores aligned with a chunk's lines.

    As :func:`jkofast.jko.energy.align_scores`: a line without a score gets its query's
    smallest score, a query without any gets zeros.
    """
    offl = off.tolist()
    out = np.zeros(offl[-1] if offl else 0, np.float32)
    for i, qid in enumerate(qids):
        sq = scores.get(qid)
        if not sq:
            continue
        a, b = offl[i], offl[i + 1]
        vals = list(map(sq.get, docs[a:b]))
        if None in vals:
            present = [x for x in vals if x is not None]
            if not present:
                continue
            floor = min(present)
            vals = [floor if x is None else x for x in vals]
        out[a:b] = vals
    return out


def format_lines(qids, off, docs, sstr, p, ok, k: int, tag: str) -> str:
    r"""Return the TREC lines of a reranked chunk.

    Query ``i`` (lines ``off[i]:off[i+1]``) is written by descending ``p`` (ties in input
    order) with ``p`` as ``%.9g`` when ``ok[i]``, else unchanged: input order and input score
    strings ``sstr``; ``k > 0`` keeps the first ``k`` lines of each query.  Byte-identical to
    ``f"{qid} Q0 {doc} {rank} {p:.9g} {tag}\\n"`` per line.
    """
    if len(qids) == 0:
        return ""
    lens = np.diff(off)
    n = int(off[-1])
    offl = off.tolist()
    order = np.arange(n)
    for i in np.flatnonzero(ok).tolist():
        a, b = offl[i], offl[i + 1]
        order[a:b] = np.argsort(-p[a:b], kind="stable") + a  # ties -> input order
    if k > 0:
        kk = np.minimum(lens, k)
        keep = np.arange(n) - np.repeat(off[:-1], lens) < np.repeat(kk, lens)
        sel = order[keep]
    else:
        kk, sel = lens, order
    m = sel.size
    if m == 0:
        return ""
    sel_l = sel.tolist()
    docs_sel = [docs[sel_l[0]]] if m == 1 else itemgetter(*sel_l)(docs)
    if ok.all():
        scores = p[sel].tolist()
    else:
        kept_ok = np.repeat(ok, kk)
        score = np.empty(m, object)
        i_ok = np.flatnonzero(kept_ok)
        i_bad = np.flatnonzero(~kept_ok)
        score[i_ok] = p[sel[i_ok]].tolist()
        score[i_bad] = [sstr[j] for j in sel[i_bad].tolist()]
        scores = score.tolist()
    off_k = np.zeros(len(qids) + 1, np.int64)
    np.cumsum(kk, out=off_k[1:])
    return format_run(qids, off_k, docs_sel, scores, tag, score_format="%.9g", verbatim=~ok)


class _Prepared:
    """A chunk after the Python-side preparation, ready for the kernel stage."""

    __slots__ = ("bad", "chunk", "line_ok", "off_ok", "ok", "ok_before", "rows", "rr", "run_s")


def prepare_chunk(chunk, geom, user_scores, cfg, opts) -> _Prepared:
    """Map doc ids to geometry rows, decide the pass-throughs (unknown doc, empty pool), align user scores.

    Pure Python/numpy: no Numba launch here, so the kernel thread is the only thread that runs
    parallel kernels (the workqueue threading layer forbids concurrent launches).
    """
    pr = _Prepared()
    pr.chunk = chunk
    qids, off = chunk.qids, chunk.off
    lens = np.diff(off)
    rows = geom.rows(chunk.docs)
    bad: dict = {}
    unknown = rows < 0
    if unknown.any():
        first = np.flatnonzero(unknown)
        for qi, j in zip((np.searchsorted(off, first, side="right") - 1).tolist(), first.tolist(), strict=True):
            if qi not in bad:
                bad[qi] = f"document {chunk.docs[j]!r} not in the geometry"
    for qi in np.flatnonzero(lens == 0).tolist():
        bad.setdefault(qi, "empty pool")
    ok = np.ones(len(qids), bool)
    ok[list(bad)] = False
    pr.bad, pr.ok = bad, ok
    pr.line_ok = line_ok = None if not bad else np.repeat(ok, lens)
    ok_q = np.flatnonzero(ok)
    off_ok = np.zeros(ok_q.size + 1, np.int64)
    np.cumsum(lens[ok_q], out=off_ok[1:])
    pr.off_ok = off_ok
    pr.rows = rows if line_ok is None else rows[line_ok]
    pr.run_s = pr.rr = None
    if ok_q.size:
        pr.run_s = chunk.vals if line_ok is None else chunk.vals[line_ok]
        if user_scores is not None:
            ok_ids = qids if line_ok is None else [qids[i] for i in ok_q.tolist()]
            ok_docs = (
                chunk.docs if line_ok is None else [d for d, o in zip(chunk.docs, line_ok.tolist(), strict=True) if o]
            )
            pr.rr = align_chunk_scores(user_scores, ok_ids, off_ok, ok_docs)
    return pr


def energy_p0(pr: _Prepared, cfg, opts):
    """Return ``(energy, p0)`` of the chunk's rerankable queries.

    ``r`` = the run score's min-max (blended with the user scores' when given), ``E = -r``,
    ``p0 = softmax_{tau0}(r)``.
    """
    from jkofast.jko.energy import blend, softmax_tau

    if pr.rr is not None:
        r = blend(pr.off_ok, dense=pr.run_s, rerank=pr.rr.astype(np.float64), alpha=opts.alpha, gamma=opts.gamma)
    else:
        r = blend(pr.off_ok, dense=pr.run_s, alpha=1.0)
    return -r, softmax_tau(r, pr.off_ok, cfg.tau0)


def solve_chunk(pr: _Prepared, geom, cfg, opts):
    """Run the kernel stage: energy/p0, the geometry rows' gather, ``rerank_batch`` (GIL released)."""
    from jkofast.jko.solver import rerank_batch

    if pr.run_s is None:
        return None
    energy, p0 = energy_p0(pr, cfg, opts)
    # no per-chunk ConvergenceWarning: the counts are summed over the run and reported once
    return rerank_batch(
        energy,
        p0,
        pr.off_ok,
        config=cfg,
        n_threads=opts.threads,
        warn_unconverged=False,
        return_duals=bool(opts.confidence),
        **geom.gather(pr.rows),
    )


def _confidence_text(pr: _Prepared, res, ok) -> str:
    """Return the chunk's confidence lines (no header): the three signals of each reranked query, else ``nan``."""
    from jkofast.jko.confidence import dual_confidence, format_confidence_lines

    nq = len(pr.chunk.qids)
    cols = {c: np.full(nq, np.nan) for c in ("conf_dual", "conf_softmax", "conf_margin")}
    if res is not None:
        logits = pr.rr.astype(np.float64) if pr.rr is not None else np.asarray(pr.run_s, np.float64)
        sig = dual_confidence(res, logits, n_threads=1)
        ok_q = np.flatnonzero(pr.ok_before)
        good = np.asarray(sig.status) == 0
        for c in cols:
            cols[c][ok_q[good]] = np.asarray(getattr(sig, c))[good]
    for c in cols:
        cols[c][~ok] = np.nan
    return format_confidence_lines(pr.chunk.qids, cols, header=False)


def finish_chunk(pr: _Prepared, res, opts, say):
    """Turn solver statuses into pass-throughs; return (TREC text, dist arrays, number passed through).

    With ``opts.confidence`` the dist dict also carries the chunk's confidence lines (``"_conf"``).
    """
    chunk, bad, ok = pr.chunk, pr.bad, pr.ok
    pr.ok_before = ok.copy()
    qids, off = chunk.qids, chunk.off
    lens = np.diff(off)
    p = np.full(int(off[-1]), np.nan, np.float64)
    if res is not None:
        ok_q = np.flatnonzero(ok)
        status = np.asarray(res.status)
        errors = getattr(res, "errors", {}) or {}
        for j in np.flatnonzero(status != 0).tolist():
            qi = int(ok_q[j])
            bad[qi] = errors.get(j, f"solver status {int(status[j])}")
            ok[qi] = False
        p_ok = np.asarray(res.p, np.float64)
        if pr.line_ok is None:
            p = p_ok
        else:
            p[pr.line_ok] = p_ok
    for qi in sorted(bad):
        say(f"query {qids[qi]!r} passed through unchanged: {bad[qi]}")
    text = format_lines(qids, off, chunk.docs, chunk.sstr, p, ok, opts.k, opts.tag)
    pf = p.astype(np.float32)
    if bad:
        pf[np.repeat(~ok, lens)] = np.nan
    dist = {
        "query_ids": np.array(qids, dtype=str),
        "sizes": lens.astype(np.int64),
        "p": pf,
        "status": (~ok).astype(np.int32),
    }
    if opts.confidence:
        dist["_conf"] = _confidence_text(pr, res, ok)
    return text, dist, len(bad)


def process_chunk(chunk, geom, user_scores, cfg, opts, say):
    """Rerank one :class:`jkofast.eval.runio.Chunk`; return (TREC text, dist arrays, number passed through)."""
    pr = prepare_chunk(chunk, geom, user_scores, cfg, opts)
    return finish_chunk(pr, solve_chunk(pr, geom, cfg, opts), opts, say)


# ---------------------------------------------------------------------------------------------
# the chunk store: OUT.parts/{manifest.json, chunk_NNNNNN.trec, chunk_NNNNNN.npz}
# ---------------------------------------------------------------------------------------------
def _fingerprint(opts: RerankOptions) -> dict:
    st = os.stat(opts.pools)
    d = {
        "version": FMT_VERSION,
        "pools": os.path.abspath(opts.pools),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "config": opts.config if isinstance(opts.config, str) else dataclasses.asdict(opts.config),
        "chunk_size": opts.chunk_size,
        "k": opts.k,
        "tag": opts.tag,
        "embeddings": opts.embeddings,
        "ids": opts.ids,
        "tfidf_corpus": opts.tfidf_corpus,
        "scores": opts.scores,
        "scores_in_memory": opts.scores_in_memory,
        "grad": opts.grad,
        "mode": opts.mode,
        "alpha_prox": opts.alpha_prox,
        "alpha": opts.alpha,
        "gamma": opts.gamma,
        "dist": bool(opts.dist),
    }
    if opts.confidence or opts.projection:  # absent keys keep the hash of older manifests
        d["confidence"] = bool(opts.confidence)
        d["projection"] = os.path.abspath(opts.projection) if opts.projection else None
    d["hash"] = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()
    return d


class _ChunkStore:
    """Finished chunks as atomic part files; a manifest ties them to the input and settings."""

    def __init__(self, opts: RerankOptions):
        self.dir = opts.out + ".parts"
        self.dist = bool(opts.dist)
        self.conf = bool(opts.confidence)
        self.bases: list[str] = []
        os.makedirs(self.dir, exist_ok=True)
        fp = _fingerprint(opts)
        self.manifest = os.path.join(self.dir, "manifest.json")
        if os.path.exists(self.manifest):
            with open(self.manifest, encoding="utf-8") as fh:
                old = json.load(fh)
            if old.get("hash") != fp["hash"]:
                raise ValueError(f"{self.dir} holds parts of a run with other settings/input; remove it to start over")
        else:
            with atomic_open(self.manifest) as fh:
                fh.write(json.dumps(fp, indent=1).encode("utf-8"))

    def add(self, ci: int) -> bool:
        """Register chunk ``ci`` (in order); True when it is finished already."""
        base = os.path.join(self.dir, f"chunk_{ci:06d}")
        self.bases.append(base)
        return (
            os.path.exists(base + ".trec")
            and (not self.dist or os.path.exists(base + ".npz"))
            and (not self.conf or os.path.exists(base + ".conf"))
        )

    def write(self, ci: int, text: str, dist: dict) -> None:
        """Store chunk ``ci``; its ``.trec`` is written last: it marks the chunk finished."""
        conf = dist.pop("_conf", None)
        write_part(self.dir, ci, text, dist if self.dist else None, conf)

    def concat(self, out: str, dist: str | None, confidence: str | None = None) -> None:
        """Write the final output (and dist, confidence) from the parts, atomically."""
        _concat_parts(out, [b + ".trec" for b in self.bases])
        if dist:
            _write_npz_streaming(dist, [b + ".npz" for b in self.bases])
        if confidence:
            from jkofast.jko.confidence import format_confidence_lines

            head = format_confidence_lines([], {c: [] for c in ("conf_dual", "conf_softmax", "conf_margin")})
            _concat_parts(confidence, [b + ".conf" for b in self.bases], head.encode("utf-8"))

    def remove(self) -> None:
        """Delete the parts, the manifest and the folder."""
        for base in self.bases:
            for ext in (".trec", ".npz", ".conf"):
                if os.path.exists(base + ext):
                    os.remove(base + ext)
        os.remove(self.manifest)
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def _concat_parts(path: str, parts: list, head: bytes = b"") -> None:
    """Write ``head`` then the bytes of every part file, in order, to ``path`` (atomically)."""
    with atomic_open(path, fsync=False) as dst:
        dst.write(head)
        for part in parts:
            with open(part, "rb") as fh:
                while buf := fh.read(1 << 20):
                    dst.write(buf)


def write_part(parts_dir: str, ci: int, text: str, dist: dict | None, conf: str | None = None) -> None:
    """Write chunk ``ci``'s part files atomically: ``.npz`` / ``.conf`` (when given) first, then the ``.trec``.

    The ``.trec`` marks the chunk finished; a chunk written twice (a retried task) is replaced
    by identical bytes.
    """
    base = os.path.join(parts_dir, f"chunk_{ci:06d}")
    if conf is not None:
        with atomic_open(base + ".conf") as fh:
            fh.write(conf.encode("utf-8"))
    if dist is not None:
        dist = {k: v for k, v in dist.items() if k != "_conf"}
        with atomic_open(base + ".npz") as fh:
            np.savez(fh, **dist)
    with atomic_open(base + ".trec") as fh:
        fh.write(text.encode("utf-8"))


def _write_npz_streaming(path: str, parts: list[str]) -> None:
    """Concatenate per-chunk npz parts into one .npz without holding all of p in memory."""
    sizes, qids, status = [], [], []
    n_total = 0
    for pth in parts:
        with np.load(pth) as z:
            sizes.append(z["sizes"])
            qids.append(z["query_ids"])
            status.append(z["status"])
            n_total += int(z["sizes"].sum())
    sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    offsets = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    with atomic_open(path, fsync=False) as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in (
            ("query_ids", np.concatenate(qids) if qids else np.zeros(0, str)),
            ("offsets", offsets),
            ("status", np.concatenate(status) if status else np.zeros(0, np.int32)),
        ):
            with zf.open(name + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(arr))
        with zf.open("p.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_2_0(
                fh,
                {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False, "shape": (n_total,)},
            )
            for pth in parts:
                with np.load(pth) as z:
                    fh.write(np.ascontiguousarray(z["p"], dtype="<f4").tobytes())


class _Stages:
    """The kernel and writer stages behind the calling thread (which parses and prepares).

    Three stages overlap: the caller prepares chunk i+1 while the kernel thread solves chunk i
    (``rerank_batch`` releases the GIL; the only thread launching Numba kernels) and the writer
    thread formats and writes chunk i-1.  At most one chunk waits in each stage.
    """

    def __init__(self, kex, wex, geom, cfg, opts, store, summ, say, tick):
        self.kex, self.wex, self.geom, self.cfg, self.opts = kex, wex, geom, cfg, opts
        self.store, self.summ, self.say, self.tick = store, summ, say, tick
        self.k_pending = None  # (ci, prepared, kernel future)
        self.w_pending = None  # writer future
        self.n_unconv = np.zeros(3, np.int64)  # queries, Sinkhorn-capped inner steps, CG-capped inner steps

    def submit(self, ci: int | None, pr: _Prepared | None) -> None:
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


# ---------------------------------------------------------------------------------------------
# chunks as tasks (a Dask client): the worker side, then the client side
# ---------------------------------------------------------------------------------------------
_WORKER_GEOMETRY: dict = {}  # per process: the geometry of the last job, loaded once (memory-mapped rows)
_WORKER_LOCK = threading.Lock()  # one kernel launch at a time per process (workqueue layer), one geometry load
_WORKER_WARM: list = []


def _load_geometry(opts: RerankOptions) -> _Geometry:
    if opts.embeddings:
        return DenseGeometry(opts.embeddings, opts.ids, opts.projection)
    return TfidfGeometry(opts.tfidf_corpus)


def _worker_geometry(opts: RerankOptions) -> _Geometry:
    """Return the job's geometry in this process, loaded on first use and kept for the next chunks."""
    paths = (opts.embeddings, opts.ids, opts.tfidf_corpus, opts.projection)
    key = tuple((p, os.stat(p).st_mtime_ns) if p else None for p in paths)
    geom = _WORKER_GEOMETRY.get(key)
    if geom is None:
        _WORKER_GEOMETRY.clear()  # one job's geometry at a time
        geom = _WORKER_GEOMETRY[key] = _load_geometry(opts)
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
    from jkofast._threads import numba_threads

    with _WORKER_LOCK:
        geom = _worker_geometry(opts)
        if not _WORKER_WARM:
            _warm_needed(say)
            _WORKER_WARM.append(True)
        pr = prepare_chunk(chunk, geom, user_scores, cfg, opts)
        with numba_threads(opts.threads):  # the energy kernels too: the worker's thread budget
            res = solve_chunk(pr, geom, cfg, opts)
    unconv = (0, 0, 0)
    if res is not None and res.unconverged is not None:
        capped = res.unconverged.sum(axis=0)
        unconv = (int(np.count_nonzero(res.unconverged.any(axis=1))), int(capped[0]), int(capped[1]))
    text, dist, nbad = finish_chunk(pr, res, opts, say)
    return text, dist, nbad, unconv


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):  # not inside a Dask worker
        return f"{socket.gethostname()}:{os.getpid()}"


def rerank_chunk_task(opts: RerankOptions, cfg, ci: int, packed: tuple, user_scores) -> dict:
    """Rerank chunk ``ci`` (packed by :func:`pack_chunk`) and write its part atomically: one Dask task.

    ``opts`` carries absolute paths and ``opts.threads`` (this worker's Numba threads).
    Returns the chunk's counts, its messages (in order) and this worker's name and peak RSS.
    """
    import resource

    messages: list = []
    text, dist, nbad, unconv = rerank_chunk(opts, cfg, unpack_chunk(packed), user_scores, messages.append)
    write_part(opts.out + ".parts", ci, text, dist if opts.dist else None, dist.get("_conf"))
    return {
        "ci": ci,
        "queries": len(packed[0]),
        "passed": nbad,
        "unconverged": unconv,
        "messages": messages,
        "worker": _worker_name(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def _client_checks(opts: RerankOptions) -> None:
    """Check what the client can of the geometry without loading it (the workers load it)."""
    if opts.embeddings and opts.ids is None:
        raise ValueError("--embeddings needs --ids (one doc id per row)")
    for flag, path in (("--embeddings", opts.embeddings), ("--ids", opts.ids), ("--tfidf-corpus", opts.tfidf_corpus)):
        if path and not os.path.isfile(path):
            raise FileNotFoundError(f"{flag} file not found: {path}")


def _worker_options(opts: RerankOptions) -> RerankOptions:
    """Return the options a task needs, with absolute paths (a worker's working folder is its own)."""
    fields = ("pools", "out", "embeddings", "ids", "tfidf_corpus", "dist", "confidence", "projection")
    absp = {f: os.path.abspath(getattr(opts, f)) for f in fields if getattr(opts, f)}
    return dataclasses.replace(opts, **absp, scores=None)


class _ClientStages:
    """Chunks as tasks on a Dask client, at most ``window`` in flight; results collected as they finish.

    Messages (passed-through queries) are reported in input order; a task that fails (e.g.
    its workers kept dying: Dask's ``allowed-failures``) cancels the rest and raises -- the
    finished parts stay for a resume.
    """

    def __init__(self, client, cfg, opts, store, summ, say, tick):
        from distributed import as_completed

        self.client, self.cfg, self.store, self.summ, self.say, self.tick = client, cfg, store, summ, say, tick
        self.wopts = _worker_options(opts)
        self.window = max(2, 2 * sum(client.nthreads().values()))
        self.ac = as_completed()
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


# ---------------------------------------------------------------------------------------------
# the job
# ---------------------------------------------------------------------------------------------
def _check(opts: RerankOptions) -> None:
    """Reject bad settings before any part is written (messages name the command-line options)."""
    from jkofast._threads import resolve_threads

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
    for flag, path in (("--confidence", opts.confidence), ("--dist", opts.dist)):
        if path is not None and os.path.isdir(path):
            raise ValueError(f"{flag} {path!r} is a folder; give a file path")


def _check_confidence(opts: RerankOptions, cfg) -> None:
    """``--confidence`` reads the duals of a transport term: refuse a mode without one."""
    if opts.confidence and cfg.mode not in ("wasserstein", "bregman"):
        raise ValueError(
            f"--confidence needs a transport term (mode wasserstein or bregman), not mode {cfg.mode!r}: "
            "the dual potentials of the other modes are 0"
        )


def _resolve_config(opts: RerankOptions):
    from jkofast.jko.solver import JKOConfig, operating_point

    cfg = opts.config if isinstance(opts.config, JKOConfig) else operating_point(opts.config)
    for field in ("grad", "mode", "alpha_prox"):
        val = getattr(opts, field)
        if val is not None:
            cfg = cfg.replace(**{field: val})
    return cfg


def _warm_needed(say) -> None:
    """Warm up only the modules a chunk uses (energy + the JKO core), not the whole package."""
    import importlib

    from jkofast._numba import WARMUPS

    for mod, name in (("jkofast.jko.energy", "energy"), ("jkofast.jko.solver", "jko")):
        try:
            importlib.import_module(mod)
            if name in WARMUPS:
                WARMUPS[name]()
        except Exception as exc:  # a broken warm-up must not stop a batch job: kernels compile lazily
            say(f"warm-up of {mod} failed ({type(exc).__name__}: {exc}); continuing")


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rerank_stream(
    opts: RerankOptions,
    *,
    report: Callable[[str], None] | None = None,
    progress: Callable[[int], None] | None = None,
    client=None,
) -> RerankSummary:
    """Rerank every query of ``opts.pools`` with JKO-RAG; write ``opts.out`` (and ``opts.dist``).

    With a Dask ``client`` the calling process parses the input into the same chunks and each
    chunk becomes a task: a worker prepares it, runs ``rerank_batch`` with ``opts.threads``
    Numba threads and writes its part atomically into ``OUT.parts/`` (a folder the client and
    the workers share); the client concatenates the parts in input order.  The output is
    byte-identical to the run without a client, and the parts of either resume the other.

    Parameters
    ----------
    opts : RerankOptions
        The job.
    report : callable, optional
        ``report(message)`` for malformed lines, split queries, passed-through queries and a
        failed warm-up (default: a line on stderr).
    progress : callable, optional
        ``progress(n)``: called with 0 when the streaming starts, then with the number of
        queries of each finished or skipped chunk.
    client : dask.distributed.Client, optional
        Run the chunks as tasks on this client's workers (jkofast installed there, one task
        thread per worker; see :mod:`jkofast.distributed`).  A worker lost mid-chunk costs a
        retry of that chunk (Dask reschedules it); finished chunks are never redone.

    Returns
    -------
    RerankSummary
        Counts over the input (``missing_scores``: queries without user scores in a streamed
        score file; ``unconverged_*``: capped inner steps summed over the job) and timings.

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
    _check(opts)
    cfg = _resolve_config(opts)
    _check_confidence(opts, cfg)
    t0 = time.perf_counter()
    summ = RerankSummary(jko_config=cfg)
    seen_q: set = set()  # query ids of earlier blocks: a reappearing id is a split query

    def check_split(chunk):
        for q in chunk.qids:
            if q in seen_q:
                summ.split_queries += 1
                say(
                    f"query {q!r} reappears after other queries in {opts.pools} (its lines "
                    "are not contiguous): each block is reranked and written separately"
                )
            else:
                seen_q.add(q)

    def malformed(ln, msg):
        summ.malformed_lines += 1
        say(f"{opts.pools}:{ln}: malformed line skipped: {msg}")

    geom = _client_checks(opts) if client is not None else _load_geometry(opts)
    all_scores = stream = None
    if opts.scores and opts.scores_in_memory:
        all_scores = read_scores(opts.scores)
    elif opts.scores:
        stream = ScoreStream(opts.scores)

    def chunk_scores(chunk):
        if all_scores is not None and client is not None:  # a task gets its chunk's queries only
            return {q: all_scores[q] for q in chunk.qids if q in all_scores}
        if all_scores is not None or stream is None:
            return all_scores
        out = {}
        for qid in chunk.qids:
            block = stream.take(qid)
            if block is not None:
                out[qid] = block
        return out

    if client is None:
        _warm_needed(say)  # compile / load the kernels a chunk needs before the worker starts
    for extra in (opts.dist, opts.confidence):  # like --out's folder: created now, not found missing after the work
        if extra:
            os.makedirs(os.path.dirname(os.path.abspath(extra)), exist_ok=True)
    store = _ChunkStore(opts)
    tick = progress or (lambda n: None)
    tick(0)
    t_first = None
    with contextlib.ExitStack() as stack:
        if client is None:
            kex = stack.enter_context(ThreadPoolExecutor(max_workers=1))
            wex = stack.enter_context(ThreadPoolExecutor(max_workers=1))
            stages = _Stages(kex, wex, geom, cfg, opts, store, summ, say, tick)
        else:
            stages = _ClientStages(client, cfg, opts, store, summ, say, tick)
        for ci, chunk in enumerate(iter_chunks(opts.pools, opts.chunk_size, malformed)):
            summ.queries += len(chunk)
            check_split(chunk)
            scores_c = chunk_scores(chunk)  # advances the score stream even for finished chunks
            if store.add(ci):
                summ.skipped_finished += len(chunk)
                tick(len(chunk))
                continue
            if opts.fail_after_chunks is not None and ci >= opts.fail_after_chunks:
                stages.flush()
                raise RuntimeError(f"injected failure before chunk {ci}")
            if t_first is None:
                t_first = time.perf_counter()
            if client is None:
                stages.submit(ci, prepare_chunk(chunk, geom, scores_c, cfg, opts))
            else:
                stages.submit_chunk(ci, chunk, scores_c)
        stages.flush()
    summ.compute_s = time.perf_counter() - t_first if t_first is not None else 0.0
    summ.missing_scores = stream.missing if stream is not None else 0
    store.concat(opts.out, opts.dist, opts.confidence)
    if not opts.keep_parts:
        store.remove()
    summ.chunks = len(store.bases)
    summ.unconverged_queries = int(stages.n_unconv[0])
    summ.unconverged_inner_steps = (int(stages.n_unconv[1]), int(stages.n_unconv[2]))
    summ.wall_s = time.perf_counter() - t0
    return summ
