"""``jkofast.eval.runio.strictly_decreasing``: the one rule that keeps a written ranking's order at float32."""

from __future__ import annotations

import numpy as np
import pytest

from jkofast.eval.runio import strictly_decreasing


def _naive(row) -> list:
    """Rank by rank: a score not below the previous rank's (at float32) becomes the float32 just below it."""
    out = [row[0]]
    for v in row[1:]:
        prev = np.float32(out[-1])
        out.append(v if v == -np.inf or np.float32(v) < prev else np.nextafter(prev, np.float32(-np.inf)))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_the_naive_rule(dtype):
    rng = np.random.default_rng(0)
    for _ in range(200):
        nq, k = rng.integers(1, 4), rng.integers(1, 9)
        v = np.sort(rng.choice([1.0, 0.5, 0.25, 1.0 + 1e-9], size=(nq, k)), axis=1)[:, ::-1].astype(dtype)
        v[:, k - rng.integers(0, k) :] = -np.inf  # empty ranks at the end
        got = strictly_decreasing(v)
        assert got.dtype == dtype
        for row, g in zip(v, got):
            np.testing.assert_array_equal(g, np.array(_naive(row.tolist()), dtype))
        finite = got[np.isfinite(got)]
        assert finite.size == 0 or np.all(np.diff(got.astype(np.float32), axis=1)[np.isfinite(got[:, 1:])] < 0)


def test_input_untouched_and_first_rank_kept():
    v = np.array([[2.0, 2.0, 3.0]])
    got = strictly_decreasing(v)
    assert v.tolist() == [[2.0, 2.0, 3.0]]
    assert got[0, 0] == 2.0 and got[0, 1] == np.nextafter(np.float32(2), np.float32(-np.inf))
    assert got[0, 2] < got[0, 1]
