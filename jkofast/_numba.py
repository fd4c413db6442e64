"""The one place kernels are compiled from.

``kernel(parallel=..., fastmath=...)`` = ``numba.njit(cache=_config.CACHE, nogil=True, ...)``
and records the dispatcher in ``REGISTRY`` (``tests/test_numba_hygiene.py`` checks that every
``@njit`` in ``jkofast.kernels`` came from here and that nothing compiles at import).

Warm-up: wrapper modules register a zero-argument callable with ``register_warmup`` that
runs their kernels on 3-element inputs of every supported dtype; ``jkofast.warmup()``
imports the wrapper modules and calls them all.
"""

from __future__ import annotations

from collections.abc import Callable

import numba

from jkofast import _config

__all__ = ["REGISTRY", "WARMUPS", "kernel", "register_warmup"]

REGISTRY: dict[str, object] = {}
WARMUPS: dict[str, Callable[[], None]] = {}


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
        ``nogil=True``), recorded in ``REGISTRY`` under ``"<module>.<name>"``.

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
        disp = numba.njit(
            cache=_config.CACHE,
            nogil=True,
            parallel=parallel,
            fastmath=fm,
            inline=inline,
        )(fn)
        REGISTRY[f"{fn.__module__}.{fn.__name__}"] = disp
        return disp

    return deco


def register_warmup(name: str):
    """Register a zero-argument warm-up callable under ``name`` (decorator; returns it unchanged)."""

    def deco(fn):
        WARMUPS[name] = fn
        return fn

    return deco
