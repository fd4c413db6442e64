"""Sphinx configuration of the jkofast documentation site.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (``pip install -e ".[docs]"``).
The guides are Markdown (MyST); the API reference is generated at build time from the docstrings of
every public name (each wing's face, its ``__all__``) by ``docs/api_pages.py``; the gallery pages
(``docs/gallery/``) are written by sphinx-gallery, which runs every ``examples/gallery/plot_*.py``
(a failing script fails the build) and keeps its printed output and figures.
"""

from __future__ import annotations

import os
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
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "studies/*.json", "README.md", "gallery/index.rst"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
# The included CHANGELOG.md starts its sections at level 2.
suppress_warnings = ["myst.header"]

autosummary_imported_members = False
autodoc_default_options: dict = {}
autodoc_mock_imports = ["torch"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

# The gallery: each script of examples/gallery runs as the site is built (figures drawn off screen);
# the Examples page (examples.md) shows their thumbnails and links to the pages written here.
os.environ.setdefault("MPLBACKEND", "Agg")
sphinx_gallery_conf = {
    "examples_dirs": "../examples/gallery",
    "gallery_dirs": "gallery",
    "filename_pattern": r"plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "write_computation_times": False,
    "show_signature": False,
    "reset_modules": ("matplotlib",),
    "image_scrapers": ("matplotlib",),
}

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

# The API reference (one page per wing, exactly the names of its face) is written by docs/api_pages.py
# when this file is read, so that autosummary sees the pages.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import api_pages  # noqa: E402

api_pages.write_api_pages(os.path.dirname(os.path.abspath(__file__)))


# ---- docstrings as the API pages show them ------------------------------------------------------------
# Docstrings cite the methods' specification by section ("SPEC A.4.3"), a document the reader never sees:
# on the site each such citation becomes a link to the page of the two methods. A metric name such as
# nDCG@10 outside inline code is escaped so that docutils does not read it as an e-mail address.
_SPEC = re.compile(
    r"\(SPEC ([A-C])\.(\d[\w.]*?)\)"
    r"|SPEC ([A-C])\.(\d[\w.]*\w|\d)(?:[–/-][A-C]?\.?\d(?:[\w.]*\w)?)*"
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
