"""PyTorch adapter of the drop-in: ``from jkofast.compat.torch import log_sinkhorn_loss``.

``log_sinkhorn_loss`` and ``log_sinkhorn_with_duals`` take and return CPU tensors (float32 or float64)
with the published signatures, and ``log_sinkhorn_loss`` is differentiable: a ``torch.autograd.Function``
whose forward and backward are jkofast's kernels (:func:`jkofast.compat._solver.log_sinkhorn_loss_and_grad`,
a hand-written reverse sweep), giving the published function's gradients w.r.t. ``log_p``, ``log_q``
and ``C`` with its truncation (the first ``max(0, n_iter - n_iter_grad)`` pairs detached). Arithmetic
is float64 whatever the tensor dtype; results are cast back to the inputs' dtypes.

With ``create_graph=True`` the gradient is itself differentiable (NM-JKO end-to-end training
differentiates the inner gradient w.r.t. the cost): its backward is the hand-written Hessian-vector
product :func:`jkofast.compat._solver.log_sinkhorn_loss_hvp`. A third derivative raises ``RuntimeError``.

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

from jkofast.compat import _solver as _compat

__all__ = ["log_sinkhorn_loss", "log_sinkhorn_with_duals"]

_THIRD_ORDER = (
    "jkofast.compat.torch.log_sinkhorn_loss is differentiable twice: a third derivative (create_graph=True "
    "through its Hessian-vector product) is not supported"
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
        ctx.args = (eps, n_iter, n_iter_grad)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            loss, ga, gb, gC = _compat.log_sinkhorn_loss_and_grad(a, b, c, eps, n_iter, n_iter_grad)
            ctx.grads = (ga, gb, gC)  # NumPy arrays: the backward is one scaling, no recomputation
            ctx.save_for_backward(log_p, log_q, C)
        else:
            loss = _compat.log_sinkhorn_loss(a, b, c, eps, n_iter, n_iter_grad)
        return torch.tensor(loss, dtype=C.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        inputs = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: the gradient must itself be differentiable
            out = _LogSinkhornGrad.apply(grad_output, *inputs, *ctx.args, ctx.grads)
        else:
            scale = float(grad_output)
            out = [torch.from_numpy(g * scale).to(x.dtype) for g, x in zip(ctx.grads, inputs)]
        return (*(o if ctx.needs_input_grad[k] else None for k, o in enumerate(out)), None, None, None)


class _LogSinkhornGrad(torch.autograd.Function):
    """``grad_output * dL/d(log_p, log_q, C)``, differentiable once more through the hand-written HVP."""

    @staticmethod
    def forward(ctx, grad_output, log_p, log_q, C, eps, n_iter, n_iter_grad, grads):
        ctx.save_for_backward(grad_output, log_p, log_q, C)
        ctx.args = (eps, n_iter, n_iter_grad)
        ctx.grads = grads
        scale = float(grad_output)
        return tuple(torch.from_numpy(g * scale).to(x.dtype) for g, x in zip(grads, (log_p, log_q, C)))

    @staticmethod
    def backward(ctx, u_p, u_q, u_C):
        if torch.is_grad_enabled():
            raise RuntimeError(_THIRD_ORDER)
        grad_output, *inputs = ctx.saved_tensors
        u = [
            np.zeros(x.shape) if ux is None else _numpy(ux, "grad").astype(np.float64)
            for ux, x in zip((u_p, u_q, u_C), inputs)
        ]
        a, b, c = (_numpy(x, name) for x, name in zip(inputs, ("log_p", "log_q", "C")))
        hv = _compat.log_sinkhorn_loss_hvp(a, b, c, *u, *ctx.args)
        scale = float(grad_output)
        d_out = sum(float(np.vdot(ux, g)) for ux, g in zip(u, ctx.grads))
        out = [torch.from_numpy(h * scale).to(x.dtype) for h, x in zip(hv, inputs)]
        return (torch.tensor(d_out, dtype=grad_output.dtype), *out, None, None, None, None)


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
        As in :func:`jkofast.compat._solver.log_sinkhorn_loss`; gradients flow through the last
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
        As in :func:`jkofast.compat._solver.log_sinkhorn_loss`.
    RuntimeError
        A third derivative (``create_graph=True`` through the Hessian-vector product).

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
