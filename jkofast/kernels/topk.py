"""Exact top-k selection with a bounded min-heap.

Order: descending score, ties broken by **lowest index** (deterministic, thread-count
independent).  Strict IEEE (no fastmath): ``-inf`` is a legal score and sorts last;
NaN is a precondition violation (wrappers reject it).

Scratch and outputs are preallocated by the caller; every kernel returns the number of items
written (no status codes: there is no failure mode once the preconditions hold).  Every
kernel runs one bounded min-heap, ``_topk_core``, written as one loop nest: per-item helper
calls cost ~25 ns each (they dominated SGR routing), and Numba's ``inline="always"`` versions
were slower still.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel

__all__ = ["topk_ids", "topk_ids_pos", "topk_pos", "topk_rows", "topk_select", "topk_select_subset"]


@kernel()
def _topk_core(scores, cand, use_cand, n_cand, k, out_idx, out_val, hv, hi, by_pos=False):
    """Bounded min-heap top-k (root = worst kept item) into ``out_*[:m]``, best first; returns m.

    Item c < n_cand is ``(scores[d], d)``, ``d = cand[c] if use_cand else c``; with ``by_pos``
    ``(scores[c], cand[c])``.  ``m = min(k, n_cand)``; ``hv`` / ``hi`` (int64), length >= m: heap
    scratch (``hi`` may be ``cand`` when ``use_cand`` is False).  No calls (see module docstring).
    """
    kk = min(k, n_cand)
    if kk <= 0:
        return 0
    m = 0
    for c in range(n_cand):
        d = cand[c] if use_cand else c
        s = scores[c] if by_pos else scores[d]
        if m < kk:
            pos = m
            while pos > 0:
                parent = (pos - 1) >> 1
                pv = hv[parent]
                pi = hi[parent]
                if s < pv or (s == pv and d > pi):
                    hv[pos] = pv
                    hi[pos] = pi
                    pos = parent
                else:
                    break
            hv[pos] = s
            hi[pos] = d
            m += 1
        elif hv[0] < s or (hv[0] == s and hi[0] > d):
            # sift-down written out here and in the pop below on purpose: a call per item is ~10x slower
            pos = 0
            while True:
                left = 2 * pos + 1
                if left >= m:
                    break
                child = left
                right = left + 1
                if right < m and (hv[right] < hv[left] or (hv[right] == hv[left] and hi[right] > hi[left])):
                    child = right
                cv = hv[child]
                ci = hi[child]
                if cv < s or (cv == s and ci > d):
                    hv[pos] = cv
                    hi[pos] = ci
                    pos = child
                else:
                    break
            hv[pos] = s
            hi[pos] = d
    # pop into out[:m] in descending order
    n = m
    while n > 0:
        out_idx[n - 1] = hi[0]
        out_val[n - 1] = hv[0]
        n -= 1
        if n == 0:
            break
        s = hv[n]
        d = hi[n]
        # sift-down twin of the insert loop's, inline for the same reason (a call per item is ~10x slower)
        pos = 0
        while True:
            left = 2 * pos + 1
            if left >= n:
                break
            child = left
            right = left + 1
            if right < n and (hv[right] < hv[left] or (hv[right] == hv[left] and hi[right] > hi[left])):
                child = right
            cv = hv[child]
            ci = hi[child]
            if cv < s or (cv == s and ci > d):
                hv[pos] = cv
                hi[pos] = ci
                pos = child
            else:
                break
        hv[pos] = s
        hi[pos] = d
    return m


@kernel()
def topk_ids(scores, cand, n_cand, k, out_idx, out_val, hv, hi):
    """Top-k of ``scores[cand[:n_cand]]`` (distinct ids), descending, ties to the lowest id.

    ``hv`` float64 / ``hi`` int64 (>= k) are heap scratch; writes ``out_idx`` (ids) and
    ``out_val`` (scores) ``[:m]``.  Returns ``m = min(k, n_cand)``.
    """
    return _topk_core(scores, cand, True, n_cand, k, out_idx, out_val, hv, hi)


@kernel()
def topk_ids_pos(scores, cand, n_cand, k, out_idx, out_val, hv, hi):
    """Top-k of the items ``(scores[c], cand[c])``, ``c < n_cand`` (distinct ids).

    Values are stored by candidate position, ranked as ``topk_ids`` (descending, ties to the
    lowest id); writes the ids.  Returns ``min(k, n_cand)``.
    """
    return _topk_core(scores, cand, True, n_cand, k, out_idx, out_val, hv, hi, True)


@kernel()
def topk_pos(scores, n, k, out_idx, out_val, hv, hi):
    """Top-k of ``scores[:n]`` by position (ties to the lowest position); as ``topk_ids``."""
    return _topk_core(scores, hi, False, n, k, out_idx, out_val, hv, hi)


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
    return _topk_core(scores, hi, False, n, kk, out_idx, out_val, hv, hi)


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
    return _topk_core(scores, cand, True, n_cand, kk, out_idx, out_val, hv, hi)


@kernel(parallel=True)
def topk_rows(scores, k, out_idx, out_val):
    """Row-wise top-k of a 2-D array; ``out_*`` shape (n_rows, min(k, n_cols)); prange over rows (owner writes)."""
    n_rows = scores.shape[0]
    for r in prange(n_rows):
        topk_select(scores[r], k, out_idx[r], out_val[r])
