"""The analyser every lexical retriever builds on: token patterns, Unicode folding, stop words, stemmers.

As scikit-learn's ``feature_extraction/text.py`` sits under every vectorizer, this package sits under
the sparse basis (:mod:`jkofast.sparse`: vocabulary, TF-IDF / BM25) and SparseGeometricRAG
(:mod:`jkofast.sgr`).  The token patterns are defined once, in :mod:`jkofast.text.patterns`.

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Analyzer": "jkofast.text.analyzer",
        "detect_language": "jkofast.text.language",
        "LanguageGuess": "jkofast.text.language",
        "language_analyser": "jkofast.text.language",
        "porter_stem": "jkofast.text.stemmers",
        "snowball_stemmer": "jkofast.text.stemmers",
        "stop_words": "jkofast.text.stopwords",
        "STOPWORD_LISTS": "jkofast.text.stopwords",
        "script_tokenizer": "jkofast.text.scripts",
        "fold_script": "jkofast.text.scripts",
        "resolve_pattern": "jkofast.text.patterns",
    },
    deprecated_from=[
        "analyzer",
        "language",
        "patterns",
        "scripts",
        "stemmers",
        "stopwords",
    ],  # the names it re-exported before 0.3 (one release)
)
