"""IEEE-754 scalar operations as inline machine code for the implicit path's O(M) loops: ``exp_tab``, ``div``.

Both return exactly what IEEE arithmetic (and, for ``exp_tab``, the C library) returns; they differ from
``np.exp`` and ``/`` only in what the compiled loop around them can do.

``div(a, b)`` is ``a / b`` without Numba's zero-divisor test (its ``error_model="python"`` raises
``ZeroDivisionError``): the branch and the exception path keep LLVM from vectorising any loop with a
division. The quotient is the same correctly rounded one; callers use it where the divisor cannot be 0.

``np.exp`` in a kernel is a call into the C library's ``exp`` (this build of Numba has no SVML), about
4.5-6.5 ns per element on the 2-core reference machine. ``exp_tab`` computes the same function inline
(about 2 ns): the algorithm of glibc >= 2.28 and ARM's optimized-routines (``exp.c``, ``exp_data.c``;
Szabolcs Nagy), with ``N = 128`` table entries and a degree-5 polynomial::

    x = k ln2/N + r,   |r| <= ln2/(2N)      (k = round(x N/ln2) by the 1.5 * 2**52 shift)
    exp(x) = 2**(k/N) exp(r) = scale (1 + tail + (exp(r) - 1)),   2**(j/N) = H_j (1 + T_j)

with the shift, the reduction and every multiply-add of the polynomial fused into one rounding each
(``llvm.fma``), exactly as glibc's x86-64 FMA variant (``__exp_fma``, picked at run time on every CPU
with AVX2 and FMA) is compiled: the same constants, the same table, the same seven fused operations.
Its error is below 0.51 ulp, and on such a machine it returns the C library's bits for every argument
(``tests/jko/test_exp_tab.py`` compares it with ``math.exp`` over the whole double range); on another C
library, or a CPU without FMA (``llvm.fma`` then calls the C library's ``fma``: correct, slower), the
bits are this algorithm's, within 1 ulp of that library's ``exp``. Arguments outside
``2**-54 <= |x| < 512`` (tiny, large, under/overflow, ±inf, NaN) go to ``np.exp``: the fast path covers
every argument whose result is a normal double other than 1.

Used by the implicit path only (``jkofast.kernels.jko.solver``: ``log_softmax``'s 2M exps per inner
step, the Adam step's divisions, the warm start's); the unrolled path and the log-domain Sinkhorn keep
``np.exp`` and ``/``.
"""

from __future__ import annotations

import decimal

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from jkofast._numba import kernel

__all__ = ["EXP_SBITS", "EXP_TABLE_BITS", "EXP_TAIL", "div", "exp_tab", "exp_tab_array"]

EXP_TABLE_BITS = 7
_N = 1 << EXP_TABLE_BITS


def _exp_table(table_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the C library's table ``(T, bits of H less j << (52 - table_bits))``, ``j < N = 2**table_bits``.

    ``H_j`` is the double nearest ``2**(j/N)``, ``T_j`` the double nearest ``2**(j/N) / H_j - 1``;
    ``2**(j/N)`` comes as successive products of ``2**(1/N)`` to 50 decimal digits, far beyond the
    two roundings to double (``tests/jko/test_exp_tab.py`` checks the table against exact roots).
    """
    n = 1 << table_bits
    tail = np.empty(n, np.float64)
    sbits = np.empty(n, np.int64)
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        step = (decimal.Decimal(2).ln() / n).exp()
        v = decimal.Decimal(1)
        for j in range(n):
            h = float(v)
            tail[j] = float(v / decimal.Decimal(h) - 1)
            sbits[j] = int(np.float64(h).view(np.int64)) - (j << (52 - table_bits))
            v *= step
    return tail, sbits


EXP_TAIL, EXP_SBITS = _exp_table(EXP_TABLE_BITS)

_INVLN2N = float.fromhex("0x1.71547652b82fep0") * _N
_SHIFT = float.fromhex("0x1.8p52")
_NEGLN2HIN = float.fromhex("-0x1.62e42fefa0000p-8")
_NEGLN2LON = float.fromhex("-0x1.cf79abc9e3b3ap-47")
# the degree-5 minimax coefficients of exp(r) - 1 - r on |r| <= ln2/256 published with the algorithm
# (ARM optimized-routines, MIT OR Apache-2.0 WITH LLVM-exception): the C library's bits depend on them
_C2 = float.fromhex("0x1.ffffffffffdbdp-2")
_C3 = float.fromhex("0x1.555555555543cp-3")
_C4 = float.fromhex("0x1.55555cf172b91p-5")
_C5 = float.fromhex("0x1.1111167a4d017p-7")
_TOP12_TINY = 0x3C9  # top 12 bits of 2**-54
_TOP12_SPAN = 0x408 - 0x3C9  # up to the top 12 bits of 512


@intrinsic
def _fma(typingctx, a, b, c):
    """Return ``a * b + c`` rounded once (``llvm.fma.f64``)."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        d = ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [d], ir.FunctionType(d, [d, d, d]))
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def _bits(typingctx, x):
    """Return the bits of a float64 as an int64."""
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return sig, codegen


@intrinsic
def _from_bits(typingctx, i):
    """Return the float64 whose bits are the int64 ``i``."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


@intrinsic
def div(typingctx, a, b):
    """Return ``a / b`` for float64 operands, IEEE (``fdiv``): no zero-divisor test, so the loop can vectorise."""
    sig = types.float64(types.float64, types.float64)

    def codegen(context, builder, signature, args):
        return builder.fdiv(args[0], args[1])

    return sig, codegen


@intrinsic
def _opaque(typingctx, i):
    """Return ``i`` through an empty inline-assembly block: the loop vectoriser cannot see through it.

    Without it LLVM vectorises a loop of ``exp_tab`` stores with two gathers per four lanes, which on
    CPUs with the gather microcode mitigation run at 0.91 µs per 200 exps against 0.39 µs scalar.
    """
    sig = types.int64(types.int64)

    def codegen(context, builder, signature, args):
        fty = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
        return builder.asm(fty, "", "=r,0", args, False)

    return sig, codegen


@kernel(inline="always")
def exp_tab(x):
    """Return ``exp(x)`` for a float64 ``x``: the C library's algorithm inline (module docstring).

    ``np.exp`` outside ``2**-54 <= |x| < 512`` and for NaN.
    """
    top = ((_bits(x) >> 52) & 0x7FF) - _TOP12_TINY
    if top < 0 or top >= _TOP12_SPAN:
        return np.exp(x)
    kd = _fma(x, _INVLN2N, _SHIFT)
    ki = _bits(kd)
    kd -= _SHIFT
    r = _fma(kd, _NEGLN2LON, _fma(kd, _NEGLN2HIN, x))
    j = _opaque(ki & (_N - 1))
    scale = _from_bits(EXP_SBITS[j] + (ki << (52 - EXP_TABLE_BITS)))
    r2 = r * r
    tmp = _fma(r2 * r2, _fma(r, _C5, _C4), _fma(r2, _fma(r, _C3, _C2), EXP_TAIL[j] + r))
    return _fma(scale, tmp, scale)


@kernel()
def exp_tab_array(x, out):
    """``out[i] = exp_tab(x[i])`` for float64 arrays of one shape (1-d); the oracle tests call it."""
    for i in range(x.shape[0]):
        out[i] = exp_tab(x[i])
