"""The third hook into Numba internals (``jkofast._numba.entry_point``) and its version guard."""

from __future__ import annotations

import numba
import numpy as np

from jkofast import _numba


@numba.njit(cache=False)
def _add_one(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] + 1.0


def test_entry_point_calls_the_compiled_overload():
    x, out = np.arange(3.0), np.zeros(3)
    assert _numba.entry_point(_add_one, (x, out)) is None  # nothing compiled yet: the dispatcher
    _add_one(x, out)
    ep = _numba.entry_point(_add_one, (x, out))
    if not _numba._HOOKS_TESTED:  # an untested Numba: never the internals
        assert ep is None
        return
    got = np.zeros(3)
    ep(x, got)
    np.testing.assert_array_equal(got, out)
    assert _numba.entry_point(_add_one, (x.astype(np.float32), out)) is None  # another overload


def test_an_untested_numba_goes_through_the_dispatcher(monkeypatch):
    x, out = np.arange(3.0), np.zeros(3)
    _add_one(x, out)
    monkeypatch.setattr(_numba, "_HOOKS_TESTED", False)
    assert _numba.entry_point(_add_one, (x, out)) is None
    assert _numba.entry_point(object(), (x,)) is None  # no overloads table (internals moved)
