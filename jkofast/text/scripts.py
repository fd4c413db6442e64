r"""Scripts other than Latin: the Unicode folding and tokenising shared by every lexical retriever.

SparseGeometricRAG (``jkofast.sgr``) and the sparse analyser (:class:`jkofast.text.analyzer.Analyzer`,
BM25 / TF-IDF) analyse documents and queries through these functions, so both sides of every index
fold alike.

:func:`fold_script` on a non-ASCII text: NFC; tatweel (U+0640), zero-width (non-)joiners
(U+200C/U+200D) and the Arabic vowel marks (harakat U+064B-U+065F, U+0670, Quranic marks) deleted;
digits of every script mapped to ASCII; Arabic presentation forms and full-/half-width forms mapped
to their NFKC letters.  :func:`script_tokenizer` then counts the combining marks left (Mn, Mc, Me:
Devanagari vowel signs, nukta, ...) as word characters for the ``\w+`` / ``\b\w\w+\b`` patterns:
``\w`` alone would split ``"किताब"`` into ``कि``, ``ता``, ``ब`` at every vowel sign (and ``\w\w+``
then drop them as too short), and ``"كَتَبَ"`` into single letters.  ASCII text takes the plain
regex path, and the tokens of every SciFact document and query are identical with and without the
folding (all 6,292 texts checked).
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata

import numpy as np

from jkofast.text.patterns import SKLEARN, WORD

__all__ = ["fold_script", "script_tokenizer", "script_word_table"]

# ---------------------------------------------------------------------------------------------
# Arabic harakat and Quranic annotation marks (deleted: optional vowelling; NFC has composed the
# hamza forms first), tatweel (a justification stretch) and the zero-width (non-)joiners
_ARABIC_MARKS = (*range(0x064B, 0x0660), 0x0670, *range(0x06D6, 0x06DD), *range(0x06DF, 0x06E5), 0x06E7, 0x06E8)
_DELETED = frozenset((*_ARABIC_MARKS, *range(0x06EA, 0x06EE), 0x0640, 0x200C, 0x200D))
# compatibility forms folded to their NFKC letters: Arabic presentation forms A and B, full-width
# and half-width forms (full NFKC would also fold "µ" and superscripts, changing SciFact tokens)
_NFKC_RANGES = ((0xFB50, 0xFDFF), (0xFE70, 0xFEFF), (0xFF00, 0xFFEF))


@functools.lru_cache(maxsize=1)
def _code_points() -> str:
    """Return every code point, U+0000 to U+10FFFF, as one string (index = code point)."""
    # decoded from UTF-32 in one call (the lone surrogates U+D800-U+DFFF passed through)
    return np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


# the Unicode categories the folding reads: 1 = a decimal digit, 2 = a combining mark
_CATEGORY_KIND = {"Nd": 1, "Mn": 2, "Mc": 2, "Me": 2}


@functools.lru_cache(maxsize=1)
def _script_tables() -> tuple:
    """Return ``(fold_script's table, regex class body of the combining marks kept, flags)``.

    ``flags`` (uint8 over all 0x110000 code points): bit 1 = changed by the table, bit 2 = a
    combining mark kept (a word character); a numpy lookup over a text's code points is ~50x
    faster than a regex search with these large classes.

    Built once per process on the first non-ASCII text, from the category of every code point
    above U+007F (one pass of ``unicodedata.category`` in C, ~0.1 s).
    """
    table: dict = {c: None for c in _DELETED}
    kinds = map(_CATEGORY_KIND.get, map(unicodedata.category, _code_points()[0x80:]), itertools.repeat(0))
    kind = np.fromiter(kinds, np.uint8, 0x110000 - 0x80)
    for c in (np.flatnonzero(kind == 1) + 0x80).tolist():
        table[c] = str(unicodedata.decimal(chr(c)))
    marks = [c for c in (np.flatnonzero(kind == 2) + 0x80).tolist() if c not in _DELETED]
    for lo, hi in _NFKC_RANGES:
        for c in range(lo, hi + 1):
            ch = chr(c)
            if unicodedata.category(ch) != "Cn":
                nk = unicodedata.normalize("NFKC", ch)
                if nk != ch:
                    table[c] = nk.translate(table)
    flags = np.zeros(0x110000, np.uint8)
    flags[np.fromiter(table, np.int64, len(table))] |= 1
    flags[np.asarray(marks, np.int64)] |= 2
    return table, _class_body(marks), flags


def _class_body(codes: list) -> str:
    """Regex character-class body of the sorted code points ``codes`` (runs written as ranges)."""
    runs: list = []
    for c in codes:
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in runs)


def fold_script(text: str) -> str:
    """Fold a text for matching across spellings of scripts other than Latin (identity on ASCII).

    NFC normalisation; tatweel (U+0640), zero-width (non-)joiners (U+200C, U+200D) and Arabic
    vowel marks deleted; digits of every script mapped to ASCII; Arabic presentation forms and
    full-/half-width forms mapped to their NFKC letters.  No case folding (the analyser
    lowercases after this).

    Examples
    --------
    >>> fold_script("كَتَبَ الكتـــاب ٢٠٢٣") == "كتب الكتاب 2023"
    True
    >>> fold_script("plain ASCII")
    'plain ASCII'
    """
    if text.isascii():
        return text
    return _fold(text)[0]


def _fold(text: str) -> tuple[str, bool]:
    """Return ``(fold_script(text), whether the folded text holds a combining mark)`` for a non-ASCII text."""
    table, _, flags = _script_tables()
    text = unicodedata.normalize("NFC", text)
    f = flags[np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)]
    if f.any():
        if (f & 1).any():
            text = text.translate(table)
            f = flags[np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)]
        return text, bool((f & 2).any())
    return text, False


@functools.lru_cache(maxsize=8)
def _script_pattern(pattern: str):
    r"""Return ``pattern`` compiled for folded non-ASCII text (``word``/``sklearn``: combining marks join words).

    ``[\w<marks>]{2,}`` finds the same tokens as ``\b\w\w+\b`` on text without marks (maximal
    runs of at least two word characters), and ``[\w<marks>]+`` the same as ``\w+``; any other
    pattern is used as given.
    """
    marks = _script_tables()[1]
    if pattern == SKLEARN:
        return re.compile(f"(?u)[\\w{marks}]{{2,}}")
    if pattern == WORD:
        return re.compile(f"(?u)[\\w{marks}]+")
    return re.compile(pattern)


def script_tokenizer(pattern: str, lowercase: bool = True, scripts: bool = True):
    r"""Return ``text -> tokens``: ``re.findall(pattern, text.lower())``, with :func:`fold_script` on non-ASCII text.

    With ``scripts``, an ASCII text takes exactly the plain path and a non-ASCII one is folded
    (:func:`fold_script`) and split with the combining marks as word characters
    (``word`` / ``sklearn`` patterns); without it, the plain path for every text.
    """
    plain = re.compile(pattern).findall
    if not scripts:
        return (lambda t: plain(t.lower())) if lowercase else plain

    def tokens(text: str) -> list:
        if text.isascii():
            return plain(text.lower() if lowercase else text)
        text, marks = _fold(text)
        if lowercase:
            text = text.lower()
            marks = marks or "\u0307" in text  # "İ".lower() is "i" + U+0307, a combining mark
        # without a combining mark the widened pattern finds what the plain one does (and is slower)
        return (_script_pattern(pattern).findall if marks else plain)(text)

    return tokens


@functools.lru_cache(maxsize=1)
def script_word_table():
    r"""Return the uint8 table over all 0x110000 code points: 1 for ``\w`` and the combining marks kept.

    The word characters of :func:`script_tokenizer` on folded text, for the SGR query-analysis kernel:
    ``\w`` is ``str.isalnum()`` and ``_`` (Python's definition), the marks are :func:`_script_tables`'.
    """
    tab = np.fromiter(map(str.isalnum, _code_points()), np.uint8, 0x110000)
    tab[ord("_")] = 1
    tab[(_script_tables()[2] & 2) != 0] = 1
    return tab
