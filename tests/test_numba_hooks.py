"""The hooks into Numba internals (``jkofast._numba``): entry point, inliner, parfor lowering, version guard."""

from __future__ import annotations

import collections
import re

import numba
import numpy as np
import pytest

from jkofast import _numba


@numba.njit(cache=False)
def _add_one(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] + 1.0


def test_entry_point_calls_the_compiled_overload():
    x, out = np.arange(3.0), np.zeros(3)
    assert _numba.entry_point(_add_one, (x, out)) is None  # nothing compiled yet: the dispatcher
    _add_one(x, out)
    ep = _numba.entry_point(_add_one, (x, out))
    if not _numba._HOOKS_TESTED:  # an untested Numba: never the internals
        assert ep is None
        return
    got = np.zeros(3)
    ep(x, got)
    np.testing.assert_array_equal(got, out)
    assert _numba.entry_point(_add_one, (x.astype(np.float32), out)) is None  # another overload


def test_an_untested_numba_goes_through_the_dispatcher(monkeypatch):
    x, out = np.arange(3.0), np.zeros(3)
    _add_one(x, out)
    monkeypatch.setattr(_numba, "_HOOKS_TESTED", False)
    assert _numba.entry_point(_add_one, (x, out)) is None
    assert _numba.entry_point(object(), (x,)) is None  # no overloads table (internals moved)


# hook 4: the IR inliner's copy (jkofast._numba.install_inline_copy)


@numba.njit(inline="always", cache=False)
def _clip_sum(x, lo, hi):
    s = 0.0
    for v in x:
        if v < lo:
            s += lo
        elif v > hi:
            s += hi
        else:
            s += v
    return s


def _two_sums(x):
    return _clip_sum(x, 0.0, 1.0) + _clip_sum(x, -1.0, 0.5)


def _dump(blocks) -> str:
    import io

    buf = io.StringIO()
    for label, block in blocks.items():
        buf.write(f"{label}:\n")
        block.dump(file=buf)
    return buf.getvalue()


def _llvm_without_ids(disp, sig) -> str:
    import re

    text = disp.inspect_llvm(sig)
    text = re.sub(r"B\d+v\d+", "B#v", text)  # the dispatcher's unique id in the mangled names
    text = re.sub(r"B\d+c8tJTIeF\w+", "B#", text)  # the flags' abi tag
    text = re.sub(r"_v\d+_", "_v#_", text)  # an inlined callee's unique id in its variables' names
    text = re.sub(r"\[\d+ x i8\]", "[# x i8]", text)  # the length of a string constant holding such ids
    # block labels come from a counter of the process: numbered again by first appearance
    labels: dict[str, str] = {}
    text = re.sub(r"\bB\d+\b", lambda m: labels.setdefault(m.group(0), f"L{len(labels)}"), text)
    return re.sub(r" +", " ", text)  # the comments' alignment follows the labels' lengths


def test_inline_copy_copies_a_pass_with_one_scope_and_the_same_ir():
    from numba.core import compiler, ir

    src = compiler.run_frontend(_clip_sum.py_func).blocks
    assert len(src) > 3 and len({id(b.scope) for b in src.values()}) == 1
    ic = _numba._InlineCopy(ir.Block)
    first = {k: ic.deepcopy(b) for k, b in src.items()}
    scopes = {id(b.scope) for b in first.values()}
    assert len(scopes) == 1 and id(next(iter(src.values())).scope) not in scopes  # one new scope, shared
    # what Numba's block-by-block deepcopy gives, printed alike
    assert _dump(first) == _dump({k: __import__("copy").deepcopy(b) for k, b in src.items()}) == _dump(src)
    # the same blocks again, or the copy's blocks: a new pass, a new scope
    again = {k: ic.deepcopy(b) for k, b in src.items()}
    of_copy = {k: ic.deepcopy(b) for k, b in first.items()}
    s1, s2, s3 = (next(iter(d.values())).scope for d in (first, again, of_copy))
    assert s1 is not s2 and s3 is not s1 and s3 is not s2
    assert _dump(again) == _dump(of_copy) == _dump(src)
    # anything else goes to copy.deepcopy untouched
    loc = ir.Loc("f", 1)
    assert ic.deepcopy(loc) == loc and ic.deepcopy([1, [2]]) == [1, [2]]


def test_inline_copy_keeps_the_machine_code(monkeypatch):
    from numba.core import inline_closurecall

    x = np.linspace(-2.0, 2.0, 9)
    monkeypatch.setattr(inline_closurecall, "copy", __import__("copy"))
    plain = numba.njit(cache=False)(_two_sums)
    want = plain(x)
    installed = _numba.install_inline_copy()
    assert installed == _numba._HOOKS_TESTED
    assert isinstance(inline_closurecall.copy, _numba._InlineCopy) == installed
    hooked = numba.njit(cache=False)(_two_sums)
    assert hooked(x) == want == sum(min(max(v, 0.0), 1.0) + min(max(v, -1.0), 0.5) for v in x)
    sig = plain.signatures[0]
    assert _llvm_without_ids(hooked, sig) == _llvm_without_ids(plain, sig)


def test_an_untested_numba_keeps_its_own_inline_copy(monkeypatch):
    monkeypatch.setattr(_numba, "_HOOKS_TESTED", False)
    assert _numba.install_inline_copy() is False


# hook 5: each tuple element a prange loop reads, loaded alone (jkofast._numba.install_parfor_args)

_Rows = collections.namedtuple("_Rows", ["a", "b", "w"])


@numba.njit(cache=False)
def _row_value(rows, i):
    return rows.a[i] * rows.w + rows.b[i]


def _scaled_rows(rows, out):
    for i in numba.prange(out.shape[0]):
        out[i] = _row_value(rows, i)  # the loop reads the whole tuple: Numba passes each element apart


def _canonical_function(body: str) -> str:
    """An LLVM function's text with its symbols as ``@G`` and its local names numbered by first use."""
    names: dict[str, str] = {}

    def number(name: str) -> str:
        return names.setdefault(name, f"%v{len(names)}")

    body = re.sub(r'@("[^"]*"|[-\w.$]+)', "@G", body)
    body = re.sub(r'%("[^"]*"|[-\w.$]+)', lambda x: number(x.group(0)), body)
    body = re.sub(r'^("[^"]*"|[-\w.$]+):', lambda x: number("%" + x.group(1)) + ":", body, flags=re.M)
    return re.sub(r";.*", "", body)


def _canonical_functions(text: str) -> list[str]:
    """Every function defined in the LLVM module ``text``, canonical (:func:`_canonical_function`), sorted."""
    return sorted(
        _canonical_function(m.group(0)) for m in re.finditer(r"^define [^\n]*\{\n.*?^\}\n", text, re.S | re.M)
    )


def test_parfor_args_load_each_tuple_element_alone_and_keep_the_machine_code(monkeypatch):
    from numba.parfors import parfor_lowering

    rows = _Rows(np.arange(5.0), np.ones(5), 2.0)
    numba_own = getattr(parfor_lowering.call_parallel_gufunc, "__wrapped__", parfor_lowering.call_parallel_gufunc)
    monkeypatch.setattr(parfor_lowering, "call_parallel_gufunc", numba_own)
    plain = numba.njit(parallel=True, cache=False)(_scaled_rows)
    want = np.zeros(5)
    plain(rows, want)
    installed = _numba.install_parfor_args()
    assert installed == _numba._HOOKS_TESTED
    if not installed:
        assert parfor_lowering.call_parallel_gufunc is numba_own
        return
    loaded = []
    element = _numba._tuple_element_pointer
    monkeypatch.setattr(
        _numba, "_tuple_element_pointer", lambda lowerer, tup, i: (loaded.append(i), element(lowerer, tup, i))[1]
    )
    hooked = numba.njit(parallel=True, cache=False)(_scaled_rows)
    got = np.zeros(5)
    hooked(rows, got)
    np.testing.assert_array_equal(want, np.arange(5.0) * 2.0 + 1.0)
    np.testing.assert_array_equal(got, want)
    assert sorted(loaded) == [0, 1, 2]  # each element of the tuple, from its field of the stack slot
    sig = plain.signatures[0]
    assert len(_canonical_functions(plain.inspect_llvm(sig))) > 3  # the kernel, the loop body, its launchers
    assert _canonical_functions(hooked.inspect_llvm(sig)) == _canonical_functions(plain.inspect_llvm(sig))


def test_an_untested_numba_keeps_its_own_parfor_lowering(monkeypatch):
    monkeypatch.setattr(_numba, "_HOOKS_TESTED", False)
    assert _numba.install_parfor_args() is False


# hook 6: a strict prange loop's body and wrappers linked into the kernel, optimised and emitted once there


@numba.njit(cache=False)
def _root_plus_one(x, i):
    return np.sqrt(x[i]) + 1.0


@numba.njit(cache=False, fastmath={"reassoc", "nsz"})
def _half_plus_one(x, i):
    return x[i] * 0.5 + 1.0


def _root_rows(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = _root_plus_one(x, i)


def _half_rows(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = _half_plus_one(x, i)


def _numba_own_parfor_libraries(monkeypatch):
    """Put Numba's own two functions back where hook 6 wraps them (undone with ``monkeypatch``)."""
    from numba.np.ufunc import parallel
    from numba.parfors import parfor_lowering

    for mod, name in ((parfor_lowering, "_create_gufunc_for_parfor_body"), (parallel, "build_gufunc_wrapper")):
        fn = getattr(mod, name)
        monkeypatch.setattr(mod, name, getattr(fn, "__wrapped__", fn))


def _compiled(monkeypatch, py_func, x, **options):
    """Compile and run ``py_func`` as a ``prange`` kernel on ``x``: (output, libraries emitted, hook 6 libraries)."""
    from numba.core import codegen

    emitted, linked = [], []
    with monkeypatch.context() as m:
        emit = codegen.JITCodeLibrary._finalize_specific
        m.setattr(codegen.JITCodeLibrary, "_finalize_specific", lambda lib: (emitted.append(lib.name), emit(lib))[1])
        if _numba._HOOKS_TESTED:
            cls = _numba._link_only_library()
            finalize = cls.finalize
            m.setattr(cls, "finalize", lambda lib: (finalize(lib), linked.append((lib.name, lib.link_only)))[0])
        out = np.zeros_like(x)
        numba.njit(parallel=True, cache=False, **options)(py_func)(x, out)
    return out, emitted, linked


def _callee_compiled(callee, x):
    """Compile ``callee`` for both index types a prange loop calls it with (the kernel's int64, the body's uint64)."""
    callee(x, 0)
    callee(x, np.uint64(0))


def test_parfor_link_once_emits_a_strict_loop_once_and_computes_the_same(monkeypatch):
    x = np.linspace(0.0, 3.0, 7)
    _callee_compiled(_root_plus_one, x)  # its own machine code is not counted below
    _numba_own_parfor_libraries(monkeypatch)
    want, emitted_plain, _ = _compiled(monkeypatch, _root_rows, x)
    np.testing.assert_array_equal(want, np.sqrt(x) + 1.0)
    assert len(emitted_plain) == 4  # Numba's own: the body, its gufunc wrapper, the launcher, the kernel
    installed = _numba.install_parfor_link_once()
    assert installed == _numba._HOOKS_TESTED
    if not installed:
        return
    got, emitted, linked = _compiled(monkeypatch, _root_rows, x)
    assert got.tobytes() == want.tobytes()
    assert emitted == ["_root_rows"]  # the kernel alone, whose module links the other three
    assert [name.split("_0x")[0].split(" object")[0] for name, _ in linked] == [
        "__numba_parfor_gufunc",
        "<numba.np.ufunc.wrappers._GufuncWrapper",
        "parallelgufuncwrapper",
    ]
    assert all(link_only for _, link_only in linked)
    codegen = numba.core.registry.cpu_target.target_context.codegen()
    assert "create_library" not in vars(codegen)  # Numba's own again after the compile


def test_parfor_link_once_leaves_fast_math_to_numba(monkeypatch):
    x = np.linspace(0.0, 3.0, 7)
    _callee_compiled(_half_plus_one, x)
    _callee_compiled(_root_plus_one, x)
    _numba_own_parfor_libraries(monkeypatch)
    want, emitted_plain, _ = _compiled(monkeypatch, _half_rows, x)
    if not _numba.install_parfor_link_once():
        return
    got, emitted, linked = _compiled(monkeypatch, _half_rows, x)
    assert got.tobytes() == want.tobytes()
    np.testing.assert_array_equal(got, x * 0.5 + 1.0)
    # the kernel is strict, its callee is not: hook 6's libraries finalize as Numba's own, each emitted
    assert [link_only for _, link_only in linked] == [False, False, False]
    assert len(emitted) == len(emitted_plain) == 4
    # a fast-math kernel: Numba's own libraries throughout
    got, emitted, linked = _compiled(monkeypatch, _root_rows, x, fastmath={"reassoc", "nsz"})
    assert linked == []
    assert len(emitted) == 4
    np.testing.assert_allclose(got, np.sqrt(x) + 1.0)


def test_an_untested_numba_keeps_its_own_parfor_libraries(monkeypatch):
    monkeypatch.setattr(_numba, "_HOOKS_TESTED", False)
    assert _numba.install_parfor_link_once() is False


# hook 7: an @overload implementation compiled once for callers that differ only in options it does not take over


def _overload_counted():
    """A fresh Python function with an ``@overload``, and the list its typing function appends to per build."""
    from numba.extending import overload

    def twice_plus_one(x):  # pragma: no cover - only its overload runs
        raise NotImplementedError

    built = []

    @overload(twice_plus_one)
    def _ol(x):
        built.append(x)
        return lambda x: x * 2.0 + 1.0

    def kernel_body(x):
        return twice_plus_one(x)

    return kernel_body, built


def test_overload_sharing_builds_an_implementation_once_per_inherited_options(monkeypatch):
    from numba.core.typing import templates

    x = np.linspace(-1.0, 1.0, 5)
    # Numba's own: one build per caller option set, though nogil never reaches the implementation
    own = templates._OverloadFunctionTemplate._get_impl
    monkeypatch.setattr(templates._OverloadFunctionTemplate, "_get_impl", getattr(own, "__wrapped__", own))
    body, built = _overload_counted()
    want = numba.njit(cache=False)(body)(x)
    assert numba.njit(cache=False, nogil=True)(body)(x).tobytes() == want.tobytes()
    assert len(built) == 2
    monkeypatch.undo()

    installed = _numba.install_overload_sharing()
    assert installed == _numba._HOOKS_TESTED
    if not installed:
        return
    body, built = _overload_counted()
    got = numba.njit(cache=False)(body)(x)
    got_nogil = numba.njit(cache=False, nogil=True, no_cfunc_wrapper=True)(body)(x)
    assert got.tobytes() == got_nogil.tobytes() == want.tobytes()
    np.testing.assert_array_equal(got, x * 2.0 + 1.0)
    assert len(built) == 1
    # fastmath and the error model reach the implementation's compile: each gets its own build
    numba.njit(cache=False, fastmath={"contract"})(body)(x)
    numba.njit(cache=False, error_model="numpy")(body)(x)
    assert len(built) == 3


def test_overload_sharing_needs_the_options_it_was_written_for(monkeypatch):
    from numba.core.typing import templates

    own = templates._OverloadFunctionTemplate._get_impl
    monkeypatch.setattr(templates._OverloadFunctionTemplate, "_get_impl", getattr(own, "__wrapped__", own))
    monkeypatch.setattr(_numba, "_INHERITED_OPTIONS", ("nrt", "fastmath"))
    assert _numba.install_overload_sharing() is False
    assert not hasattr(templates._OverloadFunctionTemplate._get_impl, "__wrapped__")


def test_an_untested_numba_keeps_its_own_overload_cache(monkeypatch):
    monkeypatch.setattr(_numba, "_HOOKS_TESTED", False)
    assert _numba.install_overload_sharing() is False


# hook 8: a kernel's callee compiled without its CPython wrapper, which a Python call builds
# (jkofast._numba.install_python_entry_on_demand)


def _total_or_raise(x):
    if x.shape[0] == 0:
        raise ValueError("no values")
    return x.sum()


def _fresh_pair(under_a_kernel: bool):
    """A caller and its two callees, new dispatchers on every call; the caller counted as a jkofast kernel or not."""
    doubled = numba.njit(cache=False)(lambda x: x * 2.0)  # returns an array: its wrapper boxes with the runtime
    total = numba.njit(cache=False)(_total_or_raise)

    def both(x):
        return doubled(x).sum() + total(x)

    caller = numba.njit(cache=False)(both)
    if under_a_kernel:
        _numba._KERNELS.add(caller)
    return caller, doubled, total


def test_a_kernels_callee_gets_its_python_entry_when_python_calls_it():
    installed = _numba.install_python_entry_on_demand()
    assert installed == _numba._HOOKS_TESTED
    caller, doubled, total = _fresh_pair(under_a_kernel=True)
    x = np.arange(5.0)
    assert caller(x) == 3.0 * x.sum()
    (sig,) = doubled.overloads
    library = doubled.overloads[sig].library
    if installed:  # compiled for the caller only: no wrapper, and no entry point to call
        assert not _numba._has_python_entry(doubled.overloads[sig])
        assert not _numba._has_python_entry(total.overloads[sig])
        assert _numba.entry_point(doubled, (x,)) is None
    np.testing.assert_array_equal(doubled(x), x * 2.0)
    assert total(x) == x.sum()
    with pytest.raises(ValueError, match="no values"):  # the kernel's exception reaches Python through the wrapper
        total(np.zeros(0))
    # the same machine code, now with its wrapper: nothing compiled again
    assert list(doubled.overloads) == [sig] and doubled.overloads[sig].library is library
    assert _numba._has_python_entry(doubled.overloads[sig])
    ep = _numba.entry_point(doubled, (x,))
    if installed:
        np.testing.assert_array_equal(ep(x), x * 2.0)
    assert caller(x[::-1].copy()) == 3.0 * x.sum()  # the callers' calls still find the overload


def test_a_callee_of_other_code_keeps_numbas_wrapper():
    _numba.install_python_entry_on_demand()
    caller, doubled, _ = _fresh_pair(under_a_kernel=False)
    x = np.arange(3.0)
    assert caller(x) == 3.0 * x.sum()
    (sig,) = doubled.overloads
    assert _numba._has_python_entry(doubled.overloads[sig])


def test_threads_calling_a_bare_callee_get_one_entry():
    from concurrent.futures import ThreadPoolExecutor

    _numba.install_python_entry_on_demand()
    caller, doubled, _ = _fresh_pair(under_a_kernel=True)
    x = np.arange(7.0)
    caller(x)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(doubled, [x] * 8))
    for g in got:
        np.testing.assert_array_equal(g, x * 2.0)
    (sig,) = doubled.overloads
    assert _numba._has_python_entry(doubled.overloads[sig])


_CACHED_PAIR = """
import json
import sys
import numpy as np
from jkofast._numba import _has_python_entry, kernel

@kernel()
def doubled(x):
    return x * 2.0

@kernel()
def scaled(pair):  # a tuple argument: its wrapper unboxes it with integer constants
    return pair[1] * pair[0]

@kernel()
def caller(x):
    return doubled(x).sum() + scaled((2.0, x)).sum()

x = np.arange(4.0)
if sys.argv[1] == "caller":
    total = caller(x)
    bare = [not _has_python_entry(cres) for k in (doubled, scaled) for cres in k.overloads.values()]
    print(json.dumps({"sum": total, "bare": bare}))
else:  # the process's first calls: no compile has run in it
    got = {"scaled": scaled((2.0, x)).tolist(), "doubled": doubled(x).tolist()}
    for name, k in (("hits", "cache_hits"), ("misses", "cache_misses")):
        got[name] = sum(sum(getattr(f.stats, k).values()) for f in (doubled, scaled))
    print(json.dumps(got))
"""


def test_a_bare_callee_loaded_from_the_cache_is_called_from_python(tmp_path):
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "pair.py").write_text(_CACHED_PAIR)
    env = {**os.environ, "JKOFAST_CACHE_DIR": str(tmp_path / "cache"), "JKOFAST_NUMBA_CACHE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)

    def run(which: str) -> dict:
        out = subprocess.run([sys.executable, "pair.py", which], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    x = np.arange(4.0)
    # compiles them all into the cache: the callees for their caller only (no wrapper)
    assert run("caller") == {"sum": 2 * float((x * 2.0).sum()), "bare": [_numba._HOOKS_TESTED] * 2}
    # a new process loads the callees from the cache, compiles nothing, and Python can call them
    want = (x * 2.0).tolist()
    assert run("callee") == {"scaled": want, "doubled": want, "hits": 2, "misses": 0}


def test_an_untested_numba_keeps_every_wrapper(monkeypatch):
    monkeypatch.setattr(_numba, "_HOOKS_TESTED", False)
    assert _numba.install_python_entry_on_demand() is False


# the same wrapper pauses the cyclic garbage collector for a kernel's outermost compile
# (jkofast._numba._collector_paused)


def _collector_seen_by_compiles(caller, x) -> list[tuple[str, bool]]:
    """Each compile's function name and whether the collector was on when it started, for one call of ``caller``."""
    import gc

    from numba.core import event

    seen = []

    class Seen(event.Listener):
        def on_start(self, e):
            seen.append((e.data["dispatcher"].py_func.__name__, gc.isenabled()))

        def on_end(self, e):
            pass

    with event.install_listener("numba:compile", Seen()):
        caller(x)
    return seen


def test_the_collector_is_paused_for_a_kernels_compile_and_back_after():
    import gc

    installed = _numba.install_python_entry_on_demand()
    caller, _, _ = _fresh_pair(under_a_kernel=True)
    assert gc.isenabled()
    seen = _collector_seen_by_compiles(caller, np.arange(3.0))
    names = [name for name, _ in seen]
    assert names[0] == "both" and {"<lambda>", "_total_or_raise"} <= set(names)
    assert all(on is not installed for _, on in seen)  # off through the caller's and all its callees' compiles
    assert gc.isenabled()
    # a compile outside jkofast's kernels keeps the collector on
    other, _, _ = _fresh_pair(under_a_kernel=False)
    assert all(on for _, on in _collector_seen_by_compiles(other, np.arange(3.0)))


def test_a_collector_the_process_switched_off_stays_off():
    import gc

    _numba.install_python_entry_on_demand()
    caller, _, _ = _fresh_pair(under_a_kernel=True)
    gc.disable()
    try:
        assert caller(np.arange(4.0)) == 3.0 * 6.0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_back_on_after_a_compile_that_raises():
    import gc

    from numba.core.errors import TypingError

    _numba.install_python_entry_on_demand()
    caller, _, _ = _fresh_pair(under_a_kernel=True)
    with pytest.raises(TypingError):
        caller("not an array")
    assert gc.isenabled()


# hook 9: a kernel calling another through the address of its machine code (jkofast._numba.native_call)

_NATIVE_PAIR = """
import json
import sys
import numpy as np
from jkofast._numba import kernel, native_call, native_entry

@kernel()
def spread(a, w, t):  # writes into a and returns a status, as the JKO flow does
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * w
    if s < 0.0:
        raise ValueError("negative total")
    a[0] = s
    return np.int64(1) if t is None else np.int64(2)

call_spread = native_call(spread, -7)

@kernel()
def caller(a, w, entry):
    return call_spread(entry, (a[1:], w, None))

a = np.arange(5.0)
entry = native_entry(spread, (a, 2.0, None))  # a's slices are of a's type
wrong = (entry[0], entry[1] ^ 1)
got = {"status": int(caller(a, 2.0, entry)), "a": a.tolist()}
got["mismatch"] = int(caller(a, 2.0, wrong))
got["after_mismatch"] = a.tolist()
try:
    caller(a, -1.0, entry)
except ValueError as e:
    got["raised"] = str(e)
got["compiled"] = len(caller.stats.cache_misses) > 0 and sum(caller.stats.cache_misses.values())
print(json.dumps(got))
"""


def test_a_native_call_runs_the_callee_at_its_address_and_refuses_another_key(tmp_path):
    # the caller's machine code holds the key of the callee's argument types, never an address: a second
    # process loads it from the cache and calls the callee compiled (or loaded) there
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "pair.py").write_text(_NATIVE_PAIR)
    env = {**os.environ, "JKOFAST_CACHE_DIR": str(tmp_path / "cache"), "JKOFAST_NUMBA_CACHE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)

    def run() -> dict:
        out = subprocess.run([sys.executable, "pair.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    first, second = run(), run()
    total = 2.0 * (1 + 2 + 3 + 4)
    want = {"status": 1, "a": [0.0, total, 2.0, 3.0, 4.0], "raised": "negative total"}
    # the wrong key: nothing called, nothing written (on an untested Numba the call is linked and runs)
    want |= {"mismatch": -7, "after_mismatch": want["a"]} if _numba._HOOKS_TESTED else {"mismatch": 1}
    for got in (first, second):
        assert {k: got[k] for k in want} == want
    assert first["compiled"] >= 1 and second["compiled"] == 0  # the second process loaded the caller


def test_a_native_entry_is_kept_per_process_and_keyed_by_the_argument_types(monkeypatch):
    from jkofast.kernels.jko import solver as k

    if not _numba._HOOKS_TESTED:
        assert _numba.native_entry(k.jko_flow, ()) == (0, 0)
        return
    x = np.arange(3.0)
    one = _numba.native_entry(_add_one, (x, np.zeros(3)))
    assert one[0] != 0 and one[1] == _numba._entry_key((numba.types.float64[::1],) * 2)
    # found again without typing the arguments; arrays of another type (read-only, float32) are another entry
    monkeypatch.setattr(_add_one, "typeof_pyval", None)
    assert _numba.native_entry(_add_one, (np.ones(7), np.ones(7))) == one
    monkeypatch.undo()
    ro = np.zeros(3)
    ro.flags.writeable = False
    other = _numba.native_entry(_add_one, (ro, np.zeros(3)))
    read_only = numba.types.Array(numba.types.float64, 1, "C", readonly=True)
    assert other != one and other[1] == _numba._entry_key((read_only, numba.types.float64[::1]))


def test_an_untested_numba_links_the_native_call(monkeypatch):
    # outside the tested versions the intrinsic lowers an ordinary call of the kernel: the entry is not read
    monkeypatch.setattr(_numba, "_NATIVE", False)
    call = _numba.native_call(_add_one, -1)

    @numba.njit(cache=False)
    def caller(x, out, entry):
        call(entry, (x, out))
        return out.sum()

    x = np.arange(3.0)
    assert caller(x, np.zeros(3), (0, 0)) == 6.0
    assert _numba.native_entry(_add_one, ()) == (0, 0)


# hook 10: the name sets of Numba's IR utilities copied a set at a time (jkofast._numba.install_name_set_copy)


def test_name_set_copy_copies_each_set_whole_and_hands_anything_else_to_deepcopy(monkeypatch):
    import copy

    shim = _numba._NameSetCopy()
    copies = {0: {("a", "b"), ("c", "a")}, 7: set(), 9: {("b", "d")}}  # copy propagation's out-copies
    aliases = {"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}  # alias analysis's map
    for d in (copies, aliases):
        got = shim.deepcopy(d)
        assert got == d and got == copy.deepcopy(d)
        assert all(got[k] is not d[k] for k in d)  # new sets: the original may change, the copy does not
    handed = []
    real = copy.deepcopy
    monkeypatch.setattr(copy, "deepcopy", lambda x, memo=None: (handed.append(x), real(x, memo))[1])
    shim.deepcopy(copies)
    assert handed == []
    others = [
        {"a": ["b"]},  # a list, not a set
        {"a": {("b", 1)}},  # a pair that is not of names
        {1.5: {"a"}},  # a key that is no name or label
        [{"a"}],  # not a dict
    ]
    for x in others:
        got = shim.deepcopy(x)
        assert got == x and handed[-1] is x
    memo: dict = {}
    shim.deepcopy(copies, memo)
    assert handed[-1] is copies and memo  # a memo: Numba's own deepcopy, which fills it
    assert shim.copy is copy.copy  # the rest of the module is the real one


def _copies_and_aliases(x, out):
    y = x  # an alias of the argument, and copies inside the loop: both analyses have work
    z = y
    for i in numba.prange(out.shape[0]):
        a = z[i]
        b = a
        c = b if b > 0.5 else -b
        out[i] = c + a


def test_name_set_copy_keeps_the_machine_code(monkeypatch):
    import copy

    from numba.core import ir_utils

    x = np.linspace(0.0, 1.0, 7)
    monkeypatch.setattr(ir_utils, "copy", copy)
    plain = numba.njit(parallel=True, cache=False)(_copies_and_aliases)
    want = np.zeros(7)
    plain(x, want)
    installed = _numba.install_name_set_copy()
    assert installed == _numba._HOOKS_TESTED
    assert isinstance(ir_utils.copy, _numba._NameSetCopy) == installed
    fast = []
    shim_copy = _numba._NameSetCopy.deepcopy
    monkeypatch.setattr(
        _numba._NameSetCopy, "deepcopy", staticmethod(lambda x, memo=None: (fast.append(x), shim_copy(x, memo))[1])
    )
    hooked = numba.njit(parallel=True, cache=False)(_copies_and_aliases)
    got = np.zeros(7)
    hooked(x, got)
    np.testing.assert_array_equal(want, np.where(x > 0.5, x, -x) + x)
    np.testing.assert_array_equal(got, want)
    if installed:
        assert fast  # the parfor pass's copy propagation went through the hook
    sig = plain.signatures[0]
    assert _canonical_functions(hooked.inspect_llvm(sig)) == _canonical_functions(plain.inspect_llvm(sig))


def test_an_untested_numba_keeps_its_own_name_set_copy(monkeypatch):
    monkeypatch.setattr(_numba, "_HOOKS_TESTED", False)
    assert _numba.install_name_set_copy() is False
