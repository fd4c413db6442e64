"""Pool kernels: global RRF fusion, per-pool min-max / softmax, in-pool RRF, MMR, DPP-MAP, top-k.

Layout: a batch of pools is ragged, ``flat`` arrays of length ``n_total`` plus ``offsets``
(int64, ``nq + 1``; pool ``q`` is ``offsets[q]:offsets[q+1]``).  Embedding rows are a dense
``(n_total, d)`` array aligned with the flat order.  Outputs are *local* pool positions
(``0 .. m_q - 1``) in ``(nq, k)`` int64 arrays padded with ``-1``.

Every kernel here is parallel over queries/pools, owner-writes only (pool ``q`` writes row
``q`` / its own flat slice), and keeps within-pool sums serial, so results do not depend on
the thread count.  The per-pool transforms and the in-pool RRF are ``prange`` kernels (a batch
costs a few milliseconds, and waking a Python worker thread per call costs a tenth of a
millisecond more than Numba's parallel launch); RRF fusion (~60 µs a query), MMR and DPP-MAP
(1-2 ms a pool) take a range of queries ``q0 .. q1 - 1`` that the wrapper runs on several
threads at once (``jkofast._threads.over_ranges``): serial kernels compile in about a third of
the time.  No validation here: the wrappers in ``jkofast.pools.candidates``, ``jkofast.jko.energy`` and
``jkofast.pools.baselines`` check everything first.
Strict IEEE throughout (ties and ``-inf`` sentinels matter).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel
from jkofast.kernels.sorting import argsort_stable, searchsorted_left
from jkofast.kernels.topk import topk_select

# --------------------------------------------------------------------------------------------
# Global hybrid pool (SPEC A.2.6)
# --------------------------------------------------------------------------------------------


@kernel()
def rrf_fuse_one(sparse_row, dense_row, m_keep, k_rrf, out_cand, out_score):
    """RRF of two ranked lists of corpus ids (``-1`` entries are skipped) for one query.

    A document at 0-based list position ``r`` gets ``1/(k_rrf + r + 1)``; the sparse list is
    accumulated first (in rank order), documents found only in the dense list are appended
    after all sparse documents; a *stable* sort by fused score (descending) keeps insertion
    order on ties (sparse-list documents win).  Precondition: no duplicate ids within a list.
    Writes the first ``min(m_keep, n_fused)`` ids/scores; returns that count.
    """
    n1 = sparse_row.shape[0]
    n2 = dense_row.shape[0]
    docs = np.empty(n1 + n2, dtype=np.int64)
    fused = np.empty(n1 + n2, dtype=np.float64)
    cnt = 0
    for r in range(n1):
        d = sparse_row[r]
        if d < 0:
            continue
        docs[cnt] = d
        fused[cnt] = 1.0 / (k_rrf + r + 1)
        cnt += 1
    n_sparse = cnt
    # binary-search structure over the sparse documents
    order = argsort_stable(docs[:n_sparse])
    keys = np.empty(n_sparse, dtype=np.int64)
    for j in range(n_sparse):
        keys[j] = docs[order[j]]
    for r in range(n2):
        d = dense_row[r]
        if d < 0:
            continue
        contrib = 1.0 / (k_rrf + r + 1)
        pos = searchsorted_left(keys, d)
        if pos < n_sparse and keys[pos] == d:
            slot = order[pos]
            fused[slot] = fused[slot] + contrib
        else:
            docs[cnt] = d
            fused[cnt] = contrib
            cnt += 1
    neg = np.empty(cnt, dtype=np.float64)
    for j in range(cnt):
        neg[j] = -fused[j]
    srt = argsort_stable(neg)  # stable: ties keep insertion order
    n_out = min(m_keep, cnt)
    for j in range(n_out):
        out_cand[j] = docs[srt[j]]
        out_score[j] = fused[srt[j]]
    return n_out


@kernel()
def rrf_fuse_rows(sparse_idx, dense_idx, m_keep, k_rrf, out_cand, out_score, out_n, q0, q1):
    """Row-wise :func:`rrf_fuse_one` for the queries ``q0 .. q1 - 1`` (the wrapper runs ranges on threads).

    ``sparse_idx`` (nq, n1), ``dense_idx`` (nq, n2) int64 (n2 may be 0); ``out_cand``
    (nq, m_keep) int64 pre-filled with -1, ``out_score`` float64, ``out_n`` (nq,) int64.
    """
    for q in range(q0, q1):
        out_n[q] = rrf_fuse_one(sparse_idx[q], dense_idx[q], m_keep, k_rrf, out_cand[q], out_score[q])


# --------------------------------------------------------------------------------------------
# Per-pool transforms (SPEC A.1: minmax with the 1e-9 rule; softmax with the 1e-9 floor)
# --------------------------------------------------------------------------------------------


@kernel(parallel=True)
def minmax_segments(x, offsets, out):
    """``out[s] = (x[s] - min)/(max - min)`` per pool, all zeros if ``max - min < 1e-9``.

    Arithmetic in the dtype of ``x`` (float32 input gives the reference's float32 values);
    ``out`` has the dtype of ``x``.  Empty pools are skipped.
    """
    nq = offsets.shape[0] - 1
    for q in prange(nq):
        a = offsets[q]
        b = offsets[q + 1]
        if b <= a:
            continue
        mn = x[a]
        mx = x[a]
        for i in range(a + 1, b):
            v = x[i]
            if v < mn:
                mn = v
            if v > mx:
                mx = v
        rng = mx - mn
        if rng < 1e-9:
            for i in range(a, b):
                out[i] = 0.0
        else:
            for i in range(a, b):
                out[i] = (x[i] - mn) / rng


@kernel(parallel=True)
def softmax_segments(x, offsets, tau, out):
    """``out[s] = softmax((x[s] - max x[s]) / max(tau, 1e-9))`` per pool, float64 arithmetic."""
    nq = offsets.shape[0] - 1
    t = max(tau, 1e-9)
    for q in prange(nq):
        a = offsets[q]
        b = offsets[q + 1]
        if b <= a:
            continue
        mx = x[a]
        for i in range(a + 1, b):
            if x[i] > mx:
                mx = x[i]
        s = 0.0
        for i in range(a, b):
            e = np.exp((np.float64(x[i]) - np.float64(mx)) / t)
            out[i] = e
            s += e
        for i in range(a, b):
            out[i] = out[i] / s


# --------------------------------------------------------------------------------------------
# Baselines (SPEC A.5)
# --------------------------------------------------------------------------------------------


@kernel(parallel=True)
def topk_segments(scores, offsets, k, out_idx, out_val):
    """Top-k of every pool by one score (descending; ties -> lowest pool position).

    ``out_idx`` (nq, k) int64 pre-filled with -1; ``out_val`` (nq, k) of the scores' dtype.
    """
    nq = offsets.shape[0] - 1
    for q in prange(nq):
        a = offsets[q]
        b = offsets[q + 1]
        topk_select(scores[a:b], k, out_idx[q], out_val[q])


@kernel()
def _desc_ranks(x, ranks):
    """0-based rank of every entry when sorted by descending value (ties -> lower index first)."""
    n = x.shape[0]
    neg = np.empty(n, dtype=np.float64)
    for i in range(n):
        neg[i] = -np.float64(x[i])
    order = argsort_stable(neg)
    for j in range(n):
        ranks[order[j]] = j


@kernel(parallel=True)
def inpool_rrf_segments(sparse, dense, offsets, k_rrf, k, out_idx, out_val):
    """In-pool hybrid RRF, then top-k by the fused score (float64).

    Fused score ``1/(k_rrf + r_sparse + 1) + 1/(k_rrf + r_dense + 1)`` with 0-based *pool*
    ranks of each score.  Ties in the rank sorts and in the final top-k break by lowest pool position.
    ``out_idx`` (nq, k) int64 pre-filled with -1; ``out_val`` (nq, k) float64.
    """
    nq = offsets.shape[0] - 1
    for q in prange(nq):
        a = offsets[q]
        b = offsets[q + 1]
        m = b - a
        if m <= 0:
            continue
        rs = np.empty(m, dtype=np.int64)
        rd = np.empty(m, dtype=np.int64)
        _desc_ranks(sparse[a:b], rs)
        _desc_ranks(dense[a:b], rd)
        fused = np.empty(m, dtype=np.float64)
        for i in range(m):
            fused[i] = 1.0 / (k_rrf + rs[i] + 1) + 1.0 / (k_rrf + rd[i] + 1)
        topk_select(fused, k, out_idx[q], out_val[q])


@kernel()
def mmr_segments(rel, emb, offsets, lam, k, out_idx, q0, q1):
    """Maximal Marginal Relevance per pool (SPEC A.5), float64 scores.

    First pick: ``rel_i``; afterwards ``lam*rel_i - (1 - lam)*max_{j in selected} z_i.z_j``
    (unclipped cosine of the rows of ``emb``).  Candidates are scanned in ascending position
    order and replace the incumbent only on a strictly greater score (initial best
    ``-1e18``).  Writes ``min(k, m)`` positions to ``out_idx[q]`` (pre-filled with -1), for the
    pools ``q0 .. q1 - 1``.
    """
    d = emb.shape[1]
    for q in range(q0, q1):
        a = offsets[q]
        b = offsets[q + 1]
        m = b - a
        if m <= 0:
            continue
        maxsim = np.full(m, -np.inf)
        taken = np.zeros(m, dtype=np.bool_)
        n_sel = min(k, m)
        for t in range(n_sel):
            best = -1
            best_score = -1e18
            for i in range(m):
                if taken[i]:
                    continue
                if t == 0:
                    sc = np.float64(rel[a + i])
                else:
                    sc = lam * np.float64(rel[a + i]) - (1.0 - lam) * maxsim[i]
                if sc > best_score:
                    best = i
                    best_score = sc
            if best < 0:
                break
            taken[best] = True
            out_idx[q, t] = best
            zb = emb[a + best]
            for i in range(m):
                if taken[i]:
                    continue
                zi = emb[a + i]
                s = 0.0
                for c in range(d):
                    s += np.float64(zi[c]) * np.float64(zb[c])
                if s > maxsim[i]:
                    maxsim[i] = s


@kernel()
def dpp_map_segments(rel, emb, offsets, k, delta, out_idx, q0, q1):
    """Greedy DPP MAP, Gram-Schmidt form (SPEC A.5), float64, per pool.

    ``r = max(rel, 1e-8)``; rows of ``emb`` renormalised (norm floor 1e-8);
    ``R = diag(r) Z``; ``d_i = |R_i|^2 + delta``.  Repeat k times: chosen entries get
    ``-inf``; stop if ``max d <= 0``; pick the first argmax ``b``; stop if
    ``sqrt(d_b) < 1e-12``; deflate every row by ``u = R_b / sqrt(d_b)``; recompute d.
    If fewer than ``min(k, m)`` were chosen, append unchosen positions by descending ``r``
    (lower position first on ties).  ``out_idx`` (nq, k) pre-filled with -1.  Pools ``q0 .. q1 - 1``.
    """
    dim = emb.shape[1]
    for q in range(q0, q1):
        a = offsets[q]
        b = offsets[q + 1]
        m = b - a
        if m <= 0:
            continue
        n_target = min(k, m)
        r = np.empty(m, dtype=np.float64)
        R = np.empty((m, dim), dtype=np.float64)
        dd = np.empty(m, dtype=np.float64)
        for i in range(m):
            ri = max(np.float64(rel[a + i]), 1e-8)
            r[i] = ri
            nrm = 0.0
            for c in range(dim):
                v = np.float64(emb[a + i, c])
                nrm += v * v
            nrm = max(np.sqrt(nrm), 1e-8)
            s = 0.0
            for c in range(dim):
                v = ri * (np.float64(emb[a + i, c]) / nrm)
                R[i, c] = v
                s += v * v
            dd[i] = s + delta
        chosen = np.zeros(m, dtype=np.bool_)
        u = np.empty(dim, dtype=np.float64)
        n_ch = 0
        for _t in range(n_target):
            best = -1
            best_d = -np.inf
            for i in range(m):
                if chosen[i]:
                    dd[i] = -np.inf
                if dd[i] > best_d:
                    best_d = dd[i]
                    best = i
            if best < 0 or best_d <= 0.0:
                break
            chosen[best] = True
            out_idx[q, n_ch] = best
            n_ch += 1
            sb = np.sqrt(best_d)
            if sb < 1e-12:
                break
            for c in range(dim):
                u[c] = R[best, c] / sb
            for i in range(m):
                proj = 0.0
                for c in range(dim):
                    proj += R[i, c] * u[c]
                s = 0.0
                for c in range(dim):
                    v = R[i, c] - proj * u[c]
                    R[i, c] = v
                    s += v * v
                dd[i] = s + delta
        if n_ch < n_target:
            neg = np.empty(m, dtype=np.float64)
            for i in range(m):
                neg[i] = -r[i]
            order = argsort_stable(neg)
            for j in range(m):
                if n_ch >= n_target:
                    break
                i = order[j]
                if not chosen[i]:
                    chosen[i] = True
                    out_idx[q, n_ch] = i
                    n_ch += 1
