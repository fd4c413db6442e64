"""``jkofast.kernels.sorting``: ``sort_range`` (the kernels' integer sort), ``select_kth``, ``median``,
``searchsorted_left`` and ``argsort_stable`` against Python's ``sorted`` (and NumPy)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import reference as ref
from jkofast.kernels.sorting import argsort_stable, median, searchsorted_left, select_kth, sort_range

DTYPES = [np.int32, np.int64, np.uint16, np.uint32]  # the id dtypes the kernels sort


def _sort(x, lo, hi):
    y = x.copy()
    sort_range(y, np.int64(lo), np.int64(hi))
    return y


def _patterns(n, dtype, rng):
    info = np.iinfo(dtype)
    yield rng.integers(0, 1 << 14, n).astype(dtype)  # mostly distinct
    yield rng.integers(0, 3, n).astype(dtype)  # many duplicates
    yield np.arange(n).astype(dtype)  # sorted
    yield np.arange(n)[::-1].astype(dtype)  # reversed
    yield np.full(n, 7, dtype)  # all equal
    yield (np.minimum(np.arange(n), n - 1 - np.arange(n))).astype(dtype)  # organ pipe
    yield (np.arange(n) % 5).astype(dtype)  # sawtooth
    yield rng.choice(np.array([info.min, info.max, 0], dtype), n)  # the dtype's extremes


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 2, 14, 15, 16, 17, 31, 100, 1000])
def test_range_equals_sorted_and_leaves_the_rest(dtype, n):
    rng = np.random.default_rng(n)
    for x in _patterns(n, dtype, rng):
        pad = rng.integers(0, 100, 3).astype(dtype)
        y = np.concatenate([pad, x, pad])  # the range sits inside: the ends must stay untouched
        got = _sort(y, 3, 3 + n)
        np.testing.assert_array_equal(got, ref.sorted_range(y, 3, 3 + n))
        assert got.dtype == dtype


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300), st.data())
def test_any_int64_values_and_range(values, data):
    x = np.array(values, np.int64)
    lo = data.draw(st.integers(0, len(values)))
    hi = data.draw(st.integers(lo, len(values)))
    np.testing.assert_array_equal(_sort(x, lo, hi), ref.sorted_range(x, lo, hi))


def test_large_inputs_equal_numpy():
    # 200,000 ids: deep partitions (the stack keeps the larger part, at most log2(n) ranges), with
    # many duplicates and as a pattern (median-of-three on organ pipes) that unbalances the splits
    rng = np.random.default_rng(0)
    n = 200_000
    for x in (
        rng.integers(0, 1 << 40, n),
        rng.integers(0, 50, n),
        np.minimum(np.arange(n), n - 1 - np.arange(n)),
        np.tile(np.arange(1000), n // 1000),
    ):
        np.testing.assert_array_equal(_sort(x.astype(np.int64), 0, n), np.sort(x))


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("n", [1, 2, 14, 15, 16, 100, 1000])
def test_select_kth_is_the_value_of_that_rank(dtype, n):
    rng = np.random.default_rng(n)
    pats = [rng.integers(0, 3, n), rng.integers(0, 1 << 20, n), np.arange(n), np.arange(n)[::-1], np.full(n, 4)]
    if dtype == np.float64:
        x = rng.normal(size=n)
        x[rng.integers(0, n, 2)] = -np.inf  # the sparse scores' floor value is legal, NaN is not
        pats.append(x)
    for x in pats:
        x = x.astype(dtype)
        for k in sorted({0, n // 2, n - 1}):
            y = np.concatenate([[dtype(9)], x, [dtype(-9)]])
            v = select_kth(y, np.int64(1), np.int64(1 + n), np.int64(1 + k))
            assert v == ref.sorted_range(x, 0, n)[k]
            assert y[0] == 9 and y[-1] == -9  # outside the range: untouched
            assert sorted(y[1:-1].tolist()) == sorted(x.tolist())  # reordered, nothing lost


# the key dtypes the kernels argsort: scores (float64, float32), one-word ids (uint64), document and
# term ids (int64, int32)
ARG_DTYPES = [np.float64, np.float32, np.uint64, np.int64, np.int32]


def _keys(n, dtype, rng):
    yield from (x.astype(dtype) for x in _patterns(n, np.uint16, rng))  # ties, sorted, reversed, ...
    if np.dtype(dtype).kind == "f":
        x = rng.normal(size=n).astype(dtype)
        if n:
            x[rng.integers(0, n, n // 5 + 1)] = np.nan  # NaN goes last, in index order
        if n > 3:
            x[:4] = [-0.0, 0.0, -np.inf, np.inf]  # -0.0 and 0.0 are equal keys: index order
        yield x


@pytest.mark.parametrize("dtype", ARG_DTYPES)
@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 31, 32, 33, 100, 1000])
def test_argsort_stable_equals_a_stable_sort(dtype, n):
    rng = np.random.default_rng(n)
    for x in _keys(n, dtype, rng):
        got = argsort_stable(x)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, ref.argsort_stable(x))
        np.testing.assert_array_equal(got, np.argsort(x, kind="stable"))


@given(st.lists(st.one_of(st.floats(width=32), st.sampled_from([0.0, -0.0, 1.0])), max_size=300))
def test_argsort_stable_any_float_keys(values):
    x = np.array(values, np.float64)
    np.testing.assert_array_equal(argsort_stable(x), ref.argsort_stable(x))


def test_argsort_stable_large_inputs_equal_numpy():
    # many merge passes, runs already in order (copied unmerged) and ties across runs
    rng = np.random.default_rng(1)
    n = 100_003
    for x in (rng.normal(size=n), rng.integers(0, 20, n).astype(np.float64), np.arange(n) // 3, np.arange(n)[::-1]):
        np.testing.assert_array_equal(argsort_stable(x), np.argsort(x, kind="stable"))


@pytest.mark.parametrize("n", [1, 2, 3, 14, 15, 16, 17, 100, 101])
def test_median_is_the_middle_of_sorted_values(n):
    rng = np.random.default_rng(n)
    for x in (rng.normal(size=n), rng.integers(0, 3, n).astype(np.float64), np.arange(n)[::-1] * 0.5, np.full(n, -2.0)):
        y = x.copy()
        s = sorted(x.tolist())
        want = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        got = median(y)
        assert got == want == np.median(x)
        np.testing.assert_array_equal(y, x)  # the input is left as it was


@given(st.lists(st.integers(-50, 50), max_size=200), st.integers(-60, 60))
def test_searchsorted_left_is_the_first_index_not_below(values, v):
    a = np.array(sorted(values), np.int64)
    i = searchsorted_left(a, np.int64(v))
    assert i == sum(1 for t in a.tolist() if t < v)  # every key before it is below v, none after
    assert i == np.searchsorted(a, v)
