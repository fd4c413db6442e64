"""Sentence encoder without torch: sentence-transformers BERT-family models in NumPy BLAS + Numba.

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, ["model", "bert", "embed", "cross", "score"])
