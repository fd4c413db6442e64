"""Batched query scoring over term-major postings, with exact top-k.

Index layout (term-major, CSC-like): ``term_ptr`` int64 (n_terms + 1), ``post_docs`` int64
(nnz, ascending within a term), ``post_w`` float32/float64 (nnz) = precomputed per-(term, doc)
weight.  Queries: CSR ``(q_ptr, q_terms, q_w)`` with ``q_w`` float64 (query-term weight:
count for BM25, normalised tf-idf for cosine).

``score(d) = sum_{t in q} q_w[t] * W[t, d]``, accumulated in float64 in query-term order,
then posting order (serial per query => identical at any thread count).  ``prange`` runs
over fixed-size chunks of queries; each chunk owns a dense float64 accumulator and a
``touched`` list, and writes only its queries' output rows.

Top-k: order = score desc, ties -> lowest doc index: sorted insertion for k <= 16, the bounded
heap of ``jkofast.kernels.topk`` (``topk_ids``) for 16 < k < 64, quickselect + stable radix
sorts for k >= 64 (all give the same result).  When all
weights are positive (``positive=True``: BM25 with positive idf, TF-IDF) selection runs over
the touched documents only; untouched ones score exactly 0 and fill any remaining slots in
index order.  Otherwise every document is scanned.  Output rows are padded with ``-1`` /
``-inf`` when ``k > n_docs``.

k <= 16 with ``n_docs <= dense_ratio * (postings of the query)`` (or signed weights) takes a
cheaper route with the same sums: plain scatter-add into the dense accumulator (no touched
list), then ``_select_dense_small``: a threshold seeded from the query's shortest postings
list and a vectorised blocked scan of the scores (SciFact: ~2x less time per query than the
touched route).  Hot loops index with unsigned integers, which drops Numba's negative-index
wraparound code (~1.5x on the scatter-add).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel
from jkofast.kernels.sorting import select_kth, sort_range
from jkofast.kernels.topk import topk_ids

__all__ = ["score_dense_batch", "score_topk_batch"]

# index of the lowest set bit of a 64-bit word w: _DEBRUIJN64[((w & -w) * _DEBRUIJN_MUL) >> 58]
# (constants, frozen into the kernels at compile time)
_DEBRUIJN_MUL = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN64 = np.zeros(64, np.int64)
for _i in range(64):
    _DEBRUIJN64[((int(_DEBRUIJN_MUL) << _i) & 0xFFFFFFFFFFFFFFFF) >> 58] = _i
del _i


# _accumulate_touched repeats this loop plus the touched list (a flag tested in the hot loop costs speed)
@kernel()
def _accumulate_dense(term_ptr, post_docs, post_w, q_ptr, q_terms, q_w, q, acc):
    """Scatter-add query ``q`` into the dense float64 accumulator ``acc`` (n_docs,), in place."""
    for j in range(q_ptr[q], q_ptr[q + 1]):
        t = q_terms[j]
        w = q_w[j]
        lo = term_ptr[t]
        ln = term_ptr[t + 1] - lo
        docs = post_docs[lo : lo + ln]
        ws = post_w[lo : lo + ln]
        for p in range(ln):
            # unsigned index: no negative-index wraparound code in the hot loop (~1.5x)
            acc[np.uint64(docs[p])] += w * ws[p]


@kernel()
def _accumulate_touched(term_ptr, post_docs, post_w, q_ptr, q_terms, q_w, q, acc, touched):
    """Scatter-add query ``q`` into ``acc`` and list the touched documents; returns their count.

    Precondition: every product ``q_w * post_w`` is > 0, so ``acc[d] == 0`` exactly when d
    is untouched; the list is then built without a branch (always write, conditionally
    advance), which is several times faster than a stamp test on the hot loop.  ``touched``
    int64 needs n_docs + 1 entries (the branchless append writes one past the last).
    """
    # the loop of _accumulate_dense plus the list: a flag tested in the hot loop would cost speed
    nt = np.uint64(0)
    for j in range(q_ptr[q], q_ptr[q + 1]):
        t = q_terms[j]
        w = q_w[j]
        lo = term_ptr[t]
        ln = term_ptr[t + 1] - lo
        docs = post_docs[lo : lo + ln]
        ws = post_w[lo : lo + ln]
        for p in range(ln):
            d = np.uint64(docs[p])
            touched[nt] = d
            nt += np.uint64(acc[d] == 0.0)
            acc[d] += w * ws[p]
    return np.int64(nt)


# its insertion step is written out again twice in _select_dense_small: a call per offer costs more
@kernel()
def _select_small(acc, touched, nt, kk, out_idx, out_val):
    """Top-kk of ``acc[touched[:nt]]`` for small kk (<= 16) into ``out_*``; returns the count.

    Insertion into the sorted output (desc score, ties -> lowest doc id).  Cheaper than a
    heap here because the ~k ln(n/k) replacements are a few short shifts; the gate on the
    k-th score is one compare.
    """
    m = 0
    thr = -np.inf
    for i in range(nt):
        d = touched[i]
        s = acc[np.uint64(d)]
        if s >= thr or m < kk:
            if m == kk and not (s > out_val[m - 1] or (s == out_val[m - 1] and d < out_idx[m - 1])):
                continue
            j = m - 1 if m == kk else m
            while j > 0 and (s > out_val[j - 1] or (s == out_val[j - 1] and d < out_idx[j - 1])):
                out_val[j] = out_val[j - 1]
                out_idx[j] = out_idx[j - 1]
                j -= 1
            out_val[j] = s
            out_idx[j] = d
            if m < kk:
                m += 1
            if m == kk:
                thr = out_val[m - 1]
    return m


@kernel()
def _select_dense_small(acc, n_docs, kk, seed, seed_lo, seed_hi, out_idx, out_val):
    """Top-kk (kk <= 16) of the dense ``acc[0:n_docs]`` into ``out_*``; returns the count.

    Order: desc score, ties -> lowest doc id.

    ``seed[seed_lo:seed_hi]``: distinct doc ids (a short postings list of the query) whose
    best kk scores start the buffer when there are >= kk of them: the k-th best of any kk
    documents bounds the final k-th score from below, so the scan starts with a high
    threshold.  The scan compares blocks of 64 scores with the threshold into a 64-bit mask
    (vectorised by LLVM: constant trip count, unsigned indices so no wraparound check) and
    visits only the set bits (lowest first, de Bruijn bit index); seeded documents met again
    are skipped.  Insertion is written out inline, here and in ``_select_small`` (a call per
    offer costs more than the offer).
    """
    m = 0
    seeded = seed_hi - seed_lo >= kk
    d0 = 0
    n_fill = seed_hi - seed_lo if seeded else n_docs
    for i in range(n_fill):
        if seeded:
            d = seed[seed_lo + i]
        else:
            if m == kk:
                break
            d = i
            d0 = i + 1
        s = acc[d]
        if m == kk:
            if not (s > out_val[kk - 1] or (s == out_val[kk - 1] and d < out_idx[kk - 1])):
                continue
            j = kk - 1
        else:
            j = m
            m += 1
        while j > 0 and (s > out_val[j - 1] or (s == out_val[j - 1] and d < out_idx[j - 1])):
            out_val[j] = out_val[j - 1]
            out_idx[j] = out_idx[j - 1]
            j -= 1
        out_val[j] = s
        out_idx[j] = d
    if m < kk:
        return m
    thr = out_val[kk - 1]
    one = np.uint64(1)
    while d0 < n_docs:
        nb = min(64, n_docs - d0)
        if nb == 64:
            mask = np.uint64(0)
            base = np.uint64(d0)
            for i in range(np.uint64(64)):
                mask |= np.uint64(acc[base + i] >= thr) << i
        else:
            mask = (one << np.uint64(nb)) - one  # tail: every document
        while mask != 0:
            low = mask & (~mask + one)  # lowest set bit
            mask ^= low
            d = d0 + _DEBRUIJN64[(low * _DEBRUIJN_MUL) >> np.uint64(58)]
            s = acc[d]
            if s >= thr and (s > thr or d < out_idx[kk - 1]):
                if seeded:
                    dup = False
                    for j in range(kk):
                        dup |= out_idx[j] == d
                    if dup:
                        continue
                j = kk - 1
                while j > 0 and (s > out_val[j - 1] or (s == out_val[j - 1] and d < out_idx[j - 1])):
                    out_val[j] = out_val[j - 1]
                    out_idx[j] = out_idx[j - 1]
                    j -= 1
                out_val[j] = s
                out_idx[j] = d
                thr = out_val[kk - 1]
        d0 += nb
    return m


@kernel()
def _select_partition(acc, touched, nt, kk, out_idx, out_val):
    """Top-kk of ``acc[touched[:nt]]`` for large kk into ``out_*``; returns the count.

    Quickselect the kk-th largest score, keep the docs above it plus the lowest-id docs equal
    to it, then sort those by score (desc) and id (asc).  Same result as the heap.
    """
    m = min(kk, nt)
    if m == 0:
        return 0
    vals = np.empty(nt, np.float64)
    for i in range(nt):
        vals[i] = acc[np.uint64(touched[i])]
    thr = select_kth(vals, np.int64(0), np.int64(nt), np.int64(nt - m)) if nt > m else -np.inf
    cid = np.empty(m, np.int64)
    eq = np.empty(nt, np.int64)
    cnt = 0
    neq = 0
    for i in range(nt):
        d = touched[i]
        s = acc[d]
        if s > thr:
            cid[cnt] = d
            cnt += 1
        elif s == thr:
            eq[neq] = d
            neq += 1
    if cnt < m:
        sort_range(eq, np.int64(0), np.int64(neq))  # the query's own scratch: sorted in place
        for j in range(m - cnt):
            cid[cnt] = eq[j]
            cnt += 1
    # order (score desc, id asc) with two stable LSD radix sorts (8-bit digits): by id, then
    # by a key whose unsigned order is the descending float order (several times faster than
    # argsort here: BM25 scores have many exact ties)
    key = np.zeros(m, np.uint64)
    ids = np.empty(m, np.int64)
    key2 = np.empty(m, np.uint64)
    ids2 = np.empty(m, np.int64)
    cnt = np.empty(256, np.int64)
    for i in range(m):
        key[i] = np.uint64(cid[i])
        ids[i] = cid[i]
    swapped = _radix_sort_pairs(key, ids, key2, ids2, m, cnt)
    if swapped:
        key, key2 = key2, key
        ids, ids2 = ids2, ids
    vals = np.empty(m, np.float64)
    for i in range(m):
        vals[i] = acc[ids[i]] + 0.0  # + 0.0: -0.0 -> 0.0 (equal floats, one key)
    bits = vals.view(np.uint64)
    top = np.uint64(1) << np.uint64(63)
    for i in range(m):
        b = bits[i]
        b = ~b if b & top else b | top  # unsigned order == float order
        key[i] = ~b  # ascending key == descending score
    swapped = _radix_sort_pairs(key, ids, key2, ids2, m, cnt)
    if swapped:
        ids = ids2
    for r in range(m):
        d = ids[r]
        out_idx[r] = d
        out_val[r] = acc[d]
    return m


@kernel()
def _radix_sort_pairs(key, ids, key2, ids2, m, cnt):
    """Stable LSD radix sort of ``(key[:m], ids[:m])`` by the uint64 key, 8 bits a pass.

    Ping-pongs with ``key2, ids2``; ``cnt`` int64 (256,) is scratch; passes whose digit is
    constant are skipped.  Returns True when the sorted data ended in ``key2, ids2``.
    """
    swapped = False
    for sh in range(0, 64, 8):
        shift = np.uint64(sh)
        cnt[:] = 0
        for i in range(m):
            cnt[(key[i] >> shift) & np.uint64(255)] += 1
        if cnt[(key[0] >> shift) & np.uint64(255)] == m:
            continue  # every key has this digit
        tot = 0
        for b in range(256):
            c = cnt[b]
            cnt[b] = tot
            tot += c
        for i in range(m):
            b = (key[i] >> shift) & np.uint64(255)
            pos = cnt[b]
            key2[pos] = key[i]
            ids2[pos] = ids[i]
            cnt[b] = pos + 1
        key, key2 = key2, key
        ids, ids2 = ids2, ids
        swapped = not swapped
    return swapped


@kernel()
def _seed_postings(term_ptr, q_ptr, q_terms, q, kk):
    """Count the postings of query ``q`` and find its shortest postings list holding >= kk docs.

    Returns ``(n_post, seed_lo, seed_hi)``; ``seed_lo == seed_hi`` when no list is long enough.
    """
    n_post = 0
    seed_lo = 0
    seed_hi = 0
    for j in range(q_ptr[q], q_ptr[q + 1]):
        t = q_terms[j]
        ln = term_ptr[t + 1] - term_ptr[t]
        n_post += ln
        if ln >= kk and (seed_hi == seed_lo or ln < seed_hi - seed_lo):
            seed_lo = term_ptr[t]
            seed_hi = term_ptr[t + 1]
    return n_post, seed_lo, seed_hi


@kernel()
def _select_listed(acc, ids, n, kk, hv, hi, out_idx, out_val):
    """Top-kk of ``acc[ids[:n]]`` into ``out_*`` by the kk-dependent method; returns the count.

    Insertion for kk <= 16, quickselect + radix sorts for kk >= 64, the bounded heap of
    ``jkofast.kernels.topk`` in between (``hv`` float64 / ``hi`` int64 scratch, >= kk); the
    same result each way.
    """
    if kk <= 16:
        return _select_small(acc, ids, n, kk, out_idx, out_val)
    if kk >= 64:
        return _select_partition(acc, ids, n, kk, out_idx, out_val)
    return topk_ids(acc, ids, n, kk, out_idx, out_val, hv, hi)


@kernel()
def _topk_chunk(
    term_ptr, post_docs, post_w, n_docs, q_ptr, q_terms, q_w, k, positive, dense_ratio, q_start, q_end, out_idx, out_val
):
    """Run the serial body of ``score_topk_batch`` for queries ``q_start:q_end``.

    Kept out of the parfor so the hot loops compile as plain signed-integer loops.  Per query:
    accumulate (dense, or with the touched list), select the top kk, reset the accumulator,
    write row ``q`` of ``out_*`` (padded with -1 / -inf past ``n_docs``).
    """
    kk = min(k, n_docs)
    acc = np.zeros(n_docs, np.float64)
    touched = np.empty(n_docs + 1, np.int64)  # +1: the branchless append writes one past
    all_ids = np.arange(n_docs)
    tidx = np.empty(max(kk, 1), np.int64)
    tval = np.empty(max(kk, 1), np.float64)
    hv = np.empty(max(kk, 1), np.float64)
    hi = np.empty(max(kk, 1), np.int64)
    for q in range(q_start, q_end):
        m = -1  # -1: not yet selected
        if kk <= 16:
            n_post, seed_lo, seed_hi = _seed_postings(term_ptr, q_ptr, q_terms, q, kk)
            if not positive or n_docs <= dense_ratio * n_post:
                # dense accumulator + blocked threshold scan: no touched list; the same
                # float64 sums, so the same result as the touched path below
                _accumulate_dense(term_ptr, post_docs, post_w, q_ptr, q_terms, q_w, q, acc)
                if not positive:
                    seed_hi = seed_lo
                m = _select_dense_small(acc, n_docs, kk, post_docs, seed_lo, min(seed_hi, seed_lo + 1024), tidx, tval)
                acc[:] = 0.0
        if m < 0 and positive:
            # untouched docs score exactly 0 < every touched score
            nt = _accumulate_touched(term_ptr, post_docs, post_w, q_ptr, q_terms, q_w, q, acc, touched)
            m = _select_listed(acc, touched, nt, kk, hv, hi, tidx, tval)
            d = 0
            while m < kk:  # fill with untouched (zero-score) docs in index order
                if acc[d] == 0.0:
                    tidx[m] = d
                    tval[m] = 0.0
                    m += 1
                d += 1
            for i in range(nt):
                acc[np.uint64(touched[i])] = 0.0
        elif m < 0:
            # signed weights: exact selection over every document
            _accumulate_dense(term_ptr, post_docs, post_w, q_ptr, q_terms, q_w, q, acc)
            m = _select_listed(acc, all_ids, n_docs, kk, hv, hi, tidx, tval)
            acc[:] = 0.0
        for r in range(m):
            out_idx[q, r] = tidx[r]
            out_val[q, r] = tval[r]
        for r in range(m, k):
            out_idx[q, r] = -1
            out_val[q, r] = -np.inf


# chunked prange head as in score_dense_batch: each parallel kernel must hold its own prange loop
@kernel(parallel=True)
def score_topk_batch(
    term_ptr, post_docs, post_w, n_docs, q_ptr, q_terms, q_w, k, positive, dense_ratio, chunk, out_idx, out_val
):
    """Top-k documents per query (layout and order in the module docstring).

    ``out_idx`` int64 (nq, k), ``out_val`` float32 (nq, k), every entry written (rows padded
    with -1 / -inf when ``k > n_docs``); ``k >= 1``; ``chunk >= 1`` queries per parallel task
    (does not change results); query term ids < n_terms.  ``positive``: every
    ``q_w * post_w`` product is > 0 (BM25 with positive idf, TF-IDF) -- enables the touched-
    list path; otherwise every document is scanned.  ``dense_ratio`` (>= 0): for k <= 16, a
    positive query whose postings number at least ``n_docs / dense_ratio`` uses the dense
    scan instead of the touched list (0: never; results do not depend on it).  Returns 0.
    """
    nq = q_ptr.shape[0] - 1
    n_chunks = (nq + chunk - 1) // chunk
    for c in prange(n_chunks):
        q_start = np.int64(c) * chunk
        q_end = min(nq, q_start + chunk)
        _topk_chunk(
            term_ptr,
            post_docs,
            post_w,
            n_docs,
            q_ptr,
            q_terms,
            q_w,
            k,
            positive,
            dense_ratio,
            q_start,
            q_end,
            out_idx,
            out_val,
        )
    return 0


@kernel()
def _dense_chunk(term_ptr, post_docs, post_w, n_docs, q_ptr, q_terms, q_w, q_start, q_end, out):
    """Write the full score rows ``out[q_start:q_end]`` (serial body of ``score_dense_batch``)."""
    acc = np.zeros(n_docs, np.float64)
    for q in range(q_start, q_end):
        _accumulate_dense(term_ptr, post_docs, post_w, q_ptr, q_terms, q_w, q, acc)
        for d in range(n_docs):
            out[q, d] = acc[d]
            acc[d] = 0.0


# chunked prange head as in score_topk_batch: each parallel kernel must hold its own prange loop
@kernel(parallel=True)
def score_dense_batch(term_ptr, post_docs, post_w, n_docs, q_ptr, q_terms, q_w, chunk, out):
    """Full score vectors: ``out`` (nq, n_docs) float32/float64, every entry written.

    float64 accumulation in query-term order, rows written by their owner chunk (prange over
    chunks of ``chunk`` queries).  Returns 0.
    """
    nq = q_ptr.shape[0] - 1
    n_chunks = (nq + chunk - 1) // chunk
    for c in prange(n_chunks):
        q_start = np.int64(c) * chunk
        q_end = min(nq, q_start + chunk)
        _dense_chunk(term_ptr, post_docs, post_w, n_docs, q_ptr, q_terms, q_w, q_start, q_end, out)
    return 0
