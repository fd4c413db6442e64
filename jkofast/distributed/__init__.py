"""Beyond one machine: batch reranking and batch retrieval on Dask (the optional ``distributed`` extra).

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them, and none of them imports Dask before it is used.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, ["cluster", "rerank", "search", "tasks"])
