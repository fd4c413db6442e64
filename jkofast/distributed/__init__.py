"""Beyond one machine: batch reranking and batch retrieval on Dask (the optional ``distributed`` extra).

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules, and none of them imports Dask before it is used.  Everything else is
machinery: a ``_`` module, or a name that stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "rerank_on_dask": "jkofast.distributed.rerank",
        "rerank_partition": "jkofast.distributed.rerank",
        "search_on_dask": "jkofast.distributed.search",
        "dask_config_for_workers": "jkofast.distributed.cluster",
        "DaskUnavailableError": "jkofast.distributed.cluster",
        "ClientStages": "jkofast.distributed.tasks",
    },
    deprecated_from=["cluster", "rerank", "search", "tasks"],  # the names it re-exported before 0.3 (one release)
)
