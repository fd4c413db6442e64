"""Stop-word lists of the analyser (:class:`jkofast.text.analyzer.Analyzer`).

``"english"`` (alias ``"sklearn"``) is scikit-learn's ``ENGLISH_STOP_WORDS`` (318 words, read from
scikit-learn); ``"lucene"`` is Lucene ``EnglishAnalyzer``'s 33-word default list
(:data:`LUCENE_ENGLISH_STOP_WORDS`); ``"bm25s"`` is bm25s's ``stopwords="en"``, the same 33 words.
"""

from __future__ import annotations

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
# the largest vocabulary the CSR kernels index (int32 column ids)


def stop_words(name: str) -> list[str]:
    """Return the named list (one of :data:`STOPWORD_LISTS`) as a sorted list."""
    if name in ("english", "sklearn"):
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        return sorted(ENGLISH_STOP_WORDS)
    return sorted(LUCENE_ENGLISH_STOP_WORDS)  # bm25s's STOPWORDS_EN is Lucene's list (tested)
