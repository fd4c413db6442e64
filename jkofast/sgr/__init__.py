"""SparseGeometricRAG: the training-free first-stage retriever over sparse TF-IDF geometry (SPEC B).

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "COMPONENTS": "jkofast.sgr.retriever",
        "SGRPool": "jkofast.sgr.retriever",
        "SparseGeometricRetriever": "jkofast.sgr.retriever",
        "TOKEN_PATTERN": "jkofast.sgr.retriever",
    },
)
