r"""Byte-level tokens and shard-local term ids for the streaming SGR build (``jkofast.sgr.streaming``).

The wrapper lowercases the shard's ASCII passages (``str.lower``; ASCII lowering has no context),
joins them with ``"\n"`` and passes the bytes with each passage's byte offsets; passages with
any non-ASCII character take the exact Python analyser instead (``script_tokenizer``).

* tokens are the maximal runs of ASCII word bytes (``[0-9A-Za-z_]``) of length >= 2: exactly
  the matches of ``re.findall(r"(?u)\b\w\w+\b", text)`` on ASCII text (``\w`` on an ASCII
  string matches only those bytes);
* local term ids are assigned in first-seen order through an open-addressing table
  (``int32``, power-of-two size, -1 = empty, linear probing) over FNV-1a hashes of the bytes;
  the table grows (rehash from the stored hashes) when it is half full, so its size follows
  the shard's distinct terms, not its tokens.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel
from jkofast.kernels.sorting import argsort_stable, sort_range

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@kernel()
def _is_word(c):
    """Return whether byte ``c`` is an ASCII word byte (digit, letter, underscore)."""
    return (48 <= c <= 57) or (97 <= c <= 122) or (65 <= c <= 90) or c == 95


@kernel(inline="always")
def _tokens_in(buf, lo, hi):
    """Return the number of tokens (maximal runs of >= 2 word bytes) in ``buf[lo:hi]``."""
    n = 0
    run = 0
    for p in range(lo, hi):
        if _is_word(buf[p]):
            run += 1
        else:
            if run >= 2:
                n += 1
            run = 0
    if run >= 2:
        n += 1
    return n


@kernel()
def count_tokens(buf, doc_off, dl):
    """Count the tokens of every passage: ``dl[i]`` = tokens in ``buf[doc_off[i]:doc_off[i + 1]]``; returns the sum."""
    total = 0
    for i in range(doc_off.shape[0] - 1):
        n = _tokens_in(buf, doc_off[i], doc_off[i + 1])
        dl[i] = n
        total += n
    return total


@kernel()
def _same(buf, a, b, n):
    for p in range(n):
        if buf[a + p] != buf[b + p]:
            return False
    return True


@kernel()
def _grow(table, term_hash, nv):
    """Return a table twice the size holding the ids ``0..nv-1`` (rehashed from ``term_hash``)."""
    new = np.full(table.shape[0] * 2, -1, np.int32)
    mask = np.uint64(new.shape[0] - 1)
    for t in range(nv):
        slot = term_hash[t] & mask
        while new[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
        new[slot] = t
    return new


@kernel()
def token_ids(buf, doc_off, n_tokens, ids, term_start, term_len, term_hash):
    """Assign shard-local term ids to every token, in passage order.

    Parameters
    ----------
    buf : uint8 (B,)
        Lowercased ASCII passages (joined by any non-word byte).
    doc_off : int64 (n + 1,)
        Passage byte offsets.
    n_tokens : int
        Tokens in all passages (:func:`count_tokens`); ``ids`` has this length.
    ids : int32 (n_tokens,)
        Out: the local term id of each token, passage after passage.
    term_start, term_len, term_hash : int64, int64, uint64 (>= distinct terms; ``n_tokens`` is enough)
        Out: each local term's first byte offset in ``buf``, length and hash.

    Returns
    -------
    int
        The number of distinct terms ``nv`` (the first ``nv`` entries of the term arrays).
    """
    table = np.full(1024, -1, np.int32)
    nv = 0
    k = 0
    for i in range(doc_off.shape[0] - 1):
        p = doc_off[i]
        end = doc_off[i + 1]
        while p < end:
            if not _is_word(buf[p]):
                p += 1
                continue
            a = p
            h = _FNV_OFFSET
            while p < end and _is_word(buf[p]):
                h = (h ^ np.uint64(buf[p])) * _FNV_PRIME
                p += 1
            n = p - a
            if n < 2:
                continue
            mask = np.uint64(table.shape[0] - 1)
            slot = h & mask
            while True:
                t = table[slot]
                if t < 0:
                    t = nv
                    table[slot] = t
                    term_start[t] = a
                    term_len[t] = n
                    term_hash[t] = h
                    nv += 1
                    if 2 * nv > table.shape[0]:
                        table = _grow(table, term_hash, nv)
                    break
                if term_hash[t] == h and term_len[t] == n and _same(buf, term_start[t], a, n):
                    break
                slot = (slot + np.uint64(1)) & mask
            ids[k] = t
            k += 1
    return nv


# ---------------------------------------------------------------------------------------------- corpus bytes
# The corpus build reads the file as bytes: ``line_bounds`` splits a block into lines, ``parse_lines``
# reads the BEIR rows whose JSON needs no decoding (ASCII, no escape, only the keys ``_id`` /
# ``title`` / ``text``) into byte ranges, and the wrapper hands every other line to ``json``.
# Passages are then tokenised straight from those ranges (``segs``: title and text of each
# passage), lowered on the fly, in blocks of passages owned by one ``prange`` iteration each;
# the blocks' term tables are merged in block order, which is the shard's first-seen order
# whatever the number of blocks.


@kernel()
def _is_space(c):
    r"""Return whether byte ``c`` is ASCII whitespace as ``bytes.strip`` sees it (`` \\t\\n\\r\\v\\f``)."""
    return c == 32 or (9 <= c <= 13)


@kernel()
def _lower(c):
    """Return the ASCII lowercase of byte ``c`` (``str.lower`` on ASCII)."""
    if 65 <= c <= 90:
        return c + 32
    return c


@kernel()
def line_bounds(buf, lo, hi, eof):
    r"""Split ``buf[lo:hi]`` into lines ending with ``\\n`` (and, at ``eof``, a last line without one).

    Returns
    -------
    starts, ends : int64 (L,)
        Line ``j`` is ``buf[starts[j]:ends[j]]``, without its ``\\n`` (at ``ends[j]`` when present).
    nonblank : bool (L,)
        Whether the line holds a byte other than ASCII whitespace (``raw.strip()`` non-empty).
    """
    n = 0
    for p in range(lo, hi):
        if buf[p] == 10:
            n += 1
    last = eof and hi > lo and buf[hi - 1] != 10
    if last:
        n += 1
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    nonblank = np.zeros(n, np.bool_)
    j = 0
    a = lo
    full = False
    for p in range(lo, hi):
        c = buf[p]
        if c == 10:
            starts[j] = a
            ends[j] = p
            nonblank[j] = full
            j += 1
            a = p + 1
            full = False
        elif not _is_space(c):
            full = True
    if last:
        starts[j] = a
        ends[j] = hi
        nonblank[j] = full
    return starts, ends, nonblank


@kernel()
def _skip_ws(buf, p, end):
    """Return the first position >= ``p`` that is not JSON whitespace (space, tab, CR, LF), at most ``end``."""
    while p < end:
        c = buf[p]
        if c == 32 or c == 9 or c == 10 or c == 13:
            p += 1
        else:
            break
    return p


@kernel()
def _plain_string(buf, p, end):
    """End (after the closing quote) of the JSON string opening at ``buf[p] == '"'``, or -1.

    -1 when the string needs decoding or is invalid: an escape, a control byte, a non-ASCII byte,
    or no closing quote before ``end``.
    """
    p += 1
    while p < end:
        c = buf[p]
        if c == 34:
            return p + 1
        if c == 92 or c < 32 or c >= 128:
            return -1
        p += 1
    return -1


@kernel()
def _parse_row(buf, a, end, out, i):
    """Parse the BEIR row ``buf[a:end]`` into ``out[i]`` (id, title, text byte ranges); return success."""
    p = _skip_ws(buf, a, end)
    if p >= end or buf[p] != 123:
        return False
    p = _skip_ws(buf, p + 1, end)
    seen = 0  # bits: 1 = _id, 2 = title, 4 = text
    for f in range(6):
        out[i, f] = 0
    if p < end and buf[p] == 125:
        return False  # {}: no _id
    while True:
        if p >= end or buf[p] != 34:
            return False
        q = _plain_string(buf, p, end)
        if q < 0:
            return False
        key = _key(buf, p + 1, q - p - 2)
        if key == 0 or (seen & key) != 0:
            return False  # another key, or a repeated one: the json module decides
        seen |= key
        p = _skip_ws(buf, q, end)
        if p >= end or buf[p] != 58:
            return False
        p = _skip_ws(buf, p + 1, end)
        if p >= end or buf[p] != 34:
            return False
        q = _plain_string(buf, p, end)
        if q < 0:
            return False
        f = 0 if key == 1 else (2 if key == 2 else 4)
        out[i, f] = p + 1
        out[i, f + 1] = q - 1
        p = _skip_ws(buf, q, end)
        if p >= end:
            return False
        if buf[p] == 44:
            p = _skip_ws(buf, p + 1, end)
            continue
        if buf[p] != 125:
            return False
        break
    if _skip_ws(buf, p + 1, end) != end or (seen & 1) == 0:
        return False
    return _plain_id(buf, out[i, 0], out[i, 1])


@kernel()
def _key(buf, a, n):
    """1, 2 or 4 if ``buf[a:a+n]`` is ``_id``, ``title`` or ``text``; 0 otherwise."""
    if n == 3 and buf[a] == 95 and buf[a + 1] == 105 and buf[a + 2] == 100:
        return 1
    if n == 5 and buf[a] == 116 and buf[a + 1] == 105 and buf[a + 2] == 116 and buf[a + 3] == 108:
        return 2 if buf[a + 4] == 101 else 0
    if n == 4 and buf[a] == 116 and buf[a + 1] == 101 and buf[a + 2] == 120 and buf[a + 3] == 116:
        return 4
    return 0


@kernel()
def _plain_id(buf, a, b):
    """Whether the id ``buf[a:b]`` is non-empty without a space (the wrapper's check names a bad one).

    Other whitespace bytes are control bytes, already refused in a plain string.
    """
    if b == a:
        return False
    for p in range(a, b):
        if buf[p] == 32:
            return False
    return True


@kernel(parallel=True)
def parse_lines(buf, starts, ends, out, ok):
    """Read the BEIR rows ``buf[starts[i]:ends[i]]`` that need no JSON decoding.

    Parameters
    ----------
    buf : uint8 (B,)
        Corpus bytes.
    starts, ends : int64 (n,)
        Byte range of each row (one JSON object per line).
    out : int64 (n, 6)
        Out: ``_id``, ``title`` and ``text`` string contents as ``[start, end)`` byte ranges
        (``0, 0`` for an absent title or text).
    ok : bool (n,)
        Out: the row is an object with a non-empty ``_id`` without spaces, the keys ``_id`` /
        ``title`` / ``text`` at most once each, string values of ASCII bytes without escapes
        or control bytes, and nothing after it but whitespace.  Every other row (other keys,
        escapes, non-ASCII text, null values, invalid JSON) is ``False``: the wrapper parses it
        with ``json`` (and reports what is wrong with it).
    """
    for i in prange(starts.shape[0]):
        ok[i] = _parse_row(buf, starts[i], ends[i], out, i)


@kernel(parallel=True)
def count_segment_tokens(buf, segs, dl):
    """Count the tokens of every passage: ``dl[i]`` = tokens of its two segments ``segs[i]``.

    Segments ``buf[segs[i, 0]:segs[i, 1]]`` (title) and ``buf[segs[i, 2]:segs[i, 3]]`` (text) are
    tokenised as if joined by a space.  Returns the sum.
    """
    n = segs.shape[0]
    for i in prange(n):
        # a segment boundary ends a run, as the space joining the two would
        dl[i] = _tokens_in(buf, segs[i, 0], segs[i, 1]) + _tokens_in(buf, segs[i, 2], segs[i, 3])
    return dl.sum()


@kernel()
def _same_lower(buf, a, b, n):
    for p in range(n):
        if _lower(buf[a + p]) != _lower(buf[b + p]):
            return False
    return True


@kernel()
def _grow_slots(slots):
    """Return a slot table twice the size holding the entries of ``slots`` (see :func:`_find_or_add`)."""
    new = np.full((slots.shape[0] * 2, 4), -1, np.int64)
    mask = new.shape[0] - 1
    for s in range(slots.shape[0]):
        if slots[s, 1] >= 0:
            j = slots[s, 0] & mask
            while new[j, 1] >= 0:
                j = (j + 1) & mask
            for f in range(4):
                new[j, f] = slots[s, f]
    return new


@kernel()
def _find_or_add(slots, buf, a, n, h, term_start, term_len, term_hash, base, nv):
    """Look up the term ``buf[a:a+n]`` (lowered, hash ``h``) among the ``nv`` terms of a slot table.

    ``slots`` (int64 ``(2**k, 4)``, open addressing, linear probing) holds per slot the hash
    (its top 63 bits), the term id (-1 = empty), the first byte and the length of the term, so
    that a probe reads one slot and the bytes it compares.  Returns ``(id, slots)``: a new term
    gets id ``nv`` (the caller increments ``nv`` when ``id == nv``) and is also written to
    ``term_start`` / ``term_len`` / ``term_hash`` at ``base + nv``; ``slots`` is replaced by a
    table twice the size when half full.
    """
    key = np.int64(h >> np.uint64(1))
    mask = slots.shape[0] - 1
    j = key & mask
    while True:
        t = slots[j, 1]
        if t < 0:
            slots[j, 0] = key
            slots[j, 1] = nv
            slots[j, 2] = a
            slots[j, 3] = n
            term_start[base + nv] = a
            term_len[base + nv] = n
            term_hash[base + nv] = h
            if 2 * (nv + 1) > slots.shape[0]:
                slots = _grow_slots(slots)
            return nv, slots
        if slots[j, 0] == key and slots[j, 3] == n and _same_lower(buf, slots[j, 2], a, n):
            return t, slots
        j = (j + 1) & mask


@kernel()
def _block_term_ids(buf, segs, d0, d1, tok_off, ids, term_start, term_len, term_hash):
    """Block-local term ids of the tokens of passages ``d0:d1`` (see :func:`block_term_ids`); returns ``nv``.

    Two passes: every token's first byte, length and hash first (kept in ``term_start``,
    ``ids`` and ``term_hash`` at the token's own position), then the table probes, which do not
    wait on each other's memory loads (only inserts link them) so that their cache misses
    overlap.  Term ``nv`` is stored at position ``nv`` <= the token being probed, whose own
    entries are read before.
    """
    base = tok_off[d0]
    k = base
    for i in range(d0, d1):
        for s in range(2):
            p = segs[i, 2 * s]
            end = segs[i, 2 * s + 1]
            while p < end:
                if not _is_word(buf[p]):
                    p += 1
                    continue
                a = p
                h = _FNV_OFFSET
                while p < end and _is_word(buf[p]):
                    h = (h ^ np.uint64(_lower(buf[p]))) * _FNV_PRIME
                    p += 1
                if p - a < 2:
                    continue
                term_start[k] = a
                ids[k] = p - a
                term_hash[k] = h
                k += 1
    table = np.full((1024, 4), -1, np.int64)
    nv = np.int64(0)  # int64 from the start: a bare 0 reaches _find_or_add as a literal (a second compile)
    for k in range(base, tok_off[d1]):
        a = term_start[k]
        n = np.int64(ids[k])  # the length parked in the int32 ids: int64, as merge_block_terms passes it
        h = term_hash[k]
        t, table = _find_or_add(table, buf, a, n, h, term_start, term_len, term_hash, base, nv)
        if t == nv:
            nv += 1
        ids[k] = t
    return nv


@kernel(parallel=True)
def block_term_ids(buf, segs, tok_off, blk, ids, term_start, term_len, term_hash, blk_nv):
    """Assign block-local term ids to every token, in passage order, one block of passages per iteration.

    Parameters
    ----------
    buf : uint8 (B,)
        Corpus bytes (any case: tokens are lowered as they are read).
    segs : int64 (n, 4)
        Title and text byte ranges of each passage.
    tok_off : int64 (n + 1,)
        Token offsets of the passages (cumulated :func:`count_segment_tokens`).
    blk : int64 (n_blocks + 1,)
        Passage offsets of the blocks.
    ids : int32 (tok_off[n],)
        Out: each token's term id local to its block (first-seen order within the block).
    term_start, term_len, term_hash : int64, int64, uint64 (tok_off[n],)
        Out: block ``b``'s terms at ``tok_off[blk[b]] + id`` (a block has at most as many terms
        as tokens): first byte offset, length and FNV-1a hash of the lowered bytes.
    blk_nv : int64 (n_blocks,)
        Out: distinct terms per block.
    """
    for b in prange(blk.shape[0] - 1):
        blk_nv[b] = _block_term_ids(buf, segs, blk[b], blk[b + 1], tok_off, ids, term_start, term_len, term_hash)


@kernel()
def merge_block_terms(buf, blk, tok_off, blk_nv, term_start, term_len, term_hash, gmap, g_start, g_len, g_hash):
    """Merge the blocks' terms in block order into the shard's terms (first-seen order of the shard).

    ``gmap[tok_off[blk[b]] + t]`` = the shard id of block ``b``'s term ``t``; the shard's terms
    are written to ``g_start`` / ``g_len`` / ``g_hash``.  Returns the number of shard terms.
    """
    table = np.full((1024, 4), -1, np.int64)
    nv = np.int64(0)
    first = np.int64(0)  # the shard's terms start at 0 (int64, not a literal: one compile of _find_or_add)
    for b in range(blk.shape[0] - 1):
        base = tok_off[blk[b]]
        for t in range(blk_nv[b]):
            j = base + t
            a, n, h = term_start[j], term_len[j], term_hash[j]
            g, table = _find_or_add(table, buf, a, n, h, g_start, g_len, g_hash, first, nv)
            if g == nv:
                nv += 1
            gmap[j] = g
    return nv


@kernel(parallel=True)
def remap_block_ids(ids, blk, tok_off, gmap):
    """Replace every token's block-local id by its shard id (``gmap`` of :func:`merge_block_terms`)."""
    for b in prange(blk.shape[0] - 1):
        base = tok_off[blk[b]]
        for k in range(tok_off[blk[b]], tok_off[blk[b + 1]]):
            ids[k] = gmap[base + ids[k]]


@kernel(parallel=True)
def sort_rows_count_unique(ids, tok_off, nnz):
    """Sort each passage's token ids in place; ``nnz[i]`` = its distinct terms."""
    for i in prange(tok_off.shape[0] - 1):
        a = tok_off[i]
        b = tok_off[i + 1]
        sort_range(ids, np.int64(a), np.int64(b))
        m = 0
        for k in range(a, b):
            if k == a or ids[k] != ids[k - 1]:
                m += 1
        nnz[i] = m


@kernel(parallel=True)
def fill_term_counts(ids, tok_off, indptr, indices, counts):
    """CSR of term counts from row-sorted token ids (:func:`sort_rows_count_unique`): ``indices`` and ``counts``."""
    for i in prange(tok_off.shape[0] - 1):
        q = indptr[i] - 1
        for k in range(tok_off[i], tok_off[i + 1]):
            if k == tok_off[i] or ids[k] != ids[k - 1]:
                q += 1
                indices[q] = ids[k]
                counts[q] = 1
            else:
                counts[q] += 1


@kernel(parallel=True)
def splice_rows(ids, tok_off, x_doc, x_off, x_ids, out, out_off):
    """Insert the tokens of passages ``x_doc`` (ascending; no tokens in ``ids``) at their rows.

    ``out[out_off[i]:out_off[i + 1]]`` = passage ``i``'s tokens: ``x_ids[x_off[j]:x_off[j + 1]]``
    for ``i == x_doc[j]``, ``ids[tok_off[i]:tok_off[i + 1]]`` otherwise.
    """
    for i in prange(tok_off.shape[0] - 1):
        q = out_off[i]
        for k in range(tok_off[i], tok_off[i + 1]):
            out[q] = ids[k]
            q += 1
    for j in prange(x_doc.shape[0]):
        q = out_off[x_doc[j]]
        for k in range(x_off[j], x_off[j + 1]):
            out[q] = x_ids[k]
            q += 1


@kernel(parallel=True)
def gather_bytes(buf, start, length, width, lower):
    """Return ``uint8 (n, width)``: row ``i`` = ``buf[start[i]:start[i] + length[i]]``, 0-padded.

    Lowered (ASCII) if ``lower``.
    """
    n = start.shape[0]
    out = np.zeros((n, width), np.uint8)
    for i in prange(n):
        for p in range(length[i]):
            c = buf[start[i] + p]
            out[i, p] = _lower(c) if lower else c
    return out


# ---------------------------------------------------------------------------------------------- TF-IDF rows
@kernel(parallel=True)
def vocab_row_counts(indptr, indices, gid, nnz):
    """``nnz[i]`` = entries of row ``i`` (local term ids ``indices``) whose global id ``gid`` is >= 0."""
    for i in prange(indptr.shape[0] - 1):
        m = 0
        for k in range(indptr[i], indptr[i + 1]):
            if gid[indices[k]] >= 0:
                m += 1
        nnz[i] = m


@kernel(parallel=True)
def tfidf_rows(indptr, indices, counts, gid, idf, out_indptr, out_indices, c_data, x_data):
    """Rows of raw counts and L2-normalised TF-IDF in the global vocabulary, column ids sorted.

    Parameters
    ----------
    indptr, indices, counts : int64, int32, int32
        A shard's term counts over local term ids.
    gid : int64 (local terms,)
        Global term id of each local term, -1 outside the vocabulary (an injective map).
    idf : float32 (V,)
        Inverse document frequencies.
    out_indptr : int (n + 1,)
        Row pointer of the kept entries (cumulated :func:`vocab_row_counts`).
    out_indices : int32, c_data, x_data : float32
        Out: global term ids (ascending per row), raw counts, and ``counts * idf`` divided by the
        row's L2 norm -- in scikit-learn's arithmetic: float32 products, a float64 sum of the
        float32 squares in column order, the float64 division rounded to float32, rows of norm 0
        left as they are (``normalize(norm="l2")`` on float32 CSR).
    """
    for i in prange(indptr.shape[0] - 1):
        a = out_indptr[i]
        q = a
        for k in range(indptr[i], indptr[i + 1]):
            g = gid[indices[k]]
            if g >= 0:
                out_indices[q] = g
                c_data[q] = np.float32(counts[k])
                q += 1
        if q - a > 32:
            order = argsort_stable(out_indices[a:q])
            g_sorted = out_indices[a:q][order]
            c_sorted = c_data[a:q][order]
            out_indices[a:q] = g_sorted
            c_data[a:q] = c_sorted
        else:  # insertion sort: most rows are short
            for r in range(a + 1, q):
                g = out_indices[r]
                c = c_data[r]
                j = r
                while j > a and out_indices[j - 1] > g:
                    out_indices[j] = out_indices[j - 1]
                    c_data[j] = c_data[j - 1]
                    j -= 1
                out_indices[j] = g
                c_data[j] = c
        s = 0.0
        for r in range(a, q):
            x = c_data[r] * idf[out_indices[r]]
            x_data[r] = x
            s += x * x
        if s != 0.0:
            s = np.sqrt(s)
            for r in range(a, q):
                x_data[r] = np.float32(np.float64(x_data[r]) / s)
