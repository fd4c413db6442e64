"""Element-wise parts of a BERT forward pass over *packed* token rows.

Tokens of a batch are packed without padding: row ``t`` of a ``(N, H)`` float32 array is one
token, the tokens of sequence ``s`` are rows ``offsets[s]:offsets[s + 1]`` (``offsets`` int64,
``offsets[0] = 0``).  The dense products are NumPy BLAS matmuls in the wrapper
(:mod:`jkofast.encode.bert`); these kernels fuse what comes between them.  Every kernel runs
``prange`` over rows and writes only its own row; sums within a row are serial (float64
accumulators), so results do not depend on the thread count.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from jkofast._numba import kernel

__all__ = [
    "add_bias_gelu",
    "add_bias_inplace",
    "add_bias_residual_layernorm",
    "attention_packed",
    "embed_layernorm",
    "exp_inplace",
    "matmul_rows",
    "pool_normalize",
    "softmax_inplace",
]


@kernel(inline="always")
def _layernorm_row(x, out, gamma, beta, eps):
    """``out = (x - mean) / sqrt(var + eps) * gamma + beta`` for one row (biased variance, as torch)."""
    n = x.shape[0]
    s = 0.0
    for j in range(n):
        s += np.float64(x[j])
    mean = s / n
    v = 0.0
    for j in range(n):
        d = np.float64(x[j]) - mean
        v += d * d
    inv = 1.0 / math.sqrt(v / n + eps)
    for j in range(n):
        out[j] = np.float32((np.float64(x[j]) - mean) * inv) * gamma[j] + beta[j]


@kernel(parallel=True)
def embed_layernorm(ids, positions, types, word, pos, typ, gamma, beta, eps, out):
    """Embedding sum and LayerNorm: ``out[t] = LN(word[ids[t]] + pos[positions[t]] + typ[types[t]])``.

    ``ids``, ``positions``, ``types`` int64 (N,), in range of their tables (checked by the wrapper);
    tables and ``out`` float32 with H columns.  Writes ``out`` (N, H).
    """
    n, h = out.shape
    for t in prange(n):
        row = out[t]
        w = word[ids[t]]
        p = pos[positions[t]]
        y = typ[types[t]]
        for j in range(h):
            row[j] = w[j] + p[j] + y[j]
        _layernorm_row(row, row, gamma, beta, eps)


@kernel(parallel=True)
def add_bias_inplace(x, bias):
    """``x[t] += bias`` for every row of ``x`` (N, D) float32; ``bias`` (D,)."""
    n, d = x.shape
    for t in prange(n):
        for j in range(d):
            x[t, j] += bias[j]


@kernel(inline="always")
def exp_inplace(buf, bits):
    """``buf[j] = exp(buf[j])`` for float32 ``buf`` (1-D), vectorisable (``math.exp`` is a scalar libm call).

    Cephes ``expf``: ``x = n ln2 + r`` (Cody-Waite split), a degree-7 polynomial in ``r``, and
    ``2**n`` built in the exponent bits of ``bits`` (int32 scratch, same length).  Relative error
    about 1e-7 on [-87, 88]; inputs are clamped to that range (``exp(-87)`` ~ 1.6e-38 stands for 0).
    """
    fb = bits.view(np.float32)
    for j in range(buf.shape[0]):
        x = min(max(buf[j], np.float32(-87.0)), np.float32(88.0))
        n = np.floor(x * np.float32(1.44269504088896341) + np.float32(0.5))
        r = x - n * np.float32(0.693359375) - n * np.float32(-2.12194440e-4)
        p = np.float32(1.9875691500e-4)
        p = p * r + np.float32(1.3981999507e-3)
        p = p * r + np.float32(8.3334519073e-3)
        p = p * r + np.float32(4.1665795894e-2)
        p = p * r + np.float32(1.6666665459e-1)
        p = p * r + np.float32(5.0000001201e-1)
        buf[j] = p * r * r + r + np.float32(1.0)
        bits[j] = (np.int32(n) + np.int32(127)) << np.int32(23)
    for j in range(buf.shape[0]):
        buf[j] = buf[j] * fb[j]


@kernel(inline="always")
def softmax_inplace(row, bits):
    """``row = softmax(row)`` in place for float32 ``row`` (1-D, non-empty).

    The maximum subtracted, :func:`exp_inplace` (``bits``: int32 scratch of the same length), a
    float64 sum, one scaling.
    """
    m = row.shape[0]
    mx = row[0]
    for j in range(1, m):
        mx = max(mx, row[j])
    for j in range(m):
        row[j] -= mx
    exp_inplace(row, bits)
    tot = 0.0
    for j in range(m):
        tot += row[j]
    inv = np.float32(1.0 / tot)
    for j in range(m):
        row[j] *= inv


@kernel(parallel=True)
def add_bias_gelu(x, bias):
    """``x[t] = gelu(x[t] + bias)`` in place, the erf GELU of BERT: ``0.5 y (1 + erf(y / sqrt 2))``.

    ``erf`` is Abramowitz-Stegun 7.1.26 (absolute error <= 1.5e-7, the formula of torch's
    vectorised CPU ``erf``) over the vectorisable :func:`exp_inplace`.  ``x`` float32 (N, D).
    """
    n, d = x.shape
    c = np.float32(1.0 / math.sqrt(2.0))
    for t in prange(n):
        row = x[t]
        e = np.empty(d, np.float32)
        bits = np.empty(d, np.int32)
        for j in range(d):
            y = row[j] + bias[j]
            row[j] = y
            z = y * c
            e[j] = -z * z
        exp_inplace(e, bits)
        for j in range(d):
            y = row[j]
            z = abs(y * c)
            k = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * z)
            poly = np.float32(1.061405429)
            poly = poly * k + np.float32(-1.453152027)
            poly = poly * k + np.float32(1.421413741)
            poly = poly * k + np.float32(-0.284496736)
            poly = poly * k + np.float32(0.254829592)
            erf = np.float32(1.0) - poly * k * e[j]
            if y < 0:
                erf = -erf
            row[j] = np.float32(0.5) * y * (np.float32(1.0) + erf)


@kernel(parallel=True)
def add_bias_residual_layernorm(x, bias, residual, gamma, beta, eps, out):
    """``out[t] = LN(x[t] + bias + residual[t])``; ``x`` is overwritten with the sum.

    ``out`` may be ``residual`` itself (each row is read before it is written).
    All float32; ``x``, ``residual``, ``out`` (N, H).
    """
    n, h = x.shape
    for t in prange(n):
        xr = x[t]
        rr = residual[t]
        for j in range(h):
            xr[j] = xr[j] + bias[j] + rr[j]
        _layernorm_row(xr, out[t], gamma, beta, eps)


@kernel(parallel=True)
def pool_normalize(h, offsets, mode, normalize, out):
    """Pool the token rows of every sequence and L2-normalise.

    ``mode`` 0: mean of rows ``offsets[s]:offsets[s+1]`` (sentence-transformers mean pooling);
    1: the first row (CLS).  ``normalize``: divide by ``max(|v|, 1e-12)`` (torch ``F.normalize``).
    ``h`` float32 (N, H); ``out`` float32 (S, H).  Every sequence has at least one row.
    """
    ns, d = out.shape
    for s in prange(ns):
        a = offsets[s]
        b = offsets[s + 1] if mode == 0 else offsets[s] + 1
        acc = np.zeros(d, np.float64)
        for t in range(a, b):
            for j in range(d):
                acc[j] += h[t, j]
        cnt = max(b - a, 1)
        nrm = 0.0
        for j in range(d):
            acc[j] /= cnt
            nrm += acc[j] * acc[j]
        inv = 1.0
        if normalize:
            inv = 1.0 / max(math.sqrt(nrm), 1e-12)
        for j in range(d):
            out[s, j] = acc[j] * inv


@kernel(parallel=True)
def attention_packed(qkv, offsets, n_heads, scale, ctx):
    """Multi-head self-attention of every packed sequence, written to ``ctx``.

    ``qkv`` float32 (N, 3H): columns ``[q | k | v]``, head ``h`` at columns ``h*d:(h+1)*d`` of each
    block (d = H / n_heads).  For sequence s (rows ``a:b``) and head h:
    ``ctx[a:b, h*d:(h+1)*d] = softmax(scale * q kᵀ) v`` over the sequence's own rows only (what
    BERT's padding mask does).  ``prange`` over (sequence, head) pairs, each writing its own block
    of ``ctx`` (N, H); the two products are ``np.dot`` (BLAS ``sgemm``: the caller limits BLAS to
    one thread so the pairs run side by side); the softmax uses :func:`exp_inplace`.
    """
    n_seq = offsets.shape[0] - 1
    hdim = ctx.shape[1]
    d = hdim // n_heads
    for w in prange(n_seq * n_heads):
        s = w // n_heads
        hd = w - s * n_heads
        a = offsets[s]
        m = offsets[s + 1] - a
        q = np.empty((m, d), np.float32)
        kt = np.empty((d, m), np.float32)
        v = np.empty((m, d), np.float32)
        for j in range(m):
            for t in range(d):
                q[j, t] = qkv[a + j, hd * d + t] * scale
                kt[t, j] = qkv[a + j, hdim + hd * d + t]
                v[j, t] = qkv[a + j, 2 * hdim + hd * d + t]
        sc = np.dot(q, kt)
        bits = np.empty(m, np.int32)
        for i in range(m):
            softmax_inplace(sc[i], bits)
        o = np.dot(sc, v)
        for i in range(m):
            for t in range(d):
                ctx[a + i, hd * d + t] = o[i, t]


@kernel(parallel=True)
def matmul_rows(x, w, out, block_rows):
    """``out = x @ w`` in row blocks of ``block_rows`` rows, one BLAS ``sgemm`` (``np.dot``) each, in ``prange``.

    float32, C-contiguous ``x`` (N, K), ``w`` (K, M), ``out`` (N, M).  The caller limits BLAS to
    one thread: all parallelism is Numba's, so no BLAS worker spins beside the element-wise
    kernels.  The blocks do not depend on the thread count, so neither do the results.
    """
    n = x.shape[0]
    n_blocks = (n + block_rows - 1) // block_rows
    for b in prange(n_blocks):
        a = b * block_rows
        e = min(n, a + block_rows)
        np.dot(x[a:e], w, out[a:e])
