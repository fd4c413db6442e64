"""jkofast: compiled (Numba, CPU) kernels for distributional retrieval.

Importing compiles nothing; call ``jkofast.warmup()`` to compile/load every kernel.
Submodules are imported lazily on attribute access.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "warmup": "jkofast.warmup",
    "numba_threads": "jkofast._threads",
    "ConvergenceWarning": "jkofast._status",
    "topk": "jkofast.selection",
    "sinkhorn_log": "jkofast.sinkhorn",
    "SinkhornResult": "jkofast.sinkhorn",
    "JKOConfig": "jkofast.jko",
    "run_jko": "jkofast.jko",
    "run_jko_with_duals": "jkofast.jko",
    "rerank_batch": "jkofast.jko",
    "operating_point": "jkofast.jko",
}

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'jkofast' has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)


def __dir__():
    return __all__
