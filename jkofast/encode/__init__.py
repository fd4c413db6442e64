"""Sentence encoder without torch: sentence-transformers BERT-family models in NumPy BLAS + Numba.

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "load_model": "jkofast.encode.model",
        "BertModel": "jkofast.encode.model",
        "encoder_available": "jkofast.encode.model",
        "encode": "jkofast.encode.bert",
        "tokenize": "jkofast.encode.bert",
        "embed_dataset": "jkofast.encode.embed",
        "load_cross_encoder": "jkofast.encode.cross",
        "CrossEncoderModel": "jkofast.encode.cross",
        "cross_scores": "jkofast.encode.cross",
        "score_pairs": "jkofast.encode.score",
    },
    deprecated_from=["model", "bert", "embed"],  # the names it re-exported before 0.3 (one release)
)
