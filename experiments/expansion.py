"""Sparse query expansion and pool-score smoothing: candidates of the sparse-only energy (experiment).

Tried by experiments/sparse_only_v2.py (stages E1 / E2 / E3) and rejected: none of them passed the
train gate (paired 95 % CI of the train gain above 0), so the product recipe
(:mod:`jkofast.studies.sparse_recipe`) uses the base BM25 alone.  Kept here, with its oracle tests
(experiments/tests/test_expansion.py), so the searches can be rerun.

* :func:`rm3_queries` — RM3 pseudo-relevance feedback: the relevance model
  ``P(w|R) = sum_d w_d tf(w,d)/|d|`` over the top-k feedback documents (``w_d`` = their
  first-stage scores normalised to sum 1), truncated to its ``n_terms`` largest terms and
  renormalised, interpolated with the query: ``q' = (1 - λ) q/|q|_1 + λ P(.|R)``.
* :func:`graph_queries` — expansion through a term graph ``A`` (e.g. SparseGeometricRAG's
  PPMI graph): ``e = sum_t q_t A[t]``, truncated and renormalised, interpolated likewise.
* :func:`score_weighted` — full-corpus scores of weighted queries against a fitted
  :class:`~jkofast.sparse.index.SparseIndex` (BM25: ``sum_w q'_w bm25(w, d)``).
* :func:`dirichlet_ql` — Dirichlet-smoothed query likelihood
  ``sum_w c(w,q) log(1 + tf(w,d)/(μ P(w|C))) + |q| log(μ/(|d| + μ))``.
* :func:`propagate_scores` — cluster-hypothesis smoothing inside each pool:
  ``r'_i = (1 - β) r_i + β sum_j s_ij r_j / sum_j s_ij`` over the k most similar pool
  documents (sparse cosine of given rows).

Queries and term graphs are scipy CSR matrices over the index vocabulary; the numeric work
is in ``expansion_kernels.py`` next to this file (prange over queries / pools, owner-writes).
"""

from __future__ import annotations

import expansion_kernels as _k  # experiments/ is on sys.path (the scripts' own folder)
import numpy as np
import scipy.sparse as sp

from jkofast._threads import numba_threads
from jkofast._validation import (
    as_csr,
    as_float_array,
    check_int,
    check_offsets,
    check_positive,
)

__all__ = [
    "dirichlet_ql",
    "graph_queries",
    "interpolate_queries",
    "propagate_scores",
    "rm3_queries",
    "score_weighted",
    "weighted_rows_topn",
]


def _csr64(X, name):
    ip, ix, dt, shape = as_csr(X, name, dtype=np.float64)
    return ip.astype(np.int64), ix.astype(np.int64), dt, shape


def _counts64(X, name):
    """A non-negative, finite scipy.sparse matrix as canonical float64 CSR.  Negative query
    counts gave negative expanded weights, NaN ones NaN rows (or an error naming ``sel_w``)."""
    if not sp.issparse(X):  # dense input was accepted before: keep it
        X = sp.csr_matrix(as_float_array(X, name, dtype=np.float64, ndim=2, allow_empty=True, finite=False))
    ip, ix, dt, shape = as_csr(X, name, dtype=np.float64)  # NaN/inf -> ValueError naming name.data
    if dt.size and dt.min() < 0:
        raise ValueError(f"{name} must be non-negative (term counts / weights)")
    return sp.csr_matrix((dt, ix, ip), shape=shape)


def _check_weight(weight):
    w = check_positive(weight, "weight", strict=False)
    if w > 1:
        raise ValueError(f"weight must be in [0, 1], got {weight!r}")
    return w


def weighted_rows_topn(
    sel_ptr,
    sel_rows,
    sel_w,
    M,
    n_top: int,
    *,
    row_normalise: bool = False,
    n_threads: int | None = None,
) -> sp.csr_matrix:
    """Per query, the ``n_top`` largest entries of ``sum_s sel_w[s] M[sel_rows[s]]``, sum 1.

    Parameters
    ----------
    sel_ptr : int (nq + 1,)
        Ragged selection: query q uses ``sel_rows[sel_ptr[q]:sel_ptr[q+1]]``.
    sel_rows : int (n_sel,)
        Row indices into ``M``.
    sel_w : float (n_sel,)
        Non-negative weight of each selected row.
    M : scipy.sparse matrix (n_rows, V), non-negative
    n_top : int
    row_normalise : bool
        Divide each selected row by its sum first (``tf/|d|`` for a count matrix).

    Returns
    -------
    scipy.sparse.csr_matrix float64 (nq, V)
        Rows sum to 1 (empty where the combination has no positive entry); ties at the
        cut keep the lowest term ids.
    """
    n_top = check_int(n_top, "n_top", min_value=1)
    m_ptr, m_idx, m_val, shape = _csr64(M, "M")
    # a row holds at most V terms: a larger n_top changes nothing (10**12 asked for 7 TiB)
    n_top = min(n_top, max(shape[1], 1))
    if m_val.size and m_val.min() < 0:
        raise ValueError("M must be non-negative")
    sel_w = as_float_array(sel_w, "sel_w", dtype=np.float64, ndim=1, allow_empty=True)
    if sel_w.size and sel_w.min() < 0:
        raise ValueError("sel_w must be non-negative")
    sel_rows = np.asarray(sel_rows)
    if sel_rows.size and sel_rows.dtype.kind not in "iu":
        raise TypeError(f"sel_rows must be integer row indices, got dtype {sel_rows.dtype}")
    sel_rows = np.ascontiguousarray(sel_rows, dtype=np.int64)
    if sel_rows.shape != sel_w.shape:
        raise ValueError(f"sel_rows and sel_w must have the same shape, got {sel_rows.shape} and {sel_w.shape}")
    if sel_rows.size and (sel_rows.min() < 0 or sel_rows.max() >= shape[0]):
        raise ValueError(f"sel_rows must be row indices in [0, {shape[0]})")
    off = check_offsets(sel_ptr, sel_rows.shape[0], "sel_ptr")
    nq = off.shape[0] - 1
    out_t = np.zeros((nq, n_top), np.int64)
    out_w = np.zeros((nq, n_top), np.float64)
    cnt = np.zeros(nq, np.int64)
    with numba_threads(n_threads):
        _k.weighted_rows_topn(
            off,
            sel_rows,
            sel_w,
            m_ptr,
            m_idx,
            m_val,
            bool(row_normalise),
            n_top,
            out_t,
            out_w,
            cnt,
        )
    keep = np.arange(n_top)[None, :] < cnt[:, None]
    indptr = np.zeros(nq + 1, np.int64)
    np.cumsum(cnt, out=indptr[1:])
    return sp.csr_matrix((out_w[keep], out_t[keep], indptr), shape=(nq, shape[1]))


def interpolate_queries(Q, E, weight: float) -> sp.csr_matrix:
    """``(1 - weight) Q/|Q|_1 + weight E`` row by row (Q: query term counts, E: rows summing
    to 1 or empty); an empty E row leaves the normalised query row unchanged, an empty Q row
    takes E alone."""
    weight = _check_weight(weight)
    Q = _counts64(Q, "Q")
    E = _counts64(E, "E")
    if Q.shape != E.shape:
        raise ValueError(f"Q and E must have the same shape, got {Q.shape} and {E.shape}")
    qs = np.asarray(Q.sum(axis=1)).ravel()
    es = np.asarray(E.sum(axis=1)).ravel()
    wq = np.where(es > 0, 1.0 - weight, 1.0) / np.where(qs > 0, qs, 1.0)
    we = np.where(es > 0, np.where(qs > 0, weight, 1.0), 0.0)
    out = (sp.diags(wq) @ Q + sp.diags(we) @ E).tocsr()
    out.sum_duplicates()
    out.sort_indices()
    out.eliminate_zeros()
    return out


def rm3_queries(
    Q,
    doc_tf,
    fb_idx,
    fb_scores,
    *,
    n_terms: int = 20,
    weight: float = 0.5,
    n_threads: int | None = None,
) -> sp.csr_matrix:
    """RM3 expanded queries (see the module docstring).

    Parameters
    ----------
    Q : scipy.sparse matrix (nq, V)
        Query term counts over the index vocabulary.
    doc_tf : scipy.sparse matrix (n_docs, V)
        Document term counts (same vocabulary).
    fb_idx : int (nq, k)
        Feedback documents per query (rows of ``doc_tf``; ``-1`` = none).
    fb_scores : float (nq, k)
        Their first-stage scores (negative or non-finite entries count as 0); normalised to
        sum 1 per query (uniform when all are 0).
    n_terms : int
        Expansion terms kept.
    weight : float in [0, 1]
        λ, the weight of the relevance model.

    Returns
    -------
    scipy.sparse.csr_matrix float64 (nq, V), rows sum to 1 (queries without terms and
    without feedback stay empty).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> D = sp.csr_matrix(np.array([[2.0, 0, 0], [1.0, 1.0, 0]]))
    >>> Q = sp.csr_matrix(np.array([[1.0, 0, 0]]))
    >>> q = rm3_queries(Q, D, np.array([[0, 1]]), np.array([[1.0, 1.0]]), n_terms=2, weight=0.5)
    >>> np.round(q.toarray(), 3).tolist()
    [[0.875, 0.125, 0.0]]
    """
    n_terms = check_int(n_terms, "n_terms", min_value=1)  # the error named weighted_rows_topn's n_top
    fb_idx = np.asarray(fb_idx)
    if fb_idx.ndim != 2:
        raise ValueError(f"fb_idx must be 2-D (nq, k), got shape {fb_idx.shape}")
    fb = as_float_array(fb_scores, "fb_scores", dtype=np.float64, ndim=2, allow_empty=True, finite=False)
    if fb.shape != fb_idx.shape:
        raise ValueError(f"fb_scores must have the shape of fb_idx {fb_idx.shape}, got {fb.shape}")
    Qc = _counts64(Q, "Q")
    if Qc.shape[0] != fb_idx.shape[0]:
        raise ValueError(f"Q has {Qc.shape[0]} rows, fb_idx {fb_idx.shape[0]}")
    valid = fb_idx >= 0
    w = np.where(valid & np.isfinite(fb) & (fb > 0), fb, 0.0)
    tot = w.sum(axis=1, keepdims=True)
    nvalid = valid.sum(axis=1, keepdims=True)
    w = np.where(
        tot > 0,
        w / np.where(tot > 0, tot, 1.0),
        np.where(valid, 1.0 / np.maximum(nvalid, 1), 0.0),
    )
    sel_ptr = np.zeros(fb_idx.shape[0] + 1, np.int64)
    np.cumsum(valid.sum(axis=1), out=sel_ptr[1:])
    E = weighted_rows_topn(
        sel_ptr,
        fb_idx[valid],
        w[valid],
        doc_tf,
        n_terms,
        row_normalise=True,
        n_threads=n_threads,
    )
    if E.shape[1] != Qc.shape[1]:
        raise ValueError(f"Q has {Qc.shape[1]} columns, doc_tf {E.shape[1]}")
    return interpolate_queries(Qc, E, weight)


def graph_queries(Q, A, *, n_terms: int = 10, weight: float = 0.2, n_threads: int | None = None) -> sp.csr_matrix:
    """Queries expanded through a non-negative term graph ``A`` (V, V): ``e = sum_t Q_t A[t]``,
    its ``n_terms`` largest entries renormalised, then ``(1 - weight) Q/|Q|_1 + weight e``."""
    n_terms = check_int(n_terms, "n_terms", min_value=1)
    Qc = _counts64(Q, "Q")
    _, _, a_val, a_shape = _csr64(A, "A")
    if a_shape != (Qc.shape[1], Qc.shape[1]):
        raise ValueError(f"A must be ({Qc.shape[1]}, {Qc.shape[1]}), got {a_shape}")
    if a_val.size and a_val.min() < 0:
        raise ValueError("A must be non-negative")
    E = weighted_rows_topn(Qc.indptr.astype(np.int64), Qc.indices, Qc.data, A, n_terms, n_threads=n_threads)
    return interpolate_queries(Qc, E, weight)


def score_weighted(index, Qw, *, n_threads: int | None = None, dtype=np.float32) -> np.ndarray:
    """Dense ``(nq, n_docs)`` scores of weighted queries (CSR over ``index``'s vocabulary):
    ``sum_w Qw[q, w] * weight(w, d)`` with the index's postings weights (BM25 / TF-IDF)."""
    from jkofast.kernels.sparse import scoring as _ks

    index._check_fitted()
    q_ptr, q_terms, q_w, shape = _csr64(Qw, "Qw")
    if shape[1] != index.n_terms:
        raise ValueError(f"Qw must have {index.n_terms} columns, got {shape[1]}")
    nq = shape[0]
    out = np.empty((nq, index.n_docs), dtype)
    if nq:
        with numba_threads(n_threads):
            chunk = max(1, min(32, -(-nq // 8)))
            _ks.score_dense_batch(
                index.term_ptr,
                index.post_docs,
                index.post_w,
                index.n_docs,
                q_ptr,
                q_terms,
                q_w,
                chunk,
                out,
            )
    return out


def dirichlet_ql(doc_tf, Q, mu: float = 1000.0) -> np.ndarray:
    """Dirichlet query likelihood (rank-equivalent form, float64 (nq, n_docs)).

    ``score(q, d) = sum_w c(w,q) log(1 + tf(w,d) / (μ P(w|C))) + |q| log(μ / (|d| + μ))``
    with ``P(w|C) = cf(w) / sum cf``; query terms absent from the collection are ignored.
    """
    mu = check_positive(mu, "mu")
    D = sp.csr_matrix(doc_tf, dtype=np.float64)
    Qc = sp.csr_matrix(Q, dtype=np.float64)
    for name, X in (("doc_tf", D), ("Q", Qc)):
        if X.data.size and not np.all(np.isfinite(X.data)):
            raise ValueError(f"{name} contains NaN or inf")
        if X.data.size and X.data.min() < 0:
            raise ValueError(f"{name} must hold non-negative counts")
    if D.shape[1] != Qc.shape[1]:
        raise ValueError(f"doc_tf has {D.shape[1]} columns, Q {Qc.shape[1]}")
    cf = np.asarray(D.sum(axis=0)).ravel()
    pc = cf / max(float(cf.sum()), 1.0)
    L = D.copy()
    L.data = np.log1p(L.data / (mu * pc[L.indices]))
    dl = np.asarray(D.sum(axis=1)).ravel()
    Qc = Qc.multiply((cf > 0)[None, :].astype(np.float64)).tocsr()
    qlen = np.asarray(Qc.sum(axis=1)).ravel()
    return np.asarray((Qc @ L.T).todense()) + qlen[:, None] * np.log(mu / (dl + mu))[None, :]


def propagate_scores(r, offsets, X, *, k: int = 10, beta: float = 0.2, n_threads: int | None = None) -> np.ndarray:
    """Cluster-hypothesis smoothing of flat pool scores (see the module docstring).

    Parameters
    ----------
    r : float (n_total,)
        Scores, pool q at ``r[offsets[q]:offsets[q+1]]``.
    offsets : int (nq + 1,)
    X : scipy.sparse matrix (n_total, V)
        One row per flat candidate (e.g. TF-IDF); similarity = sparse cosine.
    k : int
        Neighbours per document (the document itself excluded; only positive similarity).
    beta : float in [0, 1]

    Returns
    -------
    float64 (n_total,)
    """
    from jkofast.sparse.index import cosine_pools

    k = check_int(k, "k", min_value=1)
    beta = check_positive(beta, "beta", strict=False)
    if beta > 1:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    a = as_float_array(r, "r", dtype=np.float64, ndim=1, allow_empty=True)
    off = check_offsets(offsets, a.shape[0])
    if X.shape[0] != a.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows, r has {a.shape[0]}")
    cos, cos_off = cosine_pools(X, off, n_threads=n_threads)
    out = np.empty_like(a)
    with numba_threads(n_threads):
        _k.propagate_pool_scores(a, off, cos, cos_off, k, beta, out)
    return out
