"""Sparse first stage: vocabulary and CSR TF-IDF / BM25 indexes on the analyser of :mod:`jkofast.text`.

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Vocabulary": "jkofast.sparse.vocabulary",
        "counts_from_token_ids": "jkofast.sparse.vocabulary",
        "TfidfIndex": "jkofast.sparse.index",
        "BM25Index": "jkofast.sparse.index",
        "SparseIndex": "jkofast.sparse.index",
        "load_index": "jkofast.sparse.index",
        "check_index": "jkofast.sparse.index",
        "SparseRetriever": "jkofast.sparse.retriever",
        "SearchReport": "jkofast.sparse.report",
        "cosine_rows": "jkofast.sparse._cosine",
        "cosine_pools": "jkofast.sparse._cosine",
        "cosine_cross": "jkofast.sparse._cosine",
    },
    deprecated_from=[
        "vocabulary",
        "index",
        "_cosine",
        "retriever",
    ],  # the names it re-exported before 0.3 (one release)
)
