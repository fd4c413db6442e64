"""JKO-RAG set-level reranking.

Configuration, the single-pool solver, batched and streaming (resumable, file-to-file) reranking,
energies, the parity check, the drop-in API of the published solver (:mod:`jkofast.compat._solver`),
and the extensions and analyses: Dual-Rank confidence, MR-/SAM-JKO, NM-JKO's learned metric,
the theory evaluators and the linear response of a JKO step.

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    [
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
    ],
)
