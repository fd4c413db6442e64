"""A small ready-to-rerank pool set built from the bundled SciFact data (for examples and tutorials).

:func:`example_pools` runs the main job's first stage on a few SciFact test queries (BM25 and the
shipped MiniLM embeddings, hybrid reciprocal-rank-fusion pools, the main-table energy) and returns
every array the reranker and the evaluator take, so that a snippet can start from real inputs in one
line instead of ten.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jkofast._validation import check_int
from jkofast.datasets.beir import load_dataset
from jkofast.jko.energy import energy_and_p0
from jkofast.pools.candidates import build_pools, dense_scores
from jkofast.pools.retrievers import get_retriever

__all__ = ["ExamplePools", "example_pools"]


@dataclass
class ExamplePools:
    """Hybrid candidate pools of a few SciFact test queries, ready for :func:`jkofast.jko.rerank_batch`.

    Pool ``q`` is the flat slice ``offsets[q]:offsets[q + 1]`` of ``E``, ``p0``, ``Z`` and ``doc_ids``.

    Attributes
    ----------
    query_ids : list of str, length nq
    queries : list of str       query texts, aligned with ``query_ids``
    offsets : int64 (nq + 1,)
    doc_ids : list of str       corpus id of every pool entry (flat, fused-rank order)
    E : float64 (n_total,)      energy (``-`` the blended BM25 / dense pool score)
    p0 : float64 (n_total,)     initial distribution of each pool (sums to 1 per pool)
    Z : float32 (n_total, 384)  L2-normalised MiniLM embedding of every pool entry
    texts : list of str         the whole corpus (title + ". " + text), to fit a retriever on
    corpus_ids : list of str    ids of ``texts``
    qrels : dict                ``{qid: {docid: label}}`` of the chosen queries
    """

    query_ids: list
    queries: list
    offsets: np.ndarray
    doc_ids: list
    E: np.ndarray
    p0: np.ndarray
    Z: np.ndarray
    texts: list
    corpus_ids: list
    qrels: dict

    def pool(self, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(E, p0, Z)`` of pool ``q`` (views into the flat arrays)."""
        n = len(self.query_ids)
        if isinstance(q, bool) or not isinstance(q, int | np.integer) or not 0 <= q < n:
            raise ValueError(f"q must be a pool position in [0, {n}), got {q!r}")
        s = slice(int(self.offsets[q]), int(self.offsets[q + 1]))
        return self.E[s], self.p0[s], self.Z[s]

    def to_run(self, scores) -> dict:
        """``{qid: {docid: score}}`` from one score per pool entry (e.g. ``rerank_batch(...).p``).

        Queries whose scores are not all finite (a failed pool) are left out.
        """
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != self.E.shape:
            raise ValueError(f"scores must have one value per pool entry {self.E.shape}, got shape {s.shape}")
        run = {}
        for q, qid in enumerate(self.query_ids):
            lo, hi = int(self.offsets[q]), int(self.offsets[q + 1])
            if np.isfinite(s[lo:hi]).all():
                run[qid] = dict(zip(self.doc_ids[lo:hi], s[lo:hi].tolist(), strict=True))
        return run


def example_pools(n_queries: int = 8, pool_size: int = 30) -> ExamplePools:
    """Pools of the first ``n_queries`` SciFact test queries (bundled data; about a second once compiled).

    BM25 over the whole corpus and the shipped MiniLM cosine scores are fused by reciprocal rank
    (the published construction) into pools of ``pool_size`` documents; the energy and ``p0`` are
    the main-table blend (``jkofast.jko.energy.energy_and_p0`` with its defaults).

    Parameters
    ----------
    n_queries : int
        Number of test queries (1 to 300).
    pool_size : int
        Documents per pool (at least 2).

    Returns
    -------
    ExamplePools

    Examples
    --------
    >>> ex = example_pools(n_queries=2, pool_size=5)
    >>> ex.offsets.tolist(), len(ex.doc_ids), ex.Z.shape
    ([0, 5, 10], 10, (10, 384))
    """
    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")
    n_queries = check_int(n_queries, "n_queries", min_value=1)
    if n_queries > len(qids):
        raise ValueError(f"n_queries must be at most {len(qids)} (the SciFact test queries), got {n_queries}")
    pool_size = check_int(pool_size, "pool_size", min_value=2)
    qids = qids[:n_queries]
    queries = [ds.queries[q] for q in qids]
    doc_emb, q_emb = ds.embeddings("minilm-l6-v2")
    row = {q: i for i, q in enumerate(ds.query_ids)}
    texts = ds.doc_texts(". ")
    bm25 = get_retriever("bm25").fit(texts)
    dense = dense_scores(doc_emb, q_emb[[row[q] for q in qids]])
    P = build_pools(bm25.score_all(queries), dense, query_ids=qids, M=pool_size)
    E, p0 = energy_and_p0(P.offsets, dense=P.dense, rerank=P.sparse)
    qrels = ds.qrels("test")
    return ExamplePools(
        query_ids=list(qids),
        queries=queries,
        offsets=P.offsets,
        doc_ids=[ds.doc_ids[i] for i in P.doc_idx],
        E=E,
        p0=p0,
        Z=np.ascontiguousarray(doc_emb[P.doc_idx]),
        texts=texts,
        corpus_ids=list(ds.doc_ids),
        qrels={q: qrels[q] for q in qids if q in qrels},
    )
