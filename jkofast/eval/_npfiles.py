r"""Run and qrels files evaluated with NumPy only: the engine of ``jkofast evaluate --n-boot 0``.

A process that evaluates two files once spends more on importing Numba (≈ 0.4 s of CPU) and
loading cached kernels than on the work itself (docs/performance.md, "Process start (CLI)").
This engine computes what :func:`jkofast.eval.fastread.evaluate_files` computes — the same
queries in the same order, per-query values equal bit for bit — with whole-array NumPy
operations, and imports nothing that imports Numba.

It takes the common layout of the two formats and hands everything else back (``None``) to the
Numba engine, whose readers accept it or raise their ``ValueError`` naming the file and line:

* ASCII text; fields split on spaces, or on single tabs (a file holding a tab must separate
  every field with exactly one tab); ``\n`` or ``\r\n`` line ends; blank lines anywhere;
* every line with the first line's column count: runs of 6 (``qid Q0 docid rank score tag``)
  or 3 (``qid docid score``) columns, qrels of 4 (``qid iter docid rel``) or 3 columns, a
  3-column first line whose value is not a number being a header;
* no comment line; ids of at most 248 bytes; each run query's lines contiguous; finite scores;
  a rank field of ``[+-]digits``.

Parsing goes by blocks of whole lines (``_BLOCK`` bytes, one reused buffer): per block one pass
finds every field (maximal runs of bytes above the space) and the separators show where lines
end.  Scores of ``[+-]digits[.digits]`` are computed for the whole block by Clinger's fast path
(:func:`_decimals`: equal to Python's ``float``); other scores go through NumPy's bytes-to-float
cast, which calls ``float`` on each field (the value the line-by-line reader stores), labels
through its bytes-to-int cast (Python's ``int``).  Ids are packed into big-endian uint64 words, so
that comparing words compares bytes in ``strcmp`` order; queries and documents are matched
through a 64-bit hash of (query group, document words), every match confirmed on the words
(a hash collision between two different ids hands the files back).

Ranking and metrics follow :mod:`jkofast.kernels.eval.fileeval` and
:func:`jkofast.kernels.eval.metrics.query_metrics` step for step: trec_eval's order (float32
score descending, then document id descending; a repeated document keeps its last line) or the
file order; sums accumulate term by term in rank order (never NumPy's pairwise ``sum``), the
rank discount is ``math.log2`` (the C library's ``log2``, as the kernels' ``np.log2``), so the
per-query values are the Numba engine's to the last bit (``tests/eval/test_npfiles.py``).
"""

from __future__ import annotations

import contextlib
import gzip
import math
import os
from typing import NamedTuple

import numpy as np

try:
    from numpy._core import multiarray as _multiarray
except ImportError:  # NumPy < 2
    from numpy.core import multiarray as _multiarray

from jkofast.eval._conventions import (
    _EXP_LABEL_MAX,
    AP,
    GAIN_EXPONENTIAL,
    HIT,
    NDCG,
    PRECISION,
    RECALL,
    RR,
    TIE_TREC_EVAL,
    file_setup,
    warn_float32_range,
)

__all__ = ["FileScores", "evaluate_files_numpy"]

_PAD = 256  # zero bytes after the text: room for the fixed-width windows that read ids and values
_MAX_FIELD = _PAD - 8  # longest id or value this engine reads (longer: the Numba engine)
_LF, _TAB, _CR, _HASH = 10, 9, 13, 35
_RUN, _QRELS = 0, 1
_FILTER_BITS = 20  # bits of the run-row prefilter (a 1 MiB table)
_BLOCK = 1 << 18  # bytes read per block (whole lines; a longer line grows the buffer); fits a core's cache
_POW10 = np.array([10.0**i for i in range(23)])  # exact doubles
_POW10_INT = np.array([10**i for i in range(20)], np.uint64)
_LOW_MASK = np.array([(1 << (8 * n)) - 1 for n in range(9)], np.uint64)  # the n low bytes
_ZEROS = np.uint64(0x3030303030303030)  # eight '0'
_HEAD_MASK = np.array([((1 << (8 * n)) - 1) << (64 - 8 * n) for n in range(9)], np.uint64)  # the n first bytes
_MANT_MAX = 2**53
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53))


class FileScores(NamedTuple):
    """Per-query metric values of a run file against a qrels file (:func:`evaluate_files_numpy`).

    Attributes
    ----------
    query_ids : list of str
        Evaluated queries: run order, then (``missing="zero"``) judged queries absent from the
        run in qrels order.
    per_query : dict of str to ndarray of float64
        Canonical metric name -> values aligned with ``query_ids``.
    n_ret : ndarray of int64
        Ranked documents used per query (after de-duplication).
    run_only : int
        Run queries without judgments (skipped).
    qrels_only : int
        Judged queries without run lines.
    """

    query_ids: list
    per_query: dict
    n_ret: np.ndarray
    run_only: int
    qrels_only: int

    @property
    def means(self) -> dict[str, float]:
        """Mean over the evaluated queries (0.0 when there are none)."""
        return {m: float(v.mean()) if v.size else 0.0 for m, v in self.per_query.items()}


def _read_blocks(path):
    """Yield ``(buf, end)`` per block of whole lines of ``path`` (gunzipped for ``.gz``).

    ``buf[_PAD:end]`` is a line feed, then lines that each end with a line feed (one is added
    after a last line without it); ``_PAD`` bytes precede and at least ``_PAD`` bytes follow
    (room for the fixed-width windows that read fields, left- or right-aligned).  One buffer is
    reused from block to block.
    """
    path = os.fspath(path)
    size = _BLOCK
    buf = np.zeros(_PAD + size + 2 + _PAD, np.uint8)
    o = _PAD + 1  # where the data start
    buf[o - 1] = _LF
    carry = 0  # bytes of an unfinished line at buf[o:o + carry]
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb", buffering=0) as fh:
        while True:
            got = fh.readinto(memoryview(buf)[o + carry : o + size])
            n = carry + got
            if not got:  # end of file
                if n:
                    buf[o + n] = _LF
                    yield buf, o + n + 1
                return
            cut = _last_line_feed(buf, o + carry, o + n)
            if cut < 0:  # no line end yet: a longer buffer
                if n == size:
                    size *= 2
                    bigger = np.zeros(_PAD + size + 2 + _PAD, np.uint8)
                    bigger[: o + n] = buf[: o + n]
                    buf = bigger
                carry = n
                continue
            yield buf, cut + 1
            carry = o + n - (cut + 1)
            buf[o : o + carry] = buf[cut + 1 : o + n].copy()


def _last_line_feed(buf: np.ndarray, lo: int, hi: int) -> int:
    """Index of the last line feed in ``buf[lo:hi]`` (-1: none)."""
    step = 4096
    while hi > lo:
        a = max(lo, hi - step)
        at = np.flatnonzero(buf[a:hi] == _LF)
        if at.size:
            return a + int(at[-1])
        hi = a
    return -1


def _windows(buf: np.ndarray, width: int) -> np.ndarray:
    """Read-only view ``(len(buf) - width + 1, width)``: row ``i`` is ``buf[i:i + width]``."""
    return np.lib.stride_tricks.sliding_window_view(buf, width)


def _field_bytes(buf: np.ndarray, start: np.ndarray, length: np.ndarray, width: int) -> np.ndarray:
    """Return the fields ``buf[start:start + length]`` as rows of ``width`` bytes, zero-padded (uint8, C order)."""
    rows = _windows(buf, width)[start]
    rows *= np.arange(width) < length[:, None]
    return rows


def _words(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Return the fields as rows of big-endian uint64 words in native order ((n, words) uint64).

    Comparing two rows word by word compares the fields' bytes in ``strcmp`` order (no field
    holds a NUL byte).  Each word is one unaligned 8-byte load, its bytes past the field cleared.
    """
    n_words = max(1, (int(length.max(initial=0)) + 7) // 8)
    eight = np.ndarray((buf.shape[0] - 7,), ">u8", buf, 0, (1,))  # eight[i] = buf[i:i + 8], big-endian
    out = np.empty((start.shape[0], n_words), np.uint64)
    for c in range(n_words):
        w = eight[start + 8 * c].astype(np.uint64)
        w &= _HEAD_MASK[np.clip(length - 8 * c, 0, 8)]
        out[:, c] = w
    return out


def _strings(words: np.ndarray) -> list:
    """Return the ASCII ids packed in ``words`` rows as a list of ``str``."""
    if not words.shape[0]:
        return []
    return words.astype(">u8").view(f"S{8 * words.shape[1]}").ravel().astype(str).tolist()


class _Table(NamedTuple):
    """The data lines of one file: blocks of equal consecutive query ids, document ids as word rows, values."""

    q_off: np.ndarray  # row offsets of the query blocks (int64, blocks + 1)
    q_heads: np.ndarray  # query id of each block (word rows, :func:`_words`)
    d_words: np.ndarray  # document id of each row
    values: np.ndarray  # float64 scores (run) or int64 labels (qrels)


class _Rows:
    """Growing row arrays (document words and values) filled block by block, without a final concatenation."""

    def __init__(self, capacity: int, dtype) -> None:
        self.n = 0
        self.words = np.empty((capacity, 1), np.uint64)
        self.values = np.empty(capacity, dtype)

    def add(self, words: np.ndarray, values: np.ndarray) -> None:
        m = values.shape[0]
        if self.n + m > self.values.shape[0] or words.shape[1] > self.words.shape[1]:
            cap = max(self.values.shape[0], self.n + m) * (2 if self.n + m > self.values.shape[0] else 1)
            grown = np.zeros((cap, max(words.shape[1], self.words.shape[1])), np.uint64)
            grown[: self.n, : self.words.shape[1]] = self.words[: self.n]
            self.words = grown
            v = np.empty(cap, self.values.dtype)
            v[: self.n] = self.values[: self.n]
            self.values = v
        self.words[self.n : self.n + m, : words.shape[1]] = words
        self.words[self.n : self.n + m, words.shape[1] :] = 0
        self.values[self.n : self.n + m] = values
        self.n += m


def _python_values(buf: np.ndarray, start: np.ndarray, length: np.ndarray, kind: int) -> np.ndarray | None:
    """Python's ``float`` (run) or ``int`` (qrels) of each field (NumPy's bytes casts call them); None on failure."""
    if not start.shape[0]:
        return np.zeros(0, np.float64 if kind == _RUN else np.int64)
    width = int(length.max())
    text = _field_bytes(buf, start, length, width).view(f"S{width}").ravel()
    try:
        return text.astype(np.float64 if kind == _RUN else np.int64)
    except (ValueError, OverflowError):
        return None


def _columns(buf: np.ndarray, end: np.ndarray, width: int) -> np.ndarray:
    """Return the ``width`` bytes before each ``end`` as columns: ``out[j, i] = buf[end[i] - width + j]`` (uint8)."""
    out = np.empty((width, end.shape[0]), np.uint8)
    for j in range(width):
        np.take(buf, end - (width - j), out=out[j])
    return out


def _decimals(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray | None:
    """Python's ``float`` of each field (float64), or None when one is not a number.

    ``[+-]digits[.digits]`` with at most 17 digits and a mantissa <= 2**53 is Clinger's fast
    path, computed here for all such fields at once: the digits as an exact integer, divided
    by an exact power of ten — one correctly rounded IEEE division, which is ``float(text)``.
    The fields are read right-aligned, so that a column's decimal weight is its distance from
    the end: ``a`` = the digits read as one integer with the dot as a 0 digit, ``r`` = its
    ``f`` digits after the dot, and the mantissa is ``(a + 9 r) / 10``.  Other fields go to
    ``float`` itself.
    """
    width = int(length.max())
    cols = _columns(buf, start + length, width)
    col = np.arange(width, dtype=np.uint8)[:, None]
    inside = col >= (width - length).astype(np.uint8)
    d = cols - np.uint8(48)
    digit = (d < 10) & inside
    dot = (cols == 46) & inside
    lead = buf[start]
    n_digit = digit.sum(axis=0, dtype=np.int64)
    n_dot = dot.sum(axis=0, dtype=np.int64)
    sign = (lead == 45) | (lead == 43)
    simple = (n_digit + n_dot + sign == length) & (n_dot <= 1) & (n_digit >= 1) & (n_digit <= 17)
    d *= digit
    a = np.zeros(start.shape[0], np.uint64)
    for j in range(width):
        a *= np.uint64(10)
        a += d[j]
    frac = np.where(n_dot == 1, width - 1 - (dot * col).sum(axis=0, dtype=np.int64), 0)
    np.minimum(frac, 17, out=frac)  # more: not simple (at most 17 digits), fixed up below
    mant = np.where(n_dot > 0, (a + np.uint64(9) * (a % _POW10_INT[frac])) // np.uint64(10), a)
    simple &= mant <= _MANT_MAX
    v = mant.astype(np.float64) / _POW10[frac]
    np.negative(v, out=v, where=lead == 45)
    other = np.flatnonzero(~simple)
    if other.size:
        rest = _python_values(buf, start[other], length[other], _RUN)
        if rest is None or not np.isfinite(rest).all():
            return None
        v[other] = rest
    return v


def _integer_fields(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> bool:
    """Whether every field is ``[+-]digits`` (what the rank column must hold).

    Fields of at most 8 bytes are checked 8 bytes at a time: one little-endian load per field,
    the bytes past it (and a leading sign) set to ``'0'``; a byte is a digit when its high nibble
    is 3 and adding 6 keeps it so.
    """
    lead = buf[start]
    sign = ((lead == 43) | (lead == 45)) & (length > 1)
    if int(length.max()) <= 8:
        x = np.ndarray((buf.shape[0] - 7,), "<u8", buf, 0, (1,))[start]
        x[sign] = (x[sign] & ~np.uint64(0xFF)) | np.uint64(0x30)
        keep = _LOW_MASK[length]
        x &= keep
        x |= ~keep & _ZEROS
        high = np.uint64(0xF0F0F0F0F0F0F0F0)
        return bool(((x & high) == _ZEROS).all() and (((x + np.uint64(0x0606060606060606)) & high) == _ZEROS).all())
    width = int(length.max())
    cols = _columns(buf, start + length, width)
    inside = np.arange(width, dtype=np.uint8)[:, None] > (width - length).astype(np.uint8)
    if ((cols - np.uint8(48) >= 10) & inside).any():  # every byte after the first: a digit
        return False
    return bool((((lead - np.uint8(48)) < 10) | sign).all())


def _line_fields(text: np.ndarray, ncol: int | None):
    """Return ``(starts, ends)`` (lines, ncol) of every line's fields in ``text``, or None outside the layout.

    ``text`` starts and ends with a line feed.  Fields are the runs of bytes above the space;
    every line must hold ``ncol`` of them (None: the first line's count); a line holding a tab
    must hold nothing but fields and single tabs between them.
    """
    if text.max() >= 128:
        return None
    n_ctrl = np.count_nonzero(text < 32)
    n_tab = 0
    if n_ctrl != np.count_nonzero(text == _LF):  # other control bytes than line feeds
        n_tab = np.count_nonzero(text == _TAB)
        cr = np.flatnonzero(text == _CR)
        if n_ctrl != np.count_nonzero(text == _LF) + n_tab + cr.shape[0]:
            return None  # NUL or another control byte
        if (text[cr + 1] != _LF).any():
            return None  # a CR that does not end a line
    field = text > 32
    edges = np.flatnonzero(field[1:] != field[:-1])
    edges += 1
    starts, ends = edges[0::2], edges[1::2]  # text starts and ends with a line feed: the edges pair up
    if not starts.shape[0]:
        return starts.reshape(0, ncol or 1), ends.reshape(0, ncol or 1)
    g_lo, g_hi = ends[:-1], starts[1:]  # the separators between consecutive fields
    new_line = np.append(text[g_lo] == _LF, True)
    wide = np.flatnonzero(g_hi - g_lo > 1)
    if wide.size:  # separators of several bytes: does one hold a line feed?
        lf = np.flatnonzero(text == _LF)
        new_line[wide] = np.searchsorted(lf, g_hi[wide]) > np.searchsorted(lf, g_lo[wide])
    if ncol is None:
        ncol = int(np.argmax(new_line)) + 1
    if new_line.shape[0] % ncol:
        return None
    grid = new_line.reshape(-1, ncol)
    if grid[:, :-1].any() or not grid[:, -1].all():
        return None
    fs, fe = starts.reshape(-1, ncol), ends.reshape(-1, ncol)
    if (text[fs[:, 0]] == _HASH).any():
        return None  # comment lines: the line-by-line reader
    if n_tab:
        inner = fe[:, :-1]
        if n_tab != inner.size or (fs[:, 1:] - inner != 1).any() or (text[inner] != _TAB).any():
            return None
    return fs, fe


def _is_header(value: np.ndarray, kind: int) -> bool:
    """Whether a 3-column first line is a header: its value field is no number for Python (as the line reader)."""
    try:
        (float if kind == _RUN else int)(value.tobytes().decode("ascii"))
    except ValueError:
        return True
    return False


def _parse(path, kind: int) -> _Table | None:
    """Parse the data lines of the file at ``path``, or None outside this engine's layout (module docstring)."""
    widths = (3, 6) if kind == _RUN else (3, 4)
    ncol = None
    size = os.stat(path).st_size if not os.fspath(path).endswith(".gz") else 0
    rows = None
    heads, head_words = [], []
    last = None  # the query id of the previous block's last row
    for buf, end in _read_blocks(path):
        got = _line_fields(buf[_PAD:end], ncol)
        if got is None:
            return None
        fs, fe = got
        fs += _PAD
        fe += _PAD
        if not fs.shape[0]:
            continue
        if ncol is None:
            ncol = fs.shape[1]
            if ncol not in widths:
                return None
            if ncol == 3 and _is_header(buf[fs[0, 2] : fe[0, 2]], kind):
                fs, fe = fs[1:], fe[1:]
                if not fs.shape[0]:
                    continue
        lens = fe - fs
        if lens.max() > _MAX_FIELD:
            return None
        qi, di, vi = (0, 1, 2) if ncol == 3 else (0, 2, 4) if kind == _RUN else (0, 2, 3)
        if kind == _RUN:
            values = _decimals(buf, fs[:, vi], lens[:, vi])
            if ncol == 6 and values is not None and not _integer_fields(buf, fs[:, 3], lens[:, 3]):
                return None
        else:
            values = _python_values(buf, fs[:, vi], lens[:, vi], kind)
        if values is None:
            return None
        if rows is None:  # room for the whole file at this block's bytes per line, grown when short
            rows = _Rows(int(values.shape[0] * max(1.0, 1.1 * size / (end - _PAD))) + 16, values.dtype)
        qw = _words(buf, fs[:, qi], lens[:, qi])
        new = np.flatnonzero((qw[1:] != qw[:-1]).any(axis=1)) + 1
        width = max(qw.shape[1], last.shape[0] if last is not None else 0)
        if last is None or not np.array_equal(_widen(qw[:1], width)[0], np.pad(last, (0, width - last.shape[0]))):
            new = np.r_[0, new]
        heads.append(new + rows.n)
        head_words.append(qw[new])
        last = qw[-1]
        rows.add(_words(buf, fs[:, di], lens[:, di]), values)
    if rows is None:
        return None
    q_off = np.append(np.concatenate(heads), rows.n).astype(np.int64)
    return _Table(q_off, _stack(head_words), rows.words[: rows.n], rows.values[: rows.n])


def _stack(parts: list) -> np.ndarray:
    """Concatenate word rows, zero-padding the narrower ones to the widest."""
    width = max(p.shape[1] for p in parts)
    return np.concatenate([_widen(p, width) for p in parts])


def _widen(words: np.ndarray, width: int) -> np.ndarray:
    return words if words.shape[1] == width else np.pad(words, ((0, 0), (0, width - words.shape[1])))


def _hash(group: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Return a 64-bit hash (uint64) of each (group, words row) pair (collisions are confirmed by the caller)."""
    h = np.multiply(group, _MIX[0], dtype=np.uint64, casting="unsafe")
    t = np.empty_like(h)
    for c in range(words.shape[1]):
        h ^= words[:, c]
        h ^= np.right_shift(h, np.uint64(31), out=t)
        h *= _MIX[1]
    h ^= np.right_shift(h, np.uint64(33), out=t)
    h *= _MIX[2]
    h ^= np.right_shift(h, np.uint64(29), out=t)
    return h


def _last_of_equal(h: np.ndarray, group: np.ndarray, words: np.ndarray):
    """``(order, keep)``: rows by hash (stable), and whether each is the last of its equal (group, words) rows.

    None when two different keys share a hash (the caller hands the files back).
    """
    order = np.argsort(h, kind="stable")
    hs = h[order]
    same = hs[1:] == hs[:-1]
    if same.any():
        i = order[:-1][same]
        j = order[1:][same]
        if (group[i] != group[j]).any() or (words[i] != words[j]).any():
            return None
    return order, np.append(~same, True)


def _seq_sums(owner: np.ndarray, terms: np.ndarray, n: int) -> np.ndarray:
    """Sum ``terms`` per owner, term by term in the given order, from 0.0 (float64 (n,)).

    ``owner`` is non-decreasing (each owner's terms contiguous, in the order a serial loop adds
    them): column ``c`` of every owner is added in step ``c``, so each sum is the serial
    loop's to the last bit.
    """
    acc = np.zeros(n, np.float64)
    if not terms.shape[0]:
        return acc
    first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    count = np.diff(np.r_[first, owner.shape[0]])
    col = np.arange(owner.shape[0]) - np.repeat(first, count)
    by_col = np.argsort(col, kind="stable")
    bounds = np.searchsorted(col[by_col], np.arange(int(col.max()) + 2))
    for c in range(bounds.shape[0] - 1):
        t = by_col[bounds[c] : bounds[c + 1]]
        acc[owner[t]] += terms[t]
    return acc


def _gains(labels: np.ndarray, gain_mode: int, clamp: bool) -> np.ndarray:
    """Gain of each label (float64): the label or ``2**label - 1``; 0 for a negative label when ``clamp``."""
    if gain_mode == GAIN_EXPONENTIAL:
        g = np.ldexp(1.0, np.clip(labels, -2000, 2000).astype(np.int32)) - 1.0
    else:
        g = labels.astype(np.float64)
    if clamp:
        g[labels < 0] = 0.0
    return g


def _dcg(owner: np.ndarray, rank: np.ndarray, gains: np.ndarray, cut: np.ndarray, n: int) -> np.ndarray:
    """DCG per owner over its ranks ``< cut[owner]``: the sum of gain / log2(rank + 2), in rank order."""
    use = (gains != 0.0) & (rank < cut[owner])
    r = rank[use]
    top = int(r.max()) + 1 if r.size else 0
    discount = np.array([math.log2(i + 2.0) for i in range(top)], np.float64)
    return _seq_sums(owner[use], gains[use] / discount[r], n)


def _nonzero(lab: np.ndarray, off: np.ndarray):
    """``(owner, rank, label)`` of the rows with a label other than 0 (lists ``off``; owners non-decreasing)."""
    nz = np.flatnonzero(lab)
    owner = np.searchsorted(off, nz, side="right") - 1
    return owner, nz - off[owner], lab[nz]


def _metrics(lab, qoff, ideal, ioff, num_rel, kinds, ks, gain_mode, clamp) -> np.ndarray:
    """Metric values (n_metrics, n_queries) from the ranked labels (``query_metrics``'s arithmetic).

    ``lab`` int64: labels of every query's ranked rows (query ``q`` is ``lab[qoff[q]:qoff[q + 1]]``);
    ``ideal``: each query's qrels labels sorted descending (``ioff`` offsets); ``num_rel``: the
    query's labels > 0.  Only rows with a label other than 0 add to a sum (a zero gain adds nothing
    in the kernel either), so the work scales with the judged rows.
    """
    nq = qoff.shape[0] - 1
    n = np.diff(qoff)
    n_ideal = np.diff(ioff)
    owner, rank, lab = _nonzero(lab, qoff)
    i_owner, i_rank, ideal = _nonzero(ideal, ioff)
    rel = lab > 0
    rel_owner, rel_rank = owner[rel], rank[rel]
    gains = i_gains = None
    out = np.zeros((kinds.shape[0], nq), np.float64)
    for m in range(kinds.shape[0]):
        kind, k = int(kinds[m]), int(ks[m])
        kk = n if k <= 0 else np.minimum(k, n)
        in_cut = rel_rank < kk[rel_owner]
        o, r = rel_owner[in_cut], rel_rank[in_cut]
        if kind == NDCG:
            if gains is None:
                gains, i_gains = _gains(lab, gain_mode, clamp), _gains(ideal, gain_mode, clamp)
            dcg = _dcg(owner, rank, gains, kk, nq)
            idcg = _dcg(i_owner, i_rank, i_gains, n_ideal if k <= 0 else np.minimum(k, n_ideal), nq)
            pos = idcg > 0.0
            out[m, pos] = dcg[pos] / idcg[pos]
        elif kind in (RECALL, PRECISION, HIT):
            hits = np.bincount(o, minlength=nq)
            if kind == RECALL:
                pos = num_rel > 0
                out[m, pos] = hits[pos] / num_rel[pos]
            elif kind == PRECISION:
                denom = np.full(nq, k) if k > 0 else n
                pos = denom > 0
                out[m, pos] = hits[pos] / denom[pos]
            else:
                out[m] = (hits > 0).astype(np.float64)
        elif kind == RR:
            first = np.r_[True, o[1:] != o[:-1]] if o.size else np.zeros(0, bool)
            out[m, o[first]] = 1.0 / (r[first] + 1.0)
        elif kind == AP:
            # precision at each relevant rank: the relevant ranks seen so far / (rank + 1)
            start = np.flatnonzero(np.r_[True, o[1:] != o[:-1]]) if o.size else np.zeros(0, np.int64)
            seen = np.arange(o.shape[0]) - np.repeat(start, np.diff(np.r_[start, o.shape[0]])) + 1
            acc = _seq_sums(o, seen / (r + 1.0), nq)
            pos = num_rel > 0
            out[m, pos] = acc[pos] / num_rel[pos]
    return out


def _describe(t: _Table, i: int) -> str:
    """Name run row ``i`` (query and document) for a message."""
    b = int(np.searchsorted(t.q_off, i, side="right")) - 1
    q, d = _strings(t.q_heads[b : b + 1])[0], _strings(t.d_words[i : i + 1])[0]
    return f"query {q!r}, document {d!r}"


def evaluate_files_numpy(
    run,
    qrels,
    metrics=None,
    gain: str = "linear",
    tie_break: str = "trec_eval",
    *,
    missing: str = "skip",
) -> FileScores | None:
    r"""Evaluate a run file against a qrels file with NumPy only; None when the files need the Numba engine.

    The values, queries and counts are those of :func:`jkofast.eval.fastread.evaluate_files`
    (bit for bit).  Files outside this engine's layout (module docstring: non-ASCII bytes,
    comment lines, mixed separators, a query whose lines are not contiguous, non-finite scores,
    anything malformed) give None: the caller evaluates them with the Numba engine, whose readers
    accept them or raise the ``ValueError`` naming the file and line.

    Parameters
    ----------
    run : str or os.PathLike
        Run file (TREC 6-column or ``qid docid score``; ``.gz`` ok).
    qrels : str or os.PathLike
        Qrels file (TREC 4-column or ``qid docid rel``, header optional; ``.gz`` ok).
    metrics : sequence of str or str, optional
        Metric names (see :func:`jkofast.eval.metrics.parse_metric`; default
        ``ndcg@10, recall@10, p@10, mrr@10, map``); not ``diversity@k``.
    gain, tie_break, missing : str
        As :func:`jkofast.eval.metrics.evaluate`.

    Returns
    -------
    FileScores or None

    Raises
    ------
    ValueError
        Unknown metric, gain, tie_break or missing; ``diversity@k``.
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
    >>> evaluate_files_numpy(os.path.join(d, "run"), os.path.join(d, "qrels"), ["mrr@10", "p@1"]).means
    {'mrr@10': 0.5, 'p@1': 0.0}
    """
    gain_mode, tie_mode, names, kinds, ks = file_setup(metrics, gain, tie_break, missing)
    with _small_pages():
        rt = _parse(run, _RUN)
        qt = _parse(qrels, _QRELS) if rt is not None else None
        if qt is None or (gain_mode == GAIN_EXPONENTIAL and qt.values.max() > _EXP_LABEL_MAX):
            return None
        trec = tie_mode == TIE_TREC_EVAL
        res = _evaluate(rt, qt, names, kinds, ks, gain_mode, trec, missing == "zero")
        if trec and res is not None:  # handed back: the Numba engine warns
            warn_float32_range(rt.values, lambda i: _describe(rt, i), stacklevel=3)
        return res


@contextlib.contextmanager
def _small_pages():
    """Allocate without NumPy's transparent-huge-page advice for the duration (restored after).

    NumPy advises huge pages for arrays of 4 MiB and more; where the kernel then compacts memory
    to find them (``defrag=madvise``), a first touch can cost milliseconds of system time.  The
    engine allocates and frees many such arrays once each, so small pages are cheaper: on the
    2-core VM of docs/performance.md the 10,000-query evaluation spent 0.06-0.8 s of system time
    with the advice and 0.08-0.10 s without.  A NumPy without the switch (it is private) is left
    as it is.
    """
    switch = getattr(_multiarray, "_set_madvise_hugepage", None)
    previous = switch(False) if switch is not None else None
    try:
        yield
    finally:
        if switch is not None:
            switch(previous)


def _ragged_take(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ranges ``starts[i] .. starts[i] + counts[i]`` (int64)."""
    total = int(counts.sum())
    off = np.zeros(counts.shape[0], np.int64)
    np.cumsum(counts[:-1], out=off[1:])
    return np.repeat(starts - off, counts) + np.arange(total)


def _queries(rt: _Table, qt: _Table):
    """Query blocks and groups, or None when a run query's lines are not contiguous.

    ``(r_off, r_ids, q_off, q_block_group, r_block_group, group_of)``: run blocks (offsets and
    ids), qrels blocks and their group (groups numbered by first appearance: ``group_of``),
    the group of each run block (-1: not judged).
    """
    r_off, q_off = rt.q_off, qt.q_off
    r_ids = _strings(rt.q_heads)
    if len(set(r_ids)) != len(r_ids):
        return None
    group_of: dict = {}
    q_block_group = np.array([group_of.setdefault(q, len(group_of)) for q in _strings(qt.q_heads)], np.int64)
    r_block_group = np.array([group_of.get(q, -1) for q in r_ids], np.int64)
    return r_off, r_ids, q_off, q_block_group, r_block_group, group_of


class _Qrels(NamedTuple):
    """The qrels rows kept (a repeated document keeps its last label), keyed by (group, document)."""

    group: np.ndarray  # of every qrels row
    words: np.ndarray  # document words of every qrels row
    kept: np.ndarray  # the rows kept, in hash order
    hashes: np.ndarray  # their hashes (sorted, unique)
    by_group: np.ndarray  # the rows kept, group by group, labels descending
    g_off: np.ndarray  # group offsets into by_group
    g_rel: np.ndarray  # labels > 0 per group


def _qrels_table(qt: _Table, q_off, q_block_group, n_groups: int, dw: int) -> _Qrels | None:
    group = np.repeat(q_block_group, np.diff(q_off))
    words = _widen(qt.d_words, dw)
    h = _hash(group, words)
    found = _last_of_equal(h, group, words)
    if found is None:
        return None
    order, keep = found
    kept = order[keep]
    labels = qt.values[kept]
    k_group = group[kept]
    by_group = kept[np.lexsort((-labels, k_group))]
    g_off = np.zeros(n_groups + 1, np.int64)
    np.cumsum(np.bincount(k_group, minlength=n_groups), out=g_off[1:])
    g_rel = np.bincount(k_group[labels > 0], minlength=n_groups)
    return _Qrels(group, words, kept, h[kept], by_group, g_off, g_rel)


def _run_labels(r_group, r_words, qr: _Qrels, labels: np.ndarray):
    """``(lab, repeated, hashes)``: the label of every run row (0: unjudged), whether a (query, document) repeats.

    None on a hash collision between different keys.  A bit table of the qrels keys' top hash
    bits picks the few run rows that may be judged; only those are looked up.
    """
    rh = _hash(r_group, r_words)
    srt = np.sort(rh)
    repeated = bool((srt[1:] == srt[:-1]).any())
    maybe = np.zeros(1 << _FILTER_BITS, bool)
    maybe[qr.hashes >> np.uint64(64 - _FILTER_BITS)] = True
    cand = np.flatnonzero(maybe[np.right_shift(rh, np.uint64(64 - _FILTER_BITS), out=srt)])
    at = np.minimum(np.searchsorted(qr.hashes, rh[cand]), qr.hashes.shape[0] - 1)
    hit = qr.hashes[at] == rh[cand]
    run_rows, src = cand[hit], qr.kept[at[hit]]
    if (qr.group[src] != r_group[run_rows]).any() or (qr.words[src] != r_words[run_rows]).any():
        return None
    lab = np.zeros(rh.shape[0], np.int64)
    lab[run_rows] = labels[src]
    return lab, repeated, rh


def _trec_rank(sel, owner, scores, r_words, nq: int):
    """Return ``(n_ret, sel)``: the rows ``sel`` (query by query; None: every row) in trec_eval's order.

    trec_eval's order: float32 score descending, then document id descending.  ``n_ret`` is the
    ranked count per query.  Adjacent rows are checked (ids only where scores tie); only the
    queries found out of order are sorted (the usual file needs none).
    """
    o = owner if sel is None else owner[sel]
    with np.errstate(over="ignore"):  # beyond float32: +-inf, as trec_eval's C floats (warned about once)
        score = (scores if sel is None else scores[sel]).astype(np.float32)
    n_ret = np.bincount(o, minlength=nq)
    last = np.cumsum(n_ret)[:-1] - 1  # each query's last row: it and the next query's first are no pair
    last = last[last >= 0]
    bad = score[1:] > score[:-1]
    bad[last] = False
    eq = score[1:] == score[:-1]
    eq[last] = False
    tie = np.flatnonzero(eq)
    if tie.size:  # tied scores: the row after must not hold the larger id
        a = r_words[tie if sel is None else sel[tie]]
        b = r_words[tie + 1 if sel is None else sel[tie + 1]]
        later = np.zeros(tie.shape[0], bool)
        eq = np.ones(tie.shape[0], bool)
        for c in range(a.shape[1]):
            later |= eq & (b[:, c] > a[:, c])
            eq &= b[:, c] == a[:, c]
        bad[tie[later]] = True
    if bad.any():
        if sel is None:
            sel = np.arange(o.shape[0])
        redo = np.zeros(nq, bool)
        redo[o[1:][bad]] = True
        fix = np.flatnonzero(redo[o])
        w = r_words[sel[fix]]
        keys = [~w[:, c] for c in range(w.shape[1] - 1, -1, -1)]
        sel[fix] = sel[fix][np.lexsort((*keys, -score[fix], o[fix]))]
    return n_ret, sel


def _evaluate(rt: _Table, qt: _Table, names, kinds, ks, gain_mode, trec, zero) -> FileScores | None:
    """Return the metrics of the parsed tables (:func:`evaluate_files_numpy`), or None to hand the files back."""
    found = _queries(rt, qt)
    if found is None:
        return None  # a run query whose lines are not contiguous
    r_off, r_ids, q_off, q_block_group, r_block_group, group_of = found
    n_groups = len(group_of)
    judged = np.flatnonzero(r_block_group >= 0)
    groups = r_block_group[judged]
    dw = max(rt.d_words.shape[1], qt.d_words.shape[1])
    qr = _qrels_table(qt, q_off, q_block_group, n_groups, dw)
    if qr is None:
        return None

    # the run rows of the judged queries and their labels
    nq_run = judged.shape[0]
    b_len = np.diff(r_off)
    r_words, scores = _widen(rt.d_words, dw), rt.values
    if nq_run != b_len.shape[0]:
        rows = np.flatnonzero(np.repeat(r_block_group >= 0, b_len))
        r_words, scores = r_words[rows], scores[rows]
    n_rows = b_len[judged]
    owner = np.repeat(np.arange(nq_run, dtype=np.int32), n_rows)
    found = _run_labels(groups[owner], r_words, qr, qt.values)
    if found is None:
        return None
    lab, repeated, rh = found
    sel = None  # the ranked rows, query by query (None: every row in file order)
    if trec:
        if repeated:  # a repeated document keeps its last line
            found = _last_of_equal(rh, groups[owner], r_words)
            if found is None:
                return None
            order, keep = found
            sel = np.sort(order[keep])
        n_ret, sel = _trec_rank(sel, owner, scores, r_words, nq_run)
    else:
        n_ret = n_rows
    n_ret = n_ret.astype(np.int64)

    extra = np.setdiff1d(np.arange(n_groups), groups) if zero else np.zeros(0, np.int64)
    if extra.size:
        groups = np.concatenate([groups, extra])
        n_ret = np.concatenate([n_ret, np.zeros(extra.size, np.int64)])
    qoff = np.zeros(groups.shape[0] + 1, np.int64)
    np.cumsum(n_ret, out=qoff[1:])
    i_count = qr.g_off[groups + 1] - qr.g_off[groups]
    ideal = qt.values[qr.by_group[_ragged_take(qr.g_off[groups], i_count)]]
    ioff = np.zeros(groups.shape[0] + 1, np.int64)
    np.cumsum(i_count, out=ioff[1:])
    values = _metrics(lab if sel is None else lab[sel], qoff, ideal, ioff, qr.g_rel[groups], kinds, ks, gain_mode, trec)
    qids = [r_ids[b] for b in judged]
    if extra.size:
        first_of = {g: q for q, g in group_of.items()}
        qids += [first_of[int(g)] for g in extra]
    per_query = {n: values[i] for i, n in enumerate(names)}
    return FileScores(qids, per_query, n_ret, int(b_len.shape[0] - nq_run), int(n_groups - nq_run))
