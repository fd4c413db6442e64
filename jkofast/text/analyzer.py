r"""The analyser: text -> tokens, as scikit-learn's ``CountVectorizer`` analyses (and more).

Lowercase, ``re.findall`` of a token regex (:mod:`jkofast.text.patterns`), optional stop words
(:mod:`jkofast.text.stopwords`) and stemmer (:mod:`jkofast.text.stemmers`); the sparse basis
(:class:`jkofast.sparse.vocabulary.Vocabulary`) runs this analysis in one pass that also maps tokens
to ids, and is tested equal to ``CountVectorizer``.

Options beyond scikit-learn's analyser: ``compounds=True`` adds, for every hyphenated compound (a
maximal match of :data:`~jkofast.text.patterns.COMPOUND`, word runs joined by ``-`` or U+2010,
searched in the lowercased text), the compound with its hyphens removed as one extra token
(``"il-6"`` -> ``il``, ``il6`` under the ``sklearn`` pattern); it then passes the stop list and
stemmer like every other token.  ``scripts=True`` (the default) folds non-ASCII text and counts
combining marks as word characters (:mod:`jkofast.text.scripts`); ASCII texts are untouched.  The
same analysis runs on documents and queries (BM25, TF-IDF and SparseGeometricRAG).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import asdict, dataclass

import numpy as np

from jkofast._validation import check_bool
from jkofast.text.patterns import COMPOUND, WORD, resolve_pattern
from jkofast.text.scripts import fold_script, script_tokenizer
from jkofast.text.stemmers import STEMMERS, snowball_stemmer, stem_tokens
from jkofast.text.stopwords import STOPWORD_LISTS, stop_words

__all__ = ["Analyzer", "compound_tokens"]

_COMPOUND_RE = re.compile(COMPOUND)
_HYPHENS = str.maketrans("", "", "-\u2010")


def compound_tokens(text: str, lowercase: bool = True, scripts: bool = True) -> list[str]:
    """Return the hyphenated compounds of ``text`` with their hyphens removed (``"IL-6"`` -> ``"il6"``).

    The compounds are the matches of :data:`~jkofast.text.patterns.COMPOUND` in the text, folded by
    :func:`~jkofast.text.scripts.fold_script` first when ``scripts`` and lowercased when ``lowercase``.

    Examples
    --------
    >>> compound_tokens("IL-6 and T-cell-mediated")
    ['il6', 'tcellmediated']
    """
    low = fold_script(text) if scripts else text
    return [m.translate(_HYPHENS) for m in _COMPOUND_RE.findall(low.lower() if lowercase else low)]


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
        (:data:`~jkofast.text.stopwords.LUCENE_ENGLISH_STOP_WORDS`); ``"bm25s"`` = bm25s's English
        list (``stopwords="en"``: the same 33 words).
    stemmer : {None, "porter", "snowball-<language>"}
        ``"porter"`` = the Porter (1980) stemmer (``porter_stem``; the published recipe's);
        ``"snowball-<language>"`` = PyStemmer's Snowball stemmer of that language (any of
        :func:`snowball_languages`, e.g. ``"snowball-english"`` as bm25s uses it; needs PyStemmer).
        Applied after stop-word removal (as bm25s does); each distinct token is stemmed once per
        process (memo).
    compounds : bool
        Also emit every hyphenated compound (:data:`~jkofast.text.patterns.COMPOUND`) with its hyphens removed, as one
        extra token after the pattern's tokens (then stop list and stemmer as usual).
    scripts : bool
        Fold non-ASCII text with :func:`fold_script` and count combining marks as word
        characters (:func:`script_tokenizer`); ASCII text is untouched.  Default True; an index
        manifest without this setting loads with False.

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
        pat = resolve_pattern(self.token_pattern)
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
            snowball_stemmer(st[len("snowball-") :])  # an unknown language or no PyStemmer: ValueError at construction
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
        if self.stopwords in STOPWORD_LISTS:
            return stop_words(self.stopwords)
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
            stop = frozenset(self.stop_list() or ())
            lower, scripts = self.lowercase, self.scripts
            plain = base

            def base(text):
                joined = compound_tokens(text, lower, scripts)
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
        return snowball_stemmer(self.stemmer[len("snowball-") :]).stemWords

    def tokenize(self, text: str) -> list[str]:
        """Return the tokens of one text (after lowercasing, stop-word removal and stemming)."""
        if not isinstance(text, str):  # a clear TypeError rather than a failure inside str.lower
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
        """Rebuild an analyser from :meth:`to_dict`'s output (a manifest without ``scripts``: False)."""
        return cls(**{"scripts": False, **d})
