"""Whole CLI processes side by side: ``jkofast evaluate --n-boot 0`` against a pytrec_eval process (and others).

    python benchmarks/tools/cli_start.py RUN QRELS [--runs 7] [--base DIR --base-cache DIR] [--json]
    python benchmarks/tools/cli_start.py --search DATASET [--index] [--runs 7] [--base DIR --base-cache DIR]

Each side is a fresh interpreter started from a temporary folder (no checkout on the path but
the tree under test, through ``PYTHONPATH``), with a filled kernel cache (one untimed round
first).  The sides run in turn (A B C A B C ...) so that they see the same machine load; each
process's CPU time (user + sys, from ``os.wait4``) and wall time are recorded, and the medians
over ``--runs`` rounds are printed with the median of the per-round ratios to the peer.

Sides for ``RUN QRELS``: ``jkofast evaluate --n-boot 0`` of this tree; with ``--base``, the same
command of another tree (e.g. the release before, with its own ``--base-cache``);
``benchmarks/tools/pytrec_eval_files.py`` (the peer: ratios are to it); ``python -c pass`` and
``python -c "import numpy"`` (the floor of a NumPy process).
With ``--search DATASET``: ``jkofast search --dataset DATASET --method bm25`` (this tree, and the
base tree), ratios to the base; with ``--index`` too, ``jkofast index --dataset DATASET --method bm25``
as well.  The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# the `jkofast` program; a version without `program` ran `main` as its command
CLI = (
    "import sys\nimport jkofast.cli as c\n"
    "getattr(c, 'program', None) and c.program(sys.argv[1:])\nsys.exit(c.main(sys.argv[1:]))\n"
)


def _env(tree: str, cache: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JKOFAST_CACHE_DIR")}
    env["PYTHONPATH"] = tree
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if cache:
        env["JKOFAST_CACHE_DIR"] = cache
    return env


def _one(argv: list[str], env: dict, cwd: str) -> tuple[float, float]:
    """``(cpu seconds, wall seconds)`` of one process (it must exit 0)."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=null, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        err = p.stderr.read()
        p.stderr.close()
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise RuntimeError(f"{argv} exited {p.returncode}: {err.decode(errors='replace')[-2000:]}")
    return ru.ru_utime + ru.ru_stime, wall


def measure(sides: dict, runs: int, cwd: str) -> dict:
    """Run every side ``runs + 1`` times in turn (the first round untimed); per side the CPU and wall lists."""
    out = {name: {"cpu": [], "wall": []} for name in sides}
    for i in range(runs + 1):
        for name, (argv, env) in sides.items():
            cpu, wall = _one(argv, env, cwd)
            if i:
                out[name]["cpu"].append(cpu)
                out[name]["wall"].append(wall)
    return out


def summarise(times: dict, peer: str) -> list[dict]:
    rows = []
    for name, t in times.items():
        row = {"side": name, "cpu_s": statistics.median(t["cpu"]), "wall_s": statistics.median(t["wall"])}
        if peer in times and name != peer:
            p = times[peer]
            row["cpu_ratio"] = statistics.median(a / b for a, b in zip(t["cpu"], p["cpu"]))
            row["wall_ratio"] = statistics.median(a / b for a, b in zip(t["wall"], p["wall"]))
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="RUN QRELS")
    ap.add_argument("--search", help="time `jkofast search --dataset DATASET --method bm25` instead")
    ap.add_argument("--index", action="store_true", help="with --search: `jkofast index` of the dataset as well")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--cache", default=os.environ.get("JKOFAST_CACHE_DIR"), help="kernel cache of this tree")
    ap.add_argument("--base", help="another jkofast tree to time beside this one")
    ap.add_argument("--base-cache", help="its kernel cache folder")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    py = sys.executable
    ours = _env(ROOT, args.cache)
    base = _env(args.base, args.base_cache) if args.base else None
    sides: dict = {}
    with tempfile.TemporaryDirectory(prefix="jkofast-clistart-") as tmp:
        if args.search:
            cmd = ["search", "--dataset", args.search, "--method", "bm25", "--out", os.path.join(tmp, "run.trec")]
            sides["jkofast search"] = ([py, "-c", CLI, *cmd], ours)
            if base:
                sides["base search"] = ([py, "-c", CLI, *cmd], base)
            if args.index:
                idx = ["index", "--dataset", args.search, "--method", "bm25", "--out", os.path.join(tmp, "idx")]
                sides["jkofast index"] = ([py, "-c", CLI, *idx], ours)
                if base:
                    sides["base index"] = ([py, "-c", CLI, *idx], base)
            peer = "base search"
        else:
            if len(args.files) != 2:
                ap.error("give RUN QRELS (or --search DATASET)")
            run, qrels = (os.path.abspath(f) for f in args.files)
            cmd = ["evaluate", "--run", run, "--qrels", qrels, "--n-boot", "0"]
            sides["jkofast evaluate"] = ([py, "-c", CLI, *cmd], ours)
            if base:
                sides["base evaluate"] = ([py, "-c", CLI, *cmd], base)
            sides["pytrec_eval"] = (
                [py, os.path.join(ROOT, "benchmarks", "tools", "pytrec_eval_files.py"), run, qrels],
                ours,
            )
            sides["python -c pass"] = ([py, "-c", "pass"], ours)
            sides["import numpy"] = ([py, "-c", "import numpy"], ours)
            peer = "pytrec_eval"
        load0 = os.getloadavg()
        rows = summarise(measure(sides, args.runs, tmp), peer)
        load1 = os.getloadavg()
    if args.json:
        print(json.dumps({"load_before": load0, "load_after": load1, "runs": args.runs, "rows": rows}, indent=2))
        return 0
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}; medians of {args.runs} rounds")
    print(f"{'side':<20} {'CPU s':>7} {'wall s':>7}   ratio to {peer} (CPU; wall)")
    for r in rows:
        ratio = f"{r['cpu_ratio']:.2f}x; {r['wall_ratio']:.2f}x" if "cpu_ratio" in r else "-"
        print(f"{r['side']:<20} {r['cpu_s']:>7.3f} {r['wall_s']:>7.3f}   {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
