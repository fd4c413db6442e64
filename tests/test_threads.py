"""jkofast.numba_threads: sets the thread mask for a block and always restores it."""

from __future__ import annotations

import numba
import pytest

from jkofast import numba_threads
from jkofast._threads import max_threads


def test_sets_and_restores():
    old = numba.get_num_threads()
    with numba_threads(1) as n:
        assert n == 1 and numba.get_num_threads() == 1
    assert numba.get_num_threads() == old


def test_same_count_restores_a_change_made_inside():
    old = numba.get_num_threads()
    with numba_threads(old):
        numba.set_num_threads(1)
    assert numba.get_num_threads() == old


@pytest.mark.parametrize("n", [1, None])
def test_restores_after_an_exception(n):
    old = numba.get_num_threads()
    with pytest.raises(RuntimeError, match="boom"), numba_threads(n):
        numba.set_num_threads(1)
        raise RuntimeError("boom")
    assert numba.get_num_threads() == old


def test_clips_and_refuses_bad_counts():
    with numba_threads(10**6) as n:
        assert n == max_threads()
    with pytest.raises(ValueError, match="n_threads"), numba_threads(0):
        pass
    with pytest.raises(TypeError, match="n_threads"), numba_threads(1.5):
        pass
    with pytest.raises(TypeError, match="n_threads"), numba_threads(True):
        pass


@pytest.mark.parametrize("n", [1, 2, 7, 8, 33])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_over_ranges_calls_every_item_exactly_once(n, threads, monkeypatch):
    """Ranges are disjoint, cover 0..n-1, each call gets the extra arguments; one thread calls once here."""
    import threading

    from jkofast import _threads

    monkeypatch.setattr(_threads, "max_threads", lambda: 4)
    calls, seen = [], []

    def kernel(tag, lo, hi):
        calls.append((tag, lo, hi, threading.get_ident()))
        seen.extend(range(lo, hi))

    _threads.over_ranges(kernel, n, threads, "x")
    assert sorted(seen) == list(range(n))
    assert all(c[0] == "x" and c[1] < c[2] for c in calls)
    t = min(threads, n)
    if t == 1:
        assert [c[1:3] for c in calls] == [(0, n)] and calls[0][3] == threading.get_ident()
    else:
        assert len(calls) == -(-n // -(-n // (4 * t)))  # about four ranges per thread


def test_over_ranges_reraises_a_kernel_error_and_refuses_bad_counts():
    from jkofast._threads import over_ranges

    def kernel(lo, hi):
        if lo <= 3 < hi:
            raise ValueError("item 3")

    with pytest.raises(ValueError, match="item 3"):
        over_ranges(kernel, 10, 2)
    with pytest.raises(ValueError, match="n_threads"):
        over_ranges(kernel, 10, 0)
