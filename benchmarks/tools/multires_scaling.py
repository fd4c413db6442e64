"""MR-JKO vs vanilla JKO on the synthetic pools of SPEC A.7.10, side by side in one process.

For each M (default 200 500 1000 2000 5000) and gradient path, one warm-up call of each, then
``--repeats`` interleaved timed calls (best kept; wall clock and process CPU time, which other
load on the machine disturbs less). Prints the table with the published figures (SPEC A.9.6)
beside ours and optionally writes JSON.

    python benchmarks/tools/multires_scaling.py --m 200 500 1000 2000 --grads implicit --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, nargs="+", default=[200, 500, 1000, 2000, 5000])
    ap.add_argument("--grads", nargs="+", default=["implicit", "unrolled"], choices=["implicit", "unrolled"])
    ap.add_argument("--unrolled-max-m", type=int, default=1000, help="skip unrolled runs above this M")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="write the rows to this file")
    a = ap.parse_args(argv)

    from jkofast.studies.multires import scaling_inputs, scaling_run, scaling_table

    data = scaling_inputs(tuple(a.m))
    rows = []
    for M in a.m:
        for grad in a.grads:
            if grad == "unrolled" and M > a.unrolled_max_m:
                continue
            Z, rel = data[M]
            scaling_run(Z[: min(M, 200)], rel[: min(M, 200)], grad, a.threads)  # warm-up (compile / cache)
            rows.append(scaling_run(Z, rel, grad, a.threads, a.repeats))
            s = rows[-1]
            print(
                f"M={M:<5} {grad:<9} vanilla {s['vanilla_ms']:9.1f} ms (CPU {s['vanilla_cpu_ms']:9.1f})  "
                f"MR {s['mr_ms']:8.1f} ms (CPU {s['mr_cpu_ms']:8.1f})  "
                f"x{s['speedup']:.2f} (CPU x{s['speedup_cpu']:.2f})",
                file=sys.stderr,
                flush=True,
            )
    with open("/proc/loadavg") if os.path.exists("/proc/loadavg") else open(os.devnull) as fh:
        load = fh.read().split()[:3]
    print(scaling_table(rows))
    print(f"threads {a.threads}, best of {a.repeats}; load average {' '.join(load) or 'n/a'}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "threads": a.threads, "repeats": a.repeats, "load": load}, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
