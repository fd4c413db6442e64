"""Scoped Numba thread counts."""

from __future__ import annotations

import contextlib
import os
import threading
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


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Return the process's worker threads for :func:`over_ranges` (started on first use, kept for later calls)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(1, max_threads() - 1), thread_name_prefix="jkofast")
        return _POOL


def _forget_pool() -> None:
    # a forked child has none of the parent's threads: it starts its own pool on first use
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def over_ranges(kernel, n: int, n_threads: int | None, *args) -> None:
    """Call ``kernel(*args, lo, hi)`` over ranges covering ``0 .. n - 1``, on ``n_threads`` threads at once.

    For a serial kernel over a batch (queries, pools) that releases the GIL (``nogil``, as every
    jkofast kernel): the items are cut into ranges of about a quarter of an even share each (at
    least one item), which the threads take in turn (an expensive item does not hold up a fixed
    share). The calling thread is one of them; the others are worker threads kept for the
    process's later calls, so a call starts no thread. One thread, or
    one item, calls the kernel once in this thread. Each item must write only its own outputs, so
    the thread count never changes a result. Where an item costs milliseconds this parallelises
    as a ``prange`` driver would, and the serial kernel compiles in about a third of the time
    (a ``parallel=True`` kernel links and optimises its whole call tree twice). An exception in
    any range is raised here once every thread has stopped.
    """
    t = min(resolve_threads(n_threads), n)
    if t <= 1:
        kernel(*args, 0, n)
        return
    step = -(-n // (4 * t))
    starts = iter(range(0, n, step))
    take = threading.Lock()

    def work() -> None:
        while True:
            with take:
                lo = next(starts, None)
            if lo is None:
                return
            kernel(*args, lo, min(lo + step, n))

    pool = _pool()
    helpers = [pool.submit(work) for _ in range(t - 1)]
    try:
        work()
    finally:
        errors = [f.exception() for f in helpers]
    for e in errors:
        if e is not None:
            raise e
