"""No module imports a private name (``_name``) of another wing.

import-linter (``lint-imports``, contracts in pyproject.toml) checks the layers, the cycles and the
private *modules*; it sees modules only, so the private *names* are checked here on the source.
"""

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[1] / "jkofast"


def _wing(module: str) -> str:
    """The wing of a dotted module name: ``jkofast.kernels.X...`` counts with wing X."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "kernels":
        return parts[2]
    return parts[1] if len(parts) > 1 else ""


def _private_imports_across_wings() -> list[str]:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("jkofast.")
            ):
                continue
            if _wing(node.module) == _wing(module):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    bad.append(f"{module}:{node.lineno} imports {node.module}.{alias.name}")
    return bad


def test_no_private_name_is_imported_from_another_wing():
    assert _private_imports_across_wings() == []
