"""The analyser every lexical retriever builds on: token patterns, Unicode folding, stop words, stemmers.

As scikit-learn's ``feature_extraction/text.py`` sits under every vectorizer, this wing sits under
the sparse basis (:mod:`jkofast.sparse`: vocabulary, TF-IDF / BM25) and SparseGeometricRAG
(:mod:`jkofast.sgr`).  The token patterns are defined once, in :mod:`jkofast.text.patterns`.

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__, ["analyzer", "language", "patterns", "scripts", "stemmers", "stopwords"]
)
