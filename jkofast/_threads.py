"""Scoped Numba thread counts."""

from __future__ import annotations

import contextlib

import numba
import numpy as np

from jkofast import _config

__all__ = ["max_threads", "numba_threads", "resolve_threads"]


def max_threads() -> int:
    """Threads Numba was started with (``NUMBA_NUM_THREADS``; fixed at import)."""
    return int(numba.config.NUMBA_NUM_THREADS)


def resolve_threads(n_threads: int | None) -> int:
    """Validate a thread request; ``None`` means the configured default or all.

    Raises
    ------
    TypeError
        Not an int (bools included).
    ValueError
        Below 1.
    """
    if n_threads is None:
        n_threads = _config.DEFAULT_THREADS or max_threads()
    if isinstance(n_threads, bool) or not isinstance(n_threads, int | np.integer):
        raise TypeError(f"n_threads must be an int or None, got {type(n_threads).__name__}")
    n_threads = int(n_threads)
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    return min(n_threads, max_threads())


@contextlib.contextmanager
def numba_threads(n_threads: int | None = None):
    """Set Numba's thread mask for the block and restore it in ``finally``.

    The mask is thread-local (Numba semantics); values above ``NUMBA_NUM_THREADS``
    are clipped to it.

    Parameters
    ----------
    n_threads : int, optional
        Threads for the block; ``None``: ``JKOFAST_NUM_THREADS`` or all.

    Yields
    ------
    int
        The thread count in effect.

    Examples
    --------
    >>> from jkofast import numba_threads
    >>> with numba_threads(1) as n:
    ...     n
    1
    """
    n = resolve_threads(n_threads)
    old = numba.get_num_threads()
    if n == old:  # nothing to set (saves a call per batch); restore only if the block changed it
        try:
            yield n
        finally:
            if numba.get_num_threads() != old:
                numba.set_num_threads(old)
        return
    numba.set_num_threads(n)
    try:
        yield n
    finally:
        numba.set_num_threads(old)
