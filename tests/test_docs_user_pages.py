"""User pages carry no development talk: no spec section numbers, commit hashes, machine paths, load
averages, "wave"/"wing"/"goal" talk. Developer pages (develop, performance, instruction counts, the changelog) may.

The API pages are written from docstrings, which do cite the specification; ``docs/conf.py`` turns each
citation into a link to the methods' page as the site is built (checked here on every public docstring).
"""

from __future__ import annotations

import importlib.util
import inspect
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DEVELOPER = {"develop.md", "performance.md", "instruction_counts.md", "changelog.md"}
GALLERY = ROOT / "examples" / "gallery"  # each script becomes a page of the site
USER_PAGES = [
    ROOT / "README.md",
    *(p for p in sorted([*DOCS.glob("*.md"), *DOCS.glob("studies/*.md")]) if p.name not in DEVELOPER),
    *sorted([*GALLERY.glob("*.py"), *GALLERY.glob("*.rst")]),
]

PATTERNS = {
    "spec section": r"\bSPEC\b",
    "commit hash": r"(?<![\w\"])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b(?![\"\w])",
    "machine path": r"(?<![\w.~/])/(?:home|work|tmp|root|mnt|opt|data)/",
    "load average": r"load average|\bload [~≈]?\d",
    "development talk": r"\bwaves?\b|\bwings?\b|\bgoal\b",
}
# the Benchmarks page and the README's results say which machine measured them
MACHINE_OK = {"benchmarks.md", "README.md"}


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_user_page_has_no_development_talk(page):
    text = page.read_text(encoding="utf-8")
    found = []
    for what, pat in PATTERNS.items():
        for m in re.finditer(pat, text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{page.name}:{line}: {what}: {m.group(0)!r}")
    assert not found, "\n".join(found)


def test_there_are_user_and_developer_pages():
    assert len(USER_PAGES) > 15
    assert all((DOCS / p).exists() for p in DEVELOPER)


@pytest.fixture(scope="module")
def conf():
    spec = importlib.util.spec_from_file_location("_jkofast_docs_conf_user", DOCS / "conf.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_spec_citations_become_links_and_metric_names_are_not_addresses(conf):
    lines = [
        "Published construction (SPEC A.2.6); see SPEC B.9 and ``SPEC A.1`` in code.",
        "nDCG@10 and p@5",
        ">>> evaluate(run, qrels, ['ndcg@10'])",
    ]
    out = conf.plain_docstring_lines(lines)
    assert out[0] == (
        "Published construction (:doc:`JKO-RAG </references>`); see :doc:`SparseGeometricRAG </references>` "
        "and ``SPEC A.1`` in code."
    )
    assert out[1] == "nDCG\\@10 and p\\@5"
    assert out[2] == lines[2]


def test_no_public_docstring_keeps_a_spec_citation_on_the_site(conf):
    for module, names in conf.api_pages.public_names().items():
        mod = __import__(module, fromlist=["_"])
        for n in names:
            doc = inspect.getdoc(getattr(mod, n)) or ""
            shown = "\n".join(conf.plain_docstring_lines(doc.splitlines()))
            outside = "".join(shown.split("``")[0::2])
            assert "SPEC" not in outside.replace(">>>", ""), f"{module}.{n}"
