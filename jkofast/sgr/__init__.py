"""SparseGeometricRAG: the training-free first-stage retriever over sparse TF-IDF geometry (SPEC B).

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "SparseGeometricRetriever": "jkofast.sgr.retriever",
        "SGRConfig": "jkofast.sgr.config",
        "PRESETS": "jkofast.sgr.config",
        "SGRPool": "jkofast.sgr._engine",
        "build_index": "jkofast.sgr.streaming",
        "check_index": "jkofast.sgr._persist",
        "Geometry": "jkofast.sgr.layout",
        "Shard": "jkofast.sgr.layout",
        "calibrate": "jkofast.sgr.layout",
        "encode": "jkofast.sgr.layout",
        "assemble": "jkofast.sgr.layout",
    },
    deprecated_from=["retriever", "layout", "streaming"],  # the names it re-exported before 0.3 (one release)
)
