"""Read-out and evaluation of ranked pools, shared by the main job, the sparse recipe and the studies.

* :func:`readout_topk` -- the top-k corpus rows of every pool by a flat distribution;
* :func:`evaluate_topk` -- per-query nDCG@k (linear and exponential gain) and Recall@k of ranked rows;
* :func:`rerank_blocks` -- :func:`jkofast.jko.solver.rerank_batch` in blocks of queries (bounded
  copies of wide sparse geometry rows; per-query results identical to one batch).

The main job (:mod:`jkofast.studies.main_job`), the sparse-only recipe
(:mod:`jkofast.studies.sparse_recipe`) and the studies all sit above this module.
"""

from __future__ import annotations

import numpy as np

from jkofast._validation import check_int, check_offsets
from jkofast.eval.metrics import evaluate
from jkofast.jko.solver import RerankResult, rerank_batch
from jkofast.pools.baselines import positions_to_docs, topk_by_score
from jkofast.pools.candidates import Pools

__all__ = ["K_EVAL", "K_READ", "evaluate_topk", "readout_topk", "rerank_blocks"]

K_READ = 20
K_EVAL = 10


def evaluate_topk(top_rows, query_ids, qrels: dict, doc_ids, k: int = K_EVAL) -> dict:
    """Per-query nDCG@k (linear and exponential gain) and Recall@k of ranked corpus rows.

    Parameters
    ----------
    top_rows : int ndarray (nq, >= k)
        Corpus rows in rank order per query (``-1`` padding ignored).
    query_ids : list of str
        One id per row of ``top_rows``, unique.
    qrels : dict
        ``qid -> {doc_id: label}``; a query without judgements scores 0.
    doc_ids : list of str
        Corpus ids by row.
    k : int

    Returns
    -------
    dict
        ``{"ndcg": lin, "ndcg_exp": exp, "recall": r}``, float64 arrays in query order
        (:func:`jkofast.eval.metrics.evaluate`, ranking order as given).

    Raises
    ------
    TypeError, ValueError
        Rankings that are not 2-D integer rows, a row count other than ``len(query_ids)``,
        duplicate query ids, a row repeated within a ranking or beyond ``doc_ids``.
    """
    top = np.asarray(top_rows)
    if top.ndim != 2 or (top.size and top.dtype.kind not in "iu"):
        raise TypeError(f"top_rows must be a 2-D integer array of corpus rows, got {top.dtype} {top.shape}")
    if top.shape[0] != len(query_ids):  # one ranking per query id, no more, no fewer
        raise ValueError(f"top_rows has {top.shape[0]} rows for {len(query_ids)} query_ids")
    if len(set(query_ids)) != len(query_ids):  # a repeated id would keep only its last ranking
        raise ValueError("query_ids holds duplicates")
    if top.size and top.max() >= len(doc_ids):
        raise ValueError(f"top_rows holds row {int(top.max())}, beyond the {len(doc_ids)} doc_ids")
    runs = []
    for q in range(len(query_ids)):
        row = [int(i) for i in top[q] if i >= 0]
        if len(set(row)) != len(row):  # a repeated row would be counted as relevant more than once
            raise ValueError(f"top_rows[{q}] (query {query_ids[q]!r}) repeats a corpus row")
        runs.append([doc_ids[i] for i in row])
    run = dict(zip(query_ids, runs, strict=True))
    sub = {qid: qrels.get(qid, {}) for qid in query_ids}
    out = {}
    for key, gain, metrics in (
        ("lin", "linear", (f"ndcg@{k}", f"recall@{k}")),
        ("exp", "exponential", (f"ndcg@{k}",)),
    ):
        res = evaluate(run, sub, metrics=metrics, gain=gain, tie_break="given", missing="zero")
        pos = {q: i for i, q in enumerate(res.query_ids)}
        idx = [pos.get(q, -1) for q in query_ids]
        for name, vals in res.per_query.items():
            v = np.asarray(vals, np.float64)
            out[(key, name)] = np.array([v[i] if i >= 0 else 0.0 for i in idx])
    return {
        "ndcg": out[("lin", f"ndcg@{k}")],
        "ndcg_exp": out[("exp", f"ndcg@{k}")],
        "recall": out[("lin", f"recall@{k}")],
    }


def readout_topk(p, pools: Pools, k: int = K_READ) -> np.ndarray:
    """Top-k corpus rows of every pool by the flat distribution ``p`` (ties -> pool order)."""
    pos = topk_by_score(np.asarray(p, np.float64), pools.offsets, k)
    return positions_to_docs(pos, pools.offsets, pools.doc_idx)


def rerank_blocks(energy, p0, offsets, csr, config, n_threads=None, block: int = 32, rows=None):
    """Run ``rerank_batch(energy, p0, offsets, csr=csr, config=config)`` in blocks of ``block`` queries.

    The same per-query results (each query is solved independently), with the solver's copies
    of the geometry rows bounded by one block.  Capped inner steps are counted in
    ``.unconverged`` (no warning here; the main job reports them in its notes).  With ``rows``
    (int, one per pool entry), ``csr`` holds corpus rows and pool entry ``i`` is row
    ``csr[rows[i]]``: each block gathers only its own rows (no copy of every pool's rows).

    Returns
    -------
    jkofast.jko.solver.RerankResult
        ``errors`` keyed by the query's position in the whole batch.
    """
    # checked here: with block <= 0 no block would run and p would stay uninitialised; offsets
    # must cover the whole energy, or the last pools would be dropped
    block = check_int(block, "block", min_value=1)
    energy = np.asarray(energy)
    off = check_offsets(offsets, energy.shape[0])
    if p0 is not None:
        p0 = np.asarray(p0)
        if p0.shape != energy.shape:
            raise ValueError(f"p0 and energy must have the same shape, got {p0.shape} and {energy.shape}")
    if rows is not None:
        rows = np.asarray(rows)
        n_rows = getattr(csr, "shape", (0,))[0]
        if rows.shape != energy.shape or rows.dtype.kind not in "iu":
            raise ValueError(
                f"rows must be integers, one per pool entry ({energy.shape[0]}), got {rows.dtype} {rows.shape}"
            )
        if rows.size and (rows.min() < 0 or rows.max() >= n_rows):
            raise ValueError(f"rows must lie in [0, {n_rows}) (the rows of csr)")
    elif getattr(csr, "shape", (None,))[0] != energy.shape[0]:
        raise ValueError(
            f"csr must have one row per pool entry ({energy.shape[0]}), got shape {getattr(csr, 'shape', None)}"
        )
    nq = off.shape[0] - 1
    p = np.empty(int(off[-1]))
    status = np.zeros(nq, np.int32)
    unconv = np.zeros((nq, 2), np.int64)
    errors: dict = {}
    for q0 in range(0, nq, block):
        q1 = min(nq, q0 + block)
        a, b = int(off[q0]), int(off[q1])
        r = rerank_batch(
            energy[a:b],
            None if p0 is None else p0[a:b],
            off[q0 : q1 + 1] - a,
            csr=csr[a:b] if rows is None else csr[rows[a:b]],
            config=config,
            n_threads=n_threads,
            warn_unconverged=False,
        )
        p[a:b] = r.p
        status[q0:q1] = r.status
        unconv[q0:q1] = r.unconverged
        errors.update({q0 + k: v for k, v in r.errors.items()})
    return RerankResult(p=p, offsets=off, status=status, errors=errors, unconverged=unconv)
