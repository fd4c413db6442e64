"""Run and score files: one streaming reader, one line formatter, one atomic writer.

Every TREC run, pool file and rerank-score file jkofast reads or writes goes through this
module:

* **reading** -- :func:`iter_blocks` reads a file (plain or ``.gz``) in byte blocks of whole
  lines; a block takes a vectorised fast path (:func:`_fast_columns`: numpy finds the field
  boundaries, only the doc id and score columns become Python strings) when it is clean, and
  the line-by-line path (text-mode semantics: universal newlines, Unicode whitespace) when it
  holds a malformed or unusual line.  Both paths give the same records.  On top of it:
  :func:`iter_chunks` (pool files: malformed lines reported and skipped, columnar
  :class:`Chunk` s), :func:`iter_score_blocks` / :func:`read_scores` / :class:`ScoreStream`
  (rerank-score files: malformed lines raise), and :func:`open_text` / :func:`iter_rows`
  (the line source of :mod:`jkofast.eval.trec`'s strict readers);
* **formatting** -- :func:`format_run`: ``qid Q0 docid rank score tag`` lines of a ragged
  batch in one ``%`` over preformatted columns; scores by default as the shortest decimal that
  reads back to the same value of their dtype (:func:`shortest_repr`: float32 or float64), so
  a run re-read (and re-sorted by score, as trec_eval does) keeps its exact scores and order;
* **writing** -- :func:`atomic_open`: a temporary file in the target's folder, renamed over
  the target (``os.replace``) only when the ``with`` block succeeds.

Formats: a pool / run line is ``qid Q0 docid rank score tag`` (6 fields) or ``qid docid
score`` (3 fields, an optional header on line 1); a score line is ``query-id doc-id score``
or a 6-field TREC line.
"""

from __future__ import annotations

import gzip
import io
import os

import numpy as np

from jkofast._io import atomic_open

__all__ = [
    "Chunk",
    "ScoreStream",
    "atomic_open",
    "format_run",
    "iter_blocks",
    "iter_chunks",
    "iter_queries",
    "iter_rows",
    "iter_score_blocks",
    "iter_score_lines",
    "open_text",
    "parse_score_fields",
    "read_scores",
    "shortest_repr",
    "strictly_decreasing",
    "topk_to_ragged",
]

# ---------------------------------------------------------------------------------------------
# input parsing
#
# The input is read in raw byte blocks that end at a line break.  A block whose non-blank lines
# all have the same number of fields (6 or 3), pure ASCII with no unusual control characters, no
# bad score and no duplicate document takes the fast path (``_fast_columns``): numpy finds the
# field boundaries and checks the field count of every line, only the doc id and score columns
# become Python strings (cut out with a byte mask, one ``str.split``), scores are converted with
# one ``map(float)`` and query boundaries come from comparing the qid bytes of consecutive
# lines.  Any other block goes through the line-by-line path (text-mode semantics: universal
# newlines, Unicode whitespace), which reports malformed lines with their exact line numbers
# and keeps the rest of the block.  Both paths give the same records; the query open at the
# end of a block continues into the next.
# ---------------------------------------------------------------------------------------------
_BLOCK_BYTES = 1 << 22  # bytes read per block (tests shrink it to exercise block boundaries)
_F32_MAX = float(np.finfo(np.float32).max)  # user scores are float32


def _parse_line(parts):
    """-> (qid, docid, score_str, score) or raise ValueError."""
    if len(parts) == 6:
        qid, did, s = parts[0], parts[2], parts[4]
    elif len(parts) == 3:
        qid, did, s = parts
    else:
        raise ValueError(f"expected 6 fields (TREC run) or 3 (qid docid score), got {len(parts)}")
    v = float(s)
    if not np.isfinite(v):
        raise ValueError(f"non-finite score {s!r}")
    return qid, did, s, v


def _open_bytes(path):
    path = os.fspath(path)
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def iter_blocks(path, block_bytes: int | None = None):
    """Yield raw blocks of whole lines.

    Line 1 comes alone (header handling), then blocks of about ``block_bytes`` (default
    ``_BLOCK_BYTES``), every block but the last ending with a line feed.
    """
    block_bytes = block_bytes or _BLOCK_BYTES
    with _open_bytes(path) as fh:
        first = fh.readline()
        if first:
            yield first
        rest = b""
        while True:
            buf = fh.read(block_bytes)
            if not buf:
                break
            if rest:
                buf = rest + buf
            cut = buf.rfind(b"\n") + 1
            if cut == 0:  # a line longer than the block: read on
                rest = buf
                continue
            rest = buf[cut:]
            yield buf[:cut] if rest else buf
        if rest:
            yield rest


def _text_lines(block: bytes):
    """Return the block's lines as text-mode iteration gives them (UTF-8, universal newlines)."""
    return io.StringIO(block.decode("utf-8"), newline=None)


_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], np.uint64)  # mask of the n low bytes


def _fast_columns(block: bytes):
    """Fast-path tokenisation of a block of whole lines.

    When the block is ASCII without unusual control characters or lone CRs and every
    non-blank line has the same number of fields, 6 (``qid Q0 docid rank score tag``) or 3
    (``qid docid score``), returns ``(n_lines, qids, sizes, docs, sstr)``: the runs of
    consecutive lines with the same qid (``qids[i]`` has ``sizes[i]`` lines) and the doc id
    and score strings of every line, in order; ``n_lines`` counts blank lines too.  Returns
    ``None`` otherwise (the caller falls back to the line-by-line path).

    Only the doc id and score columns become Python strings: field boundaries come from one
    numpy pass over the bytes, the two columns are cut out with a byte mask and split once,
    and query boundaries are found by comparing the qid bytes of consecutive lines.
    """
    if not block.isascii():
        return None
    if b"\r" in block:
        if block.count(b"\r") != block.count(b"\r\n"):
            return None  # a lone CR is a line break in text mode
        block = block.replace(b"\r\n", b"\n")
    if not block.endswith(b"\n"):
        block += b"\n"
    a = np.frombuffer(block, np.uint8)
    nl = np.flatnonzero(a == 10)
    n_lines = nl.size
    n_ctrl = np.count_nonzero(a < 32)
    if n_ctrl != n_lines and n_ctrl != n_lines + sum(block.count(c) for c in (b"\t", b"\x0b", b"\x0c")):
        return None  # \x1c-\x1f are whitespace to str.split: keep exact semantics
    nw = np.empty(a.size + 1, bool)  # nw[i + 1]: byte i is a field byte (ASCII, no other control
    nw[0] = False  # bytes: any byte > 32)
    np.greater(a, 32, out=nw[1:])
    pos = np.flatnonzero(nw[1:] != nw[:-1])  # field starts and ends, alternating
    starts, ends = pos[0::2], pos[1::2]  # the block ends with '\n': every field closes
    if starts.size == 0:
        return n_lines, [], [], [], []
    per_line = np.diff(np.searchsorted(starts, nl), prepend=0)
    k = int(per_line.max())
    if k not in (3, 6) or np.count_nonzero(per_line) * k != starts.size:
        return None  # mixed field counts (or all malformed): line-by-line path
    di, si = (2, 4) if k == 6 else (1, 2)
    # doc id and score columns: keep their bytes and the separator after each, split once
    toggle = np.zeros(a.size + 1, bool)
    for f in (di, si):
        toggle[starts[f::k]] = True
        toggle[ends[f::k]] = True
    keep = np.logical_xor.accumulate(toggle)[:-1]  # inside a kept field
    keep[ends[di::k]] = True
    keep[ends[si::k]] = True
    cols = a[keep].tobytes().decode("ascii").split()
    docs, sstr = cols[0::2], cols[1::2]
    # query boundaries: compare the qid bytes of consecutive lines, 8 bytes at a time
    qs, qe = starts[0::k], ends[0::k]
    ql = qe - qs
    w = int(ql.max())
    if w > 256:
        return None
    pad = np.zeros(a.size + w + 16, np.uint8)
    pad[: a.size] = a
    words = np.ndarray(shape=(a.size + w,), dtype="<u8", buffer=pad.data, strides=(1,))  # bytes i..i+7
    same = ql[1:] == ql[:-1]
    for j in range(0, w, 8):
        wj = words[qs + j] & _LOW_BYTES[np.clip(ql - j, 0, 8)]
        same &= wj[1:] == wj[:-1]
    first = np.flatnonzero(~same)
    first += 1
    first = np.concatenate(([0], first))
    sizes = np.diff(first, append=qs.size).tolist()
    qids = [block[s:e].decode("ascii") for s, e in zip(qs[first].tolist(), qe[first].tolist(), strict=True)]
    return n_lines, qids, sizes, docs, sstr


def _floats(strs: list):
    """Return the ``float`` of every string (exact ``float()`` semantics).

    None if any fails or is not finite.
    """
    try:
        v = np.fromiter(map(float, strs), np.float64, len(strs))
    except ValueError:
        return None
    return v if np.isfinite(v).all() else None


class Chunk:
    """Queries of a pool file in columnar form.

    Query ``i`` is ``qids[i]`` and owns flat lines ``off[i]:off[i + 1]`` of ``docs`` (doc ids),
    ``sstr`` (input score strings) and ``vals`` (float64 scores), in input order.
    """

    __slots__ = ("docs", "off", "qids", "sstr", "vals")

    def __init__(self, qids, off, docs, sstr, vals):
        self.qids, self.off, self.docs, self.sstr, self.vals = qids, off, docs, sstr, vals

    def __len__(self) -> int:
        """Return the number of queries."""
        return len(self.qids)

    def __iter__(self):
        """Per query ``(qid, docs, score strings, scores)`` (the pre-columnar tuple form)."""
        off = self.off.tolist()
        vals = self.vals.tolist()
        for i, q in enumerate(self.qids):
            a, b = off[i], off[i + 1]
            yield q, self.docs[a:b], self.sstr[a:b], vals[a:b]


class _PoolParser:
    """Incremental parser of a pool file into pieces of complete queries (columnar).

    Both paths follow the semantics stated in :func:`iter_chunks`.
    """

    def __init__(self, report):
        self.report = report
        self.ln = 0  # lines consumed
        self.open = None  # (qid, docs, sstr, vals ndarray) of the query still being read

    def feed(self, block: bytes):
        """Parse one block -> (qids, sizes, docs, sstr, vals) of the queries it completes."""
        if self.ln:
            piece = self._fast(block)
            if piece is not None:
                return piece
        return self._slow(block)

    def close(self):
        """Return the last query (if any) as a piece."""
        if self.open is None:
            return None
        q, d, s, v = self.open
        self.open = None
        return [q], [len(d)], d, s, v

    def _fast(self, block: bytes):
        r = _fast_columns(block)
        if r is None:
            return None
        n_lines, qs, ns, d, s = r
        if not qs:
            self.ln += n_lines
            return [], [], [], [], np.zeros(0)
        v = _floats(s)
        if v is None:
            return None
        o = self.open
        cont = o is not None and qs[0] == o[0]  # the open query continues into this block
        a = 0
        for i, n in enumerate(ns):  # duplicates -> the line-by-line path reports them (state untouched)
            if n > 1 or (i == 0 and cont):
                seg = d[a : a + n]
                if i == 0 and cont:
                    seg = o[1] + seg
                if len(set(seg)) != len(seg):
                    return None
            a += n
        self.ln += n_lines
        if cont and len(qs) == 1:  # the whole block extends the open query
            self.open = (o[0], o[1] + d, o[2] + s, np.concatenate((o[3], v)))
            return [], [], [], [], np.zeros(0)
        # the last run stays open; the rest (behind the previous open query) is finished.  The
        # columns are fresh lists: cut and prepend in place instead of copying them again
        cut = len(d) - ns[-1]
        self.open = (qs[-1], d[cut:], s[cut:], v[cut:])
        del d[cut:], s[cut:]
        v = v[:cut]
        qs, ns = qs[:-1], ns[:-1]
        if o is not None:
            if cont:
                ns[0] += len(o[1])
            else:
                qs.insert(0, o[0])
                ns.insert(0, len(o[1]))
            d[0:0] = o[1]
            s[0:0] = o[2]
            v = np.concatenate((o[3], v))
        return qs, ns, d, s, v

    def _slow(self, block: bytes):
        qs, ns, docs, sstr, vals = [], [], [], [], []
        if self.open is not None:
            cur, d, s, v = self.open
            d, s, v = list(d), list(s), v.tolist()
        else:
            cur, d, s, v = None, [], [], []
        seen = set(d)
        ln = self.ln
        for line in _text_lines(block):
            ln += 1
            parts = line.split()
            if not parts:
                continue
            try:
                qid, did, sv, fv = _parse_line(parts)
            except ValueError as exc:
                if ln == 1 and len(parts) == 3:
                    continue  # a 'query-id corpus-id score' header
                self.report(ln, str(exc))
                continue
            if qid != cur:
                if cur is not None:
                    qs.append(cur)
                    ns.append(len(d))
                    docs += d
                    sstr += s
                    vals += v
                cur, d, s, v, seen = qid, [], [], [], set()
            if did in seen:
                self.report(ln, f"duplicate document {did!r} in query {qid!r} (ignored)")
                continue
            seen.add(did)
            d.append(did)
            s.append(sv)
            v.append(fv)
        self.ln = ln
        self.open = None if cur is None else (cur, d, s, np.asarray(v, np.float64))
        return qs, ns, docs, sstr, np.asarray(vals, np.float64)


def _iter_pieces(path: str, report):
    parser = _PoolParser(report)
    for block in iter_blocks(path):
        piece = parser.feed(block)
        if piece[0]:
            yield piece
    last = parser.close()
    if last is not None:
        yield last


def iter_chunks(path: str, chunk_size: int, report):
    """Stream a pool file as :class:`Chunk` s of ``chunk_size`` queries (the last may be smaller).

    Semantics: 6 fields ``qid Q0 docid rank score tag`` or 3 ``qid docid score``; blank lines
    skipped; a 3-field line 1 that does not parse is a header; other malformed lines (field
    count, non-numeric or non-finite score) go to ``report(lineno, message)`` and are skipped;
    a document repeated inside a query keeps its first line (the later one is reported); a
    query is a run of consecutive lines with the same qid.
    """
    bq: list = []  # the chunk being filled from the pieces
    bn: list = []
    bd: list = []
    bs: list = []
    bv: list = []

    def emit():
        off = np.zeros(len(bn) + 1, np.int64)
        np.cumsum(bn, out=off[1:])
        return Chunk(bq, off, bd, bs, bv[0] if len(bv) == 1 else np.concatenate(bv))

    for qs, ns, d, s, v in _iter_pieces(path, report):
        off = np.zeros(len(ns) + 1, np.int64)
        np.cumsum(ns, out=off[1:])
        offl = off.tolist()
        i = 0
        while i < len(qs):
            j = min(len(qs), i + chunk_size - len(bq))
            a, b = offl[i], offl[j]
            if not bq:  # start a chunk: one slice copy of each column
                bq, bn, bd, bs, bv = qs[i:j], ns[i:j], d[a:b], s[a:b], [v[a:b]]
            else:
                bq += qs[i:j]
                bn += ns[i:j]
                bd += d[a:b]
                bs += s[a:b]
                bv.append(v[a:b])
            if len(bq) == chunk_size:
                yield emit()
                bq, bn, bd, bs, bv = [], [], [], [], []
            i = j
    if bq:
        yield emit()


def iter_queries(path: str, report):
    """Stream ``(qid, docids, score_strs, scores)`` per contiguous query block.

    Malformed lines are passed to ``report(lineno, message)`` and skipped.  Duplicate doc
    ids within a query keep the first occurrence (the later line is reported).
    """
    for chunk in iter_chunks(path, 1024, report):
        yield from chunk


class _ScoreParser:
    """Incremental parser of a score file into ``(qid, {docid: score})`` per contiguous block.

    Semantics (both paths): ``query-id doc-id score`` or a 6-field TREC line; a line 1 that
    does not parse is a header; any other malformed line or a non-finite score raises
    ``ValueError("<file>:<line>: ...")``; a repeated doc id in a block keeps its last score.
    """

    def __init__(self, path: str):
        self.path = path
        self.ln = 0
        self.open = None  # (qid, dict)

    def feed(self, block: bytes) -> list:
        if self.ln:
            out = self._fast(block)
            if out is not None:
                return out
        return self._slow(block)

    def close(self) -> list:
        out = [] if self.open is None else [self.open]
        self.open = None
        return out

    def _emit(self, out, qid, block):
        if self.open is not None and self.open[0] == qid:
            self.open[1].update(block)
            return
        if self.open is not None:
            out.append(self.open)
        self.open = (qid, block)

    def _fast(self, block: bytes):
        r = _fast_columns(block)
        if r is None:
            return None
        n_lines, qs, ns, d, s = r
        out: list = []
        if qs:
            v = _floats(s)
            if v is None or np.abs(v).max() > _F32_MAX:  # the line-by-line path reports it
                return None
            vl = v.tolist()
            a = 0
            for key, n in zip(qs, ns, strict=True):
                self._emit(out, key, dict(zip(d[a : a + n], vl[a : a + n], strict=True)))
                a += n
        self.ln += n_lines
        return out

    def _slow(self, block: bytes):
        out: list = []
        cur, blk = self.open if self.open is not None else (None, {})
        self.open = None
        lines = list(_text_lines(block))
        for qid, did, v in iter_score_lines(lines, self.path, self.ln + 1):
            if qid != cur:
                if cur is not None:
                    out.append((cur, blk))
                cur, blk = qid, {}
            blk[did] = v
        self.ln += len(lines)
        if cur is not None:
            self.open = (cur, blk)
        return out


def iter_score_blocks(path: str):
    """Stream a score file as ``(qid, {docid: score})`` per contiguous query block."""
    parser = _ScoreParser(path)
    for block in iter_blocks(path):
        yield from parser.feed(block)
    yield from parser.close()


def read_scores(path: str) -> dict:
    """Read a whole score file into ``{qid: {docid: score}}``.

    Queries may come in any order; a repeated ``(qid, docid)`` keeps its last score.  Line 1
    may be a header; a malformed line, a non-finite score or one outside the float32 range
    raises ``ValueError("<file>:<line>: ...")``.  ``.gz`` files are read through gzip.
    """
    out: dict = {}
    for qid, blk in iter_score_blocks(path):
        d = out.get(qid)
        if d is None:
            out[qid] = blk
        else:
            d.update(blk)
    return out


class ScoreStream:
    """Stream a score file by contiguous query blocks, in the pool file's query order.

    ``take(qid)`` returns the next block if it belongs to ``qid`` (and advances), else None
    (the query has no scores; nothing is consumed).  Memory: one block of the file.
    """

    def __init__(self, path: str):
        self.path = path
        self.missing = 0
        self._it = iter_score_blocks(path)
        self._cur = next(self._it, None)

    def take(self, qid: str):
        """Return the next block if it belongs to ``qid`` (and advance), else None."""
        if self._cur is not None and self._cur[0] == qid:
            block = self._cur[1]
            self._cur = next(self._it, None)
            return block
        self.missing += 1
        return None


def parse_score_fields(parts):
    """``(qid, docid, score)`` of a split score line: 3 fields, or a 6-field TREC run line.

    Raises
    ------
    ValueError
        Another field count, or a score ``float()`` does not read.
    """
    if len(parts) == 3:
        return parts[0], parts[1], float(parts[2])
    if len(parts) == 6:
        return parts[0], parts[2], float(parts[4])
    raise ValueError(f"expected 3 fields (query-id doc-id score) or 6 (TREC run), got {len(parts)}")


def iter_score_lines(lines, path, first_ln: int = 1):
    """Yield the validated ``(qid, docid, score)`` of score-file ``lines`` (numbered from ``first_ln``).

    Blank lines are skipped; line 1 may be a header (a non-numeric score); a malformed line, a
    non-finite score or one outside the float32 range (``|s| > 3.4e38``)
    raises ``ValueError`` naming ``path`` and the 1-based line number.
    """
    for ln, line in enumerate(lines, first_ln):
        parts = line.split()
        if not parts:
            continue
        try:
            qid, did, s = parse_score_fields(parts)
        except ValueError as exc:
            if ln == 1:
                continue  # header
            raise ValueError(f"{path}:{ln}: malformed score line: {exc}") from None
        if not np.isfinite(s):
            raise ValueError(f"{path}:{ln}: non-finite score {parts!r}")
        if abs(s) > _F32_MAX:
            raise ValueError(f"{path}:{ln}: score {s!r} is outside the float32 range (scores are float32)")
        yield qid, did, s


# ---------------------------------------------------------------------------------------------
# the line source of the strict readers (jkofast.eval.trec: runs and qrels)
# ---------------------------------------------------------------------------------------------
def open_text(path, mode: str = "rt"):
    """Open ``path`` as UTF-8 text, through gzip when it ends with ``.gz``."""
    path = os.fspath(path)
    if path.endswith(".gz"):
        return gzip.open(path, mode, encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def iter_rows(path):
    """Yield ``(line number, fields)`` of the non-empty, non-comment (``#``) lines of ``path``.

    A line holding a tab is split on tabs (ids may then hold spaces), any other line on
    whitespace.

    Raises
    ------
    ValueError
        Bytes that are not UTF-8, naming the file and the line after which they occur.
    """
    with open_text(path) as fh:
        lineno = 0
        try:
            for line in fh:
                lineno += 1
                s = line.strip()
                if not s or s.startswith("#"):
                    continue
                yield lineno, s.split("\t") if "\t" in s else s.split()
        except UnicodeDecodeError as exc:
            lineno, col = _utf8_error_position(path)
            raise ValueError(
                f"{os.fspath(path)}:{lineno}: invalid UTF-8 at byte {col} of the line ({exc.reason})"
            ) from None


def _utf8_error_position(path) -> tuple[int, int]:
    r"""``(line number, byte in the line)`` of the first byte of ``path`` that is not UTF-8.

    The text reader decodes in blocks, so its error does not say the line; this re-reads the
    bytes one ``\n``-line at a time and counts lines as text mode does (``\n``, ``\r\n`` and a
    lone ``\r`` each end one).  Returns ``(0, 0)`` when every line decodes.
    """
    path = os.fspath(path)
    lineno = 0
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as fh:
        for raw in fh:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                head = raw[: exc.start]
                starts = [0] + [i + 1 for i, b in enumerate(head) if b == 0x0D and head[i + 1 : i + 2] != b"\n"]
                return lineno + len(starts), exc.start - starts[-1]
            lineno += 1 + raw.rstrip(b"\n").count(b"\r") - raw.count(b"\r\n")
    return 0, 0


# ---------------------------------------------------------------------------------------------
# formatting and atomic writing
# ---------------------------------------------------------------------------------------------
def strictly_decreasing(scores) -> np.ndarray:
    """Return ``scores`` (nq, k) with every score not below the previous rank's, at float32, lowered under it.

    trec_eval keeps scores as C floats and orders float32 ties by document id: a score that ties or
    exceeds the previous rank's at float32 becomes the float32 just below it (one float32 step), so
    a tool that re-sorts by score keeps the ranked order.  ``-inf`` (an empty rank) stays; the dtype
    (float32 or float64) is kept; the first rank is never changed.
    """
    out = np.array(scores, copy=True)
    ninf = np.float32(-np.inf)
    for j in range(1, out.shape[1]):
        prev, cur = out[:, j - 1].astype(np.float32), out[:, j]
        bad = (cur != -np.inf) & ~(cur.astype(np.float32) < prev)
        out[bad, j] = np.nextafter(prev[bad], ninf).astype(out.dtype)
    return out


def shortest_repr(scores, dtype=None) -> list:
    """Return the shortest decimal strings that read back (``float``) to the same value of ``dtype``.

    Parameters
    ----------
    scores : array_like of float
        The values.
    dtype : {None, numpy.float32, numpy.float64}
        The dtype to round-trip; ``None``: the array's own (float32 or float64; anything else,
        including a list of Python floats, is float64).

    Returns
    -------
    list of str
        float32: numpy's shortest unique repr (Dragon4, ``str(np.float32(x))``), e.g. ``0.1``
        for ``np.float32(0.1)`` where ``%.9g`` writes ``0.100000001`` and ``%.6f`` ``0.100000``;
        float64: Python's ``repr``.  ``float(s)`` gives back the value exactly (float32 after
        ``np.float32(float(s))``), and distinct values give distinct strings whose order is the
        values' order: rounding creates no ties.

    Examples
    --------
    >>> shortest_repr(np.array([0.1, 1 / 3, 2.0], np.float32))
    ['0.1', '0.33333334', '2.0']
    >>> shortest_repr([0.1, 1 / 3])
    ['0.1', '0.3333333333333333']
    """
    a = np.asarray(scores)
    if dtype is None:
        dtype = np.float32 if a.dtype == np.float32 else np.float64
    if np.dtype(dtype) == np.float32:
        # vectorised Dragon4 in numpy's C loop (float32 -> str); Python's repr would give float64 digits
        return a.astype(np.float32, copy=False).astype(str).tolist()
    if np.dtype(dtype) != np.float64:
        raise TypeError(f"dtype must be float32 or float64, got {np.dtype(dtype)}")
    vals = a.astype(np.float64, copy=False).tolist()
    return ("%r\n" * len(vals) % tuple(vals)).split("\n")[:-1] if vals else []


def format_run(
    query_ids,
    offsets,
    doc_ids,
    scores,
    tag: str,
    *,
    score_format: str = "shortest",
    score_dtype=None,
    verbatim=None,
) -> str:
    r"""Return the TREC lines ``qid Q0 docid rank score tag`` of a ragged batch, ranks from 1.

    Parameters
    ----------
    query_ids : sequence of str, length nq
        Query ``i`` owns lines ``offsets[i]:offsets[i + 1]``, written in the given order.
    offsets : ndarray of int64, shape (nq + 1,)
        Row boundaries.
    doc_ids : sequence, length offsets[-1]
        Document ids (written with ``str``).
    scores : sequence or ndarray, length offsets[-1]
        Floats, or, for the queries flagged in ``verbatim``, strings written as given.
    tag : str
        Run tag (last column), written as given.
    score_format : str
        ``"shortest"`` (default): :func:`shortest_repr` of ``score_dtype`` -- the shortest string
        that reads back to the same float32 / float64, so re-reading gives the exact scores and
        rounding creates no ties; or a ``%`` spec (``"%.9g"``, ``"%.6f"``, ``"%r"``).
    score_dtype : {None, numpy.float32, numpy.float64}
        With ``"shortest"``: the dtype the scores round-trip (``None``: a float32 array's
        float32, else float64).  Pass ``numpy.float32`` when float32 scores come as a list of
        Python floats.
    verbatim : ndarray of bool, shape (nq,), optional
        Queries whose scores are strings (e.g. input score strings passed through).

    Returns
    -------
    str
        The lines; byte-identical to ``f"{q} Q0 {d} {rank} {s:<spec>} {tag}\\n"`` per line (with
        ``s`` the :func:`shortest_repr` string for ``"shortest"``).
    """
    lens = np.diff(np.asarray(offsets, np.int64))
    m = int(lens.sum())
    if m == 0:
        return ""
    if score_format == "shortest":
        scores, score_format = _shortest_column(scores, score_dtype, lens, verbatim), "%s"
    elif isinstance(scores, np.ndarray):
        scores = scores.tolist()
    args: list = [None] * (4 * m)
    args[0::4] = np.repeat(np.array(query_ids, object), lens).tolist()
    args[1::4] = doc_ids
    args[2::4] = (np.arange(m) - np.repeat(np.asarray(offsets, np.int64)[:-1], lens) + 1).tolist()
    args[3::4] = scores
    t = tag.replace("%", "%%")
    line = f"%s Q0 %s %d {score_format} {t}\n"
    if verbatim is None or not np.any(verbatim):
        fmt = line * m
    else:
        raw = f"%s Q0 %s %d %s {t}\n"
        fmt = "".join(
            [(raw if v else line) * c for v, c in zip(np.asarray(verbatim).tolist(), lens.tolist(), strict=True)]
        )
    return fmt % tuple(args)


def _shortest_column(scores, dtype, lens, verbatim) -> list:
    """Return the score column of :func:`format_run` as :func:`shortest_repr` strings (verbatim rows as given)."""
    if verbatim is None or not np.any(verbatim):
        return shortest_repr(scores, dtype)
    if dtype is None and isinstance(scores, np.ndarray) and scores.dtype == np.float32:
        dtype = np.float32
    out = list(scores)
    rows = np.repeat(np.asarray(verbatim, bool), lens)
    num = np.flatnonzero(~rows)
    for j, v in zip(num.tolist(), shortest_repr([float(out[j]) for j in num.tolist()], dtype or np.float64)):
        out[j] = v
    return out


def topk_to_ragged(indices, scores, doc_ids):
    """Top-k result arrays -> ``(offsets, doc ids, scores)`` for :func:`format_run`.

    Row ``i`` of ``indices`` (corpus rows, best first, padded at the tail with ``-1``) is cut at
    its first negative entry; ``doc_ids`` maps rows to ids; scores become Python floats.
    """
    idx = np.asarray(indices)
    sc = np.asarray(scores)
    neg = idx < 0
    lens = np.where(neg.any(axis=1), neg.argmax(axis=1), idx.shape[1]) if idx.size else np.zeros(idx.shape[0], int)
    keep = np.arange(idx.shape[1])[None, :] < lens[:, None]
    off = np.zeros(idx.shape[0] + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return off, [doc_ids[i] for i in idx[keep].tolist()], sc[keep].tolist()
