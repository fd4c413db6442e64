"""Optimal transport: log-domain Sinkhorn and entropic OT values with analytic dual gradients (SPEC A.4.3).

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "sinkhorn_log": "jkofast.ot.sinkhorn",
        "SinkhornResult": "jkofast.ot.sinkhorn",
        "entropic_ot": "jkofast.ot.entropic",
        "OTResult": "jkofast.ot.entropic",
        "transport_cost_grad": "jkofast.ot.entropic",
    },
    deprecated_from=["sinkhorn", "entropic"],  # the names it re-exported before 0.3 (one release)
)
