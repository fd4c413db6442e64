r"""The token patterns, defined once for every lexical retriever.

* :data:`WORD` = ``(?u)\w+`` -- every maximal ``\w+`` run, the published JKO-RAG BM25 tokeniser
  (SPEC A.2.3; 1-character tokens kept);
* :data:`SKLEARN` = ``(?u)\b\w\w+\b`` -- scikit-learn's default (tokens of >= 2 characters), used by
  SparseGeometricRAG (SPEC B.2) and by bm25s;
* :data:`COMPOUND` -- hyphenated compounds: word runs joined by ASCII hyphen-minus or U+2010 HYPHEN
  (``Analyzer(compounds=True)`` adds each with its hyphens removed).
"""

from __future__ import annotations

__all__ = ["COMPOUND", "PATTERN_ALIASES", "SKLEARN", "WORD", "resolve_pattern"]

WORD = r"(?u)\w+"
SKLEARN = r"(?u)\b\w\w+\b"
COMPOUND = "(?u)\\w+(?:[-\u2010]\\w+)+"
# names accepted for the two patterns wherever a token pattern is a setting
PATTERN_ALIASES = {"word": WORD, r"\w+": WORD, "sklearn": SKLEARN, r"\b\w\w+\b": SKLEARN}


def resolve_pattern(pattern):
    r"""Return the regex named by ``pattern`` (``"word"``, ``"sklearn"`` or their bare forms), else ``pattern``.

    Examples
    --------
    >>> resolve_pattern("sklearn") == SKLEARN
    True
    """
    return PATTERN_ALIASES.get(pattern, pattern)
