"""PyTorch adapter of the drop-in: ``from jkofast.compat.torch import log_sinkhorn_loss``.

``log_sinkhorn_loss`` and ``log_sinkhorn_with_duals`` take and return CPU tensors (float32 or float64)
with the published signatures, and ``log_sinkhorn_loss`` is differentiable: a ``torch.autograd.Function``
whose forward and backward are jkofast's kernels (:func:`jkofast.jko.compat.log_sinkhorn_loss_and_grad`,
a hand-written reverse sweep), giving the published function's gradients w.r.t. ``log_p``, ``log_q``
and ``C`` with its truncation (the first ``max(0, n_iter - n_iter_grad)`` pairs detached). Arithmetic
is float64 whatever the tensor dtype; results are cast back to the inputs' dtypes.

The backward is first-order only: a backward with ``create_graph=True`` through the loss (the caller
asks for a differentiable gradient, e.g. to differentiate it again) raises a ``RuntimeError`` instead
of returning a gradient whose own derivative would silently miss the loss's second-order term.

This is the only jkofast module that imports torch, an optional extra: ``pip install "jkofast[torch]"``.
"""

from __future__ import annotations

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised in an environment without torch
    raise ImportError(
        'jkofast.compat.torch needs PyTorch, an optional extra: pip install "jkofast[torch]" '
        "(or use jkofast.compat, which takes NumPy arrays)"
    ) from e

import numpy as np

from jkofast.jko import compat as _compat

__all__ = ["log_sinkhorn_loss", "log_sinkhorn_with_duals"]

_SECOND_ORDER = (
    "jkofast.compat.torch.log_sinkhorn_loss has a first-order gradient only: a backward with "
    "create_graph=True through it (differentiating its gradient again) is not supported"
)


def _numpy(x, name: str) -> np.ndarray:
    """Return a CPU float32/float64 tensor's data as a NumPy array (a view: jkofast only reads it)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != "cpu":
        raise TypeError(f"{name} is on {x.device}; jkofast.compat.torch takes CPU tensors (use .cpu())")
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{name} must be float32 or float64, got {x.dtype}")
    return x.detach().numpy()


class _LogSinkhornLoss(torch.autograd.Function):
    """``<Pi, C>`` of the published fixed-iteration Sinkhorn, with the published truncated gradient."""

    @staticmethod
    def forward(ctx, log_p, log_q, C, eps, n_iter, n_iter_grad):
        a, b, c = _numpy(log_p, "log_p"), _numpy(log_q, "log_q"), _numpy(C, "C")
        ctx.dtypes = (log_p.dtype, log_q.dtype, C.dtype)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            loss, ga, gb, gC = _compat.log_sinkhorn_loss_and_grad(a, b, c, eps, n_iter, n_iter_grad)
            ctx.grads = (ga, gb, gC)  # NumPy arrays: the backward is one scaling, no recomputation
        else:
            loss = _compat.log_sinkhorn_loss(a, b, c, eps, n_iter, n_iter_grad)
        return torch.tensor(loss, dtype=C.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        if torch.is_grad_enabled():  # create_graph=True: the caller wants this gradient differentiable
            raise RuntimeError(_SECOND_ORDER)
        scale = float(grad_output)
        out = []
        for k, g in enumerate(ctx.grads):
            out.append(torch.from_numpy(g * scale).to(ctx.dtypes[k]) if ctx.needs_input_grad[k] else None)
        return (*out, None, None, None)


def log_sinkhorn_loss(
    log_p: torch.Tensor,
    log_q: torch.Tensor,
    C: torch.Tensor,
    eps: float = 0.1,
    n_iter: int = 60,
    n_iter_grad: int = 3,
) -> torch.Tensor:
    r"""Compute the published ``log_sinkhorn_loss`` on CPU tensors, differentiably in ``log_p``, ``log_q``, ``C``.

    Parameters
    ----------
    log_p : torch.Tensor, shape (M,)
        Log source weights (float32/float64, CPU), finite or -inf.
    log_q : torch.Tensor, shape (N,)
        Log target weights.
    C : torch.Tensor, shape (M, N)
        Ground cost, finite.
    eps, n_iter, n_iter_grad
        As in :func:`jkofast.jko.compat.log_sinkhorn_loss`; gradients flow through the last
        ``n_iter_grad`` pairs and the final plan only, as in the published function.

    Returns
    -------
    torch.Tensor
        0-d tensor ``<Pi, C>`` of ``C``'s dtype (computed in float64). Its backward gives each input
        that requires grad the published truncated gradient times the upstream gradient.

    Raises
    ------
    TypeError
        A non-tensor, a non-CPU tensor or a dtype other than float32/float64.
    ValueError, FloatingPointError
        As in :func:`jkofast.jko.compat.log_sinkhorn_loss`.
    RuntimeError
        A backward with ``create_graph=True`` through the result (the gradient is first-order only).

    Examples
    --------
    >>> import torch
    >>> from jkofast.compat.torch import log_sinkhorn_loss
    >>> C = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64, requires_grad=True)
    >>> a = torch.log(torch.tensor([0.5, 0.5], dtype=torch.float64))
    >>> loss = log_sinkhorn_loss(a, a, C)
    >>> loss.backward()
    >>> C.grad.shape
    torch.Size([2, 2])
    """
    return _LogSinkhornLoss.apply(log_p, log_q, C, eps, n_iter, n_iter_grad)


def log_sinkhorn_with_duals(
    log_p: torch.Tensor,
    log_q: torch.Tensor,
    C: torch.Tensor,
    eps: float = 0.1,
    n_iter: int = 60,
    n_iter_grad: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Compute the published ``log_sinkhorn_with_duals`` on CPU tensors: ``(loss, f, g)``.

    ``loss`` is :func:`log_sinkhorn_loss` (differentiable); ``f``, ``g`` are the final duals, detached
    as in the published function, of ``C``'s dtype.

    Parameters
    ----------
    log_p, log_q, C, eps, n_iter, n_iter_grad
        As in :func:`log_sinkhorn_loss` (``n_iter_grad`` defaults to 0, the published default).

    Returns
    -------
    loss : torch.Tensor
        0-d tensor.
    f : torch.Tensor, shape (M,)
    g : torch.Tensor, shape (N,)

    Raises
    ------
    TypeError, ValueError, FloatingPointError
        As in :func:`log_sinkhorn_loss`.
    """
    w, f, g = _compat.log_sinkhorn_with_duals(
        _numpy(log_p, "log_p"), _numpy(log_q, "log_q"), _numpy(C, "C"), eps, n_iter, n_iter_grad
    )
    f, g = torch.from_numpy(f).to(C.dtype), torch.from_numpy(g).to(C.dtype)
    if torch.is_grad_enabled() and (log_p.requires_grad or log_q.requires_grad or C.requires_grad):
        # the differentiable loss runs the solve again, with its iterates kept for the backward
        return log_sinkhorn_loss(log_p, log_q, C, eps, n_iter, n_iter_grad), f, g
    return torch.tensor(w, dtype=C.dtype), f, g
