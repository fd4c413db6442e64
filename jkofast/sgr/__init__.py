"""SparseGeometricRAG: the training-free first-stage retriever over sparse TF-IDF geometry (SPEC B).

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, ["retriever", "layout", "streaming"])
