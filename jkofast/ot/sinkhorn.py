"""Public log-domain Sinkhorn (SPEC A.4.3 semantics: f from rows, then g from columns)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jkofast import _status
from jkofast._numba import register_warmup
from jkofast._validation import as_float_array, check_int, check_positive, check_same_length
from jkofast.kernels.ot import sinkhorn_log as _k

__all__ = ["TINY", "SinkhornResult", "sinkhorn_log"]

# smallest trusted row sum of the scaled form, per dtype (below: fall back to log form)
TINY = {np.dtype(np.float64): 1e-280, np.dtype(np.float32): 1e-30}


@dataclass
class SinkhornResult:
    """Result of :func:`sinkhorn_log`.

    Attributes
    ----------
    f, g : ndarray
        Dual potentials (code convention: ``Pi_ij = exp((f_i + g_j - C_ij)/eps)``), dtype of C.
    cost : float
        Transport cost ``<Pi, C>`` of the returned plan (not the entropic value).
    marginal_error : float
        L1 error of the row marginal (columns are exact after the last g update).
    n_iter : int
        Update pairs performed.
    converged : bool
        ``marginal_error < tol`` (always True when ``tol`` is None).
    """

    f: np.ndarray
    g: np.ndarray
    cost: float
    marginal_error: float
    n_iter: int
    converged: bool

    def plan(self, C, eps) -> np.ndarray:
        """Dense plan ``exp((f_i + g_j - C_ij)/eps)``.

        ``C`` must be the (finite) cost of the solve, shape ``(len(f), len(g))``; ``eps > 0``.
        """
        eps = check_positive(eps, "eps")
        C = as_float_array(C, "C", dtype=self.f.dtype, ndim=2, allow_empty=True)
        if C.shape != (self.f.shape[0], self.g.shape[0]):
            raise ValueError(
                f"C must have shape (len(f), len(g)) = ({self.f.shape[0]}, {self.g.shape[0]}), got {C.shape}"
            )
        P = np.empty_like(C)
        _k.plan_fill(C, self.f, self.g, float(eps), P)
        return P


def _log_weights(x, name, dtype):
    x = as_float_array(x, name, dtype=dtype, ndim=1)
    if np.any(x < 0):
        raise ValueError(f"{name} must be non-negative")
    s = float(x.sum(dtype=np.float64))
    if not s > 0:
        raise ValueError(f"{name} must have positive total mass")
    with np.errstate(divide="ignore"):
        if np.isfinite(s) and s <= np.finfo(x.dtype).max:
            return np.log(x / x.dtype.type(s)).astype(dtype)
        # the total mass overflows (float64) or does not fit the dtype: normalise by the max first
        x64 = x.astype(np.float64) / float(x.max())
        return (np.log(x64) - np.log(x64.sum())).astype(dtype)


def sinkhorn_log(
    a,
    b,
    C,
    eps: float,
    *,
    max_iter: int = 1000,
    tol: float | None = 1e-9,
    warm_start=None,
    check_every: int = 10,
    dtype=None,
) -> SinkhornResult:
    r"""Entropic OT by log-domain Sinkhorn iterations.

    Solves :math:`\min_{\Pi \in U(a,b)} \langle \Pi, C\rangle + \varepsilon\sum_{ij}\Pi_{ij}(\log\Pi_{ij}-1)`
    with the dual updates (one *pair* = row update, then column update)

    .. math:: f_i \leftarrow \varepsilon\,(\log a_i - \mathrm{LSE}_j((g_j - C_{ij})/\varepsilon)),\quad
              g_j \leftarrow \varepsilon\,(\log b_j - \mathrm{LSE}_i((f_i - C_{ij})/\varepsilon)).

    Each half-step is an M x N matvec with the fixed Gibbs kernel plus M exps/logs with
    a max shift (the duals never leave the log domain); when a row sum would underflow
    (small ``eps``) the solver switches to the exact per-row log-sum-exp.

    Parameters
    ----------
    a : array_like, shape (M,)
        Source weights (non-negative; renormalised). Zero entries give ``f_i = -inf``.
    b : array_like, shape (N,)
        Target weights.
    C : array_like, shape (M, N)
        Ground cost (finite).
    eps : float
        Entropic regulariser ε > 0.
    max_iter : int, default 1000
        Maximum number of update pairs (exactly this many when ``tol`` is None).
    tol : float or None, default 1e-9
        Stop when the row-marginal L1 error is below ``tol`` (checked every
        ``check_every`` pairs). ``None``: fixed iteration count, the reference semantics.
    warm_start : tuple (f, g) or None
        Initial potentials; default zeros (cold start, as the reference).
    check_every : int, default 10
    dtype : {None, float32, float64}
        Working dtype; default that of ``C`` (float64 for integer input).

    Returns
    -------
    SinkhornResult

    Raises
    ------
    ValueError
        NaN/inf in ``C``, negative or zero-mass weights, shape mismatch, ``eps <= 0``.
    TypeError
        Unsupported dtype.

    Warns
    -----
    ConvergenceWarning
        ``tol`` given and not reached within ``max_iter``.

    Examples
    --------
    >>> import numpy as np
    >>> from jkofast import sinkhorn_log
    >>> C = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> res = sinkhorn_log([0.5, 0.5], [0.5, 0.5], C, 0.1)
    >>> bool(res.converged), round(float(res.plan(C, 0.1).sum()), 6)
    (True, 1.0)
    """
    eps = check_positive(eps, "eps")
    max_iter = check_int(max_iter, "max_iter", min_value=1)
    check_every = check_int(check_every, "check_every", min_value=1)
    if tol is not None:
        tol = check_positive(tol, "tol")
    C = as_float_array(C, "C", dtype=dtype, ndim=2)
    if not C.flags.writeable:  # one compiled signature: writeable C-contiguous arrays
        C = C.copy()
    dt = C.dtype
    log_a = _log_weights(a, "a", dt)
    log_b = _log_weights(b, "b", dt)
    if C.shape != (log_a.shape[0], log_b.shape[0]):
        raise ValueError(f"C must have shape (len(a), len(b)) = ({log_a.shape[0]}, {log_b.shape[0]}), got {C.shape}")
    m, n = C.shape
    if warm_start is None:
        f = np.zeros(m, dt)
        g = np.zeros(n, dt)
    else:
        if not isinstance(warm_start, tuple | list):
            raise TypeError(f"warm_start must be a pair (f, g) or None, got {type(warm_start).__name__}")
        if len(warm_start) != 2:
            raise ValueError(f"warm_start must be a pair (f, g), got {len(warm_start)} items")
        f = as_float_array(warm_start[0], "warm_start[0]", dtype=dt, ndim=1, copy=True)
        g = as_float_array(warm_start[1], "warm_start[1]", dtype=dt, ndim=1, copy=True)
        check_same_length("warm_start[0]", f, "a", log_a)
        check_same_length("warm_start[1]", g, "b", log_b)
    C_T = np.ascontiguousarray(C.T)
    Kg = np.empty_like(C)
    cmin = _k.gibbs_kernel(C, eps, Kg)
    gc = _k.GibbsCost(C, C_T, Kg, float(cmin), float(eps))
    wk = _k.SinkhornWork(*[np.empty(k, dt) for k in (m, m, m, m, n, n, n, n)])
    tol_k = -1.0 if tol is None else float(tol)
    n_iter, status, err, _, _ = _k.sinkhorn_log_solve(
        gc, log_a, log_b, f, g, max_iter, tol_k, check_every, TINY[dt], wk
    )
    _status.warn_on_status(status, "sinkhorn_log", max_iter=max_iter, tol=tol)
    cost, _ = _k.plan_cost(C, f, g, eps)
    return SinkhornResult(
        f=f, g=g, cost=float(cost), marginal_error=float(err), n_iter=int(n_iter), converged=status == _status.OK
    )


@register_warmup("sinkhorn")
def _warmup() -> None:
    for dt in (np.float32, np.float64):
        C = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]], dt)
        r = sinkhorn_log(np.ones(3, dt), np.ones(3, dt), C, 0.5, max_iter=3, tol=None)
        r.plan(C, 0.5)
