"""MR-JKO / SAM-JKO: the two-stage (coarse -> fine) JKO flow of SPEC A.6.3, batched over pools.

Per query (``multires_query``, serial), on the pool rows ``X`` (M, d) float64 and the
relevance ``rel`` (M,):

1. cluster the rows into G groups from the initial rows ``init`` (``cluster_pool``: spherical
   k-means, or SAM k-means on ``[z, β·rel]``);
2. coarse problem on the G centroids ``μ``: ``group_rel`` = mean rel of the members (0 for an
   empty group), ``x = minmax(group_rel)``, ``E^c = -x``, ``p0^c = softmax(x/τ0^c)``,
   ``C^c = (1 - clip(μ μᵀ))²``, ``K^c = max(0, clip(μ μᵀ))``; JKO with the coarse
   ``JKOParams`` (``jko_query``). A single group (G = 1) skips the flow: ``p^c = [1]``;
3. keep the ``G_keep`` groups with the largest ``p^c`` (ties: the lowest group index);
   refined pool = their members in ascending row order, the whole pool if < 2 members;
4. fine problem on the refined pool: ``x = minmax(rel[pool])``, ``E^f = -x``,
   ``p0^f = softmax(x/τ0^f)``, C, K from ``X[pool]``; JKO with the fine ``JKOParams``;
5. output ``p`` (M,): ``p_fine`` on the refined pool, exactly 0 elsewhere.

``minmax`` gives all zeros when ``max - min < 1e-9`` (then E = 0 and p0 is uniform, SPEC A.1);
softmax temperatures are floored at 1e-9. ``multires_pools`` runs ``multires_query`` over a
range of queries, several ranges on threads at once; each query writes only its own slices and
rows, so the results do not depend on the thread count.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jkofast import _codes
from jkofast._numba import kernel
from jkofast.kernels.jko.cluster import cluster_pool
from jkofast.kernels.jko.geometry import cost_kernel_dense
from jkofast.kernels.jko.solver import FlowOut, call_flow

__all__ = [
    "MROutputs",
    "MRParams",
    "gather_rows",
    "group_relevance",
    "minmax_into",
    "multires_pools",
    "multires_query",
    "row_scales",
    "select_groups",
    "softmax_tau_into",
    "stage_inputs",
]

OK = _codes.OK


class MRParams(NamedTuple):
    """Scalar parameters of the multi-resolution flow (besides the two ``JKOParams``).

    ``g_keep`` kept groups (clamped to G per query), ``sam`` (True: SAM k-means), ``beta``
    (β of the SAM features), ``max_lloyd`` (Lloyd iterations cap, 30 in the SPEC),
    ``normalise`` (L2-normalise the rows when gathering them; zero rows stay zero),
    ``tau0_coarse`` / ``tau0_fine`` (τ0 of the two initial distributions).
    """

    g_keep: int
    sam: bool
    beta: float
    max_lloyd: int
    normalise: bool
    tau0_coarse: float
    tau0_fine: float


class MROutputs(NamedTuple):
    """Outputs of ``multires_pools`` (preallocated by the wrapper).

    ``p`` (n_total,) float64; ``in_pool`` (n_total,) bool (the refined pools); per query
    ``info`` (nq, 2) int64 (refined pool size, clustering passes), ``diag`` (nq, 2) int64
    (capped inner steps, coarse + fine, as ``jko_query``'s ``diag``) and ``status`` int32
    (non-zero on entry: skipped).
    """

    p: np.ndarray
    in_pool: np.ndarray
    info: np.ndarray
    diag: np.ndarray
    status: np.ndarray


@kernel()
def minmax_into(x, out):
    """``out = (x - min)/(max - min)``, all zeros when ``max - min < 1e-9`` (SPEC A.1)."""
    n = x.shape[0]
    mn = x[0]
    mx = x[0]
    for i in range(1, n):
        if x[i] < mn:
            mn = x[i]
        if x[i] > mx:
            mx = x[i]
    r = mx - mn
    for i in range(n):
        out[i] = 0.0 if r < 1e-9 else (x[i] - mn) / r


@kernel()
def softmax_tau_into(x, tau, out):
    """``out = softmax((x - max x)/max(τ, 1e-9))``."""
    t = max(tau, 1e-9)
    n = x.shape[0]
    mx = x[0]
    for i in range(1, n):
        if x[i] > mx:
            mx = x[i]
    s = 0.0
    for i in range(n):
        out[i] = np.exp((x[i] - mx) / t)
        s += out[i]
    for i in range(n):
        out[i] = out[i] / s


@kernel()
def stage_inputs(r, tau0, E, p0):
    """Energy and initial distribution of one stage: ``x = minmax(r)``, ``E = -x``, ``p0 = softmax(x/τ0)``."""
    minmax_into(r, E)
    softmax_tau_into(E, tau0, p0)
    for i in range(E.shape[0]):
        E[i] = -E[i]


@kernel()
def group_relevance(rel, assign, out):
    """``out[g]`` = mean ``rel`` of the rows assigned to group g (0 for an empty group)."""
    G = out.shape[0]
    cnt = np.zeros(G, np.int64)
    out[:] = 0.0
    for i in range(rel.shape[0]):
        out[assign[i]] += rel[i]
        cnt[assign[i]] += 1
    for g in range(G):
        if cnt[g] > 0:
            out[g] = out[g] / cnt[g]


@kernel()
def select_groups(pc, g_keep, keep):
    """Mark in ``keep`` (bool, G) the ``g_keep`` largest entries of ``pc`` (ties: the lowest index)."""
    G = pc.shape[0]
    keep[:] = False
    for _ in range(min(g_keep, G)):
        best = -1
        bv = -np.inf
        for g in range(G):
            if not keep[g] and (best < 0 or pc[g] > bv):
                best = g
                bv = pc[g]
        keep[best] = True


@kernel()
def row_scales(Z, lo, hi, normalise, inv):
    """``inv[i] = 1/‖Z[lo + i]‖`` (0 for a zero row) when ``normalise``, else 1."""
    d = Z.shape[1]
    for i in range(hi - lo):
        if not normalise:
            inv[i] = 1.0
            continue
        s = 0.0
        for k in range(d):
            v = np.float64(Z[lo + i, k])
            s += v * v
        n = np.sqrt(s)
        inv[i] = 1.0 / n if n > 0.0 else 0.0


@kernel()
def gather_rows(Z, lo, rows, inv, X):
    """``X[j] = Z[lo + rows[j]] · inv[rows[j]]`` (products in float64, stored in ``X``'s dtype)."""
    for j in range(rows.shape[0]):
        r = rows[j]
        for k in range(Z.shape[1]):
            X[j, k] = np.float64(Z[lo + r, k]) * inv[r]


@kernel(inline="always")
def _run_stage(r, tau0, Xs, prm, p_out, diag, flow, unrolled, log_form, imp32, imp64, converged, duals):
    """One JKO stage on the rows ``Xs`` (m, d) with relevance ``r``: writes ``p_out``, adds to ``diag``.

    The path tokens (``jkofast.kernels.jko.solver``; ``unr32`` is None) name the transport
    kernels compiled in: the wrapper passes every kernel of the stages' gradient paths,
    fallbacks included, so a stage never returns a retry code and its results are those of
    the all-paths ``jko_query``. ``jko_flow`` runs at ``flow``, the entry of its machine code
    for these arguments (``call_flow``: not linked in; ``NO_ENTRY`` for an entry of other types).
    """
    m = r.shape[0]
    E = np.empty(m)
    p0 = np.empty(m)
    stage_inputs(r, tau0, E, p0)
    if m == 1:
        p_out[0] = 1.0
        return OK
    C = np.empty((m, m))
    K = np.empty((m, m))
    cost_kernel_dense(Xs, np.int64(0), m, np.bool_(False), C, K)  # the argument types of pool_geometry's call
    losses = np.empty(prm.T * prm.inner)
    f = np.empty(m)
    g = np.empty(m)
    dg = np.zeros(2, np.int64)
    out = FlowOut(p_out, losses, f, g, dg)
    st = call_flow(flow, (p0, E, C, C, K, prm, out, unrolled, log_form, None, imp32, imp64, converged, duals))
    diag[0] += dg[0]
    diag[1] += dg[1]
    return st


@kernel(inline="always")
def multires_query(Z, lo, inv, rel, init, mp, prm_c, prm_f, p_out, in_pool, diag, info, tok, flows):
    """Two-stage flow of one pool (module docstring); returns the status.

    The pool's rows are ``Z[lo + i] · inv[i]`` (``Z`` float32/float64, ``inv`` (M,) from
    ``row_scales``; the geometry sees them in float64, the clustering in float32),
    ``rel`` (M,) float64,
    ``init`` (G,) int64 distinct rows (G >= 1, G <= M), ``mp`` an ``MRParams``, ``prm_c`` /
    ``prm_f`` the ``JKOParams`` of the stages. Writes ``p_out`` (M,), ``in_pool`` (M,) bool
    and ``info`` (2,) int64 (refined pool size, clustering passes), and adds the capped inner
    steps of both stages to ``diag`` (2,) int64. ``tok``: the stages' path tokens
    (``unrolled, log_form, imp32, imp64, converged, duals``; see ``_run_stage``); ``flows``: the
    flow entries of the coarse and the fine stage.
    """
    m = rel.shape[0]
    d = Z.shape[1]
    G = init.shape[0]
    assign = np.empty(m, np.int64)
    cent = np.empty((G, d))
    # the clustering reads float32 rows (as the published float32 code): half the bytes and
    # twice the lanes of its dot products; centroids and means stay float64
    X32 = np.empty((m, d), np.float32)
    gather_rows(Z, lo, np.arange(m), inv, X32)
    info[0] = 0
    info[1] = cluster_pool(X32, rel, mp.sam, mp.beta, init, mp.max_lloyd, assign, cent)
    # coarse stage on the centroids
    grel = np.empty(G)
    group_relevance(rel, assign, grel)
    pc = np.empty(G)
    diag[0] = 0
    diag[1] = 0
    st = _run_stage(
        grel, mp.tau0_coarse, cent, prm_c, pc, diag, flows[0], tok[0], tok[1], tok[2], tok[3], tok[4], tok[5]
    )
    if st != OK:
        return st
    # selection: the g_keep heaviest groups, members in ascending row order
    keep = np.empty(G, np.bool_)
    select_groups(pc, mp.g_keep, keep)
    n_sel = 0
    for i in range(m):
        in_pool[i] = keep[assign[i]]
        if in_pool[i]:
            n_sel += 1
    if n_sel < 2:
        in_pool[:] = True
        n_sel = m
    pool = np.empty(n_sel, np.int64)
    j = 0
    for i in range(m):
        if in_pool[i]:
            pool[j] = i
            j += 1
    # fine stage on the refined pool
    Xf = np.empty((n_sel, d))
    gather_rows(Z, lo, pool, inv, Xf)
    rf = np.empty(n_sel)
    for j in range(n_sel):
        rf[j] = rel[pool[j]]
    pf = np.empty(n_sel)
    st = _run_stage(rf, mp.tau0_fine, Xf, prm_f, pf, diag, flows[1], tok[0], tok[1], tok[2], tok[3], tok[4], tok[5])
    p_out[:] = 0.0
    if st == OK:
        for j in range(n_sel):
            p_out[pool[j]] = pf[j]
    info[0] = n_sel
    return st


@kernel()
def multires_pools(Z, rel, offsets, init, init_off, mp, prm_c, prm_f, out, tok, flows, q0, q1):
    """MR/SAM-JKO on the pools ``q0 .. q1 - 1`` of a ragged batch (serial; ``nogil``).

    Query q owns ``offsets[q]:offsets[q+1]`` of ``Z`` (n_total, d; float32 or float64) and
    ``rel`` (n_total,) float64, and its initial rows ``init[init_off[q]:init_off[q+1]]``
    (int64, positions within the pool). Queries with ``out.status[q] != 0`` on entry are
    skipped; a pool of one row gets ``p = [1]`` (no clustering). ``out``: an ``MROutputs``;
    ``tok``: the stages' path tokens (a tuple of None / True, ``multires_query``); ``flows``: the
    entries of ``jko_flow``'s machine code for the coarse and the fine stage's arguments
    (``jkofast._numba.native_entry``).

    The wrapper runs disjoint query ranges on several threads at once (the GIL is released):
    a pool costs milliseconds, so threads over ranges parallelise as a ``prange`` over queries
    would, while this serial kernel compiles in a third of the time of a ``parallel=True`` one
    (which links and optimises the whole solver twice: its loop body and its wrapper).
    Each query writes only its own slices and rows.
    """
    p_o, in_pool_o, info_o, diag_o, status_o = out
    for qi in range(q0, q1):
        if status_o[qi] != 0:
            continue
        lo = offsets[qi]
        hi = offsets[qi + 1]
        m = hi - lo
        if m == 1:
            p_o[lo] = 1.0
            in_pool_o[lo] = True
            info_o[qi, 0] = 1
            info_o[qi, 1] = 0
            continue
        inv = np.empty(m)
        row_scales(Z, lo, hi, mp.normalise, inv)
        status_o[qi] = multires_query(
            Z,
            lo,
            inv,
            rel[lo:hi],
            init[init_off[qi] : init_off[qi + 1]],
            mp,
            prm_c,
            prm_f,
            p_o[lo:hi],
            in_pool_o[lo:hi],
            diag_o[qi],
            info_o[qi],
            tok,
            flows,
        )
