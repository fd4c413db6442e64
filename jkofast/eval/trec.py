"""TREC run and qrels files: read, write (atomically), dict and array forms.

Formats read (plain text or ``.gz``; blank lines and ``#`` comment lines are skipped):

* runs: 6 whitespace-separated columns ``qid Q0 docid rank score tag`` (TREC), or 3
  tab/whitespace-separated columns ``qid docid score`` (BEIR-style TSV, optional header
  line such as ``query-id corpus-id score``);
* qrels: 4 columns ``qid iter docid rel`` (TREC) or 3 columns ``qid docid rel`` (BEIR TSV,
  optional header).  Labels are integers; label-0 and negative lines are kept.

A query or doc id repeated inside a query keeps its *last* value (dict semantics, as
pytrec_eval's parsers).  A malformed line raises ``ValueError("<file>:<line>: ...")``.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
from dataclasses import dataclass

import numpy as np

from jkofast._validation import check_offsets
from jkofast.eval.runio import atomic_open, format_run, iter_rows

__all__ = [
    "QrelsArrays",
    "RunArrays",
    "read_qrels",
    "read_qrels_arrays",
    "read_run",
    "write_run",
]


# QrelsArrays repeats this shape on purpose: two public types (float ``scores`` / int ``labels``), shared helpers
@dataclass
class RunArrays:
    """A run in ragged-array form.

    Attributes
    ----------
    query_ids : list of str
        Query ids, one per row.
    offsets : ndarray of int64, shape (n_queries + 1,)
        Row ``i`` is ``doc_ids[offsets[i]:offsets[i + 1]]``.
    doc_ids : ndarray of str, shape (n,)
        Document ids, in file / ranked order within each query.
    scores : ndarray of float64, shape (n,)
        Scores aligned with ``doc_ids``.
    """

    query_ids: list
    offsets: np.ndarray
    doc_ids: np.ndarray
    scores: np.ndarray

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docid: score}}`` (a repeated doc id keeps its last score)."""
        return _ragged_to_dict(self.query_ids, self.offsets, self.doc_ids, self.scores)

    @classmethod
    def from_dict(cls, run: dict) -> RunArrays:
        """Build from ``{qid: {docid: score}}`` (insertion order kept)."""
        return cls(*_dict_to_ragged(run, np.float64))


@dataclass
class QrelsArrays:
    """Qrels in ragged-array form (``query_ids``, ``offsets``, ``doc_ids``, int64 ``labels``)."""

    query_ids: list
    offsets: np.ndarray
    doc_ids: np.ndarray
    labels: np.ndarray

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{qid: {docid: label}}`` (a repeated doc id keeps its last label)."""
        return _ragged_to_dict(self.query_ids, self.offsets, self.doc_ids, self.labels)

    @classmethod
    def from_dict(cls, qrels: dict) -> QrelsArrays:
        """Build from ``{qid: {docid: label}}``."""
        return cls(*_dict_to_ragged(qrels, np.int64))


def _ragged_to_dict(query_ids, offsets, doc_ids, values) -> dict:
    """Ragged (query, doc, value) arrays -> ``{qid: {docid: value}}`` (last repeat wins)."""
    out: dict = {}
    ids = doc_ids.tolist()
    vals = values.tolist()
    for i, q in enumerate(query_ids):
        a, b = int(offsets[i]), int(offsets[i + 1])
        out.setdefault(q, {}).update(zip(ids[a:b], vals[a:b]))
    return out


def _dict_to_ragged(d: dict, dtype) -> tuple:
    """``{qid: {docid: value}}`` -> (query_ids, offsets, doc_ids, values), insertion order kept."""
    qids = [str(q) for q in d]
    lens, ids, vals = [], [], []
    for q in d:
        row = d[q]
        lens.append(len(row))
        ids.extend(row)
        vals.extend(row.values())
    off = np.zeros(len(qids) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return qids, off, _str_array(ids), np.asarray(vals, dtype=dtype)


def _str_array(ids) -> np.ndarray:
    return np.asarray(ids, dtype=str) if len(ids) else np.empty(0, dtype="<U1")


def _parses(s: str, conv) -> bool:
    """Whether ``conv(s)`` (``float`` or ``int``) accepts ``s``."""
    try:
        conv(s)
    except ValueError:
        return False
    return True


def _is_float(s: str) -> bool:
    return _parses(s, float)


def _is_int(s: str) -> bool:
    return _parses(s, int)


def _fields(path, widths: tuple, expected: str, is_value):
    """Yield (lineno, stripped fields, ncol) per line; every line has the first line's column count.

    The first line fixes ``ncol`` (one of ``widths``, else ``ValueError`` with ``expected``); a
    first line of 3 columns whose third is not a value (``is_value``) is a header and is skipped.
    """
    ncol = None
    for lineno, f in iter_rows(path):
        f = [x.strip() for x in f]
        if ncol is None:
            ncol = len(f)
            if ncol not in widths:
                raise ValueError(f"{path}:{lineno}: {expected}, got {ncol}")
            if ncol == 3 and not is_value(f[2]):
                continue  # header line
        if len(f) != ncol:
            raise ValueError(f"{path}:{lineno}: expected {ncol} columns, got {len(f)}")
        yield lineno, f, ncol


def _rows_to_dict(rows) -> dict:
    """(qid, docid, value) rows -> ``{qid: {docid: value}}`` in row order (a repeated pair keeps its last value)."""
    out: dict = {}
    for qid, docid, v in rows:
        d = out.get(qid)
        if d is None:
            d = out[qid] = {}
        d[docid] = v
    return out


def _check_row_ids(path, lineno: int, qid: str, docid: str) -> None:
    if not qid or not docid:
        raise ValueError(f"{path}:{lineno}: empty query or document id")
    if "\0" in qid or "\0" in docid:  # NumPy string arrays drop a trailing NUL: "d\0" would read as "d"
        raise ValueError(f"{path}:{lineno}: NUL character in an id")


def _read_run_rows(path):
    """Yield (qid, docid, score) triples, validating every line."""
    first = True
    expected = "expected 6 columns (qid Q0 docid rank score tag) or 3 columns (qid docid score)"
    for lineno, f, ncol in _fields(path, (3, 6), expected, _is_float):
        if first:
            first = False
            if ncol == 6 and not _is_float(f[4]):
                raise ValueError(f"{path}:{lineno}: score {f[4]!r} is not a number")
        if ncol == 6:
            qid, docid, score = f[0], f[2], f[4]
            if not _is_int(f[3]):
                raise ValueError(f"{path}:{lineno}: rank {f[3]!r} is not an integer")
        else:
            qid, docid, score = f
        try:
            s = float(score)
        except ValueError:
            raise ValueError(f"{path}:{lineno}: score {score!r} is not a number") from None
        if s != s:
            raise ValueError(f"{path}:{lineno}: score is NaN")
        _check_row_ids(path, lineno, qid, docid)
        yield qid, docid, s


def read_run(path) -> dict[str, dict[str, float]]:
    """Read a TREC (6-column) or TSV (3-column) run into ``{qid: {docid: score}}``.

    Parameters
    ----------
    path : str or os.PathLike
        Run file, optionally gzip-compressed (``.gz``).

    Returns
    -------
    dict
        Queries in file order; documents in file order; a repeated ``(qid, docid)`` keeps
        its last score.

    Raises
    ------
    ValueError
        Malformed line (wrong column count, non-numeric score or rank, NaN score), with
        the file name and line number.
    FileNotFoundError
        Missing file.
    """
    return _rows_to_dict(_read_run_rows(path))


def _read_qrels_rows(path):
    expected = "expected 4 columns (qid iter docid rel) or 3 columns (qid docid rel)"
    for lineno, f, ncol in _fields(path, (3, 4), expected, _is_int):
        if ncol == 4:
            qid, docid, rel = f[0], f[2], f[3]
        else:
            qid, docid, rel = f
        try:
            r = int(rel)
        except ValueError:
            raise ValueError(f"{path}:{lineno}: relevance {rel!r} is not an integer") from None
        _check_row_ids(path, lineno, qid, docid)
        yield qid, docid, r


def read_qrels(path) -> dict[str, dict[str, int]]:
    """Read TREC (4-column) or BEIR (3-column TSV, header optional) qrels.

    Returns ``{qid: {docid: label}}`` with label-0 and negative entries kept; a repeated
    ``(qid, docid)`` keeps its last label.

    Raises
    ------
    ValueError
        Malformed line (wrong column count, non-integer label), naming file and line.
    """
    return _rows_to_dict(_read_qrels_rows(path))


def read_qrels_arrays(path) -> QrelsArrays:
    """:func:`read_qrels` in :class:`QrelsArrays` form (duplicates resolved, last wins)."""
    return QrelsArrays.from_dict(read_qrels(path))


_BAD_ID = re.compile(r"[\s\0]")


def _check_ids(q: str, docs: list) -> None:
    """Reject an empty id or one with whitespace (the line would not read back)."""
    if not q or _BAD_ID.search(q):
        raise ValueError(f"query id {q!r}: ids must be non-empty and contain no whitespace or NUL")
    try:
        joined = "".join(docs)
    except TypeError:  # non-str ids (written with str())
        docs = [str(d) for d in docs]
        joined = "".join(docs)
    if docs and (not all(docs) or _BAD_ID.search(joined)):
        bad = next(d for d in docs if not d or _BAD_ID.search(d))
        raise ValueError(f"document id {bad!r} (query {q!r}): ids must be non-empty and contain no whitespace or NUL")


def _check_scores(q: str, docs: list, scores) -> None:
    try:
        v = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"run[{q!r}]: scores must be numbers") from None
    if np.isnan(v).any():
        j = int(np.flatnonzero(np.isnan(v))[0])
        raise ValueError(f"run[{q!r}][{docs[j]!r}]: score is NaN")


def _run_lines(run, tag, query_ids, doc_ids):
    """Yield (qid, [(docid, score)], is32) in the order to write."""
    if isinstance(run, dict):
        for q, d in run.items():
            if not isinstance(d, dict):
                raise TypeError(f"run[{q!r}] must be a dict of doc id -> score, got {type(d).__name__}")
            q = str(q)
            docs = list(d)
            _check_ids(q, docs)
            _check_scores(q, docs, list(d.values()))
            # trec_eval order: score desc, then doc id desc
            items = sorted(d.items(), key=lambda t: (t[1], t[0]), reverse=True)
            yield q, items, False
        return
    if isinstance(run, RunArrays):
        sc = np.asarray(run.scores)
        is32 = sc.dtype == np.float32
        ids = np.asarray(run.doc_ids).tolist()
        scl = sc.tolist()
        off = check_offsets(run.offsets, len(ids), "run.offsets")
        if len(scl) != len(ids):
            raise ValueError(f"run: doc_ids and scores must have the same length, got {len(ids)} and {len(scl)}")
        if len(run.query_ids) != off.shape[0] - 1:
            raise ValueError(f"run: {len(run.query_ids)} query_ids for {off.shape[0] - 1} rows of offsets")
        for i, q in enumerate(run.query_ids):
            a, b = int(off[i]), int(off[i + 1])
            q = str(q)
            docs = [str(x) for x in ids[a:b]]
            _check_ids(q, docs)
            _check_scores(q, docs, scl[a:b])
            yield q, list(zip(ids[a:b], scl[a:b])), is32
        return
    if isinstance(run, tuple) and len(run) == 2:
        idx = np.asarray(run[0])
        sc = np.asarray(run[1])
        if idx.ndim != 2 or sc.shape != idx.shape:
            raise ValueError("run: (indices, scores) must be 2-D arrays of the same shape")
        if query_ids is None or len(query_ids) != idx.shape[0]:
            raise ValueError("query_ids must be given, one per row of indices")
        if idx.dtype.kind in "iu" and doc_ids is None:
            raise ValueError("doc_ids (corpus ids) must be given to map integer indices")
        if idx.dtype.kind in "iu" and idx.size and idx.max() >= len(doc_ids):
            raise ValueError(f"indices: {int(idx.max())} is out of range for {len(doc_ids)} doc_ids")
        if idx.dtype.kind in "iu" and idx.size and idx.min() < -1:
            raise ValueError(f"indices: {int(idx.min())} is not a row id (-1 = padding)")
        try:
            sc = sc.astype(np.float64, copy=False) if sc.dtype != np.float32 else sc
        except (TypeError, ValueError):
            raise TypeError("run: scores must be numbers") from None
        if np.isnan(sc).any():
            raise ValueError("run: scores contain NaN")
        is32 = sc.dtype == np.float32
        for i, q in enumerate(query_ids):
            row = []
            for j in range(idx.shape[1]):
                d = idx[i, j]
                if idx.dtype.kind in "iu":
                    if d < 0:
                        continue  # padding
                    d = doc_ids[int(d)]
                s = float(sc[i, j])
                if s == float("-inf"):
                    continue  # padding
                row.append((str(d), s))
            _check_ids(str(q), [d for d, _ in row])
            yield str(q), row, is32
        return
    raise TypeError(f"run must be a dict, RunArrays or an (indices, scores) tuple, got {type(run).__name__}")


def write_run(path, run, tag: str = "jkofast", *, query_ids=None, doc_ids=None) -> None:
    """Write a 6-column TREC run atomically (temporary file, then ``os.replace``).

    Parameters
    ----------
    path : str or os.PathLike
        Output file; ``.gz`` writes gzip.
    run : dict, RunArrays or tuple
        ``{qid: {docid: score}}`` (written by score desc, ties by doc id desc, the order
        trec_eval uses); :class:`RunArrays` (written in the given order); or
        ``(indices, scores)`` 2-D arrays as returned by a retriever's ``search``, padded
        with ``-1`` / ``-inf`` (padding is skipped), with ``query_ids`` (one per row) and
        ``doc_ids`` (corpus ids indexed by ``indices``).
    tag : str
        Run tag (last column); no whitespace.

    Raises
    ------
    ValueError
        An empty id or one containing whitespace (the line would not read back), a NaN score,
        inconsistent ``RunArrays`` offsets, indices out of range of ``doc_ids``.
    TypeError
        Non-numeric scores, unsupported ``run`` type.

    Notes
    -----
    Scores are written as the shortest decimal that reads back to the same value of their dtype
    (:func:`jkofast.eval.runio.shortest_repr`: float32 ``RunArrays`` / ``(indices, scores)``
    scores as float32, everything else as float64 ``repr``), so :func:`read_run` gives the exact
    scores back and distinct scores stay distinct (no ties made by rounding: re-sorting by score,
    as trec_eval does, keeps the written order).  Ranks start at 1.
    """
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"tag must be a non-empty string without whitespace, got {tag!r}")
    batch: list = []  # (qid, [(docid, score)]) of the queries not written yet
    n_batch = 0
    with atomic_open(path, fsync=False) as raw, _maybe_gzip(raw, os.fspath(path)) as fh:
        is32 = False
        for q, items, is32 in _run_lines(run, tag, query_ids, doc_ids):
            batch.append((q, items))
            n_batch += len(items)
            if n_batch > 1 << 15:
                fh.write(_format_batch(batch, tag, is32).encode("utf-8"))
                batch, n_batch = [], 0
        fh.write(_format_batch(batch, tag, is32).encode("utf-8"))


def _maybe_gzip(raw, path: str):
    return gzip.GzipFile(fileobj=raw, mode="wb") if path.endswith(".gz") else contextlib.nullcontext(raw)


def _format_batch(batch: list, tag: str, is32: bool) -> str:
    """TREC lines of ``[(qid, [(docid, score)])]``, scores as the shortest repr of float32 (``is32``) or float64."""
    lens = [len(items) for _, items in batch]
    off = np.zeros(len(batch) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    docs = [d for _, items in batch for d, _ in items]
    scores = [float(s) for _, items in batch for _, s in items]
    return format_run(
        [q for q, _ in batch], off, docs, scores, tag, score_format="shortest", score_dtype=np.float32 if is32 else None
    )
