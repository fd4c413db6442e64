"""The published solver's import path: ``from jkofast.compat import JKOConfig, run_jko, ...``.

The published names, signatures and defaults on jkofast's kernels, kept at the top level so the
published scripts switch their import with one word.

The names below are imported lazily (PEP 562); :mod:`jkofast.compat.torch` is the autograd adapter.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, _face = lazy_exports(
    __name__,
    {
        "JKOConfig": "jkofast.compat._solver",
        "run_jko": "jkofast.compat._solver",
        "run_jko_with_duals": "jkofast.compat._solver",
        "jko_step": "jkofast.compat._solver",
        "log_sinkhorn_loss": "jkofast.compat._solver",
        "log_sinkhorn_with_duals": "jkofast.compat._solver",
        "log_sinkhorn_loss_and_grad": "jkofast.compat._solver",
        "log_sinkhorn_loss_hvp": "jkofast.compat._solver",
    },
)
# ``from jkofast.compat import *`` imports what the published module's does; the two gradient
# functions are jkofast's own additions, public (documented, frozen) but not star-imported.
__all__ = [n for n in _face if n not in ("log_sinkhorn_loss_and_grad", "log_sinkhorn_loss_hvp")]
