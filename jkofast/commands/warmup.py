"""``jkofast warmup``: compile (or load from the on-disk cache) the main job's kernels (``--all``: every kernel)."""

from __future__ import annotations


def add_parser(sub) -> None:
    """Register ``jkofast warmup`` on the sub-command parser ``sub``."""
    p = sub.add_parser(
        "warmup",
        help="compile / load the main job's Numba kernels (--all: every kernel)",
        description="Compile (or load from the cache) the kernels `jkofast run` uses; the others "
        "(SGR, encoder, single-pool and extension solvers, studies) compile on first use unless --all. "
        "The cache lives in JKOFAST_CACHE_DIR (default ~/.cache/jkofast/numba), shared by every install "
        "of the same jkofast on this machine.",
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
    p.add_argument(
        "--report",
        action="store_true",
        help="list the kernels, signatures and compile seconds of each (compiles in one process)",
    )
    p.add_argument(
        "--clear",
        action="store_true",
        help="remove the compiled kernels from the cache first (then stop, unless --all or --only)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _report(recorder) -> tuple[list[dict], list[str]]:
    """Per kernel that has a signature in this process: its signatures and their compile seconds.

    Each signature row says whether it was loaded from the cache (``cached``) and its own compile
    seconds (None when loaded).
    """
    from jkofast._numba import REGISTRY

    seconds: dict[tuple[str, str], float] = {}
    for name, sig, s in recorder.rows():
        seconds[(name, sig)] = seconds.get((name, sig), 0.0) + s
    kernels = []
    for name, disp in sorted(REGISTRY.items()):
        sigs = ["(" + ", ".join(str(a) for a in sig) + ")" for sig in disp.signatures]
        if sigs:
            rows = [
                {"signature": s, "cached": (name, s) not in seconds, "compile_s": seconds.get((name, s))} for s in sigs
            ]
            kernels.append({"kernel": name, "signatures": rows, "compile_s": sum(r["compile_s"] or 0.0 for r in rows)})
    kernels.sort(key=lambda k: -k["compile_s"])
    n_sig = sum(len(k["signatures"]) for k in kernels)
    n_new = sum(not r["cached"] for k in kernels for r in k["signatures"])
    lines = [f"{'kernel':58s} {'sigs':>4s} {'compile s':>9s}"]
    for k in kernels:
        lines.append(f"{k['kernel']:58s} {len(k['signatures']):4d} {k['compile_s']:9.2f}")
        for r in k["signatures"]:
            t = "cached" if r["cached"] else f"{r['compile_s']:.2f}"
            lines.append(f"    {r['signature']}  {t}")
    lines.append(
        f"{len(kernels)} kernels, {n_sig} signatures ({n_new} compiled here, {n_sig - n_new} loaded from the cache); "
        f"{sum(k['compile_s'] for k in kernels):.1f} s of compile (each signature's own, callees apart)"
    )
    return kernels, lines


def run(args) -> int:
    """Compile (or load from the cache) the selected kernels and print the time taken (exit status)."""
    import contextlib
    import os
    import time

    from jkofast._ahead import PROGRESS_ENV, cpu_count
    from jkofast.commands._common import emit
    from jkofast.warmups import CLAIMS_ENV, CompileRecorder, clear_cache, lazy_entries, warmup

    features = "all" if args.all else ([x for x in args.only.split(",") if x] if args.only else "default")
    if args.jobs < 0:
        print(f"jkofast warmup: --jobs must be >= 0 (0 = one per core), got {args.jobs}")
        return 2
    if args.clear:
        root, n = clear_cache()
        if not (args.all or args.only or args.report):
            emit({"cleared": root, "files": n}, args.json, f"removed {n} cached kernel files from {root}")
            return 0
        if not args.json:
            print(f"removed {n} cached kernel files from {root}")
    jobs = 1 if args.report else args.jobs or cpu_count()  # the report times every compile in this process
    # a compile-ahead child or a parallel warm-up's child: its parent reads only the entries' seconds, so
    # it does not import every other module to list the entries left to first use
    child = any(v in os.environ for v in (PROGRESS_ENV, CLAIMS_ENV))
    t0 = time.perf_counter()
    recorder = CompileRecorder() if args.report else contextlib.nullcontext()
    try:
        with recorder:
            times = warmup(features=features, processes=jobs)
    except ValueError as e:
        print(f"jkofast warmup: {e}")
        return 2
    wall = time.perf_counter() - t0
    if child:
        emit({"compiled": times}, args.json, "")
        return 0
    lazy = lazy_entries(features)
    kernels, report = _report(recorder) if args.report else ([], [])
    if args.json:
        out = {"compiled": times, "total_s": sum(times.values()), "wall_s": wall, "processes": jobs}
        if args.report:
            out["kernels"] = kernels
        emit({**out, "on_first_use": lazy}, True, "")
        return 0
    lines = [*report, *([""] if report else [])]
    lines += [f"{k:30s} {v:6.2f}s" for k, v in times.items()]
    lines.append(f"{'total':30s} {sum(times.values()):6.2f}s (sum over entries)")
    lines.append(f"{'wall':30s} {wall:6.2f}s ({jobs} process{'es' if jobs > 1 else ''})")
    if lazy:
        lines.append("compiled on first use (jkofast warmup --all compiles them now): " + ", ".join(lazy))
    emit(times, False, "\n".join(lines))
    return 0
