"""Naive NumPy/SciPy oracles: slow, obviously correct.  One section module per area
(``reference_<area>.py``); everything is re-exported here so tests write
``import reference as ref``."""

from __future__ import annotations

import importlib
import os

_here = os.path.dirname(__file__)
for _f in sorted(os.listdir(_here)):
    if _f.startswith("reference_") and _f.endswith(".py"):
        _m = importlib.import_module(_f[:-3])
        globals().update({k: v for k, v in vars(_m).items() if not k.startswith("_")})


def topk_desc_lowest_index(scores, k):
    """Top-k by (score desc, index asc) via a stable lexsort."""
    import numpy as np

    s = np.asarray(scores)
    order = np.lexsort((np.arange(s.shape[-1]), -s))
    return order[:k]


def sorted_range(x, lo, hi):
    """``x`` with ``x[lo:hi]`` sorted ascending: Python's ``sorted`` on the range's values."""
    import numpy as np

    out = np.array(x, copy=True)
    out[lo:hi] = sorted(x[lo:hi].tolist())
    return out


def argsort_stable(x):
    """Indices that sort ``x`` ascending, equal keys in index order and NaN last: Python's ``sorted``
    (a stable sort) of the indices, keyed by (is NaN, value)."""
    import math

    import numpy as np

    vals = x.tolist()
    nan = [isinstance(v, float) and math.isnan(v) for v in vals]
    return np.array(sorted(range(len(vals)), key=lambda i: (nan[i], 0 if nan[i] else vals[i])), np.int64)


def exp_table_exact(table_bits=7):
    """glibc's ``__exp_data.tab`` computed exactly: pairs ``(bits of T_j, bits of H_j - (j << (52 - bits)))``
    with ``H_j`` the double nearest ``2**(j/N)`` and ``T_j`` the double nearest ``2**(j/N)/H_j - 1``
    (``N = 2**bits``; ``2**(j/N)`` to 300 bits by ``bits`` integer square roots, rounded once by ``Fraction``)."""
    import math
    import struct
    from fractions import Fraction

    import numpy as np

    n, prec = 1 << table_bits, 300
    out = []
    for j in range(n):
        x = 1 << (j + n * prec)  # 2**(j/N) * 2**prec = (2**(j + N prec))**(1/N)
        for _ in range(table_bits):
            x = math.isqrt(x)
        v = Fraction(x, 1 << prec)
        h = float(v)
        t = float(v / Fraction(h) - 1)
        hb = struct.unpack("<Q", struct.pack("<d", h))[0]
        out += [struct.unpack("<Q", struct.pack("<d", t))[0], (hb - (j << (52 - table_bits))) % (1 << 64)]
    return np.array(out, dtype=np.uint64)
