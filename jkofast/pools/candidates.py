"""Candidate pools: global hybrid reciprocal-rank fusion (SPEC A.2.6), stored batch-wise.

A :class:`Pools` object holds every query's pool as flat arrays plus ``offsets``
(pool ``q`` = ``doc_idx[offsets[q]:offsets[q+1]]``, in fused-rank order), with the first-stage
scores of each pool document (``sparse``, ``dense``; float32).

Published construction, per query: the ``each_n = 500`` best documents of the sparse list
(BM25 okapi by default) and of the dense list, reciprocal-rank fusion with constant 60
(a document at 0-based list position ``r`` gets ``1/(60 + r + 1)``), the BM25 list
accumulated first, documents only in the dense list appended after it, a **stable** sort by
fused score (BM25-list documents win ties) and the first ``M = 200``.  Sparse-only mode
(no embeddings): the pool is the sparse top-``M`` in rank order.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads, over_ranges
from jkofast._validation import QueryIndexError, as_float_array, check_int
from jkofast.kernels import topk as _topk
from jkofast.kernels.pools import baselines as _k

__all__ = [
    "Pools",
    "build_pools",
    "dense_scores",
    "dense_search",
    "load_embeddings",
    "pools_from_lists",
    "rrf_fuse",
    "top_lists",
]


@dataclasses.dataclass
class Pools:
    """A batch of candidate pools as flat arrays + offsets.

    Attributes
    ----------
    query_ids : list of str, length nq
    offsets : int64 (nq + 1,)
    doc_idx : int64 (n_total,)  corpus row of every pool entry, fused-rank order
    sparse : float32 (n_total,)  sparse first-stage score of every pool entry
    dense : float32 (n_total,) or None  dense (cosine) score; None in sparse-only mode
    fused : float64 (n_total,) or None  global RRF score
    """

    query_ids: list
    offsets: np.ndarray
    doc_idx: np.ndarray
    sparse: np.ndarray
    dense: np.ndarray | None = None
    fused: np.ndarray | None = None

    @property
    def n_queries(self) -> int:
        """Number of pools (queries)."""
        return len(self.offsets) - 1

    def __len__(self) -> int:
        """Return the number of pools (queries)."""
        return self.n_queries

    def sizes(self) -> np.ndarray:
        """Pool sizes, int64 (nq,)."""
        return np.diff(self.offsets)

    def _check_queries(self, q, name: str) -> np.ndarray:
        a = np.asarray(q)
        if a.size and a.dtype.kind not in "iu":
            raise TypeError(f"{name} must be integer query positions, got dtype {a.dtype}")
        a = a.astype(np.int64)
        n = self.n_queries
        if a.size and (a.min() < 0 or a.max() >= n):
            bad = int(a.ravel()[(a.ravel() < 0) | (a.ravel() >= n)][0])
            raise QueryIndexError(f"{name} must be query positions in [0, {n}), got {bad}")
        return a

    def pool(self, q: int) -> slice:
        """Flat slice of pool ``q`` (``0 <= q < n_queries``)."""
        if isinstance(q, bool) or not isinstance(q, int | np.integer):
            raise TypeError(f"q must be an integer query position, got {type(q).__name__}")
        q = int(self._check_queries(q, "q"))
        return slice(int(self.offsets[q]), int(self.offsets[q + 1]))

    def subset(self, queries) -> Pools:
        """Pools of the given query positions (in that order)."""
        queries = self._check_queries(queries, "queries")
        if queries.ndim != 1:
            raise ValueError(f"queries must be 1-D, got shape {queries.shape}")
        sl = [np.arange(self.offsets[q], self.offsets[q + 1]) for q in queries]
        take = np.concatenate(sl) if sl else np.zeros(0, np.int64)
        sizes = np.array([self.offsets[q + 1] - self.offsets[q] for q in queries], np.int64)
        off = np.zeros(len(queries) + 1, np.int64)
        np.cumsum(sizes, out=off[1:])

        def g(a):
            return None if a is None else a[take]

        return Pools(
            [self.query_ids[q] for q in queries],
            off,
            self.doc_idx[take],
            self.sparse[take],
            g(self.dense),
            g(self.fused),
        )

    def recall(self, qrels: dict, doc_ids) -> float:
        """Micro pool recall ``sum_q |rel_q & pool_q| / sum_q |rel_q|`` (rel = label > 0).

        ``doc_ids`` maps corpus rows to ids (``len(doc_ids) > doc_idx.max()``).
        """
        if self.doc_idx.size and int(self.doc_idx.max()) >= len(doc_ids):
            raise ValueError(f"doc_ids has {len(doc_ids)} ids but the pools hold corpus row {int(self.doc_idx.max())}")
        hit = tot = 0
        for q, qid in enumerate(self.query_ids):
            rel = {d for d, v in qrels.get(qid, {}).items() if v > 0}
            if not rel:
                continue
            pool = {doc_ids[i] for i in self.doc_idx[self.pool(q)]}
            hit += len(rel & pool)
            tot += len(rel)
        return hit / tot if tot else 0.0

    def save(self, path: str) -> None:
        """Write an ``.npz`` (flat arrays + offsets + query ids)."""
        arrs = dict(
            query_ids=np.asarray(self.query_ids, dtype=str),
            offsets=self.offsets,
            doc_idx=self.doc_idx,
            sparse=self.sparse,
        )
        if self.dense is not None:
            arrs["dense"] = self.dense
        if self.fused is not None:
            arrs["fused"] = self.fused
        np.savez(path, **arrs)

    @classmethod
    def load(cls, path: str) -> Pools:
        """Read pools written by :meth:`save`."""
        z = np.load(path, allow_pickle=False)
        return cls(
            [str(x) for x in z["query_ids"]],
            z["offsets"],
            z["doc_idx"],
            z["sparse"],
            z["dense"] if "dense" in z.files else None,
            z["fused"] if "fused" in z.files else None,
        )


def _as_index_rows(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_queries, list_length), got shape {a.shape}")
    if a.size and a.min() < -1:
        q, j = (int(v[0]) for v in np.nonzero(a < -1))
        raise ValueError(f"{name}[{q}, {j}] = {int(a[q, j])}: ids must be >= 0 (-1 = padding)")
    # no duplicate ids inside a row (ignoring -1 padding)
    if a.size:
        s = np.sort(a, axis=1)
        dup = (s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)
        if dup.any():
            q = int(np.flatnonzero(dup.any(axis=1))[0])
            raise ValueError(f"{name}: duplicate document ids in row {q}")
    return a


def rrf_fuse(
    sparse_idx, dense_idx=None, *, M: int = 200, k_rrf: int = 60, n_threads: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Global reciprocal-rank fusion of two ranked lists per query (SPEC A.2.6).

    Parameters
    ----------
    sparse_idx : int array (nq, n1)
        Corpus ids of each query's sparse list in rank order; ``-1`` entries are skipped
        (they still occupy their list position).
    dense_idx : int array (nq, n2) or None
        Corpus ids of the dense list; ``None`` = sparse-only (the pool is the sparse top-M).
    M : int
        Pool size kept after fusion.
    k_rrf : int
        RRF constant (60).
    n_threads : int or None

    Returns
    -------
    cand : int64 (nq, M), ``-1``-padded when fewer than M documents were fused
    fused : float64 (nq, M), fused scores (``0`` in padding)
    n : int64 (nq,), pool sizes

    Raises
    ------
    TypeError, ValueError
        Non-integer ids, wrong shapes, duplicate ids within a list.

    Examples
    --------
    >>> cand, fused, n = rrf_fuse([[5, 3]], [[3, 9]], M=3)
    >>> cand.tolist()  # doc 3: 1/62 + 1/61; doc 5: 1/61; doc 9: 1/62
    [[3, 5, 9]]
    """
    M = check_int(M, "M", min_value=1)
    k_rrf = check_int(k_rrf, "k_rrf", min_value=0)
    s = _as_index_rows(sparse_idx, "sparse_idx")
    if dense_idx is None:
        d = np.zeros((s.shape[0], 0), np.int64)
    else:
        d = _as_index_rows(dense_idx, "dense_idx")
        if d.shape[0] != s.shape[0]:
            raise ValueError(
                f"sparse_idx and dense_idx must have the same number of rows, got {s.shape[0]} and {d.shape[0]}"
            )
    nq = s.shape[0]
    cand = np.full((nq, M), -1, np.int64)
    fused = np.zeros((nq, M), np.float64)
    n = np.zeros(nq, np.int64)
    over_ranges(_k.rrf_fuse_rows, nq, n_threads, s, d, M, k_rrf, cand, fused, n)
    return cand, fused, n


def top_lists(scores, k: int, n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise top-k of a full (nq, N) score matrix (descending, ties -> lowest id)."""
    k = check_int(k, "k", min_value=1)
    s = as_float_array(scores, "scores", ndim=2)
    kk = min(k, s.shape[1])
    idx = np.empty((s.shape[0], kk), np.int64)
    val = np.empty((s.shape[0], kk), s.dtype)
    with numba_threads(n_threads):
        _topk.topk_rows(s, kk, idx, val)
    return idx, val


def dense_scores(doc_emb, query_emb, *, per_query: bool = True, batch: int = 256) -> np.ndarray:
    """Cosine scores ``query_emb @ doc_emb.T`` as float32 (nq, N); inputs assumed L2-normalised.

    ``per_query=True`` computes one matrix-vector product per query (``docs @ q``), as the
    reference builds its pools: a matrix-matrix product rounds differently (~5e-7) and can
    swap near-tied dense ranks.  ``per_query=False`` uses blocked matrix-matrix products
    (much faster for many queries; ranks may differ on near-ties).
    """
    batch = check_int(batch, "batch", min_value=1)
    D = as_float_array(doc_emb, "doc_emb", dtype=np.float32, ndim=2)
    Q = as_float_array(query_emb, "query_emb", dtype=np.float32, ndim=2)
    if D.shape[1] != Q.shape[1]:
        raise ValueError(f"doc_emb and query_emb dimensions differ: {D.shape[1]} vs {Q.shape[1]}")
    out = np.empty((Q.shape[0], D.shape[0]), np.float32)
    if per_query:
        for i in range(Q.shape[0]):
            np.dot(D, Q[i], out=out[i])
    else:
        for a in range(0, Q.shape[0], batch):
            np.matmul(Q[a : a + batch], D.T, out=out[a : a + batch])
    return out


def dense_search(
    doc_emb, query_emb, k: int, *, batch: int = 1024, per_query: bool = False, n_threads: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact dense first stage: top-k corpus rows by cosine (``doc_emb @ q``), per query.

    Processes ``batch`` queries at a time so memory stays ``batch x N`` floats
    (``per_query``: see :func:`dense_scores`).
    Returns (indices int64 (nq, k), scores float32 (nq, k)).
    """
    batch = check_int(batch, "batch", min_value=1)
    D = as_float_array(doc_emb, "doc_emb", dtype=np.float32, ndim=2)
    Q = as_float_array(query_emb, "query_emb", dtype=np.float32, ndim=2)
    kk = min(check_int(k, "k", min_value=1), D.shape[0])
    idx = np.empty((Q.shape[0], kk), np.int64)
    val = np.empty((Q.shape[0], kk), np.float32)
    for a in range(0, Q.shape[0], batch):
        i, v = top_lists(dense_scores(D, Q[a : a + batch], per_query=per_query), kk, n_threads)
        idx[a : a + batch], val[a : a + batch] = i, v
    return idx, val


def load_embeddings(npy_path: str, ids_path: str | None = None, *, mmap: bool = True):
    """Load an embedding matrix (``.npy``, one row per document) and its id list.

    ``ids_path``: a text file with one id per line, aligned with the rows.  Returns
    ``(emb, ids)``; ``emb`` is memory-mapped when ``mmap`` (rows are gathered per pool, so
    memory stays bounded).
    """
    if not os.path.exists(npy_path):
        raise FileNotFoundError(f"embeddings file not found: {npy_path}")
    emb = np.load(npy_path, mmap_mode="r" if mmap else None)
    if emb.ndim != 2:
        raise ValueError(f"embeddings must be 2-D (n_docs, dim), got shape {emb.shape}")
    ids = None
    if ids_path is not None:
        with open(ids_path, encoding="utf-8") as fh:
            ids = [ln.strip() for ln in fh if ln.strip()]
        if len(ids) != emb.shape[0]:
            raise ValueError(f"ids file has {len(ids)} ids but embeddings have {emb.shape[0]} rows")
    return emb, ids


def build_pools(
    sparse_scores,
    dense_scores_=None,
    *,
    query_ids=None,
    each_n: int = 500,
    M: int = 200,
    k_rrf: int = 60,
    n_threads: int | None = None,
) -> Pools:
    """Hybrid (or sparse-only) pools from full-corpus score matrices (SPEC A.2.6).

    Parameters
    ----------
    sparse_scores : float array (nq, N)
        Full-corpus sparse scores (e.g. BM25 okapi); documents never scored should hold 0.
    dense_scores_ : float array (nq, N) or None
        Full-corpus dense (cosine) scores; ``None`` = sparse-only mode.
    query_ids : list of str or None
    each_n : int
        Length of each ranked list entering the fusion (500; clipped to N).
    M : int
        Pool size (200).
    k_rrf : int
        RRF constant (60).

    Returns
    -------
    Pools
        Fused-rank order; ``sparse``/``dense`` are the full-corpus scores of the pool
        documents (``bm25_all[cand_idx]``, ``dense_all[cand_idx]``), float32.
    """
    S = as_float_array(sparse_scores, "sparse_scores", ndim=2, dtype=np.float32)
    nq, N = S.shape
    each_n = min(check_int(each_n, "each_n", min_value=1), N)
    M = check_int(M, "M", min_value=1)
    s_idx, _ = top_lists(S, each_n, n_threads)
    D = None
    d_idx = None
    if dense_scores_ is not None:
        D = as_float_array(dense_scores_, "dense_scores", ndim=2, dtype=np.float32)
        if D.shape != S.shape:
            raise ValueError(f"sparse_scores and dense_scores must have the same shape, got {S.shape} and {D.shape}")
        d_idx, _ = top_lists(D, each_n, n_threads)
    cand, fused, n = rrf_fuse(s_idx, d_idx, M=M, k_rrf=k_rrf, n_threads=n_threads)
    offsets = np.zeros(nq + 1, np.int64)
    np.cumsum(n, out=offsets[1:])
    mask = cand >= 0
    doc_idx = cand[mask]
    rows = np.repeat(np.arange(nq), n)
    sparse = S[rows, doc_idx]
    dense = D[rows, doc_idx] if D is not None else None
    if query_ids is None:
        query_ids = [str(i) for i in range(nq)]
    elif len(query_ids) != nq:
        raise ValueError(f"query_ids has {len(query_ids)} entries for {nq} score rows")
    return Pools(list(query_ids), offsets, doc_idx, sparse, dense, fused[mask])


def pools_from_lists(
    sparse_idx,
    sparse_val,
    dense_idx=None,
    dense_val=None,
    *,
    query_ids=None,
    M: int = 200,
    k_rrf: int = 60,
    n_threads: int | None = None,
) -> Pools:
    """Pools from ranked first-stage lists (e.g. ``retriever.search`` output, ``-1`` padded).

    A pool document absent from one list gets that list's smallest finite score for the
    query (the score is then only a lower bound; use :func:`build_pools` with full score
    matrices for the exact published values).
    """
    cand, fused, n = rrf_fuse(sparse_idx, dense_idx, M=M, k_rrf=k_rrf, n_threads=n_threads)
    nq = cand.shape[0]
    if query_ids is not None and len(query_ids) != nq:
        raise ValueError(f"query_ids has {len(query_ids)} entries for {nq} rows of sparse_idx")
    if dense_idx is not None and dense_val is None:
        raise ValueError("dense_val is required with dense_idx (the dense scores of the listed documents)")

    def lookup(idx, val, name):
        idx = np.asarray(idx, np.int64)
        val = as_float_array(val, name, dtype=np.float32, allow_empty=True, finite=False)
        if val.shape != idx.shape:
            raise ValueError(f"{name} must have the shape of its index array {idx.shape}, got {val.shape}")
        if np.isnan(val).any():
            raise ValueError(f"{name} contains NaN")
        out = np.empty(int(n.sum()), np.float32)
        pos = 0
        for q in range(nq):
            fin = (idx[q] >= 0) & np.isfinite(val[q])
            m = dict(zip(idx[q][fin].tolist(), val[q][fin].tolist(), strict=True))
            floor = float(val[q][fin].min()) if fin.any() else 0.0
            for d in cand[q, : n[q]].tolist():
                out[pos] = m.get(d, floor)
                pos += 1
        return out

    offsets = np.zeros(nq + 1, np.int64)
    np.cumsum(n, out=offsets[1:])
    mask = cand >= 0
    sparse = lookup(sparse_idx, sparse_val, "sparse_val")
    dense = lookup(dense_idx, dense_val, "dense_val") if dense_idx is not None else None
    if query_ids is None:
        query_ids = [str(i) for i in range(nq)]
    return Pools(list(query_ids), offsets, cand[mask], sparse, dense, fused[mask])


@register_warmup("pools")
def _warmup() -> None:
    rrf_fuse(np.array([[0, 1, 2]]), np.array([[2, 0, -1]]), M=3)
    rrf_fuse(np.array([[0, 1, 2]]), None, M=3)
