"""Candidate pools, the pool baselines and the first-stage retriever registry.

Global hybrid RRF pools (SPEC A.2.6), in-pool RRF / MMR / DPP-MAP (SPEC A.5), and ``retrievers``:
every first-stage method by name.

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Pools": "jkofast.pools.candidates",
        "build_pools": "jkofast.pools.candidates",
        "pools_from_lists": "jkofast.pools.candidates",
        "rrf_fuse": "jkofast.pools.candidates",
        "inpool_rrf": "jkofast.pools.baselines",
        "mmr": "jkofast.pools.baselines",
        "dpp_map": "jkofast.pools.baselines",
        "topk_by_score": "jkofast.pools.baselines",
        "BadPoolError": "jkofast.pools.baselines",
        "BadPoolWarning": "jkofast.pools.baselines",
        "get_retriever": "jkofast.pools.retrievers",
        "load_retriever": "jkofast.pools.retrievers",
        "METHODS": "jkofast.pools.retrievers",
    },
    deprecated_from=["candidates", "baselines", "retrievers"],  # the names it re-exported before 0.3 (one release)
)
