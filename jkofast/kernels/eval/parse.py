r"""Run and qrels files parsed from raw bytes: field boundaries, exact decimal scores, query segments.

The fast path of :mod:`jkofast.eval.fastread` for the common case — ASCII text, ``\n`` or
``\r\n`` line ends, fields split on spaces or on tabs; runs of 3 or 6 columns with plain
decimal scores, qrels of 3 or 4 columns with integer labels (``kind`` ``RUN`` / ``QRELS``).
Anything else (a non-ASCII byte, a lone ``\r`` or another whitespace control character, a
score with more than 18 significant digits or beyond 1e±22, ``nan``, ``inf``, a label of more
than 18 digits, a column count that changes) sets ``ok = False`` and the wrapper reads the file
with the line-by-line reader, which either accepts it or names the file and line.  A first data
line of 3 columns whose value does not parse is reported in ``hdr`` (the wrapper decides with
Python's ``float`` / ``int`` whether it is a header, as the line-by-line reader does).

Scores: ``[+-]digits[.digits][(e|E)[+-]digits]`` with at most 18 significant digits and a
decimal exponent in [−22, 22] is Clinger's fast path — the mantissa is an exact double and
``10^|e|`` an exact double, so one IEEE multiplication or division gives the correctly rounded
value, bit-identical to Python's ``float(text)``.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel

__all__ = [
    "QRELS",
    "RUN",
    "chunk_bounds",
    "copy_ids",
    "parse_table_chunks",
    "scan_chunks",
]

_POW10 = np.array([10.0**i for i in range(23)])
_MANT_MAX = 2**53

SP = 32
TAB = 9
LF = 10
CR = 13
HASH = 35

RUN = 0
QRELS = 1


@kernel(inline="always")
def _mantissa(buf, i, e):
    """``(mant, exp10, next index, ok)`` of ``digits[.digits]`` from ``buf[i]`` (at most 18 significant digits)."""
    mant = 0
    sig = 0
    exp10 = 0
    n_dig = 0
    dot = False
    while i < e:
        c = buf[i]
        if 48 <= c <= 57:
            n_dig += 1
            if mant > 0 or c != 48:
                sig += 1
                if sig > 18:  # 19 digits can overflow int64 (the mantissa must also stay <= 2**53)
                    return 0, 0, i, False
                mant = mant * 10 + (c - 48)
            if dot:
                exp10 -= 1
        elif c == 46 and not dot:
            dot = True
        else:
            break
        i += 1
    return mant, exp10, i, n_dig > 0


@kernel(inline="always")
def _exponent(buf, i, e):
    """``(value, ok)`` of the exponent part ``(e|E)[+-]digits`` at ``buf[i:e]`` (empty: 0)."""
    if i == e:
        return 0, True
    if buf[i] != 101 and buf[i] != 69:
        return 0, False
    i += 1
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    if i == e:
        return 0, False
    ev = 0
    while i < e:
        c = buf[i]
        if not 48 <= c <= 57:
            return 0, False
        if ev < 100000:
            ev = ev * 10 + (c - 48)
        i += 1
    return (-ev if neg else ev), True


@kernel(inline="always")
def _parse_decimal(buf, s, e, pow10):
    """``(value, ok)`` of the ASCII decimal ``buf[s:e]`` by Clinger's fast path (``ok`` False otherwise)."""
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    mant, exp10, i, ok = _mantissa(buf, i, e)
    if not ok:
        return 0.0, False
    ev, ok = _exponent(buf, i, e)
    exp10 += ev
    if not ok or mant > _MANT_MAX:
        return 0.0, False
    if mant == 0:
        v = 0.0
    elif exp10 > 22 or exp10 < -22:
        return 0.0, False
    elif exp10 >= 0:
        v = np.float64(mant) * pow10[exp10]
    else:
        v = np.float64(mant) / pow10[-exp10]
    return (-v if neg else v), True


@kernel(inline="always")
def _is_int(buf, s, e):
    """Whether ``buf[s:e]`` is ``[+-]digits`` (ASCII)."""
    i = s
    if i < e and (buf[i] == 43 or buf[i] == 45):
        i += 1
    if i == e:
        return False
    while i < e:
        if not 48 <= buf[i] <= 57:
            return False
        i += 1
    return True


@kernel()
def _fields(buf, s, e, fs, fe):
    """Split the line ``buf[s:e]`` (no line end) into at most 6 fields; return their count (7 = more).

    A line with a tab splits on tabs, each field stripped of spaces; any other on space runs.
    """
    tab = False
    for i in range(s, e):
        if buf[i] == TAB:
            tab = True
            break
    n = 0
    i = s
    if tab:
        while True:
            j = i
            while j < e and buf[j] != TAB:
                j += 1
            a = i
            b = j
            while a < b and buf[a] == SP:
                a += 1
            while b > a and buf[b - 1] == SP:
                b -= 1
            if n >= 6:
                return 7
            fs[n] = a
            fe[n] = b
            n += 1
            if j >= e:
                break
            i = j + 1
        return n
    while i < e:
        while i < e and buf[i] == SP:
            i += 1
        if i >= e:
            break
        j = i
        while j < e and buf[j] != SP:
            j += 1
        if n >= 6:
            return 7
        fs[n] = i
        fe[n] = j
        n += 1
        i = j
    return n


@kernel(inline="always")
def _space_fields(buf, s, fs, fe):
    """One pass over the line at ``buf[s:]``: ``(fields, end, mode)`` on space runs (at most 6 kept, 7 = more).

    ``end`` is the line feed's index.  ``mode`` 0: split on spaces; 1: the line holds a tab
    (the caller splits it on tabs instead); 2: a byte the fast path does not take (>= 128, a
    control byte other than tab, LF and a CR before LF).  A CR before LF separates like a
    space.  Precondition: a line feed follows (the sentinel after the data), so no scan
    checks the buffer's end.
    """
    k = 0
    j = s
    while True:
        c = buf[j]
        if c == SP:
            j += 1
            continue
        if c == LF:
            break
        if c < SP:
            if c == TAB:
                while buf[j] != LF:
                    j += 1
                return k, j, 1
            if c == CR and buf[j + 1] == LF:
                j += 1
                continue
            return 0, j, 2
        if c >= 128:
            return 0, j, 2
        a = j
        j += 1
        c = buf[j]
        while SP < c < 128:
            j += 1
            c = buf[j]
        if k < 6:
            fs[k] = a
            fe[k] = j
        k += 1
    return min(k, 7), j, 0


@kernel()
def _plain_line(buf, s, e):
    """Whether the line ``buf[s:e]`` (without its LF) holds only bytes < 128 and no control byte but tab / final CR."""
    for i in range(s, e):
        c = buf[i]
        if c >= 128 or (c < SP and c != TAB and not (c == CR and i == e - 1)):
            return False
    return True


@kernel(inline="always")
def _strip(buf, a, b):
    """Return ``(a, b)`` of ``buf[a:b]`` without leading / trailing spaces, tabs and CR."""
    while a < b and (buf[a] == SP or buf[a] == TAB):
        a += 1
    while b > a and (buf[b - 1] == SP or buf[b - 1] == TAB or buf[b - 1] == CR):
        b -= 1
    return a, b


@kernel(inline="always")
def _parse_int(buf, s, e):
    """``(value, ok)`` of the ASCII integer ``[+-]digits`` at ``buf[s:e]`` (at most 18 digits)."""
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    if i == e or e - i > 18:
        return 0, False
    v = 0
    while i < e:
        c = buf[i]
        if not 48 <= c <= 57:
            return 0, False
        v = v * 10 + (c - 48)
        i += 1
    return (-v if neg else v), True


@kernel(inline="always")
def _same_bytes(buf, a, na, b, nb):
    """Whether ``buf[a:a + na]`` and ``buf[b:b + nb]`` hold the same bytes."""
    if na != nb:
        return False
    for t in range(na):
        if buf[a + t] != buf[b + t]:
            return False
    return True


@kernel(inline="always")
def _columns(kind, ncol):
    """``(query, doc, value, rank)`` field indices of a ``kind`` table of ``ncol`` columns (-1: no rank)."""
    if ncol == 3:
        return 0, 1, 2, -1
    if kind == RUN:
        return 0, 2, 4, 3
    return 0, 2, 3, -1


@kernel()
def parse_table_range(buf, lo, hi, row0, kind, q_start, q_len, d_start, d_len, values, labels, first, hdr):
    """Parse the whole lines of ``buf[lo:hi]`` into rows ``row0, row0 + 1, ...``; return ``(n_rows, ncol, ok)``.

    ``kind`` ``RUN``: 6 (``qid Q0 docid rank score tag``) or 3 (``qid docid score``) columns,
    scores into ``values`` (float64); ``QRELS``: 4 (``qid iter docid rel``) or 3 columns,
    labels into ``labels`` (int64).  ``first[row]``: the row's query id differs from the
    previous row's (True for the range's first row: the caller compares across ranges).
    ``ncol`` is 0 when the range holds no data line.  When ``lo == 0``, a first data line of
    3 columns whose value does not parse is skipped and its value field written to ``hdr``
    (start, end) for the wrapper to judge.  Precondition: ``buf[hi]`` exists and is a line
    feed when ``buf[hi - 1]`` is not (the wrapper's sentinel after the data).
    """
    pow10 = _POW10
    fs = np.empty(6, np.int64)
    fe = np.empty(6, np.int64)
    n = hi
    ncol = 0
    row = row0
    s = lo
    w_long = 6 if kind == RUN else 4
    while s < n:
        k, e, mode = _space_fields(buf, s, fs, fe)
        if mode == 2:
            return 0, 0, False
        if mode == 1:  # a line holding a tab splits on tabs (ids may hold spaces)
            if not _plain_line(buf, s, e):
                return 0, 0, False
            a, b = _strip(buf, s, e)
            k = 0 if a == b else _fields(buf, a, b, fs, fe)
        s = e + 1
        if k == 0 or buf[fs[0]] == HASH:
            continue
        head = ncol == 0
        if head:
            if k != 3 and k != w_long:
                return 0, 0, False
            ncol = k
        if k != ncol:
            return 0, 0, False
        qi, di, vi, ri = _columns(kind, ncol)
        if ri >= 0 and not _is_int(buf, fs[ri], fe[ri]):
            return 0, 0, False
        v = 0.0
        lab = 0
        if kind == RUN:
            v, good = _parse_decimal(buf, fs[vi], fe[vi], pow10)
        else:
            lab, good = _parse_int(buf, fs[vi], fe[vi])
        if not good and head and lo == 0 and ncol == 3:
            hdr[0] = fs[vi]  # a header line? the wrapper decides
            hdr[1] = fe[vi]
            continue
        if not good or fe[qi] == fs[qi] or fe[di] == fs[di]:
            return 0, 0, False  # an unusual number or an empty id: the slow reader decides
        q_start[row] = fs[qi]
        q_len[row] = fe[qi] - fs[qi]
        first[row] = row == row0 or not _same_bytes(buf, q_start[row - 1], q_len[row - 1], fs[qi], q_len[row])
        d_start[row] = fs[di]
        d_len[row] = fe[di] - fs[di]
        if kind == RUN:
            values[row] = v
        else:
            labels[row] = lab
        row += 1
    return row - row0, ncol, True


@kernel()
def chunk_bounds(buf, n_chunks, bounds):
    """Split ``buf`` into ``n_chunks`` byte ranges at line starts: ``bounds`` (int64, n_chunks + 1)."""
    n = buf.shape[0]
    bounds[0] = 0
    for c in range(1, n_chunks):
        p = max((n * c) // n_chunks, bounds[c - 1])
        while p < n and p > 0 and buf[p - 1] != LF:
            p += 1
        bounds[c] = p
    bounds[n_chunks] = n


@kernel(parallel=True)
def scan_chunks(buf, bounds, lines):
    """Line count ``lines[c]`` of each byte range ``c`` of ``bounds`` (``prange``; a last line without LF counts)."""
    for c in prange(bounds.shape[0] - 1):
        lo = bounds[c]
        hi = bounds[c + 1]
        m = 0
        for i in range(lo, hi):
            m += buf[i] == LF
        if hi > lo and buf[hi - 1] != LF:
            m += 1
        lines[c] = m


@kernel(parallel=True)
def parse_table_chunks(
    buf, bounds, row_off, kind, q_start, q_len, d_start, d_len, values, labels, first, rows, ncols, oks, hdr
):
    """Parse the byte ranges ``bounds`` in parallel (``prange`` over chunks; see ``parse_table_range``).

    Chunk ``c`` writes rows from ``row_off[c]`` (its first line's index: at most one row per
    line) and its ``rows[c]``, ``ncols[c]`` (0: no data line), ``oks[c]``; only chunk 0 may
    write ``hdr``.
    """
    for c in prange(bounds.shape[0] - 1):
        r, k, ok = parse_table_range(
            buf, bounds[c], bounds[c + 1], row_off[c], kind, q_start, q_len, d_start, d_len, values, labels, first, hdr
        )
        rows[c] = r
        ncols[c] = k
        oks[c] = ok


@kernel()
def copy_ids(buf, start, length, n_rows, out):
    """Copy the id bytes of each row into the zero-padded rows of ``out`` (uint8, n_rows x width)."""
    for r in range(n_rows):
        a = start[r]
        for t in range(length[r]):
            out[r, t] = buf[a + t]
