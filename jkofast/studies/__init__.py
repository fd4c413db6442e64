"""End-to-end jobs: the SciFact main job, its read-out, the sparse-only recipe and the published hyper-parameter search.

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, ["common", "readout", "main_job", "sparse_recipe", "tuning"])
