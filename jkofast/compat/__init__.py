"""The published solver's import path: ``from jkofast.compat import JKOConfig, run_jko, ...``.

An alias of :mod:`jkofast.compat._solver`, kept at the top level so the published scripts switch
their import with one word.
"""

from jkofast.compat._solver import *  # noqa: F403
from jkofast.compat._solver import (
    __all__,  # noqa: F401
    log_sinkhorn_loss_and_grad,  # noqa: F401  (the gradients; not a published name)
)
