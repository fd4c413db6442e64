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


def test_over_ranges_runs_at_most_n_threads_at_once_on_kept_workers():
    """The calling thread plus n_threads - 1 workers run ranges at once; a later call reuses the same workers.

    No timing: each thread's first range waits at a two-party barrier, which only passes when the
    calling thread and a worker are both inside a range.
    """
    import threading

    from jkofast import _threads

    if _threads.max_threads() < 2:
        pytest.skip("Numba was started with one thread")
    lock = threading.Lock()
    state = {"now": 0, "most": 0}
    idents: list[set] = [set(), set()]
    barriers = [threading.Barrier(2, timeout=60), threading.Barrier(2, timeout=60)]

    def kernel(call, lo, hi):
        me = (threading.get_ident(), threading.current_thread().name)
        with lock:
            first = me not in idents[call]
            idents[call].add(me)
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        if first:
            barriers[call].wait()
        with lock:
            state["now"] -= 1

    _threads.over_ranges(kernel, 16, 2, 0)
    _threads.over_ranges(kernel, 16, 2, 1)
    assert state["most"] == 2
    assert len(idents[0]) == len(idents[1]) == 2  # two threads per call, never more
    me = (threading.get_ident(), threading.current_thread().name)
    workers = (idents[0] | idents[1]) - {me}
    assert me in idents[0] and me in idents[1] and workers
    assert all(name.startswith("jkofast") for _, name in workers)
    assert len(workers) <= _threads._pool()._max_workers  # kept threads, not new ones per call


def test_over_ranges_works_in_a_forked_child():
    """A forked child has none of the parent's worker threads: it starts its own and finishes its ranges."""
    import multiprocessing as mp

    from jkofast import _threads

    _threads.over_ranges(lambda lo, hi: None, 8, 2)  # the parent's workers exist before the fork
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=_child_over_ranges, args=(q,))
    proc.start()
    got = q.get(timeout=60)
    proc.join(60)
    assert proc.exitcode == 0 and got == list(range(20))


def _child_over_ranges(q) -> None:
    from jkofast import _threads

    seen: list[int] = []
    _threads.over_ranges(lambda lo, hi: seen.extend(range(lo, hi)), 20, 2)
    q.put(sorted(seen))
