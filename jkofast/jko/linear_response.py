r"""Linear response of one converged JKO step: ``δp = A·δE`` by implicit differentiation.

Which per-step objective (SPEC A.4.2–A.4.7)
-------------------------------------------
One outer step maps ``q = p_t`` to the minimiser over the simplex of

.. math:: \Phi(p) = \langle p,E\rangle + \lambda \textstyle\sum_i p_i\log p_i + \tfrac{\rho}{2} p^\top K_s p
          + \tfrac{1}{2h}\,D(p, q),\qquad K_s = (K + K^\top)/2 .

A Jacobian ``∂p_{t+1}/∂E`` needs a *well-defined stationary point* of Φ, which rules out the
published per-step objective: its proximal term is ``<Π, C>`` of a **non-converged** 60-pair plan
whose "gradient" is a truncated unroll (A.4.6) — not the gradient of any function — and Adam
stops after a fixed number of steps (A.4.4), so ``p_{t+1}`` is not a stationary point of anything.
The transport-only cost of a converged plan (``grad="implicit"``) is smooth but not convex
(``W(p,p) > 0``, its gradient pushes p to sharpen at ``p = q``) and its Hessian needs second-order
Sinkhorn sensitivities. This module therefore uses the **entropic OT value**
``D = OT_ε(p, q)`` (``JKOConfig(objective="entropic")``, the paper's formula) for ``wasserstein``,
and ``D = KL(p‖q)`` for ``kl`` (``noproximal``: D = 0). Both are convex in p; with the strictly
convex entropy term Φ has a unique interior minimiser, characterised by

.. math:: G(p) = E + \lambda(\log p + 1) + \rho K_s p + \tfrac{1}{2h}\nabla_p D(p,q) = \mu\,\mathbf 1,
          \qquad \mathbf 1^\top p = 1,

with ``∇_p OT_ε = f`` (the converged dual potential, envelope theorem) and ``∇_p KL = log p − log q + 1``.

The step is solved **exactly** here (damped Newton on this KKT system, duals by converged Sinkhorn
plus Newton polish; :func:`solve_step` reports the residual ``max_i |G_i − <p, G>|``) — the
solver's Adam loop with many inner steps approaches the same point only to ~1e-3 (the study
reports the distance).

Differentiating the optimality conditions: ``H δp − δμ 1 = −δE``, ``1ᵀ δp = 0`` with the Hessian

.. math:: H = \lambda\,\mathrm{diag}(1/p) + \rho K_s + \tfrac{1}{2h} H_D,\qquad
          H_{KL} = \mathrm{diag}(1/p),\qquad H_{OT} = \varepsilon\,S^{+},\quad
          S = \mathrm{diag}(p) - \Pi\,\mathrm{diag}(1/q)\,\Pi^\top ,

where ``H_OT`` comes from the implicit Sinkhorn system: perturbing the row marginal by ``δp``
moves the duals by ``[diag(p) Π; Πᵀ diag(q)] [δf; δg] = ε [δp; 0]`` (null space ``(1, −1)``), so
``δf = ε S⁺ δp`` on the tangent space. ``S⁺`` is never formed: the JVP solves the bordered
system in ``(δp, δf, δμ, κ)``

.. math:: \begin{bmatrix} \lambda D_p^{-1} + \rho K_s & \tfrac{1}{2h} I & \mathbf 1 & 0\\
          \varepsilon I & -S & 0 & \mathbf 1\\ \mathbf 1^\top & 0 & 0 & 0\\ 0 & \mathbf 1^\top & 0 & 0
          \end{bmatrix}\begin{bmatrix}\delta p\\ \delta f\\ -\delta\mu\\ \kappa\end{bmatrix} =
          \begin{bmatrix}-\delta E\\0\\0\\0\end{bmatrix}.

``A = ∂p/∂E`` is symmetric negative semi-definite on the tangent space (``−(P H P)⁺``); its
per-band gain ``‖A v‖/‖v‖`` over Laplacian bands is the quantity of the paper's linear-response
theorem.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from jkofast._status import ConvergenceWarning
from jkofast._validation import as_float_array, check_int, check_positive
from jkofast.jko.config import resolve_config
from jkofast.ot.sinkhorn import sinkhorn_log

__all__ = [
    "StepSolution",
    "grad_entropy",
    "grad_kl",
    "grad_ot",
    "grad_redundancy",
    "hvp_entropy",
    "hvp_kl",
    "hvp_ot",
    "hvp_redundancy",
    "jvp",
    "ot_duals",
    "solve_step",
    "step_gradient",
    "step_objective",
]

_MODES = ("wasserstein", "kl", "noproximal")


@dataclass
class StepSolution:
    """A converged JKO step ``p = argmin Φ`` and what its derivatives need.

    Attributes
    ----------
    p : ndarray (M,)
        The minimiser (interior of the simplex).
    q : ndarray (M,)
        The previous iterate (fixed).
    E, C, Ks : ndarray
        Energy, cost, symmetrised redundancy kernel.
    mode : str
        ``"wasserstein"`` (proximal term OT_ε), ``"kl"`` or ``"noproximal"``.
    h, lam, rho, eps : float
    f, g : ndarray (M,) or None
        Converged duals of ``OT_ε(p, q)`` (``wasserstein``).
    residual : float
        ``max_i |G_i(p) − <p, G(p)>|``, the stationarity residual on the simplex.
    n_newton : int
        Newton iterations taken.
    """

    p: np.ndarray
    q: np.ndarray
    E: np.ndarray
    C: np.ndarray
    Ks: np.ndarray
    mode: str
    h: float
    lam: float
    rho: float
    eps: float
    f: np.ndarray | None
    g: np.ndarray | None
    residual: float
    n_newton: int


# ----------------------------------------------------------------------------------------
# Terms: gradients and Hessian-vector products (p-space, full gradients; compare on the tangent)
# ----------------------------------------------------------------------------------------
def grad_entropy(p, lam: float) -> np.ndarray:
    """``∇ λ Σ p log p = λ (log p + 1)``."""
    return lam * (np.log(p) + 1.0)


def hvp_entropy(p, v, lam: float) -> np.ndarray:
    """``∇² (λ Σ p log p) · v = λ v / p``."""
    return lam * np.asarray(v) / p


def grad_redundancy(Ks, p, rho: float) -> np.ndarray:
    """``∇ ½ρ pᵀ Ks p = ρ Ks p`` (Ks symmetric)."""
    return rho * (Ks @ p)


def hvp_redundancy(Ks, v, rho: float) -> np.ndarray:
    """``ρ Ks v``."""
    return rho * (Ks @ np.asarray(v))


def grad_kl(p, q) -> np.ndarray:
    """``∇ KL(p‖q) = log p − log max(q, 1e-30) + 1``."""
    return np.log(p) - np.log(np.maximum(q, 1e-30)) + 1.0


def hvp_kl(p, v) -> np.ndarray:
    """``∇² KL(p‖q) · v = v / p``."""
    return np.asarray(v) / p


def _plan(f, g, C, eps):
    return np.exp((f[:, None] + g[None, :] - C) / eps)


def ot_duals(p, q, C, eps: float, warm_start=None, *, tol: float = 1e-14, max_newton: int = 20):
    """Converged duals ``(f, g)`` of ``OT_ε(p, q)`` (code convention ``Π = exp((f + g − C)/ε)``).

    Log-domain Sinkhorn to a 1e-6 marginal error (warm-started when given), then Newton steps on
    the log-marginal equations ``log(Π1) = log p``, ``log(Πᵀ1) = log q`` (the implicit Sinkhorn
    Jacobian with rows scaled by the marginals, gauge ``Σ δg = 0``) until both hold to ``tol``
    (L∞, i.e. relative accuracy per entry). Returns ``(f, g, err)``.
    """
    m = p.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = sinkhorn_log(p, q, C, eps, max_iter=5000, tol=1e-6, warm_start=warm_start, check_every=5)
    f, g = res.f.copy(), res.g.copy()
    err = np.inf
    J = np.zeros((2 * m + 1, 2 * m + 1))
    J[2 * m, m : 2 * m] = 1.0
    J[m : 2 * m, 2 * m] = 1.0
    for _ in range(max_newton):
        P = _plan(f, g, C, eps)
        rs = P.sum(axis=1)
        cs = P.sum(axis=0)
        # log-marginal residuals: relative accuracy also for tiny entries of p (f_i = ε log p_i + ...)
        r = np.log(rs) - np.log(p)
        c = np.log(cs) - np.log(q)
        err = max(np.abs(r).max(), np.abs(c).max())
        if err < tol:
            break
        J[:m, :m] = np.eye(m)
        J[:m, m : 2 * m] = P / rs[:, None]
        J[m : 2 * m, :m] = P.T / cs[:, None]
        J[m : 2 * m, m : 2 * m] = np.eye(m)
        rhs = np.concatenate([-eps * r, -eps * c, [0.0]])
        d = np.linalg.solve(J, rhs)
        f += d[:m]
        g += d[m : 2 * m]
    return f, g, float(err)


def grad_ot(f) -> np.ndarray:
    """``∇_p OT_ε(p, q) = f`` (converged dual; defined up to a constant, irrelevant on the simplex)."""
    return np.asarray(f, np.float64).copy()


def _schur(p, q, f, g, C, eps):
    P = _plan(f, g, C, eps)
    return np.diag(p) - (P / q[None, :]) @ P.T


def hvp_ot(p, q, C, eps: float, f, g, v) -> np.ndarray:
    """``∇²_p OT_ε(p, q) · v = ε S⁺ v`` on the tangent space (mean-free result).

    ``S = diag(p) − Π diag(1/q) Πᵀ`` at the converged plan of ``(f, g)``; ``v`` is projected
    onto ``Σ v = 0`` first (the only directions in which the balanced problem stays feasible).
    """
    v = np.asarray(v, np.float64)
    v = v - v.mean()
    m = p.shape[0]
    S = _schur(p, q, f, g, C, eps)
    B = np.zeros((m + 1, m + 1))
    B[:m, :m] = S
    B[:m, m] = 1.0
    B[m, :m] = 1.0
    x = np.linalg.solve(B, np.concatenate([eps * v, [0.0]]))
    return x[:m]


# ----------------------------------------------------------------------------------------
# The per-step objective, its KKT system, the exact solve
# ----------------------------------------------------------------------------------------
def step_objective(p, sol_or_args, f=None, g=None) -> float:
    """``Φ(p)`` of the step described by a :class:`StepSolution` (duals ``f, g`` at this p for W)."""
    s = sol_or_args
    lp = np.log(p)
    val = float(p @ s.E + s.lam * (p @ lp) + 0.5 * s.rho * (p @ (s.Ks @ p)))
    w = 1.0 / (2.0 * s.h)
    if s.mode == "kl":
        val += w * float(p @ (lp - np.log(np.maximum(s.q, 1e-30))))
    elif s.mode == "wasserstein":
        P = _plan(f, g, s.C, s.eps)
        val += w * float(p @ f + s.q @ g - s.eps * P.sum())
    return val


def step_gradient(s: StepSolution, p, f) -> np.ndarray:
    """Gradient of the step objective w.r.t. ``p`` at ``p`` (with the OT dual ``f`` for ``wasserstein``).

    ``E + lam (log p + 1) + rho Ks p + (1/2h) d Prox`` -- zero up to a constant on the support at
    the step's solution (the KKT condition the linear-response theory differentiates).
    """
    G = s.E + grad_entropy(p, s.lam) + grad_redundancy(s.Ks, p, s.rho)
    w = 1.0 / (2.0 * s.h)
    if s.mode == "kl":
        G = G + w * grad_kl(p, s.q)
    elif s.mode == "wasserstein":
        G = G + w * grad_ot(f)
    return G


def _kkt_matrix(s: StepSolution, p, f, g) -> np.ndarray:
    m = p.shape[0]
    w = 1.0 / (2.0 * s.h)
    A = s.lam * np.diag(1.0 / p) + s.rho * s.Ks
    if s.mode == "kl":
        A = A + w * np.diag(1.0 / p)
    if s.mode != "wasserstein":
        M = np.zeros((m + 1, m + 1))
        M[:m, :m] = A
        M[:m, m] = 1.0
        M[m, :m] = 1.0
        return M
    n = 2 * m + 2
    M = np.zeros((n, n))
    M[:m, :m] = A
    M[:m, m : 2 * m] = w * np.eye(m)
    M[:m, 2 * m] = 1.0
    M[m : 2 * m, :m] = s.eps * np.eye(m)
    M[m : 2 * m, m : 2 * m] = -_schur(p, s.q, f, g, s.C, s.eps)
    M[m : 2 * m, 2 * m + 1] = 1.0
    M[2 * m, :m] = 1.0
    M[2 * m + 1, m : 2 * m] = 1.0
    return M


def _kkt_solve(M, rhs_p) -> np.ndarray:
    """Solve the KKT system for right-hand sides ``rhs_p`` (M,) or (M, k) on the p block."""
    rp = np.asarray(rhs_p, np.float64)
    one = rp.ndim == 1
    if one:
        rp = rp[:, None]
    m = rp.shape[0]
    R = np.zeros((M.shape[0], rp.shape[1]))
    R[:m] = rp
    X = np.linalg.solve(M, R)[:m]
    return X[:, 0] if one else X


def _check_inputs(E, q, C, K):
    E = as_float_array(E, "E", dtype=np.float64, ndim=1)
    q = as_float_array(q, "q", dtype=np.float64, ndim=1)
    m = E.shape[0]
    if q.shape[0] != m:
        raise ValueError(f"q must have {m} entries like E, got {q.shape[0]}")
    if np.any(q <= 0):
        raise ValueError("q must be strictly positive (an interior point of the simplex)")
    q = q / q.sum()
    C = as_float_array(C, "C", dtype=np.float64, ndim=2)
    K = as_float_array(K, "K", dtype=np.float64, ndim=2)
    for name, X in (("C", C), ("K", K)):
        if X.shape != (m, m):
            raise ValueError(f"{name} must have shape ({m}, {m}), got {X.shape}")
    return E, q, C, 0.5 * (K + K.T)


def _config(cfg):
    cfg = resolve_config(cfg)
    if cfg.mode not in _MODES:
        raise ValueError(f"linear response supports mode in {_MODES}, got {cfg.mode!r}")
    if cfg.mode == "wasserstein" and cfg.objective != "entropic":
        raise ValueError(
            "mode 'wasserstein' needs objective='entropic' here: the published transport-only term "
            "(truncated plan, unrolled gradient) has no well-defined stationary point to differentiate"
        )
    return cfg


def solve_step(E, q, C, K, cfg, *, tol: float = 1e-12, max_newton: int = 100, start=None) -> StepSolution:
    """Minimise the per-step objective Φ exactly (damped Newton on the simplex).

    Parameters
    ----------
    E : array_like (M,)
        Energy.
    q : array_like (M,)
        Previous iterate (strictly positive; renormalised).
    C, K : array_like (M, M)
        Ground cost and redundancy kernel (``(K + Kᵀ)/2`` is used).
    cfg : JKOConfig or str
        ``mode`` (``wasserstein`` with ``objective="entropic"``, ``kl``, ``noproximal``), ``h``,
        ``lam``, ``rho``, ``sinkhorn_eps``.
    tol : float
        Stop when ``max_i |G_i − <p, G>| < tol``.
    max_newton : int
    start : StepSolution, optional
        Warm start (its p and duals), e.g. the solution at a nearby energy.

    Returns
    -------
    StepSolution

    Raises
    ------
    ValueError
        Bad shapes, non-positive q, an unsupported mode / objective, ``lam <= 0``.
    """
    cfg = _config(cfg)
    E, q, C, Ks = _check_inputs(E, q, C, K)
    tol = check_positive(tol, "tol")
    max_newton = check_int(max_newton, "max_newton", min_value=1)
    lam = check_positive(cfg.lam, "lam")
    s = StepSolution(
        q.copy(), q, E, C, Ks, cfg.mode, float(cfg.h), lam, float(cfg.rho), float(cfg.sinkhorn_eps), None, None,
        np.inf, 0,
    )  # fmt: skip
    W = s.mode == "wasserstein"
    if start is not None and (not isinstance(start, StepSolution) or start.p.shape != E.shape):
        raise ValueError(f"start must be a StepSolution of a pool of {E.shape[0]} items")
    p = q.copy() if start is None else start.p.copy()
    f = g = None
    if W:
        ws = None if start is None or start.f is None else (start.f, start.g)
        f, g, _ = ot_duals(p, q, C, s.eps, ws)
    for it in range(max_newton + 1):
        G = step_gradient(s, p, f)
        mu = float(p @ G)
        res = float(np.abs(G - mu).max())
        s.residual, s.n_newton = res, it
        if res < tol or it == max_newton:
            break
        d = _kkt_solve(_kkt_matrix(s, p, f, g), -G)
        d -= d.mean()  # exact tangent (rounding)
        neg = d < 0
        t = 1.0 if not neg.any() else min(1.0, 0.95 * float(np.min(p[neg] / -d[neg])))
        phi0 = step_objective(p, s, f, g)
        slope = float(G @ d)
        while True:
            pn = p + t * d
            pn = pn / pn.sum()
            fn = gn = None
            if W:
                fn, gn, _ = ot_duals(pn, q, C, s.eps, (f, g))
            if t < 1e-12 or step_objective(pn, s, fn, gn) <= phi0 + 1e-4 * t * slope + 1e-15 * abs(phi0):
                break
            t *= 0.5
        p, f, g = pn, fn, gn
    s.p, s.f, s.g = p, f, g
    return s


def jvp(sol: StepSolution, V) -> np.ndarray:
    """``δp = A · δE`` for the columns of ``V`` ((M,) or (M, k)): the step's response to ``E + V``.

    Solves the bordered KKT system of the module docstring at the converged step; the result
    sums to 0 (tangent space).
    """
    V = as_float_array(V, "V", dtype=np.float64)
    if V.shape[0] != sol.p.shape[0] or V.ndim > 2:
        raise ValueError(f"V must have shape ({sol.p.shape[0]},) or ({sol.p.shape[0]}, k), got {V.shape}")
    X = _kkt_solve(_kkt_matrix(sol, sol.p, sol.f, sol.g), -V)
    return X - X.mean(axis=0)
