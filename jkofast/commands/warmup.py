"""``jkofast warmup``: compile (or load from the on-disk cache) the main job's kernels (``--all``: every kernel)."""

from __future__ import annotations


def add_parser(sub) -> None:
    """Register ``jkofast warmup`` on the sub-command parser ``sub``."""
    p = sub.add_parser(
        "warmup",
        help="compile / load the main job's Numba kernels (--all: every kernel)",
        description="Compile (or load from the cache) the kernels `jkofast run` uses; the others "
        "(SGR, encoder, single-pool and extension solvers, studies) compile on first use unless --all.",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--all", action="store_true", help="every registered kernel, not only the main job's")
    g.add_argument("--only", default=None, help="comma-separated warm-up entries (names as printed)")
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="processes to compile in (default 0 = one per core: Numba compiles each kernel on one core)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    """Compile (or load from the cache) the selected kernels and print the time taken (exit status)."""
    import time

    from jkofast._ahead import cpu_count
    from jkofast.commands._common import emit
    from jkofast.warmups import lazy_entries, warmup

    features = "all" if args.all else ([x for x in args.only.split(",") if x] if args.only else "default")
    if args.jobs < 0:
        print(f"jkofast warmup: --jobs must be >= 0 (0 = one per core), got {args.jobs}")
        return 2
    jobs = args.jobs or cpu_count()
    t0 = time.perf_counter()
    try:
        times = warmup(features=features, processes=jobs)
    except ValueError as e:
        print(f"jkofast warmup: {e}")
        return 2
    wall = time.perf_counter() - t0
    lazy = lazy_entries(features)
    if args.json:
        out = {"compiled": times, "total_s": sum(times.values()), "wall_s": wall, "processes": jobs}
        emit({**out, "on_first_use": lazy}, True, "")
        return 0
    lines = [f"{k:30s} {v:6.2f}s" for k, v in times.items()]
    lines.append(f"{'total':30s} {sum(times.values()):6.2f}s (sum over entries)")
    lines.append(f"{'wall':30s} {wall:6.2f}s ({jobs} process{'es' if jobs > 1 else ''})")
    if lazy:
        lines.append("compiled on first use (jkofast warmup --all compiles them now): " + ", ".join(lazy))
    emit(times, False, "\n".join(lines))
    return 0
