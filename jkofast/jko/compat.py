"""Drop-in replacement for the published JKO-RAG solver API (``src/jko.py`` of JKO-RAG).

``from jkofast.compat import JKOConfig, run_jko, ...`` offers every name the published scripts import
from their solver module, with the published signatures and defaults:

* ``run_jko(p0, energy, C, K, cfg, device="cpu") -> (p_T float32, infos)`` where ``infos`` is
  one dict per outer step with ``"losses"`` (the loss before each Adam update, floats);
* ``run_jko_with_duals(...) -> (p_T, f, g)`` float32, with ``f = g = 0`` unless the mode is
  ``wasserstein`` or ``bregman``;
* ``jko_step(p_prev, energy, C, K, cfg) -> (p_next float32, {"losses": [...]})``;
* ``log_sinkhorn_loss(log_p, log_q, C, eps=0.1, n_iter=60, n_iter_grad=3) -> float``, the
  transport cost ``<Pi, C>`` after exactly ``n_iter`` zero-initialised log-domain Sinkhorn pairs
  (the stability scripts' W_C metric);
* ``log_sinkhorn_with_duals(log_p, log_q, C, eps=0.1, n_iter=60, n_iter_grad=0) -> (float, f, g)``.

Every array argument may be any array-like: NumPy arrays, nested lists, or CPU tensors of any
library implementing ``__array__`` (PyTorch, JAX, CuPy-on-host, ...); no such library is imported.
What differs from the published module: outputs are NumPy arrays and Python floats (no tensors),
there is no autograd (a tensor that requires grad is rejected with a clear error instead of being
silently detached), ``device`` is accepted and ignored, and arithmetic is float64 (the published
module runs float32; ``tests/jko/test_parity.py`` and ``tests/jko/test_compat.py`` state the agreement).

``JKOConfig`` is :class:`jkofast.jko.solver.JKOConfig` (a superset of the published fields with
the same defaults), so ``objective=`` / ``grad=`` also work here, and ``dtype="float32"`` runs the
unrolled transport term on float32 Gibbs operators with float32 sums, as the published module
computes (about twice as fast, within the same parity bar). The first call compiles only the
kernels of its gradient path (cached on disk afterwards).
"""

from __future__ import annotations

import numbers

import numpy as np

from jkofast import _status
from jkofast._numba import register_warmup
from jkofast._validation import as_float_array, check_int, check_positive
from jkofast.jko import solver as _jko
from jkofast.jko.config import JKOConfig, resolve_config
from jkofast.kernels.ot import fixed as _kf

__all__ = [
    "JKOConfig",
    "jko_step",
    "log_sinkhorn_loss",
    "log_sinkhorn_with_duals",
    "run_jko",
    "run_jko_with_duals",
]

# a scaled row sum at or below this is recomputed by the exact log-sum-exp (float64)
_TINY = 1e-280


def _as_numpy(x, name: str) -> np.ndarray:
    """Any array-like -> ndarray, through ``__array__`` / the sequence protocol only.

    Conversion failures (a tensor that requires grad, a tensor on an accelerator, ragged lists)
    become a ``TypeError`` that names the argument.
    """
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x)
    except Exception as e:  # the library's own error type (RuntimeError, TypeError, ValueError, ...)
        raise TypeError(
            f"{name}: cannot convert {type(x).__name__} to a NumPy array ({e}). jkofast.compat takes NumPy "
            "arrays, lists and CPU tensors implementing __array__; it has no autograd, so pass tensors as "
            "t.detach().cpu()"
        ) from e


def _scalar(x, name: str):
    """Python/NumPy numbers pass; a 0-d array-like (e.g. a scalar tensor) becomes its Python value."""
    if isinstance(x, numbers.Number) or x is None or isinstance(x, str):
        return x
    if isinstance(x, np.ndarray) or hasattr(x, "__array__"):
        a = _as_numpy(x, name)
        if a.ndim == 0 and a.dtype.kind in "biuf":
            return a.item()
        raise TypeError(f"{name} must be a number, got an array of shape {a.shape} and dtype {a.dtype}")
    return x


def _cfg(cfg) -> JKOConfig:
    if cfg is None:
        raise TypeError("cfg is required (a JKOConfig), as in the published API")
    if isinstance(cfg, JKOConfig):
        fields = {k: _scalar(v, f"cfg.{k}") for k, v in vars(cfg).items()}
        if any(fields[k] is not v for k, v in vars(cfg).items()):
            cfg = JKOConfig(**fields)
        return resolve_config(cfg)
    if isinstance(cfg, str):
        return resolve_config(cfg)
    # a published JKOConfig (or any object with the same attribute names)
    names = [k for k in vars(JKOConfig()) if hasattr(cfg, k)]
    if not names:
        raise TypeError(f"cfg must be a JKOConfig or an object with its fields, got {type(cfg).__name__}")
    return JKOConfig(**{k: _scalar(getattr(cfg, k), f"cfg.{k}") for k in names}).validate()


def _pool(p0, energy, C, K, p_name: str):
    """Array-likes -> float64 arrays, checked here so errors carry the published argument names."""
    p0 = as_float_array(_as_numpy(p0, p_name), p_name, dtype=np.float64, ndim=1)
    energy = as_float_array(_as_numpy(energy, "energy"), "energy", dtype=np.float64, ndim=1)
    C = as_float_array(_as_numpy(C, "C"), "C", dtype=np.float64, ndim=2)
    K = as_float_array(_as_numpy(K, "K"), "K", dtype=np.float64, ndim=2)
    m = energy.shape[0]
    if p0.shape[0] != m:
        raise ValueError(f"{p_name} and energy must have the same length, got {p0.shape[0]} and {m}")
    for name, x in (("C", C), ("K", K)):
        if x.shape != (m, m):
            raise ValueError(f"{name} must have shape (M, M) = ({m}, {m}) with M = len(energy), got {x.shape}")
    return p0, energy, C, K


def run_jko(p0, energy, C, K, cfg: JKOConfig, device: str = "cpu") -> tuple[np.ndarray, list[dict]]:
    """Run ``cfg.T`` outer JKO steps from ``p0`` (the published ``run_jko``).

    Parameters
    ----------
    p0 : array_like, shape (M,)
        Initial distribution (non-negative, positive mass; renormalised).
    energy : array_like, shape (M,)
        Energy E (lower = more relevant), finite.
    C, K : array_like, shape (M, M)
        Symmetric ground cost and redundancy kernel.
    cfg : JKOConfig
        Configuration (a published ``JKOConfig`` object with the same fields works too).
    device : str
        Accepted and ignored (CPU only).

    Returns
    -------
    p_T : ndarray, float32, shape (M,)
    infos : list of dict
        One per outer step, ``{"losses": [float, ...]}`` (the loss before each Adam update).

    Raises
    ------
    TypeError
        An argument that cannot be converted to a real NumPy array (e.g. a tensor that requires grad).
    ValueError
        NaN/inf inputs, mismatched shapes, invalid config; the message names the argument.
    """
    cfg = _cfg(cfg)
    p, losses = _jko.run_jko(*_pool(p0, energy, C, K, "p0"), cfg, return_losses=True)
    n = cfg.inner_steps
    infos = [{"losses": [float(x) for x in losses[t * n : (t + 1) * n]]} for t in range(cfg.T)]
    return p.astype(np.float32), infos


def run_jko_with_duals(p0, energy, C, K, cfg: JKOConfig, device: str = "cpu"):
    """``run_jko`` plus the uniform-target dual potentials (the published ``run_jko_with_duals``).

    Returns
    -------
    p_T, f, g : ndarray, float32, shape (M,)
        ``f = g = 0`` unless ``cfg.mode`` is ``wasserstein`` or ``bregman``.
    """
    p, f, g = _jko.run_jko_with_duals(*_pool(p0, energy, C, K, "p0"), _cfg(cfg))
    return p.astype(np.float32), f.astype(np.float32), g.astype(np.float32)


def jko_step(p_prev, energy, C, K, cfg: JKOConfig, init_logits=None):
    """One outer step (the published ``jko_step``); returns ``(p_next float32, {"losses": [...]})``.

    ``init_logits`` other than None raises ``NotImplementedError`` (the logits start at ``log p_prev``).
    """
    if init_logits is not None:
        raise NotImplementedError("init_logits is not supported; the logits start at log(p_prev)")
    p, infos = run_jko(*_pool(p_prev, energy, C, K, "p_prev"), _cfg(cfg).replace(T=1))
    return p, infos[0]


def _log_marginal(x, name: str) -> np.ndarray:
    a = as_float_array(_as_numpy(x, name), name, dtype=np.float64, ndim=1, finite=False)
    if np.isnan(a).any() or np.isposinf(a).any():
        bad = np.flatnonzero(np.isnan(a) | np.isposinf(a))
        raise ValueError(f"{name} contains NaN or +inf (first at index {int(bad[0])}); -inf (log 0) is allowed")
    if not np.isfinite(a).any():
        raise ValueError(f"{name} has no finite entry (all mass zero)")
    return a


def _sinkhorn_fixed(log_p, log_q, C, eps, n_iter, n_iter_grad):
    eps = check_positive(_scalar(eps, "eps"), "eps")
    n_iter = check_int(_scalar(n_iter, "n_iter"), "n_iter", min_value=1)
    n_iter_grad = check_int(_scalar(n_iter_grad, "n_iter_grad"), "n_iter_grad", min_value=0)
    a = _log_marginal(log_p, "log_p")
    b = _log_marginal(log_q, "log_q")
    C = _as_numpy(C, "C")
    out_dtype = np.float32 if C.dtype == np.float32 else np.float64
    C = as_float_array(C, "C", dtype=np.float64, ndim=2, copy=True)
    m, n = a.shape[0], b.shape[0]
    if C.shape != (m, n):
        raise ValueError(f"C must have shape (len(log_p), len(log_q)) = ({m}, {n}), got {C.shape}")
    # the published loop runs max(0, n_iter - n_iter_grad) untracked pairs, then n_iter_grad tracked ones
    pairs = max(n_iter, n_iter_grad)
    C_T = np.ascontiguousarray(C.T)
    Kg = np.empty_like(C)
    Kg_T = np.empty_like(C_T)
    f = np.zeros(m)
    g = np.zeros(n)
    cost, status = _kf.sinkhorn_fixed_log(
        C, C_T, Kg, Kg_T, a, b, eps, pairs, _TINY, f, g, np.empty(m), np.empty(m), np.empty(n), np.empty(n)
    )
    _status.warn_on_status(status, "log_sinkhorn_loss", eps=eps, n_iter=pairs)
    return float(cost), f.astype(out_dtype), g.astype(out_dtype)


def log_sinkhorn_loss(log_p, log_q, C, eps: float = 0.1, n_iter: int = 60, n_iter_grad: int = 3) -> float:
    r"""Transport cost ``<Pi, C>`` of the log-domain Sinkhorn plan after exactly ``n_iter`` pairs.

    The published ``log_sinkhorn_loss`` (SPEC A.4.3), values only: from ``f = g = 0``, ``n_iter``
    update pairs, row update first,

    .. math:: f_i \leftarrow \varepsilon\,(\log p_i - \mathrm{LSE}_j((g_j - C_{ij})/\varepsilon)),\quad
              g_j \leftarrow \varepsilon\,(\log q_j - \mathrm{LSE}_i((f_i - C_{ij})/\varepsilon)),

    then :math:`\Pi_{ij} = \exp((f_i + g_j - C_{ij})/\varepsilon)` and the loss
    :math:`\sum_{ij} \Pi_{ij} C_{ij}`: the transport part only (not the entropic OT value, and
    ``W(p, p) > 0``). No convergence test, no warm start, no renormalisation of the log-marginals.

    Parameters
    ----------
    log_p : array_like, shape (M,)
        Log source weights, finite or -inf (log 0); used as given.
    log_q : array_like, shape (N,)
        Log target weights (N = M in the published code; rectangular C works here).
    C : array_like, shape (M, N)
        Ground cost, finite.
    eps : float, default 0.1
        Entropic regulariser ε > 0.
    n_iter : int, default 60
        Update pairs (>= 1). The stability metric W_C uses ``eps=0.1, n_iter=80``.
    n_iter_grad : int, default 3
        How many of the last pairs the published code differentiates. Irrelevant to the value
        (no autograd here) except that, as in the published loop, ``n_iter_grad > n_iter`` runs
        ``n_iter_grad`` pairs.

    Returns
    -------
    float
        ``<Pi, C>``, computed in float64 whatever the input dtype.

    Raises
    ------
    TypeError
        An argument that cannot be converted (complex or object dtype, a tensor that requires grad),
        non-numeric ``eps`` / ``n_iter``.
    ValueError
        NaN or +inf in ``log_p`` / ``log_q``, NaN/inf in ``C``, shape mismatch, ``eps <= 0``,
        ``n_iter < 1``, ``n_iter_grad < 0``; the message names the argument.
    FloatingPointError
        The cost overflowed (log-marginals far above 0).

    Examples
    --------
    >>> import numpy as np
    >>> from jkofast.compat import log_sinkhorn_loss
    >>> C = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> w = log_sinkhorn_loss(np.log([0.5, 0.5]), np.log([0.9, 0.1]), C, eps=0.1, n_iter=80)
    >>> round(w, 6)
    0.4
    """
    return _sinkhorn_fixed(log_p, log_q, C, eps, n_iter, n_iter_grad)[0]


def log_sinkhorn_with_duals(log_p, log_q, C, eps: float = 0.1, n_iter: int = 60, n_iter_grad: int = 0):
    """:func:`log_sinkhorn_loss` that also returns the final dual potentials.

    Parameters
    ----------
    log_p, log_q, C, eps, n_iter
        As in :func:`log_sinkhorn_loss`.
    n_iter_grad : int, default 0
        Accepted for the published signature; irrelevant to the values (``> n_iter`` runs
        ``n_iter_grad`` pairs, as the published loop does).

    Returns
    -------
    loss : float
        ``<Pi, C>``.
    f : ndarray, shape (M,)
    g : ndarray, shape (N,)
        Duals after the last pair (``Pi_ij = exp((f_i + g_j - C_ij)/eps)``); float32 when ``C`` is
        float32, else float64 (computed in float64).

    Raises
    ------
    TypeError, ValueError, FloatingPointError
        As in :func:`log_sinkhorn_loss`.

    Examples
    --------
    >>> import numpy as np
    >>> from jkofast.compat import log_sinkhorn_with_duals
    >>> C = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> w, f, g = log_sinkhorn_with_duals(np.log([0.5, 0.5]), np.log([0.5, 0.5]), C)
    >>> f.shape, g.dtype.name
    ((2,), 'float64')
    """
    return _sinkhorn_fixed(log_p, log_q, C, eps, n_iter, n_iter_grad)


@register_warmup("jko.compat")
def _warmup() -> None:
    x = np.log(np.full(3, 1.0 / 3.0))
    log_sinkhorn_loss(x, x, 1.0 - np.eye(3), n_iter=2)
