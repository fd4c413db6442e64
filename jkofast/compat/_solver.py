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
from jkofast.kernels.ot import sinkhorn_backward as _kb

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


# the most update pairs a call may ask for: a larger count is a typo (and would overflow the kernel's int64)
_MAX_PAIRS = 10**7


def _fixed_inputs(log_p, log_q, C, eps, n_iter, n_iter_grad):
    """Check the published loss's inputs; return ``(a, b, C float64 copy, eps, n_iter, n_iter_grad, out_dtype)``."""
    eps = check_positive(_scalar(eps, "eps"), "eps")
    n_iter = check_int(_scalar(n_iter, "n_iter"), "n_iter", min_value=1)
    n_iter_grad = check_int(_scalar(n_iter_grad, "n_iter_grad"), "n_iter_grad", min_value=0)
    for name, v in (("n_iter", n_iter), ("n_iter_grad", n_iter_grad)):
        if v > _MAX_PAIRS:
            raise ValueError(f"{name} must be <= {_MAX_PAIRS}, got {v}")
    a = _log_marginal(log_p, "log_p")
    b = _log_marginal(log_q, "log_q")
    C = _as_numpy(C, "C")
    out_dtype = np.float32 if C.dtype == np.float32 else np.float64
    C = as_float_array(C, "C", dtype=np.float64, ndim=2, copy=True)
    m, n = a.shape[0], b.shape[0]
    if C.shape != (m, n):
        raise ValueError(f"C must have shape (len(log_p), len(log_q)) = ({m}, {n}), got {C.shape}")
    return a, b, C, eps, n_iter, n_iter_grad, out_dtype


def _sinkhorn_fixed(log_p, log_q, C, eps, n_iter, n_iter_grad):
    a, b, C, eps, n_iter, n_iter_grad, out_dtype = _fixed_inputs(log_p, log_q, C, eps, n_iter, n_iter_grad)
    m, n = a.shape[0], b.shape[0]
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


def log_sinkhorn_loss_and_grad(
    log_p, log_q, C, eps: float = 0.1, n_iter: int = 60, n_iter_grad: int = 3, grad_output: float = 1.0
):
    r"""Compute the published loss and its truncated gradients w.r.t. ``log_p``, ``log_q`` and ``C``.

    The value is :func:`log_sinkhorn_loss`'s (bit-identical). The gradients are the ones the published
    function's autograd returns (SPEC A.4.3): the first ``max(0, n_iter - n_iter_grad)`` pairs run
    detached (their duals are constants, and so is ``C`` inside them), the last ``n_iter_grad`` pairs and
    the final plan :math:`\Pi = \exp((f + g - C)/\varepsilon)` are differentiated. With ``n_iter_grad = 0``
    only the plan's direct use of ``C`` carries a gradient (``log_p`` / ``log_q`` get zeros). The
    backward is a hand-written reverse sweep through the tracked updates
    (:mod:`jkofast.kernels.ot.sinkhorn_backward`), in float64; no autograd.

    Parameters
    ----------
    log_p, log_q, C, eps, n_iter, n_iter_grad
        As in :func:`log_sinkhorn_loss` (``n_iter_grad > n_iter`` runs ``n_iter_grad`` pairs, all tracked).
        ``n_iter`` and ``n_iter_grad`` are at most ``10**7``; memory grows as ``n_iter_grad * (M + N)``.
    grad_output : float, default 1.0
        Upstream gradient ``dJ/dL`` the three gradients are multiplied by (a vector-Jacobian product).

    Returns
    -------
    loss : float
        ``<Pi, C>`` (float64).
    grad_log_p : ndarray, shape (M,)
    grad_log_q : ndarray, shape (N,)
    grad_C : ndarray, shape (M, N)
        ``grad_output`` times the gradients; float32 when ``C`` is float32, else float64 (computed in
        float64). Entries of ``log_p`` / ``log_q`` equal to -inf get a zero gradient.

    Raises
    ------
    TypeError, ValueError, FloatingPointError
        As in :func:`log_sinkhorn_loss`; also ``n_iter`` / ``n_iter_grad`` above ``10**7`` (ValueError)
        and a non-finite ``grad_output`` (ValueError).

    Examples
    --------
    >>> import numpy as np
    >>> from jkofast.compat._solver import log_sinkhorn_loss_and_grad
    >>> C = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> w, ga, gb, gC = log_sinkhorn_loss_and_grad(np.log([0.5, 0.5]), np.log([0.9, 0.1]), C, n_iter=80)
    >>> round(w, 6), gC.shape
    (0.4, (2, 2))
    """
    a, b, C, eps, n_iter, n_iter_grad, out_dtype = _fixed_inputs(log_p, log_q, C, eps, n_iter, n_iter_grad)
    scale = _scalar(grad_output, "grad_output")
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"grad_output must be a real number, got {type(scale).__name__}")
    if not np.isfinite(scale):
        raise ValueError(f"grad_output must be finite, got {scale}")
    m, n = a.shape[0], b.shape[0]
    n_warm = max(0, n_iter - n_iter_grad)
    C_T = np.ascontiguousarray(C.T)
    Kg = np.empty_like(C)
    Kg_T = np.empty_like(C_T)
    F = np.zeros((n_iter_grad + 1, m))
    G = np.zeros((n_iter_grad + 1, n))
    cost, status = _kb.sinkhorn_fixed_log_tracked(
        C, C_T, Kg, Kg_T, a, b, eps, n_warm, _TINY, F, G, np.empty(m), np.empty(m), np.empty(n), np.empty(n)
    )
    _status.warn_on_status(status, "log_sinkhorn_loss_and_grad", eps=eps, n_iter=n_warm + n_iter_grad)
    grad_a = np.empty(m)
    grad_b = np.empty(n)
    grad_C = np.empty_like(C)
    _kb.sinkhorn_fixed_log_backward(
        C, C_T, Kg, Kg_T, eps, _TINY, F, G, grad_a, grad_b, grad_C, np.empty((4, m)), np.empty((4, n))
    )
    if scale != 1.0:
        grad_a *= scale
        grad_b *= scale
        grad_C *= scale
    return float(cost), grad_a.astype(out_dtype), grad_b.astype(out_dtype), grad_C.astype(out_dtype, copy=False)


@register_warmup("jko.compat.grad")
def _warmup_grad() -> None:
    x = np.log(np.full(3, 1.0 / 3.0))
    log_sinkhorn_loss_and_grad(x, x, 1.0 - np.eye(3), n_iter=2, n_iter_grad=1)


def _softmax(X, axis):
    """Softmax of ``X`` along ``axis`` by the max-shifted log-sum-exp (-inf entries weigh 0)."""
    mx = X.max(axis=axis, keepdims=True)
    E = np.exp(X - mx)
    return E / E.sum(axis=axis, keepdims=True)


def _softmax_tangent(S, Xdot, axis):
    """Directional derivative of a softmax ``S`` whose logits move by ``Xdot``."""
    SX = np.where(S > 0, S * Xdot, 0.0)  # a zero weight stays zero (its logit may be -inf)
    return SX - S * SX.sum(axis=axis, keepdims=True)


def log_sinkhorn_loss_hvp(
    log_p, log_q, C, v_log_p, v_log_q, v_C, eps: float = 0.1, n_iter: int = 60, n_iter_grad: int = 3
):
    r"""Hessian-vector product of the published loss (its truncated gradient, differentiated once more).

    The gradient of :func:`log_sinkhorn_loss_and_grad` is a function of ``(log_p, log_q, C)`` (the warm
    duals held constant, as the published autograd does); this returns its derivative in the direction
    ``v = (v_log_p, v_log_q, v_C)``, i.e. :math:`H v` with :math:`H` the Hessian of the truncated loss
    (symmetric, so this is also the vector-Jacobian product of the gradient with ``v``). Written by hand:
    the tangent of the tracked pairs and the plan, then the tangent of the reverse sweep, with dense
    softmax matrices in float64 (NumPy; memory ``2 * n_iter_grad * M * N`` floats). This is what a
    second-order torch caller (``create_graph=True``, as NM-JKO end-to-end training does) needs.

    Parameters
    ----------
    log_p, log_q, C, eps, n_iter, n_iter_grad
        As in :func:`log_sinkhorn_loss_and_grad`.
    v_log_p : array_like, shape (M,)
    v_log_q : array_like, shape (N,)
    v_C : array_like, shape (M, N)
        The direction (finite).

    Returns
    -------
    hv_log_p : ndarray, shape (M,)
    hv_log_q : ndarray, shape (N,)
    hv_C : ndarray, shape (M, N)
        float64. Entries of ``log_p`` / ``log_q`` equal to -inf get zeros.

    Raises
    ------
    TypeError, ValueError, FloatingPointError
        As in :func:`log_sinkhorn_loss_and_grad`; a direction of the wrong shape or not finite (ValueError).
    """
    a, b, C, eps, n_iter, n_iter_grad, _ = _fixed_inputs(log_p, log_q, C, eps, n_iter, n_iter_grad)
    m, n = a.shape[0], b.shape[0]
    va = as_float_array(_as_numpy(v_log_p, "v_log_p"), "v_log_p", dtype=np.float64, ndim=1)
    vb = as_float_array(_as_numpy(v_log_q, "v_log_q"), "v_log_q", dtype=np.float64, ndim=1)
    vC = as_float_array(_as_numpy(v_C, "v_C"), "v_C", dtype=np.float64, ndim=2)
    if va.shape != (m,) or vb.shape != (n,) or vC.shape != (m, n):
        raise ValueError(
            f"the direction must have shapes ({m},), ({n},), ({m}, {n}); got {va.shape}, {vb.shape}, {vC.shape}"
        )
    T = n_iter_grad
    C_T = np.ascontiguousarray(C.T)
    F = np.zeros((T + 1, m))
    G = np.zeros((T + 1, n))
    _, status = _kb.sinkhorn_fixed_log_tracked(
        C, C_T, np.empty_like(C), np.empty_like(C_T), a, b, eps, max(0, n_iter - T), _TINY, F, G,
        np.empty(m), np.empty(m), np.empty(n), np.empty(n),
    )  # fmt: skip
    _status.warn_on_status(status, "log_sinkhorn_loss_hvp", eps=eps, n_iter=max(n_iter, T))
    inv = 1.0 / eps
    live_a = np.isfinite(a)
    live_b = np.isfinite(b)
    va = np.where(live_a, va, 0.0)
    vb = np.where(live_b, vb, 0.0)
    # tangent of the tracked pairs: P^k row softmax of (g_{k-1} - C)/eps, Q^k column softmax of (f_k - C)/eps
    Ps, Qs, dPs, dQs = [], [], [], []
    dg = np.zeros(n)
    df = np.zeros(m)
    for k in range(1, T + 1):
        P = _softmax((G[k - 1][None, :] - C) * inv, 1)
        dY = (dg[None, :] - vC) * inv
        df = np.where(live_a, eps * va - (P * (dg[None, :] - vC)).sum(1), 0.0)
        Q = _softmax((F[k][:, None] - C) * inv, 0)
        dX = (df[:, None] - vC) * inv
        dg = np.where(live_b, eps * vb - (Q * (df[:, None] - vC)).sum(0), 0.0)
        Ps.append(P)
        Qs.append(Q)
        dPs.append(_softmax_tangent(P, dY, 1))
        dQs.append(_softmax_tangent(Q, dX, 0))
    with np.errstate(invalid="ignore"):
        Pi = np.exp((F[T][:, None] + G[T][None, :] - C) * inv)
    # with no tracked pair df = dg = 0: only C moves the plan
    dPi = np.where(Pi > 0, Pi * (df[:, None] + dg[None, :] - vC) * inv, 0.0)
    R = Pi * C * inv
    dR = (dPi * C + Pi * vC) * inv
    # the reverse sweep (as sinkhorn_fixed_log_backward) and its tangent, side by side
    fbar, gbar = R.sum(1), R.sum(0)
    dfbar, dgbar = dR.sum(1), dR.sum(0)
    hv_a = np.zeros(m)
    hv_b = np.zeros(n)
    hv_C = dPi - dR
    for k in range(T, 0, -1):
        P, Q, dP, dQ = Ps[k - 1], Qs[k - 1], dPs[k - 1], dQs[k - 1]
        hv_b += eps * dgbar
        if k < T:
            fbar = np.zeros(m)
            dfbar = np.zeros(m)
        fbar = fbar - Q @ gbar
        dfbar = dfbar - dQ @ gbar - Q @ dgbar
        hv_C += dQ * gbar[None, :] + Q * dgbar[None, :]
        hv_a += eps * dfbar
        hv_C += dP * fbar[:, None] + P * dfbar[:, None]
        gbar, dgbar = -(P.T @ fbar), -(dP.T @ fbar) - P.T @ dfbar
    return np.where(live_a, hv_a, 0.0), np.where(live_b, hv_b, 0.0), hv_C
