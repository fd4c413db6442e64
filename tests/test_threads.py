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
