"""Dual-Rank confidence read-out over a ragged batch of pools (SPEC A.6.4).

Layout: flat arrays of length ``n_total`` (``p`` the final JKO distribution, ``f`` the dual
potentials of the uniform-target read-out of SPEC A.4.5, ``logits`` the raw rerank scores) and
``offsets`` (int64, ``nq + 1``; pool ``q`` is ``offsets[q]:offsets[q+1]``).  Outputs are one
value per pool.

``prange`` over pools, owner-writes only (pool ``q`` writes entry ``q`` of each output), every
within-pool sum and sort serial: results do not depend on the thread count.  No validation
here: :func:`jkofast.jko.confidence.confidence_signals` rejects empty pools and NaN/inf inputs
first (by status), and this kernel trusts it.  Strict IEEE (``-inf`` logits, ties and the
first-index argmax matter).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel
from jkofast.kernels.sorting import median

__all__ = ["confidence_pools", "pool_confidence"]


@kernel()
def pool_confidence(p, f, logits, has_logits):
    """Compute the Dual-Rank signals of one pool (m >= 1, finite inputs; ``logits`` may hold ``-inf``).

    Returns ``(top1, top1_f, conf_dual, conf_softmax, conf_margin)``:

    * ``top1`` = first index of the maximum of ``p``;
    * ``top1_f = f[top1]``, ``conf_dual = f[top1] - median(f)`` (``kernels.sorting.median``: quickselect
      on a copy, ``(a + b)/2`` of the two middle values for an even m, as NumPy; faster than a full sort);
    * ``conf_softmax = max softmax(logits) = 1 / Σ_j exp(x_j - max x)`` (τ = 1; the largest
      entry's numerator is exactly ``exp(0) = 1``), NaN when ``has_logits`` is False;
    * ``conf_margin = p_(1) - p_(2)``, the two largest entries of ``p`` counted with
      multiplicity (a tie at the top gives 0); a pool of one entry has ``p_(2) = 0``.
    """
    m = p.shape[0]
    top1 = 0
    v1 = p[0]
    v2 = -np.inf
    for i in range(1, m):
        x = p[i]
        if x > v1:
            v2 = v1
            v1 = x
            top1 = i
        elif x > v2:
            v2 = x
    if m == 1:
        v2 = 0.0
    top1_f = f[top1]
    conf_dual = top1_f - median(f)
    conf_softmax = np.nan
    if has_logits:
        xmax = -np.inf
        for i in range(m):
            if logits[i] > xmax:
                xmax = logits[i]
        s = 0.0
        for i in range(m):
            s += np.exp(logits[i] - xmax)
        conf_softmax = 1.0 / s
    return top1, top1_f, conf_dual, conf_softmax, v1 - v2


@kernel(parallel=True)
def confidence_pools(p, f, logits, has_logits, offsets, status, top1, top1_f, conf_dual, conf_softmax, conf_margin):
    """Dual-Rank signals of every pool, ``prange`` over pools.

    Pools with ``status[q] != 0`` on entry are skipped (their outputs keep the wrapper's fill
    values); the others must be non-empty with finite ``p, f`` and logits that are finite or
    ``-inf`` with at least one finite entry (when ``has_logits``; otherwise ``logits`` may be a
    dummy and ``conf_softmax`` gets NaN).  Writes entry ``q`` of ``top1`` (int64, local pool
    position), ``top1_f``, ``conf_dual``, ``conf_softmax``, ``conf_margin`` (float64).
    """
    nq = offsets.shape[0] - 1
    for q in prange(nq):
        if status[q] != 0:
            continue
        lo = offsets[q]
        hi = offsets[q + 1]
        lg = logits[lo:hi] if has_logits else logits[0:0]
        t, tf, cd, cs, cm = pool_confidence(p[lo:hi], f[lo:hi], lg, has_logits)
        top1[q] = t
        top1_f[q] = tf
        conf_dual[q] = cd
        conf_softmax[q] = cs
        conf_margin[q] = cm
