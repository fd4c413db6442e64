import numpy as np
import pytest

import jkofast
import reference as ref
from jkofast._threads import numba_threads
from jkofast.kernels import topk as _k


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,k", [(0, 3), (1, 1), (5, 10), (50, 7), (200, 200)])
def test_topk_matches_oracle_with_ties(dtype, n, k):
    rng = np.random.default_rng(n + k)
    s = rng.integers(0, 5, n).astype(dtype)  # many exact ties
    idx, val = jkofast.topk(s, k)
    exp = ref.topk_desc_lowest_index(s, k)
    np.testing.assert_array_equal(idx, exp)
    np.testing.assert_array_equal(val, s[exp])
    assert val.dtype == dtype


def test_topk_neg_inf_and_nan():
    s = np.array([-np.inf, 0.0, -np.inf, 1.0])
    idx, _ = jkofast.topk(s, 4)
    np.testing.assert_array_equal(idx, [3, 1, 0, 2])
    with pytest.raises(ValueError, match="NaN"):
        jkofast.topk(np.array([1.0, np.nan]), 1)
    with pytest.raises(ValueError, match="k must be"):
        jkofast.topk(s, -1)


def test_topk_rows_thread_invariant():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 20, (64, 300)).astype(np.float32)
    with numba_threads(1):
        a = jkofast.topk(s, 10)
    with numba_threads(2):
        b = jkofast.topk(s, 10)
    np.testing.assert_array_equal(a[0], b[0])
    for r in range(s.shape[0]):
        np.testing.assert_array_equal(a[0][r], ref.topk_desc_lowest_index(s[r], 10))


def test_topk_subset():
    s = np.array([5.0, 1.0, 5.0, 3.0])
    cand = np.array([3, 2, 0], np.int64)
    idx = np.empty(2, np.int64)
    val = np.empty(2)
    assert _k.topk_select_subset(s, cand, 3, 2, idx, val) == 2
    np.testing.assert_array_equal(idx, [0, 2])
