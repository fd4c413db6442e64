r"""Run files parsed from raw bytes: field boundaries, exact decimal scores, query segments.

The fast path of :func:`jkofast.eval.fastread.read_run_arrays_fast` for the common case —
ASCII text, ``\n`` or ``\r\n`` line ends, fields split on spaces or on tabs, 3 or 6 columns,
plain decimal scores. Anything else (a non-ASCII byte, a lone ``\r`` or another whitespace
control character, a score with more than 18 significant digits or beyond 1e±22, ``nan``,
``inf``, a header line, a column count that changes) sets ``ok = False`` and the wrapper reads
the file with the line-by-line reader, which either accepts it or names the file and line.

Scores: ``[+-]digits[.digits][(e|E)[+-]digits]`` with at most 18 significant digits and a
decimal exponent in [−22, 22] is Clinger's fast path — the mantissa is an exact double and
``10^|e|`` an exact double, so one IEEE multiplication or division gives the correctly rounded
value, bit-identical to Python's ``float(text)``.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel

__all__ = ["chunk_bounds", "copy_ids", "count_lines", "new_segments", "parse_run_bytes", "parse_run_chunks"]

_POW10 = np.array([10.0**i for i in range(23)])
_MANT_MAX = 2**53

SP = 32
TAB = 9
LF = 10
CR = 13
HASH = 35


@kernel()
def count_lines(buf):
    """Return the number of lines of ``buf`` (line feeds, plus one for a last line without one)."""
    n = 0
    for i in range(buf.shape[0]):
        if buf[i] == LF:
            n += 1
    if buf.shape[0] and buf[buf.shape[0] - 1] != LF:
        n += 1
    return n


@kernel()
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


@kernel()
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


@kernel()
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


@kernel()
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


@kernel()
def _plain_ascii(buf, lo, hi):
    """Whether ``buf[lo:hi]`` is ASCII whose only control bytes are tab, LF and CR before LF."""
    n = buf.shape[0]
    for i in range(lo, hi):
        c = buf[i]
        if c >= 128 or (c < 32 and c != TAB and c != LF and c != CR):
            return False
        if c == CR and (i + 1 >= n or buf[i + 1] != LF):
            return False
    return True


@kernel()
def parse_run_bytes(buf, q_start, q_len, d_start, d_len, scores):
    """Parse a run held in ``buf`` (uint8); fill one entry per data line; return ``(n_rows, ncol, ok)``.

    ``q_start/q_len``, ``d_start/d_len`` (int64) locate the query and document ids in ``buf``;
    ``scores`` (float64) the exact scores. ``ok`` False: the file needs the line-by-line
    reader (see the module docstring). Blank lines and ``#`` comments are skipped.
    """
    if not _plain_ascii(buf, 0, buf.shape[0]):
        return 0, 0, False
    return parse_range(buf, 0, buf.shape[0], 0, q_start, q_len, d_start, d_len, scores)


@kernel()
def _space_fields(buf, s, n, fs, fe):
    """One pass over the line at ``buf[s:]``: ``(fields, end, tab)`` on space runs (at most 6 kept, 7 = more).

    ``end`` is the line feed's index (or ``n``); ``tab`` True when the line holds a tab (the
    caller splits it on tabs instead). A CR (only ever before LF) separates like a space.
    """
    k = 0
    j = s
    while j < n:
        c = buf[j]
        if c == LF:
            break
        if c == TAB:
            while j < n and buf[j] != LF:
                j += 1
            return k, j, True
        if c <= SP:
            j += 1
            continue
        a = j
        while j < n and buf[j] > SP:
            j += 1
        if k < 6:
            fs[k] = a
            fe[k] = j
        k += 1
    return min(k, 7), j, False


@kernel()
def _strip(buf, a, b):
    """Return ``(a, b)`` of ``buf[a:b]`` without leading / trailing spaces, tabs and CR."""
    while a < b and (buf[a] == SP or buf[a] == TAB):
        a += 1
    while b > a and (buf[b - 1] == SP or buf[b - 1] == TAB or buf[b - 1] == CR):
        b -= 1
    return a, b


@kernel()
def parse_range(buf, lo, hi, row0, q_start, q_len, d_start, d_len, scores):
    """Parse the whole lines of ``buf[lo:hi]`` into rows ``row0, row0 + 1, ...``; return ``(n_rows, ncol, ok)``.

    ``ncol`` is 0 when the range holds no data line.
    """
    pow10 = _POW10
    fs = np.empty(6, np.int64)
    fe = np.empty(6, np.int64)
    n = hi
    ncol = 0
    row = row0
    s = lo
    while s < n:
        k, e, tab = _space_fields(buf, s, n, fs, fe)
        nxt = e + 1
        if tab:  # a line holding a tab splits on tabs (ids may hold spaces)
            a, b = _strip(buf, s, e)
            k = 0 if a == b else _fields(buf, a, b, fs, fe)
        s = nxt
        if k == 0 or buf[fs[0]] == HASH:
            continue
        if ncol == 0:
            if k != 3 and k != 6:
                return 0, 0, False
            ncol = k
        if k != ncol:
            return 0, 0, False
        if ncol == 6:
            qi, di, si = 0, 2, 4
            if not _is_int(buf, fs[3], fe[3]):
                return 0, 0, False
        else:
            qi, di, si = 0, 1, 2
        v, good = _parse_decimal(buf, fs[si], fe[si], pow10)
        if not good or fe[qi] == fs[qi] or fe[di] == fs[di]:
            return 0, 0, False  # a header, an unusual number, an empty id: the slow reader decides
        q_start[row] = fs[qi]
        q_len[row] = fe[qi] - fs[qi]
        d_start[row] = fs[di]
        d_len[row] = fe[di] - fs[di]
        scores[row] = v
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
def parse_run_chunks(buf, bounds, row_off, q_start, q_len, d_start, d_len, scores, rows, ncols, oks):
    """Parse the byte ranges ``bounds`` in parallel (``prange`` over chunks).

    Chunk ``c`` writes rows from ``row_off[c]`` (its first line's index: at most one row per
    line) and its ``rows[c]``, ``ncols[c]`` (0: no data line), ``oks[c]``.
    """
    for c in prange(bounds.shape[0] - 1):
        lo = bounds[c]
        hi = bounds[c + 1]
        if not _plain_ascii(buf, lo, hi):
            rows[c] = 0
            ncols[c] = 0
            oks[c] = False
            continue
        r, k, ok = parse_range(buf, lo, hi, row_off[c], q_start, q_len, d_start, d_len, scores)
        rows[c] = r
        ncols[c] = k
        oks[c] = ok


@kernel()
def new_segments(buf, q_start, q_len, n_rows, first):
    """``first[r]`` = row ``r`` starts a new query block (its query id differs from row ``r − 1``'s)."""
    for r in range(n_rows):
        if r == 0 or q_len[r] != q_len[r - 1]:
            first[r] = True
            continue
        same = True
        a = q_start[r]
        b = q_start[r - 1]
        for t in range(q_len[r]):
            if buf[a + t] != buf[b + t]:
                same = False
                break
        first[r] = not same


@kernel()
def copy_ids(buf, start, length, n_rows, out):
    """Copy the id bytes of each row into the zero-padded rows of ``out`` (uint8, n_rows x width)."""
    for r in range(n_rows):
        a = start[r]
        for t in range(length[r]):
            out[r, t] = buf[a + t]
