"""Architecture figures of a jkofast tree: modules, import arrows, circles, the longest modules and functions.

    python benchmarks/tools/arch_report.py [ROOT] [--top 5] [--json]

Counts the ``.py`` modules under ``ROOT/jkofast`` (``__init__`` included), the distinct
module-to-module import arrows between them (``import jkofast.x`` / ``from jkofast.x import y``,
where ``y`` may itself be a module; imports inside functions included), the import statements of
jkofast modules made inside a function, the import circles (strongly connected groups of modules,
function-level imports counted), arrows from a wing to a wing above it, the longest modules and
functions outside ``kernels/``, and the longest Numba kernels (``@kernel(...)``): lines and
parameters.  The figures only describe a tree: the layers are enforced by ``lint-imports`` (the
import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys

# wings from the bottom up (the layers contract of pyproject.toml); kernels.X counts with wing X
ORDER = [
    "text", "ot", "eval", "datasets", "encode", "sparse", "sgr", "pools", "jko", "studies", "distributed", "commands",
]  # fmt: skip


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


def _in_function(node: ast.AST, parents: dict) -> bool:
    """Whether ``node`` sits inside a function body."""
    p = parents.get(node)
    while p is not None:
        if isinstance(p, ast.FunctionDef | ast.AsyncFunctionDef):
            return True
        p = parents.get(p)
    return False


def arrows(mods: dict[str, str]) -> tuple[set[tuple[str, str]], list[tuple[str, str]]]:
    """Distinct (importer, imported) module pairs inside the package, and the function-level imports.

    The second list has one ``(importer, imported)`` entry per import statement of a jkofast module
    made inside a function.
    """
    edges = set()
    local = []
    for name, path in mods.items():
        tree = ast.parse(open(path, encoding="utf-8").read())
        parents = {ch: node for node in ast.walk(tree) for ch in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module for a in node.names
                ]
            found = []
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name and t.startswith("jkofast"):
                    edges.add((name, t))
                    found.append(t)
            if found and _in_function(node, parents):
                local.append((name, found[0]))
    return edges, local


def circles(mods: dict[str, str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (Tarjan's SCC, size > 1)."""
    adj: dict[str, list[str]] = {m: [] for m in mods}
    for a, b in edges:
        adj[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(adj):
        if v not in index:
            visit(v)
    return sorted(out)


def sizes(mods: dict[str, str]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(lines, module) of every module and (lines, module:function) of every function, outside ``kernels/``."""
    mod_lines, funcs = [], []
    for name, path in mods.items():
        if ".kernels" in name:
            continue
        src = open(path, encoding="utf-8").read()
        mod_lines.append((src.count("\n"), name))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                funcs.append((node.end_lineno - node.lineno + 1, f"{name}:{node.name}"))
    return sorted(mod_lines, reverse=True), sorted(funcs, reverse=True)


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
    """Print the figures (``--json``: as one JSON object)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args()
    mods = modules(a.root)
    edges, local = arrows(mods)
    up = sorted(
        (s, t)
        for s, t in edges
        if wing(s) in ORDER and wing(t) in ORDER and ORDER.index(wing(t)) > ORDER.index(wing(s))
    )
    loops = circles(mods, edges)
    mod_lines, funcs = sizes(mods)
    ks = kernels(mods)
    if a.json:
        out = {
            "modules": len(mods),
            "import_arrows": len(edges),
            "circles": loops,
            "function_level_imports": len(local),
            "files_with_function_level_imports": len({s for s, _ in local}),
            "upward_wing_arrows": up,
            "longest_modules_outside_kernels": mod_lines[: a.top],
            "modules_over_900_lines_outside_kernels": sorted(m for n, m in mod_lines if n > 900),
            "longest_functions_outside_kernels": funcs[: a.top],
            "kernels": len(ks),
            "longest_kernels": ks[: a.top],
        }
        print(json.dumps(out, indent=1))
        return
    print(f"modules: {len(mods)}  import arrows: {len(edges)}  upward wing arrows: {len(up)}  circles: {len(loops)}")
    for s, t in up:
        print(f"  upward: {s} -> {t}")
    for loop in loops:
        print(f"  circle: {' <-> '.join(loop)}")
    print(f"function-level imports of jkofast modules: {len(local)} in {len({s for s, _ in local})} files")
    print(f"longest {a.top} modules outside kernels/:")
    for n_lines, name in mod_lines[: a.top]:
        print(f"  {n_lines:5d} lines  {name}")
    print(f"longest {a.top} functions outside kernels/:")
    for n_lines, name in funcs[: a.top]:
        print(f"  {n_lines:5d} lines  {name}")
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
