"""Query-expansion and score-propagation kernels of experiments/expansion.py (rejected sparse-only energies).

Layouts: CSR as ``(indptr int64, indices int64, data float64)``, indices sorted and unique
within rows (the wrappers guarantee it).  ``prange`` over queries / pools; iteration q
writes only row q of the outputs (owner-writes); every sum inside a row is serial, so the
results do not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel


@kernel(parallel=True)
def weighted_rows_topn(
    sel_ptr,
    sel_rows,
    sel_w,
    m_ptr,
    m_idx,
    m_val,
    row_normalise,
    n_top,
    out_terms,
    out_w,
    out_cnt,
):
    """Per query q: ``e = sum_s sel_w[s] * M[sel_rows[s]]`` (each row divided by its sum when
    ``row_normalise``), keep the ``n_top`` largest positive entries (ties -> lowest term id),
    renormalise them to sum 1.

    ``sel_ptr`` (nq+1,) int64 ragged selection of rows ``sel_rows`` (int64) with weights
    ``sel_w`` (float64); ``M`` canonical CSR.  Writes ``out_terms[q, :c]`` (int64, sorted
    by term id), ``out_w[q, :c]`` (float64, sum 1) and ``out_cnt[q] = c`` (0 when e has no
    positive entry); entries past ``c`` are left untouched.  Returns 0.
    """
    nq = sel_ptr.shape[0] - 1
    for q in prange(nq):
        a = sel_ptr[q]
        e = sel_ptr[q + 1]
        n = 0
        for s in range(a, e):
            r = sel_rows[s]
            n += m_ptr[r + 1] - m_ptr[r]
        terms = np.empty(n, np.int64)
        vals = np.empty(n, np.float64)
        p = 0
        for s in range(a, e):
            r = sel_rows[s]
            scale = sel_w[s]
            if row_normalise:
                tot = 0.0
                for j in range(m_ptr[r], m_ptr[r + 1]):
                    tot += m_val[j]
                scale = scale / tot if tot > 0.0 else 0.0
            for j in range(m_ptr[r], m_ptr[r + 1]):
                terms[p] = m_idx[j]
                vals[p] = scale * m_val[j]
                p += 1
        # merge duplicates in (term, gather) order: a deterministic serial sum
        order = np.argsort(terms, kind="mergesort")
        ut = np.empty(n, np.int64)
        uv = np.empty(n, np.float64)
        u = -1
        prev = -1
        for j in range(n):
            t = terms[order[j]]
            if t != prev:
                u += 1
                ut[u] = t
                uv[u] = 0.0
                prev = t
            uv[u] += vals[order[j]]
        u += 1
        # n_top largest positive values; a stable sort of -v keeps ties in term order
        rank = np.argsort(-uv[:u], kind="mergesort")
        c = 0
        tot = 0.0
        keep = np.empty(min(n_top, u), np.int64)
        for j in range(u):
            if c == n_top:
                break
            v = uv[rank[j]]
            if not v > 0.0:
                break
            keep[c] = rank[j]
            tot += v
            c += 1
        keep = np.sort(keep[:c])  # term order (ut is sorted)
        for j in range(c):
            out_terms[q, j] = ut[keep[j]]
            out_w[q, j] = uv[keep[j]] / tot
        out_cnt[q] = c
    return 0


@kernel(parallel=True)
def propagate_pool_scores(r, offsets, cos_flat, cos_off, k, beta, out):
    """Cluster-hypothesis smoothing inside each pool.

    Pool q has ``m = offsets[q+1] - offsets[q]`` flat scores ``r`` and its row-major m x m
    similarity block ``cos_flat[cos_off[q]:cos_off[q+1]]``.  For each i, the ``k`` other
    documents j with the largest positive similarity s_ij (ties -> lowest j) give
    ``out_i = (1 - beta) r_i + beta * sum_j s_ij r_j / sum_j s_ij``; ``out_i = r_i`` when
    no j has s_ij > 0.  Returns 0.
    """
    nq = offsets.shape[0] - 1
    for q in prange(nq):
        a = offsets[q]
        m = offsets[q + 1] - a
        base = cos_off[q]
        for i in range(m):
            s = np.empty(m, np.float64)
            for j in range(m):
                v = cos_flat[base + i * m + j]
                s[j] = v if (j != i and v > 0.0) else 0.0
            order = np.argsort(-s, kind="mergesort")
            num = 0.0
            den = 0.0
            for t in range(min(k, m)):
                j = order[t]
                if not s[j] > 0.0:
                    break
                num += s[j] * r[a + j]
                den += s[j]
            if den > 0.0:
                out[a + i] = (1.0 - beta) * r[a + i] + beta * num / den
            else:
                out[a + i] = r[a + i]
    return 0
