"""Optimal transport: log-domain Sinkhorn and entropic OT values with analytic dual gradients (SPEC A.4.3).

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, ["sinkhorn", "entropic"])
