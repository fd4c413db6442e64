"""Environment switches, read once at import.

``JKOFAST_NUMBA_CACHE``  "1" (default) caches compiled kernels on disk; "0" disables.
``JKOFAST_NUM_THREADS``  default thread count used by ``numba_threads(None)``.

Tunables of the algorithms are *arguments*, never module globals: Numba freezes
globals at compile time.
"""

from __future__ import annotations

import os

__all__ = ["CACHE", "DEFAULT_THREADS", "FASTMATH_ARITH", "FASTMATH_STRICT"]

CACHE: bool = os.environ.get("JKOFAST_NUMBA_CACHE", "1").strip() not in ("0", "false", "no")

# Named fastmath presets (never ``fastmath=True``).  ``FASTMATH_ARITH`` is for pure
# arithmetic leaves (dot products, BM25 accumulation, norms, matvecs); it keeps
# nnan/ninf off so ``isfinite`` checks and -inf sentinels keep their meaning.
FASTMATH_ARITH = frozenset({"nsz", "arcp", "contract", "reassoc"})
# Strict IEEE: log-domain Sinkhorn, top-k with -inf sentinels, anything with isfinite.
FASTMATH_STRICT = False

_nt = os.environ.get("JKOFAST_NUM_THREADS")
DEFAULT_THREADS: int | None = int(_nt) if _nt else None
