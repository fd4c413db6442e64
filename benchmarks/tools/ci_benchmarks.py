"""Which asv suites CI's smoke run executes: a stated rotation plus every suite the last commit touched.

    python benchmarks/tools/ci_benchmarks.py            # prints an ``asv run --bench`` regex
    python benchmarks/tools/ci_benchmarks.py --explain  # and, on stderr, why each suite was picked

Every CI run checks that *all* suites import and are discovered (``asv check``); running them all
once in the fast profile costs minutes, so each run executes a third of them:

* the rotation: the suites ``benchmarks/bench_*.py`` sorted by name, suite ``i`` in group ``i % 3``;
  a commit runs group ``N % 3`` where ``N = git rev-list --count HEAD`` — three consecutive commits
  run every suite once;
* plus every suite whose file the last commit (``HEAD~1..HEAD``) changed;
* every suite when the last commit changed what they all share (``benchmarks/common.py``,
  ``benchmarks/__init__.py``, ``asv.conf.json``), when git cannot tell (no history), or when
  ``JKOFAST_CI_BENCH=all``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GROUPS = 3
SHARED = ("benchmarks/common.py", "benchmarks/__init__.py", "asv.conf.json")


def suites(root: str = ROOT) -> list[str]:
    """The asv suites (module names ``bench_*``) in ``root/benchmarks``, sorted."""
    names = os.listdir(os.path.join(root, "benchmarks"))
    return sorted(n[:-3] for n in names if n.startswith("bench_") and n.endswith(".py"))


def select(all_suites: list[str], n_commits: int | None, changed: list[str] | None) -> dict[str, str]:
    """Return ``{suite: reason}`` for the suites to run.

    ``n_commits``: commits reachable from HEAD (None: unknown); ``changed``: repository paths the
    last commit changed (None: unknown).  Either unknown runs everything.
    """
    if n_commits is None or changed is None:
        return {s: "git history unavailable" for s in all_suites}
    if any(p in SHARED for p in changed):
        return {s: "shared benchmark code changed" for s in all_suites}
    group = n_commits % GROUPS
    picked = {s: f"rotation group {group}" for i, s in enumerate(all_suites) if i % GROUPS == group}
    for p in changed:
        name = os.path.basename(p)[:-3] if p.startswith("benchmarks/") and p.endswith(".py") else None
        if name in all_suites:
            picked.setdefault(name, "changed by the last commit")
    return dict(sorted(picked.items()))


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout


def regex(picked) -> str:
    """An ``asv run --bench`` regular expression matching exactly the ``picked`` suites."""
    return "^(" + "|".join(sorted(picked)) + r")\."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--explain", action="store_true", help="print each chosen suite and why on stderr")
    args = ap.parse_args(argv)
    all_suites = suites()
    if os.environ.get("JKOFAST_CI_BENCH", "") == "all":
        picked = {s: "JKOFAST_CI_BENCH=all" for s in all_suites}
    else:
        count = _git("rev-list", "--count", "HEAD")
        diff = _git("diff", "--name-only", "HEAD~1", "HEAD")
        n = int(count) if count and count.strip().isdigit() else None
        picked = select(all_suites, n, diff.split() if diff is not None else None)
    if args.explain:
        for s, why in picked.items():
            print(f"asv suite {s}: {why}", file=sys.stderr)
        print(f"asv suites: {len(picked)} of {len(all_suites)} run, all {len(all_suites)} checked", file=sys.stderr)
    print(regex(picked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
