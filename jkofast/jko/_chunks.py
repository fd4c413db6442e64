"""The per-chunk work of a streaming rerank job: prepare (Python), solve (kernels), finish (format).

A chunk (:class:`jkofast.eval.runio.Chunk`: query ids, offsets, doc ids, score strings, scores) is
prepared on the calling thread (doc id -> geometry row, the pass-through decisions, user scores
aligned), solved on the kernel thread (energy, p0, ``rerank_batch`` with the GIL released) and
finished on the writer thread (solver statuses -> pass-throughs, the TREC lines, the ``--dist`` and
``--confidence`` parts).  The geometry is any object with ``rows(docs)`` and ``gather(rows)``
(:class:`jkofast.jko.stream.DenseGeometry`, :class:`~jkofast.jko.stream.TfidfGeometry`).
"""

from __future__ import annotations

from itertools import pairwise
from operator import itemgetter

import numpy as np

from jkofast.eval.runio import format_run
from jkofast.jko.confidence import dual_confidence, format_confidence_lines
from jkofast.jko.energy import blend, softmax_tau
from jkofast.jko.multires import coarse_config, fine_config, multires_rerank
from jkofast.jko.solver import RerankResult, rerank_batch

__all__ = [
    "PreparedChunk",
    "align_chunk_scores",
    "energy_p0",
    "finish_chunk",
    "format_lines",
    "prepare_chunk",
    "process_chunk",
    "solve_chunk",
    "solve_multires",
]

MULTIRES_ROWS = 1 << 18  # candidate rows gathered per MR/SAM call: bounds a chunk's memory whatever the pool size


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


class PreparedChunk:
    """A chunk after the Python-side preparation, ready for the kernel stage."""

    __slots__ = ("bad", "chunk", "line_ok", "off_ok", "ok", "ok_before", "rows", "rr", "run_s")


def prepare_chunk(chunk, geom, user_scores, cfg, opts) -> PreparedChunk:
    """Map doc ids to geometry rows, decide the pass-throughs (unknown doc, empty pool), align user scores.

    Pure Python/numpy: no Numba launch here, so the kernel thread is the only thread that runs
    parallel kernels (the workqueue threading layer forbids concurrent launches).
    """
    pr = PreparedChunk()
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


def energy_p0(pr: PreparedChunk, cfg, opts):
    """Return ``(energy, p0)`` of the chunk's rerankable queries.

    ``r`` = the run score's min-max (blended with the user scores' when given), ``E = -r``,
    ``p0 = softmax_{tau0}(r)``.
    """
    if pr.rr is not None:
        r = blend(pr.off_ok, dense=pr.run_s, rerank=pr.rr.astype(np.float64), alpha=opts.alpha, gamma=opts.gamma)
    else:
        r = blend(pr.off_ok, dense=pr.run_s, alpha=1.0)
    return -r, softmax_tau(r, pr.off_ok, cfg.tau0)


def solve_chunk(pr: PreparedChunk, geom, cfg, opts):
    """Run the kernel stage: energy/p0, the geometry rows' gather, ``rerank_batch`` (GIL released)."""
    if pr.run_s is None:
        return None
    energy, p0 = energy_p0(pr, cfg, opts)
    if getattr(opts, "multires", None):
        return solve_multires(-energy, pr.off_ok, pr.rows, geom, cfg, opts)
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


def _row_batches(off: np.ndarray, max_rows: int) -> list:
    """Cut pools ``0..n`` into consecutive runs of whole pools of at most ``max_rows`` rows (a larger pool alone)."""
    cuts, start, offl = [0], 0, off.tolist()
    for q in range(1, len(offl) - 1):
        if offl[q + 1] - offl[start] > max_rows:
            cuts.append(q)
            start = q
    cuts.append(len(offl) - 1)
    return [(a, b) for a, b in pairwise(cuts) if b > a]


def solve_multires(rel, off, rows, geom, cfg, opts, max_rows: int | None = None) -> RerankResult:
    """Rerank a chunk's pools with MR-JKO (``opts.multires == "mr"``) or SAM-JKO (``"sam"``).

    The pools are solved in runs of whole pools of at most ``max_rows`` (default
    ``MULTIRES_ROWS``) candidate rows, so the
    gathered rows of a chunk stay bounded whatever its pool sizes; each pool's result depends on
    that pool only (queries in parallel, no cross-query state), so the runs change no byte.
    Stages: :func:`jkofast.jko.multires.coarse_config` and ``fine_config(reported=True)`` on the
    job's gradient path ``cfg.grad``, ``G = opts.clusters``, ``G_keep = opts.refine``,
    ``sam_beta = opts.beta``.  Returns a :class:`jkofast.jko.solver.RerankResult` (``p``,
    ``status``, ``errors``, ``unconverged``) over the chunk's pools.
    """
    coarse, fine = coarse_config(grad=cfg.grad), fine_config(reported=True, grad=cfg.grad)
    nq = off.shape[0] - 1
    p = np.empty(int(off[-1]), np.float64)
    status = np.zeros(nq, np.int32)
    unconv = np.zeros((nq, 2), np.int64)
    errors: dict = {}
    for a, b in _row_batches(off, MULTIRES_ROWS if max_rows is None else max_rows):
        la, lb = int(off[a]), int(off[b])
        res = multires_rerank(
            rel[la:lb],
            off[a : b + 1] - la,
            geom.gather(rows[la:lb])["embeddings"],
            G=opts.clusters,
            G_keep=opts.refine,
            clustering="sam" if opts.multires == "sam" else "kmeans",
            sam_beta=opts.beta,
            coarse=coarse,
            fine=fine,
            n_threads=opts.threads,
            warn_unconverged=False,
        )
        p[la:lb] = res.p
        status[a:b] = res.status
        unconv[a:b] = res.unconverged
        errors.update({a + q: msg for q, msg in res.errors.items()})
    return RerankResult(p=p, offsets=off, status=status, errors=errors, unconverged=unconv)


def _confidence_text(pr: PreparedChunk, res, ok) -> str:
    """Return the chunk's confidence lines (no header): the three signals of each reranked query, else ``nan``."""
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


def finish_chunk(pr: PreparedChunk, res, opts, say):
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
