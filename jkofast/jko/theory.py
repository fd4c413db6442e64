"""Building blocks of the theory experiments E1–E4 (SPEC A.7.7), batched over queries.

* :func:`free_energy` / :meth:`TheoryBatch.free_energy` — ``F(p) = <p,E> + λ Σ p log p + ½ρ pᵀKp``
  (no proximal term), p clipped at 1e-30, float64;
* :func:`wc` / :meth:`TheoryBatch.wc` — the theory scripts' transport distance: both
  distributions clipped at 1e-12 (**no renormalisation**), log-domain Sinkhorn ε 0.1, exactly
  80 cold update pairs, ``<Π, C>`` (biased: ``wc(p, p) > 0``);
* :meth:`TheoryBatch.trajectories` — the per-outer-step iterates ``p_0 .. p_T`` of the solver
  (each outer step is one ``T = 1`` step from the previous iterate: fresh Adam state, θ
  restarted at ``log p_t``; ``p_T`` is bit-identical to ``run_jko`` / ``rerank_batch`` with
  ``T`` steps);
* :func:`gibbs_laplacian` and :func:`band_edges` — the normalised Laplacian of the Gibbs
  affinity ``Γ = exp(−C/0.1)`` and its spectral bands;
* :func:`band_direction` — a band-limited, mean-free, unit perturbation of the energy;
* :func:`certified_radius` — the E4 grid rule (an empirical radius: the walk along one direction);
* :func:`provable_radius` — a radius within which the top-k of the exact KL-proximal (or
  proximal-free) flow **provably** cannot change, for every perturbation of the energy, with
  :func:`exact_flow` (that flow, each step solved to its fixed point) and
  :func:`hilbert_distance`; the derivation is in the docs (``docs/evaluators.md``).

A :class:`TheoryBatch` holds the geometry (C, K) of a set of pools once; *items* (an energy
and an initial distribution each) point at a pool, so many perturbed energies of one query
share its geometry and run in one ``prange`` over items.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jkofast import _status
from jkofast._numba import register_warmup
from jkofast._threads import numba_threads, over_ranges
from jkofast._validation import (
    as_float_array,
    check_int,
    check_offsets,
    check_positive,
    normalise_mass,
    rescale_rows_dense,
)
from jkofast.jko.config import JKOConfig, resolve_config
from jkofast.jko.solver import _NEW_OUT, _flow_entry, _with_retries
from jkofast.kernels.jko import theory as _k
from jkofast.selection import topk

__all__ = [
    "RADIUS_GRID",
    "WC_EPS",
    "WC_ITER",
    "RadiusBound",
    "TheoryBatch",
    "band_direction",
    "band_edges",
    "certified_radius",
    "exact_flow",
    "free_energy",
    "gibbs_laplacian",
    "hilbert_distance",
    "provable_radius",
    "topk_preserved",
    "walk_radius",
    "wc",
]

WC_EPS = 0.1
WC_ITER = 80
LAPLACIAN_EPS = 0.1
DEGREE_FLOOR = 1e-12
DIRECTION_FLOOR = 1e-12
RADIUS_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5)


def _flat_items(n_items: int, sizes: np.ndarray, pool_of) -> tuple[np.ndarray, np.ndarray]:
    po = np.asarray(pool_of)
    if po.dtype.kind not in "iu" or po.ndim != 1:
        raise TypeError(f"pool_of must be a 1-D integer array, got dtype {po.dtype} and shape {po.shape}")
    if po.size and (po.min() < 0 or po.max() >= n_items):
        raise ValueError(f"pool_of must index the {n_items} pools, got values in [{po.min()}, {po.max()}]")
    po = po.astype(np.int64)
    ioff = np.zeros(po.shape[0] + 1, np.int64)
    np.cumsum(sizes[po], out=ioff[1:])
    return po, ioff


@dataclass
class TheoryBatch:
    """The geometry of a batch of pools, built once (``prange`` over pools).

    Attributes
    ----------
    offsets : ndarray int64 (n_pools + 1,)
        Pool ``q`` = rows ``offsets[q]:offsets[q+1]`` of the embeddings it was built from.
    C, K : ndarray float64 (Σ M_q²,)
        Row-major blocks ``C = (1 − S)²``, ``K = max(0, S)``, ``S = clip(cos, −1, 1)``; pool ``q``
        at ``boff[q]``.
    boff : ndarray int64 (n_pools + 1,)
    n_threads : int or None
        Numba threads of the batched kernels.
    """

    offsets: np.ndarray
    C: np.ndarray
    K: np.ndarray
    boff: np.ndarray
    n_threads: int | None = None

    @classmethod
    def from_embeddings(cls, Z, offsets, *, n_threads: int | None = None) -> TheoryBatch:
        """Build C, K of every pool from its rows ``Z[offsets[q]:offsets[q+1]]`` (cosine geometry).

        Raises
        ------
        ValueError
            NaN/inf rows, offsets not ending at ``len(Z)``, an empty pool.
        TypeError
            Non-float embeddings.
        """
        Z = as_float_array(Z, "Z", ndim=2)
        if not Z.flags.writeable:
            Z = Z.copy()
        Z = rescale_rows_dense(Z)
        off = check_offsets(offsets, Z.shape[0])
        sizes = np.diff(off)
        if off.shape[0] < 2 or np.any(sizes == 0):
            raise ValueError("offsets must describe at least one pool and no empty pool")
        boff = np.zeros(sizes.shape[0] + 1, np.int64)
        np.cumsum(sizes * sizes, out=boff[1:])
        C = np.empty(int(boff[-1]))
        K = np.empty(int(boff[-1]))
        with numba_threads(n_threads):
            _k.pool_blocks(Z, off, boff, C, K)
        return cls(off, C, K, boff, n_threads)

    @property
    def n_pools(self) -> int:
        """Number of pools."""
        return self.offsets.shape[0] - 1

    @property
    def sizes(self) -> np.ndarray:
        """Pool sizes M_q."""
        return np.diff(self.offsets)

    def cost(self, q: int) -> np.ndarray:
        """C of pool ``q`` (an M x M view)."""
        m = int(self.sizes[q])
        return self.C[self.boff[q] : self.boff[q + 1]].reshape(m, m)

    def kernel(self, q: int) -> np.ndarray:
        """K of pool ``q`` (an M x M view)."""
        m = int(self.sizes[q])
        return self.K[self.boff[q] : self.boff[q + 1]].reshape(m, m)

    def items(self, pool_of) -> np.ndarray:
        """Offsets (n_items + 1,) of items that use the pools ``pool_of`` (item sizes = their pools')."""
        return _flat_items(self.n_pools, self.sizes, pool_of)[1]

    def _states(self, X, name: str, n: int) -> tuple[np.ndarray, int]:
        X = as_float_array(X, name, dtype=np.float64, finite=False)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != n:
            raise ValueError(f"{name} must have shape (n_states, {n}) or ({n},), got {X.shape}")
        return np.ascontiguousarray(X), X.shape[0]

    def trajectories(self, E, p0, pool_of, config, T: int) -> np.ndarray:
        """Per-outer-step iterates of every item: ``P[t] = p_t``, t = 0 .. T (flat per item).

        Parameters
        ----------
        E, p0 : array_like (n,)
            Energies and initial distributions of the items, flat (``items(pool_of)``);
            each ``p0`` segment is renormalised once, as ``run_jko`` does.
        pool_of : array_like of int (n_items,)
        config : JKOConfig or str
            Solver configuration (its ``T`` is ignored: ``T`` single steps are run).
        T : int
            Number of outer steps (>= 0).

        Returns
        -------
        ndarray float64 (T + 1, n)

        Raises
        ------
        ValueError
            Bad shapes, NaN/inf, a p0 segment with zero mass.
        RuntimeError
            A flow produced NaN/inf (names the item).
        """
        cfg = resolve_config(config)
        T = check_int(T, "T", min_value=0)
        po, ioff = _flat_items(self.n_pools, self.sizes, pool_of)
        n = int(ioff[-1])
        E = as_float_array(E, "E", dtype=np.float64, ndim=1, allow_empty=True)
        P0 = as_float_array(p0, "p0", dtype=np.float64, ndim=1, allow_empty=True, copy=True)
        for name, x in (("E", E), ("p0", P0)):
            if x.shape[0] != n:
                raise ValueError(f"{name} must have {n} entries (the items' pools), got {x.shape[0]}")
        if np.any(P0 < 0):
            raise ValueError("p0 must be non-negative")
        for b in range(po.shape[0]):
            seg = P0[ioff[b] : ioff[b + 1]]
            seg[:] = normalise_mass(seg, f"p0 of item {b}")
        P = np.zeros((T + 1) * n)
        status = self._run_items(E, P0, ioff, po, cfg, T, P)
        bad = np.flatnonzero(status)
        if bad.size:
            raise RuntimeError(f"trajectories: item {int(bad[0])} failed ({_status.MESSAGES.get(int(status[bad[0]]))})")
        return P.reshape(T + 1, n)

    def _run_items(self, E, P0, ioff, po, cfg: JKOConfig, T: int, P) -> np.ndarray:
        """Run ``jko_items`` on the path tokens of ``cfg``, rerunning the items that ask for a retry.

        The flow compiles only the transport kernels of the configured gradient path (the
        unrolled path on float64 operators); an item answering ``RETRY_F64`` / ``RETRY_FALLBACK``
        is rerun from its first state with that token added, so every trajectory is the one
        the all-paths kernel ``jko_query`` computes. Returns the per-item status (int32).
        """
        prm = cfg.replace(T=1)._params()
        status = np.zeros(po.shape[0], np.int32)

        def run(st, tok):
            flow = _flow_entry(P, E, prm, _NEW_OUT._replace(p_out=P), tok)  # slices of P and E, the rest new
            args = (E, P0, ioff, po, self.boff, self.C, self.K, prm, T, P, st, tok, flow)
            over_ranges(_k.jko_items, po.shape[0], self.n_threads, *args)

        _with_retries(cfg.replace(dtype="float64"), False, status, run)
        return status

    def free_energy(self, P, E, pool_of, lam: float, rho: float) -> np.ndarray:
        """``F`` of every state of every item: ``out[s, b]`` (float64, p clipped at 1e-30).

        ``P`` (n_states, n) or (n,), ``E`` (n,).
        """
        po, ioff = _flat_items(self.n_pools, self.sizes, pool_of)
        n = int(ioff[-1])
        P, ns = self._states(P, "P", n)
        E = as_float_array(E, "E", dtype=np.float64, ndim=1, allow_empty=True)
        if E.shape[0] != n:
            raise ValueError(f"E must have {n} entries, got {E.shape[0]}")
        lam = check_positive(lam, "lam", strict=False)
        rho = check_positive(rho, "rho", strict=False)
        out = np.empty(ns * po.shape[0])
        with numba_threads(self.n_threads):
            _k.free_energy_items(P.ravel(), ns, E, ioff, po, self.boff, self.K, float(lam), float(rho), out)
        return out.reshape(ns, po.shape[0])

    def wc(self, P, Q, pool_of, eps: float = WC_EPS, n_iter: int = WC_ITER) -> np.ndarray:
        """``wc(P[s], Q[s])`` of every item: ``out[s, b]`` (float64; see :func:`wc`)."""
        po, ioff = _flat_items(self.n_pools, self.sizes, pool_of)
        n = int(ioff[-1])
        P, ns = self._states(P, "P", n)
        Q, nq = self._states(Q, "Q", n)
        if nq != ns:
            raise ValueError(f"P and Q must hold the same number of states, got {ns} and {nq}")
        for name, x in (("P", P), ("Q", Q)):
            if np.isnan(x).any() or np.isposinf(x).any():
                raise ValueError(f"{name} contains NaN or +inf")
        eps = check_positive(eps, "eps")
        n_iter = check_int(n_iter, "n_iter", min_value=1)
        out = np.empty(ns * po.shape[0])
        st = np.zeros(ns * po.shape[0], np.int32)
        with numba_threads(self.n_threads):
            _k.wc_items(P.ravel(), Q.ravel(), ns, ioff, po, self.boff, self.C, float(eps), n_iter, out, st)
        if st.any():
            raise FloatingPointError("wc: the transport cost overflowed (distributions far above mass 1?)")
        return out.reshape(ns, po.shape[0])


def _single(Z_or_C, name):
    X = as_float_array(Z_or_C, name, dtype=np.float64, ndim=2, copy=True)
    if X.shape[0] != X.shape[1]:
        raise ValueError(f"{name} must be square, got {X.shape}")
    return X


def free_energy(p, E, K, lam: float = 0.05, rho: float = 0.05) -> float:
    """``F(p) = <p,E> + λ Σ p log p + ½ρ pᵀKp`` of one distribution (SPEC A.7.7).

    ``p`` is clipped at 1e-30 (not renormalised); float64.

    Examples
    --------
    >>> round(free_energy([0.5, 0.5], [-1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]]), 6)
    -0.522157
    """
    K = _single(K, "K")
    p = as_float_array(p, "p", dtype=np.float64, ndim=1)
    E = as_float_array(E, "E", dtype=np.float64, ndim=1)
    if not p.shape[0] == E.shape[0] == K.shape[0]:
        raise ValueError(f"p, E and K must have matching sizes, got {p.shape[0]}, {E.shape[0]}, {K.shape[0]}")
    m = p.shape[0]
    b = TheoryBatch(np.array([0, m], np.int64), np.zeros(m * m), K.ravel(), np.array([0, m * m], np.int64), 1)
    return float(b.free_energy(p, E, np.zeros(1, np.int64), lam, rho)[0, 0])


def wc(p, q, C, eps: float = WC_EPS, n_iter: int = WC_ITER) -> float:
    """Transport distance of the theory scripts (SPEC A.7.7): biased, unnormalised.

    ``log max(p, 1e-12)`` and ``log max(q, 1e-12)`` as log-marginals (no renormalisation),
    ``n_iter`` cold row-then-column pairs of log-domain Sinkhorn at ``eps``, then
    ``<Π, C>``. ``wc(p, p) > 0`` (the self-distance floor).

    Examples
    --------
    >>> C = [[0.0, 1.0], [1.0, 0.0]]
    >>> round(wc([0.5, 0.5], [0.9, 0.1], C), 6)
    0.4
    """
    C = _single(C, "C")
    m = C.shape[0]
    b = TheoryBatch(np.array([0, m], np.int64), C.ravel(), np.zeros(m * m), np.array([0, m * m], np.int64), 1)
    return float(b.wc(p, q, np.zeros(1, np.int64), eps, n_iter)[0, 0])


def gibbs_laplacian(C, eps: float = LAPLACIAN_EPS) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of the normalised Laplacian of the Gibbs affinity (SPEC A.7.7).

    ``Γ = exp(−C/ε)`` (float64) with zero diagonal, degrees ``Σ_j Γ_ij`` floored at 1e-12,
    ``L = I − D^{−1/2} Γ D^{−1/2}``, symmetrised ``(L + Lᵀ)/2``, ``numpy.linalg.eigh``.

    Returns
    -------
    evals : ndarray (M,)
        Ascending eigenvalues (low = smooth / intra-cluster, high = oscillatory / cross-cluster).
    U : ndarray (M, M)
        Orthonormal eigenvectors as columns.
    """
    C = _single(C, "C")
    eps = check_positive(eps, "eps")
    G = np.exp(-C / eps)
    np.fill_diagonal(G, 0.0)
    deg = np.maximum(G.sum(axis=1), DEGREE_FLOOR)
    dinv = 1.0 / np.sqrt(deg)
    L = np.eye(C.shape[0]) - dinv[:, None] * G * dinv[None, :]
    L = 0.5 * (L + L.T)
    return np.linalg.eigh(L)


def band_edges(M: int, n_bands: int = 4) -> np.ndarray:
    """``floor(linspace(0, M, n_bands + 1))``: band b = eigenvector indices ``[edges[b], edges[b+1])``.

    Examples
    --------
    >>> band_edges(200, 4).tolist()
    [0, 50, 100, 150, 200]
    """
    M = check_int(M, "M", min_value=1)
    n_bands = check_int(n_bands, "n_bands", min_value=1)
    return np.floor(np.linspace(0, M, n_bands + 1)).astype(np.int64)


def band_direction(U, lo: int, hi: int, rng: np.random.Generator) -> np.ndarray:
    """Return a perturbation direction from the eigenvectors ``U[:, lo:hi]`` (SPEC A.7.7).

    ``v = U[:, lo:hi] · c`` with ``c = rng.standard_normal(hi − lo)``; the mean is subtracted
    and v scaled to unit L2 norm (the zero vector when its norm is below 1e-12); float32.
    Consumes exactly ``hi − lo`` normals of ``rng``.
    """
    U = as_float_array(U, "U", dtype=np.float64, ndim=2)
    m = U.shape[1]
    lo = check_int(lo, "lo", min_value=0)
    hi = check_int(hi, "hi", min_value=lo + 1)
    if hi > m:
        raise ValueError(f"hi must be <= {m} (number of eigenvectors), got {hi}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    c = rng.standard_normal(hi - lo)
    v = U[:, lo:hi] @ c
    v = v - v.mean()
    nrm = float(np.linalg.norm(v))
    if nrm < DIRECTION_FLOOR:
        return np.zeros(U.shape[0], np.float32)
    return (v / nrm).astype(np.float32)


def topk_preserved(p, q, k: int = 10) -> float:
    """``#(top-k(p) ∩ top-k(q)) / k`` (top-k ties -> lowest index)."""
    k = check_int(k, "k", min_value=1)
    a = set(topk(np.asarray(p, np.float64), k)[0].tolist())
    b = set(topk(np.asarray(q, np.float64), k)[0].tolist())
    return len(a & b) / k


def certified_radius(preserved, grid=RADIUS_GRID) -> float:
    """E4's radius: the last grid value before the first ``s`` whose top-k is not fully preserved.

    Parameters
    ----------
    preserved : sequence of float
        Preservation (fraction of the top-k kept) at each grid value, in grid order; the
        entry at ``s = 0`` is 1 by definition (the published code sets it without computing).
    grid : sequence of float
        Ascending grid starting at 0 (default ``RADIUS_GRID``).

    Returns
    -------
    float
        0 if the set breaks at the first positive s, ``grid[-1]`` if it never breaks.

    Examples
    --------
    >>> certified_radius([1, 1, 1, 0.9, 1, 1, 1, 1])
    0.2
    >>> certified_radius([1] * 8)
    1.5
    """
    g = [float(x) for x in grid]
    kept = [float(x) for x in preserved]
    if len(kept) != len(g):
        raise ValueError(f"preserved must have one entry per grid value ({len(g)}), got {len(kept)}")
    if not g or g[0] != 0.0 or any(g[i + 1] <= g[i] for i in range(len(g) - 1)):
        raise ValueError("grid must be ascending and start at 0")
    for i in range(1, len(g)):
        if kept[i] < 1.0:
            return g[i - 1]
    return g[-1]


def hilbert_distance(p, q) -> float:
    """Hilbert's projective distance ``max(log p − log q) − min(log p − log q)`` of two positive vectors.

    It bounds every change of order: for any i, j, ``log(p_i/p_j)`` and ``log(q_i/q_j)`` differ by at
    most this distance (and ``‖p − q‖₁ ≤ 2 tanh(d/4)`` for two distributions).

    Raises
    ------
    ValueError
        Shapes differ, or an entry is not positive and finite.

    Examples
    --------
    >>> round(hilbert_distance([0.5, 0.25, 0.25], [0.25, 0.25, 0.5]), 6)  # log 2 - log(1/2)
    1.386294
    """
    a = as_float_array(p, "p", dtype=np.float64, ndim=1)
    b = as_float_array(q, "q", dtype=np.float64, ndim=1)
    if a.shape != b.shape:
        raise ValueError(f"p and q must have the same shape, got {a.shape} and {b.shape}")
    if not (np.all(a > 0) and np.all(b > 0)):
        raise ValueError("p and q must be positive (the Hilbert distance needs logarithms)")
    d = np.log(a) - np.log(b)
    return float(d.max() - d.min()) if d.size else 0.0


def _prox_weight(cfg: JKOConfig) -> float:
    """Weight ``w`` of ``KL(p‖q)`` in the step (0 without proximal term); a ValueError where no certificate holds."""
    if cfg.mode == "noproximal":
        return 0.0
    if cfg.mode == "kl" or (cfg.mode == "bregman" and cfg.alpha_prox <= 0.0):
        return 1.0 / (2.0 * cfg.h)
    raise ValueError(
        f"mode {cfg.mode!r}{'' if cfg.mode != 'bregman' else f' (alpha_prox {cfg.alpha_prox})'}: no provable "
        "radius: the transport-cost proximal term <Pi, C> is not convex in p (W(p, p) > 0 and its gradient at "
        "p = q is not 0), so the step map has no strong-convexity certificate; use mode 'kl' or 'noproximal'"
    )


def _kappa(Ks: np.ndarray) -> float:
    """``max_{i,l} (max_j − min_j)(Ks_ij − Ks_lj) / 2``: ``osc(Ks u) ≤ κ ‖u‖₁`` for every u with Σu = 0."""
    best = 0.0
    for i in range(Ks.shape[0]):  # O(M³) in M row blocks: 8e6 operations at M = 200
        D = Ks[i][None, :] - Ks
        best = max(best, float((D.max(axis=1) - D.min(axis=1)).max()))
    return 0.5 * best


def _flow_inputs(E, p0, K, cfg):
    """Return the checked float64 ``E, p0, Ks = (K + Kᵀ)/2`` and the config."""
    cfg = resolve_config(cfg)
    E = as_float_array(E, "E", dtype=np.float64, ndim=1)
    m = E.shape[0]
    if m < 2:
        raise ValueError(f"E must have at least 2 entries, got {m}")
    p0 = as_float_array(p0, "p0", dtype=np.float64, ndim=1)
    if p0.shape != (m,):
        raise ValueError(f"p0 must have shape ({m},) like E, got {p0.shape}")
    if np.any(p0 < 0):
        raise ValueError("p0 must be non-negative")
    p0 = normalise_mass(p0, "p0")
    K = as_float_array(K, "K", dtype=np.float64, ndim=2)
    if K.shape != (m, m):
        raise ValueError(f"K must have shape ({m}, {m}), got {K.shape}")
    return E, p0, 0.5 * (K + K.T), cfg


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _exact_steps(E, p0, Ks, lam, rho, w, T, tol, max_iter) -> np.ndarray:
    """Run T exact steps ``β log p = −E − ρ Ks p + w log q + c`` (β = λ + w), each by fixed-point iteration."""
    beta = lam + w
    q = p0
    for _ in range(T):
        lq = np.log(np.maximum(q, 1e-30))
        p = q if q.min() > 0 else _softmax(-E / beta)
        for _ in range(max_iter):
            new = _softmax((-E - rho * (Ks @ p) + w * lq) / beta)
            d = np.log(new) - np.log(p)
            p = new
            if d.max() - d.min() <= tol:
                break
        else:
            raise RuntimeError(f"the exact JKO step did not reach Hilbert change {tol} in {max_iter} sweeps")
        q = p
    return q


def exact_flow(E, p0, K, cfg=None, *, tol: float = 1e-13, max_iter: int = 10_000) -> np.ndarray:
    """Return ``p_T`` of the exact KL-proximal (or proximal-free) flow: every step solved to its fixed point.

    Step ``t``: ``p_{t+1} = argmin_p <p,E> + λ Σ p log p + ½ρ pᵀKp + w·KL(p‖p_t)`` (``w = 1/(2h)``
    for ``kl``, 0 for ``noproximal``), whose stationarity condition is
    ``(λ + w) log p = −E − ρ K̃ p + w log p_t + const`` (``K̃ = (K + Kᵀ)/2``); the map
    ``p ↦ softmax((−E − ρ K̃ p + w log p_t)/(λ + w))`` contracts Hilbert's distance by
    ``ρκ/(2(λ + w)) < 1`` (κ as in :func:`provable_radius`), so the iteration converges to the unique
    minimiser. The solver (:func:`jkofast.jko.solver.run_jko`) approximates this flow with a fixed
    number of Adam steps; C plays no part in these modes.

    Parameters
    ----------
    E, p0 : array (M,)
    K : array (M, M)
    cfg : JKOConfig or operating-point name, optional
        ``mode`` ``kl``, ``noproximal`` or ``bregman`` with ``alpha_prox = 0``; ``lam``, ``rho``, ``h``, ``T``.
    tol : float
        Stop a step's iteration when its Hilbert change is at most ``tol``.

    Raises
    ------
    ValueError
        Bad shapes or values, a transport proximal term, or ``λ + w ≤ ρκ/2`` (no contraction).
    RuntimeError
        A step did not converge in ``max_iter`` sweeps.
    """
    E, p0, Ks, cfg = _flow_inputs(E, p0, K, cfg)
    w = _prox_weight(cfg)
    check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", min_value=1)
    kappa = _kappa(Ks)
    if cfg.lam + w <= cfg.rho * kappa / 2:
        raise ValueError(
            f"lam + w = {cfg.lam + w:g} <= rho*kappa/2 = {cfg.rho * kappa / 2:g}: the step is not a contraction"
        )
    return _exact_steps(E, p0, Ks, cfg.lam, cfg.rho, w, int(cfg.T), tol, max_iter)


@dataclass(frozen=True)
class RadiusBound:
    """A provable top-k radius of the exact flow (:func:`provable_radius`).

    Attributes
    ----------
    radius : float
        Euclidean radius: every δ with ``‖δ‖₂ < radius`` leaves ``top-k(p_T(E + δ))`` equal to ``topk``.
    radius_osc : float
        The same in the oscillation ``max δ − min δ`` (the exact condition; ``radius = radius_osc/√2``).
    lipschitz : float
        ``L``: ``d_H(p_T(E), p_T(E + δ)) ≤ L · osc(δ)`` (Hilbert's distance, :func:`hilbert_distance`).
    margin : float
        ``log p_(k) − log p_(k+1)`` of ``p`` (0: a tie at the cut, radius 0).
    kappa : float
        ``κ`` of the redundancy kernel.
    p : ndarray float64 (M,)
        ``p_T(E)`` of the exact flow.
    topk : ndarray int64 (k,)
        Its top-k, best first (ties: lowest index).
    """

    radius: float
    radius_osc: float
    lipschitz: float
    margin: float
    kappa: float
    p: np.ndarray
    topk: np.ndarray

    def along(self, v) -> float:
        """Return the radius along the direction ``v`` (``radius_osc / osc(v)``).

        Every ``s`` with ``|s| < along(v)`` keeps the top-k of ``E + s·v``; infinite for a constant v,
        which changes no distribution.
        """
        v = as_float_array(v, "v", dtype=np.float64, ndim=1)
        if v.shape != self.p.shape:
            raise ValueError(f"v must have shape {self.p.shape}, got {v.shape}")
        osc = float(v.max() - v.min())
        return float("inf") if osc == 0.0 else self.radius_osc / osc


def provable_radius(E, p0, K, cfg=None, k: int = 10, *, p0_tau: float | None = None) -> RadiusBound:
    r"""Return a radius within which the top-k of the exact flow provably cannot change (:class:`RadiusBound`).

    With ``β = λ + w`` (``w = 1/(2h)`` for ``kl``, 0 for ``noproximal``), ``κ`` the half-range bound of
    ``K̃ = (K + Kᵀ)/2`` (``osc(K̃u) ≤ κ‖u‖₁`` when Σu = 0), ``a = 1/(β − ρκ/2)`` and ``b = w·a``:
    one exact step moves ``log p`` by at most ``a·(osc(δ) + w·d_q)`` in Hilbert's distance (d_q that of
    its input), so after T steps ``d_H ≤ L·osc(δ)`` with ``L = a·Σ_{t<T} bᵗ`` (plus ``bᵀ/τ0`` when
    ``p0 = softmax(−E/τ0)`` follows the energy, ``p0_tau``).  An entry of the top-k can only be
    overtaken if two log-probabilities cross, which takes ``d_H ≥ margin = log p_(k) − log p_(k+1)``:
    the top-k is fixed for ``osc(δ) < margin / L`` and, since ``osc(δ) ≤ √2‖δ‖₂``, for
    ``‖δ‖₂ < margin / (√2 L)``.  The full derivation is in the docs (evaluators page).

    Parameters
    ----------
    E, p0 : array (M,)
        Energy (lower = more relevant) and initial distribution.
    K : array (M, M)
        Redundancy kernel.
    cfg : JKOConfig or operating-point name, optional
        ``mode`` ``kl`` / ``noproximal`` (or ``bregman`` with α 0); a transport proximal term raises.
    k : int
        Size of the top set, ``1 <= k < M``.
    p0_tau : float, optional
        ``p0 = softmax(−E/p0_tau)`` moves with the energy (the product recipe); default: p0 fixed
        (the theory experiments).

    Raises
    ------
    ValueError
        As :func:`exact_flow`; ``k`` out of range.
    """
    E, p0, Ks, cfg = _flow_inputs(E, p0, K, cfg)
    k = check_int(k, "k", min_value=1)
    if k >= E.shape[0]:
        raise ValueError(f"k must be smaller than the pool size {E.shape[0]}, got {k}")
    w = _prox_weight(cfg)
    kappa = _kappa(Ks)
    gap = cfg.lam + w - cfg.rho * kappa / 2
    if gap <= 0:
        raise ValueError(f"lam + w = {cfg.lam + w:g} <= rho*kappa/2 = {cfg.rho * kappa / 2:g}: no provable radius")
    a = 1.0 / gap
    b = w * a
    T = int(cfg.T)
    L = a * sum(b**t for t in range(T))
    if p0_tau is not None:
        L += b**T / check_positive(p0_tau, "p0_tau")
    p = _exact_steps(E, p0, Ks, cfg.lam, cfg.rho, w, T, 1e-13, 10_000)
    idx, val = topk(p, k + 1)
    top = idx[:k].astype(np.int64)
    margin = float(np.log(val[k - 1]) - np.log(val[k])) if val[k] > 0 else float("inf")
    r_osc = margin / L if L > 0 else float("inf")
    return RadiusBound(r_osc / np.sqrt(2.0), r_osc, L, margin, kappa, p, top)


def walk_radius(E, p0, K, v, cfg=None, k: int = 10, *, s_max: float = 1.5, step: float = 0.005) -> float:
    """Return the empirical radius of the exact flow along ``v``: the first ``s`` whose top-k differs.

    ``top-k(exact_flow(E + s·v))`` is compared with that of ``E`` at ``s = step, 2·step, …, s_max``;
    the first change is refined by bisection (40 halvings) against the last unchanged grid value.
    ``s_max`` when the top-k never changes on the grid. The walk of :func:`certified_radius`
    without its 8-point quantisation, on the flow :func:`provable_radius` certifies.
    """
    E, p0, Ks, cfg = _flow_inputs(E, p0, K, cfg)
    v = as_float_array(v, "v", dtype=np.float64, ndim=1)
    if v.shape != E.shape:
        raise ValueError(f"v must have shape {E.shape} like E, got {v.shape}")
    k = check_int(k, "k", min_value=1)
    s_max, step = check_positive(s_max, "s_max"), check_positive(step, "step")
    w = _prox_weight(cfg)
    if cfg.lam + w <= cfg.rho * _kappa(Ks) / 2:
        raise ValueError("the step is not a contraction (lam + w <= rho*kappa/2)")

    def top(s):
        p = _exact_steps(E + s * v, p0, Ks, cfg.lam, cfg.rho, w, int(cfg.T), 1e-13, 10_000)
        return frozenset(topk(p, k)[0].tolist())

    base = top(0.0)
    lo = 0.0
    for j in range(1, int(np.floor(s_max / step + 1e-9)) + 1):
        s = j * step
        if top(s) != base:
            hi = s
            for _ in range(40):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if top(mid) == base else (lo, mid)
            return hi
        lo = s
    return s_max


@register_warmup("theory")
def _warmup() -> None:
    Z = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    for z in (Z, Z.astype(np.float32)):
        b = TheoryBatch.from_embeddings(z, [0, 3], n_threads=1)
    E = np.array([-1.0, -0.5, 0.0])
    po = np.zeros(1, np.int64)
    small = JKOConfig(inner_steps=2, sinkhorn_iter=3, sinkhorn_iter_grad=2)
    # the flows of the theory study: Wasserstein on its unrolled path, KL on the path of the modes without transport
    b.trajectories(E, np.full(3, 1 / 3), po, small.replace(mode="kl"), 1)
    P = b.trajectories(E, np.full(3, 1 / 3), po, small, 1)
    b.free_energy(P, E, po, 0.05, 0.05)
    b.wc(P[:1], P[1:], po, n_iter=2)
