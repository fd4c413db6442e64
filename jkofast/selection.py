"""Public top-k selection (validation + a call of :mod:`jkofast.kernels.topk`)."""

from __future__ import annotations

import numpy as np

from jkofast._numba import register_warmup
from jkofast._validation import as_float_array, check_int
from jkofast.kernels import topk as _k

__all__ = ["topk"]


def topk(scores, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the indices and values of the ``k`` largest scores, best first.

    Order: score descending, ties broken by the lowest index (deterministic at any thread
    count); ``-inf`` is a legal score and ranks last.

    Parameters
    ----------
    scores : float32 or float64 ndarray, (n,) or (n_rows, n)
        Row-wise for 2-D input; integer / bool input is taken as float64.
    k : int
        Items to keep (>= 0); ``min(k, n)`` are returned.

    Returns
    -------
    indices : int64 ndarray, (min(k, n),) or (n_rows, min(k, n))
    values : ndarray of the scores' dtype, same shape
        ``scores`` at ``indices``.

    Raises
    ------
    TypeError
        ``k`` not an integer, or a non-real dtype.
    ValueError
        ``k < 0``, a NaN score, or ``scores`` not 1-D / 2-D.

    Examples
    --------
    >>> import numpy as np
    >>> from jkofast import topk
    >>> idx, val = topk(np.array([1.0, 3.0, 3.0, 2.0]), 2)
    >>> idx.tolist(), val.tolist()
    ([1, 2], [3.0, 3.0])
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
    """Compile what the main job runs: row-wise top-k of float32 score rows (the dense search)."""
    topk(np.array([[1.0, 3.0, 2.0]], np.float32), 2)


@register_warmup("topk.variants")
def _warmup_variants() -> None:
    """Compile the other top-k kernels on 3-element inputs of both float dtypes."""
    for dt in (np.float32, np.float64):
        topk(np.array([1.0, 3.0, 2.0], dt), 2)
        topk(np.array([[1.0, 3.0, 2.0]], dt), 2)
        _k.topk_select_subset(
            np.array([1.0, 3.0, 2.0], dt), np.array([2, 0], np.int64), 2, 1, np.empty(1, np.int64), np.empty(1, dt)
        )
