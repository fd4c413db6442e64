"""Stemmers of the analyser: Porter (1980), written from the paper, and PyStemmer's Snowball stemmers.

``Analyzer(stemmer="porter")`` stems with :func:`porter_stem` (it agrees with NLTK's
``ORIGINAL_ALGORITHM`` mode on all 36,172 distinct SciFact tokens); stems are memoised per process
(:func:`stem_tokens`), so a corpus costs one stemmer call per distinct token.
``Analyzer(stemmer="snowball-<language>")`` stems with PyStemmer's Snowball stemmer of any language it
has (``snowball-english``, ``snowball-arabic``, ...; PyStemmer is optional:
``pip install "jkofast[bench]"``).
"""

from __future__ import annotations

import functools

__all__ = ["STEMMERS", "porter_stem", "snowball_languages", "snowball_stemmer", "stem_tokens"]

STEMMERS = (None, "porter")  # and "snowball-<language>" for every language of PyStemmer (snowball_languages())
_SNOWBALL_HINT = 'pip install "jkofast[bench]" (or pip install PyStemmer)'

# ---------------------------------------------------------------------------------------------
# Porter (1980) stemmer, written from the algorithm's description (M.F. Porter, "An algorithm
# for suffix stripping", Program 14(3), 130-137).  Notation of the paper: a consonant is a
# letter other than a, e, i, o, u and other than a y preceded by a consonant; any word is
# [C](VC)^m[V] and m is its *measure*; *v* = the stem holds a vowel, *d = ends in a double
# consonant, *o = ends consonant-vowel-consonant with the last consonant not w, x or y.  In
# each of steps 2-4 only the rule with the longest matching suffix is tried (if its condition
# fails the step does nothing).  No length guard: two-letter words are stemmed too (``"is" ->
# "i"``), as in the paper (NLTK's ``ORIGINAL_ALGORITHM`` mode).
# ---------------------------------------------------------------------------------------------

_VOWELS = frozenset("aeiou")


def _cons_mask(w: str) -> list[bool]:
    """Flag each letter of ``w`` that is a consonant in Porter's sense."""
    out = []
    prev_cons = False  # so that a leading y is a consonant
    for ch in w:
        if ch in _VOWELS:
            c = False
        elif ch == "y":
            c = not prev_cons
        else:
            c = True
        out.append(c)
        prev_cons = c
    return out


def _measure(cons: list[bool], n: int) -> int:
    """Return m of the first ``n`` letters: the number of vowel->consonant transitions."""
    m = 0
    for i in range(1, n):
        if cons[i] and not cons[i - 1]:
            m += 1
    return m


def _has_vowel(cons: list[bool], n: int) -> bool:
    """*v*: the first ``n`` letters hold a vowel."""
    return not all(cons[:n])


def _double_cons(w: str, cons: list[bool], n: int) -> bool:
    """*d: the first ``n`` letters end in a double consonant."""
    return n >= 2 and w[n - 1] == w[n - 2] and cons[n - 1]


def _cvc(w: str, cons: list[bool], n: int) -> bool:
    """*o: the first ``n`` letters end consonant-vowel-consonant, the last not w, x or y."""
    return n >= 3 and cons[n - 1] and not cons[n - 2] and cons[n - 3] and w[n - 1] not in "wxy"


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("abli", "able"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
)
_STEP3 = (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""))
_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)
# longest suffix first, so the first match is the longest one
_STEP2 = tuple(sorted(_STEP2, key=lambda r: -len(r[0])))
_STEP3 = tuple(sorted(_STEP3, key=lambda r: -len(r[0])))
_STEP4 = tuple(sorted(_STEP4, key=len, reverse=True))


def _replace_if_m(w: str, rules, min_m: int) -> str:
    """Apply the longest matching ``(suffix, replacement)`` rule when the stem's m > ``min_m``."""
    for suf, rep in rules:
        if w.endswith(suf):
            n = len(w) - len(suf)
            if _measure(_cons_mask(w[:n]), n) > min_m:
                return w[:n] + rep
            return w
    return w


def _step1a(w: str) -> str:
    """Step 1a: plurals (sses -> ss, ies -> i, s -> '' but not after s)."""
    if w.endswith(("sses", "ies")):
        return w[:-2]
    if w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _step1b(w: str) -> str:
    """Step 1b: (m > 0) eed -> ee; (*v*) ed, ing -> '' then the at/bl/iz, double and cvc repairs."""
    if w.endswith("eed"):
        n = len(w) - 3
        return w[:-1] if _measure(_cons_mask(w[:n]), n) > 0 else w
    for suf in ("ed", "ing"):
        if w.endswith(suf):
            n = len(w) - len(suf)
            if not _has_vowel(_cons_mask(w[:n]), n):
                return w
            w = w[:n]
            if w.endswith(("at", "bl", "iz")):
                return w + "e"
            cons = _cons_mask(w)
            n = len(w)
            if _double_cons(w, cons, n) and w[-1] not in "lsz":
                return w[:-1]
            if _measure(cons, n) == 1 and _cvc(w, cons, n):
                return w + "e"
            return w
    return w


def _step4(w: str) -> str:
    """Step 4: (m > 1) drop the longest listed suffix; -ion only after s or t."""
    for suf in _STEP4:
        if w.endswith(suf):
            n = len(w) - len(suf)
            if suf == "ion" and not (n >= 1 and w[n - 1] in "st"):
                continue  # -ion not after s/t: no other step-4 suffix can match, so no change
            return w[:n] if _measure(_cons_mask(w[:n]), n) > 1 else w
    return w


def _step5(w: str) -> str:
    """Step 5: (m > 1, or m = 1 and not *o) e -> ''; then (m > 1) ll -> l."""
    if w.endswith("e"):
        n = len(w) - 1
        cons = _cons_mask(w[:n])
        m = _measure(cons, n)
        if m > 1 or (m == 1 and not _cvc(w, cons, n)):
            w = w[:n]
    if w.endswith("ll") and _measure(_cons_mask(w), len(w)) > 1:
        w = w[:-1]
    return w


def porter_stem(word: str) -> str:
    """Return the Porter (1980) stem of one lowercase word.

    Written from the paper's rules; agrees with NLTK's ``ORIGINAL_ALGORITHM`` mode on every
    distinct SciFact token.  No length guard: two-letter words are stemmed too.

    Examples
    --------
    >>> [porter_stem(w) for w in ("caresses", "ponies", "relational", "hopping", "generalization")]
    ['caress', 'poni', 'relat', 'hop', 'gener']
    """
    w = _step1b(_step1a(word))
    if w.endswith("y") and _has_vowel(_cons_mask(w), len(w) - 1):  # step 1c: (*v*) y -> i
        w = w[:-1] + "i"
    w = _replace_if_m(w, _STEP2, 0)  # steps 2 and 3 (m > 0)
    w = _replace_if_m(w, _STEP3, 0)
    return _step5(_step4(w))


class _StemMemo(dict):
    """token -> Porter stem; a token not seen yet is stemmed inside the look-up (``__missing__``)."""

    def __missing__(self, token: str) -> str:
        stem = self[token] = porter_stem(token)
        return stem


_STEM_MEMO = _StemMemo()
_STEM_MEMO_MAX = 2_000_000


def snowball_languages() -> list[str]:
    """Languages of PyStemmer's Snowball stemmers (``Analyzer(stemmer="snowball-<language>")``).

    Raises
    ------
    ValueError
        PyStemmer is not installed (the message says how to install it).
    """
    try:
        import Stemmer
    except ImportError:
        raise ValueError(f"Snowball stemmers need PyStemmer: {_SNOWBALL_HINT}") from None
    return sorted(Stemmer.algorithms())


@functools.cache
def snowball_stemmer(language: str):
    """One PyStemmer stemmer per language and process (``ValueError`` for an unknown one or no PyStemmer)."""
    langs = snowball_languages()
    if language not in langs:
        raise ValueError(f"stemmer 'snowball-{language}': unknown language; PyStemmer has {', '.join(langs)}")
    import Stemmer

    return Stemmer.Stemmer(language)


def stem_tokens(tokens: list[str]) -> list[str]:
    """Porter stems of ``tokens`` through a process-wide memo (each distinct token is stemmed once)."""
    if len(_STEM_MEMO) > _STEM_MEMO_MAX:
        _STEM_MEMO.clear()
    return list(map(_STEM_MEMO.__getitem__, tokens))
