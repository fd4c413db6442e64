"""The one place kernels are compiled from.

``kernel(parallel=..., fastmath=...)`` = ``numba.njit(cache=_config.CACHE, nogil=True, no_cfunc_wrapper=True, ...)``
and records the dispatcher in ``REGISTRY`` (``tests/test_numba_hygiene.py`` checks that every
``@njit`` in ``jkofast.kernels`` came from here and that nothing compiles at import).

Cache location: compiled kernels go to ``_config.CACHE_DIR`` (``~/.cache/jkofast/numba`` by
default), in a folder named by the kernel sources' content and the Numba and llvmlite versions
(:func:`cache_tag`), so every install of the same sources on a machine shares one cache (a wheel,
an editable checkout, another virtual environment) and another version of them never loads it,
through a cache locator of jkofast's own — never into
``site-packages/jkofast/**/__pycache__``, whose leftovers once survived ``pip uninstall`` and
turned the package into a namespace package under an editable install. ``NUMBA_CACHE_DIR``,
when set, wins (Numba's own locator).

Ten hooks reach into Numba internals: (1) ``numba.core.caching``'s ``FunctionCache`` and locator
classes, (2) the dispatcher's ``_cache`` slot, (3) the dispatcher's ``overloads`` table and a compile
result's ``entry_point`` (:func:`entry_point`), (4) the ``copy`` module of Numba's IR inliner
(:func:`install_inline_copy`: the same IR, copied in a fraction of the time), (5) the function of
Numba's parfor lowering that passes a ``prange`` loop's arguments (:func:`install_parfor_args`: the
same machine code, optimised in less time), (6) the two functions of the parfor lowering that build
a strict ``prange`` loop's code libraries (:func:`install_parfor_link_once`: its body optimised and
given machine code once, in the kernel, instead of four times), (7) the implementation cache of
Numba's ``@overload`` templates (:func:`install_overload_sharing`: one implementation compiled for
all callers that hand it the same options, not one per caller's option set), (8) the dispatcher's
``compile`` and ``add_overload`` and its compiler's flags (:func:`install_python_entry_on_demand`: a
kernel's callee compiled without the CPython wrapper that only a Python call needs, which that call
then builds), (9) a compile result's code library and function descriptor and the target's calling
convention (:func:`native_call`: a large callee called by the address of its own machine code, not
linked into its caller's library and optimised there again), (10) the ``copy`` module of Numba's IR
utilities (:func:`install_name_set_copy`: the name sets of copy propagation and alias analysis
copied a set at a time, not an item at a time).  They are used only on the Numba
versions they were written for (:data:`NUMBA_HOOKS_TESTED`).  On another version jkofast warns once
and leaves caching to Numba's own locator and key, every call goes through the dispatcher, the
inliner, the IR utilities, the parfor lowering, the overload templates and the dispatcher keep their own code, and a
native call is an ordinary linked one.
docs/develop.md describes the compile-time rules.

Warm-up: wrapper modules register a zero-argument callable with ``register_warmup`` that
runs their kernels on 3-element inputs of every supported dtype; ``jkofast.warmup()``
imports the wrapper modules and calls them all.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import hashlib
import importlib
import inspect
import os
import re
import threading
import warnings
import weakref
from collections.abc import Callable

import numba
import numpy as np

from jkofast import _config

__all__ = [
    "NUMBA_HOOKS_TESTED",
    "REGISTRY",
    "WARMUPS",
    "cache_tag",
    "compile_switches",
    "entry_point",
    "install_compile_hooks",
    "install_inline_copy",
    "install_name_set_copy",
    "install_overload_sharing",
    "install_parfor_args",
    "install_parfor_link_once",
    "install_python_entry_on_demand",
    "kernel",
    "kernel_sources",
    "native_call",
    "native_entry",
    "register_warmup",
    "sources_digest",
]

# the (major, minor) range of Numba whose caching internals the hooks below were written against
NUMBA_HOOKS_TESTED = ((0, 59), (0, 68))

REGISTRY: dict[str, object] = {}
WARMUPS: dict[str, Callable[[], None]] = {}


def _numba_version(version: str) -> tuple[int, int]:
    """Return ``(major, minor)`` of a Numba version string (``(0, 0)`` if it does not parse)."""
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return (0, 0)


def _hooks_supported(version: str) -> bool:
    """Whether Numba ``version`` is one the cache hooks were written for; warn (once) if not."""
    lo, hi = NUMBA_HOOKS_TESTED
    if lo <= _numba_version(version) <= hi:
        return True
    warnings.warn(
        f"jkofast: numba {version} is outside the versions its cache hooks were written for "
        f"({lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}); kernels are cached by Numba's own locator and key, which "
        "does not see a change in a callee in another file (clear the cache after editing kernels)",
        RuntimeWarning,
        stacklevel=2,
    )
    return False


def _locator_class(base):
    """Return jkofast's cache locator class, a subclass of Numba's locator ``base``."""

    class JkofastCacheLocator(base):
        """Cache files in ``_config.CACHE_DIR/<content tag>/<folder in the package>`` (yields to ``NUMBA_CACHE_DIR``).

        The folder and the index's freshness stamp depend on the kernel sources' content
        (:func:`cache_tag`), never on where the package is installed or on file times: every
        install of the same sources on a machine (wheel, editable checkout, another virtual
        environment, CI's clone) loads the machine code the first one compiled. A kernel file
        outside the package (an experiment's) keeps Numba's layout, one folder per source folder.
        """

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(_config.CACHE_DIR, self.get_suitable_cache_subpath(py_file))

        @classmethod
        def get_suitable_cache_subpath(cls, py_file):
            rel = _package_folder(py_file)
            if rel is None:
                return super().get_suitable_cache_subpath(py_file)
            return os.path.join(cache_tag(), *rel)

        def get_source_stamp(self):
            # Numba's stamp is the file's mtime and size (or its content hash, by version), stored
            # in the index and compared on load; the sources digest is the same for every install
            # of the same sources and changes with any kernel source (a callee in another file too)
            if _package_folder(self._py_file) is None:
                return super().get_source_stamp()
            return sources_digest()

        @classmethod
        def from_function(cls, py_func, py_file):
            if numba.config.CACHE_DIR or not os.path.exists(py_file):
                return None
            self = cls(py_func, py_file)
            try:
                self.ensure_cache_path()
            except OSError:  # not writable: Numba's own locators decide
                return None
            if _package_folder(py_file) is not None:
                _mark_used()
            return self

    return JkofastCacheLocator


def _function_cache_class():
    """Return Numba's ``FunctionCache`` subclass whose first locator is jkofast's cache folder (or None)."""
    if not _hooks_supported(numba.__version__):
        return None
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - numba without the caching module
        return None
    base = getattr(caching, "UserProvidedCacheLocator", None)
    impl = getattr(caching, "CompileResultCacheImpl", None)
    if base is None or impl is None or not hasattr(caching.FunctionCache, "_index_key"):  # pragma: no cover
        return None  # numba internals moved: Numba's default places and key

    JkofastCacheLocator = _locator_class(base)

    class JkofastCacheImpl(impl):
        _locator_classes = (JkofastCacheLocator, *impl._locator_classes)

    class KeyedCacheFile(caching.IndexDataCacheFile):
        """Numba's index + data files, safe when several processes fill one cache folder at once.

        Numba numbers a new kernel's data file with the first number its index has not used; two
        processes adding different specialisations of one kernel at the same time read the same
        index, both take ``.1.nbc``, and the index can end up naming the file the other process
        wrote: a later run loads another signature's machine code (wrong results or a crash).
        Here the data file is named by a hash of its key, written before the index names it, and
        the index is read, updated and written under a lock (so no process drops another's entry).
        """

        def save(self, key, data):
            name = f"{self._index_name[:-4]}.{hashlib.sha256(repr(key).encode()).hexdigest()[:24]}.nbc"
            self._save_data(name, data)
            with _locked(self._index_path + ".lock"):
                overloads = self._load_index()
                if overloads.get(key) != name:
                    overloads[key] = name
                    self._save_index(overloads)

    class JkofastFunctionCache(caching.FunctionCache):
        _impl_class = JkofastCacheImpl

        def __init__(self, py_func):
            super().__init__(py_func)
            self._cache_file.__class__ = KeyedCacheFile

        def _index_key(self, sig, codegen):
            # Numba keys a cached kernel by its own file stamp and bytecode: a kernel whose
            # callee (in another file) changed loaded its stale machine code. The digest of
            # every kernel source joins the key, so any change recompiles what depends on it.
            # Numba's key also ignores the process-wide compile switches: machine code built
            # under NUMBA_BOUNDSCHECK=1 would serve an unchecked run (slow) and unchecked code a
            # bounds-checked one (no check at all), so those switches join the key too.
            return (*super()._index_key(sig, codegen), sources_digest(), compile_switches())

        def load_overload(self, sig, target_context):
            # Numba refreshes the whole target context here: it imports and installs every lowering
            # registry (numba.np.arraymath alone imports scipy.linalg), about half a second that only
            # compiling needs (the compiler refreshes the context itself).
            prepare_load(target_context)
            with self._guard_against_spurious_io_errors():
                got = self._load_overload(sig, target_context)
            if got is None:  # a miss: the compiler runs next
                install_compile_hooks()
            return got

    return JkofastFunctionCache


_PKG = os.path.dirname(os.path.abspath(__file__))
_MARKED: list[bool] = []


def _mark_used() -> None:
    """Once per process: stamp this cache folder as used and prune old ones (``jkofast._cache_prune``).

    Imported by name, not with an import line, so the pruning code stays out of
    :func:`sources_digest` (editing it recompiles nothing).
    """
    if not _MARKED:
        _MARKED.append(True)
        importlib.import_module("jkofast._cache_prune").mark_used(_config.CACHE_DIR, cache_tag())


def _package_folder(py_file: str) -> tuple[str, ...] | None:
    """Return the folder of ``py_file`` inside this package as path parts (``("kernels", "ot")``), or None."""
    rel = os.path.relpath(os.path.dirname(os.path.realpath(py_file)), os.path.realpath(_PKG))
    if rel == os.curdir:
        return ()
    if rel.startswith(os.pardir) or os.path.isabs(rel):
        return None
    return tuple(rel.split(os.sep))


def cache_tag() -> str:
    """Return the name of the cache folder of these kernel sources on this Numba and llvmlite.

    ``<sources digest, 16 hex digits>-numba<version>-llvmlite<version>``: installs of the same
    sources share it wherever they live; another version of the sources or of the compilers gets
    a folder of its own (``jkofast warmup --clear`` removes them all). The CPU and the compile
    switches are in each kernel's index key (Numba's ``magic_tuple``: target, CPU name and
    features; :func:`compile_switches`), so one folder serves several machines sharing a home
    folder and bounds-checked beside unchecked runs.
    """
    import llvmlite

    return f"{sources_digest()[:16]}-numba{numba.__version__}-llvmlite{llvmlite.__version__}"


@contextlib.contextmanager
def _locked(path: str):
    """Hold an exclusive advisory lock on ``path`` (created if missing); no lock where ``fcntl`` is absent."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: Numba's own (unlocked) behaviour
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def compile_switches() -> tuple:
    """Return the process-wide Numba settings that change the machine code of every kernel.

    ``NUMBA_BOUNDSCHECK`` (index checks in every array access), ``NUMBA_OPT`` (LLVM optimisation
    level) and ``NUMBA_DEBUGINFO``; part of each cached kernel's key, so a cache filled under one
    setting is never loaded under another.
    """
    cfg = numba.config
    return (
        ("boundscheck", bool(getattr(cfg, "BOUNDSCHECK", None))),
        ("opt", str(getattr(cfg, "OPT", ""))),
        ("debuginfo", bool(getattr(cfg, "DEBUGINFO_DEFAULT", False))),
    )


def sources_digest(root: str = _PKG) -> str:
    """Return the SHA-256 of the kernel sources under ``root`` (a package folder; cached per root).

    The files hashed (by path inside the package and content): ``kernels/**/*.py`` and every
    module of the package they import, directly or through each other (:func:`kernel_sources`:
    ``_numba``, the settings of ``_config``, the status codes of ``_codes``) — what a kernel's
    machine code can depend on, wherever it is installed. A module no kernel imports (a wrapper,
    the CLI, ``_io``) is not part of it: editing one recompiles nothing.
    """
    got = _DIGESTS.get(root)
    if got is None:
        h = hashlib.sha256()
        for f in kernel_sources(root):
            h.update(os.path.relpath(f, root).encode() + b"\0")
            with open(f, "rb") as fh:
                h.update(fh.read() + b"\0")
        got = _DIGESTS[root] = h.hexdigest()
    return got


# `from PKG.a.b import x, y` / `from PKG.a import (x,\n y)` / `import PKG.a.b` (PKG: the package's name)
_FROM_IMPORT = r"^[ \t]*from[ \t]+{pkg}((?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)"
_PLAIN_IMPORT = r"^[ \t]*import[ \t]+{pkg}((?:\.\w+)+)"


def kernel_sources(root: str = _PKG) -> list[str]:
    """Return the kernel source files of the package folder ``root``, sorted.

    ``kernels/**/*.py`` and the package's modules they import, transitively, read from the
    ``import`` lines: ``from PKG.a import b`` counts ``a/b.py`` when it is a module, else ``a.py``
    or ``a/__init__.py``.
    """
    pkg = re.escape(os.path.basename(os.path.normpath(root)))
    from_import = re.compile(_FROM_IMPORT.format(pkg=pkg), re.M)
    plain_import = re.compile(_PLAIN_IMPORT.format(pkg=pkg), re.M)

    def module_file(parts: list[str]) -> str | None:
        base = os.path.join(root, *parts)
        for f in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(f):
                return f
        return None

    todo = []
    for base, dirs, names in os.walk(os.path.join(root, "kernels")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        todo += [os.path.join(base, n) for n in names if n.endswith(".py")]
    seen = set(todo)
    while todo:
        with open(todo.pop(), encoding="utf-8") as fh:
            text = fh.read()
        found = [m.group(1).split(".")[1:] for m in plain_import.finditer(text)]
        for m in from_import.finditer(text):
            mod = m.group(1).split(".")[1:]
            names = [n.split()[0] for n in m.group(2).strip("() \t\n").replace("\n", ",").split(",") if n.strip()]
            subs = [[*mod, n] for n in names if module_file([*mod, n]) is not None]
            # `from PKG.a import b`: the module a/b.py; the package a's __init__ only for its attributes
            found += subs if len(subs) == len(names) else [mod, *subs]
        for parts in found:
            f = module_file(parts)
            if f is not None and f not in seen:
                seen.add(f)
                todo.append(f)
    return sorted(seen)


_DIGESTS: dict[str, str] = {}


def prepare_load(target_context) -> None:
    """Make ``target_context`` ready to link cached machine code, without refreshing it whole.

    Linking needs the symbols a refresh adds to LLVM's table, and only two of its steps add any:
    the runtime's (``NRT_*``, :func:`rtsys.initialize`) and the hash secret's (added when
    ``numba.cpython.hashing`` is imported); ``tests/test_numba_hygiene.py`` compares the two sets.
    """
    from numba.core.runtime import rtsys

    importlib.import_module("numba.cpython.hashing")
    rtsys.initialize(target_context)


_FUNCTION_CACHE = _function_cache_class()
_HOOKS_TESTED = NUMBA_HOOKS_TESTED[0] <= _numba_version(numba.__version__) <= NUMBA_HOOKS_TESTED[1]


class _InlineCopy:
    """The ``copy`` module as ``numba.core.inline_closurecall`` sees it, with a faster ``deepcopy`` of IR blocks.

    Numba's IR inliner (``InlineWorker.inline_ir``, behind every ``inline="always"`` kernel) copies
    a callee's blocks one ``copy.deepcopy`` at a time, twice per call site, and each block's copy
    takes a copy of the function's whole variable scope with it: blocks x variables objects per
    copy.  Here the blocks of one pass share one memo, so the scope and its variables are copied
    once per pass and the copy keeps the source's sharing (every block of a function on one
    scope). A pass is the blocks of one scope copied one after another; it ends at a block of
    another scope or at a block this memo has already copied (the same blocks copied again).
    That module's only use of ``copy`` is this ``deepcopy`` of a block; anything else asked of it
    goes to the real module.
    """

    def __init__(self, block_type):
        self._block_type = block_type
        self._scope = None
        self._memo: dict = {}

    def __getattr__(self, name):
        return getattr(copy, name)

    def deepcopy(self, x, memo=None):
        if memo is not None or type(x) is not self._block_type:
            return copy.deepcopy(x, memo)
        if x.scope is not self._scope or id(x) in self._memo:
            self._scope, self._memo = x.scope, {}
        return copy.deepcopy(x, self._memo)


def install_inline_copy() -> bool:
    """Install :class:`_InlineCopy` into Numba's inliner (hook 4), once per process.

    Called on a kernel-cache miss, before the first compile.  Returns whether it is installed: only
    on the Numba versions of :data:`NUMBA_HOOKS_TESTED`, and only where ``inline_closurecall`` still
    copies blocks as written for (else Numba's own copy stays).
    """
    if not _HOOKS_TESTED:
        return False
    from numba.core import inline_closurecall, ir

    if isinstance(inline_closurecall.copy, _InlineCopy):
        return True
    if inline_closurecall.copy is not copy or not hasattr(inline_closurecall.InlineWorker, "inline_ir"):
        return False  # pragma: no cover - numba internals moved
    inline_closurecall.copy = _InlineCopy(ir.Block)
    return True


# hook 10: the copies of name sets in Numba's IR utilities (copy propagation, alias analysis)

# what a name set holds: variable names, (target, source) name pairs, block labels
_NAME_SET_ITEMS = frozenset((str, int, tuple))


class _NameSetCopy:
    """The ``copy`` module as ``numba.core.ir_utils`` sees it, with a faster ``deepcopy`` of name sets.

    That module deep-copies a dict of sets in two places: ``copy_propagate`` takes a snapshot of
    its out-copies (block label -> set of ``(target, source)`` name pairs) on every round of its
    fixed-point iteration, to compare with the next, and ``find_potential_aliases`` copies its alias
    map (name -> set of names) to read while it merges the sets.  Both only read the copy.  Their
    items are strings, integers or tuples of strings, which ``copy.deepcopy`` returns as they are;
    the sets it rebuilds one item at a time through its generic machinery (a Python call per item
    and per tuple member).  Here each set is copied whole (``set(v)``, in C), which gives the same
    dict of equal sets.  Anything else (another type of key, value or item, or a ``memo``) goes to
    the real ``copy.deepcopy``, as does anything else asked of this module.
    """

    def __getattr__(self, name):
        return getattr(copy, name)

    @staticmethod
    def deepcopy(x, memo=None):
        if memo is None and type(x) is dict and _name_sets(x):
            return {k: set(v) for k, v in x.items()}
        return copy.deepcopy(x, memo)


def _name_sets(d: dict) -> bool:
    """Whether ``d`` maps names or labels to sets of names, labels or tuples of names."""
    if not set(map(type, d)) <= _NAME_SET_ITEMS:
        return False
    for v in d.values():
        if type(v) is not set:
            return False
        kinds = set(map(type, v))
        if not kinds <= _NAME_SET_ITEMS:
            return False
        if tuple in kinds and not all(set(map(type, t)) <= {str} for t in v if type(t) is tuple):
            return False
    return True


def install_name_set_copy() -> bool:
    """Install :class:`_NameSetCopy` into Numba's IR utilities (hook 10), once per process.

    Called on a kernel-cache miss, before the first compile, as :func:`install_inline_copy`.
    Returns whether it is installed: only on the Numba versions of :data:`NUMBA_HOOKS_TESTED`, and
    only where ``ir_utils`` still uses ``copy`` as written for (its ``deepcopy`` of the name sets
    in ``copy_propagate`` and ``find_potential_aliases``, and one ``copy.copy`` of a statement).
    """
    if not _HOOKS_TESTED:
        return False
    from numba.core import ir_utils

    if isinstance(ir_utils.copy, _NameSetCopy):
        return True
    if ir_utils.copy is not copy:
        return False  # pragma: no cover - numba internals moved
    try:
        source = inspect.getsource(ir_utils)
    except (OSError, TypeError):  # pragma: no cover - Numba installed without its sources: not checkable
        return False
    uses = re.findall(r"\bcopy\.(\w+)\(([^()]*)\)", source)
    if sorted(set(uses)) != [("copy", "inst"), ("deepcopy", "alias_map"), ("deepcopy", "out_copies")]:
        return False  # pragma: no cover - numba internals moved
    ir_utils.copy = _NameSetCopy()
    return True


# the parameters of numba.parfors.parfor_lowering.call_parallel_gufunc that hook 5 was written against
_PARFOR_CALL_PARAMS = (
    "lowerer",
    "cres",
    "gu_signature",
    "outer_sig",
    "expr_args",
    "expr_arg_types",
    "loop_ranges",
    "redvars",
    "reddict",
    "redarrdict",
    "init_block",
    "index_var_typ",
    "races",
    "exp_name_to_tuple_var",
)


def _tuple_element_pointer(lowerer, tup: str, index: int):
    """Return a pointer to element ``index`` of the tuple variable ``tup`` in its stack slot."""
    from numba.core import cgutils

    return cgutils.gep_inbounds(lowerer.builder, lowerer.varmap[tup], 0, index)


def _parfor_call_with_element_loads(call_parallel_gufunc):
    """Return Numba's ``call_parallel_gufunc`` made to load each tuple element it passes on its own (hook 5).

    A ``prange`` loop that reads a tuple (a namedtuple of arrays: the SGR index bundle has 40) gets
    each element as an argument of its own.  Numba loads the whole tuple from its stack slot once
    per element and extracts one (``load_potential_tuple_var``): for the SGR batch driver, 40
    loads of a 280-field aggregate, which LLVM's SROA pass splits field by field — 1.6 s of the
    driver's 1.7 s of function passes.  Here each element's variable points at its field of the
    slot (a GEP), so Numba loads that field alone.  The optimised module is the same; only a tuple
    held in a stack slot is touched (one held as an SSA value is extracted from, as before).
    """

    def call(*args, **kwargs):
        if kwargs or len(args) != len(_PARFOR_CALL_PARAMS):  # not the positional call written for: as Numba's
            return call_parallel_gufunc(*args, **kwargs)
        lowerer, expr_args, tuple_vars = args[0], args[4], args[13]
        slots, ssa = getattr(lowerer, "varmap", None), getattr(lowerer, "_blk_local_varmap", None)
        added = []
        for x in expr_args if isinstance(slots, dict) and isinstance(ssa, dict) else ():
            got = tuple_vars.get(x)
            if got is not None and got[0] in slots and x not in slots and x not in ssa:
                slots[x] = _tuple_element_pointer(lowerer, *got)
                added.append(x)
        rest = {k: v for k, v in tuple_vars.items() if k not in added}
        try:
            return call_parallel_gufunc(*args[:13], rest)
        finally:
            for x in added:
                del slots[x]

    call.__wrapped__ = call_parallel_gufunc
    return call


def _wrap_all(targets) -> bool:
    """Wrap Numba functions for a hook: each ``(module, name, params, wrap)`` becomes ``wrap(function)``.

    All or none: True when every function is wrapped (now or already), False, touching nothing,
    when one of them (unwrapped) no longer takes the parameters ``params`` the hook was written for.
    """
    fns = [getattr(module, name) for module, name, _, _ in targets]
    if any(
        tuple(inspect.signature(getattr(fn, "__wrapped__", fn), follow_wrapped=False).parameters) != params
        for fn, (_, _, params, _) in zip(fns, targets, strict=True)
    ):  # pragma: no cover - internals moved
        return False
    for fn, (module, name, _, wrap) in zip(fns, targets, strict=True):
        if not hasattr(fn, "__wrapped__"):
            setattr(module, name, wrap(fn))
    return True


def install_parfor_args() -> bool:
    """Install :func:`_parfor_call_with_element_loads` into Numba's parfor lowering (hook 5), once per process.

    Called on a kernel-cache miss, before the first compile, as :func:`install_inline_copy`.
    Returns whether it is installed: only on the Numba versions of :data:`NUMBA_HOOKS_TESTED` and
    where ``call_parallel_gufunc`` still takes the parameters it was written for.
    """
    if not _HOOKS_TESTED:
        return False
    from numba.parfors import parfor_lowering

    return _wrap_all([(parfor_lowering, "call_parallel_gufunc", _PARFOR_CALL_PARAMS, _parfor_call_with_element_loads)])


# the parameters of the two Numba functions hook 6 wraps
_GUFUNC_WRAPPER_PARAMS = ("py_func", "cres", "sin", "sout", "cache", "is_parfors")
_PARFOR_BODY_PARAMS = (
    "lowerer",
    "parfor",
    "typemap",
    "typingctx",
    "targetctx",
    "flags",
    "locals",
    "has_aliases",
    "index_var_typ",
    "races",
)
_PARFOR_BODY_PREFIX = "__numba_parfor_gufunc_"  # the name Numba gives a prange loop body (and its library)
_PARFOR_WRAPPERS = ("parallelgufuncwrapper", "<numba.np.ufunc.wrappers._GufuncWrapper ")
# an LLVM instruction with a fast-math flag: one that lets LLVM reorder or rewrite floating-point arithmetic
_FAST_MATH_OP = re.compile(
    r"= (?:fadd|fsub|fmul|fdiv|frem|fneg|fcmp|call|phi|select) (?:fast|reassoc|nnan|ninf|nsz|arcp|contract|afn)\b"
)
_FAST_MATH_SEEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _has_fast_math(library) -> bool:
    """Whether the (finalized) code library ``library`` holds an instruction with a fast-math flag (memoised)."""
    got = _FAST_MATH_SEEN.get(library)
    if got is None:
        got = _FAST_MATH_SEEN[library] = _FAST_MATH_OP.search(str(library._get_module_for_linking())) is not None
    return got


@functools.cache
def _link_only_library():
    """Return the code library class of hook 6 (built once, on Numba's ``JITCodeLibrary``).

    A ``prange`` loop becomes four code libraries, each linking the one before: the loop body, its
    gufunc wrapper, the parallel launcher and the kernel.  Numba finalizes each on its own: LLVM's
    whole-module optimisation and machine code for each, so the body, often most of the kernel, is
    optimised and given machine code four times — yet only the kernel's copy ever runs (its module
    links the others).  A library of this class, used for the first three, finalizes by linking
    alone: the body's code is optimised and emitted once, in the kernel's library, as any other
    callee's is.  It does so only where reordering cannot change a result: the kernel is strict
    IEEE (no fast-math flag: LLVM must then keep every floating-point operation as written, however
    often it optimises it), and so are the callees it links (read from their IR); otherwise it
    finalizes as Numba's own class does.
    """
    from numba.core import codegen
    from numba.core.compiler_lock import require_global_compiler_lock

    class LinkOnlyLibrary(codegen.JITCodeLibrary):
        link_only = None  # decided when finalized: True (linked only) or False (Numba's own finalize)

        def finalize(self):
            require_global_compiler_lock()
            self._raise_if_finalized()
            self.link_only = all(
                lib.link_only if isinstance(lib, LinkOnlyLibrary) else not _has_fast_math(lib)
                for lib in self._linking_libraries
            )
            if not self.link_only:
                return super().finalize()
            seen = set()
            for lib in self._linking_libraries:  # as Numba's finalize links, without optimising or emitting
                if lib not in seen:
                    seen.add(lib)
                    self._reload_init.update(lib._reload_init)
                    self._final_module.link_in(lib._get_module_for_linking(), preserve=True)
            self._finalized = True

        def get_pointer_to_function(self, name):
            if self.link_only:
                raise RuntimeError(f"{self.name}: linked into its kernel only, it has no machine code of its own")
            return super().get_pointer_to_function(name)

    return LinkOnlyLibrary


@contextlib.contextmanager
def _libraries_created_as(codegen, names):
    """Make ``codegen.create_library`` build hook 6's class for the names starting with one of ``names``.

    Within the block only: every other name (all of them when ``names`` is empty, also inside a block
    that set some) gets Numba's own class; afterwards ``create_library`` is as it was.
    """
    mine = vars(codegen)
    had, before = "create_library" in mine, mine.get("create_library")
    own = type(codegen).create_library.__get__(codegen)
    cls = _link_only_library()
    if names:
        codegen.create_library = lambda name, **kw: cls(codegen, name) if name.startswith(names) else own(name, **kw)
    elif had:
        del codegen.create_library
    try:
        yield
    finally:
        if had:
            codegen.create_library = before
        else:
            mine.pop("create_library", None)


def _parfor_body_linked_once(create_gufunc_for_parfor_body):
    """Return Numba's ``_create_gufunc_for_parfor_body`` making a strict kernel's loop body a hook 6 library.

    The body is lowered without finalizing it (``no_compile``) and without a CPython wrapper (only
    the gufunc wrapper calls it); the library decides when the gufunc wrapper links it
    (:func:`_link_only_library`).  A kernel with fast-math flags keeps Numba's own path.
    """

    def body(lowerer, parfor, typemap, typingctx, targetctx, flags, locals, has_aliases, index_var_typ, races):
        strict = not targetctx.fastmath
        before = flags.no_compile, flags.no_cpython_wrapper
        if strict:
            flags.no_compile = flags.no_cpython_wrapper = True
        try:
            with _libraries_created_as(targetctx.codegen(), (_PARFOR_BODY_PREFIX,) if strict else ()):
                return create_gufunc_for_parfor_body(
                    lowerer, parfor, typemap, typingctx, targetctx, flags, locals, has_aliases, index_var_typ, races
                )
        finally:
            flags.no_compile, flags.no_cpython_wrapper = before

    body.__wrapped__ = create_gufunc_for_parfor_body
    return body


def _parfor_wrappers_linked_once(build_gufunc_wrapper):
    """Return Numba's ``build_gufunc_wrapper`` making a hook 6 body's two wrapper libraries of hook 6's class."""

    def build(py_func, cres, sin, sout, cache, is_parfors):
        linked = is_parfors and isinstance(cres.library, _link_only_library())
        with _libraries_created_as(cres.target_context.codegen(), _PARFOR_WRAPPERS if linked else ()):
            return build_gufunc_wrapper(py_func, cres, sin, sout, cache, is_parfors)

    build.__wrapped__ = build_gufunc_wrapper
    return build


def install_parfor_link_once() -> bool:
    """Install hook 6 (:func:`_link_only_library`) into Numba's parfor lowering, once per process.

    Called on a kernel-cache miss, before the first compile, as :func:`install_inline_copy`.
    Returns whether it is installed: only on the Numba versions of :data:`NUMBA_HOOKS_TESTED` and
    where the two functions it wraps still take the parameters it was written for.
    """
    if not _HOOKS_TESTED:
        return False
    from numba.core import codegen
    from numba.np.ufunc import parallel
    from numba.parfors import parfor_lowering

    if not all(hasattr(codegen.JITCodeLibrary, a) for a in ("_get_module_for_linking", "_raise_if_finalized")):
        return False  # pragma: no cover - internals moved
    return _wrap_all(
        [
            (parfor_lowering, "_create_gufunc_for_parfor_body", _PARFOR_BODY_PARAMS, _parfor_body_linked_once),
            (parallel, "build_gufunc_wrapper", _GUFUNC_WRAPPER_PARAMS, _parfor_wrappers_linked_once),
        ]
    )


# the options of a caller's compile that Numba's CPU target hands down to an ``@overload`` implementation
# compiled for it (``CPUTargetOptions.finalize``: ``inherit_if_not_set``); the rest of that compile's
# options are the implementation's own
_INHERITED_OPTIONS = ("nrt", "fastmath", "error_model", "forceinline")


def _inherited_options(flags) -> tuple:
    """Return the values of ``flags`` that an ``@overload`` implementation compiled under them takes over."""
    values = []
    for name in _INHERITED_OPTIONS:
        v = getattr(flags, name)
        values.append(frozenset(v.flags) if hasattr(v, "flags") else v)  # FastMathOptions: its flag set
    return tuple(values)


def _impl_shared_by_inherited_options(get_impl):
    """Return Numba's ``_OverloadFunctionTemplate._get_impl`` sharing one implementation per inherited options (hook 7).

    Numba compiles an ``@overload`` implementation (``np.empty``, ``np.sort``, ``min`` ...) once per
    argument types *and* per compile options of the kernel that calls it: its cache key holds the
    caller's whole option set.  Kernels differ in options that never reach the implementation's
    compile (``parallel``, ``nogil``, the wrappers left out, a ``prange`` body's own set), so the
    same machine code was compiled again for each: 54 of the 183 implementations that ``jkofast run``
    compiles in one process on an empty cache.  Here callers whose options agree on those the implementation takes over
    (:data:`_INHERITED_OPTIONS`) share the first one's; the others still get their own.  Only on
    the CPU target, whose option hand-down this was written from.
    """
    from numba.core import registry, targetconfig

    cpu_typing = registry.cpu_target.typing_context  # another target may hand down other options

    def _get_impl(self, args, kws):
        flags = targetconfig.ConfigStack.top_or_none()
        if flags is None or self.context is not cpu_typing:
            return get_impl(self, args, kws)
        key = (self.context, tuple(args), tuple(kws.items()))
        shared = (_impl_shared_by_inherited_options, *key, _inherited_options(flags))
        got = self._impl_cache.get(shared)
        if got is not None:
            return got
        got = get_impl(self, args, kws)
        if (*key, flags) in self._impl_cache:  # Numba kept it (its key): so does the hook
            self._impl_cache[shared] = got
        return got

    _get_impl.__wrapped__ = get_impl
    return _get_impl


def install_overload_sharing() -> bool:
    """Install hook 7 (:func:`_impl_shared_by_inherited_options`) into Numba's overload templates, once per process.

    Called on a kernel-cache miss, before the first compile, as :func:`install_inline_copy`.
    Returns whether it is installed: only on the Numba versions of :data:`NUMBA_HOOKS_TESTED`, where
    the CPU target still hands down exactly :data:`_INHERITED_OPTIONS` and ``_get_impl`` still takes
    the parameters it was written for.
    """
    if not _HOOKS_TESTED:
        return False
    from numba.core import cpu
    from numba.core.typing import templates

    try:
        source = inspect.getsource(cpu.CPUTargetOptions.finalize)
    except (OSError, TypeError):  # pragma: no cover - Numba installed without its sources: not checkable
        return False
    if tuple(re.findall(r'inherit_if_not_set\(\s*"(\w+)"', source)) != _INHERITED_OPTIONS:
        return False
    return _wrap_all(
        [(templates._OverloadFunctionTemplate, "_get_impl", ("self", "args", "kws"), _impl_shared_by_inherited_options)]
    )


# hook 8: the CPython entry of a kernel compiled as another kernel's callee, built when Python first calls it

_COMPILING = threading.local()
_KERNELS: weakref.WeakSet = weakref.WeakSet()  # every dispatcher made by kernel()


def _compiling() -> list:
    """Return this thread's stack of dispatcher compiles in progress: for each, whether it is a jkofast kernel's."""
    got = getattr(_COMPILING, "stack", None)
    if got is None:
        got = _COMPILING.stack = []
    return got


def _has_python_entry(cres) -> bool:
    """Whether Python can call the compile result ``cres``: its CPython wrapper has machine code.

    The wrapper's symbol name is the function's own (unique per compile) with a prefix; the JIT
    engine keeps the set of symbols with code, wherever they were added (compiled, loaded from the
    cache or built later by :func:`_python_entry`).
    """
    if cres.objectmode:
        return True
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_cpython_wrapper_name) != 0


def _python_entry(disp, args: tuple):
    """Return the entry point of ``disp``'s overload keyed ``args``, building its CPython wrapper first if it has none.

    The wrapper goes in a code library of its own that calls the overload's machine code where it
    already is: the function and its environment (the constants the wrapper boxes with) are
    declared, not linked in, so the JIT engine resolves both to the overload's own library and
    nothing is optimised or given machine code again but the wrapper.  The overload then takes
    the wrapper's entry point, in the dispatcher's table for Python calls and among the target's
    user functions (the key its callers' calls are lowered by).
    """
    from llvmlite import ir as llvm_ir
    from numba.core.callwrapper import PyCallWrapper
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys

    with global_compiler_lock:
        cres = disp.overloads[args]
        if _has_python_entry(cres):
            return cres.entry_point
        # the target's lowering registries (constants, casts) are installed by the first compile of the
        # process; a process that has only loaded kernels from the cache has none yet
        disp.targetctx.refresh()
        # the wrapper boxes with the runtime (NRT) as the kernel's compile did; the dispatcher's own
        # context has it off until a compile turns it on for its options
        ctx = disp.targetctx.subtarget(enable_nrt=disp.targetoptions.get("_nrt", True))
        fndesc, env = cres.fndesc, cres.environment
        module = ctx.create_module("python_entry")
        fnty = ctx.call_conv.get_function_type(fndesc.restype, fndesc.argtypes)
        callee = llvm_ir.Function(module, fnty, fndesc.llvm_func_name)
        PyCallWrapper(
            ctx, module, callee, fndesc, env, call_helper=None, release_gil=bool(disp.targetoptions.get("nogil"))
        ).build()
        env_gv = module.globals.get(ctx.get_env_name(fndesc))
        if env_gv is not None:  # the overload's environment, not a copy of its own (which nothing would fill)
            env_gv.initializer, env_gv.linkage = None, "external"
        library = ctx.codegen().create_library(f"{fndesc.qualname}.python_entry")
        library.add_ir_module(module)
        library.add_linking_library(rtsys.library)
        library.finalize()
        cfunc = ctx.get_executable(library, fndesc, env)
        disp.targetctx.insert_user_function(cfunc, fndesc, [cres.library])
        disp.overloads[args] = cres._replace(entry_point=cfunc)
        disp._insert([a._code for a in args], cfunc, cres.objectmode)
        return cfunc


@contextlib.contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector for the block (a kernel's outermost compile).

    Numba makes hundreds of thousands of Python objects while it compiles (its IR, types, llvmlite's
    IR), most of them living until the compile ends, so the collector's automatic runs inside
    found little to free; and each full run walks every object of the process (numpy's, Numba's,
    the user's, all the kernels compiled before).  In ``jkofast run`` those runs took 8.5 of its 86
    CPU seconds, 7.1 of them in 28 full runs.  Paused, the compile's garbage waits for the first
    run after the block: the process's peak memory grows by a few percent.  Taken under Numba's
    compiler lock, which the compile takes anyway, so threads compiling at once switch the
    collector in turn; a collector the process had switched off stays off.
    """
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        if not gc.isenabled():
            yield
            return
        gc.disable()
        try:
            yield
        finally:
            gc.enable()


def _compile_tracked(compile):
    """Return Numba's ``Dispatcher.compile`` recording the compiles in progress (hook 8).

    Numba gives every compiled function a CPython wrapper (the code that unboxes Python objects into
    the kernel's arguments and boxes its result), lowered, optimised and given machine code whether
    or not Python ever calls it; for a kernel whose arguments hold the SGR or JKO bundles it
    unboxes dozens of arrays.  A compile started while a jkofast kernel compiles is one of
    its callees (a kernel or an ``@overload`` implementation, typed for the caller): it is compiled
    without the wrapper (:func:`_bare_callee_flags`) and its overload is kept out of the
    dispatcher's table for Python calls (:func:`_added_callable_only`).  When Python calls it (the
    outermost compile: its dispatcher found it missing from that table), :func:`_python_entry`
    builds the wrapper then.  A function compiled outside a jkofast kernel compiles as before.
    """

    def compile_(self, sig):
        stack = _compiling()
        stack.append(self in _KERNELS)
        outermost_kernel = len(stack) == 1 and stack[0]
        try:
            with _collector_paused() if outermost_kernel else contextlib.nullcontext():
                got = compile(self, sig)
        finally:
            stack.pop()
        if stack:
            return got
        # the overload returned: keyed by the signature asked for, or (literal arguments typed
        # otherwise) by its own; found by its entry point either way
        for key, cres in self.overloads.items():
            if cres.entry_point is got:
                return _python_entry(self, key)
        return got

    compile_.__wrapped__ = compile
    return compile_


def _bare_callee_flags(customize_flags):
    """Return Numba's ``_FunctionCompiler._customize_flags`` leaving out the CPython wrapper of a callee (hook 8)."""

    def customize(self, flags):
        flags = customize_flags(self, flags)
        if any(_compiling()[:-1]):  # compiled while a jkofast kernel compiles: one of its callees
            flags.no_cpython_wrapper = True
        return flags

    customize.__wrapped__ = customize_flags
    return customize


def _added_callable_only(add_overload):
    """Return Numba's ``Dispatcher.add_overload`` keeping an overload without a CPython wrapper from Python (hook 8).

    Such an overload serves its callers' typing and lowering (the ``overloads`` table) but not the
    dispatcher's table of entry points for Python calls: a Python call finds it missing there and
    compiles, which builds the wrapper (:func:`_compile_tracked`) instead of jumping to none.
    """

    def add(self, cres):
        if _has_python_entry(cres):
            return add_overload(self, cres)
        self.overloads[tuple(cres.signature.args)] = cres

    add.__wrapped__ = add_overload
    return add


def install_python_entry_on_demand() -> bool:
    """Install hook 8 (:func:`_compile_tracked`) into Numba's dispatcher, once per process.

    Called when the first kernel is defined (before any compile or cache load: a cached callee may
    have no wrapper).  Returns whether it is installed: only on the Numba versions of
    :data:`NUMBA_HOOKS_TESTED` and where the functions it wraps or calls still take the parameters
    it was written for.
    """
    if not _HOOKS_TESTED:
        return False
    from numba.core import dispatcher

    if hasattr(dispatcher.Dispatcher.compile, "__wrapped__"):  # installed (one call per kernel defined)
        return True
    from numba.core import callwrapper

    wrapper_params = ("self", "context", "module", "func", "fndesc", "env", "call_helper", "release_gil")
    if (
        tuple(inspect.signature(callwrapper.PyCallWrapper.__init__).parameters) != wrapper_params
        or not hasattr(dispatcher.Dispatcher, "_insert")
        or not hasattr(dispatcher._FunctionCompiler, "_customize_flags")
    ):  # pragma: no cover - internals moved
        return False
    return _wrap_all(
        [
            (dispatcher.Dispatcher, "compile", ("self", "sig"), _compile_tracked),
            (dispatcher.Dispatcher, "add_overload", ("self", "cres"), _added_callable_only),
            (dispatcher._FunctionCompiler, "_customize_flags", ("self", "flags"), _bare_callee_flags),
        ]
    )


def install_compile_hooks() -> None:
    """Install the compile hooks 4 to 7 and 10 (each once per process; each only where it was tested)."""
    install_inline_copy()
    install_name_set_copy()
    install_parfor_args()
    install_parfor_link_once()
    install_overload_sharing()


def entry_point(disp, args: tuple):
    """Return the machine code's entry point of ``disp``'s compiled overload for ``args``, or None.

    The third hook into Numba internals (the dispatcher's ``overloads`` table, keyed by argument
    types, and the compile result's ``entry_point``): a caller that runs one kernel many times on
    arguments of fixed types calls the entry point directly, without the dispatcher's type
    resolution.  None (the caller goes through the dispatcher) when ``disp`` has not compiled that
    overload, on a Numba version outside :data:`NUMBA_HOOKS_TESTED`, or when the internals moved.
    """
    overloads = getattr(disp, "overloads", None)
    typeof = getattr(disp, "typeof_pyval", None)
    if not _HOOKS_TESTED or overloads is None or typeof is None:
        return None
    cres = overloads.get(tuple(typeof(a) for a in args))
    if cres is None or not _has_python_entry(cres):  # not compiled, or compiled as a callee only (hook 8)
        return None
    return cres.entry_point


# hook 9: a kernel calling a large callee through the address of the callee's own machine code


def _entry_key(sig_args: tuple) -> int:
    """Return a 56-bit key of the argument types ``sig_args`` (the same in every process: their names)."""
    return int.from_bytes(hashlib.blake2b(repr(sig_args).encode(), digest_size=7).digest(), "little")


_ENTRIES: dict = {}  # (dispatcher, the arguments' key) -> (address, key)
_NATIVE = _HOOKS_TESTED  # the calls of native_call go by address (else they are linked calls)


def _value_key(v):
    """Return what Numba's type of the argument ``v`` depends on, untyped (an array's dtype, layout and flags)."""
    if isinstance(v, np.ndarray):
        f = v.flags
        return (type(v), v.dtype.str, v.ndim, f.c_contiguous, f.f_contiguous, f.writeable, f.aligned)
    if isinstance(v, tuple):
        return (type(v), tuple(_value_key(x) for x in v))
    return type(v)


def native_entry(disp, args: tuple) -> tuple[int, int]:
    """Return ``(address, key)`` of ``disp``'s machine code for arguments of the types of ``args`` (hook 9).

    ``args``: values of the types the caller passes (arrays, tuples, scalars). Compiles the overload,
    or loads it from the cache, as a callee (without the CPython wrapper), once per process and
    argument types: later calls find it by the arrays' dtypes, layouts and flags and the other
    values' Python types, without typing them again (Numba's typing of a parameter bundle costs
    ~100 µs a call). ``key`` identifies the argument types: a kernel built with
    :func:`native_call` calls the address only when the key it was compiled with is this one.
    ``(0, 0)`` where the calls are linked (a Numba version outside :data:`NUMBA_HOOKS_TESTED`).
    """
    if not _NATIVE:
        return (0, 0)
    memo = (disp, _value_key(args))
    got = _ENTRIES.get(memo)
    if got is not None:
        return got
    from numba.core.compiler_lock import global_compiler_lock

    sig_args = tuple(disp.typeof_pyval(a) for a in args)
    with global_compiler_lock:
        stack = _compiling()
        # compiled as a kernel's callee (no CPython wrapper, hook 8), the collector paused as for a
        # kernel's outermost compile
        with _collector_paused() if not stack else contextlib.nullcontext():
            stack.append(True)
            try:
                disp.compile(sig_args)
            finally:
                stack.pop()
        cres = disp.overloads[sig_args]
        addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    if not addr:  # pragma: no cover - the engine lost the symbol
        raise RuntimeError(f"{disp.py_func.__qualname__}: no machine code for {sig_args}")
    got = _ENTRIES[memo] = (addr, _entry_key(sig_args))
    return got


def native_call(disp, mismatch: int):
    """Return an intrinsic ``call(entry, args)`` that runs kernel ``disp`` on the tuple ``args`` (hook 9).

    A caller's code library links the library of every kernel it calls and optimises and generates
    machine code for all of it again: for a callee as large as the JKO flow, most of the caller's
    compile. ``call`` instead jumps to the callee's own machine code at ``entry = (address, key)``,
    which the wrapper gets from :func:`native_entry` for arguments of the callee's types, and returns
    its result. The caller's machine code holds no address (the cache keeps it), only the key of the
    argument types it was typed with: where ``entry``'s key differs, ``call`` returns ``mismatch``
    without calling. Exceptions raised in the callee propagate as from a linked call. On a Numba
    version outside :data:`NUMBA_HOOKS_TESTED` the call is an ordinary linked one and ``entry`` is
    not read.
    """
    from numba.core import cgutils, types
    from numba.core.typing import signature
    from numba.extending import intrinsic

    @intrinsic
    def call(typingctx, entry, args):
        if not isinstance(args, types.BaseTuple) or entry != types.UniTuple(types.int64, 2):  # pragma: no cover
            raise TypeError(f"{disp.py_func.__qualname__}: call(entry, args) takes two int64 and a tuple")
        sig_args = tuple(args.types)
        callee = types.Dispatcher(disp)
        # typed (compiled or loaded, as a callee) as an ordinary call of the kernel would be
        restype = typingctx.resolve_function_type(callee, sig_args, {}).return_type
        key = _entry_key(sig_args)

        def codegen(context, builder, sig, llargs):
            ent, tup = llargs
            vals = [builder.extract_value(tup, i) for i in range(len(sig_args))]
            if not _NATIVE:
                return context.get_function(callee, signature(restype, *sig_args))(builder, vals)
            out = cgutils.alloca_once_value(builder, context.get_constant(restype, mismatch))
            same = builder.icmp_signed("==", builder.extract_value(ent, 1), context.get_constant(types.int64, key))
            with builder.if_then(same, likely=True):
                fnty = context.call_conv.get_function_type(restype, sig_args)
                fn = builder.inttoptr(builder.extract_value(ent, 0), fnty.as_pointer())
                status, res = context.call_conv.call_function(builder, fn, restype, sig_args, vals)
                with cgutils.if_unlikely(builder, status.is_error):
                    context.call_conv.return_status_propagate(builder, status)
                builder.store(res, out)
            return builder.load(out)

        return signature(restype, entry, args), codegen

    return call


def kernel(parallel: bool = False, fastmath=_config.FASTMATH_STRICT, inline: str = "never"):
    """Compile a kernel lazily with the project-wide settings and register its dispatcher.

    Parameters
    ----------
    parallel : bool
        Numba ``parallel=True`` (the kernel uses ``prange``).
    fastmath : frozenset or False
        A named preset from :mod:`jkofast._config` (``FASTMATH_ARITH``) or ``False`` (strict
        IEEE, ``FASTMATH_STRICT``); ``True`` is refused.
    inline : {"never", "always"}
        Numba-IR inlining of the kernel into its callers.

    Returns
    -------
    callable
        The decorator: ``fn -> numba dispatcher`` (``cache`` = ``JKOFAST_NUMBA_CACHE``,
        ``nogil=True``, ``no_cfunc_wrapper=True``: no kernel is used as a first-class function,
        so Numba's C-callable wrapper is not built), recorded in ``REGISTRY`` under ``"<module>.<name>"``.

    Raises
    ------
    ValueError
        ``fastmath=True``.
    """
    if fastmath is True:  # pragma: no cover - guarded by the hygiene test
        raise ValueError("use a named fastmath preset from jkofast._config, never True")

    # numba wants a mutable set (or bool); presets are frozensets so nobody edits them
    fm = set(fastmath) if isinstance(fastmath, frozenset | set) else fastmath

    def deco(fn):
        install_python_entry_on_demand()
        own_cache = _config.CACHE and _FUNCTION_CACHE is not None
        if not own_cache:  # no cache miss to install the compile hooks on: every call compiles
            install_compile_hooks()
        disp = numba.njit(
            cache=_config.CACHE and not own_cache,
            nogil=True,
            parallel=parallel,
            fastmath=fm,
            inline=inline,
            no_cfunc_wrapper=True,
        )(fn)
        if own_cache and hasattr(disp, "_cache"):
            disp._cache = _FUNCTION_CACHE(fn)  # what enable_caching() does, with jkofast's locator first
        REGISTRY[f"{fn.__module__}.{fn.__name__}"] = disp
        _KERNELS.add(disp)
        return disp

    return deco


def register_warmup(name: str):
    """Register a zero-argument warm-up callable under ``name`` (decorator; returns it unchanged)."""

    def deco(fn):
        WARMUPS[name] = fn
        return fn

    return deco
