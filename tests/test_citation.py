"""``CITATION.cff`` and the landing page's "How to cite" BibTeX say the same: title, version, authors, years."""

from __future__ import annotations

import pathlib
import re

import yaml  # PyYAML, a dependency of pre-commit (the test extra)

import jkofast

ROOT = pathlib.Path(__file__).resolve().parents[1]


def bibtex_entries() -> dict[str, str]:
    """``{key: body}`` of every entry in the landing page's ```bibtex block."""
    page = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    block = re.search(r"^```bibtex\n(.*?)^```", page, re.S | re.M).group(1)
    return {m.group(1): m.group(2) for m in re.finditer(r"^@\w+\{(\w+),\n(.*?)^\}", block, re.S | re.M)}


def field(body: str, name: str) -> str:
    m = re.search(rf"^\s*{name}\s*=\s*\{{(.*)\}},?$", body, re.M)
    assert m, name
    return m.group(1)


def test_citation_file_matches_the_landing_page():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["version"] == jkofast.__version__
    bib = bibtex_entries()
    assert set(bib) == {"jkofast", "jkorag", "sparsegeometricrag"}
    assert field(bib["jkofast"], "title") == cff["title"]
    assert field(bib["jkofast"], "version") == jkofast.__version__
    refs = {"jkorag": cff["references"][0], "sparsegeometricrag": cff["references"][1]}
    for key, ref in refs.items():
        names = [f"{a['family-names']}, {a['given-names']}" for a in ref["authors"]]
        assert field(bib[key], "author") == " and ".join(names), key
        assert field(bib[key], "year") == str(ref["year"]), key
        assert ref["repository-code"] in bib[key], key
