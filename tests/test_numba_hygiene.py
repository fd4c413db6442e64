"""Nothing compiles at import; every kernel comes from jkofast._numba.kernel; no fastmath=True."""

import ast
import pathlib
import subprocess
import sys

KDIR = pathlib.Path(__file__).resolve().parents[1] / "jkofast" / "kernels"


def test_import_compiles_nothing():
    code = (
        "import importlib, pkgutil, jkofast.kernels as K\n"
        "from jkofast._numba import REGISTRY\n"
        "for m in pkgutil.iter_modules(K.__path__): importlib.import_module('jkofast.kernels.'+m.name)\n"
        "import jkofast.warmup as w; w._import_wrappers()\n"
        "bad=[n for n,d in REGISTRY.items() if d.signatures]\n"
        "assert len(REGISTRY) > 0\n"
        "assert not bad, bad\n"
        "print(len(REGISTRY))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_kernels_use_the_project_decorator():
    for path in KDIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in {"njit", "jit", "vectorize", "guvectorize"}:
                raise AssertionError(f"{path.name}: use jkofast._numba.kernel, not {node.id}")
            if isinstance(node, ast.keyword) and node.arg == "fastmath":
                v = node.value
                assert not (isinstance(v, ast.Constant) and v.value is True), f"{path.name}: fastmath=True"


def test_jkofast_warmup_can_be_called_twice():
    # importing the submodule jkofast.warmup rebinds the package attribute to the module: the
    # README's `jkofast.warmup()` raised "'module' object is not callable" on the second access
    code = (
        "import jkofast\n"
        "from jkofast.jko.solver import run_jko\n"
        "a = jkofast.warmup()\n"
        "b = jkofast.warmup()\n"
        "assert callable(jkofast.warmup) and set(a) == set(b) and 'jko' in a\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
