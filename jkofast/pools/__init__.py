"""Candidate pools (global hybrid RRF, SPEC A.2.6) and the pool baselines (in-pool RRF, MMR, DPP-MAP; SPEC A.5).

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, ["candidates", "baselines"])
