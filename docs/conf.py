"""Sphinx configuration of the jkofast documentation site.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (``pip install -e ".[docs]"``).
The guides are Markdown (MyST); the API reference is generated at build time from the docstrings of
every public name (each module's ``__all__``) by :func:`_write_api_pages` and autosummary.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import jkofast

project = "jkofast"
copyright = "2026, the jkofast developers"
author = "the jkofast developers"
release = version = jkofast.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_design",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "studies/*.json", "README.md"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
# The included CHANGELOG.md starts its sections at level 2.
suppress_warnings = ["myst.header"]

autosummary_imported_members = False
autodoc_default_options = {"members": False}
autodoc_mock_imports = ["torch"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

# Untagged blocks (docstring literal blocks, indented blocks) are plain text, not Python.
highlight_language = "text"
html_static_path = ["_static"]
html_css_files = ["jkofast.css"]

html_theme = "pydata_sphinx_theme"
html_title = f"jkofast {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
}

# Wings in the order a reader meets them, with the one-line heading of each API page.
WINGS = {
    "jko": "JKO-RAG reranking",
    "ot": "Optimal transport",
    "compat": "Drop-in for the published solver",
    "pools": "Candidate pools, baselines and the retriever registry",
    "sparse": "Sparse first stage (TF-IDF, BM25)",
    "sgr": "SparseGeometricRAG",
    "text": "Text analysis",
    "eval": "Evaluation",
    "datasets": "Datasets",
    "encode": "Embeddings (torch-free encoder)",
    "studies": "Studies",
    "distributed": "Dask",
    "selection": "Operating points",
    "warmups": "Compilation and warm-up",
}
# The command line and the compiled kernels behind the wrappers: not part of the Python API.
INTERNAL = ("cli", "commands", "kernels")


def _public_modules(wing: str) -> list:
    """Return the modules of ``jkofast.<wing>`` that declare ``__all__`` (leaf modules; a plain module alone)."""
    name = f"jkofast.{wing}"
    try:
        pkg = importlib.import_module(name)
    except ImportError as exc:
        print(f"api: skipping {name} ({exc})")
        return []
    if not hasattr(pkg, "__path__"):
        return [pkg]
    out = []
    for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if m.name.startswith("_") or m.ispkg:
            continue
        try:
            mod = importlib.import_module(f"{name}.{m.name}")
        except ImportError as exc:  # an optional extra: the page says which
            print(f"api: skipping {name}.{m.name} ({exc})")
            continue
        if getattr(mod, "__all__", None):
            out.append(mod)
    return out


def _documented(module: str, name: str) -> bool:
    """Whether ``module`` has an API page listing ``name`` (public, outside INTERNAL, in its ``__all__``)."""
    parts = module.split(".")
    if parts[0] != "jkofast" or len(parts) < 2 or parts[1] in INTERNAL:
        return False
    if any(p.startswith("_") for p in parts):
        return False
    return name in getattr(sys.modules.get(module), "__all__", ())


def _split_names(mod) -> tuple[list, list]:
    """``(names defined in mod, [(name, canonical dotted path)] of names it re-exports)``.

    A name is documented once, on the page of the module that defines it; a re-export links there.
    """
    own, alias = [], []
    for n in sorted(x for x in mod.__all__ if not x.startswith("_")):
        obj = getattr(mod, n)
        home = getattr(obj, "__module__", None)
        if home and home != mod.__name__ and _documented(home, n) and hasattr(obj, "__qualname__"):
            alias.append((n, f"{home}.{obj.__qualname__}"))
        else:
            own.append(n)
    return own, alias


def public_names() -> dict[str, list[str]]:
    """Map every module the API reference documents to the public names it defines the API reference documents.

    The same walk as :func:`_write_api_pages`; ``tests/test_docs.py`` checks its pages against it.
    """
    return {mod.__name__: _split_names(mod)[0] for mod in _documented_modules()}


def _documented_modules() -> list:
    """Return the package itself (its shortcuts), then the public modules of every wing, in page order."""
    return [jkofast, *(mod for wing in WINGS for mod in _public_modules(wing))]


def _write_api_pages(srcdir: str) -> list[str]:
    """Write ``api/<wing>.rst`` (one autosummary table per module, one generated page per public name)."""
    here = os.path.join(srcdir, "api")
    os.makedirs(here, exist_ok=True)
    pages = []
    for wing, title in {"package": "The package namespace", **WINGS}.items():
        mods = [jkofast] if wing == "package" else _public_modules(wing)
        if not mods:
            continue
        lines = [title, "=" * len(title), ""]
        for mod in mods:
            head = f"``{mod.__name__}``"
            lines += [head, "-" * len(head), "", f".. automodule:: {mod.__name__}", "   :no-members:", ""]
            lines += [f".. currentmodule:: {mod.__name__}", ""]
            own, alias = _split_names(mod)
            if own:
                lines += [".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
                lines += [f"   {n}" for n in own]
                lines.append("")
            if alias:
                lines += ["Re-exported here:", ""]
                lines += [f"* :py:obj:`{n} <{target}>`" for n, target in alias]
                lines.append("")
        text = "\n".join(lines)
        path = os.path.join(here, f"{wing}.rst")
        if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        pages.append(wing)
    index = ["API reference", "=============", "", "Every public name, by wing, from its docstring.", ""]
    index += [".. toctree::", "   :maxdepth: 1", "", *(f"   {w}" for w in pages), ""]
    with open(os.path.join(here, "index.rst"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(index))
    return [f"api/{w}.rst" for w in pages]


# Written when this file is read, so that autosummary (which scans the listed sources for its stubs) sees them.
autosummary_generate = _write_api_pages(os.path.dirname(os.path.abspath(__file__)))


# ---- docstrings as the API pages show them ------------------------------------------------------------
# Docstrings cite the methods' specification by section ("SPEC A.4.3"), a document the reader never sees:
# on the site each such citation becomes a link to the page of the two methods. A metric name such as
# nDCG@10 outside inline code is escaped so that docutils does not read it as an e-mail address.
_SPEC = re.compile(
    r"\(SPEC ([A-C])\.(\d[\w.]*?)\)"
    r"|SPEC ([A-C])\.(\d[\w.]*\w|\d)(?:[–/-][A-C]?\.?\d[\w.]*\w)*"
    r"|SPEC (?:Part|Appendix) (\w+)"
)
_AT = re.compile(r"(?<![\\\w])(\w+)@(\d+)")
_BORDER = re.compile(r"^\s*(=+( +=+)+|\+[-=+]+\+)\s*$")  # a simple or grid table's border line
_UNDER = re.compile(r"^\s*([=\-~^\"'`#*+])\1{2,}\s*$")  # a section title's underline


def _is_sgr(m: re.Match) -> bool:
    part = m.group(1) or m.group(3) or ""
    section = m.group(2) or m.group(4) or ""
    return part == "B" or (part == "C" and section.startswith("3")) or m.group(5) == "B"


def _reference(m: re.Match) -> str:
    link = ":doc:`SparseGeometricRAG </references>`" if _is_sgr(m) else ":doc:`JKO-RAG </references>`"
    return f"({link})" if m.group(0).startswith("(") else link


def _short(m: re.Match) -> str:
    """Return the method's short name in plain text (no longer than the citation it replaces)."""
    name = "SGR" if _is_sgr(m) else "JKO-RAG"
    return f"({name})" if m.group(0).startswith("(") else name


def _same_width(line: str) -> str:
    """``line`` with its citations shortened; the columns after them are kept where they were.

    The characters saved are given back at the next gap of two or more spaces (a column boundary of
    a simple table); at the end of the line nothing needs giving back.
    """
    m = _SPEC.search(line)
    while m is not None:
        short = _short(m)
        rest = line[m.end() :]
        deficit = len(m.group(0)) - len(short)
        gap = re.search(r"  +", rest)
        if gap is not None and deficit > 0:
            rest = rest[: gap.start()] + " " * deficit + rest[gap.start() :]
        line = line[: m.start()] + short + rest
        m = _SPEC.search(line, m.start() + len(short))
    return re.sub(r"\bSPEC\b", "ref.", line)


def _layout_bound(lines: list[str]) -> set[int]:
    """Return the indices of lines whose width matters: table rows (the block around a border) and titles."""
    bound: set[int] = set()
    for i, line in enumerate(lines):
        if _BORDER.match(line):
            j = i
            while j > 0 and lines[j - 1].strip():
                j -= 1
            k = i
            while k + 1 < len(lines) and lines[k + 1].strip():
                k += 1
            bound.update(range(j, k + 1))
        elif _UNDER.match(line) and i > 0 and lines[i - 1].strip():
            bound.add(i - 1)
    return bound


def plain_docstring_lines(lines: list[str]) -> list[str]:
    """Return ``lines`` with spec citations linked to the methods' page and ``name@k`` escaped (outside code).

    In a table row or a title, whose width matters, a citation becomes the method's short name, padded.
    """
    bound = _layout_bound(lines)
    out = []
    for n, line in enumerate(lines):
        if line.lstrip().startswith((">>>", "...")):  # doctest lines are shown verbatim
            out.append(line)
            continue
        if n in bound:
            out.append(_same_width(line))
            continue
        parts = line.split("``")
        for i in range(0, len(parts), 2):  # even pieces lie outside ``inline literals``
            piece = _SPEC.sub(_reference, parts[i]).replace("the SPEC", "the published code")
            piece = re.sub(r"\bSPEC\b", "published", piece)
            parts[i] = _AT.sub(r"\1\\@\2", piece)
        out.append("``".join(parts))
    return out


def _process_docstring(app, what, name, obj, options, lines) -> None:
    lines[:] = plain_docstring_lines(lines)


def setup(app):
    """Register the docstring filter with Sphinx."""
    app.connect("autodoc-process-docstring", _process_docstring)
