"""Read a TREC run fast: raw bytes -> Numba field scan -> :class:`~jkofast.eval.trec.RunArrays`.

:func:`read_run_arrays_fast` gives what :func:`jkofast.eval.trec.read_run` gives (the same
queries, documents and bit-identical scores) as ragged arrays whose document ids stay bytes
(a NumPy ``S`` array: :func:`jkofast.eval.metrics.evaluate` packs them without creating a
Python string per line). The common case — ASCII, 3 or 6 columns, plain decimal scores,
each query's lines contiguous — is parsed by the kernels of :mod:`jkofast.kernels.eval.parse`;
anything else falls back to the line-by-line reader, which accepts it or raises its
``ValueError`` naming the file and line.
"""

from __future__ import annotations

import gzip
import os

import numpy as np

from jkofast.eval.trec import RunArrays, read_run
from jkofast.kernels.eval import parse as _k

__all__ = ["read_run_arrays_fast"]


def _read_bytes(path) -> bytes:
    path = os.fspath(path)
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            return fh.read()
    with open(path, "rb") as fh:
        return fh.read()


def _slow(path) -> RunArrays:
    """Return the line-by-line reader's result as arrays (a repeated ``(qid, docid)`` keeps its last score)."""
    return RunArrays.from_dict(read_run(path))


def _parse(buf, n_threads):
    """Row arrays of the fast path, or None when the file needs the line-by-line reader."""
    from jkofast._threads import numba_threads, resolve_threads

    n_chunks = max(1, min(resolve_threads(n_threads) * 4, buf.shape[0] // (1 << 20) + 1))
    bounds = np.empty(n_chunks + 1, np.int64)
    _k.chunk_bounds(buf, n_chunks, bounds)
    lines = np.array([_k.count_lines(buf[bounds[c] : bounds[c + 1]]) for c in range(n_chunks)], np.int64)
    row_off = np.zeros(n_chunks + 1, np.int64)
    np.cumsum(lines, out=row_off[1:])
    n = int(row_off[-1])
    cols = [np.empty(n, np.int64) for _ in range(4)]
    scores = np.empty(n)
    rows = np.zeros(n_chunks, np.int64)
    ncols = np.zeros(n_chunks, np.int64)
    oks = np.zeros(n_chunks, np.bool_)
    with numba_threads(n_threads):
        _k.parse_run_chunks(buf, bounds, row_off, *cols, scores, rows, ncols, oks)
    used = ncols[ncols > 0]
    if not oks.all() or (used.size and (used != used[0]).any()):
        return None
    if (rows != lines).any():  # blank or comment lines: close the gaps
        keep = np.concatenate([np.arange(row_off[c], row_off[c] + rows[c]) for c in range(n_chunks)])
        cols = [x[keep] for x in cols]
        scores = scores[keep]
    return (*cols, scores)


def read_run_arrays_fast(path, n_threads: int | None = None) -> RunArrays:
    """Read a TREC (6-column) or 3-column run into :class:`RunArrays` with ``S`` (bytes) document ids.

    Parameters
    ----------
    path : str or os.PathLike
        Run file, optionally gzip-compressed (``.gz``).
    n_threads : int, optional
        Numba threads for the parse (chunks of whole lines in parallel; the result does not
        depend on it).

    Returns
    -------
    RunArrays
        Queries in file order; the documents of each query in file order; ``doc_ids`` a NumPy
        bytes array (UTF-8) on the fast path, a ``str`` array when the file needed the
        line-by-line reader. Metrics computed from either are identical to those of
        ``read_run(path)``.

    Raises
    ------
    ValueError
        A malformed file (from the line-by-line reader: file name and line number).
    FileNotFoundError
        A missing file.
    """
    raw = _read_bytes(path)
    buf = np.frombuffer(raw, dtype=np.uint8)
    parsed = _parse(buf, n_threads)
    if parsed is None:
        return _slow(path)
    q_start, q_len, d_start, d_len, scores = parsed
    rows = scores.shape[0]
    first = np.zeros(rows, np.bool_)
    _k.new_segments(buf, q_start, q_len, rows, first)
    heads = np.flatnonzero(first)
    qids = [raw[q_start[r] : q_start[r] + q_len[r]].decode("ascii") for r in heads.tolist()]
    if len(set(qids)) != len(qids):  # a query whose lines are not contiguous: the dict reader merges them
        return _slow(path)
    off = np.append(heads, rows).astype(np.int64)
    width = int(d_len[:rows].max()) if rows else 1
    ids = np.zeros((rows, width), np.uint8)
    _k.copy_ids(buf, d_start, d_len, rows, ids)
    doc_ids = ids.view(f"S{width}").reshape(rows)
    return RunArrays(qids, off, doc_ids, scores)
