"""MR-JKO and SAM-JKO: multi-resolution JKO reranking (SPEC A.6.3), batched over pools.

Each pool of M candidates is clustered into G groups (spherical k-means for ``"kmeans"``
= MR-JKO, k-means on ``[z, β·rel]`` for ``"sam"`` = SAM-JKO), a coarse Wasserstein JKO flow
runs on the G centroids, the ``G_keep`` groups with the largest coarse mass form the refined
pool, and a fine JKO flow on that pool gives the output distribution, exactly 0 outside the
refined pool. Clustering and both flows run in one Numba kernel over a range of queries,
several ranges on threads at once (:mod:`jkofast.kernels.jko.multires`).

Operating points (SPEC A.8): :func:`coarse_config` (h 1.0, λ 0.05, ρ 0.05, ε 0.1, T 2,
inner 15, τ0 0.2) and :func:`fine_config` (h 2.0, λ 0.1, ρ 0.05, ε 0.2, T 3, inner 25 — the
function default — or 20 with ``reported=True``, the published SciFact runs; τ0 1.0). Both
accept overrides such as ``grad="implicit"`` (the fast exact-gradient path) instead of the
published truncated unroll (``grad="unrolled"``, the default, for parity).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np

from jkofast import _status
from jkofast._ahead import compile_ahead
from jkofast._numba import register_warmup
from jkofast._threads import over_ranges
from jkofast._validation import (
    QueryIndexError,
    QueryRejects,
    as_float_array,
    check_int,
    check_offsets,
    rescale_rows_dense,
    segment_any,
)
from jkofast.jko.config import gradient_path
from jkofast.jko.solver import _NEW_OUT, JKOConfig, _flow_entry, _tiny_flow_args
from jkofast.kernels.jko import cluster as _kc
from jkofast.kernels.jko import multires as _k
from jkofast.kernels.jko import solver as _ks
from jkofast.kernels.pools import baselines as _kb

__all__ = [
    "CLUSTERINGS",
    "MAX_LLOYD",
    "MultiresResult",
    "cluster_rows",
    "coarse_config",
    "fine_config",
    "group_count",
    "initial_rows",
    "multires_rerank",
]

CLUSTERINGS = ("kmeans", "sam")
MAX_LLOYD = 30  # Lloyd iterations cap of the published clustering

_COARSE = dict(h=1.0, lam=0.05, rho=0.05, sinkhorn_eps=0.1, T=2, inner_steps=15, tau0=0.2)
_FINE = dict(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=3, inner_steps=25, tau0=1.0)


def coarse_config(**overrides) -> JKOConfig:
    """Return the coarse-stage operating point "MR/SAM coarse" of SPEC A.8, with field overrides.

    h 1.0, λ 0.05, ρ 0.05, ε 0.1, T 2, inner 15, τ0 0.2, mode ``wasserstein`` (Sinkhorn 60
    pairs, 8 differentiated, Adam lr 0.1). E.g. ``coarse_config(grad="implicit")``.
    """
    return JKOConfig(**{**_COARSE, **overrides}).validate()


def fine_config(reported: bool = False, **overrides) -> JKOConfig:
    """Return the fine-stage operating point "MR/SAM fine" of SPEC A.8, with field overrides.

    h 2.0, λ 0.1, ρ 0.05, ε 0.2, T 3, τ0 1.0, mode ``wasserstein``; inner 25 (the function
    default) or, with ``reported=True``, inner 20 (the published SciFact runs).
    """
    base = {**_FINE, "inner_steps": 20} if reported else dict(_FINE)
    return JKOConfig(**{**base, **overrides}).validate()


def group_count(M: int, G: int) -> int:
    """Return the groups used for a pool of M rows: ``G``, or ``max(2, M // 4)`` if ``G >= M`` (SPEC A.6.3).

    A pool of one row is not clustered (0).
    """
    if M <= 1:
        return 0
    return G if G < M else max(2, M // 4)


def initial_rows(M: int, G: int) -> np.ndarray:
    """Return the initial rows of the clustering: ``default_rng(0).choice(M, G, replace=False)``.

    A fresh generator per pool, as the published clustering (SPEC C.2 random streams).
    """
    return np.random.default_rng(0).choice(M, G, replace=False).astype(np.int64)


@dataclass
class MultiresResult:
    """Output of :func:`multires_rerank` (ragged, aligned with the flat candidate order).

    Attributes
    ----------
    p : ndarray float64 (n_total,)
        Final distributions: query q in ``p[offsets[q]:offsets[q+1]]``, exactly 0 outside
        its refined pool (NaN for queries with a non-zero status).
    offsets : ndarray int64 (n_queries + 1,)
    status : ndarray int32 (n_queries,)
        0 = ok; see ``jkofast._status``.
    errors : dict[int, str]
        Query index -> message for rejected / failed queries.
    in_pool : ndarray bool (n_total,)
        Membership of the refined pools.
    pool_size : ndarray int64 (n_queries,)
        Refined pool sizes (0 for failed queries).
    n_groups : ndarray int64 (n_queries,)
        G used per query (after the ``G >= M`` rule).
    lloyd_passes : ndarray int64 (n_queries,)
        Assignment passes of the clustering (<= 30).
    unconverged : ndarray int64 (n_queries, 2)
        Inner steps of both stages whose Sinkhorn (column 0) / implicit-gradient CG
        (column 1) stopped at their cap above tolerance (0 for ``grad="unrolled"``).
    """

    p: np.ndarray
    offsets: np.ndarray
    status: np.ndarray
    errors: dict = field(default_factory=dict)
    in_pool: np.ndarray | None = None
    pool_size: np.ndarray | None = None
    n_groups: np.ndarray | None = None
    lloyd_passes: np.ndarray | None = None
    unconverged: np.ndarray | None = None

    def pool(self, q: int) -> np.ndarray:
        """``p`` of query ``q`` (all NaN when the query failed; see ``status`` / ``errors``)."""
        n = self.offsets.shape[0] - 1
        if isinstance(q, bool) or not isinstance(q, numbers.Integral):
            raise TypeError(f"q must be an integer query index, got {type(q).__name__}")
        if not 0 <= q < n:
            raise QueryIndexError(f"q must be a query index in [0, {n}), got {q}")
        return self.p[self.offsets[q] : self.offsets[q + 1]]


def _check_config(cfg, name: str) -> JKOConfig:
    if not isinstance(cfg, JKOConfig):
        raise TypeError(f"{name} must be a JKOConfig or None, got {type(cfg).__name__}")
    return cfg.validate()


def _check_beta(sam_beta) -> float:
    if isinstance(sam_beta, bool) or not isinstance(sam_beta, numbers.Real):
        raise TypeError(f"sam_beta must be a real number, got {type(sam_beta).__name__}")
    b = float(sam_beta)
    if not np.isfinite(b) or b < 0:
        raise ValueError(f"sam_beta must be >= 0 and finite, got {sam_beta!r}")
    return b


def _embeddings(embeddings, n: int, normalise: bool) -> np.ndarray:
    Z = as_float_array(embeddings, "embeddings", allow_empty=True, finite=False)
    if Z.ndim != 2:
        raise ValueError(f"embeddings must be 2-dimensional (n_total, d), got shape {Z.shape}")
    if Z.shape[0] != n:
        raise ValueError(f"embeddings must have one row per candidate ({n}), got {Z.shape[0]}")
    if n and Z.shape[1] == 0:
        raise ValueError("embeddings must have at least one column")
    if normalise:
        with np.errstate(invalid="ignore", over="ignore"):
            Z = rescale_rows_dense(Z)
    return Z


def _initial_rows_batch(sizes: np.ndarray, G: int, status: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat initial rows and their offsets: ``initial_rows(M_q, group_count(M_q, G))`` per live query."""
    cache: dict[tuple[int, int], np.ndarray] = {}
    parts = []
    for q, M in enumerate(sizes.tolist()):
        g = group_count(M, G) if status[q] == 0 else 0
        if (M, g) not in cache:
            cache[M, g] = initial_rows(M, g) if g else np.empty(0, np.int64)
        parts.append(cache[M, g])
    init_off = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(x) for x in parts], out=init_off[1:])
    init = np.concatenate(parts) if parts else np.empty(0, np.int64)
    return np.ascontiguousarray(init, np.int64), init_off


def _warn_capped(diag: np.ndarray) -> None:
    parts = [
        f"{what} stopped at its cap in {int(diag[:, c].sum())} inner steps of "
        f"{int(np.count_nonzero(diag[:, c]))} queries"
        for c, what in ((0, "Sinkhorn"), (1, "implicit-gradient CG"))
        if diag[:, c].any()
    ]
    if parts:
        warnings.warn(
            "multires_rerank: " + "; ".join(parts) + " (those steps' gradients are inexact; per query: "
            "MultiresResult.unconverged)",
            _status.ConvergenceWarning,
            stacklevel=3,
        )


def _check_counts(G, G_keep, max_lloyd, clustering, sam_beta) -> tuple:
    """Return the checked ``(G, G_keep, max_lloyd, beta)`` of :func:`multires_rerank`."""
    G = check_int(G, "G", min_value=1)
    G_keep = check_int(G_keep, "G_keep", min_value=1)
    max_lloyd = check_int(max_lloyd, "max_lloyd", min_value=1)
    if clustering not in CLUSTERINGS:
        raise ValueError(f"clustering must be one of {list(CLUSTERINGS)}, got {clustering!r}")
    return G, G_keep, max_lloyd, _check_beta(sam_beta)


def _reject_bad_pools(r: np.ndarray, Z: np.ndarray, off: np.ndarray) -> tuple:
    """Return ``(status, errors)`` with the empty pools and the pools with NaN/inf relevance or rows rejected."""
    rj = QueryRejects(off.shape[0] - 1)
    rj.reject(np.diff(off) == 0, _status.EMPTY, "empty pool")
    rj.reject(segment_any(~np.isfinite(r), off), _status.BAD_INPUT, "rel contains NaN or inf")
    rj.reject(segment_any(~np.isfinite(Z).all(axis=1), off), _status.BAD_INPUT, "embeddings contain NaN or inf")
    return rj.status, rj.errors


def _clear_failed(out, off: np.ndarray, errors: dict) -> None:
    """Give every failed pool its message, NaN ``p`` and empty pool, info and counts."""
    status = out.status
    for q in np.flatnonzero(status != 0):
        errors.setdefault(int(q), _status.MESSAGES.get(int(status[q]), f"status {status[q]}"))
        out.p[off[q] : off[q + 1]] = np.nan
        out.in_pool[off[q] : off[q + 1]] = False
        out.info[q] = 0
        out.diag[q] = 0


def multires_rerank(
    rel,
    offsets,
    embeddings,
    *,
    G: int = 50,
    G_keep: int = 8,
    clustering: str = "kmeans",
    sam_beta: float = 1.0,
    coarse: JKOConfig | None = None,
    fine: JKOConfig | None = None,
    normalise: bool = True,
    max_lloyd: int = MAX_LLOYD,
    n_threads: int | None = None,
    warn_unconverged: bool = True,
) -> MultiresResult:
    r"""Rerank many pools with MR-JKO / SAM-JKO (SPEC A.6.3), the queries in parallel.

    Per pool of M candidates with rows :math:`z_i` and relevance :math:`r_i`:

    1. :math:`G \leftarrow \max(2, \lfloor M/4 \rfloor)` if :math:`G \ge M`; cluster into G
       groups from the rows ``default_rng(0).choice(M, G, replace=False)``, at most
       ``max_lloyd`` Lloyd iterations (assignments start all zero; stop when none changes;
       an empty group keeps its centroid): spherical k-means (``"kmeans"``) or squared
       Euclidean k-means on :math:`[z_i, \beta r_i]` (``"sam"``), centroids :math:`\mu_g`
       L2-normalised;
    2. coarse flow (``coarse`` config) on the centroids: :math:`\bar r_g` = mean relevance of
       the members (0 if none), :math:`E^c = -\mathrm{minmax}(\bar r)`,
       :math:`p_0^c = \mathrm{softmax}(\mathrm{minmax}(\bar r)/\tau_0^c)`,
       :math:`C^c = (1 - \cos(\mu_g, \mu_{g'}))^2`, :math:`K^c = \max(0, \cos)`;
    3. keep the :math:`\min(G_{keep}, G)` groups with the largest :math:`p^c` (ties: the
       lowest group index); refined pool = their members in ascending order, or the whole
       pool if that has fewer than 2 members;
    4. fine flow (``fine`` config) on the refined pool with
       :math:`E^f = -\mathrm{minmax}(r_{pool})`,
       :math:`p_0^f = \mathrm{softmax}(\mathrm{minmax}(r_{pool})/\tau_0^f)` and the cosine
       C, K of its rows; the output is :math:`p^f` on the refined pool and exactly 0 elsewhere.

    ``minmax`` is all zeros when ``max - min < 1e-9`` (SPEC A.1): an all-equal relevance gives
    E = 0 and a uniform p0 in both stages (defined behaviour, not an error).

    Parameters
    ----------
    rel : array_like, float (n_total,)
        Relevance per candidate (the SPEC's runs use values in [0, 1]:
        ``minmax(0.4·minmax(dense) + 0.6·minmax(rerank))``).
    offsets : array_like, int (n_queries + 1,) or None
        Pool boundaries; None = one pool.
    embeddings : array_like, float32/float64 (n_total, d)
        Candidate rows.
    G, G_keep : int
        Groups (>= 1) and kept groups (>= 1; clamped to G per pool, as the SPEC does).
    clustering : {"kmeans", "sam"}
        MR-JKO (spherical k-means) or SAM-JKO (relevance-aware features).
    sam_beta : float
        β >= 0 of the SAM features (ignored by ``"kmeans"``); the headline SAM-JKO uses 2.0.
    coarse, fine : JKOConfig or None
        Stage configurations; None = :func:`coarse_config()` / :func:`fine_config()` (the
        SPEC function defaults; the published SciFact runs use ``fine_config(reported=True)``).
        Their ``tau0`` is the stage's temperature; ``mode``, ``grad`` etc. are honoured.
    normalise : bool
        L2-normalise the rows (cosine geometry, as ``rerank_batch``); False uses them as
        given (the published code assumes L2-normalised embeddings).
    max_lloyd : int
        Lloyd iterations cap (30 in the SPEC).
    n_threads : int or None
        Threads for the batch (None: ``JKOFAST_NUM_THREADS`` or all); the pools are shared out.
    warn_unconverged : bool
        One ``ConvergenceWarning`` when converged-plan inner steps stopped at their cap.

    Returns
    -------
    MultiresResult
        Bad pools (NaN/inf relevance or rows, empty pool) get a non-zero ``status`` and an
        ``errors`` entry; the others return.

    Raises
    ------
    ValueError
        Bad ``G``/``G_keep``/``max_lloyd`` (< 1), ``sam_beta < 0`` or not finite, unknown
        ``clustering``, embeddings not 2-D or not one row per candidate, bad offsets.
    TypeError
        Non-integer counts, a non-real ``sam_beta``, configs that are not ``JKOConfig``.

    Examples
    --------
    >>> import numpy as np
    >>> from jkofast.jko.multires import multires_rerank, fine_config
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.normal(size=(40, 8))
    >>> rel = rng.random(40)
    >>> res = multires_rerank(rel, [0, 40], Z, G=8, G_keep=2, clustering="sam", sam_beta=2.0,
    ...                       fine=fine_config(reported=True))
    >>> bool(res.status[0] == 0), round(float(res.p.sum()), 9), bool(np.all(res.p[~res.in_pool] == 0))
    (True, 1.0, True)
    """
    G, G_keep, max_lloyd, beta = _check_counts(G, G_keep, max_lloyd, clustering, sam_beta)
    cc = _check_config(coarse_config() if coarse is None else coarse, "coarse")
    cf = _check_config(fine_config() if fine is None else fine, "fine")
    r = as_float_array(rel, "rel", dtype=np.float64, ndim=1, allow_empty=True, finite=False)
    n = r.shape[0]
    off = check_offsets([0, n] if offsets is None else offsets, n)
    Z = _embeddings(embeddings, n, bool(normalise))
    nq = off.shape[0] - 1
    status, errors = _reject_bad_pools(r, Z, off)
    init, init_off = _initial_rows_batch(np.diff(off), G, status)
    mp = _k.MRParams(G_keep, clustering == "sam", beta, max_lloyd, bool(normalise), float(cc.tau0), float(cf.tau0))
    out = _k.MROutputs(
        np.zeros(n), np.zeros(n, np.bool_), np.zeros((nq, 2), np.int64), np.zeros((nq, 2), np.int64), status
    )
    tok = _stage_tokens(cc, cf)
    prm_c, prm_f = cc._params(), cf._params()
    flows = (_stage_flow(prm_c, tok), _stage_flow(prm_f, tok)) if nq else ((0, 0), (0, 0))
    over_ranges(_k.multires_pools, nq, n_threads, Z, r, off, init, init_off, mp, prm_c, prm_f, out, tok, flows)
    if (out.status == _ks.NO_ENTRY).any():  # pragma: no cover - _stage_flow typed the flow otherwise than the stage
        raise RuntimeError("multires_pools: the JKO flow's entry is not of the argument types the stage passes")
    _clear_failed(out, off, errors)
    if warn_unconverged:
        _warn_capped(out.diag)
    return MultiresResult(
        p=out.p,
        offsets=off,
        status=status,
        errors=errors,
        in_pool=out.in_pool,
        pool_size=out.info[:, 0].copy(),
        n_groups=np.diff(init_off),
        lloyd_passes=out.info[:, 1].copy(),
        unconverged=out.diag,
    )


def cluster_rows(
    embeddings,
    G: int,
    *,
    clustering: str = "kmeans",
    rel=None,
    sam_beta: float = 1.0,
    init=None,
    max_lloyd: int = MAX_LLOYD,
    normalise: bool = True,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Cluster the rows of one pool as MR-JKO / SAM-JKO do (step 2 of :func:`multires_rerank`).

    Parameters
    ----------
    embeddings : array_like (M, d)
    G : int
        Groups, 1 <= G <= M (no ``G >= M`` rule here).
    clustering : {"kmeans", "sam"}
    rel : array_like (M,), required for ``"sam"``
    sam_beta : float
        β >= 0.
    init : array_like of int (G,), optional
        Distinct initial rows; default :func:`initial_rows` ``(M, G)``.
    max_lloyd : int
    normalise : bool
        L2-normalise the rows first.

    The rows are clustered in float32 (as in :func:`multires_rerank` and the published code);
    means and centroids are float64.

    Returns
    -------
    assign : ndarray int64 (M,)
    centroids : ndarray float64 (G, d), L2-normalised
    passes : int
        Assignment passes run.
    """
    if clustering not in CLUSTERINGS:
        raise ValueError(f"clustering must be one of {list(CLUSTERINGS)}, got {clustering!r}")
    Z = as_float_array(embeddings, "embeddings", ndim=2)
    M, d = Z.shape
    G = check_int(G, "G", min_value=1)
    if G > M:
        raise ValueError(f"G must be <= the number of rows ({M}), got {G}")
    max_lloyd = check_int(max_lloyd, "max_lloyd", min_value=1)
    beta = _check_beta(sam_beta)
    if clustering == "sam":
        if rel is None:
            raise ValueError('rel is required for clustering="sam"')
        r = as_float_array(rel, "rel", dtype=np.float64, ndim=1)
        if r.shape[0] != M:
            raise ValueError(f"rel must have one entry per row ({M}), got {r.shape[0]}")
    else:
        r = np.zeros(M)
    if init is None:
        ini = initial_rows(M, G)
    else:
        ini = np.ascontiguousarray(init, dtype=np.int64)
        if ini.shape != (G,) or ini.min() < 0 or ini.max() >= M or np.unique(ini).size != G:
            raise ValueError(f"init must hold {G} distinct row indices in [0, {M})")
    inv = np.empty(M)
    _k.row_scales(Z, 0, M, bool(normalise), inv)
    X = np.empty((M, d), np.float32)
    _k.gather_rows(Z, 0, np.arange(M), inv, X)
    assign = np.empty(M, np.int64)
    cent = np.empty((G, d))
    passes = _kc.cluster_pool(X, r, clustering == "sam", beta, ini, max_lloyd, assign, cent)
    return assign, cent, int(passes)


# the transport kernels each gradient path may run, its fallbacks included (the stages never
# retry): (unrolled, log_form, imp32, imp64, converged) of jkofast.kernels.jko.solver's tokens
_PATH_KERNELS = {
    "unrolled": (True, True, None, None, None),
    "implicit": (None, None, True, True, True),
    "entropic": (None, None, None, None, True),
    "none": (None, None, None, None, None),
}


def _stage_tokens(*cfgs: JKOConfig) -> tuple:
    """Return the path tokens of ``multires_pools`` for the stage configurations ``cfgs``.

    The union of the kernels their gradient paths run (with both float32 and float64
    operators and every fallback, as the all-paths ``jko_query``, so the results are its
    results): a call compiles only those, e.g. not the unrolled Sinkhorn and its adjoint for
    the implicit stages of ``jkofast rerank --multires``. No stage with a transport term: the
    implicit tokens (as ``rerank_batch``'s modes without one). The dual read-out is never
    asked for (``_params()`` without duals), so its token is None.
    """
    tok = [None] * 5
    for cfg in cfgs:
        for i, t in enumerate(_PATH_KERNELS[gradient_path(cfg)]):
            tok[i] = tok[i] or t
    if not any(tok):
        tok = list(_PATH_KERNELS["implicit"])
    return (*tok, None)


def _stage_flow(prm, tok) -> tuple[int, int]:
    """Return the entry of the ``jko_flow`` a stage of ``multires_pools`` runs with the parameters ``prm``.

    Of the types of the stage's arguments: new float64 arrays, the parameters, the path tokens
    ``tok`` (``_stage_tokens``; ``unr32`` None).
    """
    e = _NEW_OUT.p_out
    return _flow_entry(e, e, prm, _NEW_OUT, (tok[0], tok[1], None, *tok[2:]))


def _cluster_ahead():
    """Start a child compiling the energy and the clustering kernels (float32 rows) when the cache lacks them.

    ``jkofast rerank --multires`` compiles the stage flow meanwhile, the longest compile, then the
    MR/SAM kernel (:func:`_warm_path` with the child). Returns the running
    :class:`jkofast._ahead.Ahead` or None (warm cache, caching off, one core,
    ``JKOFAST_COMPILE_AHEAD=0``); the caller closes it.
    """
    probes = {"energy": (_kb.minmax_segments,), "multires.cluster": (_kc.cluster_pool,)}
    return compile_ahead(tuple(probes), probes)


def _warm_clustering(dtype) -> None:
    """Compile (or load) the clustering kernels (k-means and SAM) for rows of ``dtype``."""
    Z = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]], dtype)
    cluster_rows(Z, 2)
    cluster_rows(Z, 2, clustering="sam", rel=np.array([0.9, 0.5, 0.1, 0.3]))


def _warm_path(dtype, grad: str, child=None) -> None:
    """Compile (or load) the clustering and MR/SAM kernels for rows of ``dtype`` on the gradient path ``grad``.

    With ``child`` (:func:`_cluster_ahead`'s, compiling the clustering kernels meanwhile), this
    process compiles the stage flow first, waits for the child, and the MR/SAM kernel then loads
    the clustering kernels from the cache; a failed child leaves them to compile here, as without one.
    """
    Z = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]], dtype)
    rel = np.array([0.9, 0.5, 0.1, 0.3])
    if child is not None:
        _warm_flow(grad)
        child.wait()
    tiny = dict(T=1, inner_steps=2, sinkhorn_iter=3, sinkhorn_iter_grad=2, grad=grad)
    for clustering in CLUSTERINGS:
        multires_rerank(
            rel,
            [0, 4],
            Z,
            G=2,
            G_keep=1,
            clustering=clustering,
            coarse=coarse_config(**tiny),
            fine=fine_config(**tiny),
            n_threads=1,
        )


def _warm_flow(grad: str) -> None:
    """Compile (or load) the stage flow ``multires_pools`` calls on the gradient path ``grad``.

    ``jko_flow`` with the stages' path tokens, on tiny float64 inputs of the types the stage
    passes (the geometry is float64 whatever the rows' dtype): the solver and transport kernels,
    most of the MR/SAM compile (:func:`_warm_path` compiles it first when a child compiles the
    clustering kernels meanwhile).
    """
    cfg = coarse_config(T=1, inner_steps=2, sinkhorn_iter=3, sinkhorn_iter_grad=2, grad=grad)
    tok = _stage_tokens(cfg, cfg)
    _ks.jko_flow(*_tiny_flow_args(cfg), tok[0], tok[1], None, *tok[2:])


@register_warmup("multires.cluster")
def _warmup_clustering() -> None:
    """Compile the clustering kernels on float32 rows (``jkofast rerank --multires``'s gathered embeddings)."""
    _warm_clustering(np.float32)


@register_warmup("multires")
def _warmup() -> None:
    """Compile the clustering and MR/SAM kernels on tiny pools.

    float32 and float64 rows on the stage configurations' own gradient path (unrolled), and
    float32 rows on the implicit path (``jkofast rerank --multires``'s default).
    """
    for dtype, grad in ((np.float64, "unrolled"), (np.float32, "unrolled"), (np.float32, "implicit")):
        _warm_path(dtype, grad)
    _warm_clustering(np.float64)
