"""SparseGeometricRAG query path (SPEC B.6-B.10) as stage kernels.

``sgr_one_query`` reads as the SPEC: ``stage_route`` (B.6), ``stage_local_score`` (B.7),
``stage_bm25`` (the BM25 extension), ``stage_tail`` (B.7 tail + the optional B.8 gate),
``stage_query_tables`` (B.9 semantic vector, rare terms), ``stage_rescue`` (B.8 lex1),
``stage_shortlist`` (B.8 top-P), ``stage_pool_semantic`` + ``stage_final_features`` (B.9),
``diversify`` (B.10) and ``stage_outputs``.  Every stage takes the three bundles below and
a few per-query scalars.  The thin stages are inlined into ``sgr_one_query`` (Numba IR); the
loops live in leaf kernels that take the arrays they read (``local_score``, ``rescue_terms``,
``rescue_term_postings``, ``rescue_support_scan``, ``pool_relevance``, ``bm25_candidates``,
the diversity parts): a function whose signature holds the bundles costs ~0.4 s to compile and
~0.1 µs per call, so only the stages and the drivers take them.

Bundles (module-level NamedTuples, so Numba's on-disk cache can key them):

* ``SGRIndex`` -- the index arrays in the compact layout of ``jkofast.sgr.layout`` (format
  2; "term" = uint16 when V <= 65,535, else uint32): graph G (routing) and semantic neighbour
  lists as CSR (int64 indptr, int32 ids, float32); memberships branch-major (branch j =
  rows ``b_indptr[j]:b_indptr[j + 1]``, ascending doc id): ``mem_doc`` int32, ``mem_m``
  float32, codes ``code_term`` (M, S) term (ascending, then a sentinel >= V), ``code_sign``
  (M, ceil(S / 16)) uint16 sign bitmask; binary support ``s_indptr`` uint32 (int64 from 2**32 entries) / ``s_idx`` term,
  ``dl`` uint16 or float64, ``idf`` float64; centres ``c_indptr``/``c_terms``/``c_vals``
  sorted by term id, ``c_norm`` float64; reliability ``r_indptr``/``r_terms``/``r_w``
  (stored (j, t) entries, float32), ``r_nj``, ``r_scale``, ``gvar`` float64; term postings
  ``t_indptr`` (document frequencies), ``t_off``/``t_code`` (variable-byte document gaps),
  ``t_tfq``/``t_xpos``/``t_xval`` (term frequencies; ``jkofast.kernels.sgr.postings``) and
  ``bm25_idf`` (rescue, BM25 extension; empty in an index built without postings, which the
  wrapper then queries by support scan); for the frequent terms (``tb_row[t] >= 0``) document bitsets ``tb_bits``
  int64 (rows × ceil(N / 64)); ``x_cval`` / ``x_w`` float32 (M, S): each code slot's centre value
  and reliability weight (``expand_codes``), derived in memory for a small index, else (0, S).
* ``SGRParams`` -- the query parameters as typed scalars (float64 / int64 / bool), so a
  parameter change is a new value, never a recompilation.
* ``SGRScratch`` -- the caller-owned scratch slabs, one per chunk (see ``sgr_query_batch``),
  and ``SGRWork``, chunk c's named views of them plus the per-call work arrays.

Scratch (stamped tables of size V and N) is reused across the queries of a chunk and across
calls: the generation stamp is the query index, so nothing is zeroed per query.  The routed
documents of a query are numbered by position in the order they are found (``ulist[a]`` =
document, ``dp[d]`` = (stamp, position)); every per-document quantity is stored by
position, so the scratch a query touches stays dense on a large corpus.  ``sgr_query_batch``
(``prange`` over chunks) and ``sgr_query_serial`` (one thread, no parallel launch) are thin
drivers of the one per-chunk body ``_query_chunk``, which runs ``sgr_one_query`` per query (both
inlined into the drivers).  Every top-k is strict IEEE with ties
to the lowest id; float sums within a query are serial, so results do not depend on threads.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from jkofast import _codes
from jkofast._numba import kernel
from jkofast.kernels.sgr import build as _bk
from jkofast.kernels.sgr.postings import posting_tf, vbyte_rest
from jkofast.kernels.sorting import select_kth, sort_range
from jkofast.kernels.topk import topk_ids, topk_ids_pos, topk_pos

__all__ = [
    "RESCUE_AUTO",
    "RESCUE_POSTINGS",
    "RESCUE_SCAN",
    "STATUS_EMPTY",
    "STATUS_OK",
    "SGRIndex",
    "SGRParams",
    "SGRScratch",
    "SGRWork",
    "best_remaining",
    "bm25_candidates",
    "branch_deviation",
    "branch_tables",
    "cap_scores_desc",
    "chunk_work",
    "code_sums",
    "code_sums_expanded",
    "compact_sums",
    "diversify",
    "doc_branches",
    "eligible_branches",
    "expand_codes",
    "greedy_ranks",
    "local_score",
    "pool_relevance",
    "rescue_postings",
    "rescue_query_terms",
    "rescue_scan",
    "rescue_support_scan",
    "rescue_term_postings",
    "rescue_terms",
    "route_query",
    "semantic_presence_pool",
    "semantic_vector",
    "sgr_one_query",
    "sgr_query_batch",
    "sgr_query_serial",
    "slot_weight",
    "stage_bm25",
    "stage_final_features",
    "stage_local_score",
    "stage_outputs",
    "stage_pool_semantic",
    "stage_query_tables",
    "stage_rescue",
    "stage_route",
    "stage_shortlist",
    "stage_tail",
    "stored_weight",
    "tail_gate",
    "zscore",
]

STATUS_OK, STATUS_EMPTY = _codes.OK, _codes.EMPTY  # status codes: jkofast._codes
# rescue_mode (SPEC B.8): per query term the cheaper of postings and bitset (auto), a scan of
# every routed document's binary support (the frozen method), the postings of the query and
# semantic terms; all three give the same bits
RESCUE_AUTO, RESCUE_SCAN, RESCUE_POSTINGS = 0, 1, 2
# The thin stage kernels (the bundles unpacked around a leaf kernel call) are inlined into
# their driver (Numba IR): every function whose signature holds the bundles costs ~0.4 s to
# compile and, as a call, ~0.1 µs (the bundles travel as ~500 scalars and each of their arrays
# is referenced).  The leaf kernels with the loops stay calls: inlining them cost more compile
# time than it saved.  sgr_one_query and _query_chunk are inlined into the two drivers: as calls,
# each was a library of its own that every caller links, optimises and turns into machine code
# again (the `sgr` warm-up entry compiles in 40 CPU s instead of 44, same bits, same speed).
_THIN = "always"

# Rows of the scratch slabs (SGRScratch; chunk_work gives each its SGRWork name).
VI_RSTAMP, VI_RBUF, N_VI = 0, 1, 2  # vi (V-sized int64): routing stamps; routed / semantic term buffer
VF_QVAL, VF_RVAL, VF_SVAL, N_VF = 0, 1, 2, 3  # vf (V-sized float64): query, route and semantic values
NI_BSTAMP, NI_DMN, NI_ULIST, NI_BLIST, N_NI = 0, 1, 2, 3, 4  # ni (N-sized int64)
# nf (N-sized float64): position-indexed features and scores, then the BM25 values by document
NF_ESUM, NF_CSUM, NF_TAIL, NF_LEX, NF_LEXADJ, NF_SEM, NF_RARE, NF_Z1, NF_Z2, NF_PRE, NF_BVAL, N_NF = range(12)

# Pool-sized work rows (SGRWork.wi int64, SGRWork.wf float64), from the shortlist on.
WI_POOL = 0  # pool documents in shortlist order (before it: the rare query terms' positions)
WI_PLAIN = 1  # pool positions in plain relevance order
WI_FINAL = 2  # pool positions in final (diversified) order
WI_DIV = 3  # first of diversify's N_DI rows
WI_POS = 12  # positions (in U) of the pool documents, shortlist order
N_WI = 13
WF_QIDF, WF_QTOP = 0, 1  # the query terms' idf and its top-k values (rare terms; free again after them)
WF_TOPK = 0  # top-k values of the shortlist
WF_LEX1, WF_LEXADJ, WF_SEM, WF_RARE, WF_REL = 1, 2, 3, 4, 5  # pool features and relevance, shortlist order
WF_FEAT, WF_ZF = 6, 7  # a feature over the pool and its z-scores
WF_DIV = 8  # first of diversify's N_DF rows (the last ones)
N_WF = 15
# diversify's rows, relative to WI_DIV / WF_DIV
DI_HCNT, DI_ELIG, DI_HEAP, DI_ELIG_OF, DI_EB, DI_EBN, DI_USED, DI_SEL, DI_HAVE, N_DI = range(10)
DF_HTOP, DF_H, DF_HSEL, DF_HEAP, DF_COS, DF_REL, DF_DEV, N_DF = range(8)
WI_DIV_END = WI_DIV + N_DI  # = WI_POS
# component rows of the outputs (the wrapper's COMPONENTS order)
C_TAIL, C_LEXADJ, C_SEM, C_RARE, C_REL, C_LEX1, C_BM25, N_COMP = range(8)


class SGRIndex(NamedTuple):
    """Index arrays of the query path (layout in the module docstring)."""

    g_indptr: np.ndarray
    g_idx: np.ndarray
    g_val: np.ndarray
    b_indptr: np.ndarray
    mem_doc: np.ndarray
    mem_m: np.ndarray
    code_term: np.ndarray
    code_sign: np.ndarray
    s_indptr: np.ndarray
    s_idx: np.ndarray
    idf: np.ndarray
    dl: np.ndarray
    sem_indptr: np.ndarray
    sem_idx: np.ndarray
    sem_val: np.ndarray
    c_indptr: np.ndarray
    c_terms: np.ndarray
    c_vals: np.ndarray
    c_norm: np.ndarray
    c_w: np.ndarray
    h2f: np.ndarray
    x_cval: np.ndarray
    x_w: np.ndarray
    r_indptr: np.ndarray
    r_terms: np.ndarray
    r_w: np.ndarray
    r_nj: np.ndarray
    r_scale: np.ndarray
    gvar: np.ndarray
    t_indptr: np.ndarray
    t_off: np.ndarray
    t_code: np.ndarray
    t_tfq: np.ndarray
    t_xpos: np.ndarray
    t_xval: np.ndarray
    bm25_idf: np.ndarray
    tb_row: np.ndarray
    tb_bits: np.ndarray


class SGRParams(NamedTuple):
    """Query parameters of the SGR kernels.

    Query parameters (SPEC B.1 names in ``SparseGeometricRetriever``); counts already capped
    by the wrapper where a larger value cannot change a result.
    """

    alpha: float  # routing expansion α (B.6)
    budget: int  # routed terms per query
    gamma: float  # exponent on Q_dj (B.7)
    lam_m: float  # consensus weight λ_M
    avgdl: float  # mean document length
    bm25_candidates: int  # extension: BM25 top-n joins U
    bm25_k1: float
    bm25_b: float
    w_bm25: float  # extension: weight of z(BM25) in the relevance
    w_bm25_rescue: float  # extension: weight of z(BM25) in the shortlist score
    tail_gate: bool  # optional gate before the rescue (B.8)
    gate_min: int
    gate_mult: int
    rescue_mode: int  # RESCUE_AUTO / RESCUE_SCAN / RESCUE_POSTINGS
    b_rescue: float  # length pivot of lex1 (B.8)
    b_final: float  # length pivot of lex2 (B.9)
    coord: float  # coordination exponent (B.9)
    n_rare: int  # rare query terms (B.9)
    pool: int  # P, the shortlist size
    eta: float  # weight of z(lex1) in the shortlist score
    w_tail: float  # relevance weights (B.9)
    w_lex: float
    w_sem: float
    w_rare: float
    n_elig: int  # diversity (B.10): eligible branches, top-E count, ranks, λ_D
    top_h: int
    n_div: int
    lam_d: float
    rel_tau: float  # reliability τ, β and float16 rounding (B.4): the weights not stored
    rel_beta: float
    rel_f16: bool


class SGRScratch(NamedTuple):
    """Caller-owned scratch, one slab per chunk (chunk c touches slab c only); see ``sgr_query_batch``."""

    vi: np.ndarray  # int64 (m, N_VI, V): rows VI_*: route stamps, route / semantic-term buffer
    vf: np.ndarray  # float64 (m, N_VF, V): rows VF_*: query, route, semantic values (semantic zero between queries)
    mark: np.ndarray  # uint8 (m, V): bit 0 query term, 1 semantic, 2 rare; zero between queries
    dp: np.ndarray  # int64 (m, N, 2): per document (stamp, position in U)
    ni: np.ndarray  # int64 (m, N_NI, N): rows NI_*: BM25 stamps (by doc), membership counts, U list, BM25 list
    nf: np.ndarray  # float64 (m, N_NF, N): rows NF_*: position-indexed rows (see SGRWork), BM25 values (by doc)
    dmr: np.ndarray  # int64 (m, N, F): routed-branch index of each membership (by position)
    dme: np.ndarray  # float64 (m, N, F): its E_dj
    slot: np.ndarray  # uint16 (m, V): semantic term -> entry of svs; zero between queries
    bt: np.ndarray  # float64 (m, V, 3): local_score's branch table (stamp column starts at -1)


class SGRWork(NamedTuple):
    """Chunk c's scratch: named views of its ``SGRScratch`` slab plus per-call work arrays.

    ``wi`` int64 (N_WI, W) / ``wf`` float64 (N_WF, W) are pool-sized work rows, addressed by the
    module's ``WI_*`` / ``WF_*`` names: from the shortlist on ``wi[WI_POOL]`` = pool docs (shortlist
    order), ``wi[WI_POS]`` = their positions, ``wi[WI_PLAIN]`` = plain relevance order,
    ``wi[WI_FINAL]`` = final order; ``wf[WF_LEX1 .. WF_REL]`` = lex1, lexadj, sem, rare, relevance
    over the pool; the ``N_DI`` / ``N_DF`` rows from ``WI_DIV`` / ``WF_DIV`` belong to ``diversify``.
    """

    qval: np.ndarray  # float64 V: query value of each query term
    mark: np.ndarray  # uint8 V
    rstamp: np.ndarray  # int64 V: routing stamps
    rval: np.ndarray  # float64 V: route weights
    rbuf: np.ndarray  # int64 V: inferred terms, then the semantic terms
    sval: np.ndarray  # float64 V: semantic vector (zero between queries; diversify's zero table)
    slot: np.ndarray  # uint16 V
    svs: np.ndarray  # float64 (max semantic entries + 1): the small semantic table
    qbits: np.ndarray  # int64 V/64 + 1: query-term bitset (zero between queries)
    rt: np.ndarray  # int64: routed terms (= branches)
    rw: np.ndarray  # float64: their route weights ρ
    dp: np.ndarray  # int64 (N, 2)
    ulist: np.ndarray  # int64 N: position -> document
    dm_n: np.ndarray  # int64 N: memberships of the doc at each position
    dm_r: np.ndarray  # int64 (N, F)
    dm_e: np.ndarray  # float64 (N, F)
    esum: np.ndarray  # float64 N (by position from here on)
    csum: np.ndarray
    tail: np.ndarray
    lex: np.ndarray
    lexadj: np.ndarray
    sem: np.ndarray
    rare: np.ndarray
    z1: np.ndarray
    z2: np.ndarray
    pre: np.ndarray  # shortlist score, then the relevance of the pool positions
    bstamp: np.ndarray  # int64 N (by doc): BM25 stamps
    bval: np.ndarray  # float64 N (by doc): BM25 values
    blist: np.ndarray  # int64 N: BM25-scored documents
    powtab: np.ndarray  # float64 (max query length + 1)
    heap_v: np.ndarray  # float64 (max(N, routed) + 1): top-k heap
    heap_i: np.ndarray  # int64, likewise
    wi: np.ndarray
    wf: np.ndarray
    btab: np.ndarray  # float64 (V, 3): branch table of local_score (stamp, c_j[t], stored weight)


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
    ninf = np.int64(0)  # not a bare 0: a literal would compile topk_ids a second time
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
def zscore(vals, n, out):
    """Write the population z-scores of ``vals[:n]`` into ``out[:n]``.

    Population z-scores of ``vals[:n]`` into ``out[:n]`` (serial sums in index order); 0 when std is 0.
    """
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
    """Fill column and row s of the eligible centres' cosine table.

    ``cos[b, s] = cos[s, b]`` for every eligible b: scatter centre s into the zero table
    ``ctab``, sum branch-free over each centre b's entries (a term not in s adds +0.0),
    then clear ``ctab``.  The non-zero products are the shared terms in ascending id
    whichever centre is scattered, so the value equals the one of a sorted merge and of
    the scatter of either centre: Cos is exactly symmetric.
    """
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
def _clear_marks(qt, sem_indptr, sem_idx, mark, sval):
    """Reset the marks and semantic values one query set.

    Reset the byte marks and semantic values set for one query (its terms and their
    semantic neighbours): both tables are all zero between queries.
    """
    for a in range(qt.shape[0]):
        t = qt[a]
        mark[t] = 0
        for p in range(sem_indptr[t], sem_indptr[t + 1]):
            mark[sem_idx[p]] = 0
            sval[sem_idx[p]] = 0.0


# ---------------------------------------------------------------------------------- B.6 routing
@kernel(inline=_THIN)
def stage_route(gen, qt, qv, ix, prm, ws):
    """Mark the query terms and route them (SPEC B.6).

    Mark the query terms (``mark`` bit 0, ``qval``) and route them (SPEC B.6): writes the
    routed terms ``ws.rt`` and weights ``ws.rw``; returns their number.
    """
    qval = ws.qval
    mark = ws.mark
    for a in range(qt.shape[0]):
        qval[qt[a]] = np.float64(qv[a])
        mark[qt[a]] = 1
    return route_query(
        qt,
        qv,
        ix.g_indptr,
        ix.g_idx,
        ix.g_val,
        prm.alpha,
        prm.budget,
        ws.rstamp,
        ws.rval,
        gen,
        ws.rbuf,
        ws.rt,
        ws.rw,
        ws.heap_v,
        ws.heap_i,
    )


# ---------------------------------------------------------------------------------- B.7 local score
@kernel(inline=_THIN)
def stage_local_score(gen, qt, n_routed, ix, prm, ws):
    """Branch-local signed scores over the routed postings (SPEC B.7); returns |U| (see ``local_score``)."""
    return local_score(
        gen,
        qt,
        ws.rt,
        ws.rw,
        n_routed,
        prm.gamma,
        (ix.b_indptr, ix.mem_doc, ix.mem_m),
        (ix.code_term, ix.code_sign, ix.x_cval, ix.x_w),
        (ix.c_indptr, ix.c_terms, ix.c_vals, ix.c_w, ix.h2f),
        (ix.r_indptr, ix.r_terms, ix.r_w, ix.r_nj, ix.r_scale, ix.gvar),
        (prm.rel_tau, prm.rel_beta, prm.rel_f16),
        (ws.mark, ws.qval, ws.qbits),
        ws.btab,
        (ws.dp, ws.esum, ws.csum, ws.dm_r, ws.dm_e, ws.dm_n, ws.ulist),
    )


@kernel()
def branch_tables(key, j, centres, btab):
    """Scatter branch j's centre into the stamped term table ``btab`` float64 (V, 3).

    ``centres`` = (c_indptr, c_terms, c_vals, c_w, h2f): ``c_w`` the reliability weight of
    each centre entry, float16 bits decoded through the float32 table ``h2f`` (65,536
    entries) or, when ``h2f`` is empty, float32.  After the call, for every term t with
    ``btab[t, 0] == key``: ``btab[t, 1] = c_j[t]`` and ``btab[t, 2]`` = the reliability
    weight of (j, t) (centre terms now, query terms off the centre once looked up by
    ``slot_weight``; -2 before); a term with another stamp has ``c_j[t] = 0`` and is not
    looked up yet.  One row per term: a code slot reads one cache line.  (``key`` < 2**53,
    exact in float64.)
    """
    c_indptr, c_terms, c_vals, c_w, h2f = centres
    fkey = np.float64(key)
    half = h2f.shape[0] > 0
    for p in range(c_indptr[j], c_indptr[j + 1]):
        t = np.int64(c_terms[p])
        btab[t, 0] = fkey
        btab[t, 1] = np.float64(c_vals[p])
        btab[t, 2] = np.float64(h2f[np.int64(c_w[p])]) if half else np.float64(c_w[p])


@kernel()
def stored_weight(t, lo, hi, r_terms, r_w, h2f):
    """Return the stored weight of term t in the sorted row ``r_terms[lo:hi]`` (binary search), or -1.

    ``r_w`` holds float16 bits decoded through ``h2f`` or, when ``h2f`` is empty, float32.
    """
    while lo < hi:
        mid = (lo + hi) >> 1
        v = np.int64(r_terms[mid])
        if v < t:
            lo = mid + 1
        elif v > t:
            hi = mid
        elif h2f.shape[0] > 0:
            return np.float64(h2f[np.int64(r_w[mid])])
        else:
            return np.float64(r_w[mid])
    return -1.0


@kernel()
def slot_weight(t, j, rel, relp, h2f):
    """Reliability weight of (branch j, term t) for a term off the branch's centre.

    The stored weight (binary search in the branch's row of ``rel`` = (r_indptr, r_terms,
    r_w, r_nj, r_scale, gvar)), else the one-occurrence value ``reliability_value(1, 1,
    n_j, gvar[t], τ, β, scale_j)`` (``relp`` = (τ, β, f16); 1.0 when n_j = 0).
    """
    r_indptr, r_terms, r_w, r_nj, r_scale, gvar = rel
    tau, beta, f16 = relp
    wv = stored_weight(t, r_indptr[j], r_indptr[j + 1], r_terms, r_w, h2f)
    if wv < 0.0:
        nj = r_nj[j]
        wv = 1.0 if nj == 0.0 else _bk.reliability_value(1.0, 1.0, nj, gvar[t], tau, beta, r_scale[j], f16)
    return wv


@kernel()
def expand_codes(b_indptr, code_term, centres, rel, relp, btab, x_cval, x_w):
    """Write every code slot's centre value ``c_j[t]`` and reliability weight ``w`` (SPEC B.4, B.7).

    Membership m of branch j (rows ``b_indptr[j]:b_indptr[j + 1]``), slot r with term t =
    ``code_term[m, r]`` (< V): ``x_cval[m, r] = c_j[t]`` (0 off the centre) and ``x_w[m, r]``
    = the centre entry's weight, else ``slot_weight(t, j)`` -- the values ``local_score``
    looks up per query, exact in float32 (float32 centre values, float16 / float32 weights).
    Slots past the sentinel are left as they are.  ``btab`` float64 (V, 3) scratch (stamped
    by branch; left with stamp -1).  ``centres``, ``rel``, ``relp`` as in ``local_score``.
    """
    c_indptr, c_terms, c_vals, c_w, h2f = centres
    n_terms = btab.shape[0]
    half = h2f.shape[0] > 0
    btab[:, 0] = -1.0
    for j in range(b_indptr.shape[0] - 1):
        if b_indptr[j] == b_indptr[j + 1]:
            continue
        fkey = np.float64(j)
        for p in range(c_indptr[j], c_indptr[j + 1]):
            t = np.int64(c_terms[p])
            btab[t, 0] = fkey
            btab[t, 1] = np.float64(c_vals[p])
            btab[t, 2] = np.float64(h2f[np.int64(c_w[p])]) if half else np.float64(c_w[p])
        for m in range(b_indptr[j], b_indptr[j + 1]):
            for r in range(code_term.shape[1]):
                t = np.int64(code_term[m, r])
                if t >= n_terms:
                    break
                if btab[t, 0] != fkey:
                    btab[t, 0] = fkey
                    btab[t, 1] = 0.0
                    btab[t, 2] = slot_weight(t, j, rel, relp, h2f)
                x_cval[m, r] = np.float32(btab[t, 1])
                x_w[m, r] = np.float32(btab[t, 2])
    btab[:, 0] = -1.0


@kernel()
def local_score(gen, qt, rt, rw, n_routed, gamma, mems, codes, centres, rel, relp, qtabs, btab, acc):
    """Branch-local signed scores over the postings of the routed branches (SPEC B.7).

    For every membership (d, j) of routed branch j = ``rt[k]`` (``mems`` = (b_indptr,
    mem_doc, mem_m): rows ``b_indptr[j]:b_indptr[j + 1]``, branch-major) with weight ``ρ = rw[k]``:
    ``L = Σ_r w_r (q[t_r] - c_j[t_r]) s_r``, ``Q = Σ_r q[t_r]²``, ``E = m ρ L Q^γ`` (0 when
    Q = 0).  The routed documents U get positions 0, 1, ... in the order they are first met:
    ``ulist[a]`` = the document at position a, ``dp[d] = (gen, a)`` (stamp and position side
    by side: one cache line per visit).  Per position: ``esum[a] += E``, ``csum[a] += m ρ``,
    (k, E) in ``dm_r``/``dm_e`` (``dm_n[a]`` entries).  ``qtabs`` = (mark, qval, qbits): the
    query vector is read through ``mark`` (bit 0; a byte table stays in L1) and ``qval``;
    ``qbits`` (all zero, and again on exit) gets the query terms as a bitset of V bits,
    which decides whether a membership's codes hold any query term before the code
    coordinates are read.

    ``codes`` = (code_term, code_sign, x_cval, x_w) (a term id >= V ends a code; signs as
    the bitmask of ``jkofast.kernels.sgr.build.encode_codes``).  When ``x_w`` has rows
    (``expand_codes``), ``c_j[t]`` and ``w`` are read from the slot's own entries (the
    membership's row: sequential within a branch).  Otherwise they
    come from ``centres`` = (c_indptr, c_terms, c_vals, c_w, h2f), scattered into the
    stamped table ``btab`` (V, 3) by ``branch_tables`` at the branch's first membership
    that needs them, and, for a query term off the centre, from ``rel`` = (r_indptr,
    r_terms, r_w, r_nj, r_scale, gvar) through ``slot_weight`` (``relp`` = (τ, β, f16)).
    ``code_sums`` stops at a slot whose weight is not looked up yet and names its term; the
    weight is looked up here and the membership's sums start again, so the slot loop holds
    no call (a call there, even one rarely taken, slows every slot).  A code coordinate with
    ``q[t] = 0`` and ``c_j[t] = 0`` adds exactly 0 to both sums and is skipped.  ``acc`` =
    (dp, esum, csum, dm_r, dm_e, dm_n, ulist).  Returns |U|.
    """
    b_indptr, mem_doc, mem_m = mems
    code_term, code_sign, x_cval, x_w = codes
    mark, qval, qbits = qtabs
    dp, esum, csum, dm_r, dm_e, dm_n, ulist = acc
    n_terms = np.uint64(qval.shape[0])
    n_slot = code_term.shape[1]
    expanded = x_w.shape[0] > 0
    for a in range(qt.shape[0]):
        t = np.int64(qt[a])
        qbits[t >> 6] |= np.int64(1) << (t & 63)
    nu = 0
    base = np.int64(gen) * np.int64(qval.shape[0] + 1) + 1
    for k in range(n_routed):
        j = rt[k]
        rho = rw[k]
        key = base + j
        scattered = False
        for p in range(b_indptr[j], b_indptr[j + 1]):
            d = np.uint64(mem_doc[p])
            mr = np.float64(mem_m[p]) * rho
            e = 0.0
            # Q_dj = 0 (no query term among the codes: ~80 % of the routed memberships on
            # SciFact) gives E = 0 whatever L is: a branch-free OR of the marks decides
            # that before any floating-point work (exact: the skipped E is 0.0 too)
            mu = np.uint64(p)  # unsigned row / column / term indices: no wrap-around code
            hit = np.uint64(0)
            nc = n_slot
            if np.uint64(code_term[mu, n_slot - 1]) < n_terms:
                # a full code (most memberships): no sentinel test per slot, the OR unrolls
                for r in range(n_slot):
                    t = np.uint64(code_term[mu, r])
                    hit |= np.uint64(qbits[t >> np.uint64(6)]) >> (t & np.uint64(63))
            else:
                nc = 0
                for r in range(n_slot):
                    t = np.uint64(code_term[mu, r])
                    if t >= n_terms:
                        break
                    hit |= np.uint64(qbits[t >> np.uint64(6)]) >> (t & np.uint64(63))
                    nc += 1
            if hit & np.uint64(1):
                if expanded:
                    lsum, qsum = code_sums_expanded(mu, nc, code_term, code_sign, x_cval, x_w, mark, qval)
                else:
                    lsum, qsum = compact_sums(mu, nc, key, j, scattered, codes, centres, rel, relp, qtabs, btab)
                    scattered = True
                if qsum > 0.0:
                    e = mr * lsum * math.pow(qsum, gamma)
            # opens a U slot as bm25_candidates does: inline in this per-membership hot loop
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


@kernel(inline=_THIN)
def compact_sums(mu, nc, key, j, scattered, codes, centres, rel, relp, qtabs, btab):
    """``(L, Q)`` of membership ``mu`` of branch j through the branch table (see ``local_score``).

    Scatters the branch's centre first unless ``scattered``; a weight not looked up yet stops
    ``code_sums``, is looked up (``slot_weight``) and the sums start again.
    """
    if not scattered:
        branch_tables(key, j, centres, btab)
    while True:
        lsum, qsum, need = code_sums(mu, nc, key, (codes[0], codes[1]), qtabs[0], qtabs[1], btab)
        if need < 0:
            return lsum, qsum
        btab[need, 2] = slot_weight(need, j, rel, relp, centres[4])


# leaves with a loop, inlined into their one caller: the slot loop then sits in local_score's membership loop
@kernel(inline=_THIN)
def code_sums_expanded(mu, nc, code_term, code_sign, x_cval, x_w, mark, qval):
    """``(L, Q)`` of SPEC B.7 over the ``nc`` code slots of membership ``mu`` from the slots' own entries.

    ``c_j[t] = x_cval[mu, r]``, ``w = x_w[mu, r]`` (``expand_codes``); a slot with ``q[t] = 0``
    and ``c_j[t] = 0`` adds exactly 0, as in ``code_sums`` (the same bits), here without a branch.
    """
    lsum = 0.0
    qsum = 0.0
    for r in range(nc):
        t = np.uint64(code_term[mu, r])
        qt_ = 0.0
        if mark[t] & 1:
            qt_ = qval[t]
        cv = np.float64(x_cval[mu, r])
        s = 1.0 if (code_sign[mu, r >> 4] >> np.uint16(r & 15)) & np.uint16(1) else -1.0
        c = np.float64(x_w[mu, r]) * (qt_ - cv) * s
        lsum += c if (qt_ != 0.0 or cv != 0.0) else 0.0
        qsum += qt_ * qt_
    return lsum, qsum


@kernel(inline=_THIN)
def code_sums(mu, nc, key, codes, mark, qval, btab):
    """``(L, Q, -1)`` of SPEC B.7 over the ``nc`` code slots of membership ``mu``, or a slot's term to look up.

    ``L = Σ_r w_r (q[t_r] - c_j[t_r]) s_r`` and ``Q = Σ_r q[t_r]²`` in slot order (see
    ``local_score``), with ``c_j[t]`` and ``w`` from the branch table ``btab`` of
    ``branch_tables`` (stamp ``key``); a slot with ``q[t] = 0`` and ``c_j[t] = 0`` adds
    exactly 0 to both and is skipped.  A query term off the centre gets a row (``c_j[t] =
    0``, weight -2: not looked up yet) at its first slot; a slot whose weight is still -2
    stops the sums and returns ``(L, Q, t)``, so the caller looks the weight up and calls
    again (the sums restart, the same bits).
    """
    code_term, code_sign = codes
    fkey = np.float64(key)
    lsum = 0.0
    qsum = 0.0
    for r in range(nc):
        t = np.uint64(code_term[mu, r])
        qt_ = 0.0
        if mark[t] & 1:
            qt_ = qval[t]
        if btab[t, 0] != fkey:
            if qt_ == 0.0:
                continue  # c_j[t] = 0 too: the slot adds exactly 0
            btab[t, 0] = fkey
            btab[t, 1] = 0.0
            btab[t, 2] = -2.0
        cv = btab[t, 1]
        if qt_ == 0.0 and cv == 0.0:
            continue
        wv = btab[t, 2]
        if wv == -2.0:
            return lsum, qsum, np.int64(t)
        s = 1.0 if (code_sign[mu, r >> 4] >> np.uint16(r & 15)) & np.uint16(1) else -1.0
        lsum += wv * (qt_ - cv) * s
        qsum += qt_ * qt_
    return lsum, qsum, np.int64(-1)


# ---------------------------------------------------------------------------------- extension: BM25 fusion
@kernel(inline=_THIN)
def stage_bm25(gen, qt, nu, ix, prm, ws):
    """Add the BM25 top documents of the query to U (an extension; see ``bm25_candidates``)."""
    return bm25_candidates(
        gen,
        qt,
        nu,
        prm.bm25_candidates,
        (ix.t_indptr, ix.t_off, ix.t_code, ix.t_tfq, ix.t_xpos, ix.t_xval),
        ix.bm25_idf,
        ix.dl,
        (prm.avgdl, prm.bm25_k1, prm.bm25_b),
        (ws.bstamp, ws.bval, ws.blist),
        (ws.dp, ws.esum, ws.csum, ws.dm_n, ws.ulist),
        ws.heap_v,
        ws.heap_i,
    )


@kernel()
def bm25_candidates(gen, qt, nu, n_cand, post, bm25_idf, dl, bm25, bs, u, heap_v, heap_i):
    """Score the query terms' postings by BM25 and add the top documents to U.

    BM25 fusion (an extension, not in the SPEC): full-corpus BM25 of the query terms'
    postings into the document-indexed ``bval`` (stamped ``bstamp``, listed ``blist``); the
    top ``n_cand`` documents join U at the next positions.  ``post`` = (t_indptr, t_off, t_code,
    t_tfq, t_xpos, t_xval), the compressed postings; ``bm25`` = (avgdl, k1, b), ``bs`` = (bstamp,
    bval, blist), ``u`` = (dp, esum, csum, dm_n, ulist).  Returns |U|.
    """
    t_indptr, t_off, t_code, t_tfq, t_xpos, t_xval = post
    avgdl, k1, bb = bm25
    bstamp, bval, blist = bs
    dp, esum, csum, dm_n, ulist = u
    nb = np.int64(0)  # not a bare 0: a literal would compile topk_ids a second time
    for a in range(qt.shape[0]):
        t = qt[a]
        w = bm25_idf[t]
        q = np.uint64(t_off[t])
        end = np.uint64(t_off[t + 1])
        doc = np.uint64(0)
        p = t_indptr[t]
        while q < end:
            g = np.uint64(t_code[q])
            q += np.uint64(1)
            if g >= 128:
                g, q = vbyte_rest(t_code, q, g)
            doc += g
            d = np.int64(doc)
            doc += np.uint64(1)
            tf = posting_tf(p, t_tfq, t_xpos, t_xval)
            p += 1
            if bstamp[d] != gen:
                bstamp[d] = gen
                bval[d] = 0.0
                blist[nb] = d
                nb += 1
            bval[d] += w * tf * (k1 + 1.0) / (tf + k1 * (1.0 - bb + bb * dl[d] / avgdl))
    nc = min(n_cand, nb)
    if nc > 0:
        bsel = np.empty(nc, np.int64)
        bsv = np.empty(nc, np.float64)
        nc = topk_ids(bval, blist, nb, nc, bsel, bsv, heap_v, heap_i)
        for a in range(nc):
            d = bsel[a]
            # opens a U slot as local_score does (inline there in its hot loop); once per BM25 candidate here
            if dp[d, 0] != gen:
                dp[d, 0] = gen
                dp[d, 1] = nu
                esum[nu] = 0.0
                csum[nu] = 0.0
                dm_n[nu] = 0
                ulist[nu] = d
                nu += 1
    return nu


# ---------------------------------------------------------------------------------- B.7 tail, B.8 gate
@kernel(inline=_THIN)
def stage_tail(gen, nu, use_bm25, prm, ws):
    """Compute the tail of each routed position, then the optional tail gate (SPEC B.7, B.8).

    ``tail = esum + λ_M csum`` per routed position (SPEC B.7), BM25 value 0 for the routed
    documents BM25 did not score, then the optional tail gate (B.8).  Returns
    ``(nuse, live)``: the routed positions kept and the stamp they carry in ``dp``.
    """
    tail, esum, csum = ws.tail, ws.esum, ws.csum
    lam_m = prm.lam_m
    for a in range(nu):
        tail[a] = esum[a] + lam_m * csum[a]
    if use_bm25:
        ulist, bstamp, bval = ws.ulist, ws.bstamp, ws.bval
        for a in range(nu):
            d = ulist[a]
            if bstamp[d] != gen:
                bstamp[d] = gen
                bval[d] = 0.0
    if prm.tail_gate:
        ng = min(nu, max(prm.gate_min, prm.gate_mult * prm.pool))
        if ng < nu:
            return tail_gate(gen, nu, ng, ws.tail, ws.ulist, ws.dp, ws.dm_n, ws.dm_r, ws.dm_e, ws.z1)
    return nu, gen


@kernel()
def tail_gate(gen, nu, ng, tail, ulist, dp, dm_n, dm_r, dm_e, neg_buf):
    """Keep the ``ng`` routed documents with the largest tail (SPEC B.8, optional).

    Keep the top ``ng < nu`` routed documents by (tail desc, doc id asc) (SPEC B.8's
    optional gate, off in reference mode), found by selection in O(|U|) (a heap of
    ng = 10,000 cost more than the rescue it saves).  The kept ones stay in discovery order
    at positions 0..ng-1 and get the stamp ``live = -gen - 2`` (unique per query, never a
    gen); the dropped ones keep ``gen`` and so leave U.  Returns ``(ng, live)``.
    """
    neg = neg_buf[:nu]
    for a in range(nu):
        neg[a] = -tail[a]
    thr = -select_kth(neg, np.int64(0), np.int64(nu), np.int64(ng - 1))  # the ng-th largest tail
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
    sort_range(eq, np.int64(0), np.int64(eq.shape[0]))
    cut = eq[ng - n_gt - 1]  # ties at the threshold: the lowest ids
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
    return w, live


# ---------------------------------------------------------------------------------- B.9 query tables
@kernel(inline=_THIN)
def stage_query_tables(qt, qv, ix, prm, ws):
    """Set the query-only tables of the final features (SPEC B.9).

    The query-only tables of the final features, set before the rescue (SPEC B.9): the
    semantic vector (``sval``, bit 1 of ``mark``, its terms in ``rbuf``) and the rare query
    terms (bit 2 of ``mark``).  Returns ``(n_sem, n_rare)``.
    """
    n_sem = semantic_vector(qt, qv, ix.sem_indptr, ix.sem_idx, ix.sem_val, ix.idf, ws.mark, ws.sval, ws.rbuf)
    nq = qt.shape[0]
    idf = ix.idf
    mark = ws.mark
    n_rare = min(prm.n_rare, nq)
    qidf = ws.wf[WF_QIDF]
    for a in range(nq):
        qidf[a] = idf[qt[a]]
    rpos = ws.wi[WI_POOL]
    n_rare = topk_pos(qidf, nq, n_rare, rpos, ws.wf[WF_QTOP], ws.heap_v, ws.heap_i)
    for a in range(n_rare):
        mark[qt[rpos[a]]] |= 4
    return n_sem, n_rare


# ---------------------------------------------------------------------------------- B.8 rescue
@kernel(inline=_THIN)
def stage_rescue(qt, nuse, live, n_sem, n_rare, ix, prm, ws):
    """Compute lex1 and the lexical pool features of the routed documents (SPEC B.8).

    Early rescue (SPEC B.8): lex1, and the pool features lexadj and rare, for every (kept)
    routed position, by ``prm.rescue_mode``: per query term by postings or bitset (auto; the
    semantic presence is deferred to the pool, the only docs that read it), a scan of each
    document's binary support (the frozen method), or the postings of the query and
    semantic terms.  Per doc all add the same terms in ascending id order: the results are
    bit-identical.
    """
    mode = prm.rescue_mode
    if mode == RESCUE_AUTO:
        rescue_query_terms(qt, nuse, live, n_rare, ix, prm, ws)
    elif mode == RESCUE_POSTINGS:
        rescue_postings(qt, nuse, live, n_sem, n_rare, ix, prm, ws)
    else:
        rescue_scan(qt, nuse, n_rare, ix, prm, ws)


@kernel(inline=_THIN)
def rescue_query_terms(qt, nuse, live, n_rare, ix, prm, ws):
    """Rescue term by term, from postings or document bitsets (the auto mode; see ``rescue_terms``)."""
    rescue_terms(
        qt,
        nuse,
        live,
        n_rare,
        ix.idf,
        ix.dl,
        (ix.t_indptr, ix.t_off, ix.t_code),
        ix.tb_row,
        ix.tb_bits,
        ws.mark,
        ws.ulist,
        ws.dp,
        (ws.lex, ws.lexadj, ws.rare, ws.z1, ws.powtab),
        (prm.avgdl, prm.b_rescue, prm.b_final, prm.coord),
    )


@kernel()
def rescue_terms(qt, nuse, live, n_rare, idf, dl, post, tb_row, tb_bits, mark, ulist, dp, out, norm):
    """Rescue term by term, from postings or document bitsets (the auto mode).

    lex1, lexadj and rare coverage of the routed positions ``0..nuse-1`` (document
    ``ulist[a]``, stamped ``live`` in ``dp``), term by term, into ``lex`` / ``lexadj`` /
    ``rare``.

    For each query term t (ascending id) the hits among the routed docs come from the
    cheaper of: streaming the postings of t (``df(t)`` documents decoded from ``t_code`` at
    ``t_off[t]``, a stamp test each through ``dp``) or, when
    t has a document bitset (``tb_row[t] >= 0``, frequent terms), testing ``nuse`` bits in
    position order.  Per doc the additions run in ascending term order, exactly as in a
    scan of its binary support, so the results are bit-identical to ``rescue_scan``.
    ``post`` = (t_indptr, t_off, t_code), the compressed postings; ``out`` = (lex, lexadj,
    rare, hit counts, coordination power table), ``norm`` = (avgdl, b_rescue, b_final, coord).
    """
    t_indptr, t_off, t_code = post
    lex, lexadj, rare, cnt, powtab = out
    avgdl, b1, b2, coord = norm
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
            q = np.uint64(t_off[t])
            end = np.uint64(t_off[t + 1])
            doc = np.uint64(0)  # unsigned indices: no wrap-around code
            while q < end:
                g = np.uint64(t_code[q])
                q += np.uint64(1)
                if g >= 128:
                    g, q = vbyte_rest(t_code, q, g)
                du = doc + g
                doc = du + np.uint64(1)
                if dp[du, 0] == live:
                    b = np.uint64(dp[du, 1])
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


@kernel(inline=_THIN)
def rescue_postings(qt, nuse, live, n_sem, n_rare, ix, prm, ws):
    """Rescue by streaming the postings of the query and semantic terms (see ``rescue_term_postings``)."""
    rescue_term_postings(
        qt,
        nuse,
        live,
        n_sem,
        n_rare,
        ix.idf,
        ix.dl,
        (ix.t_off, ix.t_code),
        ws.mark,
        ws.ulist,
        ws.dp,
        (ws.sval, ws.rbuf),
        (ws.lex, ws.lexadj, ws.sem, ws.rare, ws.z1),
        (prm.avgdl, prm.b_rescue, prm.b_final, prm.coord),
    )


@kernel()
def rescue_term_postings(qt, nuse, live, n_sem, n_rare, idf, dl, post, mark, ulist, dp, sem, out, norm):
    """Rescue by streaming the postings of the query and semantic terms.

    ``rescue_query_terms`` by streaming the postings of every query term, and the
    semantic presence ``sem`` of every routed position by streaming the postings of the
    semantic terms (ascending id).  ``post`` = (t_off, t_code), the compressed postings;
    ``sem`` = (semantic values, semantic terms), ``out`` = (lex, lexadj, sem, rare, hit
    counts), ``norm`` = (avgdl, b_rescue, b_final, coord).
    """
    t_off, t_code = post
    sval, rbuf = sem
    lex, lexadj, sem, rare, z1 = out
    avgdl, b1, b2, coord = norm
    nq = qt.shape[0]
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
        q = np.uint64(t_off[t])
        end = np.uint64(t_off[t + 1])
        doc = np.uint64(0)
        while q < end:
            g = np.uint64(t_code[q])
            q += np.uint64(1)
            if g >= 128:
                g, q = vbyte_rest(t_code, q, g)
            du = doc + g
            doc = du + np.uint64(1)
            if dp[du, 0] == live:
                b = dp[du, 1]
                lex[b] += v
                lexadj[b] += v2
                z1[b] += 1.0
                if is_rare:
                    rare[b] += 1.0
    sterms = rbuf[:n_sem].copy()
    sort_range(sterms, np.int64(0), np.int64(sterms.shape[0]))
    for a in range(n_sem):
        n = sterms[a]
        v = sval[n]
        q = np.uint64(t_off[n])
        end = np.uint64(t_off[n + 1])
        doc = np.uint64(0)
        while q < end:
            g = np.uint64(t_code[q])
            q += np.uint64(1)
            if g >= 128:
                g, q = vbyte_rest(t_code, q, g)
            du = doc + g
            doc = du + np.uint64(1)
            if dp[du, 0] == live:
                sem[dp[du, 1]] += v
    for a in range(nuse):
        d = ulist[a]
        lex[a] = lex[a] / ((1.0 - b1) + b1 * dl[d] / avgdl)
        lexadj[a] = lexadj[a] / ((1.0 - b2) + b2 * dl[d] / avgdl) * math.pow(z1[a] / nq, coord)
        rare[a] = rare[a] / n_rare if n_rare > 0 else 0.0


@kernel(inline=_THIN)
def rescue_scan(qt, nuse, n_rare, ix, prm, ws):
    """Rescue by scanning each routed document's binary support (see ``rescue_support_scan``)."""
    rescue_support_scan(
        qt,
        nuse,
        n_rare,
        ix.idf,
        ix.dl,
        ix.s_indptr,
        ix.s_idx,
        ws.mark,
        ws.ulist,
        ws.sval,
        (ws.lex, ws.lexadj, ws.sem, ws.rare),
        (prm.avgdl, prm.b_rescue, prm.b_final, prm.coord),
    )


@kernel()
def rescue_support_scan(qt, nuse, n_rare, idf, dl, s_indptr, s_idx, mark, ulist, sval, out, norm):
    """Rescue by scanning each routed document's binary support (the frozen method).

    The frozen method (SPEC B.8): scan the binary support of every routed position's
    document for the marked terms (query, semantic, rare) into lex, lexadj, sem and rare.
    """
    lex, lexadj, sem, rare = out
    avgdl, b1, b2, coord = norm
    nq = qt.shape[0]
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


# ---------------------------------------------------------------------------------- B.8 shortlist
@kernel(inline=_THIN)
def stage_shortlist(nuse, prm, ws):
    """Score the routed documents and keep the top-P pool (SPEC B.8).

    ``pre = z_U(tail) + η z_U(lex1)`` (+ the BM25 extension's rescue term) and the top-P
    pool (SPEC B.8); z-scores in position order (= the order of ``ulist``).  Writes the pool
    documents to ``wi[WI_POOL]`` (shortlist order) and their positions to ``wi[WI_POS]``; returns |pool|.
    """
    tail, lex, z1, z2, pre, ulist, dp, bval = ws.tail, ws.lex, ws.z1, ws.z2, ws.pre, ws.ulist, ws.dp, ws.bval
    zscore(tail, nuse, z1)
    zscore(lex, nuse, z2)
    eta = prm.eta
    for a in range(nuse):
        pre[a] = z1[a] + eta * z2[a]
    if prm.w_bm25_rescue != 0.0:
        for a in range(nuse):
            z2[a] = bval[ulist[a]]
        zscore(z2, nuse, z1)
        wbr = prm.w_bm25_rescue
        for a in range(nuse):
            pre[a] += wbr * z1[a]
    npool = min(prm.pool, nuse)
    pool = ws.wi[WI_POOL]
    npool = topk_ids_pos(pre, ulist, nuse, npool, pool, ws.wf[WF_TOPK], ws.heap_v, ws.heap_i)
    pp = ws.wi[WI_POS]
    for a in range(npool):
        pp[a] = dp[pool[a], 1]
    return npool


# ---------------------------------------------------------------------------------- B.9 final score
@kernel(inline=_THIN)
def stage_pool_semantic(npool, n_sem, ix, prm, ws):
    """Compute the semantic presence of the pool documents (SPEC B.9).

    Semantic presence of the pool into ``wf[WF_SEM]`` (computed here in the auto rescue mode,
    copied from the rescue otherwise), then ``sval`` back to all zero (``diversify`` uses it
    as its zero table).
    """
    sval, rbuf = ws.sval, ws.rbuf
    pool, pp, sem = ws.wi[WI_POOL], ws.wi[WI_POS], ws.sem
    semp = ws.wf[WF_SEM]
    if prm.rescue_mode == RESCUE_AUTO:
        semantic_presence_pool(sval, ws.slot, ws.svs, rbuf, n_sem, pool, npool, ix.s_indptr, ix.s_idx, semp)
    else:
        for a in range(npool):
            semp[a] = sem[pp[a]]
    for a in range(n_sem):
        sval[rbuf[a]] = 0.0


@kernel(inline=_THIN)
def stage_final_features(npool, use_bm25, prm, ws):
    """Compute the final features, the relevance and the plain order of the pool (SPEC B.9; see ``pool_relevance``)."""
    w_feat = (prm.w_tail, prm.w_lex, prm.w_sem, prm.w_rare, prm.w_bm25)
    pool_relevance(
        npool,
        use_bm25,
        w_feat,
        ws.tail,
        ws.lex,
        ws.lexadj,
        ws.rare,
        ws.pre,
        ws.dp,
        ws.bval,
        ws.wi,
        ws.wf,
        ws.heap_v,
        ws.heap_i,
    )


@kernel()
def pool_relevance(npool, use_bm25, w_feat, tail, lex, lexadj, rare, pre, dp, bval, wi, wf, heap_v, heap_i):
    """Compute the final features, the relevance and the plain order of the pool (SPEC B.9).

    Final features and relevance on the pool (SPEC B.9): ``relevance = Σ w z_P(feature)``
    over tail, lexadj, sem, rare (and the BM25 extension), z-scores over the pool in pool
    order; the relevance goes to ``wf[WF_REL]`` and, by position, to ``pre``; the plain order
    (relevance desc, ties lowest doc id) as positions to ``wi[WI_PLAIN]``.
    """
    pool, pp, plain = wi[WI_POOL], wi[WI_POS], wi[WI_PLAIN]
    lex1p, lexadjp, semp, rarep, rel, feat, zf = (
        wf[WF_LEX1],
        wf[WF_LEXADJ],
        wf[WF_SEM],
        wf[WF_RARE],
        wf[WF_REL],
        wf[WF_FEAT],
        wf[WF_ZF],
    )
    for a in range(npool):
        o = pp[a]
        lex1p[a] = lex[o]
        lexadjp[a] = lexadj[o]
        rarep[a] = rare[o]
        rel[a] = 0.0
    for f in range(5):
        wf_ = w_feat[f]
        if wf_ == 0.0:
            continue
        if f == 0:
            for a in range(npool):
                feat[a] = tail[pp[a]]
            zscore(feat, npool, zf)
        elif f == 1:
            zscore(lexadjp, npool, zf)
        elif f == 2:
            zscore(semp, npool, zf)
        elif f == 3:
            zscore(rarep, npool, zf)
        else:
            for a in range(npool):
                feat[a] = bval[pool[a]] if use_bm25 else 0.0
            zscore(feat, npool, zf)
        for a in range(npool):
            rel[a] += wf_ * zf[a]
    for a in range(npool):
        pre[pp[a]] = rel[a]  # position-indexed relevance
    topk_ids_pos(rel, pool, npool, npool, plain, zf, heap_v, heap_i)
    for a in range(npool):
        plain[a] = dp[plain[a], 1]  # doc -> position


# ---------------------------------------------------------------------------------- B.10 diversity
@kernel(inline=_THIN)
def diversify(npool, n_routed, ix, prm, ws):
    """Soft high-quality-branch diversity for ranks 2..n_div (SPEC B.10), over positions.

    Reads the pool positions ``wi[WI_POS]``, their plain relevance order ``wi[WI_PLAIN]`` (desc,
    ties lowest doc id) and the position-indexed relevance ``pre``; writes the final order to
    ``wi[WI_FINAL][:npool]``: rank 1 = the first in plain order; ranks 2..n_div greedily maximise
    ``minmax(rel over remaining) + λ_D · max dev_b`` over the doc's eligible branches
    (ties: earlier in plain order); the rest follow plain order.  ``sval`` is the all-zero
    V-table one centre at a time is scattered into (zero again on exit); the ``N_DI`` / ``N_DF``
    rows from ``WI_DIV`` / ``WF_DIV`` are its work rows (``>= max(n_routed·top_h, n_elig², npool·(F+1),
    n_div + npool, n_routed) + 1`` wide).
    """
    plain, out_order = ws.wi[WI_PLAIN], ws.wi[WI_FINAL]
    n_div = prm.n_div
    if n_div <= 1 or npool <= 1:
        for a in range(npool):
            out_order[a] = plain[a]
        return
    wi = ws.wi[WI_DIV:WI_DIV_END]
    wf = ws.wf[WF_DIV:]
    ne = eligible_branches(ws.wi[WI_POS], npool, n_routed, prm.top_h, prm.n_elig, ws.dm_r, ws.dm_e, ws.dm_n, wi, wf)
    doc_branches(plain, npool, n_routed, ne, ws.pre, ws.dm_r, ws.dm_n, wi, wf)
    nd = min(n_div, npool)
    centres = (ix.c_indptr, ix.c_terms, ix.c_vals, ix.c_norm)
    greedy_ranks(plain, npool, nd, ne, ws.dm_r.shape[1], prm.lam_d, ws.rt, centres, ws.sval, wi, wf, out_order)
    used = wi[DI_USED, :npool]
    o = nd
    for a in range(npool):
        if not used[a]:
            out_order[o] = plain[a]
            o += 1


@kernel()
def eligible_branches(pool, n_pool, n_routed, top_h, n_elig, dm_r, dm_e, dm_n, wi, wf):
    """Select the eligible branches by their pool evidence ``H_j`` (SPEC B.10 step 1).

    ``H_j`` = mean of the top-``top_h`` ``E_dj`` over the pool docs (a doc's max when it has
    two memberships in branch j), per routed branch; the eligible branches = the top
    ``n_elig`` by ``H_j`` into ``wi[DI_ELIG]`` (H in ``wf[DF_HSEL]``).  Returns their number.
    """
    nrk = max(n_routed, 1)
    hsum_top = wf[DF_HTOP, : nrk * top_h].reshape((nrk, top_h))
    hcnt = wi[DI_HCNT, :nrk]
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
            _top_insert(hsum_top[k], hcnt[k], top_h, emax)
            hcnt[k] += 1
    h = wf[DF_H, :nrk]
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
    return topk_pos(h, n_routed, ne, wi[DI_ELIG], wf[DF_HSEL], wf[DF_HEAP], wi[DI_HEAP])


@kernel()
def _top_insert(top, cnt, top_h, e):
    """Insert ``e`` into the descending list ``top`` of the ``top_h`` largest of ``cnt`` values seen."""
    c = min(cnt, top_h)
    if c < top_h or e > top[top_h - 1]:
        pos = c if c < top_h else top_h - 1
        while pos > 0 and top[pos - 1] < e:
            top[pos] = top[pos - 1]
            pos -= 1
        top[pos] = e


@kernel()
def doc_branches(plain, n_pool, n_routed, ne, rel_doc, dm_r, dm_n, wi, wf):
    """Tabulate, per plain position, the relevance and the eligible branches of its document.

    Per plain position a: its relevance ``relp = wf[DF_REL]``, the eligible branches of its
    document ``eb = wi[DI_EB]`` (``ebn = wi[DI_EBN]`` of them), ``used = wi[DI_USED]`` cleared.
    """
    nrk = max(n_routed, 1)
    elig = wi[DI_ELIG]
    elig_of = wi[DI_ELIG_OF, :nrk]
    for k in range(nrk):
        elig_of[k] = -1
    for b in range(ne):
        elig_of[elig[b]] = b
    F = dm_r.shape[1]
    relp = wf[DF_REL, :n_pool]
    eb = wi[DI_EB, : n_pool * F].reshape((n_pool, F))
    ebn = wi[DI_EBN, :n_pool]
    used = wi[DI_USED, :n_pool]
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


@kernel()
def greedy_ranks(plain, n_pool, nd, ne, F, lam_d, rt, centres, ctab, wi, wf, out_order):
    """Fill ranks 1..nd greedily (SPEC B.10 steps 3-4).

    Rank 1 = ``plain[0]`` (S seeded with its highest-H eligible branch), then ranks
    2..nd greedily (SPEC B.10 step 4).  Cosines of the eligible (unit) centres are computed
    lazily: column s (all b) when branch s first enters S, the only columns dev_b reads.
    ``centres`` = (c_indptr, c_terms, c_vals, c_norm).
    """
    c_indptr, c_terms, c_vals, c_norm = centres
    elig = wi[DI_ELIG]
    nee = max(ne, 1)
    cos = wf[DF_COS, : nee * nee].reshape((nee, nee))
    have = wi[DI_HAVE, :nee]
    for b in range(ne):
        have[b] = 0
    relp = wf[DF_REL, :n_pool]
    eb = wi[DI_EB, : n_pool * F].reshape((n_pool, F))
    ebn = wi[DI_EBN, :n_pool]
    used = wi[DI_USED, :n_pool]
    sel = wi[DI_SEL]  # S (may repeat)
    ns = 0
    out_order[0] = plain[0]
    used[0] = 1
    best_b = np.int64(-1)  # not a bare -1: a literal would compile _cos_column a second time
    for s in range(ebn[0]):
        b = eb[0, s]
        if best_b < 0 or b < best_b:  # eligible list is H-descending
            best_b = b
    if best_b >= 0:
        sel[ns] = best_b
        ns += 1
        _cos_column(best_b, ne, rt, elig, c_indptr, c_terms, c_vals, c_norm, ctab, cos)
        have[best_b] = 1
    dev = wf[DF_DEV, :nee]
    first = 0
    last = n_pool - 1
    for rank in range(1, nd):
        branch_deviation(ns, ne, sel, cos, dev)
        # relp is non-increasing along the plain order: max / min of the remaining
        # relevances are those of the first / last unused positions
        while used[first]:
            first += 1
        while used[last]:
            last -= 1
        best, best_bb = best_remaining(first, last, ns, ne, lam_d, relp, used, eb, ebn, dev)
        used[best] = 1
        out_order[rank] = plain[best]
        if best_bb >= 0:
            sel[ns] = best_bb
            ns += 1
            if not have[best_bb] and rank + 1 < nd:  # needed by the next rank only
                _cos_column(best_bb, ne, rt, elig, c_indptr, c_terms, c_vals, c_norm, ctab, cos)
                have[best_bb] = 1


@kernel()
def branch_deviation(ns, ne, sel, cos, dev):
    """Compute the min-max scaled deviation ``dev_b`` of every eligible branch.

    ``dev_b = 1 + mean(Cos[S, S]) - 2 mean(Cos[b, S])`` for every eligible b, min-max
    scaled across them (all 0 while S is empty or a spread is below 1e-9).
    """
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


@kernel()
def best_remaining(first, last, ns, ne, lam_d, relp, used, eb, ebn, dev):
    """Find the best unused plain position for the next rank.

    The unused plain position in ``first..last`` maximising ``minmax(relp) + λ_D · max dev``
    over its eligible branches (ties: earlier position) and that branch (-1: none);
    returns ``(position, branch)``.
    """
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
    return best, best_bb


# ---------------------------------------------------------------------------------- outputs
@kernel(inline=_THIN)
def stage_outputs(npool, use_bm25, ws, out_doc, out_comp):
    """Write the first ranks of the final order and their components.

    The first ``out_doc.shape[0]`` documents of the final order ``wi[WI_FINAL]`` and their
    components (tail, lexadj, sem, rare, relevance, lex1, bm25) in ``out_comp`` rows;
    returns their number.
    """
    order, pp = ws.wi[WI_FINAL], ws.wi[WI_POS]
    wf = ws.wf
    lex1p, lexadjp, semp, rarep, rel = wf[WF_LEX1], wf[WF_LEXADJ], wf[WF_SEM], wf[WF_RARE], wf[WF_REL]
    tail, ulist, bval, z2 = ws.tail, ws.ulist, ws.bval, ws.z2
    # position -> pool index, through the z2 scratch
    for a in range(npool):
        z2[pp[a]] = a
    n_out = min(npool, out_doc.shape[0])
    for a in range(n_out):
        o = order[a]
        k = np.int64(z2[o])
        d = ulist[o]
        out_doc[a] = d
        out_comp[C_TAIL, a] = tail[o]
        out_comp[C_LEXADJ, a] = lexadjp[k]
        out_comp[C_SEM, a] = semp[k]
        out_comp[C_RARE, a] = rarep[k]
        out_comp[C_REL, a] = rel[k]
        out_comp[C_LEX1, a] = lex1p[k]
        out_comp[C_BM25, a] = bval[d] if use_bm25 else 0.0
    return n_out


# ---------------------------------------------------------------------------------- one query
@kernel(inline="always")
def sgr_one_query(gen, qt, qv, ix, prm, ws, out_doc, out_comp, out_info):
    """Run the whole query path for one query (stamp ``gen``).

    The whole query path for one query (stamp ``gen``); returns ``(n, status)``.

    ``out_doc`` (int64, >= P) receives the pool in final order, ``out_comp`` (7, >= P) its
    components, ``out_info`` (int64, 3) = (|U| before the BM25 extension, routed terms,
    |pool|).  Status ``STATUS_EMPTY``: no known query term or no routed document.
    """
    out_info[0] = 0
    out_info[1] = 0
    out_info[2] = 0
    if qt.shape[0] == 0:
        return 0, STATUS_EMPTY
    nr = stage_route(gen, qt, qv, ix, prm, ws)
    nu = stage_local_score(gen, qt, nr, ix, prm, ws)
    n_routed_docs = nu
    use_bm25 = prm.bm25_candidates > 0 or prm.w_bm25 != 0.0 or prm.w_bm25_rescue != 0.0
    if use_bm25:
        nu = stage_bm25(gen, qt, nu, ix, prm, ws)
    if nu == 0:
        out_info[1] = nr
        _clear_marks(qt, ix.sem_indptr, ix.sem_idx, ws.mark, ws.sval)
        return 0, STATUS_EMPTY
    nuse, live = stage_tail(gen, nu, use_bm25, prm, ws)
    n_sem, n_rare = stage_query_tables(qt, qv, ix, prm, ws)
    stage_rescue(qt, nuse, live, n_sem, n_rare, ix, prm, ws)
    npool = stage_shortlist(nuse, prm, ws)
    stage_pool_semantic(npool, n_sem, ix, prm, ws)
    stage_final_features(npool, use_bm25, prm, ws)
    diversify(npool, nr, ix, prm, ws)
    n_out = stage_outputs(npool, use_bm25, ws, out_doc, out_comp)
    out_info[0] = n_routed_docs
    out_info[1] = nr
    out_info[2] = npool
    _clear_marks(qt, ix.sem_indptr, ix.sem_idx, ws.mark, ws.sval)
    return n_out, STATUS_OK


# ---------------------------------------------------------------------------------- batch drivers
@kernel()
def _batch_sizes(q_indptr, q_terms, sem_indptr, prm, n_f):
    """Return the per-chunk scratch sizes of a batch.

    (max query length, max semantic-neighbour entries of a query, routed-term room,
    pool-sized work row width) of a batch: the per-chunk scratch sizes.
    """
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
    n_rt = max_q + prm.budget
    big_p = prm.pool
    n_w = max(big_p * (n_f + 1), n_rt * prm.top_h, prm.n_elig * prm.n_elig, prm.n_div + big_p, n_rt, max_q) + 1
    return max_q, max_sem, n_rt, n_w


@kernel(inline=_THIN)
def chunk_work(c, sc, sizes, n_docs):
    """Return the ``SGRWork`` of chunk ``c``.

    ``SGRWork`` of chunk ``c``: views of slab c of ``sc`` and the per-call work arrays
    (heap and pool-sized rows allocated once per call, not per query).
    """
    max_q, max_sem, n_rt, n_w = sizes
    sval = sc.vf[c, VF_SVAL]
    svs = np.empty(max_sem + 1, np.float64)
    qbits = np.zeros((sval.shape[0] >> 6) + 1, np.int64)
    rt = np.empty(n_rt, np.int64)
    rw = np.empty(n_rt, np.float64)
    powtab = np.empty(max_q + 1, np.float64)
    heap_v = np.empty(max(n_docs, n_rt) + 1, np.float64)
    heap_i = np.empty(max(n_docs, n_rt) + 1, np.int64)
    wi = np.empty((N_WI, n_w), np.int64)
    wf = np.empty((N_WF, n_w), np.float64)
    nf = sc.nf
    return SGRWork(
        qval=sc.vf[c, VF_QVAL],
        mark=sc.mark[c],
        rstamp=sc.vi[c, VI_RSTAMP],
        rval=sc.vf[c, VF_RVAL],
        rbuf=sc.vi[c, VI_RBUF],
        sval=sval,
        slot=sc.slot[c],
        svs=svs,
        qbits=qbits,
        rt=rt,
        rw=rw,
        dp=sc.dp[c],
        ulist=sc.ni[c, NI_ULIST],
        dm_n=sc.ni[c, NI_DMN],
        dm_r=sc.dmr[c],
        dm_e=sc.dme[c],
        esum=nf[c, NF_ESUM],
        csum=nf[c, NF_CSUM],
        tail=nf[c, NF_TAIL],
        lex=nf[c, NF_LEX],
        lexadj=nf[c, NF_LEXADJ],
        sem=nf[c, NF_SEM],
        rare=nf[c, NF_RARE],
        z1=nf[c, NF_Z1],
        z2=nf[c, NF_Z2],
        pre=nf[c, NF_PRE],
        bstamp=sc.ni[c, NI_BSTAMP],
        bval=nf[c, NF_BVAL],
        blist=sc.ni[c, NI_BLIST],
        powtab=powtab,
        heap_v=heap_v,
        heap_i=heap_i,
        wi=wi,
        wf=wf,
        btab=sc.bt[c],
    )


@kernel(inline="always")
def _query_chunk(
    c, n_chunks, gen_base, sizes, q_indptr, q_terms, q_vals, ix, prm, sc, out_doc, out_comp, out_n, out_info, out_status
):
    """Run the queries of chunk ``c``.

    Chunk ``c`` of ``n_chunks`` contiguous chunks of the batch (one scratch slab); ``out`` =
    (out_doc, out_comp, out_n, out_info, out_status) of ``sgr_query_batch``.
    """
    nq = q_indptr.shape[0] - 1
    step = (nq + n_chunks - 1) // n_chunks
    lo = c * step
    hi = min(nq, lo + step)
    if lo >= hi:
        return
    ws = chunk_work(c, sc, sizes, ix.dl.shape[0])
    for i in range(lo, hi):
        s = q_indptr[i]
        e = q_indptr[i + 1]
        n, st = sgr_one_query(
            gen_base + i, q_terms[s:e], q_vals[s:e], ix, prm, ws, out_doc[i], out_comp[i], out_info[i]
        )
        out_n[i] = n
        out_status[i] = st


# sgr_query_serial is this with range for prange (one-query calls skip the parallel launch)
@kernel(parallel=True)
def sgr_query_batch(
    q_indptr, q_terms, q_vals, ix, prm, sc, n_chunks, gen_base, out_doc, out_comp, out_n, out_info, out_status
):
    """Batched SGR query path; ``prange`` over ``n_chunks`` contiguous chunks of queries.

    Queries: CSR ``q_indptr`` int64 (nq+1), ``q_terms`` int32 sorted unique per row,
    ``q_vals`` float32 (L2-normalised TF-IDF).  ``ix`` an ``SGRIndex``, ``prm`` an
    ``SGRParams``, ``sc`` an ``SGRScratch`` of >= ``n_chunks`` slabs, owned by the caller and
    reused across calls: stamps start at -1 and query i is stamped ``gen_base + i`` (the
    caller advances ``gen_base`` by nq after each call), marks / slots / the semantic row
    are all zero between queries, so nothing is re-initialised between queries or calls.

    ``out`` = (out_doc, out_comp, out_n, out_info, out_status): per query i
    ``out_doc[i, :n]`` (int64) = pool in final order (diversity on ranks 2..n_div),
    ``out_comp[i, :, :n]`` = components (tail, lexadj, sem, rare, relevance, lex1, bm25),
    ``out_n[i] = n``, ``out_info[i]`` = (|U|, routed terms, |pool|), ``out_status[i]`` =
    ``STATUS_OK`` or ``STATUS_EMPTY``.  Rows beyond ``n`` are left untouched (the wrapper
    pre-fills padding).
    """
    sizes = _batch_sizes(q_indptr, q_terms, ix.sem_indptr, prm, sc.dmr.shape[2])
    for c in prange(n_chunks):
        # prange's index is uint64: as int64 the body shares sgr_query_serial's specialisation
        _query_chunk(
            np.int64(c),
            n_chunks,
            gen_base,
            sizes,
            q_indptr,
            q_terms,
            q_vals,
            ix,
            prm,
            sc,
            out_doc,
            out_comp,
            out_n,
            out_info,
            out_status,
        )


# twin of sgr_query_batch, range for prange: the parallel launch costs several us per one-query call
@kernel()
def sgr_query_serial(
    q_indptr, q_terms, q_vals, ix, prm, sc, n_chunks, gen_base, out_doc, out_comp, out_n, out_info, out_status
):
    """Run ``sgr_query_batch`` on the calling thread.

    ``sgr_query_batch`` on the calling thread, without the parallel launch (one query per
    call: the launch is a fixed cost of several µs).
    """
    sizes = _batch_sizes(q_indptr, q_terms, ix.sem_indptr, prm, sc.dmr.shape[2])
    for c in range(n_chunks):
        _query_chunk(
            c,
            n_chunks,
            gen_base,
            sizes,
            q_indptr,
            q_terms,
            q_vals,
            ix,
            prm,
            sc,
            out_doc,
            out_comp,
            out_n,
            out_info,
            out_status,
        )


@kernel()
def cap_scores_desc(out_doc, comp, out):
    """Cap the ``search`` scores to be strictly decreasing in rank.

    ``search`` scores: the relevance ``comp[i, C_REL, c]`` as float32, capped to just
    below the previous rank's score (strictly decreasing, so tools that re-sort by score
    keep the diversified order).  ``out`` float32 (nq, >= kk) pre-filled with -inf; ranks
    with ``out_doc < 0`` stay -inf.
    """
    kk = min(out_doc.shape[1], out.shape[1])
    ninf = np.float32(-np.inf)
    for i in range(out_doc.shape[0]):
        for c in range(kk):
            if out_doc[i, c] < 0:
                break
            r = np.float32(comp[i, C_REL, c])
            if not np.isfinite(r):
                out[i, c] = ninf
            elif c == 0:
                out[i, c] = r
            else:
                cap = np.nextafter(out[i, c - 1], ninf)
                out[i, c] = r if r < cap else cap
