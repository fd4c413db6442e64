"""SparseGeometricRAG index build kernels (SPEC B.3-B.5), over CSR arrays.

Layout conventions (the wrapper ``jkofast.sgr.retriever`` guarantees them):

* the TF-IDF matrix X arrives as ``(x_indptr int64, x_indices int32, x_data float32)``,
  canonical (column ids sorted and unique within each row);
* memberships are numbered doc-major: membership ``m`` belongs to document ``mem_doc[m]``
  and branch (= term) ``mem_branch[m]``; ``b_indptr``/``b_mem`` list the memberships of
  each branch in ascending document order (the branch postings);
* fixed-width outputs (``(rows, K)`` tables plus a count per row) are compacted to CSR by
  the wrapper.

The row kernels take a range of rows (``lo, hi``) and the chunked ones a range of chunks
(``c0, c1`` of ``n_chunks``); the wrapper runs disjoint ranges on several threads at once
(``jkofast._threads.over_ranges``; kernels release the GIL).  A serial kernel compiles in about a
third of the time of a ``prange`` one (the SciFact fit's first call 13 -> 8 CPU s), and each range
costs milliseconds, so the build runs as fast as it did with ``prange``.  Each chunk allocates
its own stamped scratch once and reuses it for its rows (no dense zeroing per row), and every
range writes only the rows it owns.  Results therefore do not depend on the chunking or thread
count.  Ties in every top-k break by the lowest term id (positions in sorted CSR rows).
"""

from __future__ import annotations

import math

import numpy as np

from jkofast._numba import kernel
from jkofast.kernels.sgr.postings import vbyte_rest
from jkofast.kernels.sorting import sort_range
from jkofast.kernels.topk import topk_select, topk_select_subset


@kernel()
def _chunk_bounds(n, n_chunks, c):
    step = (n + n_chunks - 1) // n_chunks
    lo = c * step
    hi = min(n, lo + step)
    return lo, hi


@kernel()
def l2_rows_in_order(indptr, order, x, lo, hi):
    """L2-normalise the CSR rows ``lo .. hi - 1`` of float32 ``x`` in place, as scikit-learn does.

    scikit-learn's ``normalize(norm="l2")`` on float32 data: the float32 squares of a row summed
    in float64 in the order ``order[indptr[i] : indptr[i + 1]]`` (positions into ``x``: the order
    in which its matrix stores the row), the square root, then each value divided by it in
    float64 and rounded to float32. A row whose sum is 0 is left as it is. Strict IEEE.
    """
    for i in range(lo, hi):
        s = 0.0
        for j in range(indptr[i], indptr[i + 1]):
            v = x[order[j]]
            s += v * v  # a float32 product, added in float64
        if s == 0.0:
            continue
        s = np.sqrt(s)
        for j in range(indptr[i], indptr[i + 1]):
            x[j] = x[j] / s


@kernel()
def top_terms_per_row(x_indptr, x_indices, x_data, k, out_terms, out_vals, out_count, lo, hi):
    """Top-``k`` coordinates of every CSR row by value (ties: lowest term id).

    Writes ``out_terms[i, :n]`` (int32, ranked order), ``out_vals[i, :n]`` (float32) and
    ``out_count[i] = n = min(k, nnz_i)``, for the rows ``lo .. hi - 1`` (each owns its output row).
    """
    for i in range(lo, hi):
        s = x_indptr[i]
        e = x_indptr[i + 1]
        pos = np.empty(k, np.int64)
        val = np.empty(k, x_data.dtype)
        n = topk_select(x_data[s:e], k, pos, val)
        for r in range(n):
            out_terms[i, r] = x_indices[s + pos[r]]
            out_vals[i, r] = val[r]
        out_count[i] = n


@kernel()
def branch_centres(
    b_indptr,
    b_mem,
    mem_doc,
    mem_m,
    x_indptr,
    x_indices,
    x_data,
    n_terms,
    n_keep,
    n_chunks,
    out_terms,
    out_vals,
    out_count,
    c0,
    c1,
):
    """Membership-weighted branch centres ``c_j = Σ m_dj x_d / Σ m_dj``, top ``n_keep``.

    For every branch j with at least one membership, the accumulated centre is truncated to
    its ``n_keep`` largest coordinates (ties: lowest term id) and written sorted by term id
    into ``out_terms[j]`` (int32) / ``out_vals[j]`` (float32); ``out_count[j]`` = kept count.
    Accumulation is float64, serial over the branch's documents in ascending id order.  Chunks
    ``c0 .. c1 - 1`` of ``n_chunks`` of branches.
    """
    n_branches = b_indptr.shape[0] - 1
    # per-chunk scratch, allocated once per chunk and reused for its branches
    for c in range(c0, c1):
        lo, hi = _chunk_bounds(n_branches, n_chunks, c)
        if lo >= hi:
            continue
        acc = np.zeros(n_terms, np.float64)
        stamp = np.full(n_terms, -1, np.int64)
        touched = np.empty(n_terms, np.int64)
        vals = np.empty(n_terms, np.float64)
        pos = np.empty(n_keep, np.int64)
        kv = np.empty(n_keep, np.float64)
        for j in range(lo, hi):
            ps = b_indptr[j]
            pe = b_indptr[j + 1]
            out_count[j] = 0
            if pe == ps:
                continue
            nt = 0
            msum = 0.0
            for p in range(ps, pe):
                m = b_mem[p]
                d = mem_doc[m]
                w = np.float64(mem_m[m])
                msum += w
                for q in range(x_indptr[d], x_indptr[d + 1]):
                    t = x_indices[q]
                    if stamp[t] != j:
                        stamp[t] = j
                        acc[t] = 0.0
                        touched[nt] = t
                        nt += 1
                    acc[t] += w * np.float64(x_data[q])
            # sort touched terms by id so ties in the top-k go to the lowest id
            sort_range(touched, np.int64(0), np.int64(nt))  # this row's scratch (refilled per row): in place
            tt = touched
            for a in range(nt):
                vals[a] = acc[tt[a]] / msum
            n = topk_select(vals[:nt], n_keep, pos, kv)
            sort_range(pos, np.int64(0), np.int64(n))  # pos is this row's scratch: sorted in place
            sel = pos
            for a in range(n):
                out_terms[j, a] = tt[sel[a]]
                out_vals[j, a] = vals[sel[a]]
            out_count[j] = n


@kernel()
def encode_codes(
    mem_doc, mem_branch, x_indptr, x_indices, x_data, c_indptr, c_terms, c_vals, out_term, out_sign, lo, hi
):
    """Residual sign codes of every membership (SPEC B.4), packed.

    ``r = x_d - c_j`` on the document's own non-zero terms (``c_j`` looked up by a merge of
    the two sorted rows); keep the ``S = out_term.shape[1]`` largest ``|r|`` (ties: lowest
    term id) and store their term ids sorted ascending in ``out_term[m]`` (uint16 or uint32;
    the slots past the document's non-zero count hold the dtype's maximum, the sentinel,
    which is >= V) and the signs as a bitmask: bit ``r & 15`` of ``out_sign[m, r >> 4]``
    (uint16) is set when ``r_t >= 0`` (sign +1), clear for -1.  Memberships ``lo .. hi - 1``.
    """
    n_code = out_term.shape[1]
    sentinel = out_term.dtype.type(np.iinfo(out_term.dtype).max)
    for m in range(lo, hi):
        d = mem_doc[m]
        j = mem_branch[m]
        xs = x_indptr[d]
        xe = x_indptr[d + 1]
        nnz = xe - xs
        absr = np.empty(nnz, np.float64)
        rr = np.empty(nnz, np.float64)
        a = c_indptr[j]
        ae = c_indptr[j + 1]
        for q in range(xs, xe):
            t = x_indices[q]
            while a < ae and c_terms[a] < t:
                a += 1
            cv = 0.0
            if a < ae and c_terms[a] == t:
                cv = np.float64(c_vals[a])
            rr[q - xs] = np.float64(x_data[q]) - cv
            absr[q - xs] = abs(rr[q - xs])
        pos = np.empty(n_code, np.int64)
        kv = np.empty(n_code, np.float64)
        n = topk_select(absr, n_code, pos, kv)
        sort_range(pos, np.int64(0), np.int64(n))  # pos is this row's scratch: sorted in place
        sel = pos
        for w in range(out_sign.shape[1]):
            out_sign[m, w] = 0
        for r in range(n):
            p = sel[r]
            out_term[m, r] = x_indices[xs + p]
            if rr[p] >= 0.0:
                out_sign[m, r >> 4] |= np.uint16(1 << (r & 15))
        for r in range(n, n_code):
            out_term[m, r] = sentinel


@kernel()
def code_sign_of(code_sign, m, r):
    """Sign (+1.0 / -1.0) of code slot ``r`` of membership ``m`` from the packed bitmask."""
    return 1.0 if (code_sign[m, r >> 4] >> np.uint16(r & 15)) & np.uint16(1) else -1.0


@kernel()
def global_sign_variance(code_term, code_sign, n_terms, out_gvar):
    """``gvar[t] = cnt_t/M - (Σ z_t / M)²`` over all M memberships (serial, float64).

    Codes as written by ``encode_codes`` (a term id >= ``n_terms`` ends a code).
    """
    n_mem = code_term.shape[0]
    cnt = np.zeros(n_terms, np.float64)
    sz = np.zeros(n_terms, np.float64)
    for m in range(n_mem):
        for r in range(code_term.shape[1]):
            t = np.int64(code_term[m, r])
            if t >= n_terms:
                break
            cnt[t] += 1.0
            sz[t] += code_sign_of(code_sign, m, r)
    for t in range(n_terms):
        if n_mem > 0:
            mu = sz[t] / n_mem
            out_gvar[t] = cnt[t] / n_mem - mu * mu
        else:
            out_gvar[t] = 0.0


@kernel()
def half_round(x):
    """Round a float64 to the nearest float16 value (ties to even), returned as float64.

    The conversion ``numpy.float64 -> numpy.float16`` (Numba has no float16 type): the
    quantum of ``x`` in half precision is ``2^(e - 11)`` for ``x = f·2^e`` (f in [0.5, 1)),
    at least ``2^-24`` (subnormals); ``x / q`` is exact (a power of two), rounded to the
    nearest integer with ties to even; beyond the largest half (65504) the result is inf.
    """
    if x != x or x == 0.0 or math.isinf(x):
        return x
    ax = abs(x)
    _, e = math.frexp(ax)
    qe = max(e - 11, -24)
    y = math.ldexp(ax, -qe)
    r = math.floor(y)
    diff = y - r
    if diff > 0.5 or (diff == 0.5 and r % 2.0 == 1.0):
        r += 1.0
    v = math.ldexp(r, qe)
    if v > 65504.0:
        v = math.inf
    return v if x > 0.0 else -v


@kernel()
def reliability_value(cnt, sz, nj, gvar_t, tau, beta, scale, f16):
    """Reliability weight of one (branch, term) entry (SPEC B.4), as the index stores it.

    ``lv = cnt/n_j - (Σz/n_j)²``, ``shr = cnt/(cnt+τ)·lv + τ/(cnt+τ)·gvar[t]``,
    ``w = (shr + 1e-6)^β · scale`` (``scale`` rescales the branch to mean 1), then rounded
    through float16 (``f16``) or float32, returned as float64.  The build and the query path
    (for the entries seen once, which are not stored) both call this one function, so the
    two give the same bits.
    """
    mu = sz / nj
    lv = cnt / nj - mu * mu
    shr = cnt / (cnt + tau) * lv + tau / (cnt + tau) * gvar_t
    w = math.pow(shr + 1e-6, beta) * scale
    if f16:
        return half_round(w)
    return np.float64(np.float32(w))


@kernel()
def _branch_code_stats(j, ps, pe, b_mem, code_term, code_sign, cnt, sz, stamp, touched):
    """Count (``cnt``) and sign-sum (``sz``) every code term of branch j's memberships.

    Memberships ``b_mem[ps:pe]``; a term's first visit (``stamp[t] != j``) resets its
    entries and appends it to ``touched``.  Returns the number of distinct terms.
    """
    n_terms = cnt.shape[0]
    nt = 0
    for p in range(ps, pe):
        m = b_mem[p]
        for r in range(code_term.shape[1]):
            t = np.int64(code_term[m, r])
            if t >= n_terms:
                break
            if stamp[t] != j:
                stamp[t] = j
                cnt[t] = 0.0
                sz[t] = 0.0
                touched[nt] = t
                nt += 1
            cnt[t] += 1.0
            sz[t] += code_sign_of(code_sign, m, r)
    return nt


@kernel()
def reliability_rows(
    b_indptr,
    b_mem,
    code_term,
    code_sign,
    gvar,
    tau_beta,
    weighted_mean,
    f16,
    n_chunks,
    r_indptr,
    out_terms,
    out_w,
    out_scale,
    c0,
    c1,
):
    """Shrunk zero-inclusive branch-local sign variance -> reliability rows (SPEC B.4).

    For branch j with ``n_j`` memberships and code term t (``cnt`` occurrences, sign sum
    ``Σz``) the weight is ``reliability_value`` (``tau_beta = (tau, beta)``); the branch's ``scale`` makes the unrounded
    weights mean 1 over its distinct (j, t) entries (``weighted_mean=False``) or over its
    code occurrences (``True``) and is written to ``out_scale[j]`` (1.0 for an empty branch).
    Only the entries seen at least twice are stored (an entry seen once has ``Σz = ±1``, so
    its weight follows from ``n_j``, ``gvar[t]`` and ``scale`` alone, and the query path
    recomputes it).  With ``r_indptr[0] < 0`` the kernel only counts: ``out_scale[j]`` and
    ``r_indptr[j + 1]`` = the number of stored entries of branch j; otherwise it writes the
    sorted term ids ``out_terms[r_indptr[j]:r_indptr[j + 1]]`` and weights ``out_w``
    (float32).  Codes as written by ``encode_codes``.  Chunks ``c0 .. c1 - 1`` of ``n_chunks`` of branches.
    """
    tau, beta = tau_beta
    n_branches = b_indptr.shape[0] - 1
    n_terms = gvar.shape[0]
    count_only = r_indptr[0] < 0
    for c in range(c0, c1):
        lo, hi = _chunk_bounds(n_branches, n_chunks, c)
        if lo >= hi:
            continue
        cnt = np.zeros(n_terms, np.float64)
        sz = np.zeros(n_terms, np.float64)
        stamp = np.full(n_terms, -1, np.int64)
        touched = np.empty(n_terms, np.int64)
        for j in range(lo, hi):
            ps = b_indptr[j]
            pe = b_indptr[j + 1]
            if pe == ps:
                out_scale[j] = 1.0
                if count_only:
                    r_indptr[j + 1] = 0
                continue
            nj = np.float64(pe - ps)
            nt = _branch_code_stats(j, ps, pe, b_mem, code_term, code_sign, cnt, sz, stamp, touched)
            sort_range(touched, np.int64(0), np.int64(nt))  # this row's scratch (refilled per row): in place
            tt = touched
            tot = 0.0
            den = 0.0
            n_keep = 0
            for a in range(nt):
                t = tt[a]
                mu = sz[t] / nj
                lv = cnt[t] / nj - mu * mu
                shr = cnt[t] / (cnt[t] + tau) * lv + tau / (cnt[t] + tau) * gvar[t]
                w = math.pow(shr + 1e-6, beta)
                if weighted_mean:
                    tot += w * cnt[t]
                    den += cnt[t]
                else:
                    tot += w
                    den += 1.0
                if cnt[t] >= 2.0:
                    n_keep += 1
            scale = den / tot if tot > 0.0 else 1.0
            out_scale[j] = scale
            if count_only:
                r_indptr[j + 1] = n_keep
                continue
            o = r_indptr[j]
            for a in range(nt):
                t = tt[a]
                if cnt[t] >= 2.0:
                    out_terms[o] = t
                    out_w[o] = reliability_value(cnt[t], sz[t], nj, gvar[t], tau, beta, scale, f16)
                    o += 1


@kernel()
def ppmi_graph(
    tt_indptr,
    tt_docs,
    tm_terms,
    tm_count,
    n_docs,
    n_terms,
    n_keep,
    damping,
    include_self,
    n_chunks,
    out_nbr,
    out_val,
    out_count,
    c0,
    c1,
):
    """PPMI association graph A over top-L co-occurrence (SPEC B.5), one row per term.

    ``tm_terms[d, :tm_count[d]]`` = document d's top-L terms; ``tt_indptr``/``tt_docs`` =
    the transposed lists (term -> documents).  ``n_i`` = list length, ``n_ij`` = co-occurrence
    count.  ``PPMI_ij = max(0, ln(n_ij N/(n_i n_j))) · n_ij/(n_ij + damping)``; the positive
    entries of row i (self excluded unless ``include_self``) are cut to the ``n_keep``
    largest (ties: lowest term id) and written sorted by term id.  Blockwise: one stamped
    accumulator per chunk, never a dense V×V matrix; chunks ``c0 .. c1 - 1`` of ``n_chunks`` of rows.
    """
    # per-chunk scratch as in branch_centres
    for c in range(c0, c1):
        lo, hi = _chunk_bounds(n_terms, n_chunks, c)
        if lo >= hi:
            continue
        acc = np.zeros(n_terms, np.float64)
        stamp = np.full(n_terms, -1, np.int64)
        touched = np.empty(n_terms, np.int64)
        vals = np.empty(n_terms, np.float64)
        pos = np.empty(n_keep, np.int64)
        kv = np.empty(n_keep, np.float64)
        for i in range(lo, hi):
            out_count[i] = 0
            ni = tt_indptr[i + 1] - tt_indptr[i]
            if ni == 0:
                continue
            nt = 0
            for p in range(tt_indptr[i], tt_indptr[i + 1]):
                d = tt_docs[p]
                for r in range(tm_count[d]):
                    t = tm_terms[d, r]
                    if t == i and not include_self:
                        continue
                    if stamp[t] != i:
                        stamp[t] = i
                        acc[t] = 0.0
                        touched[nt] = t
                        nt += 1
                    acc[t] += 1.0
            sort_range(touched, np.int64(0), np.int64(nt))  # this row's scratch (refilled per row): in place
            tt = touched
            npos = 0
            for a in range(nt):
                t = tt[a]
                nij = acc[t]
                nj = np.float64(tt_indptr[t + 1] - tt_indptr[t])
                v = math.log(nij * n_docs / (np.float64(ni) * nj))
                if v > 0.0:
                    v = v * nij / (nij + damping)
                    if v > 0.0:
                        tt[npos] = t
                        vals[npos] = v
                        npos += 1
            # top-n_keep write-out as in branch_centres (six lines, inline per row)
            n = topk_select(vals[:npos], n_keep, pos, kv)
            sort_range(pos, np.int64(0), np.int64(n))  # pos is this row's scratch: sorted in place
            sel = pos
            for a in range(n):
                out_nbr[i, a] = tt[sel[a]]
                out_val[i, a] = vals[sel[a]]
            out_count[i] = n


@kernel()
def second_order_graph(
    a_indptr, a_idx, a_val, at_indptr, at_idx, at_val, n_terms, n_keep, n_chunks, out_nbr, out_val, out_count, c0, c1
):
    """Second-order context graph G (SPEC B.5): cosine between L2-normalised rows of A.

    ``a_*`` = A with rows already L2-normalised (float64), ``at_*`` = its transpose (CSR of
    Aᵀ, rows sorted).  For row i, ``cos(i, k) = Σ_n Â[i, n] Â[k, n]`` is accumulated through
    the columns of Â, self excluded; the ``n_keep`` largest positive values (ties: lowest
    term id) are written sorted by term id.  Chunks ``c0 .. c1 - 1`` of ``n_chunks`` of rows.
    """
    # per-chunk scratch as in ppmi_graph (no stamp table here)
    for c in range(c0, c1):
        lo, hi = _chunk_bounds(n_terms, n_chunks, c)
        if lo >= hi:
            continue
        # Â ≥ 0, so a touched entry is > 0: the accumulator doubles as its own "seen"
        # flag (no stamp table: half the random memory traffic in this hot loop) and is
        # reset through the touched list after each row.
        acc = np.zeros(n_terms, np.float64)
        touched = np.empty(n_terms, np.int64)
        cand = np.empty(n_terms, np.int64)
        pos = np.empty(n_keep, np.int64)
        kv = np.empty(n_keep, np.float64)
        for i in range(lo, hi):
            out_count[i] = 0
            nt = 0
            for p in range(a_indptr[i], a_indptr[i + 1]):
                n = a_idx[p]
                v = a_val[p]
                for q in range(at_indptr[n], at_indptr[n + 1]):
                    k = at_idx[q]
                    if acc[k] == 0.0:
                        touched[nt] = k
                        nt += 1
                    acc[k] += v * at_val[q]
            npos = np.int64(0)  # not a bare 0: a literal would compile topk_select_subset a second time
            for a in range(nt):
                k = touched[a]
                if k != i and acc[k] > 0.0:
                    cand[npos] = k
                    npos += 1
            # the top-n_keep straight from the touched terms in the order they came (ties go to the
            # lowest term id by the heap's own key): a two-hop row touches thousands of terms, and
            # sorting them all first cost three times the accumulation
            n = topk_select_subset(acc, cand, npos, n_keep, pos, kv)
            sort_range(pos, np.int64(0), np.int64(n))  # pos is this row's scratch: sorted in place
            sel = pos
            for a in range(n):
                out_nbr[i, a] = sel[a]
                out_val[i, a] = acc[sel[a]]
            out_count[i] = n
            for a in range(nt):
                acc[touched[a]] = 0.0


@kernel()
def centre_weights(c_indptr, c_terms, r_indptr, r_terms, r_w, r_nj, r_scale, gvar, tau, beta, f16, out_w):
    """Reliability weight of every centre entry (j, t): ``out_w[p]`` float64, aligned with ``c_terms``.

    The stored weight when (j, t) is in branch j's reliability row (a merge of the two sorted
    rows), else ``reliability_value(1, 1, n_j, gvar[t], τ, β, scale_j)``, 1.0 when n_j = 0:
    the weight the query path would otherwise recompute for every code coordinate on the
    centre (SPEC B.7 reads ``c_j[t]`` there).  Serial; O(centre + reliability entries).
    """
    n_branches = c_indptr.shape[0] - 1
    for j in range(n_branches):
        a = r_indptr[j]
        ae = r_indptr[j + 1]
        nj = r_nj[j]
        for p in range(c_indptr[j], c_indptr[j + 1]):
            t = np.int64(c_terms[p])
            while a < ae and np.int64(r_terms[a]) < t:
                a += 1
            if a < ae and np.int64(r_terms[a]) == t:
                out_w[p] = np.float64(r_w[a])
            elif nj == 0.0:
                out_w[p] = 1.0
            else:
                out_w[p] = reliability_value(1.0, 1.0, nj, gvar[t], tau, beta, r_scale[j], f16)


@kernel()
def term_doc_bitsets(t_indptr, t_off, t_code, tb_row, out_bits):
    """Set the document bitsets of the frequent terms.

    Document bitsets of the terms with ``tb_row[t] >= 0``: bit d of ``out_bits[row]``
    (int64 words, ``ceil(N / 64)`` per row) is set when document d contains t; the documents
    come from the compressed postings (``jkofast.kernels.sgr.postings``).
    """
    for t in range(tb_row.shape[0]):
        r = tb_row[t]
        if r < 0:
            continue
        q = np.uint64(t_off[t])
        end = np.uint64(t_off[t + 1])
        d = np.uint64(0)
        while q < end:
            g = np.uint64(t_code[q])
            q += np.uint64(1)
            if g >= 128:
                g, q = vbyte_rest(t_code, q, g)
            d += g
            out_bits[r, d >> np.uint64(6)] |= np.int64(1) << np.int64(d & np.uint64(63))
            d += np.uint64(1)
