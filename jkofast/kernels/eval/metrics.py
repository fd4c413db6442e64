"""Ranking metrics over ragged (offsets, doc-id rows, scores / labels) batches.

Layout (one query per row, ``q`` in ``[0, n_queries)``):

* run:   ``run_indptr`` int64 (nq + 1,), ``run_ids`` uint64 (n_run, n_words),
  ``run_scores`` float32 (n_run,): query ``q`` is rows ``[run_indptr[q], run_indptr[q+1])``;
* qrels: ``qrels_indptr`` int64 (nq + 1,), ``qrels_ids`` uint64 (n_qrels, n_words),
  ``qrels_labels`` int64; ids unique within a query (precondition).

Doc ids are rows of uint64 *words* (never hashes): the wrapper packs each id's UTF-8 bytes
big-endian, 8 per word, zero-padded (``pack_id_bytes`` / ``pack_ucs4_rows``), so that
comparing rows word by word is C ``strcmp`` order — the order trec_eval breaks score ties
with (doc id *descending*).  Integer codes fit the same interface as one-word rows
(``code ^ 2**63``, which keeps the signed order).  Scores are float32 because trec_eval
stores ``sim`` as a C ``float`` (ties are decided at float32 precision).

Metric kinds (``metric_kinds``) and cutoffs (``metric_ks``; ``k <= 0`` = whole list):
``NDCG, RECALL, PRECISION, RR, AP, HIT`` (AP with a cutoff is trec_eval's ``map_cut``; HIT@k is
trec_eval's ``success_k``: 1 when a relevant document is in the top k).
Gains: ``GAIN_LINEAR`` (label) or ``GAIN_EXPONENTIAL`` (2**label - 1).

Conventions, per ``tie_mode``:

* ``TIE_TREC_EVAL``: sort (score desc, id desc); when ``dedupe`` is set, an id repeated
  inside a query keeps its *last* occurrence in input order (Python-dict semantics, what a
  dict-based run such as pytrec_eval's holds); negative labels give gain 0 in DCG and
  ideal DCG (trec_eval).
* ``TIE_GIVEN``: the list order as given, duplicates counted each time, literal gains
  (a negative label has a negative gain), ideal DCG over the k largest qrels labels — the
  published JKO-RAG evaluator (SPEC A.7.1).

"relevant" means label > 0 everywhere (trec_eval's default ``relevance_level = 1`` on
integer labels).  All arithmetic is float64, serial within a query, so results do not
depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel
from jkofast.kernels.sorting import argsort_stable, sort_range

__all__ = [
    "AP",
    "GAIN_EXPONENTIAL",
    "GAIN_LINEAR",
    "HIT",
    "NDCG",
    "PRECISION",
    "RECALL",
    "RR",
    "TIE_GIVEN",
    "TIE_TREC_EVAL",
    "evaluate_batch_chars",
    "evaluate_batch_chars_trec",
    "pack_id_bytes",
    "pack_ucs4_rows",
    "query_metrics",
    "split_lengths",
    "ucs4_rows_utf8_length",
]

NDCG = 0
RECALL = 1
PRECISION = 2
RR = 3
AP = 4
HIT = 5

GAIN_LINEAR = 0
GAIN_EXPONENTIAL = 1

TIE_TREC_EVAL = 0
TIE_GIVEN = 1


@kernel(inline="always")
def _gain(label, gain_mode, clamp):
    """Gain of one label (float64)."""
    if clamp and label < 0:
        return 0.0
    if gain_mode == GAIN_EXPONENTIAL:
        return 2.0**label - 1.0
    return float(label)


@kernel()
def _dcg(labels, n, gain_mode, clamp):
    """Return the DCG of the first ``n`` labels: sum of gain / log2(rank + 1), in rank order (float64)."""
    dcg = 0.0
    for i in range(n):
        g = _gain(labels[i], gain_mode, clamp)
        if g != 0.0:
            dcg += g / np.log2(i + 2.0)
    return dcg


@kernel()
def _hits(labels, n):
    """Count the relevant (label > 0) documents among the first ``n`` ranks."""
    hits = 0
    for i in range(n):
        if labels[i] > 0:
            hits += 1
    return hits


@kernel()
def _reciprocal_rank(labels, n):
    """Return 1 / rank of the first relevant document within the first ``n`` ranks (0 when none)."""
    for i in range(n):
        if labels[i] > 0:
            return 1.0 / (i + 1.0)
    return 0.0


@kernel()
def _precision_sum(labels, n):
    """Sum over the relevant ranks r <= ``n`` of precision at r (AP's numerator)."""
    hits = 0
    acc = 0.0
    for i in range(n):
        if labels[i] > 0:
            hits += 1
            acc += hits / (i + 1.0)
    return acc


@kernel()
def query_metrics(labels, ideal, num_rel, metric_kinds, metric_ks, gain_mode, clamp, out):
    """All requested metrics of one query from its ranked labels.

    ``labels`` int64: label of the doc at each rank; ``ideal`` int64: qrels labels sorted
    descending; ``num_rel``: number of qrels docs with label > 0; ``metric_kinds`` /
    ``metric_ks`` int64 (n_metrics,); ``clamp``: negative labels give gain 0.  Writes
    ``out[m]`` (float64) for every metric m; a metric without relevant documents is 0.
    """
    n = labels.shape[0]
    n_ideal = ideal.shape[0]
    for m in range(metric_kinds.shape[0]):
        kind = metric_kinds[m]
        k = metric_ks[m]
        kk = n if k <= 0 else min(k, n)
        val = 0.0
        if kind == NDCG:
            dcg = _dcg(labels, kk, gain_mode, clamp)
            idcg = _dcg(ideal, n_ideal if k <= 0 else min(k, n_ideal), gain_mode, clamp)
            if idcg > 0.0:
                val = dcg / idcg
        elif kind == RECALL:
            if num_rel > 0:
                val = _hits(labels, kk) / num_rel
        elif kind == PRECISION:
            denom = k if k > 0 else n
            if denom > 0:
                val = _hits(labels, kk) / denom
        elif kind == RR:
            val = _reciprocal_rank(labels, kk)
        elif kind == AP:
            if num_rel > 0:
                val = _precision_sum(labels, kk) / num_rel
        elif kind == HIT:
            val = 1.0 if _hits(labels, kk) > 0 else 0.0
        out[m] = val


# --------------------------------------------------------------------------------------
# Doc ids as rows of big-endian uint64 words (see the module docstring)


@kernel()
def _cmp_rows(a, i, b, j):
    """-1 / 0 / 1 comparing row ``a[i]`` with row ``b[j]`` (same width, zero-padded)."""
    for c in range(a.shape[1]):
        x = a[i, c]
        y = b[j, c]
        if x != y:
            return -1 if x < y else 1
    return 0


@kernel()
def _before(mode, i, j, scores, chars):
    """Return True when row ``i`` comes strictly before row ``j`` in the merge sort's order.

    Mode 0 = id ascending; mode 1 = trec_eval ranking (score desc, then id desc).
    """
    if mode == 0:
        return _cmp_rows(chars, i, chars, j) < 0
    if scores[i] != scores[j]:
        return scores[i] > scores[j]
    return _cmp_rows(chars, i, chars, j) > 0


@kernel()
def _merge_sort(idx, mode, scores, chars):
    """Stable bottom-up merge sort of the row indices ``idx`` (returns a sorted copy)."""
    n = idx.shape[0]
    src = idx.copy()
    dst = np.empty_like(src)
    width = 1
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if _before(mode, src[j], src[i], scores, chars):
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
            lo += 2 * width
        tmp = src
        src = dst
        dst = tmp
        width *= 2
    return src


@kernel()
def _sort_rows_by_id(rows, chars):
    """Stable sort of row indices by id (ascending); one-word ids use a numeric sort."""
    if chars.shape[1] == 1:
        keys = np.empty(rows.shape[0], dtype=np.uint64)
        for j in range(rows.shape[0]):
            keys[j] = chars[rows[j], 0]
        o = argsort_stable(keys)
        out = np.empty_like(rows)
        for j in range(rows.shape[0]):
            out[j] = rows[o[j]]
        return out
    return _merge_sort(rows, 0, np.zeros(1, dtype=np.float32), chars)


@kernel()
def _trec_sort(rows, scores, chars):
    """Rows (unique ids) in trec_eval order: score desc, then id desc."""
    n = rows.shape[0]
    # float64 keys (exact for float32 scores, the same order and ties): the argsort the baselines compile
    keys = np.empty(n, dtype=np.float64)
    for j in range(n):
        keys[j] = -np.float64(scores[rows[j]])
    o = argsort_stable(keys)
    out = np.empty_like(rows)
    for j in range(n):
        out[j] = rows[o[j]]
    # equal scores: order by id descending (ids are unique, so the result is unique)
    i = 0
    while i < n:
        j = i + 1
        while j < n and scores[out[j]] == scores[out[i]]:
            j += 1
        if j - i > 1:
            grp = _sort_rows_by_id(out[i:j].copy(), chars)
            for t in range(j - i):
                out[i + t] = grp[j - i - 1 - t]
        i = j
    return out


@kernel()
def _ranked_rows(r0, r1, scores, chars, dedupe):
    """Global run row indices of one query in trec_eval's ranked order (see module docstring)."""
    n = r1 - r0
    rows = np.arange(r0, r1)
    if dedupe and n > 1:
        by_id = _sort_rows_by_id(rows, chars)
        keep = np.ones(n, dtype=np.bool_)
        n_keep = n
        for j in range(n - 1):
            # stable sort: equal ids keep input order, so the last of a group wins
            if _cmp_rows(chars, by_id[j], chars, by_id[j + 1]) == 0:
                keep[by_id[j] - r0] = False
                n_keep -= 1
        if n_keep < n:
            kept = np.empty(n_keep, dtype=np.int64)
            m = 0
            for j in range(n):
                if keep[j]:
                    kept[m] = r0 + j
                    m += 1
            rows = kept
    for j in range(1, rows.shape[0]):
        if _before(1, rows[j], rows[j - 1], scores, chars):
            return _trec_sort(rows, scores, chars)
    return rows


@kernel()
def split_lengths(buf, sep, starts, lengths):
    """Split ``buf`` (uint8) at every ``sep`` byte into ``starts.shape[0]`` pieces.

    Writes their starts and lengths (int64) in place; returns the number of pieces found
    (the caller checks it against the expected count).
    """
    n = starts.shape[0]
    m = 0
    s = 0
    for i in range(buf.shape[0]):
        if buf[i] == sep:
            if m < n:
                starts[m] = s
                lengths[m] = i - s
            m += 1
            s = i + 1
    if m < n:
        starts[m] = s
        lengths[m] = buf.shape[0] - s
    return m + 1


@kernel()
def pack_id_bytes(buf, starts, lengths, out):
    """Pack byte strings ``buf[starts[i]:starts[i] + lengths[i]]`` into rows of big-endian uint64 words.

    ``out`` (n, n_words) uint64, zero-initialised by the caller, wide enough; rows are
    zero-padded, so that comparing rows word by word is ``strcmp`` order on the bytes.
    """
    for i in range(starts.shape[0]):
        s = starts[i]
        for c in range(lengths[i]):
            out[i, c >> 3] |= np.uint64(buf[s + c]) << np.uint64(8 * (7 - (c & 7)))


@kernel()
def _put_byte(out, i, pos, b):
    """OR byte ``b`` into position ``pos`` of the big-endian word row ``out[i]``."""
    out[i, pos >> 3] |= np.uint64(b) << np.uint64(8 * (7 - (pos & 7)))


@kernel()
def ucs4_rows_utf8_length(cps, out_len):
    """UTF-8 byte length of each zero-padded row of code points (uint32 (n, w))."""
    for i in range(cps.shape[0]):
        m = 0
        for c in range(cps.shape[1]):
            x = cps[i, c]
            if x == 0:
                break
            if x < 0x80:
                m += 1
            elif x < 0x800:
                m += 2
            elif x < 0x10000:
                m += 3
            else:
                m += 4
        out_len[i] = m


@kernel()
def pack_ucs4_rows(cps, out):
    """UTF-8-encode zero-padded code-point rows into big-endian uint64 word rows.

    ``cps`` uint32 (n, w) is a numpy ``U`` array viewed as code points; ``out`` (n, n_words)
    uint64 is zero-initialised by the caller and wide enough (``ucs4_rows_utf8_length``).
    """
    m6 = np.uint64(0x3F)
    c80 = np.uint64(0x80)
    s6 = np.uint64(6)
    s12 = np.uint64(12)
    s18 = np.uint64(18)
    for i in range(cps.shape[0]):
        pos = np.int64(0)  # not the literal 0, for which Numba also compiles _put_byte (Literal[int](0))
        for c in range(cps.shape[1]):
            x = np.uint64(cps[i, c])
            if x == np.uint64(0):
                break
            if x < np.uint64(0x80):
                _put_byte(out, i, pos, x)
                pos += 1
            elif x < np.uint64(0x800):
                _put_byte(out, i, pos, np.uint64(0xC0) | (x >> s6))
                _put_byte(out, i, pos + 1, c80 | (x & m6))
                pos += 2
            elif x < np.uint64(0x10000):
                _put_byte(out, i, pos, np.uint64(0xE0) | (x >> s12))
                _put_byte(out, i, pos + 1, c80 | ((x >> s6) & m6))
                _put_byte(out, i, pos + 2, c80 | (x & m6))
                pos += 3
            else:
                _put_byte(out, i, pos, np.uint64(0xF0) | (x >> s18))
                _put_byte(out, i, pos + 1, c80 | ((x >> s12) & m6))
                _put_byte(out, i, pos + 2, c80 | ((x >> s6) & m6))
                _put_byte(out, i, pos + 3, c80 | (x & m6))
                pos += 4


@kernel(inline="always")
def _query_values(rows, g0, g1, run_scores, run_chars, qrels_chars, qrels_labels, kinds, ks, gain_mode, clamp, out_q):
    """Write into ``out_q`` the metrics of one query ranking run rows ``rows`` (its qrels: rows ``[g0, g1)``)."""
    # qrels of the query sorted by id, for binary search
    qrows = _merge_sort(np.arange(g0, g1), 0, run_scores, qrels_chars)
    nqr = qrows.shape[0]
    labels = np.zeros(rows.shape[0], dtype=np.int64)
    for j in range(rows.shape[0]):
        r = rows[j]
        lo = 0
        hi = nqr
        while lo < hi:
            mid = (lo + hi) >> 1
            if _cmp_rows(qrels_chars, qrows[mid], run_chars, r) < 0:
                lo = mid + 1
            else:
                hi = mid
        if lo < nqr and _cmp_rows(qrels_chars, qrows[lo], run_chars, r) == 0:
            labels[j] = qrels_labels[qrows[lo]]
    ideal = qrels_labels[g0:g1].copy()
    sort_range(ideal, np.int64(0), np.int64(ideal.shape[0]))
    ideal = ideal[::-1].copy()
    num_rel = np.int64(0)  # not the literal 0, for which Numba also compiles query_metrics (Literal[int](0))
    for j in range(ideal.shape[0]):
        if ideal[j] > 0:
            num_rel += 1
    query_metrics(labels, ideal, num_rel, kinds, ks, gain_mode, clamp, out_q)


# Two kernels, one per tie mode, so that a caller of one convention compiles only its own path: the
# given order never sorts a run (the trec_eval order's sorts, de-duplication and their callees are
# about a third of the metrics' compile time).
@kernel(parallel=True)
def evaluate_batch_chars(
    run_indptr,
    run_chars,
    run_scores,
    qrels_indptr,
    qrels_chars,
    qrels_labels,
    metric_kinds,
    metric_ks,
    gain_mode,
    out,
    out_n_ret,
):
    """All requested metrics for a batch of queries, ``TIE_GIVEN`` (layout in the module docstring).

    prange over queries; row ``q`` of ``out`` (float64 (nq, n_metrics)) and
    ``out_n_ret[q]`` (int64: ranked docs used) are written by iteration ``q`` only. Qrels ids
    must be unique within a query. Returns 0 (OK).
    """
    nq = run_indptr.shape[0] - 1
    for q in prange(nq):
        rows = np.arange(run_indptr[q], run_indptr[q + 1])
        out_n_ret[q] = rows.shape[0]
        _query_values(
            rows,
            qrels_indptr[q],
            qrels_indptr[q + 1],
            run_scores,
            run_chars,
            qrels_chars,
            qrels_labels,
            metric_kinds,
            metric_ks,
            gain_mode,
            False,
            out[q],
        )
    return 0


@kernel(parallel=True)
def evaluate_batch_chars_trec(
    run_indptr,
    run_chars,
    run_scores,
    qrels_indptr,
    qrels_chars,
    qrels_labels,
    metric_kinds,
    metric_ks,
    gain_mode,
    dedupe,
    out,
    out_n_ret,
):
    """All requested metrics for a batch of queries, ``TIE_TREC_EVAL`` (layout in the module docstring).

    As :func:`evaluate_batch_chars`; ``out_n_ret[q]`` counts the ranked docs after de-duplication
    (``dedupe``).
    """
    nq = run_indptr.shape[0] - 1
    for q in prange(nq):
        rows = _ranked_rows(run_indptr[q], run_indptr[q + 1], run_scores, run_chars, dedupe)
        out_n_ret[q] = rows.shape[0]
        _query_values(
            rows,
            qrels_indptr[q],
            qrels_indptr[q + 1],
            run_scores,
            run_chars,
            qrels_chars,
            qrels_labels,
            metric_kinds,
            metric_ks,
            gain_mode,
            True,
            out[q],
        )
    return 0
