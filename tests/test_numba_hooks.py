"""The hooks into Numba internals (``jkofast._numba``): ``entry_point``, the inliner's copy, and their version guard."""

from __future__ import annotations

import numba
import numpy as np

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
