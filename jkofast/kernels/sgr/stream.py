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

from jkofast._numba import kernel

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@kernel()
def _is_word(c):
    """Return whether byte ``c`` is an ASCII word byte (digit, letter, underscore)."""
    return (48 <= c <= 57) or (97 <= c <= 122) or (65 <= c <= 90) or c == 95


@kernel()
def count_tokens(buf, doc_off, dl):
    """Count the tokens of every passage: ``dl[i]`` = tokens in ``buf[doc_off[i]:doc_off[i + 1]]``; returns the sum."""
    total = 0
    for i in range(doc_off.shape[0] - 1):
        n = 0
        run = 0
        for p in range(doc_off[i], doc_off[i + 1]):
            if _is_word(buf[p]):
                run += 1
            else:
                if run >= 2:
                    n += 1
                run = 0
        if run >= 2:
            n += 1
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
