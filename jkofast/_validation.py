"""Input checks shared by every wrapper. Errors name the offending argument."""

from __future__ import annotations

import json
import numbers
import os

import numpy as np

__all__ = [
    "FLOAT_DTYPES",
    "PartialBatchError",
    "PartialBatchWarning",
    "QueryIndexError",
    "QueryRejects",
    "as_csr",
    "as_float_array",
    "check_bool",
    "check_csr",
    "check_finite",
    "check_int",
    "check_offsets",
    "check_positive",
    "check_same_length",
    "check_simplex",
    "check_texts",
    "keep_segments",
    "normalise_mass",
    "read_json_file",
    "rescale_rows_csr",
    "rescale_rows_dense",
    "segment_any",
    "summarise_errors",
]

FLOAT_DTYPES = (np.float32, np.float64)


def as_float_array(
    x,
    name: str,
    *,
    dtype=None,
    ndim: int | None = None,
    allow_empty: bool = False,
    finite: bool = True,
    copy: bool = False,
) -> np.ndarray:
    """Coerce to a C-contiguous float array.

    ``dtype=None`` keeps float32/float64 input and turns integer/bool input into float64;
    other dtypes (complex, object, strings) raise ``TypeError``.
    """
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind in "cSUMmV":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if dtype is None:
        dtype = arr.dtype if arr.dtype in FLOAT_DTYPES else np.float64
    dtype = np.dtype(dtype)
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: unsupported dtype {dtype}; use float32 or float64")
    arr = np.ascontiguousarray(arr, dtype=dtype)
    if copy:
        arr = arr.copy()
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if finite:
        check_finite(arr, name)
    return arr


def check_finite(arr: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` (with the first flat index) if ``arr`` holds a NaN or an inf."""
    if not np.all(np.isfinite(arr)):
        bad = np.flatnonzero(~np.isfinite(np.ravel(arr)))
        raise ValueError(f"{name} contains NaN or inf (first at flat index {int(bad[0])})")


def check_positive(value, name: str, *, strict: bool = True) -> float:
    """Return ``value`` as a float after checking it is a finite real > 0 (``>= 0`` unless ``strict``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or (v <= 0 if strict else v < 0):
        raise ValueError(f"{name} must be {'> 0' if strict else '>= 0'} and finite, got {value!r}")
    return v


def check_int(value, name: str, *, min_value: int | None = None) -> int:
    """Return ``value`` as an int after checking it is an integer (not a bool) >= ``min_value``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    v = int(value)
    if min_value is not None and v < min_value:
        raise ValueError(f"{name} must be >= {min_value}, got {v}")
    return v


def check_simplex(p: np.ndarray, name: str, *, atol: float = 1e-4, normalise: bool = True) -> np.ndarray:
    """Check ``p`` is non-negative with positive mass; return it renormalised to sum 1 when ``normalise``."""
    if np.any(p < 0):
        raise ValueError(f"{name} must be non-negative (a probability vector)")
    s = float(p.sum())
    if not s > 0:
        raise ValueError(f"{name} must have positive total mass, got sum {s}")
    if normalise:
        return (p / s).astype(p.dtype, copy=False)
    if abs(s - 1.0) > atol:
        raise ValueError(f"{name} must sum to 1 (got {s})")
    return p


def check_same_length(name_a: str, a, name_b: str, b) -> None:
    """Raise ``ValueError`` naming both arguments when ``len(a) != len(b)``."""
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b} must have the same length, got {len(a)} and {len(b)}")


def check_offsets(offsets, n_total: int, name: str = "offsets") -> np.ndarray:
    """Return a ragged-batch pointer array as int64 after checking it starts at 0, never decreases, ends at n_total."""
    off = np.asarray(offsets)
    if off.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {off.dtype}")
    off = np.ascontiguousarray(off, dtype=np.int64)
    if off.ndim != 1 or off.size < 1:
        raise ValueError(f"{name} must be a 1-D array with at least one entry")
    if off[0] != 0 or off[-1] != n_total:
        raise ValueError(f"{name} must start at 0 and end at {n_total}, got {off[0]}..{off[-1]}")
    if np.any(np.diff(off) < 0):
        raise ValueError(f"{name} must be non-decreasing")
    return off


def check_csr(
    indptr, indices, data, n_cols: int | None = None, name: str = "X", *, data_dtype=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check and coerce canonical CSR given as three arrays: int64 indptr/indices, sorted, no duplicates.

    Non-canonical input (unsorted or duplicate column indices) raises ``ValueError``;
    scipy users can call ``X.sum_duplicates(); X.sort_indices()`` first (``as_csr`` does).
    """
    for part, arr in (("indptr", indptr), ("indices", indices)):
        a = np.asarray(arr)
        if a.size and a.dtype.kind not in "iu":  # a float would be truncated to an id silently
            raise TypeError(f"{name}: {part} must be an integer array, got dtype {a.dtype}")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    data = as_float_array(data, f"{name}.data", dtype=data_dtype, ndim=1, allow_empty=True)
    if indptr.ndim != 1 or indptr.size < 1 or indptr[0] != 0 or indptr[-1] != indices.size:
        raise ValueError(f"{name}: indptr must start at 0 and end at nnz={indices.size}")
    if indices.size != data.size:
        raise ValueError(f"{name}: indices and data lengths differ ({indices.size} vs {data.size})")
    d = np.diff(indptr)
    if np.any(d < 0):
        raise ValueError(f"{name}: indptr must be non-decreasing")
    if indices.size:
        if indices.min() < 0 or (n_cols is not None and indices.max() >= n_cols):
            raise ValueError(f"{name}: column index out of range [0, {n_cols})")
        # within-row strictly increasing <=> every consecutive diff > 0 except at row starts
        inc = np.diff(indices) > 0
        row_start = np.zeros(indices.size, dtype=bool)
        row_start[indptr[:-1][d > 0]] = True
        if not np.all(inc | row_start[1:]):
            raise ValueError(f"{name}: CSR is not canonical (column indices must be sorted and unique within each row)")
    return indptr, indices, data


def as_csr(X, name: str = "X", *, dtype=np.float32, canonicalise: bool = True):
    """Convert scipy.sparse input once into canonical CSR ``(indptr, indices, data, shape)``."""
    import scipy.sparse as sp

    if not sp.issparse(X):
        raise TypeError(f"{name} must be a scipy.sparse matrix, got {type(X).__name__}")
    X = sp.csr_matrix(X, dtype=dtype, copy=canonicalise)
    if canonicalise:
        X.sum_duplicates()
        X.sort_indices()
    ip, ix, dt = check_csr(X.indptr, X.indices, X.data, X.shape[1], name, data_dtype=dtype)
    return ip, ix, dt, X.shape


def normalise_mass(p: np.ndarray, name: str) -> np.ndarray:
    """Return ``p / sum(p)`` for a non-negative finite float array, also when the sum overflows.

    The plain division is used whenever the sum is finite (bit-identical to ``p / p.sum()``);
    otherwise ``p`` is first divided by its maximum.
    """
    s = p.sum()
    if not s > 0:
        raise ValueError(f"{name} must have positive total mass, got sum {s}")
    if np.isfinite(s):
        return p / s
    q = p / p.max()
    return q / q.sum()


# rows whose largest |entry| lies outside this range are rescaled (by a power of two, which is
# exact) before their norms are taken: squares of larger entries overflow, of smaller ones underflow
_ROW_SCALE_HI = 1e100
_ROW_SCALE_LO = 1e-100


def _pow2_scale(rowmax: np.ndarray) -> np.ndarray:
    """Return power-of-two factors that bring ``rowmax`` near 1 where it is out of range (1 elsewhere)."""
    need = (rowmax > _ROW_SCALE_HI) | ((rowmax > 0) & (rowmax < _ROW_SCALE_LO))
    f = np.ones(rowmax.shape[0])
    if need.any():
        _, e = np.frexp(rowmax[need])
        f[need] = np.ldexp(1.0, -e)
    return f


def rescale_rows_dense(Z: np.ndarray) -> np.ndarray:
    """Rescale the float64 rows of ``Z`` whose squared norm would over/underflow.

    Each such row is multiplied by a power of two (cosines unchanged, bit for bit); ``Z`` itself
    is returned when no row needs it.
    """
    if Z.dtype != np.float64 or Z.size == 0:
        return Z  # float32 rows are accumulated in float64: their squares cannot overflow
    rowmax = np.maximum(Z.max(axis=1), -Z.min(axis=1))
    f = _pow2_scale(rowmax)
    if np.all(f == 1.0):
        return Z
    return np.ascontiguousarray(Z * f[:, None])


def rescale_rows_csr(indptr: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Apply :func:`rescale_rows_dense` to CSR rows given by ``indptr`` / ``data`` (a new array only when needed)."""
    if data.dtype != np.float64 or data.size == 0:
        return data  # float32 data are accumulated in float64 by the kernels
    a = np.abs(data)
    nz = a[a > 0]
    if not nz.size or (nz.max() <= _ROW_SCALE_HI and nz.min() >= _ROW_SCALE_LO):
        return data
    lens = np.diff(indptr)
    rows = np.flatnonzero(lens > 0)
    rowmax = np.zeros(lens.shape[0])
    rowmax[rows] = np.maximum.reduceat(a, indptr[rows])
    return data * np.repeat(_pow2_scale(rowmax), lens)


class QueryRejects:
    """Per-query status codes and messages of a batch: the first rejection of a query wins.

    Attributes
    ----------
    status : ndarray int32 (n_queries,)
        0 = ok, else a code of :mod:`jkofast._status` (the kernels skip non-zero queries).
    errors : dict
        Query index -> message of its first rejection.
    """

    def __init__(self, n_queries: int):
        self.status = np.zeros(n_queries, np.int32)
        self.errors: dict[int, str] = {}

    def reject(self, mask, code: int, msg: str) -> None:
        """Give ``code`` and ``msg`` to every query in ``mask`` (bool per query) that is still ok."""
        for q in np.flatnonzero(mask & (self.status == 0)):
            self.status[q] = code
            self.errors[int(q)] = msg


class QueryIndexError(IndexError, ValueError):
    """A query index / pool position out of range (both an ``IndexError`` and a ``ValueError``).

    One class for the whole package (``jkofast.jko.solver.QueryIndexError`` and
    ``jkofast.pools.candidates.QueryIndexError`` are this class).
    """


class PartialBatchError(ValueError):
    """Some items (queries / pools) of a batch had invalid input; the others were computed.

    Attributes
    ----------
    result
        The output for the other items (what the call returns with ``errors="skip"``).
    errors : dict
        Item (query index or id) -> reason.
    """

    def __init__(self, message: str, result, errors: dict):
        super().__init__(message)
        self.result = result
        self.errors = errors


class PartialBatchWarning(UserWarning):
    """``errors="skip"``: some items of a batch were left out; the message lists them."""


def summarise_errors(errors: dict, n: int, what: str) -> str:
    """Format ``"2 of 5 pools have invalid input: reason; reason"`` (at most five reasons shown)."""
    keys = list(errors)[:5]
    shown = "; ".join(str(errors[k]) for k in keys)
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return f"{len(errors)} of {n} {what} have invalid input: {shown}{more}"


def check_bool(value, name: str) -> bool:
    """Return ``value`` as a ``bool``; anything but a bool / numpy bool is a ``TypeError`` naming ``name``.

    ``bool("no")`` is True, so a string or number would be a silent 'on'.
    """
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def segment_any(flags: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Return, per segment ``offsets[q]:offsets[q+1]`` of the flat boolean ``flags``, whether any is True.

    An empty segment gives False.
    """
    nq = offsets.shape[0] - 1
    if flags.size == 0:
        return np.zeros(nq, bool)
    cs = np.concatenate([[0], np.cumsum(flags.astype(np.int64))])
    return (cs[offsets[1:]] - cs[offsets[:-1]]) > 0


def keep_segments(offsets: np.ndarray, keep: np.ndarray, *arrays):
    """Keep the segments with ``keep[q]`` True, in order.

    Returns the new offsets and each flat array (ndarray rows along axis 0, or a list)
    restricted to them.
    """
    sizes = np.diff(offsets)
    new_off = np.zeros(int(np.count_nonzero(keep)) + 1, np.int64)
    np.cumsum(sizes[keep], out=new_off[1:])
    mask = np.repeat(keep, sizes)
    return new_off, tuple([x for x, k in zip(a, mask) if k] if isinstance(a, list) else a[mask] for a in arrays)


def read_json_file(path: str, *, missing: str, invalid: str):
    """Parse the JSON file ``path``; a missing or unreadable file raises ``ValueError``.

    Parameters
    ----------
    path : str
        The file to read (UTF-8 JSON).
    missing : str
        The message when ``path`` is not a file.
    invalid : str
        The message when it does not parse; `` (<parser error>)`` is appended.

    Returns
    -------
    object
        The parsed JSON value.

    Raises
    ------
    ValueError
        ``path`` is not a file, or not valid UTF-8 JSON.
    """
    if not os.path.isfile(path):
        raise ValueError(missing)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{invalid} ({exc})") from None


def check_texts(texts, name: str) -> list[str]:
    """Return ``texts`` as a list after checking it is a sequence of str, not one str (else ``TypeError``)."""
    if isinstance(texts, str):
        raise TypeError(f"{name} must be a list of str, not a single str (use [text])")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(t).__name__}")
    return texts
