"""The token patterns are defined once, in jkofast/text/patterns.py."""

import ast
import pathlib

from jkofast.sgr.retriever import TOKEN_PATTERN
from jkofast.text.patterns import COMPOUND, SKLEARN, WORD, resolve_pattern

PKG = pathlib.Path(__file__).resolve().parents[2] / "jkofast"


def test_no_other_module_spells_a_token_pattern():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "text" / "patterns.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and node.value in (WORD, SKLEARN, COMPOUND)
                and id(node) not in docstrings
            ):
                found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert found == []


def test_aliases_and_the_sgr_name():
    assert TOKEN_PATTERN is SKLEARN
    assert resolve_pattern("word") == resolve_pattern(r"\w+") == WORD
    assert resolve_pattern("sklearn") == resolve_pattern(r"\b\w\w+\b") == SKLEARN
    assert resolve_pattern(r"[a-z]+") == r"[a-z]+"
