"""Optimal transport: log-domain Sinkhorn and entropic OT values with analytic dual gradients (SPEC A.4.3).

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "OTResult": "jkofast.ot.entropic",
        "SinkhornResult": "jkofast.ot.sinkhorn",
        "TINY": "jkofast.ot.sinkhorn",
        "entropic_ot": "jkofast.ot.entropic",
        "sinkhorn_log": "jkofast.ot.sinkhorn",
        "transport_cost_grad": "jkofast.ot.entropic",
    },
)
