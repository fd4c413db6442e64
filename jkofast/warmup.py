"""Explicit warm-up: compile (or load from cache) every registered kernel on tiny inputs."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import types

import jkofast
from jkofast._numba import WARMUPS

# wrapper modules that register warm-ups; imported on demand so `import jkofast` stays cheap
_SKIP = {"jkofast.cli", "jkofast.__main__", "jkofast.warmup"}


def _import_wrappers() -> None:
    for mod in pkgutil.iter_modules(jkofast.__path__, "jkofast."):
        if mod.name in _SKIP or mod.name.split(".")[-1].startswith("_") or mod.ispkg:
            continue
        importlib.import_module(mod.name)


def warmup(verbose: bool = False) -> dict[str, float]:
    """Run every registered warm-up; returns seconds per entry."""
    _import_wrappers()
    times = {}
    for name, fn in sorted(WARMUPS.items()):
        t0 = time.perf_counter()
        fn()
        times[name] = time.perf_counter() - t0
        if verbose:
            print(f"warmup {name}: {times[name]:.2f}s")
    return times


class _CallableModule(types.ModuleType):
    """Importing ``jkofast.warmup`` (the submodule) rebinds the package attribute
    ``jkofast.warmup`` from the function to this module; calling the module runs the function,
    so ``jkofast.warmup()`` works every time, not only on first access."""

    def __call__(self, *args, **kwargs):
        return warmup(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
