"""Nothing compiles at import; every kernel comes from jkofast._numba.kernel; no fastmath=True; a cached
kernel loads without Numba's whole context refresh, yet with every symbol it adds."""

import ast
import pathlib
import subprocess
import sys

import pytest

from jkofast import _config, _numba

KDIR = pathlib.Path(__file__).resolve().parents[1] / "jkofast" / "kernels"

# imports every kernel module, wing sub-packages included (walk_packages recurses into them)
IMPORT_KERNELS = (
    "import importlib, pkgutil, jkofast.kernels as K\n"
    "from jkofast._numba import REGISTRY\n"
    "names = [m.name for m in pkgutil.walk_packages(K.__path__, 'jkofast.kernels.')]\n"
    "assert any(n.count('.') >= 3 for n in names), names  # the wing sub-packages were walked\n"
    "mods = [importlib.import_module(n) for n in names]\n"
)


def _ok_in_fresh_interpreter(code: str) -> None:
    """Run ``code`` in a new interpreter (nothing imported or compiled yet); it must exit 0."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_kernel_tree_has_the_wing_subpackages():
    # the walks below must reach the kernels of every wing, not only kernels/*.py
    subs = {p.parent.name for p in KDIR.rglob("__init__.py") if p.parent != KDIR}
    assert {"ot", "jko", "sparse", "sgr", "eval"} <= subs, subs


def test_import_compiles_nothing():
    _ok_in_fresh_interpreter(
        IMPORT_KERNELS + "import jkofast.warmups as w; w._import_wrappers()\n"
        "bad=[n for n,d in REGISTRY.items() if d.signatures]\n"
        "assert len(REGISTRY) > 0\n"
        "assert not bad, bad\n"
        "assert any(n.startswith('jkofast.kernels.sgr.') for n in REGISTRY)\n"
    )


def test_every_dispatcher_comes_from_the_registry():
    # a dispatcher made by numba.njit directly (aliased, so the AST walk below misses it) is not
    # in REGISTRY: no project cache switch, no warm-up accounting
    _ok_in_fresh_interpreter(
        IMPORT_KERNELS + "from numba.core.registry import CPUDispatcher\n"
        "known = {id(d) for d in REGISTRY.values()}\n"
        "stray = [f'{m.__name__}.{k}' for m in mods for k, v in vars(m).items()\n"
        "         if isinstance(v, CPUDispatcher) and v.py_func.__module__ == m.__name__ and id(v) not in known]\n"
        "assert len(known) > 50 and not stray, stray\n"
        # and every one is built without Numba's C-callable (first-class function) wrapper
        "assert all(d.targetoptions.get('no_cfunc_wrapper') for d in REGISTRY.values())\n"
    )


def test_kernels_use_the_project_decorator():
    paths = sorted(KDIR.rglob("*.py"))
    assert any(p.parent != KDIR for p in paths)  # sub-packages included
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in {"njit", "jit", "vectorize", "guvectorize"}:
                raise AssertionError(f"{path.name}: use jkofast._numba.kernel, not {node.id}")
            if isinstance(node, ast.keyword) and node.arg == "fastmath":
                v = node.value
                assert not (isinstance(v, ast.Constant) and v.value is True), f"{path.name}: fastmath=True"


def test_jkofast_warmup_can_be_called_twice():
    # the README's `jkofast.warmup()` must work on every access: the package attribute is the
    # function, and importing the module that defines it (jkofast.warmups) does not rebind it
    _ok_in_fresh_interpreter(
        "import jkofast\n"
        "from jkofast.jko.solver import run_jko\n"
        "a = jkofast.warmup()\n"
        "import jkofast.warmups\n"
        "b = jkofast.warmup()\n"
        "assert callable(jkofast.warmup) and set(a) == set(b) and 'jko' in a\n"
    )


def test_warmup_reaches_every_wing():
    # the wrappers live in wing sub-packages: a warm-up that imported only top-level modules ran
    # the top-k warm-up alone and left every other kernel to compile inside the user's first call
    _ok_in_fresh_interpreter(
        "import jkofast.warmups as w\n"
        "from jkofast._numba import WARMUPS\n"
        "w._import_wrappers()\n"
        "need = {'topk', 'index', 'text', 'evaluation', 'sinkhorn', 'jko', 'sgr'}\n"
        "assert need <= set(WARMUPS), sorted(WARMUPS)\n"
    )


def test_no_kernel_is_specialised_on_an_integer_constant():
    # a counter started at a bare 0 (or a constant argument) reaches its callee as Literal[int]: Numba
    # compiles that specialisation beside the int64 one (docs/develop.md, compile-time rule 5). After the
    # whole warm-up no kernel may hold one, except the eval sorts' ``mode``, a flag compiled once per mode.
    _ok_in_fresh_interpreter(
        "import jkofast\n"
        "from numba.core import types\n"
        "from jkofast._numba import REGISTRY\n"
        "jkofast.warmup(features='all')\n"
        "modes = {'jkofast.kernels.eval.metrics._before', 'jkofast.kernels.eval.metrics._merge_sort'}\n"
        "bad = sorted(f'{k}{tuple(map(str, sig))}' for k, d in REGISTRY.items() if k not in modes\n"
        "             for sig in d.signatures if any(isinstance(a, types.IntegerLiteral) for a in sig))\n"
        "assert not bad, bad\n"
    )


def test_kernels_sort_and_select_with_kernels_sorting():
    # the kernels sort integer ids with kernels.sorting.sort_range, select with select_kth, argsort with
    # argsort_stable, take medians with median and binary-search with searchsorted_left: Numba's np.sort /
    # ndarray.sort, np.argsort, np.median and np.searchsorted compile generic functions per dtype and
    # calling option set, and np.partition a sort for its kth check (docs/develop.md, compile-time rule
    # 10). A float sort, where NaN order matters, would need its own case here.
    found = []
    for path in sorted(KDIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            f = node.func if isinstance(node, ast.Call) else None
            if isinstance(f, ast.Attribute) and f.attr in ("sort", "partition", "argsort", "median", "searchsorted"):
                found.append(f"{path.relative_to(KDIR)}:{node.lineno}")
    assert not found, found


def test_numba_internals_hooks_are_version_guarded():
    # the cache hooks reach into numba.core.caching: outside the versions they were written for,
    # jkofast warns and leaves caching to Numba
    import pytest

    from jkofast import _numba

    lo, hi = _numba.NUMBA_HOOKS_TESTED
    assert _numba._hooks_supported(f"{lo[0]}.{lo[1]}.0") and _numba._hooks_supported(f"{hi[0]}.{hi[1]}.9")
    with pytest.warns(RuntimeWarning, match="outside the versions its cache hooks were written for"):
        assert not _numba._hooks_supported(f"{hi[0]}.{hi[1] + 1}.0")
    with pytest.warns(RuntimeWarning):
        assert not _numba._hooks_supported("not-a-version")


SYMBOLS = """
import sys
import llvmlite.binding as ll
names, add = [], ll.add_symbol
ll.add_symbol = lambda n, a: (names.append(n), add(n, a))[1]
import numba
from numba.core.registry import cpu_target
ctx = cpu_target.target_context
before = set(names)
if sys.argv[1] == "refresh":
    ctx.refresh()
else:
    from jkofast._numba import prepare_load
    prepare_load(ctx)
print(sorted(set(names) - before))
"""


def test_cached_load_adds_the_symbols_a_refresh_adds():
    # loading a cached kernel skips Numba's full context refresh: every symbol a refresh adds to
    # LLVM's table (what cached machine code may link against) must be there all the same
    got = {
        how: subprocess.run([sys.executable, "-c", SYMBOLS, how], capture_output=True, text=True, check=True).stdout
        for how in ("refresh", "prepare_load")
    }
    assert got["refresh"] == got["prepare_load"]
    assert "NRT_MemInfo_alloc" in got["refresh"] and "_numba_hashsecret_siphash_k0" in got["refresh"]


@pytest.mark.skipif(not _config.CACHE or _numba._FUNCTION_CACHE is None, reason="no jkofast on-disk cache")
def test_cached_load_refreshes_no_registry(tmp_path):
    # the second process loads the kernels the first compiled, without importing the lowering registries
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("q1 0 d1 1\nq2 0 d3 2\n")
    run.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\nq2 Q0 d3 1 0.5 t\n")
    code = (
        "import sys\nfrom jkofast.cli import main\n"
        f"assert main(['evaluate', '--qrels', {str(qrels)!r}, '--run', {str(run)!r}, '--n-boot', '2']) == 0\n"
        "print('REGISTRIES', 'numba.np.arraymath' in sys.modules, 'scipy.linalg' in sys.modules)\n"
    )
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True) for _ in (0, 1)]
    assert outs[0].stdout.replace("True", "False") == outs[1].stdout  # same metrics
    assert "REGISTRIES False False" in outs[1].stdout
