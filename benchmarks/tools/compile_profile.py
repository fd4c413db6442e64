"""Where a command's compile time goes: per kernel signature and per Numba compiler pass.

    JKOFAST_CACHE_DIR=$(mktemp -d) JKOFAST_COMPILE_AHEAD=0 \
        python benchmarks/tools/compile_profile.py [--top 25] [--json FILE] -- run --dataset scifact

Runs ``jkofast ARGS`` in this process (use an empty cache, and ``JKOFAST_COMPILE_AHEAD=0`` so
nothing compiles in a child) while recording Numba's ``numba:compile`` events, then prints:

* per compiled signature, its own seconds (callees compiled inside it subtracted), the
  process CPU seconds spent in it, slowest first, and with ``NUMBA_LLVM_PASS_TIMINGS=1`` the
  seconds of LLVM's work on its library (optimisation of the linked module and machine code);
* per compiler pass, the seconds summed over every compiled signature
  (``overloads[sig].metadata['pipeline_times']``). A pass that compiles callees (type inference,
  IR inlining) counts their time too, so the totals of those passes overlap the callees' own rows;
  ``native_lowering`` includes LLVM's optimisation and machine-code generation.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=25, help="rows of the per-signature table")
    ap.add_argument("--json", help="also write every row as JSON to this file")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then the jkofast command's arguments")
    a = ap.parse_args(argv)
    args = a.args[1:] if a.args[:1] == ["--"] else a.args

    import numba.core.event as ev

    from jkofast.cli import main as cli

    stack: list[list[float]] = []
    rows = []

    class Rec(ev.Listener):
        def on_start(self, event):
            stack.append([time.perf_counter(), time.process_time(), 0.0, 0.0])

        def on_end(self, event):
            t0, c0, nested, nested_c = stack.pop()
            total, cpu = time.perf_counter() - t0, time.process_time() - c0
            if stack:
                stack[-1][2] += total
                stack[-1][3] += cpu
            d = event.data["dispatcher"]
            sig = tuple(event.data["args"])
            rows.append(
                dict(
                    kernel=f"{d.py_func.__module__}.{d.py_func.__qualname__}",
                    sig="(" + ", ".join(str(x) for x in sig) + ")",
                    own_s=total - nested,
                    own_cpu_s=cpu - nested_c,
                    disp=d,
                    key=sig,
                )
            )

    t0, c0 = time.perf_counter(), time.process_time()
    rec = Rec()
    ev.register("numba:compile", rec)
    try:
        rc = cli(args)
    finally:
        ev.unregister("numba:compile", rec)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0

    passes: collections.Counter = collections.Counter()
    for r in rows:
        cres = r["disp"].overloads.get(r["key"])
        times = getattr(cres, "metadata", {}) or {}
        per = {}
        for _pipe, tab in (times.get("pipeline_times") or {}).items():
            for name, t in tab.items():
                s = t.init + t.run + t.finalize
                pname = name.split("_", 1)[1] if name[:1].isdigit() else name
                per[pname] = per.get(pname, 0.0) + s
                passes[pname] += s
        r["passes"] = per
        llvm = times.get("llvm_pass_timings")  # with NUMBA_LLVM_PASS_TIMINGS=1
        r["llvm_s"] = llvm.get_total_time() if llvm is not None and not llvm.is_empty else None
        if r["llvm_s"] is not None:
            r["llvm_parts"] = {rec.name: rec.timings.get_total_time() for rec in llvm}
    own = sum(r["own_s"] for r in rows)
    own_cpu = sum(r["own_cpu_s"] for r in rows)
    print(f"\ncommand: jkofast {' '.join(args)} (exit {rc}): {wall:.1f} s wall, {cpu:.1f} s CPU in this process")
    print(f"compiled {len(rows)} signatures: {own:.1f} s wall, {own_cpu:.1f} s CPU of compiling")
    print(f"\n{'own s':>7} {'cpu s':>7} {'llvm s':>7}  kernel (signature)")
    for r in sorted(rows, key=lambda r: -r["own_cpu_s"])[: a.top]:
        llvm = "" if r["llvm_s"] is None else f"{r['llvm_s']:7.2f}"
        print(f"{r['own_s']:7.2f} {r['own_cpu_s']:7.2f} {llvm:>7}  {r['kernel']} {r['sig'][:110]}")
    by_kernel: collections.Counter = collections.Counter()
    for r in rows:
        by_kernel[r["kernel"]] += r["own_cpu_s"]
    print("\nper kernel (own CPU s, signatures summed):")
    for k, s in by_kernel.most_common(a.top):
        print(f"{s:7.2f}  {k}")
    print("\nper pass (s summed over signatures; type inference / inlining include callees):")
    for name, s in passes.most_common(20):
        print(f"{s:7.2f}  {name}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump([{k: v for k, v in r.items() if k not in ("disp", "key")} for r in rows], fh, indent=1)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
