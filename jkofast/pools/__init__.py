"""Candidate pools (global hybrid RRF, SPEC A.2.6) and the pool baselines (in-pool RRF, MMR, DPP-MAP; SPEC A.5).

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "BadPoolError": "jkofast.pools.baselines",
        "BadPoolWarning": "jkofast.pools.baselines",
        "Pools": "jkofast.pools.candidates",
        "build_pools": "jkofast.pools.candidates",
        "dense_scores": "jkofast.pools.candidates",
        "dense_search": "jkofast.pools.candidates",
        "dpp_map": "jkofast.pools.baselines",
        "inpool_rrf": "jkofast.pools.baselines",
        "load_embeddings": "jkofast.pools.candidates",
        "mmr": "jkofast.pools.baselines",
        "pools_from_lists": "jkofast.pools.candidates",
        "positions_to_docs": "jkofast.pools.baselines",
        "rrf_fuse": "jkofast.pools.candidates",
        "top_lists": "jkofast.pools.candidates",
        "topk_by_score": "jkofast.pools.baselines",
    },
)
