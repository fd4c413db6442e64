r"""Query analysis as kernels: word-run tokens, vocabulary lookup, query TF-IDF.

The wrappers (``jkofast.sgr.retriever``) lowercase the queries in Python (``str.lower`` per query, or
once for an ASCII batch, where lowering cannot depend on context), join them with one
space, encode the batch as UTF-32 code points (``uint32``) and pass the query offsets.
Everything after that runs here, ``prange`` over query chunks, so the analysis scales with
the threads instead of being the serial part of a batch.

* tokens are the maximal runs of word characters of length >= 2: exactly the matches of
  ``re.findall(r"(?u)\\b\\w\\w+\\b", text)``; ``wtab`` (uint8, one entry per code point,
  covering every code point of the batch) says which code points ``\\w`` matches (the
  wrapper derives it from the regex engine itself);
* the vocabulary is an open-addressing table (``table`` int32, power-of-two size, -1 =
  empty, linear probing) over FNV-1a hashes of the terms' code points; a term's code
  points are ``voc_cp[voc_off[t]:voc_off[t + 1]]``;
* per query: known term ids, sorted and unique, with raw counts; TF-IDF = count × idf in
  float32, L2-normalised with the norm summed in float64 in ascending term order (the
  operations and order of the NumPy wrapper this replaces, so the values are bit-identical).
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from jkofast._numba import kernel
from jkofast.kernels.sorting import sort_range

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@kernel()
def fnv1a(cp, lo, hi):
    """FNV-1a (64-bit) of the code points ``cp[lo:hi]``."""
    h = _FNV_OFFSET
    for p in range(lo, hi):
        h = (h ^ np.uint64(cp[p])) * _FNV_PRIME
    return h


@kernel()
def build_vocab_table(voc_off, voc_cp, table):
    """Fill the open-addressing vocabulary table.

    Fill ``table`` (int32, power-of-two size > V, all -1 on entry) with the term ids
    0..V-1 keyed by the hashes of their code points.  Terms must be distinct.  Returns the
    longest probe sequence (diagnostic).
    """
    mask = np.uint64(table.shape[0] - 1)
    longest = 0
    for t in range(voc_off.shape[0] - 1):
        slot = fnv1a(voc_cp, voc_off[t], voc_off[t + 1]) & mask
        n = 1
        while table[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
            n += 1
        table[slot] = t
        longest = max(longest, n)
    return longest


@kernel()
def lookup_term(cp, lo, hi, h, table, voc_off, voc_cp):
    """Term id of the code points ``cp[lo:hi]`` (hash ``h``), or -1 when unknown."""
    mask = np.uint64(table.shape[0] - 1)
    slot = h & mask
    n = hi - lo
    while True:
        t = table[slot]
        if t < 0:
            return -1
        a = voc_off[t]
        if voc_off[t + 1] - a == n:
            same = True
            for p in range(n):
                if voc_cp[a + p] != cp[lo + p]:
                    same = False
                    break
            if same:
                return t
        slot = (slot + np.uint64(1)) & mask


@kernel()
def analyse_one(cp, lo, hi, wtab, table, voc_off, voc_cp, idf32, out_terms, out_vals, o):
    """Analyse one query into sorted unique known term ids and their TF-IDF values.

    Tokens of ``cp[lo:hi]`` -> sorted unique known term ids and their TF-IDF values,
    written from ``out_terms[o]`` / ``out_vals[o]`` on (room for every token of the text
    is the caller's precondition); returns the number of distinct known terms.
    """
    n = 0
    p = lo
    while p < hi:
        if not wtab[cp[p]]:
            p += 1
            continue
        s = p
        h = _FNV_OFFSET
        while p < hi and wtab[cp[p]]:
            h = (h ^ np.uint64(cp[p])) * _FNV_PRIME
            p += 1
        if p - s >= 2:
            t = lookup_term(cp, s, p, h, table, voc_off, voc_cp)
            if t >= 0:
                out_terms[o + n] = t
                n += 1
    if n == 0:
        return 0
    sort_range(out_terms, np.int64(o), np.int64(o + n))
    # unique with counts, in place: counts parked in out_vals as float32 (exact below 2**24)
    u = 0
    a = 0
    while a < n:
        t = out_terms[o + a]
        b = a + 1
        while b < n and out_terms[o + b] == t:
            b += 1
        out_terms[o + u] = t
        out_vals[o + u] = np.float32(b - a)
        u += 1
        a = b
    ss = 0.0
    for a in range(u):
        v = out_vals[o + a] * idf32[out_terms[o + a]]  # float32 × float32
        out_vals[o + a] = v
        x = np.float64(v)
        ss += x * x
    nrm = np.float32(math.sqrt(ss))
    for a in range(u):
        out_vals[o + a] = np.float32(out_vals[o + a] / nrm)
    return u


@kernel()
def _row_caps(q_off):
    """Return the start of each query's output region.

    Start of each query's output region: a query of length L holds at most L // 2 + 1
    tokens (each has >= 2 characters and a separator after it).
    """
    nq = q_off.shape[0] - 1
    cap_off = np.zeros(nq + 1, np.int64)
    for i in range(nq):
        cap_off[i + 1] = cap_off[i] + (q_off[i + 1] - q_off[i]) // 2 + 1
    return cap_off


@kernel()
def _compact(cap_off, out_n, out_terms, out_vals):
    """Gather the per-query output regions into CSR rows.

    Gather each query's ``out_n[i]`` entries from ``cap_off[i]`` into CSR rows
    ``(indptr int64, terms int32, vals float32)``.
    """
    nq = out_n.shape[0]
    indptr = np.zeros(nq + 1, np.int64)
    for i in range(nq):
        indptr[i + 1] = indptr[i] + out_n[i]
    terms = np.empty(indptr[nq], np.int32)
    vals = np.empty(indptr[nq], np.float32)
    for i in range(nq):
        s = cap_off[i]
        d = indptr[i]
        for a in range(out_n[i]):
            terms[d + a] = out_terms[s + a]
            vals[d + a] = out_vals[s + a]
    return indptr, terms, vals


@kernel()
def _row_regions(q_off):
    """Output regions of a batch: ``_row_caps`` and the (terms, vals, counts) they index."""
    nq = q_off.shape[0] - 1
    cap_off = _row_caps(q_off)
    return cap_off, np.empty(cap_off[nq], np.int32), np.empty(cap_off[nq], np.float32), np.zeros(nq, np.int64)


@kernel(inline="always")  # one body, inlined into both drivers: no extra compiled level
def _analyse_chunk(c, n_chunks, cp, q_off, wtab, table, voc_off, voc_cp, idf32, cap_off, out_terms, out_vals, out_n):
    """Analyse the queries of chunk ``c`` of ``n_chunks`` contiguous chunks.

    Queries of chunk ``c`` of ``n_chunks`` contiguous chunks into their output regions.
    """
    nq = q_off.shape[0] - 1
    step = (nq + n_chunks - 1) // n_chunks
    lo = c * step
    hi = min(nq, lo + step)
    for i in range(lo, hi):
        out_n[i] = analyse_one(
            cp, q_off[i], q_off[i + 1], wtab, table, voc_off, voc_cp, idf32, out_terms, out_vals, cap_off[i]
        )


@kernel(parallel=True)
def analyse_batch(cp, q_off, wtab, table, voc_off, voc_cp, idf32, n_chunks):
    """Analyse a batch of queries into CSR TF-IDF rows (parallel over chunks).

    CSR rows ``(indptr int64, terms int32, vals float32)`` of the queries
    ``cp[q_off[i]:q_off[i + 1]]``: the distinct known terms of each (sorted) and their
    L2-normalised TF-IDF.  prange over ``n_chunks`` contiguous chunks of queries.
    """
    cap_off, out_terms, out_vals, out_n = _row_regions(q_off)
    for c in prange(n_chunks):
        _analyse_chunk(c, n_chunks, cp, q_off, wtab, table, voc_off, voc_cp, idf32, cap_off, out_terms, out_vals, out_n)
    return _compact(cap_off, out_n, out_terms, out_vals)


@kernel()
def analyse_rows(cp, q_off, wtab, table, voc_off, voc_cp, idf32):
    """``analyse_batch`` on the calling thread, without the parallel launch (small batches)."""
    cap_off, out_terms, out_vals, out_n = _row_regions(q_off)
    _analyse_chunk(0, 1, cp, q_off, wtab, table, voc_off, voc_cp, idf32, cap_off, out_terms, out_vals, out_n)
    return _compact(cap_off, out_n, out_terms, out_vals)
