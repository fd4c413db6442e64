"""Cold start side by side: fresh processes, empty caches, jkofast vs the published torch solver.

    python benchmarks/tools/coldstart.py [--repeat 3] [--sizes 50,200] [--warmup] [--run-cmd CMD]
        [--speed N] [--profile] [--torch-python PY --published DIR] [--json]

Every figure is the wall time of a new interpreter (one thread: ``NUMBA_NUM_THREADS``,
``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` = 1), measured interleaved in one run so both sides
see the same machine load:

(a) the drop-in first call — ``import jkofast.compat`` + ``run_jko(p0, E, C, K, tuned,
    grad="unrolled")`` with an **empty** Numba cache (a new ``NUMBA_CACHE_DIR`` and
    ``JKOFAST_CACHE_DIR`` per run), beside ``import jko`` + the published ``run_jko`` (torch,
    float32) on the same pool: the real SciFact pool 0 of the parity fixture (M = 200) and its
    first 50 candidates (M = 50);
(b) the same with the cache the cold run filled (torch: a second fresh process);
(c) ``--warmup``: ``jkofast warmup`` with an empty cache (what it compiles is in its output);
(d) ``--run-cmd "jkofast run --dataset scifact"``: any command, timed with an empty cache
    (for the README's first command, run it from a fresh virtualenv: ``python3 -m venv VENV &&
    VENV/bin/pip install . && python benchmarks/tools/coldstart.py --run-cmd "VENV/bin/jkofast
    run --dataset scifact"``);
(e) ``--speed N``: warm per-query speed of the tuned unrolled path on the first N real SciFact
    pools (M = 200, one thread, compilation excluded): float64 vs ``dtype="float32"`` interleaved
    in one process (CPU and wall ms per query, medians, ratio), and the published torch solver on
    the first min(N, 3) pools in a child process (after one untimed call).

``--profile``: where the cold drop-in call's compile time goes — one more fresh process with an
empty cache that records Numba's ``numba:compile`` events (exclusive CPU seconds per kernel and
signature, callees subtracted), top 15.

The child processes print ``import_s`` and ``call_s`` (perf_counter inside the child); the
``total_s`` column is the parent's wall time of the whole process (interpreter start included).
The torch side runs only with ``--torch-python`` (an interpreter with torch) and ``--published``
(the folder holding the published ``jko.py``); defaults ``$JKOFAST_TORCH_PYTHON`` and
``$JKOFAST_PUBLISHED_DIR``. Prints medians and min over ``--repeat`` runs and the ratio
jkofast / torch of the cold totals.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

TUNED = dict(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=5, inner_steps=40)

CHILD_JKOFAST = """
import json, sys, time
import numpy as np
z = np.load(sys.argv[1])
p0, E, C, K = z["p0"], z["E"], z["C"], z["K"]
t0 = time.perf_counter()
import jkofast.compat as c
t1 = time.perf_counter()
p, _ = c.run_jko(p0, E, C, K, c.JKOConfig(**json.loads(sys.argv[2]), grad="unrolled"))
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "call_s": t2 - t1, "top": int(np.argmax(p))}))
"""

CHILD_TORCH = """
import json, sys, time
import numpy as np
z = np.load(sys.argv[1])
p0, E, C, K = z["p0"], z["E"], z["C"], z["K"]
sys.path.insert(0, sys.argv[3])
t0 = time.perf_counter()
import torch
import jko
torch.set_num_threads(1)
t1 = time.perf_counter()
p, _ = jko.run_jko(p0, E, C, K, jko.JKOConfig(**json.loads(sys.argv[2])))
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "call_s": t2 - t1, "top": int(np.argmax(p))}))
"""


CHILD_PROFILE = """
import collections, json, sys, time
from numba.core import event
spent, stack = collections.Counter(), []
class Listener(event.Listener):
    def on_start(self, e):
        f = e.data["dispatcher"].py_func
        stack.append((f.__module__ + "." + f.__qualname__ + str(e.data["args"])[:60], time.process_time()))
    def on_end(self, e):
        name, t0 = stack.pop()
        dt = time.process_time() - t0
        spent[name] += dt
        if stack:
            spent[stack[-1][0]] -= dt
event.register("numba:compile", Listener())
import numpy as np
z = np.load(sys.argv[1])
c0 = time.process_time()
import jkofast.compat as c
c.run_jko(z["p0"], z["E"], z["C"], z["K"], c.JKOConfig(**json.loads(sys.argv[2]), grad="unrolled"))
print(json.dumps({"cpu_s": time.process_time() - c0, "top": spent.most_common(15)}))
"""


def fixture_pool(m: int) -> dict:
    """SciFact pool 0 of the parity fixture, first ``m`` candidates (float32, as the fixture README builds it)."""
    from jkofast.datasets.beir import parity_fixture_path

    z = np.load(parity_fixture_path())
    Z = z["pool_emb_f16"][0, :m].astype(np.float32)
    S = np.clip(Z @ Z.T, -1, 1)

    def minmax(x):
        x = x.astype(np.float32)
        return (x - x.min()) / max(x.max() - x.min(), 1e-9)

    r = (np.float32(0.4) * minmax(z["dense_pool"][0, :m]) + np.float32(0.6) * minmax(z["bm25_pool"][0, :m])).astype(
        np.float32
    )
    e = np.exp(r - r.max())  # tau0 = 1 (tuned)
    return {
        "p0": (e / e.sum()).astype(np.float32),
        "E": -r,
        "C": ((1 - S) ** 2).astype(np.float32),
        "K": np.maximum(S, 0).astype(np.float32),
    }


def _env(cache: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "JKOFAST_CACHE_DIR")}
    env.update(NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if cache is not None:
        env.update(NUMBA_CACHE_DIR=os.path.join(cache, "numba"), JKOFAST_CACHE_DIR=os.path.join(cache, "jkofast"))
    return env


def _child(argv: list[str], env: dict) -> dict:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    total = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip().startswith("{") else {}
    out["total_s"] = total
    return out


def drop_in_rows(args, tmp: str) -> list[dict]:
    """(a) and (b): one row per (side, M, cache state, repeat), interleaved."""
    rows = []
    for m in args.sizes:
        np.savez(os.path.join(tmp, f"pool{m}.npz"), **fixture_pool(m))
    for rep in range(args.repeat):
        for m in args.sizes:
            pool = os.path.join(tmp, f"pool{m}.npz")
            cache = tempfile.mkdtemp(prefix="coldstart-", dir=tmp)
            cmd = [sys.executable, "-c", CHILD_JKOFAST, pool, json.dumps(TUNED)]
            rows.append({"side": "jkofast", "M": m, "cache": "cold", "rep": rep, **_child(cmd, _env(cache))})
            rows.append({"side": "jkofast", "M": m, "cache": "warm", "rep": rep, **_child(cmd, _env(cache))})
            shutil.rmtree(cache, ignore_errors=True)
            if args.torch_python and args.published:
                cmd = [args.torch_python, "-c", CHILD_TORCH, pool, json.dumps(TUNED), args.published]
                for state in ("cold", "warm"):  # torch has no compile cache: two fresh processes
                    rows.append({"side": "torch", "M": m, "cache": state, "rep": rep, **_child(cmd, _env(None))})
    return rows


CHILD_TORCH_SPEED = """
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[3])
import torch
import jko
torch.set_num_threads(1)
cfg = jko.JKOConfig(**json.loads(sys.argv[2]))
z = np.load(sys.argv[1])
n = int(z["n"])
jko.run_jko(z["p0_0"], z["E_0"], z["C_0"], z["K_0"], cfg)  # first call untimed
cpu, wall = [], []
for q in range(n):
    c0, t0 = time.process_time(), time.perf_counter()
    jko.run_jko(z[f"p0_{q}"], z[f"E_{q}"], z[f"C_{q}"], z[f"K_{q}"], cfg)
    cpu.append(time.process_time() - c0)
    wall.append(time.perf_counter() - t0)
print(json.dumps({"cpu_ms": 1e3 * float(np.median(cpu)), "wall_ms": 1e3 * float(np.median(wall)), "n": n}))
"""


def fixture_pools(n: int) -> list[dict]:
    """The first ``n`` parity-fixture pools (M = 200), float32 inputs as the fixture README builds them."""
    import importlib

    ref = importlib.import_module("reference")
    from jkofast.datasets.beir import parity_fixture_path

    z = np.load(parity_fixture_path())
    out = []
    for q in range(n):
        p0, E, C, K = ref.fixture_inputs(z, q, 1.0)
        out.append({"p0": p0, "E": E, "C": C, "K": K})
    return out


def speed_rows(args, tmp: str) -> dict:
    """(e): float64 vs float32 unrolled, tuned, M = 200, one thread, interleaved; torch beside it."""
    from jkofast import numba_threads
    from jkofast.jko.solver import operating_point, run_jko

    sys.path.insert(0, os.path.join(ROOT, "tests"))  # the fixture construction of the parity tests
    pools = fixture_pools(args.speed)
    cfgs = {d: operating_point("tuned", grad="unrolled", dtype=d) for d in ("float64", "float32")}
    t = {d: {"cpu": [], "wall": []} for d in cfgs}
    l1 = []
    with numba_threads(1):
        for cfg in cfgs.values():  # compile / load, untimed
            run_jko(pools[0]["p0"], pools[0]["E"], pools[0]["C"], pools[0]["K"], cfg.replace(T=1, inner_steps=1))
        for _ in range(args.repeat):
            for pl in pools:
                ps = {}
                for d, cfg in cfgs.items():
                    c0, t0 = time.process_time(), time.perf_counter()
                    ps[d] = run_jko(pl["p0"], pl["E"], pl["C"], pl["K"], cfg)
                    t[d]["cpu"].append(time.process_time() - c0)
                    t[d]["wall"].append(time.perf_counter() - t0)
                l1.append(float(np.abs(ps["float32"] - ps["float64"]).sum()))
    out = {d: {k: 1e3 * float(np.median(v)) for k, v in t[d].items()} for d in cfgs}
    out["ratio_cpu"] = out["float64"]["cpu"] / out["float32"]["cpu"]
    out["ratio_wall"] = out["float64"]["wall"] / out["float32"]["wall"]
    out["l1_float32_vs_float64_max"] = max(l1)
    out["n_pools"] = len(pools)
    if args.torch_python and args.published:
        nt = min(len(pools), 3)
        path = os.path.join(tmp, "speed_pools.npz")
        np.savez(path, n=nt, **{f"{k}_{q}": pools[q][k] for q in range(nt) for k in ("p0", "E", "C", "K")})
        cmd = [args.torch_python, "-c", CHILD_TORCH_SPEED, path, json.dumps(TUNED), args.published]
        out["torch"] = _child(cmd, _env(None))
        out["torch_over_float32_cpu"] = out["torch"]["cpu_ms"] / out["float32"]["cpu"]
    return out


def compile_profile(args, tmp: str) -> dict:
    """Exclusive compile CPU seconds per kernel of the cold drop-in call (M = the largest size)."""
    m = max(args.sizes)
    path = os.path.join(tmp, f"profile{m}.npz")
    np.savez(path, **fixture_pool(m))
    cache = tempfile.mkdtemp(prefix="coldstart-profile-", dir=tmp)
    out = _child([sys.executable, "-c", CHILD_PROFILE, path, json.dumps(TUNED)], _env(cache))
    shutil.rmtree(cache, ignore_errors=True)
    return out


def timed_command(argv: list[str], tmp: str) -> dict:
    """Wall time of one command with an empty cache (c, d)."""
    cache = tempfile.mkdtemp(prefix="coldstart-cmd-", dir=tmp)
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=_env(cache), capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t0
    shutil.rmtree(cache, ignore_errors=True)
    return {"cmd": " ".join(argv), "seconds": dt, "rc": r.returncode, "tail": (r.stdout + r.stderr)[-1500:]}


def summarise(rows: list[dict]) -> list[dict]:
    """Median / min of each (side, M, cache) group and the jkofast / torch ratio of the medians."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["side"], r["M"], r["cache"]), []).append(r)
    out = []
    for (side, m, cache), rs in sorted(groups.items()):
        tot = [r["total_s"] for r in rs]
        out.append(
            {
                "side": side,
                "M": m,
                "cache": cache,
                "n": len(rs),
                "total_median_s": float(np.median(tot)),
                "total_min_s": float(np.min(tot)),
                "import_median_s": float(np.median([r.get("import_s", np.nan) for r in rs])),
                "call_median_s": float(np.median([r.get("call_s", np.nan) for r in rs])),
            }
        )
    med = {(s["side"], s["M"], s["cache"]): s["total_median_s"] for s in out}
    for s in out:
        t = med.get(("torch", s["M"], s["cache"]))
        s["ratio_vs_torch"] = s["total_median_s"] / t if s["side"] == "jkofast" and t else None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="50,200", help="pool sizes (first M candidates of SciFact pool 0; M <= 200)")
    ap.add_argument("--torch-python", default=os.environ.get("JKOFAST_TORCH_PYTHON"))
    ap.add_argument("--published", default=os.environ.get("JKOFAST_PUBLISHED_DIR"))
    ap.add_argument("--warmup", action="store_true", help="(c) time `jkofast warmup` with an empty cache")
    ap.add_argument("--run-cmd", default=None, help="(d) a command to time with an empty cache")
    ap.add_argument("--no-drop-in", action="store_true", help="skip (a) and (b)")
    ap.add_argument("--profile", action="store_true", help="compile CPU seconds per kernel of the cold drop-in call")
    ap.add_argument("--speed", type=int, default=0, help="(e) warm float64 vs float32 speed on N fixture pools")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    load0 = os.getloadavg()[0]
    report: dict = {"loadavg_start": load0}
    with tempfile.TemporaryDirectory(prefix="jkofast-coldstart-") as tmp:
        if not args.no_drop_in:
            rows = drop_in_rows(args, tmp)
            report["drop_in"] = summarise(rows)
            report["rows"] = rows
        if args.profile:
            report["profile"] = compile_profile(args, tmp)
        if args.warmup:
            report["warmup"] = timed_command([sys.executable, "-m", "jkofast", "warmup"], tmp)
        if args.run_cmd:
            report["run_cmd"] = timed_command(args.run_cmd.split(), tmp)
        if args.speed:
            report["speed"] = speed_rows(args, tmp)
    report["loadavg_end"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"load average: {load0:.2f} at start, {report['loadavg_end']:.2f} at end")
    if "drop_in" in report:
        head = ("side", "M", "cache", "n", "total med", "min", "import", "call")
        print("{:8s} {:>4s} {:5s} {:>2s} {:>9s} {:>6s} {:>6s} {:>6s} ratio".format(*head))
        for s in report["drop_in"]:
            r = f"{s['ratio_vs_torch']:.2f}" if s["ratio_vs_torch"] else ""
            print(
                f"{s['side']:8s} {s['M']:4d} {s['cache']:5s} {s['n']:2d} {s['total_median_s']:9.2f} "
                f"{s['total_min_s']:6.2f} {s['import_median_s']:6.2f} {s['call_median_s']:6.2f} {r}"
            )
    if "speed" in report:
        sp = report["speed"]
        print(
            f"tuned unrolled, M = 200, 1 thread, {sp['n_pools']} SciFact pools x {args.repeat}: "
            f"float64 {sp['float64']['cpu']:.1f} ms CPU ({sp['float64']['wall']:.1f} wall), "
            f"float32 {sp['float32']['cpu']:.1f} ms CPU ({sp['float32']['wall']:.1f} wall): "
            f"{sp['ratio_cpu']:.2f}x CPU, {sp['ratio_wall']:.2f}x wall; "
            f"max L1(p32 - p64) {sp['l1_float32_vs_float64_max']:.1e}"
        )
        if "torch" in sp:
            print(
                f"published torch: {sp['torch']['cpu_ms']:.0f} ms CPU ({sp['torch']['wall_ms']:.0f} wall) per query "
                f"on {sp['torch']['n']} pools = {sp['torch_over_float32_cpu']:.1f}x the float32 path"
            )
    if "profile" in report:
        pr = report["profile"]
        print(f"cold drop-in call, CPU {pr['cpu_s']:.2f} s (import + compile + run); compile CPU s per kernel:")
        for name, sec in pr["top"]:
            print(f"   {sec:6.2f}  {name}")
    for key in ("warmup", "run_cmd"):
        if key in report:
            c = report[key]
            print(f"{key}: {c['seconds']:.1f} s (exit {c['rc']}): {c['cmd']}")
            print("   " + c["tail"].strip().replace("\n", "\n   ")[-1200:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
