"""Sparse first stage: analyser and vocabulary, CSR TF-IDF / BM25 indexes, the retriever registry.

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Analyzer": "jkofast.sparse.text",
        "BM25Index": "jkofast.sparse.index",
        "COMPOUND": "jkofast.sparse.text",
        "FORMAT_NAME": "jkofast.sparse.index",
        "FORMAT_VERSION": "jkofast.sparse.index",
        "LUCENE_ENGLISH_STOP_WORDS": "jkofast.sparse.text",
        "METHODS": "jkofast.sparse.retriever",
        "SKLEARN": "jkofast.sparse.text",
        "STEMMERS": "jkofast.sparse.text",
        "SparseIndex": "jkofast.sparse.index",
        "SparseRetriever": "jkofast.sparse.retriever",
        "TfidfIndex": "jkofast.sparse.index",
        "Vocabulary": "jkofast.sparse.text",
        "WORD": "jkofast.sparse.text",
        "cosine_cross": "jkofast.sparse.index",
        "cosine_pools": "jkofast.sparse.index",
        "cosine_rows": "jkofast.sparse.index",
        "counts_from_token_ids": "jkofast.sparse.text",
        "get_retriever": "jkofast.sparse.retriever",
        "load_index": "jkofast.sparse.index",
        "porter_stem": "jkofast.sparse.text",
        "prepare": "jkofast.sparse.index",
        "stem_tokens": "jkofast.sparse.text",
    },
)
