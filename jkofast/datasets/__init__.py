"""BEIR-format datasets (corpus, queries, qrels, saved embeddings) and the bundled SciFact copy.

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "load_dataset": "jkofast.datasets.beir",
        "BeirDataset": "jkofast.datasets.beir",
        "read_corpus": "jkofast.datasets.beir",
        "read_queries": "jkofast.datasets.beir",
        "read_qrels_beir": "jkofast.datasets.beir",
        "DataWarning": "jkofast.datasets.beir",
        "StaleEmbeddings": "jkofast.datasets.beir",
        "read_query_file": "jkofast.datasets.beir",
    },
    deprecated_from=["beir"],  # the names it re-exported before 0.3 (one release)
)
