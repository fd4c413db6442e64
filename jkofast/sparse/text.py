r"""Analyser and vocabulary: texts -> canonical CSR term counts.

The analyser follows scikit-learn's ``CountVectorizer`` (lowercase, ``re.findall`` of a token
regex, optional English stop-words from scikit-learn's list); ``Vocabulary`` runs that analysis
in one pass that also maps tokens to ids (about 2x faster than ``CountVectorizer`` on SciFact)
and is tested equal to it.  Two regexes matter here:

* ``WORD = r"(?u)\w+"`` -- every maximal ``\w+`` run, the published JKO-RAG BM25
  tokeniser (SPEC A.2.3; 1-character tokens kept);
* ``SKLEARN = r"(?u)\b\w\w+\b"`` -- scikit-learn's default (tokens of >= 2 characters),
  used by SparseGeometricRAG (SPEC B.2) and by bm25s.

``Vocabulary.fit_transform`` returns the document-term counts as canonical CSR arrays
(int64 ``indptr``/``indices``, sorted, no duplicates; counts float64) together with the
per-document token count ``doc_len``, which counts every analyser token, *including* terms
cut by ``max_features`` (SPEC B.2).  Term ids follow the alphabetical order of the terms,
as in scikit-learn, and ``max_features`` keeps the most frequent terms by total corpus
term frequency with scikit-learn's own selection, so the vocabulary is identical to
``CountVectorizer(max_features=...)``.

Options beyond scikit-learn's analyser: ``stopwords="lucene"`` is Lucene ``EnglishAnalyzer``'s
33-word default list (:data:`LUCENE_ENGLISH_STOP_WORDS`); ``compounds=True`` adds, for every
hyphenated compound (a maximal match of :data:`COMPOUND`, word runs joined by ``-`` or U+2010,
searched in the lowercased text), the compound with its hyphens removed as one extra token
(``"il-6"`` -> ``il``, ``il6`` under the ``sklearn`` pattern); it then passes the stop list and
stemmer like every other token.

Scripts other than Latin (``Analyzer(scripts=True)``, the default; :func:`fold_script`): a
non-ASCII text is NFC-normalised; tatweel (U+0640), zero-width (non-)joiners (U+200C/U+200D) and
the Arabic vowel marks (harakat, U+064B-U+065F, U+0670, Quranic marks) are deleted; digits of
every script become ASCII digits; Arabic presentation forms and full-width / half-width forms
become their NFKC letters; and the combining marks left (categories Mn, Mc, Me: Devanagari vowel
signs, nukta, ...) are word characters for the ``word`` / ``sklearn`` patterns (``\w`` alone
splits ``"किताब"`` into ``कि``, ``ता``, ``ब`` at every vowel sign and drops them as too short).
ASCII texts are untouched, and the tokens of every SciFact document and query are identical with
and without it (checked on all 5,183 + 1,109 texts), so published results do not move.  The same
folding runs on documents and queries (BM25, TF-IDF and SparseGeometricRAG).

``Analyzer(stemmer="snowball-<language>")`` stems with PyStemmer's Snowball stemmer of any
language it has (``snowball-english``, ``snowball-arabic``, ...; PyStemmer is optional:
``pip install "jkofast[bench]"``).  Stop-word lists: ``"sklearn"`` (= ``"english"``,
scikit-learn's 318 words), ``"lucene"`` and ``"bm25s"`` (bm25s's ``stopwords="en"``, the same 33
words as Lucene's default list).

``Analyzer(stemmer="porter")`` adds the Porter (1980) stemmer after stop-word removal
(``porter_stem``, written from the paper's rules; it agrees with NLTK's ``ORIGINAL_ALGORITHM``
mode on all 36,172 distinct SciFact tokens); stems are memoised per process, so a corpus costs
one stemmer call per distinct token.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp

from jkofast._numba import register_warmup
from jkofast._validation import check_bool, check_int
from jkofast.kernels.sparse import weights as _kw
from jkofast.sgr.scripts import fold_script, script_tokenizer

__all__ = [
    "COMPOUND",
    "LUCENE_ENGLISH_STOP_WORDS",
    "SKLEARN",
    "STEMMERS",
    "STOPWORD_LISTS",
    "WORD",
    "Analyzer",
    "Vocabulary",
    "counts_from_token_ids",
    "fold_script",
    "porter_stem",
    "snowball_languages",
    "stem_tokens",
]

WORD = r"(?u)\w+"
SKLEARN = r"(?u)\b\w\w+\b"
STEMMERS = (None, "porter")  # and "snowball-<language>" for every language of PyStemmer (snowball_languages())
STOPWORD_LISTS = ("english", "sklearn", "lucene", "bm25s")  # "sklearn" is "english"; "bm25s" = "lucene"'s words
_SNOWBALL_HINT = 'pip install "jkofast[bench]" (or pip install PyStemmer)'
# hyphenated compounds: word runs joined by ASCII hyphen-minus or U+2010 HYPHEN
COMPOUND = "(?u)\\w+(?:[-\u2010]\\w+)+"
_HYPHENS = str.maketrans("", "", "-\u2010")
# Lucene EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (the 33-word default list)
LUCENE_ENGLISH_STOP_WORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    )
)
# the largest vocabulary the CSR kernels index (int32 column ids)
_MAX_TERM_ID = 2**31 - 1
_PATTERN_ALIASES = {"word": WORD, r"\w+": WORD, "sklearn": SKLEARN, r"\b\w\w+\b": SKLEARN}


@dataclass(frozen=True)
class Analyzer:
    r"""Text analyser settings.

    Parameters
    ----------
    token_pattern : str
        A regex, or the aliases ``"word"`` (``\w+``) / ``"sklearn"`` (``\b\w\w+\b``).
    lowercase : bool
        Lowercase before tokenising.
    stopwords : {None, "english", "sklearn", "lucene", "bm25s"} or tuple of str
        ``"english"`` (alias ``"sklearn"``) = scikit-learn's ``ENGLISH_STOP_WORDS`` (318 words);
        ``"lucene"`` = Lucene EnglishAnalyzer's 33-word default list
        (:data:`LUCENE_ENGLISH_STOP_WORDS`); ``"bm25s"`` = bm25s's English list (``stopwords="en"``:
        the same 33 words).
    stemmer : {None, "porter", "snowball-<language>"}
        ``"porter"`` = the Porter (1980) stemmer (``porter_stem``; the published recipe's);
        ``"snowball-<language>"`` = PyStemmer's Snowball stemmer of that language (any of
        :func:`snowball_languages`, e.g. ``"snowball-english"`` as bm25s uses it; needs PyStemmer).
        Applied after stop-word removal (as bm25s does); each distinct token is stemmed once per
        process (memo).
    compounds : bool
        Also emit every hyphenated compound (:data:`COMPOUND`) with its hyphens removed, as one
        extra token after the pattern's tokens (then stop list and stemmer as usual).
    scripts : bool
        Fold non-ASCII text with :func:`fold_script` and count combining marks as word
        characters (:func:`script_tokenizer`); ASCII text is untouched.  Default True; an index
        saved before this option existed loads with False (its analysis, unchanged).

    Raises
    ------
    TypeError
        A non-str pattern, a non-bool ``lowercase`` / ``compounds``.
    ValueError
        An invalid regex or one matching the empty string, unknown stop-words or stemmer, a
        Snowball stemmer without PyStemmer installed (the message says how to install it).

    Examples
    --------
    >>> Analyzer("sklearn", stopwords="english").tokenize("The cat, a Dog")
    ['cat', 'dog']
    """

    token_pattern: str = WORD
    lowercase: bool = True
    stopwords: str | tuple | None = None
    stemmer: str | None = None
    compounds: bool = False
    scripts: bool = True

    def __post_init__(self):
        """Resolve pattern aliases and validate every setting (frozen: set via ``object.__setattr__``)."""
        pat = _PATTERN_ALIASES.get(self.token_pattern, self.token_pattern)
        if not isinstance(pat, str):
            raise TypeError(f"token_pattern must be a str, got {type(pat).__name__}")
        try:
            rx = re.compile(pat)
        except re.error as exc:
            raise ValueError(f"token_pattern {pat!r} is not a valid regular expression: {exc}") from None
        if rx.fullmatch("") is not None:  # "" or \s*: every gap became an empty-string term
            raise ValueError(f"token_pattern {pat!r} matches the empty string; tokens must be non-empty")
        object.__setattr__(self, "token_pattern", pat)
        object.__setattr__(self, "lowercase", check_bool(self.lowercase, "lowercase"))
        sw = self.stopwords
        if isinstance(sw, list):
            sw = tuple(sw)
        if sw == "sklearn":
            sw = "english"
        if (
            sw is not None
            and sw not in STOPWORD_LISTS
            and not (isinstance(sw, tuple) and all(isinstance(w, str) for w in sw))
        ):
            raise ValueError(
                f"stopwords must be None, one of {', '.join(repr(x) for x in STOPWORD_LISTS)} or a sequence of str, "
                f"got {sw!r}"
            )
        object.__setattr__(self, "stopwords", sw)
        st = None if self.stemmer in (None, "none") else self.stemmer
        if isinstance(st, str) and st.startswith("snowball-"):
            _snowball(st[len("snowball-") :])  # an unknown language or no PyStemmer: ValueError now
        elif st not in STEMMERS:
            raise ValueError(
                f"stemmer must be None, 'porter' or 'snowball-<language>' (e.g. 'snowball-english'), "
                f"got {self.stemmer!r}"
            )
        object.__setattr__(self, "stemmer", st)
        object.__setattr__(self, "compounds", check_bool(self.compounds, "compounds"))
        object.__setattr__(self, "scripts", check_bool(self.scripts, "scripts"))

    def stop_list(self):
        """Return the stop-words as a sorted list (a given tuple in its order), or ``None``."""
        if self.stopwords is None:
            return None
        if self.stopwords == "english":
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

            return sorted(ENGLISH_STOP_WORDS)
        if self.stopwords in ("lucene", "bm25s"):  # bm25s's STOPWORDS_EN is Lucene's list (tested)
            return sorted(LUCENE_ENGLISH_STOP_WORDS)
        return list(self.stopwords)

    def vectorizer(self, vocabulary=None):
        """Return a scikit-learn ``CountVectorizer`` with these settings.

        The analyser callable is passed instead when stemming or joining compounds.
        """
        from sklearn.feature_extraction.text import CountVectorizer

        if self.stemmer is not None or self.compounds or self.scripts:
            return CountVectorizer(analyzer=self.build(), vocabulary=vocabulary, dtype=np.float64)
        return CountVectorizer(
            lowercase=self.lowercase,
            token_pattern=self.token_pattern,
            stop_words=self.stop_list(),
            vocabulary=vocabulary,
            dtype=np.float64,
        )

    def build(self):
        """Return the analyser callable ``str -> list[str]``.

        scikit-learn's analyser, the joined compounds if asked, then the stemmer if any.
        """
        from sklearn.feature_extraction.text import CountVectorizer

        if self.scripts:
            split = script_tokenizer(self.token_pattern, self.lowercase)
            stop0 = frozenset(self.stop_list() or ())

            def base(text):
                return [t for t in split(text) if t not in stop0] if stop0 else split(text)

        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # stop-word/tokeniser consistency note
                base = CountVectorizer(
                    lowercase=self.lowercase, token_pattern=self.token_pattern, stop_words=self.stop_list()
                ).build_analyzer()
        if self.compounds:
            cpat = re.compile(COMPOUND)
            stop = frozenset(self.stop_list() or ())
            lower = self.lowercase
            plain = base

            def base(text):
                low = fold_script(text) if self.scripts else text
                joined = [m.translate(_HYPHENS) for m in cpat.findall(low.lower() if lower else low)]
                return plain(text) + [t for t in joined if t not in stop]

        if self.stemmer is None:
            return base
        stem = self.stem_function()
        return lambda text: stem(base(text))

    def stem_function(self):
        """Return the stemmer as ``list[str] -> list[str]`` (``None`` without one)."""
        if self.stemmer is None:
            return None
        if self.stemmer == "porter":
            return stem_tokens
        return _snowball(self.stemmer[len("snowball-") :]).stemWords

    def tokenize(self, text: str) -> list[str]:
        """Return the tokens of one text (after lowercasing, stop-word removal and stemming)."""
        if not isinstance(text, str):  # was AttributeError: 'NoneType' object has no attribute 'lower'
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self.build()(text)

    def to_dict(self) -> dict:
        """Return the settings as a JSON-able dict (the index manifest's ``analyzer``)."""
        d = asdict(self)
        if isinstance(d["stopwords"], tuple):
            d["stopwords"] = list(d["stopwords"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Analyzer:
        """Rebuild an analyser from :meth:`to_dict`'s output (no ``scripts`` key: an older index, False)."""
        return cls(**{"scripts": False, **d})


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


_STEM_MEMO: dict[str, str] = {}
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
def _snowball(language: str):
    """One PyStemmer stemmer per language and process (``ValueError`` for an unknown one or no PyStemmer)."""
    langs = snowball_languages()
    if language not in langs:
        raise ValueError(f"stemmer 'snowball-{language}': unknown language; PyStemmer has {', '.join(langs)}")
    import Stemmer

    return Stemmer.Stemmer(language)


def stem_tokens(tokens: list[str]) -> list[str]:
    """Porter stems of ``tokens`` through a process-wide memo (each distinct token is stemmed once)."""
    memo = _STEM_MEMO
    if len(memo) > _STEM_MEMO_MAX:
        memo.clear()
    out = []
    for t in tokens:
        s = memo.get(t)
        if s is None:
            s = memo[t] = porter_stem(t)
        out.append(s)
    return out


def _check_texts(texts, name: str) -> list[str]:
    """Return ``texts`` as a list after checking it is a sequence of str (not one str)."""
    if isinstance(texts, str):
        raise TypeError(f"{name} must be a list of str, not a single str")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(t).__name__}")
    return texts


def _canonical(X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return scipy CSR ``X`` as canonical ``(indptr, indices, data)`` int64 / int64 / float64 arrays."""
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sum_duplicates()
    X.sort_indices()
    return (
        np.ascontiguousarray(X.indptr, dtype=np.int64),
        np.ascontiguousarray(X.indices, dtype=np.int64),
        np.ascontiguousarray(X.data, dtype=np.float64),
    )


class Vocabulary:
    """Term <-> id mapping learnt from a corpus, with CSR transforms.

    Parameters
    ----------
    analyzer : Analyzer
    max_features : int, optional
        Keep the ``max_features`` most frequent terms (total corpus term frequency).
    terms : list of str, optional
        A fixed vocabulary (ids = positions); used when loading a saved index.

    Examples
    --------
    >>> v = Vocabulary(Analyzer("word"))
    >>> indptr, indices, counts, doc_len = v.fit_transform(["a b b", "c"])
    >>> v.terms, indptr.tolist(), indices.tolist(), counts.tolist(), doc_len.tolist()
    (['a', 'b', 'c'], [0, 2, 3], [0, 1, 2], [1.0, 2.0, 1.0], [3, 1])
    """

    def __init__(
        self, analyzer: Analyzer | None = None, max_features: int | None = None, terms: list[str] | None = None
    ):
        if analyzer is not None and not isinstance(analyzer, Analyzer):  # failed later: AttributeError
            raise TypeError(
                f"analyzer must be a jkofast.sparse.text.Analyzer, got {type(analyzer).__name__} {analyzer!r}"
            )
        self.analyzer = analyzer if analyzer is not None else Analyzer()
        if max_features is not None:
            max_features = check_int(max_features, "max_features", min_value=1)
        self.max_features = max_features
        self.terms: list[str] | None = None
        self._vec = None
        if terms is not None:
            self._set_terms(list(terms))

    def _set_terms(self, terms: list[str]) -> None:
        self.terms = terms
        self._vec = {t: i for i, t in enumerate(terms)}

    def _token_ids(self, texts, vocab: dict, grow: bool):
        """Analyse ``texts`` into a flat id list + per-text token counts.

        Same analysis as scikit-learn's ``CountVectorizer`` with these settings (lowercase,
        ``re.findall`` of the token pattern, stop-word filter; no accents stripping, unigrams),
        done in one pass per text that also maps tokens to ids: ``grow`` adds new terms in
        first-seen order, otherwise unknown terms are dropped.
        """
        an = self.analyzer
        pat = re.compile(an.token_pattern)
        if pat.groups > 1:
            raise ValueError("token_pattern must have at most one capturing group")
        split = script_tokenizer(an.token_pattern, an.lowercase, an.scripts)  # lowercases (and folds) itself
        findall = split
        if an.compounds:  # pattern tokens, then the hyphen-free compounds
            cpat = re.compile(COMPOUND)
            fold = fold_script if an.scripts else str

            def findall(doc):
                low = fold(doc)
                return split(doc) + [m.translate(_HYPHENS) for m in cpat.findall(low.lower() if an.lowercase else low)]

        stop = frozenset(an.stop_list() or ())
        stem = an.stemmer is not None
        stem_fn = an.stem_function()
        flat: list[int] = []
        lens = np.empty(len(texts), np.int64)
        ext = flat.extend
        if grow:
            sd = vocab.setdefault
            for i, doc in enumerate(texts):
                toks = findall(doc)
                if stem:
                    toks = stem_fn([t for t in toks if t not in stop] if stop else toks)
                    ids = [sd(t, len(vocab)) for t in toks]
                else:
                    ids = (
                        [sd(t, len(vocab)) for t in toks if t not in stop]
                        if stop
                        else [sd(t, len(vocab)) for t in toks]
                    )
                lens[i] = len(ids)
                ext(ids)
        else:
            g = vocab.get
            for i, doc in enumerate(texts):
                toks = findall(doc)
                if stem:  # stop-words removed before stemming (a stem may equal a stop-word)
                    toks = stem_fn([t for t in toks if t not in stop] if stop else toks)
                ids = [j for j in map(g, toks) if j is not None]  # stop-words are not in vocab
                lens[i] = len(ids)
                ext(ids)
        offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        return np.array(flat, dtype=np.int64), offsets

    @property
    def n_terms(self) -> int:
        """Vocabulary size (``RuntimeError`` before fitting)."""
        if self.terms is None:
            raise RuntimeError("vocabulary is not fitted; call fit_transform first")
        return len(self.terms)

    def fit_transform(self, texts) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Learn the vocabulary; return ``(indptr, indices, counts, doc_len)`` of the corpus.

        ``doc_len`` (int64) counts all analyser tokens of a document, including terms cut by
        ``max_features``.  Vocabulary, counts and ``max_features`` selection are identical to
        scikit-learn's ``CountVectorizer`` (tested).
        """
        texts = _check_texts(texts, "texts")
        if not texts:
            raise ValueError("texts must not be empty")
        first_seen: dict[str, int] = {}
        flat, offsets = self._token_ids(texts, first_seen, grow=True)
        if not first_seen:
            raise ValueError("texts: empty vocabulary; perhaps the documents only contain stop words")
        terms = sorted(first_seen)  # scikit-learn's alphabetical term ids
        remap = np.empty(len(terms), np.int64)
        remap[np.fromiter((first_seen[t] for t in terms), np.int64, len(terms))] = np.arange(len(terms))
        flat = remap[flat]
        indptr, indices, counts, doc_len, _ = counts_from_token_ids((flat, offsets), len(terms))
        if self.max_features is not None and len(terms) > self.max_features:
            # the same selection as sklearn's CountVectorizer._limit_features
            tfs = np.bincount(indices, weights=counts, minlength=len(terms))
            keep = np.sort((-tfs).argsort()[: self.max_features])
            X = sp.csr_matrix((counts, indices, indptr), shape=(len(texts), len(terms)))[:, keep]
            terms = [terms[i] for i in keep]
            indptr, indices, counts = _canonical(X)
        self._set_terms(terms)
        return indptr, indices, counts, doc_len

    def transform(self, texts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Count the known terms of each text (query repetition kept).

        Returns
        -------
        indptr, indices : int64 ndarrays
            Canonical CSR over this vocabulary's term ids; unknown terms are dropped.
        counts : float64 ndarray

        Raises
        ------
        RuntimeError
            The vocabulary is not fitted.
        TypeError
            ``texts`` is one str or holds a non-str.
        """
        if self._vec is None:
            raise RuntimeError("vocabulary is not fitted; call fit_transform first")
        texts = _check_texts(texts, "query_texts")
        if not texts:
            return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
        flat, offsets = self._token_ids(texts, self._vec, grow=False)
        indptr, indices, counts, _, _ = counts_from_token_ids((flat, offsets), len(self.terms))
        return indptr, indices, counts


def counts_from_token_ids(token_ids, n_terms: int | None = None):
    """Count pre-tokenised integer documents into canonical CSR arrays.

    Parameters
    ----------
    token_ids : list of 1-D int arrays, or a tuple ``(flat, offsets)``
        Token ids per document (any order, repetition counts).
    n_terms : int, optional
        Vocabulary size (default: ``max id + 1``).

    Returns
    -------
    indptr, indices : int64 ndarrays
    counts : float64 ndarray
    doc_len : int64 ndarray
        Token count per document.
    n_terms : int

    Raises
    ------
    TypeError
        Non-integer token ids.
    ValueError
        Negative ids, ids beyond the int32 column range, bad offsets or ``n_terms <= max id``.

    Examples
    --------
    >>> indptr, indices, counts, doc_len, n = counts_from_token_ids([np.array([2, 0, 2]), np.array([1])])
    >>> indptr.tolist(), indices.tolist(), counts.tolist(), doc_len.tolist(), n
    ([0, 2, 3], [0, 2, 1], [1.0, 2.0, 1.0], [3, 1], 3)
    """
    if isinstance(token_ids, tuple) and len(token_ids) == 2:
        flat = np.asarray(token_ids[0])
        if flat.ndim != 1:
            raise ValueError(f"token_ids flat array must be 1-D, got shape {flat.shape}")
        if flat.size and flat.dtype.kind not in "iu":
            raise TypeError(f"token_ids flat array must hold integers, got dtype {flat.dtype}")
        flat = np.ascontiguousarray(flat, dtype=np.int64)
        offsets = np.ascontiguousarray(token_ids[1], dtype=np.int64)
    else:
        docs = [np.asarray(t) for t in token_ids]
        for i, t in enumerate(docs):
            if t.ndim != 1:
                raise ValueError(f"token_ids[{i}] must be a 1-D array of token ids, got shape {t.shape}")
            if t.size and t.dtype.kind not in "iu":
                raise TypeError(f"token_ids[{i}] must hold integers, got dtype {t.dtype}")
        lens = np.array([t.size for t in docs], dtype=np.int64)
        offsets = np.zeros(len(docs) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        flat = np.concatenate(docs).astype(np.int64) if docs else np.zeros(0, np.int64)
    from jkofast._validation import check_offsets

    offsets = check_offsets(offsets, flat.size, "token_ids offsets")
    if flat.size and flat.min() < 0:
        raise ValueError("token_ids must be non-negative")
    top = int(flat.max()) + 1 if flat.size else 0
    if top > _MAX_TERM_ID:  # term ids index int32 CSR columns and per-term tables of size max id + 1
        raise ValueError(
            f"token_ids holds id {top - 1}, beyond {_MAX_TERM_ID - 1}: map the ids to a dense "
            "range 0..V-1 first (the vocabulary size is max id + 1)"
        )
    if n_terms is None:
        n_terms = top
    n_terms = check_int(n_terms, "n_terms", min_value=top)
    n_docs = offsets.size - 1
    sorted_tok = np.empty_like(flat)
    row_nnz = np.empty(n_docs, np.int64)
    _kw.sort_count_rows(offsets, flat, sorted_tok, row_nnz)
    indptr = np.zeros(n_docs + 1, np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    indices = np.empty(indptr[-1], np.int64)
    counts = np.empty(indptr[-1], np.float64)
    _kw.compact_counts(offsets, sorted_tok, indptr, indices, counts)
    return indptr, indices, counts, np.diff(offsets), n_terms


@register_warmup("text")
def _warmup() -> None:
    """Compile the counting kernels on a 3-token input."""
    counts_from_token_ids((np.array([2, 0, 2], np.int64), np.array([0, 1, 3], np.int64)))
