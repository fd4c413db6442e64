"""SparseGeometricRAG query path (SPEC B.6-B.10): routing, postings, local score, rescue,
final features, soft branch diversity.  Batched: ``prange`` over chunks of queries.

Index layout (built by ``jkofast.sgr.retriever``):

* query batch: ``q_indptr`` int64 (nq+1), ``q_terms`` int32 sorted unique per row,
  ``q_vals`` float32 (L2-normalised TF-IDF);
* graph G (routing) and semantic neighbour lists: CSR (int64 indptr, int32 ids, float32);
* branch postings ``b_indptr``/``b_mem`` (memberships of branch j, ascending doc id);
  memberships ``mem_doc`` int32, ``mem_m`` float32; codes ``code_term`` int32 (M, S),
  ``code_sign`` int8, ``code_cval`` float32 (= c_j[t]), ``code_w`` float32 (reliability),
  ``code_count`` int32;
* binary support ``s_indptr``/``s_idx`` (the TF-IDF row pattern; uint16 term ids when
  V <= 65,535, else int32), ``dl`` float64, ``idf`` float64; term postings
  ``t_indptr``/``t_docs``/``t_tf`` (rescue and the optional BM25 fusion) and, for the
  frequent terms (``tb_row[t] >= 0``), document bitsets ``tb_bits`` int64
  (rows × ceil(N / 64));
* centres ``c_indptr``/``c_terms``/``c_vals`` sorted by term id, ``c_norm`` float64.

Scalars travel in two small arrays (``fp`` float64, ``ip`` int64, indices ``F_*``/``I_*``
below) so variants stay flags, not recompilations.  Scratch (stamped tables of size V and
N) is allocated once per chunk and reused across its queries: the generation stamp is the
query index, so nothing is zeroed per query; the heap and pool-sized work rows are
allocated once per chunk per call.  The routed documents of a query are numbered by
position in the order they are found (``ulist[a]`` = document, ``dp[d]`` = (stamp,
position)); every per-document quantity is stored by position, so the scratch a query
touches stays dense on a large corpus.  ``sgr_query_batch`` (``prange`` over chunks) and
``sgr_query_serial`` (one chunk, no parallel launch) share the per-chunk body
``_query_chunk``.  Every top-k is strict IEEE with ties to the lowest id;
float sums within a query are serial, so results do not depend on threads.  The
``# stage k:`` comments in ``sgr_one_query`` are read by ``benchmarks/tools/sgr_eval.py --profile``
(it times an instrumented copy that exits at each of them).
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from jkofast import _codes
from jkofast._numba import kernel
from jkofast.kernels.topk import topk_ids, topk_ids_pos, topk_pos

# float parameters (fp)
F_ALPHA = 0
F_GAMMA = 1
F_LAM_M = 2
F_B_RESCUE = 3
F_ETA = 4
F_B_FINAL = 5
F_COORD = 6
F_W_TAIL = 7
F_W_LEX = 8
F_W_SEM = 9
F_W_RARE = 10
F_LAM_D = 11
F_AVGDL = 12
F_BM25_K1 = 13
F_BM25_B = 14
F_W_BM25 = 15
F_W_BM25_RESCUE = 16
N_FP = 17
# int parameters (ip)
I_BUDGET = 0
I_POOL = 1
I_N_RARE = 2
I_N_ELIG = 3
I_TOP_H = 4
I_N_DIV = 5
I_GATE = 6
I_GATE_MIN = 7
I_GATE_MULT = 8
I_BM25_CANDS = 9
I_F = 10
I_RESCUE_MODE = 11  # 0 auto, 1 support scan, 2 postings
N_IP = 12

STATUS_OK, STATUS_EMPTY = _codes.OK, _codes.EMPTY  # status codes: jkofast._codes


# Top-k on the query path: ``topk_ids`` / ``topk_pos`` of jkofast.kernels.topk (caller-owned heap scratch).


@kernel()
def route_query(qt, qv, g_indptr, g_idx, g_val, alpha, budget, rstamp, rval, gen, buf, out_t, out_w, hv, hi):
    """Weak second-order routing (SPEC B.6) for one query.

    ``route[t] = q_t`` on literal terms, then ``route[n] += α q_t G_tn`` over the G rows of
    the literal terms (in term-id order).  Writes the routed terms (literal terms in id
    order, then the strongest inferred terms up to ``budget`` in total, ties: lowest id)
    and their route weights ``ρ``; returns their number.  ``buf`` (int64, >= number of
    distinct inferred terms) and ``hv``/``hi`` (float64/int64, >= budget) are scratch.
    """
    nq = qt.shape[0]
    for a in range(nq):
        t = qt[a]
        rstamp[t] = gen
        rval[t] = np.float64(qv[a])
    ninf = 0
    for a in range(nq):
        t = qt[a]
        w = np.float64(qv[a])
        for p in range(np.uint64(g_indptr[t]), np.uint64(g_indptr[t + 1])):
            n = np.uint64(g_idx[p])  # unsigned: no wrap-around code
            if rstamp[n] != gen:
                rstamp[n] = gen
                rval[n] = 0.0
                buf[ninf] = n
                ninf += 1
            rval[n] += alpha * w * np.float64(g_val[p])
    nr = 0
    for a in range(nq):
        out_t[nr] = qt[a]
        out_w[nr] = rval[qt[a]]
        nr += 1
    room = budget - nq
    if room > 0 and ninf > 0:
        # top-`room` inferred terms by weight, ties to the lowest term id, written straight
        # after the literal terms (no sort of the candidates needed)
        n = topk_ids(rval, buf, ninf, room, out_t[nr:], out_w[nr:], hv, hi)
        nr += n
    return nr


@kernel()
def accumulate_tail(
    rt,
    rw,
    n_routed,
    b_indptr,
    b_mem,
    mem_doc,
    mem_m,
    code_term,
    code_sign,
    code_cval,
    code_w,
    code_count,
    mark,
    qval,
    gen,
    gamma,
    dp,
    esum,
    csum,
    dm_r,
    dm_e,
    dm_n,
    ulist,
    qt,
    qbits,
):
    """Branch-local signed scores over the postings of the routed branches (SPEC B.7).

    For every posting (d, j) of routed branch j = ``rt[k]`` with weight ``ρ = rw[k]``:
    ``L = Σ_r w_r (q[t_r] - c_j[t_r]) s_r``, ``Q = Σ_r q[t_r]²``,
    ``E = m ρ L Q^γ`` (0 when Q = 0).  The routed documents U get positions 0, 1, ... in
    the order they are first met: ``ulist[a]`` = the document at position a, and
    ``dp[d] = (gen, a)`` (stamp and position side by side: one cache line per visit).
    Everything per routed document is position-indexed and so dense, whatever N is:
    ``esum[a] += E``, ``csum[a] += m ρ``, (k, E) in ``dm_r``/``dm_e`` (row a, ``dm_n[a]``
    entries).  The query vector is read through ``mark`` (uint8, bit 0 = query term; a
    byte table stays in L1) and ``qval``.  ``qbits`` (int64, >= V/64 + 1, all zero; all
    zero again on exit) gets the query terms ``qt`` as a bitset of V bits: small enough
    to stay in L1, it decides whether a membership's codes hold any query term before
    the code coordinates are read for the score.  Returns |U|.
    """
    for a in range(qt.shape[0]):
        t = np.int64(qt[a])
        qbits[t >> 6] |= np.int64(1) << (t & 63)
    nu = 0
    for k in range(n_routed):
        j = rt[k]
        rho = rw[k]
        for p in range(b_indptr[j], b_indptr[j + 1]):
            m = b_mem[p]
            d = np.uint64(mem_doc[m])
            mr = np.float64(mem_m[m]) * rho
            e = 0.0
            # Q_dj = 0 (no query term among the codes: ~80 % of the routed memberships on
            # SciFact) gives E = 0 whatever L is: a branch-free OR of the marks decides
            # that before any floating-point work (exact: the skipped E is 0.0 too)
            nc = np.uint64(code_count[m])
            mu = np.uint64(m)  # unsigned row / column / term indices: no wrap-around code
            hit = np.uint64(0)
            for r in range(nc):
                t = np.uint64(code_term[mu, r])
                hit |= np.uint64(qbits[t >> np.uint64(6)]) >> (t & np.uint64(63))
            if hit & np.uint64(1):
                lsum = 0.0
                qsum = 0.0
                for r in range(nc):
                    t = np.uint64(code_term[mu, r])
                    qt_ = 0.0
                    if mark[t] & 1:
                        qt_ = qval[t]
                    lsum += np.float64(code_w[mu, r]) * (qt_ - np.float64(code_cval[mu, r])) * code_sign[mu, r]
                    qsum += qt_ * qt_
                if qsum > 0.0:
                    e = mr * lsum * math.pow(qsum, gamma)
            if dp[d, 0] != gen:
                dp[d, 0] = gen
                dp[d, 1] = nu
                esum[nu] = 0.0
                csum[nu] = 0.0
                dm_n[nu] = 0
                ulist[nu] = d
                nu += 1
            a = np.uint64(dp[d, 1])
            esum[a] += e
            csum[a] += mr
            c = np.uint64(dm_n[a])
            dm_r[a, c] = k
            dm_e[a, c] = e
            dm_n[a] += 1
    for a in range(qt.shape[0]):
        qbits[np.int64(qt[a]) >> 6] = 0
    return nu


@kernel()
def zscore_subset(vals, ids, n, out):
    """Population z-scores of ``vals[ids[:n]]`` into ``out[ids[:n]]``; 0 when std is 0."""
    if n == 0:
        return
    mu = 0.0
    for a in range(n):
        mu += vals[ids[a]]
    mu /= n
    var = 0.0
    for a in range(n):
        dv = vals[ids[a]] - mu
        var += dv * dv
    sd = math.sqrt(var / n)
    for a in range(n):
        if sd > 0.0:
            out[ids[a]] = (vals[ids[a]] - mu) / sd
        else:
            out[ids[a]] = 0.0


@kernel()
def _zscore_dense(vals, n, out):
    """Population z-scores of ``vals[:n]`` into ``out[:n]`` (same sums, same order, as
    ``zscore_subset`` over the same sequence); 0 when std is 0."""
    if n == 0:
        return
    mu = 0.0
    for a in range(n):
        mu += vals[a]
    mu /= n
    var = 0.0
    for a in range(n):
        dv = vals[a] - mu
        var += dv * dv
    sd = math.sqrt(var / n)
    for a in range(n):
        if sd > 0.0:
            out[a] = (vals[a] - mu) / sd
        else:
            out[a] = 0.0


@kernel()
def semantic_vector(qt, qv, sem_indptr, sem_idx, sem_val, idf, mark, sval, buf):
    """``semvec[n] += q_t · A[t, n] · idf(n)`` over each query term's semantic neighbours.

    ``sval`` (float64, V) must be all zero on entry (``_clear_marks`` restores that after
    each query), so that it can be summed branch-free over a document's support.  Sets
    bit 1 of ``mark`` on each distinct n, appends n to ``buf`` and returns their number.
    """
    ns = 0
    for a in range(qt.shape[0]):
        t = qt[a]
        w = np.float64(qv[a])
        for p in range(np.uint64(sem_indptr[t]), np.uint64(sem_indptr[t + 1])):
            n = np.uint64(sem_idx[p])  # unsigned: no wrap-around code
            if not (mark[n] & 2):
                mark[n] |= 2
                buf[ns] = n
                ns += 1
            sval[n] += w * np.float64(sem_val[p]) * idf[n]
    return ns


@kernel()
def rescue_query_terms(
    qt,
    mark,
    idf,
    dl,
    avgdl,
    b1,
    b2,
    coord,
    t_indptr,
    t_docs,
    tb_row,
    tb_bits,
    ulist,
    nuse,
    dp,
    gen,
    lex,
    lexadj,
    rare,
    cnt,
    n_rare,
    powtab,
):
    """lex1, lexadj and rare coverage of the routed docs (positions ``0..nuse-1``, document
    ``ulist[a]``), term by term, into the position-indexed ``lex`` / ``lexadj`` / ``rare``.

    For each query term t (ascending id) the hits among the routed docs come from the
    cheaper of: streaming the postings of t (``df(t)`` stamp tests through ``dp``) or, when
    t has a document bitset (``tb_row[t] >= 0``, frequent terms), testing ``nuse`` bits in
    position order.  Per doc the additions run in ascending term order, exactly as in a
    scan of its binary support, so the results are bit-identical to
    ``rescue_mode="scan"``.  ``cnt`` (float64, >= nuse) and ``powtab`` (float64, >= nq + 1)
    are scratch.
    """
    nq = qt.shape[0]
    for a in range(nuse):
        lex[a] = 0.0
        lexadj[a] = 0.0
        rare[a] = 0.0
        cnt[a] = 0.0
    for a in range(nq):
        t = qt[a]
        v = idf[t]
        v2 = v * v
        is_rare = (mark[t] & 4) != 0
        lo = t_indptr[t]
        hi = t_indptr[t + 1]
        row = tb_row[t]
        if row >= 0 and hi - lo > nuse:
            # branch-free (the bit is a coin flip for a frequent term): a miss adds +0.0,
            # which leaves these non-negative sums bit-unchanged
            ru = np.uint64(row)
            rr = 1.0 if is_rare else 0.0
            for b in range(np.uint64(nuse)):
                d = np.uint64(ulist[b])
                x = np.float64((tb_bits[ru, d >> np.uint64(6)] >> (d & np.uint64(63))) & 1)
                lex[b] += v * x
                lexadj[b] += v2 * x
                cnt[b] += x
                rare[b] += rr * x
        else:
            for p in range(np.uint64(lo), np.uint64(hi)):
                d = np.uint64(t_docs[p])  # unsigned: no wrap-around code
                if dp[d, 0] == gen:
                    b = np.uint64(dp[d, 1])
                    lex[b] += v
                    lexadj[b] += v2
                    cnt[b] += 1.0
                    if is_rare:
                        rare[b] += 1.0
    # pow((hits / nq), coord) takes nq + 1 values: tabulate them (same arguments, same bits)
    for c in range(nq + 1):
        powtab[c] = math.pow(c / nq, coord)
    for a in range(nuse):
        d = ulist[a]
        lex[a] = lex[a] / ((1.0 - b1) + b1 * dl[d] / avgdl)
        lexadj[a] = lexadj[a] / ((1.0 - b2) + b2 * dl[d] / avgdl) * powtab[np.int64(cnt[a])]
        rare[a] = rare[a] / n_rare if n_rare > 0 else 0.0


@kernel()
def semantic_presence_pool(sval, slot, svs, rbuf, n_sem, pool, npool, s_indptr, s_idx, sem_out):
    """``sem_out[a] = Σ_{n ∈ d} semvec[n]`` (ascending n) for the pool docs ``d = pool[a]``.

    Branch-free scan of each pool doc's binary support: ``slot`` (uint16, V, zero outside
    the semantic terms ``rbuf[:n_sem]``) maps a term to its entry of the small table
    ``svs`` (``svs[0] = 0.0``), which stays in L1 where a V-sized float64 table does not.
    Adding +0.0 leaves a sum unchanged, so this equals the marked scan of
    ``rescue_mode="scan"`` bit for bit, without its mispredicted branches.  With more
    than 65,534 semantic terms the V-sized ``sval`` (zero outside them) is read instead.
    """
    if n_sem < 65535:
        svs[0] = 0.0
        for a in range(n_sem):
            n = rbuf[a]
            slot[n] = a + 1
            svs[a + 1] = sval[n]
        for a in range(npool):
            d = pool[a]
            ssum = 0.0
            # unsigned positions: no negative-index wrap-around code in the inner loop
            for p in range(np.uint64(s_indptr[d]), np.uint64(s_indptr[d + 1])):
                ssum += svs[slot[s_idx[p]]]
            sem_out[a] = ssum
        for a in range(n_sem):
            slot[rbuf[a]] = 0
        return
    for a in range(npool):
        d = pool[a]
        ssum = 0.0
        for p in range(s_indptr[d], s_indptr[d + 1]):
            ssum += sval[s_idx[p]]
        sem_out[a] = ssum


@kernel()
def _cos_column(s, ne, rt, elig, c_indptr, c_terms, c_vals, c_norm, ctab, cos):
    """``cos[b, s] = cos[s, b]`` for every eligible b: scatter centre s into the zero table
    ``ctab``, sum branch-free over each centre b's entries (a term not in s adds +0.0),
    then clear ``ctab``.  The non-zero products are the shared terms in ascending id
    whichever centre is scattered, so the value equals the one of a sorted merge and of
    the scatter of either centre: Cos is exactly symmetric."""
    js = rt[elig[s]]
    for p in range(c_indptr[js], c_indptr[js + 1]):
        ctab[c_terms[p]] = np.float64(c_vals[p])
    for b in range(ne):
        jb = rt[elig[b]]
        s_ = 0.0
        # unsigned positions and term ids: no negative-index wrap-around code
        for q in range(np.uint64(c_indptr[jb]), np.uint64(c_indptr[jb + 1])):
            s_ += ctab[np.uint64(c_terms[q])] * np.float64(c_vals[q])
        den = c_norm[js] * c_norm[jb]
        v = s_ / den if den > 0.0 else 0.0
        cos[b, s] = v
        cos[s, b] = v
    for p in range(c_indptr[js], c_indptr[js + 1]):
        ctab[c_terms[p]] = 0.0


@kernel()
def diversify(
    pool,
    n_pool,
    rel_doc,
    plain,
    rt,
    n_routed,
    dm_r,
    dm_e,
    dm_n,
    c_indptr,
    c_terms,
    c_vals,
    c_norm,
    n_elig,
    top_h,
    n_div,
    lam_d,
    ctab,
    wi,
    wf,
    out_order,
):
    """Soft high-quality-branch diversity for ranks 2..n_div (SPEC B.10).

    ``pool`` / ``plain`` / ``out_order`` hold row indices of ``rel_doc`` and the ``dm_*``
    rows (the query path passes U positions).  ``plain`` = the pool in plain relevance
    order (desc, ties lowest doc id).  Writes the final order to ``out_order[:n_pool]``:
    rank 1 = ``plain[0]``; ranks 2..n_div greedily maximise
    ``minmax(rel over remaining) + λ_D · max dev_b`` over the doc's eligible branches
    (ties: earlier in plain order); the rest follow plain order.
    ``ctab`` (float64, V) must be all zero on entry and is all zero on exit (one centre
    at a time is scattered into it).  ``wi`` int64 (>= 9 rows) / ``wf`` float64 (>= 8 rows of
    ``>= max(n_routed·top_h, n_elig², n_pool·(F+1), n_div + n_pool, n_routed) + 1``) are
    scratch.
    """
    if n_div <= 1 or n_pool <= 1:
        for a in range(n_pool):
            out_order[a] = plain[a]
        return
    nrk = max(n_routed, 1)
    # div 1: H_j, the top-`top_h` evidence of every routed branch over the pool
    # H_j = mean of the top-`top_h` E_dj over pool docs, per routed branch position k
    hsum_top = wf[0, : nrk * top_h].reshape((nrk, top_h))
    hcnt = wi[0, :nrk]
    for k in range(nrk):
        hcnt[k] = 0
        for a in range(top_h):
            hsum_top[k, a] = -np.inf
    for a in range(n_pool):
        d = pool[a]
        for s in range(dm_n[d]):
            k = dm_r[d, s]
            e = dm_e[d, s]
            # keep the max if the doc has two memberships in branch k
            dup = False
            for s2 in range(s):
                if dm_r[d, s2] == k:
                    dup = True
            if dup:
                continue
            emax = e
            for s2 in range(s + 1, dm_n[d]):
                if dm_r[d, s2] == k and dm_e[d, s2] > emax:
                    emax = dm_e[d, s2]
            # insert into the descending top list of branch k
            c = min(hcnt[k], top_h)
            if c < top_h or emax > hsum_top[k, top_h - 1]:
                pos = c if c < top_h else top_h - 1
                while pos > 0 and hsum_top[k, pos - 1] < emax:
                    hsum_top[k, pos] = hsum_top[k, pos - 1]
                    pos -= 1
                hsum_top[k, pos] = emax
            hcnt[k] += 1
    # div 2: H_j means and the eligible top-n_elig branches
    h = wf[1, :nrk]
    n_valid = 0
    for k in range(nrk):
        h[k] = -np.inf
    for k in range(n_routed):
        c = min(hcnt[k], top_h)
        if c > 0:
            s_ = 0.0
            for a in range(c):
                s_ += hsum_top[k, a]
            h[k] = s_ / c
            n_valid += 1
    ne = min(n_elig, n_valid)
    elig = wi[1]
    helig = wf[2]
    ne = topk_pos(h, n_routed, ne, elig, helig, wf[3], wi[2])
    # div 3: eligible index per branch, cosine table, per plain position relp and eb
    elig_of = wi[3, :nrk]
    for k in range(nrk):
        elig_of[k] = -1
    for b in range(ne):
        elig_of[elig[b]] = b
    # cosines of the eligible (unit) centres, computed lazily: column s (all b) when
    # branch s first enters the selected set S, the only columns dev_b reads.
    nee = max(ne, 1)
    cos = wf[4, : nee * nee].reshape((nee, nee))
    have = wi[8, :nee]
    for b in range(ne):
        have[b] = 0
    # per plain position: relevance and the eligible branches of the doc
    F = dm_r.shape[1]
    relp = wf[5, :n_pool]
    eb = wi[4, : n_pool * F].reshape((n_pool, F))
    ebn = wi[5, :n_pool]
    used = wi[6, :n_pool]
    for a in range(n_pool):
        d = plain[a]
        relp[a] = rel_doc[d]
        used[a] = 0
        c = 0
        for s in range(dm_n[d]):
            b = elig_of[dm_r[d, s]]
            if b >= 0:
                eb[a, c] = b
                c += 1
        ebn[a] = c
    # div 4: rank 1 and the greedy ranks 2..n_div (cosine columns lazily)
    sel = wi[7]  # S (may repeat)
    ns = 0
    out_order[0] = plain[0]
    used[0] = 1
    best_b = -1
    for s in range(ebn[0]):
        b = eb[0, s]
        if best_b < 0 or b < best_b:  # eligible list is H-descending
            best_b = b
    if best_b >= 0:
        sel[ns] = best_b
        ns += 1
        _cos_column(best_b, ne, rt, elig, c_indptr, c_terms, c_vals, c_norm, ctab, cos)
        have[best_b] = 1
    dev = wf[6, :nee]
    nd = min(n_div, n_pool)
    first = 0
    last = n_pool - 1
    for rank in range(1, nd):
        # dev_b = 1 + mean(Cos[S,S]) - 2 mean(Cos[b,S]), min-max across eligible branches
        if ns > 0 and ne > 0:
            ss = 0.0
            for a in range(ns):
                for a2 in range(ns):
                    ss += cos[sel[a], sel[a2]]
            ss /= ns * ns
            for b in range(ne):
                bs = 0.0
                for a in range(ns):
                    bs += cos[b, sel[a]]
                dev[b] = 1.0 + ss - 2.0 * bs / ns
            lo = dev[0]
            hi = dev[0]
            for b in range(ne):
                lo = min(lo, dev[b])
                hi = max(hi, dev[b])
            for b in range(ne):
                dev[b] = (dev[b] - lo) / (hi - lo) if hi - lo >= 1e-9 else 0.0
        else:
            for b in range(ne):
                dev[b] = 0.0
        # relp is non-increasing along the plain order: max / min of the remaining
        # relevances are those of the first / last unused positions
        while used[first]:
            first += 1
        while used[last]:
            last -= 1
        rhi = relp[first]
        rlo = relp[last]
        devmax = 0.0
        if ns > 0:
            for b in range(ne):
                devmax = max(devmax, dev[b])
        best = -1
        bestv = -np.inf
        best_bb = -1
        for a in range(first, last + 1):
            if used[a]:
                continue
            r = relp[a]
            v = (r - rlo) / (rhi - rlo) if rhi - rlo >= 1e-9 else 0.0
            # exact early exit: the normalised relevance never increases along the plain
            # order and the bonus is at most λ_D·max dev (correctly rounded +, ×, / are
            # monotone), so no later doc can score strictly above bestv
            if best >= 0 and v + lam_d * devmax <= bestv:
                break
            bonus = 0.0
            bb = -1
            for s in range(ebn[a]):
                b = eb[a, s]
                # largest dev; ties -> larger H (= lower eligible index)
                if bb < 0 or dev[b] > dev[bb] or (dev[b] == dev[bb] and b < bb):
                    bb = b
            if bb >= 0 and ns > 0:
                bonus = dev[bb]
            v += lam_d * bonus
            if v > bestv:
                bestv = v
                best = a
                best_bb = bb
        used[best] = 1
        out_order[rank] = plain[best]
        if best_bb >= 0:
            sel[ns] = best_bb
            ns += 1
            if not have[best_bb] and rank + 1 < nd:  # needed by the next rank only
                _cos_column(best_bb, ne, rt, elig, c_indptr, c_terms, c_vals, c_norm, ctab, cos)
                have[best_bb] = 1
    # div 5: the rest in plain order
    o = nd
    for a in range(n_pool):
        if not used[a]:
            out_order[o] = plain[a]
            o += 1


@kernel()
def _clear_marks(qt, sem_indptr, sem_idx, mark, sval):
    """Reset the byte marks and semantic values set for one query (its terms and their
    semantic neighbours): both tables are all zero between queries."""
    for a in range(qt.shape[0]):
        t = qt[a]
        mark[t] = 0
        for p in range(sem_indptr[t], sem_indptr[t + 1]):
            mark[sem_idx[p]] = 0
            sval[sem_idx[p]] = 0.0


@kernel()
def sgr_one_query(
    gen,
    qt,
    qv,
    fp,
    ip,
    g_indptr,
    g_idx,
    g_val,
    b_indptr,
    b_mem,
    mem_doc,
    mem_m,
    code_term,
    code_sign,
    code_cval,
    code_w,
    code_count,
    s_indptr,
    s_idx,
    idf,
    dl,
    sem_indptr,
    sem_idx,
    sem_val,
    c_indptr,
    c_terms,
    c_vals,
    c_norm,
    t_indptr,
    t_docs,
    t_tf,
    bm25_idf,
    tb_row,
    tb_bits,
    qval,
    mark,
    rstamp,
    rval,
    sval,
    rbuf,
    rt,
    rw,
    dp,
    esum,
    csum,
    dm_r,
    dm_e,
    dm_n,
    ulist,
    tail,
    lex,
    lexadj,
    sem,
    rare,
    z1,
    z2,
    pre,
    bstamp,
    bval,
    blist,
    powtab,
    hv,
    hi,
    wi,
    wf,
    slot,
    svs,
    qbits,
    out_doc,
    out_comp,
    out_info,
):
    """The whole query path for one query; returns (n_pool, status).

    Routed documents are numbered by position (order of discovery, ``ulist[a]`` = doc,
    ``dp[d] = (gen, a)``) and every per-document quantity (``esum`` .. ``pre``, ``dm_*``)
    is position-indexed, so the scratch a query touches is dense even on a large corpus;
    only ``dp`` and the BM25 extension's ``bstamp`` / ``bval`` / ``blist`` are
    document-indexed.  ``out_doc`` (int64, >= P) receives the pool in final order;
    ``out_comp`` (7, >= P) float64 rows = tail, lexadj, sem, rare, relevance, lex1, bm25
    aligned with ``out_doc``; ``out_info`` (int64, 3) = (|U|, number of routed terms,
    |pool|).  ``hv``/``hi`` (float64/int64, >= max(N, budget)) are heap scratch;
    ``wi``/``wf`` (int64 (>= 13, W) / float64 (>= 15, W)) are pool-sized work rows (see
    ``sgr_query_batch``).
    """
    nq = qt.shape[0]
    out_info[0] = 0
    out_info[1] = 0
    out_info[2] = 0
    if nq == 0:
        return 0, STATUS_EMPTY
    avgdl = fp[F_AVGDL]
    big_p = ip[I_POOL]
    for a in range(nq):
        qval[qt[a]] = np.float64(qv[a])
        mark[qt[a]] = 1
    # stage 1: weak second-order routing (B.6)
    nr = route_query(qt, qv, g_indptr, g_idx, g_val, fp[F_ALPHA], ip[I_BUDGET], rstamp, rval, gen, rbuf, rt, rw, hv, hi)
    # stage 2: branch-local signed scores + consensus over the routed postings (B.7)
    nu = accumulate_tail(
        rt,
        rw,
        nr,
        b_indptr,
        b_mem,
        mem_doc,
        mem_m,
        code_term,
        code_sign,
        code_cval,
        code_w,
        code_count,
        mark,
        qval,
        gen,
        fp[F_GAMMA],
        dp,
        esum,
        csum,
        dm_r,
        dm_e,
        dm_n,
        ulist,
        qt,
        qbits,
    )
    n_routed_docs = nu
    # stage 3: optional BM25 fusion: full-corpus BM25 over the query terms' postings
    use_bm25 = ip[I_BM25_CANDS] > 0 or fp[F_W_BM25] != 0.0 or fp[F_W_BM25_RESCUE] != 0.0
    nb = 0
    if use_bm25:
        k1 = fp[F_BM25_K1]
        bb = fp[F_BM25_B]
        for a in range(nq):
            t = qt[a]
            w = bm25_idf[t]
            for p in range(t_indptr[t], t_indptr[t + 1]):
                d = t_docs[p]
                tf = np.float64(t_tf[p])
                if bstamp[d] != gen:
                    bstamp[d] = gen
                    bval[d] = 0.0
                    blist[nb] = d
                    nb += 1
                bval[d] += w * tf * (k1 + 1.0) / (tf + k1 * (1.0 - bb + bb * dl[d] / avgdl))
        nc = min(ip[I_BM25_CANDS], nb)
        if nc > 0:
            bsel = np.empty(nc, np.int64)
            bsv = np.empty(nc, np.float64)
            nc = topk_ids(bval, blist, nb, nc, bsel, bsv, hv, hi)
            for a in range(nc):
                d = bsel[a]
                if dp[d, 0] != gen:
                    dp[d, 0] = gen
                    dp[d, 1] = nu
                    esum[nu] = 0.0
                    csum[nu] = 0.0
                    dm_n[nu] = 0
                    ulist[nu] = d
                    nu += 1
    # stage 4: tail per routed doc, optional gate, semantic vector, rare terms
    if nu == 0:
        out_info[1] = nr
        _clear_marks(qt, sem_indptr, sem_idx, mark, sval)
        return 0, STATUS_EMPTY
    lam_m = fp[F_LAM_M]
    for a in range(nu):
        tail[a] = esum[a] + lam_m * csum[a]
    if use_bm25:
        for a in range(nu):
            d = ulist[a]
            if bstamp[d] != gen:
                bstamp[d] = gen
                bval[d] = 0.0
    # optional tail gate before the rescue (off in reference mode): keeps the top ng
    # routed documents by (tail desc, doc id asc), found by selection in O(|U|) (a heap of
    # ng = 10,000 cost more than the rescue it saves); the kept ones stay in discovery
    # order at positions 0..ng-1, the dropped ones leave U (stamp -1)
    nuse = nu
    live = gen  # the stamp of the documents in U from here on
    if ip[I_GATE] != 0:
        ng = min(nu, max(ip[I_GATE_MIN], ip[I_GATE_MULT] * big_p))
        if ng < nu:
            neg = z1[:nu]
            for a in range(nu):
                neg[a] = -tail[a]
            thr = -np.partition(neg, ng - 1)[ng - 1]  # the ng-th largest tail
            n_gt = 0
            n_eq = 0
            for a in range(nu):
                if tail[a] > thr:
                    n_gt += 1
                elif tail[a] == thr:
                    n_eq += 1
            eq = np.empty(n_eq, np.int64)
            c = 0
            for a in range(nu):
                if tail[a] == thr:
                    eq[c] = ulist[a]
                    c += 1
            cut = np.sort(eq)[ng - n_gt - 1]  # ties at the threshold: the lowest ids
            # the kept docs get the stamp `live` (unique per query, never a gen): only
            # they are restamped, the dropped ones keep `gen` and no longer match
            live = -gen - 2
            w = 0
            for a in range(nu):
                d = ulist[a]
                ta = tail[a]
                if ta > thr or (ta == thr and d <= cut):
                    if w != a:
                        ulist[w] = d
                        tail[w] = ta
                        dm_n[w] = dm_n[a]
                        for c in range(dm_n[a]):
                            dm_r[w, c] = dm_r[a, c]
                            dm_e[w, c] = dm_e[a, c]
                    dp[d, 0] = live
                    dp[d, 1] = w
                    w += 1
            nuse = w
    # query-only tables for the final features, set before the rescue
    n_sem = semantic_vector(qt, qv, sem_indptr, sem_idx, sem_val, idf, mark, sval, rbuf)
    n_rare = min(ip[I_N_RARE], nq)
    qidf = wf[0]
    for a in range(nq):
        qidf[a] = idf[qt[a]]
    rpos = wi[0]
    n_rare = topk_pos(qidf, nq, n_rare, rpos, wf[1], hv, hi)
    for a in range(n_rare):
        mark[qt[rpos[a]]] |= 4
    # stage 5: early rescue: lex1 (and the lexical pool features) for every (kept) routed
    # doc, by a scan of each doc's binary support (mode 1, the frozen method), by
    # streaming the postings of the query and semantic terms (mode 2), or per query term
    # by postings or document bitset (mode 0, auto); per doc all add the same terms in
    # ascending id order, so the results are bit-identical
    b1 = fp[F_B_RESCUE]
    b2 = fp[F_B_FINAL]
    coord = fp[F_COORD]
    mode = ip[I_RESCUE_MODE]
    if mode == 0:
        # per query term: postings or document bitset, whichever is cheaper; the semantic
        # presence is deferred to the pool (the only docs that read it)
        rescue_query_terms(
            qt,
            mark,
            idf,
            dl,
            avgdl,
            b1,
            b2,
            coord,
            t_indptr,
            t_docs,
            tb_row,
            tb_bits,
            ulist,
            nuse,
            dp,
            live,
            lex,
            lexadj,
            rare,
            z1,
            n_rare,
            powtab,
        )
    elif mode == 2:
        for a in range(nuse):
            lex[a] = 0.0
            lexadj[a] = 0.0
            sem[a] = 0.0
            rare[a] = 0.0
            z1[a] = 0.0
        for a in range(nq):
            t = qt[a]
            v = idf[t]
            v2 = v * v
            is_rare = (mark[t] & 4) != 0
            for p in range(t_indptr[t], t_indptr[t + 1]):
                d = t_docs[p]
                if dp[d, 0] == live:
                    b = dp[d, 1]
                    lex[b] += v
                    lexadj[b] += v2
                    z1[b] += 1.0
                    if is_rare:
                        rare[b] += 1.0
        sterms = np.sort(rbuf[:n_sem])
        for a in range(n_sem):
            n = sterms[a]
            v = sval[n]
            for p in range(t_indptr[n], t_indptr[n + 1]):
                d = t_docs[p]
                if dp[d, 0] == live:
                    sem[dp[d, 1]] += v
        for a in range(nuse):
            d = ulist[a]
            lex[a] = lex[a] / ((1.0 - b1) + b1 * dl[d] / avgdl)
            lexadj[a] = lexadj[a] / ((1.0 - b2) + b2 * dl[d] / avgdl) * math.pow(z1[a] / nq, coord)
            rare[a] = rare[a] / n_rare if n_rare > 0 else 0.0
    else:
        for a in range(nuse):
            d = ulist[a]
            s1 = 0.0
            s2 = 0.0
            nqd = 0
            ssum = 0.0
            nr_hit = 0
            for p in range(s_indptr[d], s_indptr[d + 1]):
                t = s_idx[p]
                mk = mark[t]
                if mk == 0:
                    continue
                if mk & 1:
                    v = idf[t]
                    s1 += v
                    s2 += v * v
                    nqd += 1
                if mk & 2:
                    ssum += sval[t]
                if mk & 4:
                    nr_hit += 1
            lex[a] = s1 / ((1.0 - b1) + b1 * dl[d] / avgdl)
            lexadj[a] = s2 / ((1.0 - b2) + b2 * dl[d] / avgdl) * math.pow(nqd / nq, coord)
            sem[a] = ssum
            rare[a] = nr_hit / n_rare if n_rare > 0 else 0.0
    # stage 6: shortlist score and top-P (B.8); z-scores in position order (= the order
    # of ulist, the sum order of the document-indexed version)
    _zscore_dense(tail, nuse, z1)
    _zscore_dense(lex, nuse, z2)
    eta = fp[F_ETA]
    for a in range(nuse):
        pre[a] = z1[a] + eta * z2[a]
    if fp[F_W_BM25_RESCUE] != 0.0:
        for a in range(nuse):
            z2[a] = bval[ulist[a]]
        _zscore_dense(z2, nuse, z1)
        wbr = fp[F_W_BM25_RESCUE]
        for a in range(nuse):
            pre[a] += wbr * z1[a]
    npool = min(big_p, nuse)
    pool = wi[0]  # pool docs, shortlist order
    npool = topk_ids_pos(pre, ulist, nuse, npool, pool, wf[0], hv, hi)
    pp = wi[12]  # their positions
    for a in range(npool):
        pp[a] = dp[pool[a], 1]
    # stage 7: semantic presence on the pool (deferred in the auto mode)
    semp = wf[3]
    if mode == 0:
        semantic_presence_pool(sval, slot, svs, rbuf, n_sem, pool, npool, s_indptr, s_idx, semp)
    else:
        for a in range(npool):
            semp[a] = sem[pp[a]]
    # sval back to all zero now (not at the end): diversify uses it as its zero table
    for a in range(n_sem):
        sval[rbuf[a]] = 0.0
    # stage 8: final features and relevance on the pool (B.9), plain order
    # features per pool index; z-scores over the pool in pool order
    lex1p = wf[1]
    lexadjp = wf[2]
    rarep = wf[4]
    rel = wf[5]
    feat = wf[6]
    zf = wf[7]
    for a in range(npool):
        o = pp[a]
        lex1p[a] = lex[o]
        lexadjp[a] = lexadj[o]
        rarep[a] = rare[o]
        rel[a] = 0.0
    # relevance = Σ w z_P(feature)
    w_feat = (fp[F_W_TAIL], fp[F_W_LEX], fp[F_W_SEM], fp[F_W_RARE], fp[F_W_BM25])
    for f in range(5):
        wf_ = w_feat[f]
        if wf_ == 0.0:
            continue
        if f == 0:
            for a in range(npool):
                feat[a] = tail[pp[a]]
            _zscore_dense(feat, npool, zf)
        elif f == 1:
            _zscore_dense(lexadjp, npool, zf)
        elif f == 2:
            _zscore_dense(semp, npool, zf)
        elif f == 3:
            _zscore_dense(rarep, npool, zf)
        else:
            for a in range(npool):
                feat[a] = bval[pool[a]] if use_bm25 else 0.0
            _zscore_dense(feat, npool, zf)
        for a in range(npool):
            rel[a] += wf_ * zf[a]
    for a in range(npool):
        pre[pp[a]] = rel[a]  # position-indexed relevance
    plain = wi[1]
    topk_ids_pos(rel, pool, npool, npool, plain, zf, hv, hi)
    for a in range(npool):
        plain[a] = dp[plain[a], 1]  # doc -> position
    # stage 9: soft branch diversity on ranks 2..n_div (B.10), over positions
    order = wi[2]
    diversify(
        pp,
        npool,
        pre,
        plain,
        rt,
        nr,
        dm_r,
        dm_e,
        dm_n,
        c_indptr,
        c_terms,
        c_vals,
        c_norm,
        ip[I_N_ELIG],
        ip[I_TOP_H],
        ip[I_N_DIV],
        fp[F_LAM_D],
        sval,
        wi[3:12],
        wf[8:],
        order,
    )
    # stage 10: outputs (the first out_doc.shape[0] of the final order)
    # components aligned with the final order: map position -> pool index via z2 scratch
    for a in range(npool):
        z2[pp[a]] = a
    n_out = min(npool, out_doc.shape[0])
    for a in range(n_out):
        o = order[a]
        k = np.int64(z2[o])
        d = ulist[o]
        out_doc[a] = d
        out_comp[0, a] = tail[o]
        out_comp[1, a] = lexadjp[k]
        out_comp[2, a] = semp[k]
        out_comp[3, a] = rarep[k]
        out_comp[4, a] = rel[k]
        out_comp[5, a] = lex1p[k]
        out_comp[6, a] = bval[d] if use_bm25 else 0.0
    out_info[0] = n_routed_docs
    out_info[1] = nr
    out_info[2] = npool
    _clear_marks(qt, sem_indptr, sem_idx, mark, sval)
    return n_out, STATUS_OK


@kernel()
def _batch_sizes(q_indptr, q_terms, sem_indptr, ip, n_f):
    """(max query length, max semantic-neighbour entries of a query, routed-term room,
    pool-sized work row width) of a batch: the per-chunk scratch sizes."""
    nq = q_indptr.shape[0] - 1
    max_q = 0
    for i in range(nq):
        max_q = max(max_q, q_indptr[i + 1] - q_indptr[i])
    max_sem = 0
    for i in range(nq):
        ns_ = 0
        for a in range(q_indptr[i], q_indptr[i + 1]):
            ns_ += sem_indptr[q_terms[a] + 1] - sem_indptr[q_terms[a]]
        max_sem = max(max_sem, ns_)
    n_rt = max_q + ip[I_BUDGET]
    big_p = ip[I_POOL]
    n_w = max(big_p * (n_f + 1), n_rt * ip[I_TOP_H], ip[I_N_ELIG] * ip[I_N_ELIG], ip[I_N_DIV] + big_p, n_rt, max_q) + 1
    return max_q, max_sem, n_rt, n_w


@kernel()
def _query_chunk(
    c,
    max_q,
    max_sem,
    n_rt,
    n_w,
    q_indptr,
    q_terms,
    q_vals,
    fp,
    ip,
    g_indptr,
    g_idx,
    g_val,
    b_indptr,
    b_mem,
    mem_doc,
    mem_m,
    code_term,
    code_sign,
    code_cval,
    code_w,
    code_count,
    s_indptr,
    s_idx,
    idf,
    dl,
    sem_indptr,
    sem_idx,
    sem_val,
    c_indptr,
    c_terms,
    c_vals,
    c_norm,
    t_indptr,
    t_docs,
    t_tf,
    bm25_idf,
    tb_row,
    tb_bits,
    n_chunks,
    gen_base,
    sc_vi,
    sc_vf,
    sc_mark,
    sc_dp,
    sc_ni,
    sc_nf,
    sc_dmr,
    sc_dme,
    sc_slot,
    out_doc,
    out_comp,
    out_n,
    out_info,
    out_status,
):
    """Chunk ``c`` of ``n_chunks`` contiguous chunks of the batch (one scratch slab)."""
    nq = q_indptr.shape[0] - 1
    n_docs = dl.shape[0]
    step = (nq + n_chunks - 1) // n_chunks
    lo = c * step
    hi = min(nq, lo + step)
    if lo >= hi:
        return
    rstamp = sc_vi[c, 0]
    rbuf = sc_vi[c, 1]
    qval = sc_vf[c, 0]
    rval = sc_vf[c, 1]
    sval = sc_vf[c, 2]
    mark = sc_mark[c]  # bit 0 query term, 1 semantic, 2 rare; cleared after each query
    slot = sc_slot[c]  # semantic term -> entry of svs; all zero between queries
    svs = np.empty(max_sem + 1, np.float64)
    qbits = np.zeros((sval.shape[0] >> 6) + 1, np.int64)  # query-term bitset, zero between queries
    dp = sc_dp[c]
    bstamp = sc_ni[c, 0]
    dm_n = sc_ni[c, 1]
    ulist = sc_ni[c, 2]
    blist = sc_ni[c, 3]
    esum = sc_nf[c, 0]
    csum = sc_nf[c, 1]
    tail = sc_nf[c, 2]
    lex = sc_nf[c, 3]
    lexadj = sc_nf[c, 4]
    sem = sc_nf[c, 5]
    rare = sc_nf[c, 6]
    z1 = sc_nf[c, 7]
    z2 = sc_nf[c, 8]
    pre = sc_nf[c, 9]
    bval = sc_nf[c, 10]  # document-indexed
    dm_r = sc_dmr[c]
    dm_e = sc_dme[c]
    rt = np.empty(n_rt, np.int64)
    rw = np.empty(n_rt, np.float64)
    info = np.zeros(3, np.int64)
    powtab = np.empty(max_q + 1, np.float64)
    # per-chunk heap and pool-sized work rows, allocated once per call (not per query)
    heap_v = np.empty(max(n_docs, n_rt) + 1, np.float64)
    heap_i = np.empty(max(n_docs, n_rt) + 1, np.int64)
    wi = np.empty((13, n_w), np.int64)
    wf = np.empty((15, n_w), np.float64)
    for i in range(lo, hi):
        s = q_indptr[i]
        e = q_indptr[i + 1]
        n, st = sgr_one_query(
            gen_base + i,
            q_terms[s:e],
            q_vals[s:e],
            fp,
            ip,
            g_indptr,
            g_idx,
            g_val,
            b_indptr,
            b_mem,
            mem_doc,
            mem_m,
            code_term,
            code_sign,
            code_cval,
            code_w,
            code_count,
            s_indptr,
            s_idx,
            idf,
            dl,
            sem_indptr,
            sem_idx,
            sem_val,
            c_indptr,
            c_terms,
            c_vals,
            c_norm,
            t_indptr,
            t_docs,
            t_tf,
            bm25_idf,
            tb_row,
            tb_bits,
            qval,
            mark,
            rstamp,
            rval,
            sval,
            rbuf,
            rt,
            rw,
            dp,
            esum,
            csum,
            dm_r,
            dm_e,
            dm_n,
            ulist,
            tail,
            lex,
            lexadj,
            sem,
            rare,
            z1,
            z2,
            pre,
            bstamp,
            bval,
            blist,
            powtab,
            heap_v,
            heap_i,
            wi,
            wf,
            slot,
            svs,
            qbits,
            out_doc[i],
            out_comp[i],
            info,
        )
        out_n[i] = n
        out_status[i] = st
        for a in range(3):
            out_info[i, a] = info[a]


@kernel(parallel=True)
def sgr_query_batch(
    q_indptr,
    q_terms,
    q_vals,
    fp,
    ip,
    g_indptr,
    g_idx,
    g_val,
    b_indptr,
    b_mem,
    mem_doc,
    mem_m,
    code_term,
    code_sign,
    code_cval,
    code_w,
    code_count,
    s_indptr,
    s_idx,
    idf,
    dl,
    sem_indptr,
    sem_idx,
    sem_val,
    c_indptr,
    c_terms,
    c_vals,
    c_norm,
    t_indptr,
    t_docs,
    t_tf,
    bm25_idf,
    tb_row,
    tb_bits,
    n_chunks,
    gen_base,
    sc_vi,
    sc_vf,
    sc_mark,
    sc_dp,
    sc_ni,
    sc_nf,
    sc_dmr,
    sc_dme,
    sc_slot,
    out_doc,
    out_comp,
    out_n,
    out_info,
    out_status,
):
    """Batched SGR query path; prange over ``n_chunks`` contiguous chunks of queries.

    Scratch is owned by the caller and reused across calls, one slab per chunk (chunk c
    only touches slab c): ``sc_vi`` int64 (>= n_chunks, 2, V) = route stamps, route /
    semantic-term buffer; ``sc_vf`` float64 (·, 3, V) = query, route and semantic values
    (the semantic row all zero between queries); ``sc_mark`` uint8 (·, V), all zero
    between queries; ``sc_dp`` int64 (·, N, 2) = per document (stamp, position in U);
    ``sc_ni`` int64 (·, 4, N) = BM25 stamps (document-indexed), membership counts (by
    position), routed list (position -> document), BM25 list; ``sc_nf`` float64
    (·, 11, N) (position-indexed rows); ``sc_dmr``/``sc_dme`` (·, N, F) (by position);
    ``sc_slot`` uint16 (·, V), all zero between queries.  Stamps start at -1 and query i is stamped
    ``gen_base + i``: the caller advances ``gen_base`` by nq after each call, so nothing is
    re-initialised between queries or calls.

    Per query i: ``out_doc[i, :n]`` (int64) = pool in final order (diversity on ranks
    2..n_div), ``out_comp[i, :, :n]`` = components (tail, lexadj, sem, rare, relevance,
    lex1, bm25), ``out_n[i] = n``, ``out_info[i]`` = (|U|, routed terms, |pool|),
    ``out_status[i]`` = 0 (ok) or 3 (empty: no known query term / no routed document).
    Rows beyond ``n`` are left untouched (the wrapper pre-fills padding).
    """
    max_q, max_sem, n_rt, n_w = _batch_sizes(q_indptr, q_terms, sem_indptr, ip, sc_dmr.shape[2])
    for c in prange(n_chunks):
        _query_chunk(
            c,
            max_q,
            max_sem,
            n_rt,
            n_w,
            q_indptr,
            q_terms,
            q_vals,
            fp,
            ip,
            g_indptr,
            g_idx,
            g_val,
            b_indptr,
            b_mem,
            mem_doc,
            mem_m,
            code_term,
            code_sign,
            code_cval,
            code_w,
            code_count,
            s_indptr,
            s_idx,
            idf,
            dl,
            sem_indptr,
            sem_idx,
            sem_val,
            c_indptr,
            c_terms,
            c_vals,
            c_norm,
            t_indptr,
            t_docs,
            t_tf,
            bm25_idf,
            tb_row,
            tb_bits,
            n_chunks,
            gen_base,
            sc_vi,
            sc_vf,
            sc_mark,
            sc_dp,
            sc_ni,
            sc_nf,
            sc_dmr,
            sc_dme,
            sc_slot,
            out_doc,
            out_comp,
            out_n,
            out_info,
            out_status,
        )


@kernel()
def sgr_query_serial(
    q_indptr,
    q_terms,
    q_vals,
    fp,
    ip,
    g_indptr,
    g_idx,
    g_val,
    b_indptr,
    b_mem,
    mem_doc,
    mem_m,
    code_term,
    code_sign,
    code_cval,
    code_w,
    code_count,
    s_indptr,
    s_idx,
    idf,
    dl,
    sem_indptr,
    sem_idx,
    sem_val,
    c_indptr,
    c_terms,
    c_vals,
    c_norm,
    t_indptr,
    t_docs,
    t_tf,
    bm25_idf,
    tb_row,
    tb_bits,
    n_chunks,
    gen_base,
    sc_vi,
    sc_vf,
    sc_mark,
    sc_dp,
    sc_ni,
    sc_nf,
    sc_dmr,
    sc_dme,
    sc_slot,
    out_doc,
    out_comp,
    out_n,
    out_info,
    out_status,
):
    """``sgr_query_batch`` on the calling thread, without the parallel launch (one query
    per call: the launch is a fixed cost of several µs)."""
    max_q, max_sem, n_rt, n_w = _batch_sizes(q_indptr, q_terms, sem_indptr, ip, sc_dmr.shape[2])
    for c in range(n_chunks):
        _query_chunk(
            c,
            max_q,
            max_sem,
            n_rt,
            n_w,
            q_indptr,
            q_terms,
            q_vals,
            fp,
            ip,
            g_indptr,
            g_idx,
            g_val,
            b_indptr,
            b_mem,
            mem_doc,
            mem_m,
            code_term,
            code_sign,
            code_cval,
            code_w,
            code_count,
            s_indptr,
            s_idx,
            idf,
            dl,
            sem_indptr,
            sem_idx,
            sem_val,
            c_indptr,
            c_terms,
            c_vals,
            c_norm,
            t_indptr,
            t_docs,
            t_tf,
            bm25_idf,
            tb_row,
            tb_bits,
            n_chunks,
            gen_base,
            sc_vi,
            sc_vf,
            sc_mark,
            sc_dp,
            sc_ni,
            sc_nf,
            sc_dmr,
            sc_dme,
            sc_slot,
            out_doc,
            out_comp,
            out_n,
            out_info,
            out_status,
        )


@kernel()
def cap_scores_desc(out_doc, comp, out):
    """``search`` scores: the relevance ``comp[i, 4, c]`` as float32, capped to just
    below the previous rank's score (strictly decreasing, so tools that re-sort by score
    keep the diversified order).  ``out`` float32 (nq, >= kk) pre-filled with -inf; ranks
    with ``out_doc < 0`` stay -inf."""
    kk = min(out_doc.shape[1], out.shape[1])
    ninf = np.float32(-np.inf)
    for i in range(out_doc.shape[0]):
        for c in range(kk):
            if out_doc[i, c] < 0:
                break
            r = np.float32(comp[i, 4, c])
            if not np.isfinite(r):
                out[i, c] = ninf
            elif c == 0:
                out[i, c] = r
            else:
                cap = np.nextafter(out[i, c - 1], ninf)
                out[i, c] = r if r < cap else cap
