"""JKO-RAG set-level reranking: configuration, the single-pool solver, batched and streaming (resumable,
file-to-file) reranking, energies, and the drop-in API of the published solver (:mod:`jkofast.jko.compat`).

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "E_MAX": "jkofast.jko.solver",
        "GRADS": "jkofast.jko.solver",
        "JKOConfig": "jkofast.jko.solver",
        "MODES": "jkofast.jko.solver",
        "OBJECTIVES": "jkofast.jko.solver",
        "RerankOptions": "jkofast.jko.stream",
        "RerankResult": "jkofast.jko.solver",
        "RerankSummary": "jkofast.jko.stream",
        "align_scores": "jkofast.jko.energy",
        "blend": "jkofast.jko.energy",
        "energy_and_p0": "jkofast.jko.energy",
        "fixture_pool": "jkofast.jko.parity",
        "initial_distribution": "jkofast.jko.solver",
        "jko_step": "jkofast.jko.solver",
        "log_sinkhorn_loss": "jkofast.jko.compat",
        "log_sinkhorn_with_duals": "jkofast.jko.compat",
        "minmax": "jkofast.jko.energy",
        "operating_point": "jkofast.jko.solver",
        "parity_report": "jkofast.jko.parity",
        "pool_geometry": "jkofast.jko.solver",
        "read_score_file": "jkofast.jko.energy",
        "rerank_batch": "jkofast.jko.solver",
        "rerank_stream": "jkofast.jko.stream",
        "run_jko": "jkofast.jko.solver",
        "run_jko_with_duals": "jkofast.jko.solver",
        "softmax_tau": "jkofast.jko.energy",
    },
)
