"""``jkofast warmup``: compile (or load from the on-disk cache) every kernel."""

from __future__ import annotations


def add_parser(sub) -> None:
    """Register ``jkofast warmup`` on the sub-command parser ``sub``."""
    p = sub.add_parser("warmup", help="compile / load every Numba kernel")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    """Compile (or load from the cache) every kernel and print the time taken (exit status)."""
    from jkofast.commands._common import emit
    from jkofast.warmup import warmup

    times = warmup()
    emit(times, args.json, "\n".join(f"{k:30s} {v:6.2f}s" for k, v in times.items()))
    return 0
