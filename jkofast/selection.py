"""Public top-k helpers (validation + kernel call)."""

from __future__ import annotations

import numpy as np

from jkofast._numba import register_warmup
from jkofast._validation import as_float_array, check_int
from jkofast.kernels import topk as _k


def topk(scores, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest scores (descending; ties -> lowest index).

    ``scores`` 1-D or 2-D (row-wise).  Returns arrays of length/width ``min(k, n)``.
    """
    k = check_int(k, "k", min_value=0)
    s = as_float_array(scores, "scores", allow_empty=True, finite=False)
    if np.isnan(s).any():
        raise ValueError("scores contains NaN")
    if s.ndim == 1:
        kk = min(k, s.shape[0])
        idx = np.empty(kk, np.int64)
        val = np.empty(kk, s.dtype)
        _k.topk_select(s, k, idx, val)
        return idx, val
    if s.ndim == 2:
        kk = min(k, s.shape[1])
        idx = np.empty((s.shape[0], kk), np.int64)
        val = np.empty((s.shape[0], kk), s.dtype)
        _k.topk_rows(s, k, idx, val)
        return idx, val
    raise ValueError(f"scores must be 1-D or 2-D, got shape {s.shape}")


@register_warmup("topk")
def _warmup() -> None:
    for dt in (np.float32, np.float64):
        topk(np.array([1.0, 3.0, 2.0], dt), 2)
        topk(np.array([[1.0, 3.0, 2.0]], dt), 2)
        _k.topk_select_subset(
            np.array([1.0, 3.0, 2.0], dt), np.array([2, 0], np.int64), 2, 1, np.empty(1, np.int64), np.empty(1, dt)
        )
