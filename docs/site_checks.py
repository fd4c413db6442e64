"""What a user page of the site may not say, checked on the sources and on the built HTML.

User pages carry no development talk: no specification section numbers, commit hashes, machine
paths, load averages, "wave"/"wing"/"goal" talk. Developer pages (develop, performance, instruction
counts, the changelog) may. ``tests/test_docs_user_pages.py`` checks the sources (Markdown pages,
gallery scripts, public docstrings); the HTML check reads the built site, where the API pages,
the gallery's captured output and anything a directive inserted are seen as the reader sees them:

    python3 docs/site_checks.py BUILD/html     # exit 1 listing each finding, 0 when clean
"""

from __future__ import annotations

import html.parser
import pathlib
import re
import sys

DEVELOPER = {"develop.md", "performance.md", "instruction_counts.md", "changelog.md"}
PATTERNS = {
    # "SPEC A.4" (one finding), or a bare section number "B.6", "A.7.9"
    "spec section": r"\bSPEC\b(?:\s+[AB]\.\d+(?:\.\d+)*\b)?|(?<![\w.])[AB]\.\d+(?:\.\d+)*\b",
    "commit hash": r"(?<![\w\"])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b(?![\"\w])",
    "machine path": r"(?<![\w.~/])/(?:home|work|tmp|root|mnt|opt|data)/",
    "load average": r"load average|\bload\s+[~≈]?\s?\d|\bloaded\s+(?:machine|VM)\b|\bbusy\s+machine\b|\bs\s+loaded\b",
    "development talk": r"\bwaves?\b|\bwings?\b|\bgoal\b",
}
# pages sphinx writes itself (index of names, search page): no prose of ours
GENERATED = {"genindex.html", "search.html", "py-modindex.html"}


def findings(text: str, name: str) -> list[str]:
    """Return ``name:line: what: match`` for every pattern found in ``text``."""
    found = []
    for what, pat in PATTERNS.items():
        for m in re.finditer(pat, text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{name}:{line}: {what}: {m.group(0)!r}")
    return found


class _Text(html.parser.HTMLParser):
    """The text a reader sees in a page's main article (no navigation, scripts or attributes)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._skip = 0
        self._in_article = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "article" or (self._in_article and tag in ("div", "section")):
            self._in_article += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif self._in_article and tag in ("article", "div", "section"):
            self._in_article -= 1

    def handle_data(self, data):
        if self._in_article and not self._skip:
            self.parts.append(data)


def page_text(html_text: str) -> str:
    """Return the visible text of a built page's article."""
    parser = _Text()
    parser.feed(html_text)
    return "".join(parser.parts)


def user_html_pages(site: pathlib.Path) -> list[pathlib.Path]:
    """Return the built user pages: every HTML page but the developer pages and sphinx's own."""
    developer = {n.replace(".md", ".html") for n in DEVELOPER}
    pages = []
    for p in sorted(site.rglob("*.html")):
        rel = p.relative_to(site)
        if rel.parts[0].startswith("_") or p.name in GENERATED:
            continue
        if len(rel.parts) == 1 and p.name in developer:
            continue
        pages.append(p)
    return pages


def check_site(site: pathlib.Path) -> tuple[int, list[str]]:
    """Check every built user page; return (pages read, findings)."""
    pages = user_html_pages(site)
    found = []
    for p in pages:
        found += findings(page_text(p.read_text(encoding="utf-8")), p.relative_to(site).as_posix())
    return len(pages), found


def main(argv: list[str]) -> int:
    """Check the site built in ``argv[0]``; print each finding; return the exit status."""
    if len(argv) != 1 or not pathlib.Path(argv[0], "index.html").is_file():
        print("usage: python3 docs/site_checks.py BUILD/html   (a built site: BUILD/html/index.html)", file=sys.stderr)
        return 2
    n, found = check_site(pathlib.Path(argv[0]))
    for f in found:
        print(f)
    print(f"site checks: {n} user pages read, {len(found)} findings")
    return 1 if found or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
