"""Architecture figures of a jkofast tree: modules, import arrows, the longest kernels.

    python benchmarks/tools/arch_report.py [ROOT] [--top 5]

Counts the ``.py`` modules under ``ROOT/jkofast`` (``__init__`` included), the distinct
module-to-module import arrows between them (``import jkofast.x`` / ``from jkofast.x import y``,
where ``y`` may itself be a module), whether any arrow goes from a wing to a wing above it,
and the longest Numba kernels (functions decorated with ``@kernel(...)``): lines and parameters.
"""

from __future__ import annotations

import argparse
import ast
import os

# wings from the bottom up; a wing (and its kernels) may import only wings below it (and the infrastructure)
ORDER = ["ot", "eval", "datasets", "encode", "sgr", "sparse", "pools", "jko", "studies", "distributed", "commands"]


def modules(root: str) -> dict[str, str]:
    """Map dotted module name -> file path for every module of the package under ``root``."""
    out = {}
    base = os.path.join(root, "jkofast")
    for d, _, files in os.walk(base):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), root)[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__")] = os.path.join(d, f)
    return out


def arrows(mods: dict[str, str]) -> set[tuple[str, str]]:
    """Distinct (importer, imported) module pairs inside the package."""
    edges = set()
    for name, path in mods.items():
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module for a in node.names
                ]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name and t.startswith("jkofast"):
                    edges.add((name, t))
    return edges


def wing(mod: str) -> str | None:
    """The wing of a module; ``jkofast.kernels.X...`` belongs to wing X (``None``: infrastructure, shared leaves)."""
    parts = mod.split(".")
    if len(parts) > 2 and parts[1] == "kernels":
        parts = parts[1:]
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else None


def kernels(mods: dict[str, str]) -> list[tuple[int, int, str]]:
    """(lines, parameters, name) of every ``@kernel``-decorated function."""
    out = []
    for name, path in mods.items():
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                (isinstance(d, ast.Call) and getattr(d.func, "id", "") == "kernel") or getattr(d, "id", "") == "kernel"
                for d in node.decorator_list
            ):
                n_par = len(node.args.args) + len(node.args.kwonlyargs)
                out.append((node.end_lineno - node.lineno + 1, n_par, f"{name}:{node.name}"))
    return sorted(out, reverse=True)


def main() -> None:
    """Print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--top", type=int, default=5)
    a = ap.parse_args()
    mods = modules(a.root)
    edges = arrows(mods)
    up = [
        (s, t)
        for s, t in edges
        if wing(s) in ORDER and wing(t) in ORDER and ORDER.index(wing(t)) > ORDER.index(wing(s))
    ]
    ks = kernels(mods)
    print(f"modules: {len(mods)}  import arrows: {len(edges)}  upward wing arrows: {len(up)}")
    for s, t in sorted(up):
        print(f"  upward: {s} -> {t}")
    print(
        f"kernels: {len(ks)}; above 80 lines: {sum(k[0] > 80 for k in ks)}; above 15 parameters: "
        f"{sum(k[1] > 15 for k in ks)}"
    )
    print(f"longest {a.top}:")
    for n_lines, n_par, name in ks[: a.top]:
        print(f"  {n_lines:5d} lines  {n_par:3d} params  {name}")
    print(f"most parameters {a.top}:")
    for n_lines, n_par, name in sorted(ks, key=lambda k: (-k[1], -k[0]))[: a.top]:
        print(f"  {n_par:3d} params  {n_lines:5d} lines  {name}")


if __name__ == "__main__":
    main()
