"""Kernel status codes: the one definition, shared by kernels (compile-time constants) and wrappers.

Kernels return these ints; :mod:`jkofast._status` turns them into warnings or errors.
"""

__all__ = ["BAD_INPUT", "EMPTY", "NON_FINITE", "NOT_CONVERGED", "OK"]

OK = 0
NOT_CONVERGED = 1
NON_FINITE = 2  # a NaN/inf appeared inside a kernel (input passed validation)
EMPTY = 3  # empty pool / empty row where a non-empty one is required
BAD_INPUT = 4  # per-query input rejected in a batch (reported by index)
