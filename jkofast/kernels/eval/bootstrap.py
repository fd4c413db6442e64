"""Bootstrap resample means, bit for bit NumPy's ``x[idx].mean(axis=1)`` without the gathered copy.

NumPy sums a float64 row by pairwise summation (``DOUBLE_pairwise_sum`` in its
``loops_utils.h``): blocks of at most 128 values are summed with 8 running partial sums
combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`` plus a serial remainder
(fewer than 8 values: one serial sum), longer rows are split at ``n2 = n // 2 - (n // 2) % 8``
and the halves added; the reduction starts from the identity 0.0, and the mean divides by n.
``_pairwise`` is that summation over the gathered values ``x[idx[b, :]]``, so each replicate's
mean is exactly the one :func:`jkofast.eval.metrics.bootstrap_ci` specifies (SPEC A.7.2).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel

__all__ = ["resample_means"]

_PW_BLOCKSIZE = 128


@kernel(inline="always")
def _leaf(x, idx, b, lo, n):
    """NumPy's pairwise-sum leaf (n <= 128) over ``x[idx[b, lo:lo + n]]``."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += x[idx[b, lo + i]]
        return res
    r0 = x[idx[b, lo]]
    r1 = x[idx[b, lo + 1]]
    r2 = x[idx[b, lo + 2]]
    r3 = x[idx[b, lo + 3]]
    r4 = x[idx[b, lo + 4]]
    r5 = x[idx[b, lo + 5]]
    r6 = x[idx[b, lo + 6]]
    r7 = x[idx[b, lo + 7]]
    i = 8
    m = n - (n % 8)
    while i < m:
        j = lo + i
        r0 += x[idx[b, j]]
        r1 += x[idx[b, j + 1]]
        r2 += x[idx[b, j + 2]]
        r3 += x[idx[b, j + 3]]
        r4 += x[idx[b, j + 4]]
        r5 += x[idx[b, j + 5]]
        r6 += x[idx[b, j + 6]]
        r7 += x[idx[b, j + 7]]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += x[idx[b, lo + i]]
        i += 1
    return res


@kernel()
def _pairwise(x, idx, b, n):
    """NumPy's pairwise sum of ``x[idx[b, :n]]``: halving above 128 values, leaves added in tree order.

    The recursion ``sum(lo, n) = sum(lo, n2) + sum(lo + n2, n - n2)`` runs on an explicit
    stack (a recursive kernel crashed when loaded from Numba's cache); each level halves the
    length, so 64 entries always suffice.
    """
    lo_s = np.empty(64, np.int64)
    n_s = np.empty(64, np.int64)
    state = np.zeros(64, np.int64)
    val = np.empty(64, np.float64)
    lo_s[0] = 0
    n_s[0] = n
    sp = 1
    vp = 0
    while sp > 0:
        t = sp - 1
        lo = lo_s[t]
        m = n_s[t]
        if m <= _PW_BLOCKSIZE:
            val[vp] = _leaf(x, idx, b, lo, m)
            vp += 1
            sp -= 1
            continue
        n2 = m // 2
        n2 -= n2 % 8
        if state[t] == 0:  # left half first
            state[t] = 1
            lo_s[sp] = lo
            n_s[sp] = n2
            state[sp] = 0
            sp += 1
        elif state[t] == 1:  # then the right half
            state[t] = 2
            lo_s[sp] = lo + n2
            n_s[sp] = m - n2
            state[sp] = 0
            sp += 1
        else:  # both done: left + right
            vp -= 1
            val[vp - 1] = val[vp - 1] + val[vp]
            sp -= 1
    return val[0]


@kernel(parallel=True)
def resample_means(x, idx, out):
    """``out[b] = mean(x[idx[b, :]])`` for every replicate ``b`` (``prange``; iteration b writes out[b] only).

    ``x`` float64 (n,), ``idx`` int64 (m, n) with values in [0, n), ``out`` float64 (m,).
    Equal bit for bit to ``x[idx].mean(axis=1)`` (see the module docstring).
    """
    n = idx.shape[1]
    for b in prange(idx.shape[0]):
        # int64: prange's uint64 index compiled _pairwise a second time
        out[b] = (0.0 + _pairwise(x, idx, np.int64(b), n)) / n
