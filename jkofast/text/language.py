r"""The dominant script and language of a corpus, and the analyser that suits it.

:func:`detect_language` counts the letters of (a sample of) the texts by Unicode script; the
script with the most letters wins.  Scripts used by one language in practice name it directly
(Devanagari -> Hindi, Greek -> Greek, Han -> Chinese); Arabic letters name Persian when the
Persian-only letters (پ چ ژ گ ک ی) are frequent, else Arabic; Cyrillic names Serbian when its
own letters (ђ ј љ њ ћ џ) are frequent, else Russian; Latin text is told apart by a count of
short function words of each language (:data:`FUNCTION_WORDS`).  A few thousand letters decide;
the whole count is one pass over at most ``max_chars`` characters.

:func:`language_analyser` picks the analyser for that language: the Snowball stemmer of the
language when PyStemmer has it, no stop words (the English lists would remove nothing useful
from other languages, and the published English BM25 uses none), the ``\w+`` tokens; Chinese,
Japanese and Korean text has no spaces between words, so each ideograph / kana is one token
there (the usual unigram baseline of BM25 on those languages).
"""

from __future__ import annotations

import dataclasses
import re

from jkofast.text.analyzer import Analyzer
from jkofast.text.patterns import WORD
from jkofast.text.stemmers import snowball_languages

__all__ = ["CJK_PATTERN", "FUNCTION_WORDS", "LanguageGuess", "detect_language", "language_analyser"]

# (first, last) code points of each script counted
_SCRIPT_RANGES = {
    "latin": ((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x1E00, 0x1EFF)),
    "arabic": ((0x600, 0x6FF), (0x750, 0x77F), (0x8A0, 0x8FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
    "devanagari": ((0x900, 0x97F),),
    "cyrillic": ((0x400, 0x4FF),),
    "greek": ((0x370, 0x3FF),),
    "hebrew": ((0x590, 0x5FF),),
    "armenian": ((0x530, 0x58F),),
    "tamil": ((0xB80, 0xBFF),),
    "bengali": ((0x980, 0x9FF),),
    "thai": ((0xE00, 0xE7F),),
    "han": ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF)),
    "kana": ((0x3040, 0x30FF),),
    "hangul": ((0xAC00, 0xD7AF), (0x1100, 0x11FF)),
}
# script -> language when one language dominates the script's use
_SCRIPT_LANGUAGE = {
    "devanagari": "hindi",
    "greek": "greek",
    "hebrew": "hebrew",
    "armenian": "armenian",
    "tamil": "tamil",
    "bengali": "bengali",
    "thai": "thai",
    "han": "chinese",
    "kana": "japanese",
    "hangul": "korean",
}
_PERSIAN_LETTERS = frozenset("پچژگکی")
_SERBIAN_LETTERS = frozenset("ђјљњћџЂЈЉЊЋЏ")
# short, frequent function words of each Latin-script language (none shared between two lists)
FUNCTION_WORDS = {
    "english": ("the", "and", "of", "to", "is", "in", "that", "with", "for", "are", "was", "this", "by", "from"),
    "french": ("le", "les", "des", "et", "est", "une", "dans", "du", "pour", "qui", "sur", "au", "pas", "avec"),
    "german": ("der", "die", "und", "das", "ist", "nicht", "mit", "den", "sich", "auf", "ein", "eine", "dem", "auch"),
    "spanish": ("el", "los", "las", "y", "es", "por", "con", "una", "para", "del", "como", "pero", "su", "lo"),
    "italian": ("il", "di", "che", "è", "della", "non", "gli", "sono", "nel", "alla", "anche", "ha", "per", "delle"),
    "portuguese": ("não", "uma", "os", "ao", "em", "das", "dos", "mais", "ou", "são", "foi", "pela", "pelo", "nos"),
    "dutch": ("het", "een", "van", "en", "niet", "zijn", "ook", "voor", "aan", "wordt", "bij", "maar", "dat", "naar"),
    "indonesian": ("yang", "dan", "di", "ini", "itu", "dengan", "untuk", "tidak", "dari", "dalam", "akan", "pada"),
    "turkish": ("bir", "ve", "bu", "için", "ile", "olarak", "da", "de", "çok", "daha", "gibi", "olan", "ama"),
}
_WORD_RE = re.compile(WORD)
# one token per ideograph / kana / hangul syllable, other word runs as \w+ runs
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
CJK_PATTERN = f"(?u)[{_CJK}]|[^\\W{_CJK}]+"


@dataclasses.dataclass(frozen=True)
class LanguageGuess:
    """The dominant script and language of some texts.

    Attributes
    ----------
    script : str or None
        ``"latin"``, ``"arabic"``, ``"devanagari"``, ``"cyrillic"``, ``"han"``, ... (None: no letters).
    language : str or None
        Lower-case English name (``"english"``, ``"arabic"``, ``"hindi"``, ...); None when the
        script does not tell it and no word list matched.
    share : float
        Fraction of the counted letters in ``script``.
    letters : dict
        Letters counted per script.
    """

    script: str | None
    language: str | None
    share: float
    letters: dict

    def describe(self) -> str:
        """One line: language, script and the share of its letters."""
        if self.script is None:
            return "no letters found"
        return f"{self.language or 'unknown language'} ({self.script} script, {100 * self.share:.0f}% of letters)"


def _script_of(code: int) -> str | None:
    for name, ranges in _SCRIPT_RANGES.items():
        for lo, hi in ranges:
            if lo <= code <= hi:
                return name
    return None


def detect_language(texts, max_chars: int = 400_000) -> LanguageGuess:
    """Guess the dominant script and language of ``texts`` (a str or an iterable of str).

    Parameters
    ----------
    texts : str or iterable of str
        The corpus (or its queries); only the first ``max_chars`` characters are read.
    max_chars : int
        Cost bound: at most this many characters are counted.

    Raises
    ------
    TypeError
        A text that is not a str.
    ValueError
        ``max_chars`` < 1.

    Examples
    --------
    >>> detect_language(["Le chat est sur la table et les enfants jouent dans le jardin."]).language
    'french'
    >>> detect_language("Кошка сидит на столе.").language
    'russian'
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"max_chars must be a positive int, got {max_chars!r}")
    if isinstance(texts, str):
        texts = [texts]
    sample: list[str] = []
    n = 0
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"texts must be str, got {type(t).__name__}")
        sample.append(t[: max_chars - n])
        n += len(sample[-1])
        if n >= max_chars:
            break
    text = "\n".join(sample)
    letters: dict = {}
    cache: dict = {}
    for ch in text:
        if not ch.isalpha():
            continue
        s = cache.get(ch, 0)
        if s == 0:
            s = cache[ch] = _script_of(ord(ch))
        if s is not None:
            letters[s] = letters.get(s, 0) + 1
    total = sum(letters.values())
    if not total:
        return LanguageGuess(None, None, 0.0, {})
    script = max(letters, key=letters.get)
    share = letters[script] / total
    if script == "han" and letters.get("kana", 0) > 0.1 * letters[script]:
        script = "kana"  # Japanese mixes kanji with kana; Chinese has none
    return LanguageGuess(script, _language_of(script, text), share, letters)


def _language_of(script: str, text: str) -> str | None:
    """Return the language of ``text`` given its dominant ``script``."""
    if script == "arabic":
        persian = sum(1 for ch in text if ch in _PERSIAN_LETTERS)
        arabic = sum(1 for ch in text if "\u0621" <= ch <= "\u064a")
        return "persian" if persian > 0.05 * max(arabic + persian, 1) else "arabic"
    if script == "cyrillic":
        serbian = sum(1 for ch in text if ch in _SERBIAN_LETTERS)
        return "serbian" if serbian > 0.01 * len(text) else "russian"
    if script != "latin":
        return _SCRIPT_LANGUAGE.get(script)
    counts = dict.fromkeys(FUNCTION_WORDS, 0)
    index = {w: lang for lang, words in FUNCTION_WORDS.items() for w in words}
    for w in _WORD_RE.findall(text.lower()):
        lang = index.get(w)
        if lang is not None:
            counts[lang] += 1
    best = max(counts, key=counts.get)
    return best if counts[best] > 0 else None


def language_analyser(language: str | None, *, published_english: bool = True) -> tuple[Analyzer, str]:
    r"""Return ``(analyser, why)``: the lexical analyser for ``language`` and a one-line reason.

    Parameters
    ----------
    language : str or None
        A name from :func:`detect_language` (None: the published analyser).
    published_english : bool
        English keeps the published BM25 analyser (``\w+``, no stop words, no stemmer) so the
        published tables are reproduced; False gives English its Snowball stemmer like any language.

    Notes
    -----
    Without PyStemmer installed no Snowball stemmer is available: the analyser is then the plain
    ``\w+`` one and ``why`` says how to install it.
    """
    pattern = CJK_PATTERN if language in ("chinese", "japanese", "korean") else WORD
    if language is None or (language == "english" and published_english):
        why = "published analyser (\\w+, no stop words, no stemmer)"
        return Analyzer(pattern), why if language else f"language unknown: {why}"
    if pattern != WORD:
        return Analyzer(pattern), f"{language}: one token per ideograph/kana/syllable, no stemmer, no stop words"
    try:
        langs = snowball_languages()
    except ValueError as exc:
        return Analyzer(pattern), f"{language}: no stemmer ({exc}); \\w+ tokens, no stop words"
    if language not in langs:
        return Analyzer(pattern), f"{language}: PyStemmer has no {language} stemmer; \\w+ tokens, no stop words"
    return Analyzer(pattern, stemmer=f"snowball-{language}"), f"{language}: Snowball stemmer, no stop words"
