"""Scoped Numba thread counts."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from jkofast import _config

__all__ = ["max_threads", "numba_threads", "over_ranges", "resolve_threads"]


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


def over_ranges(kernel, n: int, n_threads: int | None, *args) -> None:
    """Call ``kernel(*args, lo, hi)`` over ranges covering ``0 .. n - 1``, on ``n_threads`` threads at once.

    For a serial kernel over a batch (queries, pools) that releases the GIL (``nogil``, as every
    jkofast kernel): the items are cut into ranges of about a quarter of an even share each, which
    the threads take in turn (an expensive item does not hold up a fixed share). One thread, or
    one item, calls the kernel once in this thread. Each item must write only its own outputs, so
    the thread count never changes a result. Where an item costs milliseconds this parallelises
    as a ``prange`` driver would, and the serial kernel compiles in about a third of the time
    (a ``parallel=True`` kernel links and optimises its whole call tree twice).
    """
    t = min(resolve_threads(n_threads), n)
    if t <= 1:
        kernel(*args, 0, n)
        return
    step = -(-n // (4 * t))
    with ThreadPoolExecutor(max_workers=t) as ex:
        for fut in [ex.submit(kernel, *args, lo, min(lo + step, n)) for lo in range(0, n, step)]:
            fut.result()
