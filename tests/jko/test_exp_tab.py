"""``exp_tab`` (jkofast.kernels.ot.ieee) against ``math.exp`` over the whole double range.

Everywhere: within 1 ulp of ``math.exp`` for normal results, the same special values (0, subnormal, inf,
NaN, 1). On glibc >= 2.28 with an FMA CPU (the C library's ``__exp_fma``), the same bits everywhere.
"""

import math
import platform

import numpy as np
import pytest

import reference as ref
from jkofast.kernels.ot import ieee as fastexp


def _glibc_fma():
    """Whether the C library's exp is glibc's table algorithm compiled with FMA (x86-64 Linux)."""
    lib, ver = platform.libc_ver()
    if lib != "glibc" or platform.machine() != "x86_64":
        return False
    try:
        major, minor = (int(x) for x in ver.split(".")[:2])
        with open("/proc/cpuinfo") as fh:
            flags = next((ln for ln in fh if ln.startswith("flags")), "").split()
    except (ValueError, OSError):
        return False
    return (major, minor) >= (2, 28) and "fma" in flags and "avx2" in flags


def _inputs():
    rng = np.random.default_rng(7)
    parts = [
        rng.uniform(-760.0, 720.0, 400_000),  # the whole range, under- and overflow included
        rng.uniform(-1.0, 1.0, 200_000),
        -rng.exponential(3.0, 200_000),  # log-softmax arguments: theta - max <= 0
        rng.uniform(-80.0, 0.0, 200_000),
        np.ldexp(rng.uniform(0.5, 1.0, 100_000), rng.integers(-70, -40, 100_000)),  # around 2**-54
        -np.ldexp(rng.uniform(0.5, 1.0, 100_000), rng.integers(-70, -40, 100_000)),
        rng.uniform(-515.0, -509.0, 50_000),  # the fast path's edges
        rng.uniform(509.0, 515.0, 50_000),
        rng.uniform(-745.2, -708.0, 50_000),  # subnormal results
    ]
    edges = [0.0, -0.0, 2.0**-54, -(2.0**-54), np.nextafter(2.0**-54, 0), 512.0, -512.0, np.nextafter(512.0, 0)]
    edges += [-np.nextafter(512.0, 0), 709.78, 709.79, 710.0, -745.13, -745.14, -746.0, 1e300, -1e300, 5e-324]
    edges += [np.inf, -np.inf, np.nan, math.log(2.0), 1.0, -1.0]
    x = np.concatenate([*parts, np.array(edges)])
    # every table slot and both halves of the reduction: k ln2/N + r for all k in one period, r at its ends
    k = np.arange(-2 * 128, 2 * 128)
    h = math.log(2.0) / 256
    x = np.concatenate([x, k * 2 * h, k * 2 * h + 0.999 * h, k * 2 * h - 0.999 * h])
    return x


def _math_exp(v):
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _exp_tab(x):
    out = np.empty_like(x)
    fastexp.exp_tab_array(x, out)
    return out


def test_table_is_the_exact_one():
    tab = np.empty(2 * fastexp.EXP_TAIL.shape[0], np.uint64)
    tab[0::2] = fastexp.EXP_TAIL.view(np.uint64)
    tab[1::2] = fastexp.EXP_SBITS.astype(np.uint64)
    np.testing.assert_array_equal(tab, ref.exp_table_exact(fastexp.EXP_TABLE_BITS))


def test_within_one_ulp_and_special_values():
    x = _inputs()
    got = _exp_tab(x)
    want = np.array([_math_exp(v) for v in x])
    special = ~np.isfinite(want) | (want == 0.0) | (want < np.finfo(float).tiny) | (want == 1.0)
    np.testing.assert_array_equal(got[special], want[special])
    normal = ~special
    ulp = np.abs(got[normal] - want[normal]) / np.spacing(want[normal])
    assert normal.sum() > 1_000_000
    assert ulp.max() <= 1.0


@pytest.mark.skipif(not _glibc_fma(), reason="the C library's exp is not glibc's FMA variant")
def test_same_bits_as_the_c_library():
    x = _inputs()
    got = _exp_tab(x)
    want = np.array([_math_exp(v) for v in x])  # the C library (NumPy's own np.exp is a SIMD one)
    same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), x[~same][:10]
