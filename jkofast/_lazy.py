"""Lazy re-exports for package ``__init__`` modules (PEP 562): importing a package imports nothing else."""

from __future__ import annotations

import importlib

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: dict[str, str]):
    """Return ``(__getattr__, __dir__, __all__)`` for a package that re-exports ``exports``.

    Parameters
    ----------
    package : str
        The package's dotted name (for the error message).
    exports : dict of str to str
        Public name -> dotted name of the module that defines it.

    Returns
    -------
    __getattr__ : callable
        PEP 562 hook: imports the defining module on first access of a name
        (``AttributeError`` for any other name).
    __dir__ : callable
        Lists the exported names.
    names : list of str
        The exported names, sorted (the package's ``__all__``).
    """
    names = sorted(exports)

    def __getattr__(name: str):
        mod = exports.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(mod), name)

    def __dir__():
        return names

    return __getattr__, __dir__, names
