"""Lazy re-exports for package ``__init__`` modules (PEP 562): importing a package imports nothing else."""

from __future__ import annotations

import ast
import importlib
import os
import re
import sys
import warnings
from collections.abc import Mapping, Sequence

__all__ = ["lazy_exports", "public_names"]


def public_names(package: str, modules: Sequence[str]) -> dict[str, str]:
    """Public name -> defining module, read from the ``__all__`` of each sub-module's source.

    The sources are read, not imported, so the table costs no import (and no compilation): a
    top-level ``__all__ = [...]`` (or ``(...)``) line is found by a pattern and its literal
    evaluated; only a source where that fails is parsed whole.
    A name listed by two sub-modules belongs to the first one in ``modules``.

    Parameters
    ----------
    package : str
        Dotted name of an imported package.
    modules : sequence of str
        Its sub-modules (leaf names), in order of precedence.

    Returns
    -------
    dict of str to str
        Public name -> dotted module name.

    Raises
    ------
    ValueError
        A sub-module has no literal ``__all__``.
    """
    folder = os.path.dirname(os.path.abspath(sys.modules[package].__file__))
    out: dict[str, str] = {}
    for leaf in modules:
        path = os.path.join(folder, f"{leaf}.py")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for name in _literal_all(source, path, f"{package}.{leaf}"):
            out.setdefault(name, f"{package}.{leaf}")
    return out


_ALL_LINE = re.compile(r"^__all__ *= *(\[[^\]]*\]|\([^)]*\))", re.MULTILINE)


def _literal_all(source: str, path: str, module: str) -> list[str]:
    """Return the literal ``__all__`` of a module's ``source`` (``ValueError`` when it has none)."""
    found = _ALL_LINE.search(source)
    if found is not None:
        try:
            return list(ast.literal_eval(found.group(1)))
        except (ValueError, SyntaxError):
            pass  # not a plain literal after all: the parse below decides
    tree = ast.parse(source, path)
    names = next(
        (
            ast.literal_eval(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
        ),
        None,
    )
    if names is None:
        raise ValueError(f"{module} has no literal __all__ to re-export")
    return list(names)


def lazy_exports(package: str, exports: Mapping[str, str], deprecated_from: Sequence[str] = ()):
    """Return ``(__getattr__, __dir__, __all__)`` for a package that re-exports names lazily.

    Parameters
    ----------
    package : str
        The package's dotted name.
    exports : mapping of str to str
        The package's face: public name -> dotted name of the module that defines it.
    deprecated_from : sequence of str, optional
        Sub-modules (leaf names) whose whole ``__all__`` the package used to re-export: a name of
        theirs that is not in ``exports`` still resolves, with a ``DeprecationWarning`` naming the
        module to import it from (kept for one release).

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
    table = dict(exports)
    names = sorted(table)
    old: dict[str, str] = {}

    def __getattr__(name: str):
        mod = table.get(name)
        if mod is not None:
            return getattr(importlib.import_module(mod), name)
        if deprecated_from and not old:
            old.update(public_names(package, deprecated_from))
        mod = old.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(
            f"{package}.{name} is not part of the public API and will be removed from {package} in the "
            f"next release; import it from {mod}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(mod), name)

    def __dir__():
        return names

    return __getattr__, __dir__, names
