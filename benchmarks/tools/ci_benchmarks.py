"""CI's asv smoke run: every benchmark of every suite executed once, in one process.

    python benchmarks/tools/ci_benchmarks.py                 # run them all (JKOFAST_BENCH_PROFILE=fast)
    python benchmarks/tools/ci_benchmarks.py --bench REGEX   # only the benchmarks whose name matches
    python benchmarks/tools/ci_benchmarks.py --list          # the names, nothing run

CI (``.ci/run``) first runs ``asv check`` (every suite imports, every benchmark is discovered and its
signature is valid, by asv itself), then this tool. It discovers the benchmarks with asv's own runner
(``asv_runner.discovery``) and, for each benchmark and each of its parameter combinations, does what one
``asv run --quick`` sample does -- ``setup_cache`` (once per key), ``setup``, the benchmark called
once, ``teardown`` -- but all in this one process, and without the warm-up call that
``benchmarks.common.Benchmark.setup`` makes before a timed benchmark (nothing is timed here; a ``track_``
keeps it, as it may read what that call left): the kernels load from the cache once for all suites,
where ``asv run`` starts a process per benchmark and parameter combination (each importing Numba and
loading its kernels again). A ``track_`` benchmark must return a finite number or NaN, as asv records
it. Any exception, or a ``track_`` that returns something else, is reported with its traceback and the
tool exits 2 after running the rest: a broken suite fails CI. The timings printed (seconds per
benchmark, set-up included) say where the step's time goes; they are not measurements (asv is).
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import re
import sys
import tempfile
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def suites(root: str = ROOT) -> list[str]:
    """The asv suites (module names ``bench_*``) in ``root/benchmarks``, sorted."""
    names = os.listdir(os.path.join(root, "benchmarks"))
    return sorted(n[:-3] for n in names if n.startswith("bench_") and n.endswith(".py"))


def discover(root: str = ROOT):
    """asv's benchmarks of ``root/benchmarks`` (``asv_runner`` discovery), sorted by name."""
    from asv_runner.discovery import disc_benchmarks

    if root not in sys.path:
        sys.path.insert(0, root)
    return sorted(disc_benchmarks(os.path.join(root, "benchmarks")), key=lambda b: b.name)


def n_params(bench) -> int:
    """How many parameter combinations ``bench`` has (1 without parameters)."""
    return math.prod(len(p) for p in bench._params) if bench._params else 1


def _set_cache(bench, cache) -> None:
    if hasattr(bench, "set_cache"):  # asv_runner >= 0.3: the cache kept apart from the parameters
        bench.set_cache(cache)
    elif cache is not None:
        bench.insert_param(cache)


def check_result(bench, value) -> str | None:
    """Why ``value`` is not a valid result of ``bench`` (None when it is)."""
    if bench.name.split(".")[-1].startswith("track_"):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"track_ returned {type(value).__name__} {value!r}, not a number"
    return None


def run_one(bench, idx: int, caches: dict) -> None:
    """One asv sample of ``bench`` at parameter combination ``idx``: set-up, one call, tear-down."""
    if bench._params:
        bench.set_param_idx(idx)
    key = bench.setup_cache_key
    if key is not None and key not in caches:
        caches[key] = bench.do_setup_cache()
    _set_cache(bench, caches.get(key) if key is not None else None)
    owner = getattr(bench.func, "__self__", None)
    if owner is not None and not bench.name.split(".")[-1].startswith("track_"):
        owner.skip_warmup = True  # benchmarks.common.Benchmark: the call below is the one run of the work
    if bench.do_setup():
        return  # the benchmark skipped itself (NotImplementedError in setup), as asv allows
    try:
        value = bench.func(*bench._build_params())
        why = check_result(bench, value)
        if why:
            raise AssertionError(why)
    finally:
        bench.do_teardown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--bench", default="", help="run only the benchmarks whose name matches this regex")
    ap.add_argument("--list", action="store_true", help="print the benchmark names and parameter counts")
    ap.add_argument("--root", default=ROOT, help="the repository whose benchmarks/ to run (default: this one)")
    args = ap.parse_args(argv)
    os.environ.setdefault("JKOFAST_BENCH_PROFILE", "fast")
    pattern = re.compile(args.bench)
    benches = [b for b in discover(os.path.abspath(args.root)) if pattern.search(b.name)]
    if args.list:
        for b in benches:
            print(f"{b.name} ({n_params(b)})")
        return 0
    # asv runs setup_cache in a folder of its own; so does this run: what the suites write there (corpus
    # files, built indexes) is removed afterwards instead of being left in the directory CI started from
    with tempfile.TemporaryDirectory(prefix="asv-smoke-") as work:
        here = os.getcwd()
        os.chdir(work)
        try:
            return _run_all(benches)
        finally:
            os.chdir(here)


def _run_all(benches) -> int:
    """Run every benchmark of ``benches`` at each of its parameter combinations; 2 when one failed."""
    caches: dict = {}
    failed, t_start = [], time.perf_counter()
    per_suite: dict[str, float] = {}
    for bench in benches:
        for idx in range(n_params(bench)):
            label = bench.name if n_params(bench) == 1 else f"{bench.name}[{idx}]"
            t0 = time.perf_counter()
            try:
                run_one(bench, idx, caches)
                status = "ok"
            except Exception:  # every failure is reported, the run goes on
                status = "FAILED"
                failed.append((label, traceback.format_exc()))
            dt = time.perf_counter() - t0
            suite = bench.name.split(".")[0]
            per_suite[suite] = per_suite.get(suite, 0.0) + dt
            print(f"asv smoke: {label} {status} {dt:.1f} s", flush=True)
    for label, tb in failed:
        print(f"\nasv smoke: {label} FAILED\n{tb}", file=sys.stderr)
    ran = sum(n_params(b) for b in benches)
    for suite, dt in sorted(per_suite.items(), key=lambda kv: -kv[1]):
        print(f"asv smoke: suite {suite} {dt:.1f} s")
    n_suites = len({b.name.split(".")[0] for b in benches})
    print(
        f"asv smoke: {len(benches)} benchmarks of {n_suites} suites, {ran} parameter combinations, "
        f"{len(failed)} failed, {time.perf_counter() - t_start:.0f} s"
    )
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
