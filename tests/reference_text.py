"""Naive oracles for the Unicode tables of ``jkofast.text.scripts``: a Python scan of every code point."""

from __future__ import annotations

import re
import unicodedata

import numpy as np


def script_tables_scan(deleted, nfkc_ranges):
    """``(table, marks, flags)`` of the folding, one code point at a time.

    ``table``: the deleted code points (None), every decimal digit above U+007F (its ASCII digit),
    the compatibility forms of ``nfkc_ranges`` that NFKC changes (their NFKC letters, folded by the
    table so far); ``marks``: the combining marks (Mn, Mc, Me) above U+007F not deleted; ``flags``
    bit 1 = a key of ``table``, bit 2 = a mark.
    """
    table = {c: None for c in deleted}
    marks = []
    for c in range(0x80, 0x110000):
        cat = unicodedata.category(chr(c))
        if cat == "Nd":
            table[c] = str(unicodedata.decimal(chr(c)))
        elif cat in ("Mn", "Mc", "Me") and c not in deleted:
            marks.append(c)
    for lo, hi in nfkc_ranges:
        for c in range(lo, hi + 1):
            if unicodedata.category(chr(c)) != "Cn":
                nk = unicodedata.normalize("NFKC", chr(c))
                if nk != chr(c):
                    table[c] = nk.translate(table)
    flags = np.zeros(0x110000, np.uint8)
    flags[list(table)] |= 1
    flags[marks] |= 2
    return table, marks, flags


def script_word_table_regex(marks):
    r"""uint8 over every code point: 1 where the regex ``\w`` or a character class of ``marks`` matches."""
    allc = "".join(map(chr, range(0x110000)))
    tab = np.zeros(0x110000, np.uint8)
    tab[[m.start() for m in re.finditer(r"(?u)\w", allc)]] = 1
    tab[marks] = 1
    return tab
