"""Compiled kernels are cached outside the installed package (jkofast's cache folder, or NUMBA_CACHE_DIR)."""

import os
import pathlib
import subprocess
import sys

PKG = pathlib.Path(__file__).resolve().parents[1] / "jkofast"
CODE = "import numpy as np\nfrom jkofast.jko.energy import minmax\nminmax(np.array([1.0, 2.0, 4.0]))\n"


def _run(env_extra: dict) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "JKOFAST_CACHE_DIR")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr


def _package_cache_files() -> set:
    return {str(p) for p in PKG.rglob("*.nbi")} | {str(p) for p in PKG.rglob("*.nbc")}


def test_default_cache_is_jkofast_cache_dir_not_the_package(tmp_path):
    before = _package_cache_files()
    _run({"JKOFAST_CACHE_DIR": str(tmp_path / "jk")})
    files = list((tmp_path / "jk").rglob("*minmax_segments*.nbi"))
    assert files, "the kernel was not cached in JKOFAST_CACHE_DIR"
    assert _package_cache_files() <= before  # nothing new inside jkofast/


def test_numba_cache_dir_wins(tmp_path):
    _run({"JKOFAST_CACHE_DIR": str(tmp_path / "jk"), "NUMBA_CACHE_DIR": str(tmp_path / "nb")})
    assert list((tmp_path / "nb").rglob("*minmax_segments*.nbi"))
    assert not (tmp_path / "jk").exists()


def test_xdg_cache_home_is_the_default_root(tmp_path):
    _run({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert list((tmp_path / "xdg" / "jkofast" / "numba").rglob("*.nbi"))


def _tree(root: pathlib.Path) -> pathlib.Path:
    (root / "kernels" / "ot").mkdir(parents=True)
    kernel = "from jkofast import _config\nfrom jkofast._helpers import (\n    f,\n)\n"  # a multi-line import too
    (root / "kernels" / "ot" / "a.py").write_text(kernel)
    (root / "_config.py").write_text("CACHE = True\n")
    (root / "_helpers.py").write_text("from jkofast._consts import C\n")
    (root / "_consts.py").write_text("C = 1\n")
    (root / "_io.py").write_text("z = 1\n")
    (root / "wrapper.py").write_text("y = 2\n")
    return root


def test_sources_digest_follows_every_kernel_source(tmp_path):
    # a cached kernel is keyed by this digest too: Numba alone keys it by its own file, so a
    # caller loaded its stale machine code after a callee in another file changed
    from jkofast._numba import _DIGESTS, kernel_sources, sources_digest

    root = _tree(tmp_path / "jkofast")
    assert {os.path.relpath(f, root) for f in kernel_sources(str(root))} == {
        os.path.join("kernels", "ot", "a.py"), "_config.py", "_helpers.py", "_consts.py"}  # fmt: skip
    first = sources_digest(str(root))
    for path, text, changes in (
        (root / "wrapper.py", "y = 3\n", False),  # not kernel code
        (root / "_io.py", "z = 2\n", False),  # a private module no kernel imports
        (root / "kernels" / "ot" / "a.py", "from jkofast import _config\nfrom jkofast._helpers import f\n", True),
        (root / "_config.py", "CACHE = False\n", True),  # settings kernels read
        (root / "_consts.py", "C = 2\n", True),  # imported through another module
        (root / "kernels" / "ot" / "b.py", "", True),  # a new kernel file
    ):
        _DIGESTS.clear()
        before = sources_digest(str(root))
        path.write_text(text)
        _DIGESTS.clear()
        assert (sources_digest(str(root)) != before) is changes, path
    assert first != sources_digest(str(root))
    _DIGESTS.clear()


def test_the_package_digest_covers_what_kernels_import():
    from jkofast._numba import _PKG, kernel_sources

    top = {os.path.relpath(f, _PKG) for f in kernel_sources() if os.path.dirname(f) == _PKG}
    assert {"_numba.py", "_config.py", "_codes.py"} <= top
    assert "_io.py" not in top and "__init__.py" not in top


def test_kernel_index_keys_end_with_the_digest_and_the_compile_switches():
    import numba

    import jkofast.kernels.pools.baselines  # noqa: F401 - registers the kernel
    from jkofast._numba import REGISTRY, compile_switches, sources_digest

    disp = REGISTRY["jkofast.kernels.pools.baselines.minmax_segments"]
    cache = disp._cache
    assert type(cache).__name__ == "JkofastFunctionCache"
    sig = (numba.float64[::1], numba.int64[::1], numba.float64[::1])
    codegen = disp.targetctx.codegen()
    key = cache._index_key(sig, codegen)
    assert key[-2] == sources_digest()
    assert key[-1] == compile_switches()
    assert ("boundscheck", bool(numba.config.BOUNDSCHECK)) in key[-1]


PROBE = """
import numpy as np
from jkofast.jko.energy import minmax
from jkofast.kernels.pools.baselines import minmax_segments
minmax(np.array([1.0, 2.0, 4.0]))
print(minmax_segments.stats.cache_hits and "hit" or "miss")
"""


def test_a_cache_filled_without_bounds_checks_never_serves_a_checked_run(tmp_path):
    """Numba's own key ignores NUMBA_BOUNDSCHECK: a checked run would load unchecked machine code."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "JKOFAST_CACHE_DIR")}
    env["JKOFAST_CACHE_DIR"] = str(tmp_path / "jk")

    def run(check: str) -> str:
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                             env={**env, "NUMBA_BOUNDSCHECK": check})  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout.split()[-1]

    assert [run("0"), run("0"), run("1"), run("1"), run("0")] == ["miss", "hit", "miss", "hit", "hit"]


def _keyed_cache_file_class():
    import jkofast.kernels.pools.baselines  # noqa: F401 - registers the kernel
    from jkofast._numba import REGISTRY

    kind = type(REGISTRY["jkofast.kernels.pools.baselines.minmax_segments"]._cache._cache_file)
    assert kind.__name__ == "KeyedCacheFile"
    return kind


def test_a_stale_index_read_costs_an_entry_never_names_another_signatures_code(tmp_path):
    """Numba's own cache file numbers a new kernel's data file with the first number its index has not
    used: two processes that read the index before either writes it both take ``.1.nbc``, and the
    index can end up naming the other key's machine code.  jkofast's names data by its key, so even
    a writer that read a stale index (as without a lock) never points a key at another's data."""
    kind = _keyed_cache_file_class()
    a = kind(str(tmp_path), "k-1.py311", ("stamp", 1))
    b = kind(str(tmp_path), "k-1.py311", ("stamp", 1))
    real_load = kind._load_index
    stale = real_load(a)  # both read the empty index first
    kind._load_index = lambda self: dict(stale) if self is b else real_load(self)
    try:
        a.save(("sig-A",), b"code of A")
        b.save(("sig-B",), b"code of B")  # its index write drops A's entry
    finally:
        kind._load_index = real_load
    fresh = kind(str(tmp_path), "k-1.py311", ("stamp", 1))
    assert fresh.load(("sig-B",)) == b"code of B"
    assert fresh.load(("sig-A",)) in (None, b"code of A")  # a miss (recompiled later), not B's code


def _save_many(kind, folder, tag, n):
    f = kind(folder, "k-1.py311", ("stamp", 1))
    for i in range(n):
        f.save((tag, i), f"{tag}{i}".encode())


def test_processes_filling_one_cache_folder_at_once_keep_every_entry(tmp_path):
    import multiprocessing

    kind = _keyed_cache_file_class()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_save_many, args=(kind, str(tmp_path), tag, 40)) for tag in "ABC"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    fresh = kind(str(tmp_path), "k-1.py311", ("stamp", 1))
    assert len(fresh._load_index()) == 120  # the lock: no writer dropped another's entries
    for tag in "ABC":
        for i in range(40):
            assert fresh.load((tag, i)) == f"{tag}{i}".encode()


# Two kernels in two files of the copied package: the caller's result shows which callee it runs.
PROBE_CALLEE = "from jkofast._numba import kernel\n\n\n@kernel()\ndef scale(x):\n    return x * {k}\n"
PROBE_CALLER = (
    "from jkofast._numba import kernel\nfrom jkofast.kernels.probe_callee import scale\n\n\n"
    "@kernel()\ndef apply(x):\n    return scale(x) + {c}\n"
)
RUN_PROBES = """
import sys, numpy as np
import jkofast
from jkofast.jko.energy import minmax
from jkofast.kernels.pools.baselines import minmax_segments
from jkofast.kernels.probe_caller import apply
assert jkofast.__file__.startswith(sys.argv[1]), jkofast.__file__  # the copy under test, not the checkout
minmax(np.array([1.0, 2.0, 4.0]))
hit = {True: "hit", False: "miss"}
print(apply(np.int64(10)), hit[bool(minmax_segments.stats.cache_hits)], hit[bool(apply.stats.cache_hits)])
"""


def _install_copy(dest: pathlib.Path, callee_k: int = 2, caller_c: int = 1, mtime: float = 1e9) -> pathlib.Path:
    """Copy the package (its code, not the bundled data) to ``dest`` with the two probe kernels; set every mtime."""
    import shutil

    pkg = dest / "jkofast"
    shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns("__pycache__", "scifact", "reference"))
    (pkg / "kernels" / "probe_callee.py").write_text(PROBE_CALLEE.format(k=callee_k))
    (pkg / "kernels" / "probe_caller.py").write_text(PROBE_CALLER.format(c=caller_c))
    for p in pkg.rglob("*"):
        os.utime(p, (mtime, mtime))
    return dest


def _cache_files(root: pathlib.Path) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in (".nbi", ".nbc")}


def test_installs_at_two_paths_share_one_cache_and_an_edit_recompiles(tmp_path):
    """The cache is keyed by the sources' content: a second install of the same sources at another
    path (other file times) compiles nothing; an edited kernel, or an edited callee in another file,
    is recompiled (never served the first install's machine code)."""
    cache = tmp_path / "cache"

    def run(copy: pathlib.Path) -> list:
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "JKOFAST_CACHE_DIR")}
        env.update(JKOFAST_CACHE_DIR=str(cache), PYTHONPATH=str(copy))
        out = subprocess.run([sys.executable, "-c", RUN_PROBES, str(copy)], capture_output=True, text=True,
                             env=env, cwd=str(copy))  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert run(_install_copy(tmp_path / "a")) == ["21", "miss", "miss"]
    first = _cache_files(cache)
    assert any("minmax_segments" in f for f in first) and any("apply" in f for f in first)
    assert run(_install_copy(tmp_path / "b", mtime=2e9)) == ["21", "hit", "hit"]  # another path, other times
    assert _cache_files(cache) == first  # the second install wrote nothing
    assert run(_install_copy(tmp_path / "c", caller_c=5)) == ["25", "miss", "miss"]  # the kernel edited
    assert run(_install_copy(tmp_path / "d", callee_k=3)) == ["31", "miss", "miss"]  # its callee, another file
    assert run(_install_copy(tmp_path / "e")) == ["21", "hit", "hit"]  # the first sources: still cached
