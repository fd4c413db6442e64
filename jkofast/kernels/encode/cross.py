"""The cross-encoder's last attention layer for the [CLS] rows only (packed sequences, as :mod:`.bert`).

A sequence-classification head reads the last layer's first token alone, so that layer's
attention needs the query of one row per sequence (and the keys and values of all its rows).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel
from jkofast.kernels.encode.bert import softmax_inplace

__all__ = ["attention_first_row"]


@kernel(parallel=True)
def attention_first_row(qkv, offsets, n_heads, scale, ctx):
    """Self-attention output of the first row of every packed sequence, written to ``ctx`` (S, H).

    ``qkv`` float32 (N, 3H) as in :func:`jkofast.kernels.encode.bert.attention_packed`; sequence s
    is rows ``a = offsets[s]`` to ``offsets[s + 1]`` (at least one).  For head h (d = H / n_heads):
    ``ctx[s, h*d:(h+1)*d] = softmax(scale * q_a kᵀ) v`` over the sequence's own rows, the same
    softmax (:func:`jkofast.kernels.encode.bert.softmax_inplace`) as the full kernel.  ``prange``
    over (sequence, head) pairs, each writing its own block of ``ctx``; the sums of one row are serial.
    """
    n_seq = offsets.shape[0] - 1
    hdim = ctx.shape[1]
    d = hdim // n_heads
    for w in prange(n_seq * n_heads):
        s = w // n_heads
        hd = w - s * n_heads
        a = offsets[s]
        m = offsets[s + 1] - a
        q = np.empty(d, np.float32)
        for t in range(d):
            q[t] = qkv[a, hd * d + t] * scale
        sc = np.empty(m, np.float32)
        for j in range(m):
            acc = np.float32(0.0)
            for t in range(d):
                acc += q[t] * qkv[a + j, hdim + hd * d + t]
            sc[j] = acc
        softmax_inplace(sc, np.empty(m, np.int32))
        o = np.zeros(d, np.float32)
        for j in range(m):
            p = sc[j]
            for t in range(d):
                o[t] += p * qkv[a + j, 2 * hdim + hd * d + t]
        for t in range(d):
            ctx[s, hd * d + t] = o[t]
