"""Stop-word lists of the analyser (:class:`jkofast.text.analyzer.Analyzer`).

``"english"`` (alias ``"sklearn"``) is scikit-learn's ``ENGLISH_STOP_WORDS`` (318 words, read from
scikit-learn); ``"lucene"`` is Lucene ``EnglishAnalyzer``'s 33-word default list
(:data:`LUCENE_ENGLISH_STOP_WORDS`); ``"bm25s"`` is bm25s's ``stopwords="en"``, the same 33 words.
"""

from __future__ import annotations

import functools
import importlib.util
import os

__all__ = ["LUCENE_ENGLISH_STOP_WORDS", "STOPWORD_LISTS", "stop_words"]

STOPWORD_LISTS = ("english", "sklearn", "lucene", "bm25s")  # "sklearn" is "english"; "bm25s" = "lucene"'s words
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


@functools.cache
def _sklearn_stop_words() -> tuple[str, ...]:
    """scikit-learn's ``ENGLISH_STOP_WORDS``, sorted, read without importing scikit-learn.

    ``import sklearn`` costs about a second (it loads scikit-learn's utilities and their
    dependencies), and a command that only needs the 318 words would pay it on every run. The list
    lives alone in ``sklearn/feature_extraction/_stop_words.py``, a module with no imports: that file
    is executed on its own.  Where it is not found (a scikit-learn that moved it), the list comes
    from the public import.
    """
    spec = importlib.util.find_spec("sklearn")  # locates the package without running it
    for root in (spec.submodule_search_locations or ()) if spec is not None else ():
        path = os.path.join(root, "feature_extraction", "_stop_words.py")
        if os.path.isfile(path):
            mod_spec = importlib.util.spec_from_file_location("_jkofast_sklearn_stop_words", path)
            mod = importlib.util.module_from_spec(mod_spec)
            try:
                mod_spec.loader.exec_module(mod)
            except Exception:  # an unexpected file: the public import below decides
                break
            words = getattr(mod, "ENGLISH_STOP_WORDS", None)
            if isinstance(words, frozenset) and words and all(isinstance(w, str) for w in words):
                return tuple(sorted(words))
            break
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return tuple(sorted(ENGLISH_STOP_WORDS))


def stop_words(name: str) -> list[str]:
    """Return the named list (one of :data:`STOPWORD_LISTS`) as a sorted list."""
    if name in ("english", "sklearn"):
        return list(_sklearn_stop_words())
    return sorted(LUCENE_ENGLISH_STOP_WORDS)  # bm25s's STOPWORDS_EN is Lucene's list (tested)
