"""Cosine similarity among the rows of sparse (CSR) matrices: within a pool, per pool of a batch, across two sets.

The wrappers validate and coerce their inputs, rescale rows whose squared norm would over- or
underflow (a power of two, so cosines are unchanged) and call the kernels of
:mod:`jkofast.kernels.sparse.cosine`; an all-zero row has cosine 0 with every row.
"""

from __future__ import annotations

import numpy as np

from jkofast._threads import numba_threads
from jkofast._validation import as_csr, check_offsets, rescale_rows_csr
from jkofast.kernels.sparse import cosine as _kc

__all__ = ["cosine_cross", "cosine_pools", "cosine_rows"]


def _csr_arrays(X, name):
    """Return scipy ``X`` as canonical CSR arrays + shape, its rows rescaled where norms would over/underflow."""
    ip, ix, dt, shape = as_csr(
        X, name, dtype=np.asarray(X.data).dtype if np.asarray(X.data).dtype in (np.float32, np.float64) else np.float64
    )
    # rows whose squared norm would over/underflow: rescale (a power of two; cosines unchanged)
    return ip, ix, rescale_rows_csr(ip, dt), shape


def _out_dtype(dtype):
    """Return ``dtype`` as a numpy dtype after checking it is float32 or float64 (``TypeError``)."""
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise TypeError(f"dtype must be float32 or float64, got {dt}")
    return dt


def cosine_rows(X, rows=None, dtype=np.float64) -> np.ndarray:
    """Pairwise cosine similarity among rows of a sparse matrix.

    Parameters
    ----------
    X : scipy.sparse matrix (n, V)
    rows : int array (m,), optional
        Row subset (default all rows).
    dtype : float32 or float64

    Returns
    -------
    ndarray (m, m)
        ``cos(i, j) = <x_i, x_j> / (|x_i| |x_j|)`` (float64 accumulation), 0 for all-zero rows,
        diagonal 1 for non-zero rows.

    Raises
    ------
    TypeError
        ``X`` not scipy.sparse, non-integer ``rows``, an unsupported ``dtype``.
    ValueError
        ``rows`` not 1-D or out of range.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]))
    >>> cosine_rows(X).round(4).tolist()
    [[1.0, 0.7071, 0.0], [0.7071, 1.0, 0.0], [0.0, 0.0, 0.0]]
    """
    dtype = _out_dtype(dtype)
    ip, ix, dt, shape = _csr_arrays(X, "X")
    if rows is None:
        rows = np.arange(shape[0], dtype=np.int64)
    else:
        rows = np.asarray(rows)
        if rows.size and rows.dtype.kind not in "iu":
            raise TypeError(f"rows must be an integer array, got dtype {rows.dtype}")
        rows = np.ascontiguousarray(rows, dtype=np.int64)
    if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= shape[0])):
        raise ValueError(f"rows must be a 1-D array of row indices in [0, {shape[0]})")
    out = np.empty((rows.size, rows.size), dtype)
    _kc.cosine_rows(ip, ix, dt, rows, shape[1], out)
    return out


def cosine_pools(X, offsets, dtype=np.float64, n_threads: int | None = None):
    """Per-pool pairwise cosines of contiguous row blocks ``X[offsets[q]:offsets[q+1]]``.

    Parameters
    ----------
    X : scipy.sparse matrix (n, V)
    offsets : int array (n_pools + 1,)
        Pool boundaries: starts at 0, non-decreasing, ends at n.
    dtype : float32 or float64
    n_threads : int, optional
        Numba threads for this call; results do not depend on it.

    Returns
    -------
    flat : ndarray (sum of m_q**2,)
        Pool q's m_q x m_q block (as :func:`cosine_rows`), row-major, is
        ``flat[out_offsets[q]:out_offsets[q+1]].reshape(m_q, m_q)``.
    out_offsets : int64 ndarray (n_pools + 1,)
    """
    dtype = _out_dtype(dtype)
    ip, ix, dt, shape = _csr_arrays(X, "X")
    off = check_offsets(offsets, shape[0])
    m = np.diff(off)
    out_off = np.zeros(off.size, np.int64)
    np.cumsum(m * m, out=out_off[1:])
    out = np.empty(out_off[-1], dtype)
    with numba_threads(n_threads):
        _kc.cosine_pools(ip, ix, dt, off, shape[1], out_off, out)
    return out, out_off


def cosine_cross(A, B, dtype=np.float64, n_threads: int | None = None) -> np.ndarray:
    """Cosine between every row of ``A`` (n_a, V) and every row of ``B`` (n_b, V).

    Returns
    -------
    ndarray (n_a, n_b) of ``dtype``
        As :func:`cosine_rows` (0 where either row is all-zero).

    Raises
    ------
    ValueError
        ``A`` and ``B`` have different numbers of columns.
    """
    dtype = _out_dtype(dtype)
    a = _csr_arrays(A, "A")
    b = _csr_arrays(B, "B")
    if a[3][1] != b[3][1]:
        raise ValueError(f"A and B must have the same number of columns, got {a[3][1]} and {b[3][1]}")
    if a[2].dtype != b[2].dtype:
        b = (b[0], b[1], b[2].astype(a[2].dtype), b[3])
    out = np.empty((a[3][0], b[3][0]), dtype)
    with numba_threads(n_threads):
        _kc.cosine_cross(a[0], a[1], a[2], b[0], b[1], b[2], a[3][1], out)
    return out
