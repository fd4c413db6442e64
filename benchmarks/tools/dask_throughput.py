"""Throughput of ``jkofast rerank`` on Dask beside the single-process command, in one run (issue #15).

    python benchmarks/tools/dask_throughput.py [--dir TMPDIR/dask_bench] [--queries 4000] [--chunk-size 500]
           [--config tuned] [--grad implicit] [--variants single2,local1,local2] [--repeats 1]

Makes (once) a synthetic pool file with ``benchmarks/tools/make_synthetic_pools.py`` (M = 200,
384-d), then runs, each as its own ``python -m jkofast rerank ... --json`` process, in the
order given and ``--repeats`` times round-robin:

- ``single2``: the single-process CLI, ``--threads 2`` (the three-stage parse | kernel | write pipeline);
- ``local1`` / ``local2``: ``--dask local:1`` / ``--dask local:2`` (one Numba thread per worker).

Reports queries/s of the streaming stage (the command's ``queries_per_s``: from the first chunk
handed to the kernel stage / the cluster, after warm-up and cluster start), the wall time of
the process, peak RSS per worker, the ratios the issue asks for, ``uptime`` before and after,
and checks that every output is byte-identical.  It also times the client's share of a Dask
run on this input -- parsing into chunks and packing them for the tasks, and concatenating
the parts -- which bounds the client side of the scaling projection (docs/distributed.md).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def uptime() -> str:
    with open("/proc/loadavg") as fh:
        return "load average " + " ".join(fh.read().split()[:3]) + f" ({os.cpu_count()} CPUs)"


def ensure_pools(d: str, n: int) -> str:
    run = os.path.join(d, "run.trec")
    if not os.path.exists(run):
        tool = os.path.join(ROOT, "benchmarks", "tools", "make_synthetic_pools.py")
        subprocess.run([sys.executable, tool, d, "--queries", str(n)], check=True)
    return run


def rerank(a, variant: str, out: str) -> dict:
    cmd = [sys.executable, "-m", "jkofast", "rerank", "--pools", os.path.join(a.dir, "run.trec")]
    cmd += ["--embeddings", os.path.join(a.dir, "E.npy"), "--ids", os.path.join(a.dir, "ids.txt")]
    cmd += ["--config", a.config, "--grad", a.grad, "--chunk-size", str(a.chunk_size), "--out", out, "--json"]
    cmd += {"single2": ["--threads", "2"], "local1": ["--dask", "local:1"], "local2": ["--dask", "local:2"]}[variant]
    t0 = time.perf_counter()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{variant} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    res = json.loads(r.stdout)
    res["process_wall_s"] = wall
    # CPU seconds of the command and every process it waited for (LocalCluster nannies and workers):
    # on a loaded machine wall-clock ratios measure the CPU share won, CPU per query measures the cost
    res["cpu_s"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return res


def client_share(a) -> dict:
    """Seconds per query of the client's parse + pack, and MB/s of the concatenation of parts."""
    sys.path.insert(0, ROOT)
    from jkofast.distributed.tasks import pack_chunk
    from jkofast.eval.runio import atomic_open, iter_chunks

    run = os.path.join(a.dir, "run.trec")
    t0 = time.perf_counter()
    n = 0
    for chunk in iter_chunks(run, a.chunk_size, lambda ln, msg: None):
        pack_chunk(chunk)
        n += len(chunk)
    parse_s = time.perf_counter() - t0
    size = os.path.getsize(run)
    t0 = time.perf_counter()
    with atomic_open(os.path.join(a.dir, "concat.tmp"), fsync=False) as dst, open(run, "rb") as fh:
        while buf := fh.read(1 << 20):
            dst.write(buf)
    concat_s = time.perf_counter() - t0
    os.remove(os.path.join(a.dir, "concat.tmp"))
    return {"queries": n, "parse_pack_q_per_s": n / parse_s, "concat_mb_per_s": size / 1e6 / concat_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "dask_bench"))
    ap.add_argument("--queries", type=int, default=4000)
    ap.add_argument("--chunk-size", type=int, default=500)
    ap.add_argument("--config", default="tuned")
    ap.add_argument("--grad", default="implicit")
    ap.add_argument("--variants", default="single2,local1,local2")
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    ensure_pools(a.dir, a.queries)
    print(f"before: {uptime()}", flush=True)
    variants = a.variants.split(",")
    results: dict = {v: [] for v in variants}
    for rep in range(a.repeats):
        for v in variants:
            out = os.path.join(a.dir, f"out_{v}_{rep}.trec")
            res = rerank(a, v, out)
            results[v].append(res)
            print(
                f"{v:8s} rep {rep}: {res['queries_per_s']:7.1f} q/s, wall {res['process_wall_s']:6.1f} s, "
                f"CPU {res['cpu_s']:6.1f} s ({1e3 * res['cpu_s'] / res['queries']:.1f} ms/query), "
                f"client peak RSS {res['peak_rss_mb']:.0f} MB, {uptime()}",
                flush=True,
            )
            for w, c in sorted(res.get("workers", {}).items()):
                rss = c["peak_rss_mb"]
                print(f"          worker {w}: {c['queries']} queries, {c['chunks']} chunks, peak RSS {rss:.0f} MB")
    print(f"after: {uptime()}")
    outs = [os.path.join(a.dir, f"out_{v}_{r}.trec") for v in variants for r in range(a.repeats)]
    same = all(filecmp.cmp(outs[0], o, shallow=False) for o in outs[1:])
    print(f"outputs byte-identical: {same}")
    best = {v: max(r["queries_per_s"] for r in rs) for v, rs in results.items()}
    cpu = {v: min(r["cpu_s"] / r["queries"] for r in rs) for v, rs in results.items()}
    print(f"\n| variant | q/s, best of {a.repeats} | wall s | CPU ms/query, all processes | peak RSS per worker, MB |")
    print("|---|---|---|---|---|")
    for v, rs in results.items():
        rss = sorted({round(c["peak_rss_mb"]) for r in rs for c in r.get("workers", {}).values()})
        wall = min(r["process_wall_s"] for r in rs)
        print(f"| {v} | {best[v]:.1f} | {wall:.1f} | {1e3 * cpu[v]:.2f} | {rss or '-'} |")
    if "local1" in best and "local2" in best:
        print(f"local:2 / local:1 = {best['local2'] / best['local1']:.2f} (target >= 1.8)")
    if "single2" in best and "local2" in best:
        print(f"local:2 / single-process 2 threads = {best['local2'] / best['single2']:.2f} (target >= 0.9)")
        print(f"CPU per query, local:2 / single-process: {cpu['local2'] / cpu['single2']:.3f}")
    cs = client_share(a)
    print(
        f"client share: parse + pack {cs['parse_pack_q_per_s']:,.0f} queries/s on one core; "
        f"concatenation {cs['concat_mb_per_s']:,.0f} MB/s"
    )


if __name__ == "__main__":
    main()
