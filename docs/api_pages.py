"""The API reference pages: one page per wing, documenting exactly the names of its face.

A wing's face is ``dir()`` of its package (``jkofast/<wing>/__init__.py`` maps each public name to
the module that defines it; the same names as its ``__all__``, but for the drop-in's two gradient
functions, which ``from jkofast.compat import *`` leaves out as the published module does).
Private modules and the names that stay in their own module are not documented here.  Each page
opens with a summary table (autosummary) and then renders every name in full: functions with their
signature, classes with their methods and attributes (``autoclass :members:``).  ``docs/conf.py``
calls :func:`write_api_pages` when Sphinx reads it; ``tests/test_docs.py`` checks the pages
against :func:`public_names`.
"""

from __future__ import annotations

import importlib
import inspect
import os

# Wings in the order a reader meets them, with the heading of each page; "package" is the top-level
# namespace (its shortcuts link to the wing pages).
WINGS = {
    "package": "The package namespace",
    "jko": "JKO-RAG reranking",
    "ot": "Optimal transport",
    "pools": "Candidate pools, baselines and the retriever registry",
    "sparse": "Sparse first stage (TF-IDF, BM25)",
    "sgr": "SparseGeometricRAG",
    "text": "Text analysis",
    "eval": "Evaluation",
    "datasets": "Datasets",
    "encode": "Embeddings (torch-free encoder)",
    "studies": "Studies",
    "distributed": "Dask",
    "compat": "Drop-in for the published solver",
}
# The command line and the compiled kernels behind the wrappers: not part of the Python API.
INTERNAL = ("cli", "commands", "kernels")


def _module(wing: str) -> str:
    """Return the dotted name of ``wing`` (``"package"`` is ``jkofast`` itself)."""
    return "jkofast" if wing == "package" else f"jkofast.{wing}"


def public_names() -> dict[str, list[str]]:
    """Return ``{package: its public names}`` for every page of the reference, in page order."""
    out = {}
    for wing in WINGS:
        pkg = importlib.import_module(_module(wing))
        out[pkg.__name__] = list(dir(pkg))
    return out


def _home(package: str, name: str) -> str | None:
    """Return the other page that documents the object ``package.name`` is, or None when this page does.

    A top-level shortcut is documented on its wing's page; a wing's name that is an earlier wing's
    object (``jkofast.compat.JKOConfig``) on that wing's page.
    """
    obj = getattr(importlib.import_module(package), name)
    for wing in WINGS:
        other = _module(wing)
        if other == package:
            if package != "jkofast":
                return None
            continue
        mod = importlib.import_module(other)
        if wing != "package" and name in dir(mod) and getattr(mod, name) is obj:
            return other
    return None


def _page(wing: str, title: str) -> str:
    """Return the reStructuredText of one wing's page."""
    package = _module(wing)
    pkg = importlib.import_module(package)
    names = public_names()[package]
    lines = [title, "=" * len(title), "", f".. automodule:: {package}", "   :no-members:", ""]
    lines += [f".. currentmodule:: {package}", ""]
    shortcuts = {n: _home(package, n) for n in names}
    own = [n for n in names if not shortcuts[n]]
    if len(own) < len(names):
        lines += ["Documented on another page:", ""]
        lines += [f"* :py:obj:`{n} <{shortcuts[n]}.{n}>`" for n in names if shortcuts[n]]
        lines.append("")
    lines += [".. autosummary::", "   :nosignatures:", "", *(f"   {n}" for n in own), ""]
    for n in own:
        obj = getattr(pkg, n)
        if inspect.isclass(obj):
            lines += [f".. autoclass:: {n}", "   :members:", ""]
        elif callable(obj):
            lines += [f".. autofunction:: {n}", ""]
        else:
            lines += [f".. autodata:: {n}", ""]
    return "\n".join(lines)


def write_api_pages(srcdir: str) -> list[str]:
    """Write ``api/<wing>.rst`` for every wing and ``api/index.rst`` (every public name, by wing)."""
    here = os.path.join(srcdir, "api")
    os.makedirs(here, exist_ok=True)
    names = public_names()
    index = ["API reference", "=============", ""]
    index += ["Every public name, by package.  Anything else (a ``_`` module, a name that stays in its own"]
    index += ["module) is machinery and may change without notice.", ""]
    index += [".. list-table::", "   :header-rows: 1", "   :widths: 20 80", "", "   * - Namespace", "     - Names"]
    for wing in WINGS:
        package = _module(wing)
        text = _page(wing, WINGS[wing])
        path = os.path.join(here, f"{wing}.rst")
        if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        index += [f"   * - :doc:`{package} <{wing}>`", "     - " + ", ".join(f"``{n}``" for n in names[package])]
    index += ["", ".. toctree::", "   :maxdepth: 1", "   :hidden:", "", *(f"   {w}" for w in WINGS), ""]
    with open(os.path.join(here, "index.rst"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(index))
    return [f"api/{w}.rst" for w in WINGS]
