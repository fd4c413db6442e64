"""Naive NumPy/SciPy oracles: slow, obviously correct.  One section module per area
(``reference_<area>.py``); everything is re-exported here so tests write
``import reference as ref``."""

from __future__ import annotations

import importlib
import os

_here = os.path.dirname(__file__)
for _f in sorted(os.listdir(_here)):
    if _f.startswith("reference_") and _f.endswith(".py"):
        _m = importlib.import_module(_f[:-3])
        globals().update({k: v for k, v in vars(_m).items() if not k.startswith("_")})


def topk_desc_lowest_index(scores, k):
    """Top-k by (score desc, index asc) via a stable lexsort."""
    import numpy as np

    s = np.asarray(scores)
    order = np.lexsort((np.arange(s.shape[-1]), -s))
    return order[:k]
