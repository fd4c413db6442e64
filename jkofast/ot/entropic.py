"""Entropic OT values and their gradients (no autograd).

* :func:`entropic_ot` — ``OT_ε(a, b)`` with POT's gradient convention: ``∂/∂a`` and ``∂/∂b``
  are the **centred** dual potentials, ``∂/∂C`` is the plan.
* :func:`transport_cost_grad` — the proximal term of the JKO solver and its gradient with
  respect to ``log p`` (SPEC A.4.6-A.4.7): ``"unrolled"`` (reference: truncated adjoint of
  the last ``n_grad`` of ``n_iter`` cold-started pairs), ``"implicit"`` (exact gradient
  of ``<Π*, C>`` at a converged plan) or ``"entropic"`` (``OT_ε`` and ``p ⊙ f``).
  Gradients w.r.t. ``log p`` are defined up to ``c·p`` (invisible on the simplex).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from jkofast import _status
from jkofast._numba import register_warmup
from jkofast._validation import as_float_array, check_int, check_positive, check_same_length
from jkofast.kernels.ot import dual as _kd
from jkofast.kernels.ot import sinkhorn_log as _ks
from jkofast.kernels.ot import transport as _kt
from jkofast.ot.sinkhorn import sinkhorn_log

__all__ = ["OTResult", "entropic_ot", "transport_cost_grad"]


@dataclass
class OTResult:
    """Entropic OT value and gradients.

    ``value = <Π,C> + ε Σ Π(log Π - 1)``; ``cost = <Π,C>``; ``grad_a``/``grad_b`` centred
    potentials; ``grad_C`` = Π; ``f, g`` raw potentials.
    """

    value: float
    cost: float
    grad_a: np.ndarray
    grad_b: np.ndarray
    grad_C: np.ndarray
    f: np.ndarray
    g: np.ndarray


def entropic_ot(
    a, b, C, eps: float, *, max_iter: int = 1000, tol: float | None = 1e-9, warm_start=None, dtype=None
) -> OTResult:
    """Entropic OT value and gradients (POT convention: centred potentials).

    Parameters
    ----------
    a, b : array_like (M,), (N,)
        Weights (renormalised).
    C : array_like (M, N)
    eps : float
        ε > 0.
    max_iter, tol, warm_start, dtype
        Passed to :func:`jkofast.sinkhorn_log`.

    Returns
    -------
    OTResult

    Examples
    --------
    >>> import numpy as np
    >>> from jkofast.ot.entropic import entropic_ot
    >>> r = entropic_ot([0.5, 0.5], [0.5, 0.5], np.array([[0.0, 1.0], [1.0, 0.0]]), 0.5)
    >>> abs(float(r.grad_a.sum())) < 1e-12
    True
    """
    res = sinkhorn_log(a, b, C, eps, max_iter=max_iter, tol=tol, warm_start=warm_start, dtype=dtype)
    Cd = np.ascontiguousarray(C, dtype=res.f.dtype)
    P = np.empty_like(Cd)
    val, cost = _kd.entropic_value(Cd, res.f, res.g, float(eps), P)
    ga = np.empty_like(res.f)
    gb = np.empty_like(res.g)
    _kd.centred_potential(res.f, ga)
    _kd.centred_potential(res.g, gb)
    return OTResult(value=float(val), cost=float(cost), grad_a=ga, grad_b=gb, grad_C=P, f=res.f, g=res.g)


def transport_cost_grad(
    log_p,
    log_q,
    C,
    eps: float,
    *,
    method: str = "unrolled",
    n_iter: int = 60,
    n_grad: int = 8,
    tol: float = 1e-10,
    max_iter: int = 5000,
    form: str = "auto",
):
    """Proximal term of the JKO step and its gradient w.r.t. ``a = log p`` (float64).

    Parameters
    ----------
    log_p, log_q : array_like (M,)
        Log-weights (finite), ``log_q`` is the constant target.
    C : array_like (M, M)
    eps : float
    method : {"unrolled", "implicit", "entropic"}
        See the module docstring.
    n_iter, n_grad : int
        Pairs and differentiated pairs of the unrolled reference.
    tol, max_iter : float, int
        Convergence of the ``implicit`` / ``entropic`` solves (cold start).
    form : {"auto", "log"}
        ``"log"`` forces the pure log-domain unrolled kernel (the small-ε fallback).

    Returns
    -------
    value : float
        ``<Π, C>`` (unrolled / implicit) or ``OT_ε`` (entropic).
    grad : ndarray (M,)
        ``∂ value / ∂ log p``.
    """
    eps = check_positive(eps, "eps")
    a = as_float_array(log_p, "log_p", dtype=np.float64, ndim=1)
    b = as_float_array(log_q, "log_q", dtype=np.float64, ndim=1)
    check_same_length("log_p", a, "log_q", b)
    C = as_float_array(C, "C", dtype=np.float64, ndim=2)
    m = a.shape[0]
    if C.shape != (m, m):
        raise ValueError(f"C must have shape ({m}, {m}), got {C.shape}")
    n_iter = check_int(n_iter, "n_iter", min_value=1)
    n_grad = min(check_int(n_grad, "n_grad", min_value=0), n_iter)
    tol = check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", min_value=1)
    if method not in ("unrolled", "implicit", "entropic"):
        raise ValueError(f"method must be 'unrolled', 'implicit' or 'entropic', got {method!r}")
    if form not in ("auto", "log"):
        raise ValueError(f"form must be 'auto' or 'log', got {form!r}")
    C_T = np.ascontiguousarray(C.T)
    Kg = np.empty_like(C)
    cmin = _ks.gibbs_kernel(C, eps, Kg)
    gc = _ks.GibbsCost(C, C_T, Kg, float(cmin), float(eps))
    KC = Kg * C
    sk = _ks.SinkhornWork(*[np.empty(m) for _ in range(8)])
    w = np.empty((8, m))
    grad = np.empty(m)
    if method == "unrolled":
        ng = max(n_grad, 1)
        tr = _kt.Tracked(*[np.empty((ng, m)) for _ in range(4)], np.empty((ng + 1, m)))
        ok = False
        if form == "auto":
            sk.pa[:] = np.exp(a)
            sk.qb[:] = np.exp(b)
            ok, val = _kt.w_unrolled_scaled(gc, KC, n_iter - n_grad, n_grad, tr, sk, w, grad)
        if not ok:
            val = _kt.w_unrolled_log(gc, a, b, n_iter - n_grad, n_grad, tr, sk, w, grad)
        return float(val), grad
    obj = _kt.OBJ_ENTROPIC if method == "entropic" else _kt.OBJ_TRANSPORT
    fw, gw, xw = np.zeros(m), np.zeros(m), np.zeros(m)
    gp = np.empty(m)
    lim = _kt.Limits(max_iter, 1e-12, 10 * m, 0)
    val, flags = _kt.w_converged(gc, KC, a, b, fw, gw, xw, tol, obj, lim, gp, sk, w)
    if flags & _kt.FLAG_SINKHORN:
        _status.warn_on_status(_status.NOT_CONVERGED, "transport_cost_grad: Sinkhorn", max_iter=max_iter, tol=tol)
    if flags & _kt.FLAG_CG:
        _status.warn_on_status(
            _status.NOT_CONVERGED, "transport_cost_grad: implicit-gradient CG", cg_max=10 * m, cg_tol=1e-12
        )
    return float(val), np.exp(a) * gp


@register_warmup("ot")
def _warmup() -> None:
    C = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    for dt in (np.float32, np.float64):
        entropic_ot(np.ones(3), np.ones(3), C.astype(dt), 0.5, max_iter=3, tol=None)
    la = np.log(np.array([0.2, 0.3, 0.5]))
    with warnings.catch_warnings():  # 5 iterations may not converge: compiling is the point
        warnings.simplefilter("ignore", _status.ConvergenceWarning)
        for method in ("unrolled", "implicit", "entropic"):
            transport_cost_grad(la, la, C, 0.5, method=method, n_iter=3, n_grad=2, max_iter=5)
    transport_cost_grad(la, la, C, 0.5, n_iter=3, n_grad=2, form="log")
