"""Sphinx configuration of the jkofast documentation site.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (``pip install -e ".[docs]"``).
The guides are Markdown (MyST); the API reference is generated at build time from the docstrings of
every public name (each wing's face, its ``__all__``) by ``docs/api_pages.py``.
"""

from __future__ import annotations

import os
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
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "studies/*.json", "README.md"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
# The included CHANGELOG.md starts its sections at level 2.
suppress_warnings = ["myst.header"]

autosummary_imported_members = False
autodoc_default_options: dict = {}
autodoc_mock_imports = ["torch"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

html_theme = "pydata_sphinx_theme"
html_title = f"jkofast {release}"
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2}

# The API reference (one page per wing, exactly the names of its face) is written by docs/api_pages.py
# when this file is read, so that autosummary sees the pages.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import api_pages  # noqa: E402

api_pages.write_api_pages(os.path.dirname(os.path.abspath(__file__)))
