"""The kernels' sorting: an in-place integer sort, the k-th smallest, a median, a binary search, a stable argsort.

``sort_range`` takes integer keys only: equal integers are indistinguishable, so any correct
sort returns the same array as ``np.sort``, and this one stands in for it in the kernels that
sort term and document ids. It exists for compile time: Numba's own ``np.sort`` builds its
quicksort from six generic functions (a key getter, a comparison, the partition, the insertion
sort, two drivers), about 1.1 CPU s to compile per dtype and calling option set, against about
0.4 s for these three small kernels, shared by every caller; run time is the same within a few
per cent (faster below a hundred ids, where most of these sorts are).

``select_kth`` is the value ``np.partition(x, k)[k]`` reads, for keys without NaN: Numba's
``np.partition`` checks its ``kth`` argument with ``np.unique``, which compiles a sort of its
own, so one call compiled about 2 CPU s of implementations.

``median`` is ``np.median`` of a 1-D array without NaN (``select_kth`` on a copy, and for an even
length the smallest value after that rank), and ``searchsorted_left`` is ``np.searchsorted(a, v)``:
Numba builds its median from a selection of its own and its searchsorted from generic comparisons,
both compiled per dtype and option set.

``argsort_stable`` is ``np.argsort(keys, kind="mergesort")``: equal keys keep their index order
and NaN goes after every number, so the permutation is the one NumPy's and Numba's stable sorts
give. Numba builds its argsorts (mergesort and quicksort) from generic functions compiled per
dtype and calling option set, like its sort; this one is a single kernel per key dtype.

The partition is Numba's: a median-of-three pivot, the larger part pushed on a stack and the
smaller one partitioned next (so the stack holds at most log2(n) ranges). Parts of fewer than 15
ids are left alone and one insertion-sort pass over the whole range ends the sort (no id moves
further than its part).
"""

from __future__ import annotations

import numpy as np

from jkofast._numba import kernel

__all__ = ["argsort_stable", "median", "searchsorted_left", "select_kth", "sort_range"]

_SMALL = 15  # parts below this size are left to the final insertion pass
_RUN = 16  # argsort_stable: runs of this many keys are insertion-sorted, then merged pairwise


@kernel()
def _partition(x, low, high):
    """Partition ``x[low:high + 1]`` (``high - low >= 2``) around a median of three; return the pivot's index.

    Afterwards ``x[low:i] <= x[i] <= x[i + 1:high + 1]``.  The median of three leaves
    ``x[low] <= pivot`` and the pivot at ``x[high]``: both scans stop without bound checks.
    """
    mid = (low + high) >> 1
    if x[mid] < x[low]:
        x[low], x[mid] = x[mid], x[low]
    if x[high] < x[mid]:
        x[high], x[mid] = x[mid], x[high]
    if x[mid] < x[low]:
        x[low], x[mid] = x[mid], x[low]
    pivot = x[mid]
    x[high], x[mid] = x[mid], x[high]
    i = low
    j = high - 1
    while True:
        while x[i] < pivot:
            i += 1
        while pivot < x[j]:
            j -= 1
        if i >= j:
            break
        x[i], x[j] = x[j], x[i]
        i += 1
        j -= 1
    x[i], x[high] = x[high], x[i]
    return i


@kernel()
def _insertion(x, lo, hi):
    """Insertion-sort ``x[lo:hi]`` in place."""
    for i in range(lo + 1, hi):
        v = x[i]
        j = i
        while j > lo and v < x[j - 1]:
            x[j] = x[j - 1]
            j -= 1
        x[j] = v


@kernel()
def sort_range(x, lo, hi):
    """Sort ``x[lo:hi]`` ascending in place (``x``: 1-D integer array; ``0 <= lo <= hi <= len(x)``).

    ``lo`` and ``hi`` are int64 (a bare literal compiles a second specialisation).
    """
    n = 0
    if hi - lo >= _SMALL:  # below that, the insertion pass alone (no stack allocated)
        stack = np.empty(128, np.int64)  # (low, high) pairs, inclusive bounds
        stack[0] = lo
        stack[1] = hi - 1
        n = 1
    while n > 0:
        n -= 1
        low = stack[2 * n]
        high = stack[2 * n + 1]
        while high - low >= _SMALL:
            i = _partition(x, low, high)
            if high - i > i - low:
                if high > i:
                    stack[2 * n] = i + 1
                    stack[2 * n + 1] = high
                    n += 1
                high = i - 1
            else:
                if i > low:
                    stack[2 * n] = low
                    stack[2 * n + 1] = i - 1
                    n += 1
                low = i + 1
    _insertion(x, lo, hi)


@kernel()
def select_kth(x, lo, hi, k):
    """Return the value of rank ``k`` (0-based, ascending) among ``x[lo:hi]``, which it reorders.

    ``x``: 1-D array of integers or of floats without NaN; ``lo <= k < hi``, all int64. Equal
    keys compare equal (``-0.0 == 0.0``), so which of two equal values is returned may differ
    from ``np.partition``; the value compares the same. Quickselect with ``sort_range``'s
    partition, the part holding ``k`` kept; a part of fewer than 15 keys is insertion-sorted.
    """
    low = lo
    high = hi - 1
    while high - low >= _SMALL:
        i = _partition(x, low, high)
        if k == i:
            return x[i]
        if k < i:
            high = i - 1
        else:
            low = i + 1
    _insertion(x, low, high + 1)
    return x[k]


@kernel()
def median(x):
    """Return ``np.median(x)`` of the 1-D float ``x`` (no NaN; ``len(x) >= 1``), which stays unchanged.

    The middle value, or for an even length ``(a + b) / 2`` of the two middle values, as NumPy;
    ``select_kth`` on a copy finds ``a``, and ``b`` is the smallest value after it.
    """
    n = x.shape[0]
    tmp = x.copy()
    h = n >> 1
    if n & 1:
        return select_kth(tmp, np.int64(0), np.int64(n), np.int64(h))
    a = select_kth(tmp, np.int64(0), np.int64(n), np.int64(h - 1))
    b = tmp[h]
    for i in range(h + 1, n):
        if tmp[i] < b:
            b = tmp[i]
    return (a + b) / 2


@kernel()
def searchsorted_left(a, v):
    """Return the first index ``i`` of the ascending 1-D ``a`` with ``a[i] >= v`` (``len(a)`` if none).

    ``np.searchsorted(a, v)`` (``side="left"``) for keys without NaN; a binary search.
    """
    lo = 0
    hi = a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel(inline="always")
def _key_lt(a, b):
    """Return ``a < b`` with NaN after every number (the order of NumPy's and Numba's sorts)."""
    return a < b or (b != b and a == a)


@kernel()
def argsort_stable(keys):
    """Return the int64 permutation that sorts the 1-D ``keys`` ascending, equal keys in index order.

    The permutation of ``np.argsort(keys, kind="mergesort")``: a stable sort's result is fixed by
    the order relation alone (``<``, NaN last, ``-0.0 == 0.0``). The keys travel with their
    indices (no indirect load per comparison): runs of 16 are insertion-sorted, then runs are
    merged pairwise (bottom-up, two buffers each); a pair already in order (the last key of the
    left run not above the first of the right) is copied unmerged.
    """
    n = keys.shape[0]
    src = np.empty(n, np.int64)
    ks = np.empty(n, keys.dtype)
    for lo in range(0, n, _RUN):
        hi = min(lo + _RUN, n)
        for i in range(lo, hi):
            kv = keys[i]
            j = i
            while j > lo:
                if not _key_lt(kv, ks[j - 1]):
                    break
                src[j] = src[j - 1]
                ks[j] = ks[j - 1]
                j -= 1
            src[j] = i
            ks[j] = kv
    if n <= _RUN:
        return src
    dst = np.empty(n, np.int64)
    kd = np.empty(n, keys.dtype)
    width = _RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            if mid < hi and _key_lt(ks[mid], ks[mid - 1]):
                while i < mid and j < hi:
                    if _key_lt(ks[j], ks[i]):
                        dst[k] = src[j]
                        kd[k] = ks[j]
                        j += 1
                    else:
                        dst[k] = src[i]
                        kd[k] = ks[i]
                        i += 1
                    k += 1
            while i < mid:
                dst[k] = src[i]
                kd[k] = ks[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                kd[k] = ks[j]
                j += 1
                k += 1
        src, dst = dst, src
        ks, kd = kd, ks
        width *= 2
    return src
