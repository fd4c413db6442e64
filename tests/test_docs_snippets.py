"""Every Python block of README.md and of the documentation pages runs as written.

Each page's ```python blocks run in order in one namespace, in a fresh interpreter whose working
folder is a temporary directory (files a snippet writes land there), on the bundled SciFact data.
A block that is deliberately not runnable (a Dask cluster address, an optional extra, a corpus the
reader supplies) is preceded by the line ``<!-- no-run -->``; those are counted in ``NO_RUN`` so that
marking one more is a visible change.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = "<!-- no-run -->"

# page -> number of blocks marked as not runnable (the reason is stated on the page, beside the block)
NO_RUN = {
    "docs/distributed.md": 1,  # needs a running Dask scheduler
    "docs/dropin.md": 1,  # needs the torch extra
    "docs/tuning.md": 1,  # reads the point file that `jkofast tune` writes
}

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def blocks(page: pathlib.Path) -> list[tuple[int, str, bool]]:
    """``(line, code, runnable)`` of every ```python block of ``page``, in page order."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip().rsplit("\n", 1)[-1].strip()
        out.append((line, m.group(1), before != MARK))
    return out


def _name(page: pathlib.Path) -> str:
    return page.relative_to(ROOT).as_posix()


RUNNABLE = [p for p in PAGES if any(ok for _, _, ok in blocks(p))]

# Runs the blocks of one page (JSON list of [line, code]) in one namespace; names the failing block.
_RUNNER = textwrap.dedent(
    """
    import json, sys, traceback
    ns = {"__name__": "__main__"}
    for line, code in json.load(open(sys.argv[1], encoding="utf-8")):
        try:
            exec(compile(code, f"{sys.argv[2]}:{line}", "exec"), ns)
        except BaseException:
            traceback.print_exc()
            sys.exit(f"the block at {sys.argv[2]}:{line} failed")
    """
)


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_page_blocks_run(page, tmp_path):
    todo = [(line, code) for line, code, ok in blocks(page) if ok]
    src = tmp_path / "blocks.json"
    src.write_text(json.dumps(todo), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["MPLBACKEND"] = "Agg"
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(src), _name(page)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]


def test_marked_blocks_are_the_counted_ones():
    marked = {_name(p): sum(not ok for _, _, ok in blocks(p)) for p in PAGES}
    assert {k: v for k, v in marked.items() if v} == NO_RUN
    n_run = sum(ok for p in PAGES for _, _, ok in blocks(p))
    # README, the landing page and the guide pages hold well over a dozen executed blocks
    assert n_run >= 15, n_run


def test_landing_page_has_an_executed_example():
    runnable = [code for _, code, ok in blocks(ROOT / "docs" / "index.md") if ok]
    assert runnable and any("print(" in code for code in runnable)


def test_shell_and_output_blocks_are_tagged():
    """No untagged fence: a shell block says ``bash``, an output block ``text``."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        opening = False
        for n, line in enumerate(text.splitlines(), 1):
            if line.startswith("```"):
                if not opening:
                    assert line.strip() != "```", f"{_name(page)}:{n}: untagged code block"
                opening = not opening
