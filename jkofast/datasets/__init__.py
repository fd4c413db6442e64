"""BEIR-format datasets (corpus, queries, qrels, saved embeddings) and the bundled SciFact copy.

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "BeirDataset": "jkofast.datasets.beir",
        "bundled_path": "jkofast.datasets.beir",
        "load_dataset": "jkofast.datasets.beir",
        "read_corpus": "jkofast.datasets.beir",
        "read_qrels_beir": "jkofast.datasets.beir",
        "read_queries": "jkofast.datasets.beir",
    },
)
