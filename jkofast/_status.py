"""Kernel status codes and their translation into warnings / errors (POT's check_result)."""

from __future__ import annotations

import warnings

from jkofast._codes import BAD_INPUT, EMPTY, NON_FINITE, NOT_CONVERGED, OK

__all__ = ["MESSAGES", "ConvergenceWarning", "unconverged_summary", "warn_on_status"]

MESSAGES = {
    OK: "ok",
    NOT_CONVERGED: "did not reach the tolerance within max_iter",
    NON_FINITE: "non-finite value produced",
    EMPTY: "empty input",
    BAD_INPUT: "invalid input",
}


class ConvergenceWarning(UserWarning):
    """An iterative kernel stopped at ``max_iter`` without reaching ``tol``."""


def warn_on_status(status: int, where: str, **context) -> None:
    """Turn a kernel status code into a warning (not converged) or an error.

    Parameters
    ----------
    status : int
        A code of :mod:`jkofast._codes`; ``OK`` returns silently.
    where : str
        The public function's name, first in the message.
    **context
        ``name=value`` pairs appended to the message (``max_iter``, ``tol``, ...).

    Warns
    -----
    ConvergenceWarning
        ``NOT_CONVERGED`` (``stacklevel=3``: the wrapper's caller).

    Raises
    ------
    FloatingPointError
        Any other non-``OK`` code.
    """
    if status == OK:
        return
    ctx = ", ".join(f"{k}={v}" for k, v in context.items())
    msg = f"{where}: {MESSAGES.get(int(status), f'status {status}')}" + (f" ({ctx})" if ctx else "")
    if status == NOT_CONVERGED:
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)
    else:
        raise FloatingPointError(msg)


def unconverged_summary(n_queries: int, n_sinkhorn: int, n_cg: int, cfg=None) -> str:
    """Summarise the capped inner steps of a run in one line (the rerank CLI, the main job's notes).

    ``n_queries`` queries, ``n_sinkhorn`` / ``n_cg`` inner steps whose Sinkhorn / implicit-gradient
    CG stopped at its cap above tolerance; the caps of ``cfg`` (a ``JKOConfig``) when given.
    """
    sk = f", sinkhorn_max_iter={cfg.sinkhorn_max_iter}" if cfg is not None else ""
    cg = f", cg_max_iter={cfg.cg_max_iter}" if cfg is not None else ""
    return (
        f"in {int(n_queries)} queries some inner steps stopped at an iteration cap above tolerance "
        f"(Sinkhorn {int(n_sinkhorn)} steps{sk}; implicit-gradient CG {int(n_cg)} steps{cg}): "
        "their gradients are inexact"
    )
