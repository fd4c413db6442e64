"""The ``Examples`` sections of the docstrings run and print what they show (doctest, one test per module).

Every module of the package is searched, the kernels included; a module whose optional extra is not
installed (torch, dask, tokenizers) is skipped with the extra named, never a module that fails for
another reason.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import jkofast

# optional packages -> the extra that installs them (a module needing one is skipped, naming the install)
OPTIONAL = {
    "torch": "torch",
    "dask": "distributed",
    "distributed": "distributed",
    "tokenizers": "encode",
    "safetensors": "encode",
    "matplotlib": "plot",
}


def _modules() -> list[str]:
    names = []
    for m in pkgutil.walk_packages(jkofast.__path__, "jkofast."):
        if m.name.endswith("__main__"):
            continue
        names.append(m.name)
    return sorted(names)


def _with_examples(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return False
    with open(spec.origin, encoding="utf-8") as fh:
        return ">>> " in fh.read()


MODULES = [n for n in _modules() if _with_examples(n)]


def test_there_are_docstring_examples():
    assert len(MODULES) >= 20, MODULES


def _missing_extra(name: str) -> tuple[str, str] | None:
    """(package, extra) of an optional package that the module imports at its top level and that is absent."""
    with open(importlib.util.find_spec(name).origin, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    for node in tree.body:
        if isinstance(node, ast.Import):
            tops = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = [node.module.split(".")[0]]
        else:
            continue
        for top in tops:
            if top in OPTIONAL and importlib.util.find_spec(top) is None:
                return top, OPTIONAL[top]
    return None


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    missing = _missing_extra(name)
    if missing is not None:  # decided before the import: any ImportError of the import itself is a failure
        pytest.skip(f"{name} needs {missing[0]}: pip install 'jkofast[{missing[1]}]'")
    mod = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(mod, name) if t.examples]
    assert tests, f"{name}: '>>> ' in the source but no docstring example found"
    for t in tests:
        runner.run(t)
    res = runner.summarize(verbose=False)
    assert res.failed == 0, f"{name}: {res.failed} of {res.attempted} docstring examples failed (see above)"
