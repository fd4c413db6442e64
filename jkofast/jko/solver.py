"""JKO-RAG reranking: configuration, single-pool solver and batched reranking.

The flow (SPEC A.4): starting from ``p0``, ``T`` outer steps each minimise

    Φ(p) = <p, E> + λ Σ p log p + (ρ/2) pᵀ K p + (1/(2h)) Prox(p, q),   q = previous iterate,

by ``inner_steps`` Adam steps on the logits (PyTorch's Adam, fresh state per outer step).
``Prox`` is selected by ``mode`` (``wasserstein``, ``kl``, ``noproximal``, ``bregman``);
the transport term and its gradient by ``objective`` / ``grad``:

* ``objective="transport", grad="unrolled"`` (default): the published solver — ``<Π, C>``
  of a 60-pair cold-started Sinkhorn plan, gradient = hand-written adjoint of the last 8
  pairs.  Drop-in parity with the reference implementation.
* ``objective="transport", grad="implicit"``: exact gradient of ``<Π*, C>`` at a converged
  plan (symmetric system, CG), Sinkhorn warm-started across inner steps and stopped at
  ``tol``.  The fast path.
* ``objective="entropic"``: the entropic OT value ``OT_ε`` as proximal term, gradient =
  dual potential f.  A *different objective* (the paper's formula), not the reference.

Arithmetic is float64 (the reference runs float32; see SPEC C.2 and
``tests/jko/test_parity.py`` for the agreement reached). ``dtype="float32"`` runs the
unrolled path's Gibbs matvecs on float32 operators with float32 sums (the published
precision; scalings, loss and adjoint accumulations stay float64): the float32 parity path,
about twice as fast (``tests/jko/test_float32.py``).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from jkofast import _status
from jkofast._ahead import compile_ahead
from jkofast._numba import WARMUPS, native_entry, register_warmup
from jkofast._threads import over_ranges
from jkofast._validation import (
    QueryIndexError,
    QueryRejects,
    as_csr,
    as_float_array,
    check_offsets,
    check_positive,
    check_same_length,
    normalise_mass,
    rescale_rows_csr,
    rescale_rows_dense,
    segment_any,
)
from jkofast.jko.config import (
    DTYPES,
    GRADS,
    MODES,
    OBJECTIVES,
    JKOConfig,
    batch_config,
    gradient_path,
    operating_point,
    resolve_config,
)
from jkofast.kernels.jko import geometry as _geo
from jkofast.kernels.jko import solver as _k
from jkofast.kernels.pools import baselines as _kb
from jkofast.selection import topk

__all__ = [
    "DTYPES",
    "E_MAX",
    "GRADS",
    "MODES",
    "OBJECTIVES",
    "JKOConfig",
    "RerankResult",
    "initial_distribution",
    "jko_step",
    "operating_point",
    "pool_geometry",
    "rerank_batch",
    "run_jko",
    "run_jko_with_duals",
]


def initial_distribution(E, tau0: float) -> np.ndarray:
    """``p0 = softmax(-E / max(τ0, 1e-9))`` (SPEC A.3); ``tau0`` must be finite and >= 0.

    Energies so spread out that ``-E/τ0`` overflows give the limit distribution (uniform over
    the lowest energies) instead of NaN.
    """
    E = as_float_array(E, "E", dtype=np.float64, ndim=1)
    tau = max(check_positive(tau0, "tau0", strict=False), 1e-9)
    with np.errstate(over="ignore", invalid="ignore"):
        x = -E / tau
        z = x - x.max()
    if not np.all(np.isfinite(z)):
        with np.errstate(over="ignore"):
            z = (E.min() - E) / tau  # <= 0, exactly 0 at the minimum; -inf where it overflows
    e = np.exp(z)
    return e / e.sum()


# |E| above this makes the squared logit gradients of Adam overflow (p then stops moving)
E_MAX = 1e150


def _check_energy_range(E: np.ndarray, name: str) -> None:
    big = float(np.max(np.abs(E), initial=0.0))
    if big > E_MAX:
        raise ValueError(
            f"{name} has magnitude up to {big:.3g}; energies must lie within "
            f"±{E_MAX:.0e} (rescale them: only differences matter)"
        )


def _check_pool(p0, E, C, K):
    E = as_float_array(E, "E", dtype=np.float64, ndim=1)
    _check_energy_range(E, "E")
    m = E.shape[0]
    p0 = as_float_array(p0, "p0", dtype=np.float64, ndim=1)
    check_same_length("p0", p0, "E", E)
    if np.any(p0 < 0):
        raise ValueError("p0 must be non-negative (a probability vector)")
    p0 = normalise_mass(p0, "p0")
    C = as_float_array(C, "C", dtype=np.float64, ndim=2, copy=True)
    K = as_float_array(K, "K", dtype=np.float64, ndim=2)
    if C.shape != (m, m):
        raise ValueError(f"C must be square with shape ({m}, {m}) matching E, got {C.shape}")
    if K.shape != (m, m):
        raise ValueError(f"K must be square with shape ({m}, {m}) matching E, got {K.shape}")
    scale = max(1.0, float(np.abs(C).max()))
    if not np.allclose(C, C.T, rtol=0.0, atol=1e-5 * scale):
        raise ValueError(
            f"C must be symmetric (a ground cost on one pool); max asymmetry {float(np.abs(C - C.T).max()):.3g}"
        )
    Ks = np.ascontiguousarray(0.5 * (K + K.T))
    return p0, E, C, np.ascontiguousarray(C.T), Ks


class PathTokens(NamedTuple):
    """The path tokens of ``jko_flow`` / ``rerank_pools``, by name (each None or True).

    Passed positionally (``*tokens``) in this order; a None token prunes its kernels from the
    specialisation (``jkofast.kernels.jko.solver``).
    """

    unrolled: bool | None = None  # the published unrolled Sinkhorn, float64 operators
    log_form: bool | None = None  # its log-domain fallback
    unr32: bool | None = None  # the unrolled path on float32 operators
    imp32: bool | None = None  # the implicit path on float32 operators
    imp64: bool | None = None  # the implicit path on float64 operators
    converged: bool | None = None  # w_converged: the entropic objective, the implicit path's fallback
    duals: bool | None = None  # the dual read-out


def _path_tokens(cfg: JKOConfig, with_duals: bool, f64: bool = False, fallback: bool = False) -> PathTokens:
    """Return the kernels' :class:`PathTokens` for ``cfg``.

    One specialisation per gradient path (``jkofast.kernels.jko.solver``): a call compiles
    only the transport kernels its configuration uses. The implicit path starts on float32
    operators when the tolerances allow them (the kernel then checks the pool's range and
    answers ``RETRY_F64`` if the pool needs float64: ``f64=True``); ``fallback=True`` adds
    the fallback kernel of the path (the log form of ``unrolled``, ``w_converged`` of
    ``implicit``; the float64 forms under float32 ``unrolled``) after a ``RETRY_FALLBACK``.
    ``dtype="float32"`` puts the unrolled path on float32 operators (``RETRY_F64``: the pool
    runs in float64). Modes without a transport term take the implicit float32 tokens (their
    code is the same in every specialisation).
    """
    duals = True if with_duals and cfg.mode in ("wasserstein", "bregman") else None
    fb = True if fallback else None
    path = gradient_path(cfg)
    if path == "none":
        # no transport term (kl, noproximal, bregman at alpha 0): the kernel never enters the W
        # code (every W step is behind the run-time use_w), so these modes run on the default
        # implicit float32 specialisation -- one compile serves the main job's KL and W rows
        return PathTokens(imp32=True, duals=duals)
    if path == "entropic":
        return PathTokens(converged=True, duals=duals)
    if path == "implicit":
        lowp = cfg.resolved_tol() >= _k.LOWP_TOL and float(cfg.cg_tol) >= _k.LOWP_TOL
        if f64 or not lowp:
            return PathTokens(imp64=True, converged=fb, duals=duals)
        return PathTokens(imp32=True, converged=fb, duals=duals)
    if cfg.dtype == "float32" and not f64:
        return PathTokens(unrolled=fb, log_form=fb, unr32=True, duals=duals)
    return PathTokens(unrolled=True, log_form=fb, duals=duals)


def _retry_tokens(st: int, cfg: JKOConfig, with_duals: bool, f64: bool, fallback: bool):
    """``(f64, fallback)`` after a retry status ``st`` of a lean specialisation (or None: final)."""
    if st == _k.RETRY_F64 and not f64:
        return True, fallback
    if st == _k.RETRY_FALLBACK and not fallback:
        return f64, True
    if st in (_k.RETRY_F64, _k.RETRY_FALLBACK, _k.MISSING_PATH):  # pragma: no cover - a token bug
        raise RuntimeError(f"internal: JKO kernel status {st} for {cfg!r} (with_duals={with_duals})")
    return None


def _run(p0, E, C, K, cfg, with_duals):
    cfg = resolve_config(cfg)
    p0, E, C, C_T, Ks = _check_pool(p0, E, C, K)
    m = E.shape[0]
    losses = np.zeros(cfg.T * cfg.inner_steps)
    if m == 1:
        return np.ones(1), losses, np.zeros(1), np.zeros(1), cfg
    p = np.empty(m)
    f = np.zeros(m)
    g = np.zeros(m)
    diag = np.zeros(2, np.int64)
    prm = cfg._params(with_duals)
    out = _k.FlowOut(p, losses, f, g, diag)
    f64 = fallback = False
    while True:
        st = _k.jko_flow(p0, E, C, C_T, Ks, prm, out, *_path_tokens(cfg, with_duals, f64, fallback))
        nxt = _retry_tokens(st, cfg, with_duals, f64, fallback)
        if nxt is None:
            break
        f64, fallback = nxt
    _status.warn_on_status(st, "run_jko")
    _warn_unconverged(diag[None, :], cfg, "run_jko", stacklevel=4)
    return p, losses, f, g, cfg


def _warn_unconverged(diag, cfg, where: str, stacklevel: int = 3) -> None:
    """Emit one ``ConvergenceWarning`` for inner steps that stopped at an iteration cap.

    Concerns the converged-plan paths (implicit gradient, entropic objective): the gradient
    of a step whose Sinkhorn or CG stopped above its tolerance is inexact. ``diag``
    (nq, 2) = per query the number of such steps for Sinkhorn and for the
    implicit-gradient CG.
    """
    parts = []
    for col, what, cap in (
        (0, "Sinkhorn", f"sinkhorn_max_iter={cfg.sinkhorn_max_iter}, tol={cfg.resolved_tol():g}"),
        (1, "implicit-gradient CG", f"cg_max_iter={cfg.cg_max_iter}, cg_tol={cfg.cg_tol:g}"),
    ):
        hit = diag[:, col]
        if hit.any():
            nq = int(np.count_nonzero(hit))
            parts.append(
                f"{what} stopped at its cap ({cap}) in {int(hit.sum())} inner steps of {nq} "
                f"quer{'y' if nq == 1 else 'ies'}"
            )
    if parts:
        per_query = "; per query: RerankResult.unconverged" if where == "rerank_batch" else ""
        warnings.warn(
            f"{where}: " + "; ".join(parts) + " (those steps' gradients are inexact; raise the cap or "
            f"loosen the tolerance{per_query})",
            _status.ConvergenceWarning,
            stacklevel=stacklevel,
        )


def run_jko(p0, E, C, K, cfg=None, *, return_losses: bool = False):
    """Run the JKO flow on one pool and return the final distribution ``p_T``.

    Parameters
    ----------
    p0 : array_like, shape (M,)
        Initial distribution (non-negative, positive mass; renormalised).
    E : array_like, shape (M,)
        Energy (lower = more relevant), finite.
    C : array_like, shape (M, M)
        Symmetric ground cost, e.g. ``(1 - cos)^2``.
    K : array_like, shape (M, M)
        Redundancy kernel, e.g. ``max(0, cos)`` (the solver uses ``(K + Kᵀ)/2``).
    cfg : JKOConfig, str or None
        Configuration or operating-point name (``"base"``, ``"tuned"``, ...); None = defaults.
    return_losses : bool
        Also return the loss recorded before each Adam update, shape ``(T*inner_steps,)``.

    Returns
    -------
    p_T : ndarray, float64, shape (M,)
    losses : ndarray, only with ``return_losses``

    Raises
    ------
    ValueError
        NaN/inf inputs, ``|E| > 1e150`` (``E_MAX``), ``p0`` not a distribution, shape
        mismatch, asymmetric C, invalid config (``h <= 0``, ``sinkhorn_eps <= 0``, unknown mode/grad/objective).

    Examples
    --------
    >>> import numpy as np
    >>> from jkofast import run_jko
    >>> Z = np.eye(3)
    >>> C, K = (1 - Z @ Z.T) ** 2, np.maximum(Z @ Z.T, 0)
    >>> p = run_jko([1/3, 1/3, 1/3], [-1.0, 0.0, 0.0], C, K, "base")
    >>> int(np.argmax(p)), round(float(p.sum()), 12)
    (0, 1.0)
    """
    p, losses, _, _, _ = _run(p0, E, C, K, cfg, False)
    return (p, losses) if return_losses else p


def run_jko_with_duals(p0, E, C, K, cfg=None):
    """``run_jko`` plus the dual read-out of SPEC A.4.5.

    After the T outer steps, for ``wasserstein`` and ``bregman`` one cold-started
    ``sinkhorn_iter``-pair Sinkhorn from ``log(max(p_T, 1e-30))`` to the **uniform**
    target gives ``(f, g)``; other modes return zeros.

    Returns
    -------
    p_T, f, g : ndarray, float64, shape (M,)
    """
    p, _, f, g, _ = _run(p0, E, C, K, cfg, True)
    return p, f, g


def jko_step(p, E, C, K, cfg=None) -> np.ndarray:
    """One outer JKO step from ``q = p`` (``cfg`` with ``T = 1``)."""
    cfg = resolve_config(cfg).replace(T=1)
    return run_jko(p, E, C, K, cfg)


def _checked_rows(Z: np.ndarray, normalise: bool) -> np.ndarray:
    """Return dense rows ready for the geometry kernels.

    Rows whose norms would over/underflow are rescaled (cosines unchanged) when
    ``normalise``; raw dot products that overflow raise.
    """
    if normalise:
        return rescale_rows_dense(Z)
    if Z.dtype == np.float64 and Z.size:
        fin = np.isfinite(Z)
        big = float(np.max(np.abs(Z[fin]), initial=0.0))
        if big > 1e150:
            raise ValueError(
                f"embeddings: entries up to {big:.3g} overflow the dot products with "
                "normalise=False (the rows should be L2-normalised)"
            )
    return Z


def pool_geometry(embeddings=None, csr=None, *, normalise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``C = (1 - S)^2`` and ``K = max(0, S)``, ``S = clip(cos, -1, 1)``, for one pool.

    Exactly the construction ``rerank_batch`` uses (dense rows or CSR rows, float64 out).
    """
    if (embeddings is None) == (csr is None):
        raise ValueError("pass exactly one of embeddings or csr")
    if embeddings is not None:
        Z = as_float_array(embeddings, "embeddings", ndim=2, copy=True)
        Z = _checked_rows(Z, normalise)
        m = Z.shape[0]
        C, K = np.empty((m, m)), np.empty((m, m))
        _geo.cost_kernel_dense(Z, 0, m, normalise, C, K)
        return C, K
    ip, ix, dt, shape = as_csr(csr, "csr", dtype=np.float64)
    dt = rescale_rows_csr(ip, dt)
    m = shape[0]
    C, K = np.empty((m, m)), np.empty((m, m))
    _geo.cost_kernel_csr(ip, ix, dt, 0, m, C, K)
    return C, K


def _with_retries(cfg: JKOConfig, with_duals: bool, status, run) -> None:
    """Call ``run(st, tok)`` on the path tokens of ``cfg``, then again for the items that ask for a retry.

    ``status`` (int32, one entry per item) holds 0 for the items to run; ``run`` runs the items whose entry
    of its ``st`` is 0 and writes their statuses there. An item answering ``RETRY_F64`` / ``RETRY_FALLBACK``
    is rerun from scratch (alone with the others of its kind; the rest are masked as done) on the
    specialisation with that token added, so results are those of the all-paths kernel.
    """
    pending = [(None, False, False)]  # (items to run or None = all, f64, fallback)
    while pending:
        todo, f64, fallback = pending.pop()
        st_run = status if todo is None else np.where(todo, 0, 1).astype(np.int32)
        run(st_run, tuple(_path_tokens(cfg, with_duals, f64, fallback)))  # a plain tuple: kernels pass it on as *tok
        if (st_run == _k.NO_ENTRY).any():  # pragma: no cover - _flow_entry typed the flow otherwise than the kernel
            raise RuntimeError("the JKO flow's entry is not of the argument types the batch kernel passes")
        if todo is not None:
            status[todo] = st_run[todo]
        for st in (_k.RETRY_F64, _k.RETRY_FALLBACK, _k.MISSING_PATH):
            sel = status == st
            if todo is not None:
                sel &= todo
            if sel.any():
                nf64, nfb = _retry_tokens(st, cfg, with_duals, f64, fallback)
                status[sel] = 0
                pending.append((sel, nf64, nfb))


def _flow_entry(p0, E, prm, res, tok) -> tuple[int, int]:
    """Return the ``native_entry`` of the ``jko_flow`` a batch kernel calls on ``(p0, E, C, C, K, prm, res, *tok)``.

    ``p0``, ``E``: the arrays the kernel slices (a 1-d slice keeps its array's type); C and K float64
    C blocks; ``res`` a ``FlowOut`` of the types the kernel passes; ``tok`` the seven path tokens.
    """
    return native_entry(_k.jko_flow, (p0, E, _BLOCK, _BLOCK, _BLOCK, prm, res, *tok))


# values of the types of new float64 arrays: a flow's C and K blocks, a FlowOut of the kernel's own arrays
_BLOCK = np.empty((1, 1))
_NEW_OUT = _k.FlowOut(np.empty(1), np.empty(1), np.empty(1), np.empty(1), np.zeros(2, np.int64))


def _rerank_pools(E, P0, off, rows, cfg: JKOConfig, with_duals: bool, out, n_threads: int | None) -> None:
    """Run ``rerank_pools`` on ``n_threads`` threads with the path tokens of ``cfg``; rerun those asking for a retry."""
    prm = cfg._params(with_duals)

    def run(st, tok):
        batch = out._replace(status=st)
        flow = (0, 0)  # no pool: the flow is never called
        if out.diag.shape[0]:  # slices of the outputs and a row of diag
            res = _k.FlowOut(batch.p_out, batch.p_out, batch.f_out, batch.g_out, batch.diag[0])
            flow = _flow_entry(P0, E, prm, res, tok)
        over_ranges(_k.rerank_pools, off.shape[0] - 1, n_threads, E, P0, off, rows, prm, batch, st, tok, flow)

    _with_retries(cfg, with_duals, out.status, run)


@dataclass
class RerankResult:
    """Output of :func:`rerank_batch` (ragged, aligned with the flat candidate order).

    Attributes
    ----------
    p : ndarray float64 (n_total,)      final distributions, query q in ``p[offsets[q]:offsets[q+1]]``
                                         (NaN for queries with a non-zero status)
    offsets : ndarray int64 (n_queries+1,)
    status : ndarray int32 (n_queries,)  0 = ok; see ``jkofast._status``
    errors : dict[int, str]               query index -> message for rejected/failed queries
    f, g : ndarray float64 or None       dual potentials (``return_duals=True``; NaN for failed queries)
    unconverged : ndarray int64 (n_queries, 2) or None
                                         per query, the inner steps whose Sinkhorn (column 0) / implicit-
                                         gradient CG (column 1) stopped at ``sinkhorn_max_iter`` /
                                         ``cg_max_iter`` above tolerance (a ``ConvergenceWarning`` says
                                         so); always 0 for ``grad="unrolled"``, whose fixed iteration
                                         count is the published definition
    grad_path : str                      the path that ran the transport term: ``"implicit"``,
                                         ``"unrolled"``, ``"entropic"`` or ``"none"`` (no transport term)
    """

    p: np.ndarray
    offsets: np.ndarray
    status: np.ndarray
    errors: dict = field(default_factory=dict)
    f: np.ndarray | None = None
    g: np.ndarray | None = None
    unconverged: np.ndarray | None = None
    grad_path: str = ""

    def _query(self, q) -> int:
        n = self.offsets.shape[0] - 1
        if isinstance(q, bool) or not isinstance(q, numbers.Integral):
            raise TypeError(f"q must be an integer query index, got {type(q).__name__}")
        if not 0 <= q < n:
            raise QueryIndexError(f"q must be a query index in [0, {n}), got {q}")
        return int(q)

    def pool(self, q: int) -> np.ndarray:
        """``p`` of query ``q`` (all NaN when the query failed; see ``status``/``errors``)."""
        q = self._query(q)
        return self.p[self.offsets[q] : self.offsets[q + 1]]

    def topk(self, q: int, k: int) -> np.ndarray:
        """Positions (within the pool) of the k largest ``p`` of query ``q`` (ties -> lowest index).

        Raises ``ValueError`` naming the query when it failed (non-zero ``status``).
        """
        q = self._query(q)
        if self.status[q] != 0:
            raise ValueError(f"query {q} has no result (status {int(self.status[q])}: {self.errors.get(q, 'failed')})")
        return topk(self.pool(q), k)[0]


def _batch_p0(p0, E: np.ndarray, off: np.ndarray, tau0: float, status: np.ndarray, reject) -> np.ndarray:
    """Return the flat initial distributions of ``rerank_batch``.

    ``softmax(-E/τ0)`` per query when ``p0`` is None, else ``p0`` renormalised per query;
    bad queries are passed to ``reject``.
    """
    nq = off.shape[0] - 1
    if p0 is None:
        P0 = np.zeros(E.shape[0])
        for q in range(nq):
            if status[q] == 0:
                P0[off[q] : off[q + 1]] = initial_distribution(E[off[q] : off[q + 1]], tau0)
        return P0
    P0 = as_float_array(p0, "p0", dtype=np.float64, ndim=1, allow_empty=True, finite=False, copy=True)
    check_same_length("p0", P0, "energy", E)
    reject(segment_any(~np.isfinite(P0), off), _status.BAD_INPUT, "p0 contains NaN or inf")
    reject(segment_any(P0 < 0, off), _status.BAD_INPUT, "p0 has negative entries")
    for q in range(nq):
        if status[q] == 0:
            seg = P0[off[q] : off[q + 1]]
            if not seg.sum() > 0:
                reject(np.arange(nq) == q, _status.BAD_INPUT, "p0 has zero total mass")
            else:
                seg[:] = normalise_mass(seg, "p0")
    return P0


def _user_blocks(blocks, off: np.ndarray, name: str, reject, *, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(flat, boff)``: the float64 blocks of ``blocks``, row-major, pool ``q`` at ``boff[q]``.

    ``blocks``: a sequence of one M_q x M_q array per pool, or the flat concatenation. A block of
    the wrong shape, with NaN/inf or (``symmetric``) not symmetric rejects its pool; kernel blocks
    (``symmetric=False``) are symmetrised ``(K + Kᵀ)/2`` as ``run_jko`` does.
    """
    sizes = np.diff(off)
    nq = sizes.shape[0]
    boff = np.zeros(nq + 1, np.int64)
    np.cumsum(sizes * sizes, out=boff[1:])
    flat = np.zeros(int(boff[-1]))
    if isinstance(blocks, np.ndarray) and blocks.ndim == 1:
        arr = as_float_array(blocks, name, dtype=np.float64, ndim=1, allow_empty=True, finite=False)
        if arr.shape[0] != boff[-1]:
            raise ValueError(
                f"{name} (flat) must hold one M x M block per pool ({int(boff[-1])} values), got {arr.shape[0]}"
            )
        parts = [arr[boff[q] : boff[q + 1]].reshape(sizes[q], sizes[q]) for q in range(nq)]
    elif isinstance(blocks, (list, tuple)):
        if len(blocks) != nq:
            raise ValueError(f"{name} must hold one block per pool ({nq}), got {len(blocks)}")
        parts = list(blocks)
    else:
        raise TypeError(f"{name} must be a list of M x M arrays (one per pool) or a flat 1-D array")
    for q, blk in enumerate(parts):
        b = np.asarray(blk)
        if b.dtype.kind not in "fiu" or b.dtype == np.bool_:
            raise TypeError(f"{name}[{q}] must be a real array, got dtype {b.dtype}")
        m = int(sizes[q])
        if b.shape != (m, m):
            reject(np.arange(nq) == q, _status.BAD_INPUT, f"{name}[{q}] must be square ({m}, {m}), got {b.shape}")
            continue
        b = b.astype(np.float64)
        if not np.isfinite(b).all():
            reject(np.arange(nq) == q, _status.BAD_INPUT, f"{name}[{q}] contains NaN or inf")
            continue
        if symmetric:
            scale = max(1.0, float(np.abs(b).max(initial=0.0)))
            if not np.allclose(b, b.T, rtol=0.0, atol=1e-5 * scale):
                reject(np.arange(nq) == q, _status.BAD_INPUT, f"{name}[{q}] is not symmetric (a ground cost)")
                continue
        else:
            b = 0.5 * (b + b.T)
        flat[boff[q] : boff[q + 1]] = b.ravel()
    return flat, boff


def _projection(projection, d: int) -> np.ndarray:
    """Return the validated float64 projection ``W`` (r x d) of the cost rows."""
    W = as_float_array(projection, "projection", dtype=np.float64, ndim=2)
    if W.shape[1] != d or W.shape[0] < 1:
        raise ValueError(f"projection must have shape (r, {d}) for {d}-dimensional embeddings, got {W.shape}")
    return np.ascontiguousarray(W)


def _pool_rows(embeddings, csr, off: np.ndarray, normalise: bool, reject, custom=None) -> _geo.PoolRows:
    """Return the kernels' ``PoolRows`` of ``rerank_batch`` (dense or CSR rows, custom geometry).

    ``custom``: ``(projection, cost_blocks, kernel_blocks)`` or None. Queries with NaN/inf rows
    or bad blocks are passed to ``reject``.
    """
    n = int(off[-1])
    projection, cost_blocks, kernel_blocks = custom or (None, None, None)
    boff = np.zeros(1, np.int64)
    cblk = kblk = np.empty(0)
    if cost_blocks is not None:
        cblk, boff = _user_blocks(cost_blocks, off, "cost_blocks", reject, symmetric=True)
    if kernel_blocks is not None:
        kblk, boff = _user_blocks(kernel_blocks, off, "kernel_blocks", reject, symmetric=False)
    no_w = np.empty((0, 0))
    if embeddings is not None:
        Z = as_float_array(embeddings, "embeddings", ndim=2, allow_empty=True, finite=False)
        if not Z.flags.writeable:
            Z = Z.copy()
        if Z.shape[0] != n:
            raise ValueError(f"embeddings must have one row per candidate ({n}), got {Z.shape[0]}")
        W = no_w if projection is None else _projection(projection, Z.shape[1])
        reject(segment_any(~np.isfinite(Z).all(axis=1), off), _status.BAD_INPUT, "embeddings contain NaN or inf")
        Z = _checked_rows(Z, normalise)
        return _geo.PoolRows(
            True, Z, normalise, np.zeros(1, np.int64), np.empty(0, np.int64), np.empty(0), W, cblk, kblk, boff
        )
    if projection is not None:
        raise ValueError("projection needs dense embeddings (it projects the embedding rows)")
    # the unused Z is float32, the dtype of the main job's dense rows: CSR rows and user blocks
    # then share that rerank_pools specialisation (one compile less, ~6 s) instead of their own
    no_z = np.empty((0, 0), np.float32)
    if csr is None:  # both blocks given: no rows needed
        return _geo.PoolRows(
            True,
            no_z,
            True,
            np.zeros(1, np.int64),
            np.empty(0, np.int64),
            np.empty(0),
            no_w,
            cblk,
            kblk,
            boff,
        )
    ipt, ix, dt, shape = as_csr(csr, "csr", dtype=np.float64)
    if shape[0] != n:
        raise ValueError(f"csr must have one row per candidate ({n}), got {shape[0]}")
    rows_bad = np.zeros(n, bool)
    if dt.size:
        nf = ~np.isfinite(dt)
        if nf.any():
            rows_bad[np.repeat(np.arange(n), np.diff(ipt))[nf]] = True
    reject(segment_any(rows_bad, off), _status.BAD_INPUT, "csr rows contain NaN or inf")
    return _geo.PoolRows(False, no_z, True, ipt, ix, rescale_rows_csr(ipt, dt), no_w, cblk, kblk, boff)


def rerank_batch(
    energy,
    p0,
    offsets,
    *,
    embeddings=None,
    csr=None,
    config="tuned",
    grad: str | None = None,
    return_duals: bool = False,
    n_threads: int | None = None,
    normalise: bool = True,
    warn_unconverged: bool = True,
    projection=None,
    cost_blocks=None,
    kernel_blocks=None,
) -> RerankResult:
    """Rerank many candidate pools (ragged: flat arrays + offsets) in parallel.

    Query ``q`` owns the flat range ``offsets[q]:offsets[q+1]``. Its geometry is built
    inside the kernel, per query, from the candidate rows: ``S = clip(cos, -1, 1)``,
    ``C = (1 - S)^2``, ``K = max(0, S)``. Queries run in parallel (ranges of queries on
    ``n_threads`` threads); each is computed serially, so results are identical for any thread count.

    Parameters
    ----------
    energy : array_like, float (n_total,)
        Energies E (lower = more relevant).
    p0 : array_like (n_total,) or None
        Initial distributions (renormalised per query); None = ``softmax(-E/τ0)`` per query.
    offsets : array_like, int (n_queries + 1,)
    embeddings : array_like (n_total, d), optional
        Dense rows, one per flat candidate (float32 or float64).
    csr : scipy.sparse matrix (n_total, V), optional
        Sparse rows (e.g. TF-IDF), one per candidate; sparse cosine geometry.
    config : JKOConfig or str
        Operating point name or config (default ``"tuned"``). A name runs on the batch gradient
        path, ``grad="implicit"``; a config keeps its own ``grad`` (:func:`jkofast.jko.config.batch_config`).
    grad : {"implicit", "unrolled"}, optional
        Overrides the gradient path (``"unrolled"``: the published solver's path, the default of
        :func:`run_jko` and :mod:`jkofast.compat`).
    return_duals : bool
        Also return the dual read-out ``f, g`` (``run_jko_with_duals``).
    n_threads : int or None
        Numba threads for the batch.
    normalise : bool
        Cosine (True) or raw dot products of the dense rows (False, as the published code
        does for L2-normalised embeddings).
    warn_unconverged : bool
        Emit one ``ConvergenceWarning`` when inner steps of the converged-plan paths stopped
        at ``sinkhorn_max_iter`` / ``cg_max_iter`` above tolerance (the counts are in
        ``RerankResult.unconverged`` either way; the rerank CLI sums them over the run).
    projection : array_like (r, d), optional
        Learned low-rank metric (NM-JKO, SPEC A.6.2): the cost is built from the projected
        rows, ``C^W = (1 - clip(cos(W z_i, W z_j)))^2`` (projected norms floored at 1e-8);
        K, the energy and p0 stay on the raw rows. Dense ``embeddings`` only.
    cost_blocks, kernel_blocks : list of (M_q, M_q) arrays or flat 1-D array, optional
        User geometry, one block per pool (e.g. the ablations' random / identity cost): a
        cost block replaces C (it must be symmetric and finite), a kernel block replaces K
        (symmetrised). A geometry not given comes from ``embeddings``/``csr``; with both
        blocks neither is needed. A bad block rejects only its pool.

    Returns
    -------
    RerankResult
        Bad queries (NaN/inf energy or p0, ``|energy| > 1e150``, negative or zero-mass p0, empty pool, NaN
        geometry rows) get a non-zero ``status`` and an ``errors`` entry; the others return.

    Raises
    ------
    ValueError
        Inconsistent lengths, bad offsets, both/neither of ``embeddings``/``csr``.
    """
    cfg = batch_config(config, grad)
    both_blocks = cost_blocks is not None and kernel_blocks is not None
    if embeddings is not None and csr is not None:
        raise ValueError("pass exactly one of embeddings or csr")
    if embeddings is None and csr is None and not both_blocks:
        raise ValueError("pass exactly one of embeddings or csr (or both cost_blocks and kernel_blocks)")
    E = as_float_array(energy, "energy", dtype=np.float64, ndim=1, allow_empty=True, finite=False)
    n = E.shape[0]
    off = check_offsets(offsets, n)
    nq = off.shape[0] - 1
    rj = QueryRejects(nq)
    status, errors, reject = rj.status, rj.errors, rj.reject

    sizes = np.diff(off)
    reject(sizes == 0, _status.EMPTY, "empty pool")
    reject(segment_any(~np.isfinite(E), off), _status.BAD_INPUT, "energy contains NaN or inf")
    with np.errstate(invalid="ignore"):
        reject(segment_any(np.abs(E) > E_MAX, off), _status.BAD_INPUT, f"energy magnitude exceeds {E_MAX:.0e}")
    P0 = _batch_p0(p0, E, off, cfg.tau0, status, reject)
    rows = _pool_rows(embeddings, csr, off, bool(normalise), reject, (projection, cost_blocks, kernel_blocks))
    p = np.zeros(n)
    f = np.zeros(n)
    g = np.zeros(n)
    diag = np.zeros((nq, 2), np.int64)
    _rerank_pools(E, P0, off, rows, cfg, return_duals, _k.BatchOut(p, f, g, status, diag), n_threads)
    for q in np.flatnonzero(status != 0):
        if int(q) not in errors:
            errors[int(q)] = _status.MESSAGES.get(int(status[q]), f"status {status[q]}")
        p[off[q] : off[q + 1]] = np.nan
        f[off[q] : off[q + 1]] = np.nan  # not zeros: they would read as valid duals
        g[off[q] : off[q + 1]] = np.nan
        diag[q] = 0
    if warn_unconverged:
        _warn_unconverged(diag, cfg, "rerank_batch")
    return RerankResult(
        p=p,
        offsets=off,
        status=status,
        errors=errors,
        f=f if return_duals else None,
        g=g if return_duals else None,
        unconverged=diag,
        grad_path=gradient_path(cfg),
    )


@register_warmup("jko")
def _warmup() -> None:
    """Compile the main job's rerank paths: tuned implicit (float32 operators) and KL on float32 rows; CSR rows."""
    import scipy.sparse as sp

    Z = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    E = np.array([-1.0, -0.5, 0.0])
    p0 = np.full(3, 1 / 3)
    off = np.array([0, 3], np.int64)
    tiny = operating_point("tuned", grad="implicit", T=1, inner_steps=2)
    for mode in ("wasserstein", "kl"):
        rerank_batch(E, p0, off, embeddings=Z.astype(np.float32), config=tiny.replace(mode=mode), n_threads=1)
    rerank_batch(E, p0, off, csr=sp.csr_matrix(Z), config=tiny, n_threads=1)


def _tiny_flow_args(cfg: JKOConfig, with_duals: bool = False) -> tuple:
    """Return ``jko_flow``'s arguments before its path tokens, for a two-item pool: p0, E, C, C_T, K, params, out.

    Of the types ``rerank_pools`` passes (float64 pool slices and C, K blocks, a ``FlowOut`` of
    slices): the warm-ups of the batch flow and of the MR/SAM stage flow.
    """
    C = np.array([[0.0, 0.5], [0.5, 0.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0]])
    out = _k.FlowOut(np.empty(2), np.empty(cfg.T * cfg.inner_steps), np.empty(2), np.empty(2), np.zeros(2, np.int64))
    return np.full(2, 0.5), np.array([-1.0, 0.0]), C, C, K, cfg._params(with_duals), out


def _warm_flow(cfg: JKOConfig, with_duals: bool) -> None:
    """Compile (or load) the ``jko_flow`` that ``rerank_pools`` calls for ``cfg``: its first attempt's path tokens.

    With the tokens of :func:`_with_retries`' first call. The flow (the solver and transport
    kernels) is most of a batch rerank's compile: a compile-ahead child compiles it while the
    command's own process compiles the rest, ``rerank_pools`` then loads it.
    """
    _k.jko_flow(*_tiny_flow_args(cfg, with_duals), *_path_tokens(cfg, with_duals))


@register_warmup("jko.flow")
def _warmup_flow() -> None:
    """Compile the flow of the "jko" entry (the main job's rerank paths: implicit gradient, float32 operators)."""
    _warm_flow(operating_point("tuned", grad="implicit", T=1, inner_steps=2), False)


@register_warmup("jko.rows")
def _warmup_rows() -> None:
    """Compile the pool geometry ``rerank_pools`` computes from its rows (``cost_kernel``: dense, CSR, projected).

    One ``PoolRows`` type serves dense float32 rows and CSR rows, and the call compiles every
    callee, as ``rerank_pools``' call does: a compile-ahead child compiles it while the command's
    own process compiles the flow.
    """
    off = np.array([0, 3], np.int64)
    rows = _pool_rows(np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], np.float32), None, off, True, lambda *a: None)
    _geo.cost_kernel(rows, 0, off[0], off[1], np.empty((3, 3)), np.empty((3, 3)))


def _rows_ahead():
    """Start a child compiling the energy and the pool geometry (``jko.rows``) when the cache lacks them (or None).

    ``jkofast rerank`` compiles the flow meanwhile, the longest compile (:func:`_warm_batch`).
    """
    probes = {"energy": (_kb.minmax_segments,), "jko.rows": (_geo.cost_kernel,)}
    return compile_ahead(tuple(probes), probes)


def _warm_batch(child=None) -> None:
    """Compile (or load) the "jko" entry's kernels; with ``child`` (:func:`_rows_ahead`'s) the flow first.

    Then ``rerank_pools``, which loads the geometry kernels the child compiled; a failed child leaves
    them to compile here, as without one.
    """
    if child is not None:
        _warmup_flow()
        child.wait()
    WARMUPS["jko"]()


@register_warmup("jko.flow.duals")
def _warmup_flow_duals() -> None:
    """Compile the flow of ``jkofast study dual-rank`` (contrib, Wasserstein, implicit gradient, duals read out)."""
    _warm_flow(operating_point("contrib", mode="wasserstein", grad="implicit", T=1, inner_steps=2), True)


@register_warmup("jko.paths")
def _warmup_paths() -> None:
    """Compile the single-pool solver on every gradient path (dual read-out too), float64 rows, the drop-in call."""
    import scipy.sparse as sp

    Z = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    C, K = pool_geometry(embeddings=Z)
    pool_geometry(embeddings=Z.astype(np.float32))
    pool_geometry(csr=sp.csr_matrix(Z))
    E = np.array([-1.0, -0.5, 0.0])
    p0 = np.full(3, 1 / 3)
    tiny = dict(T=1, inner_steps=2, sinkhorn_iter=3, sinkhorn_iter_grad=2)
    run_jko(p0, E, C, K, JKOConfig(**tiny))
    for kw in ({}, {"grad": "implicit"}, {"objective": "entropic"}):
        run_jko_with_duals(p0, E, C, K, JKOConfig(**tiny, **kw))
    off = np.array([0, 3], np.int64)
    rerank_batch(E, None, off, embeddings=Z, config=JKOConfig(**tiny), n_threads=1)
