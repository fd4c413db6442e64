"""Naive oracles for the sparse first stage (SPEC A.2.3, B.2): dict/NumPy, one query at a time.

Names are prefixed ``sparse_`` to stay unique in ``reference``'s merged namespace.
"""

from __future__ import annotations

import math
import re

import numpy as np


def sparse_tokenize_word(text):
    """JKO-RAG BM25 tokeniser: lowercase, all ``\\w+`` matches."""
    return re.findall(r"\w+", text.lower())


def sparse_bm25_okapi_scores(corpus_tokens, query_tokens, k1=1.5, b=0.75, epsilon=0.25):
    """rank_bm25 0.2.2 ``BM25Okapi.get_scores`` written out with dicts (float64)."""
    n = len(corpus_tokens)
    doc_len = [len(d) for d in corpus_tokens]
    avgdl = sum(doc_len) / n
    df = {}
    tfs = []
    for d in corpus_tokens:
        tf = {}
        for t in d:
            tf[t] = tf.get(t, 0) + 1
        tfs.append(tf)
        for t in tf:
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log(n - f + 0.5) - math.log(f + 0.5) for t, f in df.items()}
    avg_idf = sum(idf.values()) / len(idf)
    idf = {t: (epsilon * avg_idf if v < 0 else v) for t, v in idf.items()}
    out = np.zeros(n)
    for q in query_tokens:  # with repetition
        if q not in idf:
            continue
        for i in range(n):
            f = tfs[i].get(q, 0)
            out[i] += idf[q] * (f * (k1 + 1) / (f + k1 * (1 - b + b * doc_len[i] / avgdl)))
    return out


def sparse_bm25_lucene_scores(corpus_tokens, query_tokens, k1=1.5, b=0.75):
    """bm25s default (lucene idf, Robertson tf component), float64."""
    n = len(corpus_tokens)
    doc_len = [len(d) for d in corpus_tokens]
    avgdl = sum(doc_len) / n
    df = {}
    for d in corpus_tokens:
        for t in set(d):
            df[t] = df.get(t, 0) + 1
    out = np.zeros(n)
    for q in query_tokens:
        if q not in df:
            continue
        idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
        for i in range(n):
            f = corpus_tokens[i].count(q)
            out[i] += idf * f / (f + k1 * (1 - b + b * doc_len[i] / avgdl))
    return out


def sparse_tfidf_dense(counts):
    """sklearn TfidfTransformer(smooth_idf, raw tf, l2) on a dense (n_docs, V) count array."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.shape[0]
    df = (counts > 0).sum(0)
    idf = np.log((1 + n) / (1 + df)) + 1
    x = counts * idf
    nrm = np.sqrt((x * x).sum(1, keepdims=True))
    return np.divide(x, nrm, out=np.zeros_like(x), where=nrm > 0), idf


def sparse_cosine_dense(A, B=None):
    """Cosine between dense rows (0 for all-zero rows, 1 on the diagonal of non-zero rows)."""
    A = np.asarray(A, dtype=np.float64)
    Bm = A if B is None else np.asarray(B, dtype=np.float64)
    na = np.linalg.norm(A, axis=1)
    nb = np.linalg.norm(Bm, axis=1)
    den = np.outer(na, nb)
    C = np.divide(A @ Bm.T, den, out=np.zeros((A.shape[0], Bm.shape[0])), where=den > 0)
    C = np.clip(C, -1, 1)
    if B is None:
        np.fill_diagonal(C, (na > 0).astype(float))
    return C


def sparse_topk_padded(scores, k):
    """Exact top-k of a score vector (desc, ties -> lowest index), padded with -1 / -inf."""
    s = np.asarray(scores, dtype=np.float64)
    order = np.lexsort((np.arange(s.size), -s))[:k]
    idx = np.full(k, -1, np.int64)
    val = np.full(k, -np.inf)
    idx[: order.size] = order
    val[: order.size] = s[order]
    return idx, val
