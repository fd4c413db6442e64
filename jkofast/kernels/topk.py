"""Exact top-k selection with a bounded min-heap.

Order: descending score, ties broken by **lowest index** (deterministic, thread-count
independent).  Strict IEEE (no fastmath): ``-inf`` is a legal score and sorts last;
NaN is a precondition violation (wrappers reject it).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel


@kernel(inline="always")
def _below(s1, i1, s2, i2):
    """True when (s1, i1) ranks strictly below (s2, i2)."""
    return s1 < s2 or (s1 == s2 and i1 > i2)


@kernel()
def _sift_down(hv, hi, pos, n):
    """Restore the min-heap property (root = worst kept item) from ``pos``."""
    while True:
        left = 2 * pos + 1
        if left >= n:
            return
        child = left
        right = left + 1
        if right < n and _below(hv[right], hi[right], hv[left], hi[left]):
            child = right
        if _below(hv[child], hi[child], hv[pos], hi[pos]):
            tv = hv[pos]
            ti = hi[pos]
            hv[pos] = hv[child]
            hi[pos] = hi[child]
            hv[child] = tv
            hi[child] = ti
            pos = child
        else:
            return


@kernel()
def _heap_push_or_replace(hv, hi, n, k, s, i):
    """Offer item (s, i) to a heap holding ``n`` of at most ``k`` items; returns new n."""
    if n < k:
        # sift up
        pos = n
        hv[pos] = s
        hi[pos] = i
        while pos > 0:
            parent = (pos - 1) // 2
            if _below(hv[pos], hi[pos], hv[parent], hi[parent]):
                tv = hv[pos]
                ti = hi[pos]
                hv[pos] = hv[parent]
                hi[pos] = hi[parent]
                hv[parent] = tv
                hi[parent] = ti
                pos = parent
            else:
                break
        return n + 1
    if _below(hv[0], hi[0], s, i):
        hv[0] = s
        hi[0] = i
        _sift_down(hv, hi, 0, n)
    return n


@kernel()
def _heap_sorted_out(hv, hi, n, out_idx, out_val):
    """Pop the heap into ``out_*[0:n]`` in descending order (destroys the heap)."""
    m = n
    while m > 0:
        out_idx[m - 1] = hi[0]
        out_val[m - 1] = hv[0]
        m -= 1
        hv[0] = hv[m]
        hi[0] = hi[m]
        _sift_down(hv, hi, 0, m)


@kernel()
def topk_select(scores, k, out_idx, out_val):
    """Top-k of a 1-D score array.

    Parameters: ``scores`` float32/float64 (n,); ``k >= 0``; ``out_idx`` int64 (>= min(k, n),);
    ``out_val`` same dtype as scores.  Writes ``min(k, n)`` entries in ranked order and returns
    that count.
    """
    n = scores.shape[0]
    kk = min(k, n)
    if kk <= 0:
        return 0
    hv = np.empty(kk, dtype=scores.dtype)
    hi = np.empty(kk, dtype=np.int64)
    m = 0
    for i in range(n):
        m = _heap_push_or_replace(hv, hi, m, kk, scores[i], i)
    _heap_sorted_out(hv, hi, m, out_idx, out_val)
    return m


@kernel()
def topk_select_subset(scores, cand, n_cand, k, out_idx, out_val):
    """Top-k among ``scores[cand[0:n_cand]]`` (candidate ids, any order, no duplicates).

    Ties break by lowest *candidate id*.  Returns the number written (``min(k, n_cand)``).
    """
    kk = min(k, n_cand)
    if kk <= 0:
        return 0
    hv = np.empty(kk, dtype=scores.dtype)
    hi = np.empty(kk, dtype=np.int64)
    m = 0
    for c in range(n_cand):
        d = cand[c]
        m = _heap_push_or_replace(hv, hi, m, kk, scores[d], d)
    _heap_sorted_out(hv, hi, m, out_idx, out_val)
    return m


@kernel(parallel=True)
def topk_rows(scores, k, out_idx, out_val):
    """Row-wise top-k of a 2-D array; ``out_*`` shape (n_rows, min(k, n_cols)). prange over rows."""
    n_rows = scores.shape[0]
    for r in prange(n_rows):
        topk_select(scores[r], k, out_idx[r], out_val[r])
