"""SciFact query time of several source trees side by side: one worker process per tree, passes alternating.

Usage:

    python benchmarks/tools/sgr_bisect.py NAME=TREE [NAME=TREE ...] [--rounds 5] [--passes 3] [--json OUT]

Each ``TREE`` is a checkout of jkofast (a worktree of a revision); its worker runs with ``PYTHONPATH=TREE`` and
its own Numba cache (``JKOFAST_CACHE_DIR=<tmp>/jkofast_bisect_cache/NAME``), fits ``SparseGeometricRetriever()``
(defaults) on the 5,183 SciFact passages once, warms ``search`` and then waits.  Every round asks each worker in
turn (the order rotates per round) for ``--passes`` timed passes of ``search(all 1,109 queries, k=10,
n_threads=1)``; the figure per tree is the median over all its passes (ms/query), with the per-round medians
beside it.  The workers also return a digest of their ids and scores, so the trees are checked to give the same
output.  The load average is printed per round.  docs/performance.md ("SGR index storage") has the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(tempfile.gettempdir(), "jkofast_bisect_scifact.pkl")


def _worker(n_threads: int) -> None:
    """Fit once, then answer ``passes`` lines on stdin with one JSON line of timings."""
    import jkofast
    from jkofast.sgr.retriever import SparseGeometricRetriever

    with open(DATA, "rb") as fh:
        texts, queries = pickle.load(fh)
    r = SparseGeometricRetriever().fit(texts)
    ids, scores = r.search(queries, k=10, n_threads=n_threads)
    digest = hashlib.sha1(np.ascontiguousarray(ids).tobytes() + np.ascontiguousarray(scores).tobytes()).hexdigest()
    print(json.dumps({"ready": jkofast.__file__, "digest": digest}), flush=True)
    for line in sys.stdin:
        passes = int(line)
        ts = []
        for _ in range(passes):
            t0 = time.perf_counter()
            r.search(queries, k=10, n_threads=n_threads)
            ts.append((time.perf_counter() - t0) / len(queries) * 1e3)
        print(json.dumps({"ms": ts}), flush=True)


def _data() -> None:
    sys.path.insert(0, HERE)
    from sgr_eval import load_scifact

    _, texts, queries, _ = load_scifact()
    with open(DATA, "wb") as fh:
        pickle.dump((list(texts), list(queries.values())), fh)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="*", help="NAME=TREE")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.threads)
        return
    if not os.path.exists(DATA):
        _data()
    cache_root = os.path.join(tempfile.gettempdir(), "jkofast_bisect_cache")
    workers = {}
    for spec in args.trees:
        name, tree = spec.split("=", 1)
        env = dict(
            os.environ,
            PYTHONPATH=os.path.abspath(tree),
            JKOFAST_CACHE_DIR=os.path.join(cache_root, name),
            JKOFAST_COMPILE_AHEAD="0",
            PYTHONDONTWRITEBYTECODE="1",
        )
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--threads", str(args.threads)]
        workers[name] = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    digests = {}
    for name, p in workers.items():  # one worker compiles/fits at a time
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"worker {name} failed")
        digests[name] = json.loads(line)["digest"]
        print(f"{name}: ready, digest {digests[name][:12]}", flush=True)
    names = list(workers)
    times: dict[str, list[float]] = {n: [] for n in names}
    rounds: dict[str, list[float]] = {n: [] for n in names}
    loads = []
    for i in range(args.rounds):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            p = workers[name]
            p.stdin.write(f"{args.passes}\n")
            p.stdin.flush()
            ms = json.loads(p.stdout.readline())["ms"]
            times[name] += ms
            rounds[name].append(float(np.median(ms)))
        loads.append(os.getloadavg()[0])
        print(f"round {i + 1}: load {loads[-1]:.2f} " + " ".join(f"{n} {rounds[n][-1]:.4f}" for n in names), flush=True)
    for p in workers.values():
        p.stdin.close()
        p.wait()
    base = names[0]
    out = {
        "threads": args.threads,
        "load": [round(x, 2) for x in loads],
        "identical": len(set(digests.values())) == 1,
        "trees": {
            n: {
                "median_ms": float(np.median(times[n])),
                "ratio_to_first": float(np.median(times[n]) / np.median(times[base])),
                "round_medians": [round(x, 4) for x in rounds[n]],
            }
            for n in names
        },
    }
    for n in names:
        t = out["trees"][n]
        print(f"{n:>10}: {t['median_ms']:.4f} ms/query  x{t['ratio_to_first']:.3f}  rounds {t['round_medians']}")
    print(f"ids and scores identical across trees: {out['identical']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
