"""The SGR index's document matrix: raw counts and TF-IDF rows, without importing scikit-learn.

The published retriever builds its index from scikit-learn's ``CountVectorizer`` (float32 counts)
and ``TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)``. The
functions here give the same arrays bit for bit (tested against scikit-learn), with jkofast's own
vocabulary (:class:`jkofast.sparse.Vocabulary`) and one small kernel: importing scikit-learn's text
module costs a process about a second, more than the arithmetic.
"""

from __future__ import annotations

import numpy as np

from jkofast._threads import over_ranges
from jkofast.kernels.sgr import build as _b
from jkofast.sparse.vocabulary import Vocabulary

__all__ = ["count_matrix", "tfidf_f32"]

# float32 holds every integer below this exactly: term frequencies under it are scikit-learn's float32 sums
EXACT_F32 = 2**24


def tfidf_f32(indptr, indices, counts, n_terms: int, order, n_threads=None):
    """Return ``(data, idf)``: the float32 TF-IDF values of a count matrix and the float32 idf as float64.

    Parameters
    ----------
    indptr, indices, counts : ndarray
        Canonical CSR (int64 indptr, sorted column ids per row, float32 counts > 0).
    n_terms : int
        Columns.
    order : ndarray of int64
        Positions into ``counts``, row by row: the order in which scikit-learn's matrix stores each
        row (its L2 norm is summed in that order).
    n_threads : int, optional

    Returns
    -------
    data : float32 ndarray, in the order of ``counts``
    idf : float64 ndarray (n_terms,), the float32 idf widened
    """
    from jkofast.sgr._vocab import smooth_idf  # imported here: its module also loads the streaming build's kernels

    n = indptr.shape[0] - 1
    idf = smooth_idf(np.bincount(indices, minlength=n_terms), n)
    data = counts.astype(np.float32)  # a copy
    data *= idf[indices]
    over_ranges(_b.l2_rows_in_order, n, n_threads, indptr, order, data)
    return data, idf.astype(np.float64)


def count_matrix(texts, analyzer, max_features):
    """Return ``(indptr, indices, counts, doc_len, terms, order)`` of ``texts``, as ``CountVectorizer`` counts them.

    ``counts`` float32 in canonical CSR over the alphabetical ``terms``; ``doc_len`` the analyser's
    tokens per text; ``order`` the positions of each row in scikit-learn's storage order (its terms
    in first-seen order). ``ValueError`` when no text has a token.

    ``max_features`` keeps the terms of largest corpus frequency as scikit-learn does: its float32
    frequencies, ``(-tf).argsort()`` (ties in NumPy's order), then alphabetical ids. The float32
    frequencies are exact below 2**24; above, scikit-learn itself counts (its sums decide).
    """
    vocab = Vocabulary(analyzer)
    (indptr, indices, counts, doc_len), rank = vocab._fit(texts)
    terms = vocab.terms
    n, V = indptr.shape[0] - 1, len(terms)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    if max_features is not None and V > max_features:
        tf = np.bincount(indices, weights=counts, minlength=V)
        if tf.max() >= EXACT_F32:
            return _count_matrix_sklearn(texts, analyzer, max_features)
        keep = np.sort((-tf.astype(np.float32)).argsort()[:max_features])
        new_id = np.full(V, -1, np.int64)
        new_id[keep] = np.arange(keep.shape[0])
        kept = new_id[indices] >= 0
        rows, indices, counts = rows[kept], new_id[indices[kept]], counts[kept]
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        terms, rank = [terms[i] for i in keep], rank[keep]
    order = np.lexsort((rank[indices], rows)).astype(np.int64)
    return indptr, indices, counts.astype(np.float32), doc_len, terms, order


def _count_matrix_sklearn(texts, analyzer, max_features):
    """:func:`count_matrix` by scikit-learn's ``CountVectorizer`` (a term frequency of 2**24 or more)."""
    from sklearn.feature_extraction.text import CountVectorizer

    split = analyzer.build()
    cv = CountVectorizer(analyzer=split, max_features=max_features, dtype=np.float32)
    X = cv.fit_transform(texts).tocsr()
    stored = X.indices.copy()  # scikit-learn's storage order, kept in ``order``
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    sort = np.lexsort((stored, rows))  # canonical entry p is stored entry sort[p]
    order = np.empty_like(sort)
    order[sort] = np.arange(sort.shape[0])  # stored entry k is canonical entry order[k]
    indptr = X.indptr.astype(np.int64)
    indices = stored[sort].astype(np.int64)
    counts = X.data[sort].astype(np.float32)
    doc_len = np.array([len(split(t)) for t in texts], dtype=np.int64)
    return indptr, indices, counts, doc_len, list(cv.get_feature_names_out()), order.astype(np.int64)
