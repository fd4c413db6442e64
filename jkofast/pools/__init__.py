"""Candidate pools, the pool baselines and the first-stage retriever registry.

Global hybrid RRF pools (SPEC A.2.6), in-pool RRF / MMR / DPP-MAP (SPEC A.5), and ``retrievers``:
every first-stage method by name.

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, ["candidates", "baselines", "retrievers"])
