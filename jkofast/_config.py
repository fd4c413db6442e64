"""Environment switches, read once at import.

``JKOFAST_NUMBA_CACHE``  "1" (default) caches compiled kernels on disk; "0" disables.
``JKOFAST_CACHE_DIR``    folder of that cache (default ``$XDG_CACHE_HOME/jkofast/numba``, i.e.
                         ``~/.cache/jkofast/numba``; never inside the installed package, so a
                         reinstall or an editable install beside it cannot be shadowed by stale
                         cache folders). ``NUMBA_CACHE_DIR``, when set, wins (Numba's own layout).
``JKOFAST_NUM_THREADS``  default thread count used by ``numba_threads(None)``.

Tunables of the algorithms are *arguments*, never module globals: Numba freezes
globals at compile time (docs/develop.md, "The compile-time rules").
"""

from __future__ import annotations

import os

__all__ = ["CACHE", "CACHE_DIR", "DEFAULT_THREADS", "FASTMATH_ARITH", "FASTMATH_STRICT"]

CACHE: bool = os.environ.get("JKOFAST_NUMBA_CACHE", "1").strip() not in ("0", "false", "no")
CACHE_DIR: str = os.environ.get("JKOFAST_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "jkofast", "numba"
)

# Named fastmath presets (never ``fastmath=True``).  ``FASTMATH_ARITH`` is for pure
# arithmetic leaves (dot products, BM25 accumulation, norms, matvecs); it keeps
# nnan/ninf off so ``isfinite`` checks and -inf sentinels keep their meaning.
FASTMATH_ARITH = frozenset({"nsz", "arcp", "contract", "reassoc"})
# Strict IEEE: log-domain Sinkhorn, top-k with -inf sentinels, anything with isfinite.
FASTMATH_STRICT = False

_nt = os.environ.get("JKOFAST_NUM_THREADS")
DEFAULT_THREADS: int | None = int(_nt) if _nt else None
