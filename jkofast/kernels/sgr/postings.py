"""Compressed term postings of the SGR index: document gaps in variable-byte code.

The postings of term t are its documents in ascending order, ``df(t) = t_indptr[t + 1] -
t_indptr[t]`` of them.  They are stored as gaps ``g = d - d_prev - 1`` (``d_prev = -1`` before
the first document), each gap in variable-byte code: seven bits per byte, least significant
group first, the high bit set on every byte but the last.  The bytes of term t are
``t_code[t_off[t]:t_off[t + 1]]``.  A document below 128 positions after the previous one
takes one byte, below 16,384 two.

The term frequencies are kept by posting position ``p`` (``t_indptr[t] <= p < t_indptr[t + 1]``):
``t_tfq[p]`` (uint8) holds the count when it is an integer in [1, 255], else 0, and the exact
float32 value sits in ``t_xval`` at the entry of ``t_xpos`` (ascending positions) equal to ``p``.

Every kernel here but :func:`check_postings` trusts its input (the loader runs that check first).
"""

from __future__ import annotations

import numpy as np

from jkofast._numba import kernel
from jkofast.kernels.sorting import searchsorted_left

__all__ = [
    "check_postings",
    "decode_term",
    "encode_postings",
    "posting_bytes",
    "posting_tf",
    "vbyte_rest",
]

# Readers decode a term as ``q, end = t_off[t], t_off[t + 1]`` (uint64), then while ``q < end``:
# ``g = code[q]; q += 1``, and when ``g >= 128`` (a gap of two bytes or more, the rare case)
# ``g, q = vbyte_rest(code, q, g)``; the document is ``doc + g``, then ``doc += g + 1``.  The
# one-byte case stays inline in the reader's loop (uint64 indices: no wrap-around code).


@kernel()
def vbyte_rest(code, q, b):
    """Finish the variable-byte integer whose first byte ``b >= 128`` was read; ``q`` = the next byte.

    Returns ``(value, next q)`` (uint64).
    """
    g = np.uint64(b) & np.uint64(127)
    sh = np.uint64(7)
    while True:
        b = np.uint64(code[q])
        q += np.uint64(1)
        g |= (b & np.uint64(127)) << sh
        if b < 128:
            return g, q
        sh += np.uint64(7)


@kernel()
def posting_bytes(t_indptr, t_docs, out_bytes):
    """Bytes of each term's encoded postings into ``out_bytes`` (int64, V); documents ascending per term."""
    for t in range(t_indptr.shape[0] - 1):
        prev = np.int64(-1)
        n = np.int64(0)
        for p in range(t_indptr[t], t_indptr[t + 1]):
            d = np.int64(t_docs[p])
            g = d - prev - 1
            prev = d
            n += 1
            while g >= 128:
                g >>= 7
                n += 1
        out_bytes[t] = n


@kernel()
def encode_postings(t_indptr, t_docs, t_off, t_code):
    """Write the gaps of every term's documents into ``t_code`` at ``t_off`` (from :func:`posting_bytes`)."""
    for t in range(t_indptr.shape[0] - 1):
        prev = np.int64(-1)
        q = t_off[t]
        for p in range(t_indptr[t], t_indptr[t + 1]):
            d = np.int64(t_docs[p])
            g = d - prev - 1
            prev = d
            while g >= 128:
                t_code[q] = np.uint8((g & 127) | 128)
                g >>= 7
                q += 1
            t_code[q] = np.uint8(g)
            q += 1


@kernel()
def decode_term(t_indptr, t_off, t_code, t, out):
    """Documents of term ``t`` into ``out[:df(t)]`` (int64); returns ``df(t)``."""
    q = np.uint64(t_off[t])
    end = np.uint64(t_off[t + 1])
    doc = np.uint64(0)
    i = 0
    while q < end:
        g = np.uint64(t_code[q])
        q += np.uint64(1)
        if g >= 128:
            g, q = vbyte_rest(t_code, q, g)
        doc += g
        out[i] = doc
        doc += np.uint64(1)
        i += 1
    return t_indptr[t + 1] - t_indptr[t]


@kernel()
def posting_tf(p, t_tfq, t_xpos, t_xval):
    """Term frequency (float64) of posting position ``p``."""
    v = t_tfq[p]
    if v != 0:
        return np.float64(v)
    return np.float64(t_xval[searchsorted_left(t_xpos, p)])


@kernel()
def check_postings(t_indptr, t_off, t_code, n_docs):
    """Check every term's code against its document count; return -1 when sound, else the first bad term.

    Preconditions (checked by the caller in NumPy): ``t_indptr`` and ``t_off`` are
    non-decreasing int64 pointers of the same length from 0, ``t_off[-1] == len(t_code)``.
    Term t is sound when its bytes ``t_off[t]:t_off[t + 1]`` hold exactly ``df(t)`` codes,
    none longer than 5 bytes, whose documents are ascending and below ``n_docs``.  Every read
    is bounds-checked here, so damaged bytes are reported, never read past.
    """
    for t in range(t_indptr.shape[0] - 1):
        q = t_off[t]
        end = t_off[t + 1]
        d = np.int64(-1)
        for _ in range(t_indptr[t + 1] - t_indptr[t]):
            g = np.int64(0)
            sh = 0
            while True:
                if q >= end or sh > 28:
                    return t
                b = np.int64(t_code[q])
                q += 1
                g |= (b & 127) << sh
                sh += 7
                if b < 128:
                    break
            d += g + 1
            if d >= n_docs:
                return t
        if q != end:
            return t
    return -1
