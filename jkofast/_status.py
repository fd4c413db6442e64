"""Kernel status codes and their translation into warnings / errors (POT's check_result)."""

from __future__ import annotations

import warnings

OK = 0
NOT_CONVERGED = 1
NON_FINITE = 2  # a NaN/inf appeared inside a kernel (input passed validation)
EMPTY = 3  # empty pool / empty row where a non-empty one is required
BAD_INPUT = 4  # per-query input rejected in a batch (reported by index)

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
    """Turn a kernel status code into a warning (not converged) or an error."""
    if status == OK:
        return
    ctx = ", ".join(f"{k}={v}" for k, v in context.items())
    msg = f"{where}: {MESSAGES.get(int(status), f'status {status}')}" + (f" ({ctx})" if ctx else "")
    if status == NOT_CONVERGED:
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)
    else:
        raise FloatingPointError(msg)
