"""Vocabulary and TF-IDF rows of the streaming SGR build (steps 2 and 4 of :mod:`jkofast.sgr.streaming`).

:func:`stream_vocabulary` selects the vocabulary over the shards' term counts with
``CountVectorizer``'s rule (SPEC B.11); :func:`shard_rows` turns a token shard into the TF-IDF and
count rows ``fit`` computes, bit for bit.
"""

from __future__ import annotations

import warnings

import numpy as np

from jkofast._threads import numba_threads
from jkofast.kernels.sgr import stream as _st

LOCAL_K = 150_000  # B.11: local heavy hitters per shard
CANDIDATE_K = 200_000  # B.11: candidate union


# ---------------------------------------------------------------------------------------------- vocabulary
def stream_vocabulary(shards, max_features: int, local_k: int = LOCAL_K, candidate_k: int = CANDIDATE_K) -> dict:
    """Select the vocabulary over shard term counts (B.11), with ``CountVectorizer``'s rule.

    Parameters
    ----------
    shards : sequence of callables or dicts
        Per shard, its ``terms`` (str array) and ``tf`` / ``df`` (int64 per local term);
        a callable is called to get the dict (a shard read from disk when needed).
    max_features : int
        V, the vocabulary cap.
    local_k, candidate_k : int
        Heavy hitters kept per shard and in the candidate union (150k, 200k as published).

    Returns
    -------
    dict
        ``terms`` (selected, alphabetical), ``tf`` / ``df`` int64 over the corpus per term,
        ``exact`` (True: the selection ran on the whole vocabulary), ``n_distinct`` (distinct
        terms seen, a lower bound when not exact), ``guaranteed`` (the kept set is provably
        the true top-V).
    """
    get = [s if callable(s) else (lambda s=s: s) for s in shards]
    union: dict = {}
    complete = True
    bound_out = 0  # upper bound on the corpus tf of a term outside every shard's heavy hitters
    for g in get:
        s = g()
        tf, terms = np.asarray(s["tf"]), s["terms"]
        if tf.shape[0] > local_k:
            complete = False
            part = np.argpartition(-tf, local_k - 1)[:local_k]
            bound_out += int(tf[part].min())
            sel_t, sel_f = terms[part], tf[part]
        else:
            sel_t, sel_f = terms, tf
        for t, f in zip(sel_t.tolist(), sel_f.tolist()):
            union[t] = union.get(t, 0) + f
    exact = complete and len(union) <= candidate_k
    if len(union) > candidate_k:
        items = sorted(union.items(), key=lambda kv: (-kv[1], kv[0]))
        bound_out += items[candidate_k][1]  # + what a dropped candidate may have lost in the shards
        cand = sorted(t for t, _ in items[:candidate_k])
    else:
        cand = sorted(union)
    cand_arr = np.array(cand, dtype=str) if cand else np.zeros(0, "<U1")  # sorted: searched per shard
    tf = np.zeros(len(cand), np.int64)
    df = np.zeros(len(cand), np.int64)
    for g in get:
        s = g()
        loc = _global_ids(np.asarray(s["terms"]), cand_arr)
        k = loc >= 0
        np.add.at(tf, loc[k], np.asarray(s["tf"])[k])
        np.add.at(df, loc[k], np.asarray(s["df"])[k])
    keep = _select_top(tf, max_features, exact)
    cut = int(tf[keep].min()) if keep.size == max_features else 0
    guaranteed = exact or cut > bound_out
    if not guaranteed:
        warnings.warn(
            f"stream_vocabulary: the top-{max_features} cut (corpus tf {cut}) is not above the bound ({bound_out}) "
            "on terms outside the heavy-hitter candidates; raise local_k / candidate_k for a proven exact vocabulary",
            RuntimeWarning,
            stacklevel=2,
        )
    return {
        "terms": cand_arr[keep],
        "tf": tf[keep],
        "df": df[keep],
        "exact": bool(exact),
        "n_distinct": len(union),
        "guaranteed": bool(guaranteed),
    }


def _select_top(tf: np.ndarray, limit: int, exact: bool) -> np.ndarray:
    """Return the indices (ascending) of the kept terms: ``CountVectorizer._limit_features`` on alphabetical terms.

    ``exact``: the same float32 array and ``argsort`` as scikit-learn (whose term sums are float32;
    equal to the exact counts below 2**24), hence the same ties; otherwise the exact int64 counts.
    """
    if tf.shape[0] <= limit:
        return np.arange(tf.shape[0])
    key = tf.astype(np.float32) if exact else tf
    return np.sort((-key).argsort()[:limit])


# ---------------------------------------------------------------------------------------------- TF-IDF rows
def smooth_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """``TfidfTransformer(smooth_idf=True)``'s idf in float32 (its dtype for float32 counts): ln((1+N)/(1+df)) + 1."""
    d = df.astype(np.float32) + np.float32(1.0)
    idf = np.full_like(d, fill_value=n_docs + 1, dtype=np.float32)
    idf /= d
    np.log(idf, out=idf)
    idf += np.float32(1.0)
    return idf


def shard_rows(tok: dict, term_index, idf32: np.ndarray, n_threads: int | None = None):
    """Return ``(X, counts)`` of one token shard in the global vocabulary.

    ``X`` float32 CSR of L2-normalised TF-IDF rows (sorted indices) and ``counts`` float32
    CSR of the raw term counts (in-vocabulary terms only), as ``fit`` computes them (scikit-learn's
    ``TfidfTransformer`` + ``normalize`` arithmetic, bit for bit; one kernel,
    :func:`jkofast.kernels.sgr.stream.tfidf_rows`, parallel over passages).

    ``term_index`` maps a term to its global id: a dict, or the vocabulary's terms as a sorted
    str array (the id is the position).
    """
    import scipy.sparse as sp

    terms = np.asarray(tok["terms"])
    indptr = np.asarray(tok["indptr"], np.int64)
    n = indptr.shape[0] - 1
    V = idf32.shape[0]
    gid = _global_ids(terms, term_index)
    with numba_threads(n_threads):
        nnz = np.empty(n, np.int64)
        indices = np.asarray(tok["indices"], np.int32)
        _st.vocab_row_counts(indptr, indices, gid, nnz)
        total = int(nnz.sum())
        idt = np.int32 if max(total, V) < np.iinfo(np.int32).max else np.int64  # scipy's index dtype
        out_indptr = np.zeros(n + 1, idt)
        np.cumsum(nnz, out=out_indptr[1:])
        out_idx = np.empty(total, idt)
        c_data = np.empty(total, np.float32)
        x_data = np.empty(total, np.float32)
        counts = np.asarray(tok["counts"], np.int32)
        _st.tfidf_rows(indptr, indices, counts, gid, np.asarray(idf32, np.float32), out_indptr, out_idx, c_data, x_data)
    C = sp.csr_matrix((c_data, out_idx, out_indptr), shape=(n, V))
    X = sp.csr_matrix((x_data, out_idx.copy(), out_indptr.copy()), shape=(n, V))
    C.has_sorted_indices = X.has_sorted_indices = True
    return X, C


def _global_ids(terms: np.ndarray, term_index) -> np.ndarray:
    """int64 global id of each local term (-1 outside the vocabulary): dict look-ups or a sorted-array search."""
    if isinstance(term_index, dict):
        return np.fromiter((term_index.get(t, -1) for t in terms.tolist()), np.int64, len(terms))
    vocab = np.asarray(term_index)
    if vocab.shape[0] == 0 or terms.shape[0] == 0:
        return np.full(terms.shape[0], -1, np.int64)
    common = np.result_type(vocab.dtype, terms.dtype)  # the wider str type: no truncation in the search
    vocab, terms = vocab.astype(common, copy=False), terms.astype(common, copy=False)
    pos = np.minimum(np.searchsorted(vocab, terms), vocab.shape[0] - 1)
    return np.where(vocab[pos] == terms, pos, -1).astype(np.int64)
