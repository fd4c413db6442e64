"""Runs and qrels read fast: raw bytes -> Numba field scan -> arrays or metrics, no Python object per line.

* :func:`read_run_arrays_fast` gives what :func:`jkofast.eval.trec.read_run` gives (the same
  queries, documents and bit-identical scores) as ragged arrays whose document ids stay bytes
  (a NumPy ``S`` array: :func:`jkofast.eval.metrics.evaluate` packs them without creating a
  Python string per line).
* :func:`evaluate_files` computes the metrics of a run file against a qrels file — what
  ``evaluate(read_run(run), read_qrels(qrels), ...)`` computes, value for value — straight
  from the parsed bytes (:mod:`jkofast.kernels.eval.fileeval`): query and document ids are
  matched by hashing their bytes inside Numba, and the metrics come from the row arrays.

The common case — ASCII, runs of 3 or 6 columns with plain decimal scores, qrels of 3 or 4
columns with integer labels, each run query's lines contiguous — is parsed by the kernels of
:mod:`jkofast.kernels.eval.parse`, chunks of whole lines in parallel; anything else falls back
to the line-by-line readers of :mod:`jkofast.eval.trec`, which accept it or raise their
``ValueError`` naming the file and line.

Which run reader is kept for what (``benchmarks/tools/eval_readers.py``: one process, the
variants interleaved round by round after a warm-up round, median of 3 rounds; the files of
``make_eval_runs.py``; a 2-core machine shared with other jobs, load 12-16, so read the ratios):

==========================================  ==============  ==============
seconds                                     1,000 q x 100   10,000 q x 100
==========================================  ==============  ==============
``read_run`` (dict, line by line)           2.01            17.26
``read_run_arrays``, line by line           2.32            17.08
``runio.iter_chunks`` (streaming pools)     0.93            7.05
``read_run_arrays`` (Numba, this module)    0.34            1.92
``evaluate`` on line-by-line arrays         2.44            19.89
``evaluate(read_run_arrays(...))``          0.49            3.23
:func:`evaluate_files` (1 thread)           0.20            1.56
``evaluate_files_numpy`` (NumPy)            0.47            3.76
cold process: ``evaluate_files``            4.02            3.09
cold process: ``evaluate_files_numpy``      1.33            2.15
cold process: ``read_run_arrays``           4.91            3.22
cold process: line-by-line arrays           4.47            10.32
==========================================  ==============  ==============

* :func:`read_run_arrays` is this module's Numba parse (7-9x the line-by-line reader it used to
  be, and 3x in a fresh process at 10,000 queries); the line-by-line reader stays only as its
  fallback.  In a fresh process a small run costs Numba's import (1.1x the line-by-line time at
  1,000 queries), which :func:`jkofast.eval.metrics.evaluate`, the usual next call, pays anyway.
* :func:`evaluate_files` (this module) is the fastest evaluation of two files once Numba is
  loaded; ``jkofast evaluate --n-boot 0`` uses the NumPy-only engine
  (:mod:`jkofast.eval._npfiles`) because in a fresh process, without Numba's import, it is the
  faster one (1.4-3x).
* :func:`jkofast.eval.trec.read_run` stays line by line: the strict reference every engine is
  tested against, and the fallback that names the file and line of a malformed file.
* :func:`jkofast.eval.runio.iter_chunks` stays for pool files of any size: bounded memory,
  malformed lines reported and skipped, score strings kept verbatim for the output.
"""

from __future__ import annotations

import gzip
import os

import numba
import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads, resolve_threads
from jkofast.eval import metrics as _m
from jkofast.eval._conventions import file_setup
from jkofast.eval.metrics import EvalResult, warn_float32_range
from jkofast.eval.trec import RunArrays, _read_run_rows, _rows_to_dict, _str_array, read_qrels
from jkofast.kernels.eval import fileeval as _f
from jkofast.kernels.eval import parse as _k

__all__ = ["evaluate_files", "read_run_arrays", "read_run_arrays_fast"]

_CHUNK_BYTES = 1 << 18  # smallest parse chunk (16 chunks per thread below that many per chunk)


def _read_buffer(path) -> np.ndarray:
    """Return the bytes of ``path`` (gunzipped for ``.gz``) and a line feed after them, as a writable uint8 array.

    The extra line feed is the parse kernels' sentinel (their scans need no end check); the
    data are ``buf[:-1]``.  One read into the array: no ``bytes`` object in between.
    """
    path = os.fspath(path)
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            return np.frombuffer(bytearray(fh.read() + b"\n"), dtype=np.uint8)
    with open(path, "rb", buffering=0) as fh:
        size = os.fstat(fh.fileno()).st_size
        buf = np.empty(size + 1, np.uint8)
        got = fh.readinto(buf[:size]) if size else 0
        rest = fh.read() if got == size else b""
        if rest:  # a file that grew meanwhile: read it whole the plain way
            return np.frombuffer(bytearray(buf[:size].tobytes() + rest + b"\n"), dtype=np.uint8)
        buf[got] = 10
        return buf[: got + 1]


def _header_is_value(buf: np.ndarray, hdr: np.ndarray, kind: int) -> bool:
    """Whether the skipped first line's value field parses with Python (then it was data, not a header)."""
    text = buf[hdr[0] : hdr[1]].tobytes().decode("ascii")
    try:
        (float if kind == _k.RUN else int)(text)
    except ValueError:
        return False
    return True


def _parse_table(buf: np.ndarray, kind: int, n_threads):
    """Row arrays of the data lines, or None when the file needs the line-by-line reader.

    ``(pos, values, labels, offsets)``: ``pos`` (4, n) int64 = query id start, length,
    document id start, length of each row in ``buf``; float64 scores (runs) or int64 labels
    (qrels); the row offsets of the blocks of equal consecutive query ids.
    """
    data = buf[:-1]  # buf ends with the sentinel line feed
    if data.size and not data.all():
        # a NUL byte: NumPy's fixed-width bytes ids would drop it at the end of an id (``b"d\0"`` == ``b"d"``)
        return None
    n_chunks = max(1, min(resolve_threads(n_threads) * 16, data.shape[0] // _CHUNK_BYTES + 1))
    if data.shape[0] < 16 * _CHUNK_BYTES:  # a small file: one thread (no parallel region to wait on)
        n_threads = 1
    bounds = np.empty(n_chunks + 1, np.int64)
    _k.chunk_bounds(data, n_chunks, bounds)
    lines = np.zeros(n_chunks, np.int64)
    rows = np.zeros(n_chunks, np.int64)
    ncols = np.zeros(n_chunks, np.int64)
    oks = np.zeros(n_chunks, np.bool_)
    hdr = np.full(2, -1, np.int64)
    # dynamic scheduling: a descheduled thread on a shared machine does not hold up the others
    with numba_threads(n_threads), numba.parallel_chunksize(1):
        _k.scan_chunks(data, bounds, lines)
        row_off = np.zeros(n_chunks + 1, np.int64)
        np.cumsum(lines, out=row_off[1:])
        n = int(row_off[-1])
        pos = np.empty((4, n), np.int64)  # query id start, length; document id start, length
        values = np.empty(n if kind == _k.RUN else 0, np.float64)
        labels = np.empty(n if kind == _k.QRELS else 0, np.int64)
        first = np.empty(n, np.bool_)
        _k.parse_table_chunks(buf, bounds, row_off, kind, *pos, values, labels, first, rows, ncols, oks, hdr)
    used = ncols[ncols > 0]
    if not oks.all() or (used.size and (used != used[0]).any()):
        return None
    if hdr[0] >= 0 and _header_is_value(buf, hdr, kind):
        return None
    starts = row_off[:-1]
    if (rows != lines).any():  # blank, comment or header lines: close the gaps
        keep = np.concatenate([np.arange(row_off[c], row_off[c] + rows[c]) for c in range(n_chunks)])
        pos = np.ascontiguousarray(pos[:, keep])
        values = values[keep] if kind == _k.RUN else values
        labels = labels[keep] if kind == _k.QRELS else labels
        first = first[keep]
        starts = np.cumsum(rows) - rows
    q_start, q_len = pos[0], pos[1]
    for c in range(1, n_chunks):  # does a chunk's first row continue the previous row's query?
        r = int(starts[c])
        if rows[c] and r > 0:
            a, b, m = int(q_start[r]), int(q_start[r - 1]), int(q_len[r])
            first[r] = m != q_len[r - 1] or not np.array_equal(buf[a : a + m], buf[b : b + m])
    off = np.append(np.flatnonzero(first), first.shape[0]).astype(np.int64)
    return pos, values, labels, off


def _ids(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Return the byte ranges as a NumPy ``S`` array (zero-padded rows: ids hold no NUL on the fast path)."""
    rows = start.shape[0]
    width = int(length.max()) if rows else 1
    ids = np.zeros((rows, width), np.uint8)
    _k.copy_ids(buf, start, length, rows, ids)
    return ids.view(f"S{width}").reshape(rows)


def _str_list(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> list:
    """Return the byte ranges (ASCII) as a list of ``str``."""
    return _ids(buf, start, length).astype(str).tolist()


def _slow(path, every_line: bool = False) -> RunArrays:
    """Return the line-by-line reader's result as arrays.

    A repeated ``(qid, docid)`` keeps its last score (the dict reader's content), unless
    ``every_line`` and each query's lines are contiguous: then every line, in file order (what
    ``tie_break="given"`` ranks on the fast path).
    """
    if every_line:
        try:
            return _read_run_arrays_lines(path)  # every line checked: ValueError naming the file and line
        except NonContiguousQuery:
            pass  # the dict reader merges the query's lines
    return RunArrays.from_dict(_rows_to_dict(_read_run_rows(path)))


class NonContiguousQuery(ValueError):
    """:func:`read_run_arrays`: the lines of a query are not contiguous (a ``ValueError``)."""


def _read_run_arrays_lines(path) -> RunArrays:
    """:func:`read_run_arrays` line by line (every line checked: a ``ValueError`` names the file and line)."""
    qids: list[str] = []
    seen: set[str] = set()
    lens: list[int] = []
    ids: list[str] = []
    sc: list[float] = []
    cur = None
    for qid, docid, s in _read_run_rows(path):
        if qid != cur:
            if qid in seen:
                raise NonContiguousQuery(f"{path}: lines of query {qid!r} are not contiguous")
            seen.add(qid)
            qids.append(qid)
            lens.append(0)
            cur = qid
        lens[-1] += 1
        ids.append(docid)
        sc.append(s)
    off = np.zeros(len(qids) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return RunArrays(qids, off, _str_array(ids), np.asarray(sc, dtype=np.float64))


def read_run_arrays(path) -> RunArrays:
    """Read a TREC (6-column) or 3-column run into :class:`RunArrays`, keeping every line (duplicates too).

    ``path`` may be gzip-compressed (``.gz``).  The result holds the queries in file order and
    every line of each query in file order, ``doc_ids`` as a ``str`` array.

    Raises
    ------
    ValueError
        A malformed line (file name and line number), or the lines of a query that are not
        contiguous (a query that reappears after another query).
    FileNotFoundError
        A missing file.

    Notes
    -----
    The file is parsed by the Numba engine (module docstring); a file outside its layout, and
    a query whose lines are not contiguous, go to the line-by-line reader, which accepts the
    file or raises naming the file and line.
    """
    buf = _read_buffer(path)
    parsed = _parse_table(buf, _k.RUN, None)
    if parsed is None:
        return _read_run_arrays_lines(path)
    pos, scores, _, off = parsed
    q_start, q_len, d_start, d_len = pos
    heads = off[:-1]
    qids = _str_list(buf, q_start[heads], q_len[heads])
    if len(set(qids)) != len(qids):
        return _read_run_arrays_lines(path)  # raises NonContiguousQuery naming the query
    ids = _ids(buf, d_start, d_len).astype(str) if d_len.size else _str_array([])
    return RunArrays(qids, off, ids, scores)


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
    buf = _read_buffer(path)
    return _run_arrays(path, buf, _parse_table(buf, _k.RUN, n_threads), n_threads)


def _run_arrays(path, buf: np.ndarray, parsed, n_threads, every_line: bool = False) -> RunArrays:
    """:class:`RunArrays` of a parsed run (the line-by-line reader's when ``parsed`` is None or not contiguous)."""
    if parsed is None:
        return _slow(path, every_line)
    pos, scores, _, off = parsed
    q_start, q_len, d_start, d_len = pos
    heads = off[:-1]
    qids = _str_list(buf, q_start[heads], q_len[heads])
    if len(set(qids)) != len(qids):  # a query whose lines are not contiguous: the dict reader merges them
        return _slow(path)
    return RunArrays(qids, off, _ids(buf, d_start, d_len), scores)


def evaluate_files(
    run,
    qrels,
    metrics=None,
    gain: str = "linear",
    tie_break: str = "trec_eval",
    *,
    missing: str = "skip",
    n_threads: int | None = None,
    counts: bool = False,
):
    r"""Evaluate a run file against a qrels file: ``evaluate(read_run(run), read_qrels(qrels), ...)``, fast.

    The values are those of :func:`jkofast.eval.metrics.evaluate` on the dicts the line-by-line
    readers return (equal to pytrec_eval with the default conventions): the same queries in the
    same order, the same numbers.  On the fast path nothing is created per line: both files are
    parsed from their bytes, queries and documents are matched by hashing their id bytes inside
    Numba, each query's ranking is checked in one pass (sorted only when the file is not in
    trec_eval's order) and its metrics computed from the parsed arrays, queries in parallel.

    Parameters
    ----------
    run : str or os.PathLike
        Run file (TREC 6-column or ``qid docid score``; ``.gz`` ok).
    qrels : str or os.PathLike
        Qrels file (TREC 4-column or ``qid docid rel``, header optional; ``.gz`` ok).
    metrics : sequence of str or str, optional
        Metric names (see :func:`jkofast.eval.metrics.parse_metric`; default
        :data:`jkofast.eval.metrics.DEFAULT_METRICS`); ``diversity@k`` is not available here
        (it needs embeddings: use :func:`jkofast.eval.metrics.evaluate`).
    gain, tie_break, missing : str
        As :func:`jkofast.eval.metrics.evaluate`.  With ``tie_break="trec_eval"`` a document
        repeated in a query keeps its last score; with ``"given"`` every line counts, in file
        order.
    n_threads : int, optional
        Numba threads (the result does not depend on it).
    counts : bool
        Also return ``{"run_only": n, "qrels_only": m}``: run queries without judgments
        (skipped) and judged queries without run lines.

    Returns
    -------
    EvalResult or (EvalResult, dict)
        Per-query values, queries in run order (then, with ``missing="zero"``, the judged
        queries absent from the run, in qrels order).

    Raises
    ------
    ValueError
        Unknown metric, gain, tie_break or missing; ``diversity@k``; a malformed file (the
        line-by-line reader names the file and line); an exponential gain with a label
        above 1000.
    FileNotFoundError
        A missing file.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "run"), "w") as f:
    ...     _ = f.write("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    >>> with open(os.path.join(d, "qrels"), "w") as f:
    ...     _ = f.write("q1 0 d2 1\n")
    >>> evaluate_files(os.path.join(d, "run"), os.path.join(d, "qrels"), ["mrr@10", "p@1"]).means
    {'mrr@10': 0.5, 'p@1': 0.0}
    """
    gain_mode, tie_mode, names, kinds, ks = file_setup(metrics, gain, tie_break, missing)
    rbuf = _read_buffer(run)
    qbuf = _read_buffer(qrels)
    rp = _parse_table(rbuf, _k.RUN, n_threads)
    qp = _parse_table(qbuf, _k.QRELS, n_threads) if rp is not None else None
    fast = None
    if qp is not None and not (gain == "exponential" and qp[2].size and qp[2].max() > _m._EXP_LABEL_MAX):
        fast = _evaluate_parsed(rbuf, rp, qbuf, qp, names, kinds, ks, gain_mode, tie_mode, missing, n_threads)
    if fast is None:  # the line-by-line readers decide (and name the file and line of a malformed one)
        qd = read_qrels(qrels)
        ra = _run_arrays(run, rbuf, rp, n_threads, every_line=tie_break == "given")
        res = _m.evaluate(ra, qd, names, gain=gain, tie_break=tie_break, missing=missing, n_threads=n_threads)
        run_q = set(ra.query_ids)
        judged = {q for q, d in qd.items() if d}
        info = {"run_only": sum(q not in judged for q in run_q), "qrels_only": sum(q not in run_q for q in judged)}
    else:
        res, info = fast
        res.gain, res.tie_break = gain, tie_break
    return (res, info) if counts else res


def _describe_parsed(buf, pos, i: int) -> str:
    q = buf[pos[0, i] : pos[0, i] + pos[1, i]].tobytes().decode("utf-8", "replace")
    d = buf[pos[2, i] : pos[2, i] + pos[3, i]].tobytes().decode("utf-8", "replace")
    return f"query {q!r}, document {d!r}"


def _evaluate_parsed(rbuf, rp, qbuf, qp, names, kinds, ks, gain_mode, tie_mode, missing, n_threads):
    """``(EvalResult, counts)`` from the parsed tables, or None when a run query's lines are not contiguous."""
    pos, scores, _, off = rp
    qpos, _, qlabels, _ = qp
    if tie_mode == _m._k.TIE_TREC_EVAL:
        warn_float32_range(scores, lambda i: _describe_parsed(rbuf, pos, i), stacklevel=4)
    q_start, q_len = pos[0], pos[1]
    qq_start, qq_len = qpos[0], qpos[1]
    heads = off[:-1]
    qrels_group = np.empty(qq_start.shape[0], np.int64)
    run_group = np.empty(heads.shape[0], np.int64)
    n_groups, repeated = _f.match_queries(
        qbuf, qq_start, qq_len, rbuf, q_start[heads], q_len[heads], qrels_group, run_group
    )
    if repeated:
        return None
    qperm = np.argsort(qrels_group, kind="stable")
    qoff = np.zeros(n_groups + 1, np.int64)
    np.cumsum(np.bincount(qrels_group, minlength=n_groups), out=qoff[1:])
    sel = np.flatnonzero(run_group >= 0)
    q_lo, q_hi, q_group = off[sel], off[sel + 1], run_group[sel]
    qids = _str_list(rbuf, q_start[heads[sel]], q_len[heads[sel]])
    extra = np.setdiff1d(np.arange(n_groups), q_group)  # judged, absent from the run (group = qrels order)
    if missing == "zero" and extra.size:
        q_lo = np.concatenate([q_lo, np.zeros(extra.size, np.int64)])
        q_hi = np.concatenate([q_hi, np.zeros(extra.size, np.int64)])
        q_group = np.concatenate([q_group, extra])
        first = qperm[qoff[extra]]
        qids += _str_list(qbuf, qq_start[first], qq_len[first])
    queries = np.stack([q_lo, q_hi, q_group])
    out = np.zeros((queries.shape[1], kinds.shape[0]), np.float64)
    n_ret = np.zeros(queries.shape[1], np.int64)
    with numba_threads(n_threads), numba.parallel_chunksize(64):
        _f.evaluate_rows(
            rbuf,
            pos[2:],
            scores,
            queries,
            qbuf,
            qpos[2:],
            qlabels,
            qperm,
            qoff,
            kinds,
            ks,
            gain_mode,
            tie_mode,
            out,
            n_ret,
        )
    values = np.ascontiguousarray(out.T)
    res = EvalResult(qids, {n: values[i] for i, n in enumerate(names)}, n_ret)
    return res, {"run_only": int(heads.shape[0] - sel.shape[0]), "qrels_only": int(extra.size)}


@register_warmup("evaluate_files")
def _warmup() -> None:
    """Compile the byte parser and the file-metric kernels (both tie modes) on two tiny files."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        rp, qp = os.path.join(tmp, "run"), os.path.join(tmp, "qrels")
        with open(rp, "w") as fh:
            fh.write("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
        with open(qp, "w") as fh:
            fh.write("q1 0 d2 1\n")
        for tie in ("trec_eval", "given"):
            evaluate_files(rp, qp, tie_break=tie)
        read_run_arrays_fast(rp)
