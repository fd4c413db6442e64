"""Explicit warm-up: compile (or load from cache) every registered kernel on tiny inputs.

Wrapper modules register a warm-up with :func:`jkofast._numba.register_warmup`; :func:`warmup`
imports every public wrapper module of every wing (not the CLI, not the kernels themselves, which
the wrappers import) and runs each registered warm-up once.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import types

import jkofast
from jkofast._numba import WARMUPS

__all__ = ["warmup"]

# not wrapper modules: the CLI (imports every command), this module, and the kernels (imported
# by the wrappers that use them)
_SKIP = {"jkofast.cli", "jkofast.__main__", "jkofast.warmup", "jkofast.commands", "jkofast.kernels"}


def _import_wrappers(path=None, prefix: str = "jkofast.") -> None:
    """Import every public module of the package, wing sub-packages included (recursively)."""
    for mod in pkgutil.iter_modules(jkofast.__path__ if path is None else path, prefix):
        if mod.name in _SKIP or mod.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        m = importlib.import_module(mod.name)
        if mod.ispkg:
            _import_wrappers(m.__path__, mod.name + ".")


def warmup(verbose: bool = False) -> dict[str, float]:
    """Run every registered warm-up (compiles, or loads from Numba's on-disk cache).

    Parameters
    ----------
    verbose : bool
        Print one line per warm-up with its time.

    Returns
    -------
    dict of str to float
        Seconds per warm-up entry (``"topk"``, ``"sparse"``, ``"jko"``, ...).

    Examples
    --------
    >>> import jkofast
    >>> times = jkofast.warmup()  # doctest: +SKIP
    """
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
    """Make the module callable, so ``jkofast.warmup()`` works every time.

    Importing ``jkofast.warmup`` (the submodule) rebinds the package attribute ``jkofast.warmup``
    from the function to this module; calling the module runs the function, not only on first
    access.
    """

    def __call__(self, *args, **kwargs):
        return warmup(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
