"""JKO-RAG set-level reranking.

Configuration, the single-pool solver, batched and streaming (resumable, file-to-file) reranking,
energies, the parity check, and the extensions and analyses: Dual-Rank confidence, MR-/SAM-JKO, NM-JKO's learned metric,
the theory evaluators and the linear response of a JKO step.  The drop-in API of the published solver is
:mod:`jkofast.compat`.

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "JKOConfig": "jkofast.jko.config",
        "operating_point": "jkofast.jko.config",
        "resolve_config": "jkofast.jko.config",
        "run_jko": "jkofast.jko.solver",
        "run_jko_with_duals": "jkofast.jko.solver",
        "jko_step": "jkofast.jko.solver",
        "rerank_batch": "jkofast.jko.solver",
        "RerankResult": "jkofast.jko.solver",
        "pool_geometry": "jkofast.jko.solver",
        "rerank_stream": "jkofast.jko.stream",
        "RerankOptions": "jkofast.jko.stream",
        "RerankSummary": "jkofast.jko.stream",
        "energy_and_p0": "jkofast.jko.energy",
        "blend": "jkofast.jko.energy",
        "read_score_file": "jkofast.jko.energy",
        "confidence_signals": "jkofast.jko.confidence",
        "ConfidenceSignals": "jkofast.jko.confidence",
        "dual_confidence": "jkofast.jko.confidence",
        "multires_rerank": "jkofast.jko.multires",
        "MultiresResult": "jkofast.jko.multires",
        "train_metric": "jkofast.jko.metric",
        "LearnedMetric": "jkofast.jko.metric",
        "save_metric": "jkofast.jko.metric",
        "load_metric": "jkofast.jko.metric",
        "TheoryBatch": "jkofast.jko.theory",
        "certified_radius": "jkofast.jko.theory",
        "wc": "jkofast.jko.theory",
        "solve_step": "jkofast.jko.linear_response",
        "jvp": "jkofast.jko.linear_response",
        "provable_radius": "jkofast.jko.theory",
        "RadiusBound": "jkofast.jko.theory",
        "example_pools": "jkofast.jko.examples",
        "ExamplePools": "jkofast.jko.examples",
    },
    deprecated_from=[
        "solver",
        "config",
        "stream",
        "energy",
        "parity",
        "confidence",
        "multires",
        "metric",
        "theory",
        "linear_response",
    ],  # the names it re-exported before 0.3 (one release)
)
