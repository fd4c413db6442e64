"""User pages carry no development talk: no spec section numbers, commit hashes, machine paths, load
averages, "wave"/"wing"/"goal" talk. Developer pages (develop, performance, instruction counts, the changelog) may.

The API pages are written from docstrings, which do cite the specification; ``docs/conf.py`` turns each
citation into a link to the methods' page as the site is built (checked here on every public docstring).
"""

from __future__ import annotations

import importlib.util
import inspect
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GALLERY = ROOT / "examples" / "gallery"  # each script becomes a page of the site


def _load(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


site_checks = _load("_jkofast_site_checks", DOCS / "site_checks.py")  # the patterns, shared with the HTML check
DEVELOPER = site_checks.DEVELOPER
USER_PAGES = [
    ROOT / "README.md",
    *(p for p in sorted([*DOCS.glob("*.md"), *DOCS.glob("studies/*.md")]) if p.name not in DEVELOPER),
    *sorted([*GALLERY.glob("*.py"), *GALLERY.glob("*.rst")]),
]


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_user_page_has_no_development_talk(page):
    found = site_checks.findings(page.read_text(encoding="utf-8"), page.name)
    assert not found, "\n".join(found)


def test_there_are_user_and_developer_pages():
    assert len(USER_PAGES) > 15
    assert all((DOCS / p).exists() for p in DEVELOPER)


@pytest.fixture(scope="module")
def conf():
    return _load("_jkofast_docs_conf_user", DOCS / "conf.py")


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


def _site(tmp_path, pages):
    for name, body in pages.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body, encoding="utf-8")
    return tmp_path


PAGE = (
    "<html><head><script>var v = '3f2a9c1b7';</script></head><body><nav>{nav}</nav>"
    "<article><section><p>{body}</p><pre>{pre}</pre></section></article></body></html>"
)


def test_built_site_check_reads_the_article_not_navigation_or_scripts(tmp_path):
    site = _site(
        tmp_path,
        {
            "index.html": PAGE.format(nav="load average 3", body="A clean page.", pre="x = 1"),
            "guide.html": PAGE.format(nav="", body="See SPEC A.4.", pre="saved to /tmp/run/out.trec"),
            "gallery/plot_x.html": PAGE.format(nav="", body="measured at a0b1c2d3e4", pre=""),
            "performance.html": PAGE.format(nav="", body="load 1.5 on SPEC A.4", pre=""),
            "_static/x.html": PAGE.format(nav="", body="SPEC", pre=""),
            "genindex.html": PAGE.format(nav="", body="SPEC", pre=""),
        },
    )
    n, found = site_checks.check_site(site)
    assert n == 3  # index, guide, the gallery page; not the developer page, sphinx's own or _static
    assert sorted(f.split(": ")[1] for f in found) == ["commit hash", "machine path", "spec section"]
    assert all(f.startswith(("guide.html:", "gallery/plot_x.html:")) for f in found)


def test_bare_section_numbers_and_a_load_across_a_line_break_are_found():
    text = "routing (B.6) and the A.7.9 protocol\n22 s at load\n11-12; SPEC A.4 once; v0.59 and 0.9999 are fine"
    kinds = [f.split(": ")[1] for f in site_checks.findings(text, "x.md")]
    assert sorted(kinds) == ["load average", "spec section", "spec section", "spec section"]


def test_machine_load_in_words_is_found():
    text = "9.3 µs (11 µs on a loaded machine); on this loaded VM; 44 s on a busy machine; `--quick`: 16 s loaded"
    kinds = [f.split(": ")[1] for f in site_checks.findings(text, "x.md")]
    assert kinds == ["load average"] * 4
    assert site_checks.findings("No cross-encoder is loaded; the kernels loaded from the cache", "x.md") == []


def test_built_site_check_command_exit_status(tmp_path, capsys):
    clean = _site(tmp_path / "a", {"index.html": PAGE.format(nav="", body="ok", pre="")})
    dirty = _site(tmp_path / "b", {"index.html": PAGE.format(nav="", body="the first wave", pre="")})
    assert site_checks.main([str(clean)]) == 0
    assert site_checks.main([str(dirty)]) == 1
    assert "development talk: 'wave'" in capsys.readouterr().out
    assert site_checks.main([str(tmp_path / "none")]) == 2
