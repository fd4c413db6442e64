"""
Speed against POT and the published solver
==========================================

jkofast's log-domain Sinkhorn against POT's
``ot.sinkhorn(..., method="sinkhorn_log")``, timed here on real SciFact pools
when POT is installed (``pip install pot``), and the speed-ups measured against
the published JKO-RAG solver (PyTorch), whose code is not part of jkofast:
those are read from the benchmark results file
``benchmarks/results/headline.json`` of the repository.
"""

# %%
# Sinkhorn on real pools, timed here
# ----------------------------------
# The cost is the reranker's (``(1 - cos)^2`` of MiniLM embeddings) on the
# first ``M`` documents of a pool of 200; both libraries run the same fixed
# number of update pairs, in float64, and the median of five runs is kept. POT
# updates the columns first and jkofast the rows, so after the same number of
# pairs their plans differ by about the marginal error.
import json
import textwrap
import time
import warnings
from functools import partial
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import jkofast
from jkofast.jko import example_pools

try:
    import ot

    # a fixed number of pairs on purpose: POT's "did not converge" is moot
    warnings.filterwarnings("ignore", "Sinkhorn did not converge")
except ImportError:
    ot = None
    print("POT is not installed (pip install pot): jkofast is timed alone")

_, p0, Z = example_pools(n_queries=1, pool_size=200).pool(0)
sizes, pairs, eps = [25, 50, 100, 200], 50, 0.1
pot_options = {"method": "sinkhorn_log", "numItermax": pairs, "stopThr": 0.0}


def median_seconds(f, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


us = {"jkofast": [], "POT": []}  # µs per update pair
for M in sizes:
    C, _ = jkofast.pool_geometry(Z[:M])
    a, b = p0[:M] / p0[:M].sum(), np.full(M, 1.0 / M)
    ours = partial(
        jkofast.sinkhorn_log, a, b, C, eps, max_iter=pairs, tol=None
    )
    ours()  # the first call loads the compiled kernel
    us["jkofast"].append(median_seconds(ours) / pairs * 1e6)
    line = f"M = {M:3d}: jkofast {us['jkofast'][-1]:6.1f} µs/pair"
    if ot is not None:
        pot = partial(ot.sinkhorn, a, b, C, eps, **pot_options)
        us["POT"].append(median_seconds(pot) / pairs * 1e6)
        ratio = us["POT"][-1] / us["jkofast"][-1]
        diff = np.abs(ours().plan(C, eps) - pot()).max()
        line += f", POT {us['POT'][-1]:7.1f} µs/pair ({ratio:.0f}x)"
        line += f", plans within {diff:.0e}"
    print(line)

# %%
# The recorded speed-ups
# ----------------------
# Each ratio was measured side by side in one run, on the machine the file
# names, with the command it gives; a range is the spread over the runs
# reported.

# the repository's root: above the working folder, or above jkofast's package
places = [Path.cwd(), *Path.cwd().parents, Path(jkofast.__file__).parents[1]]
root = next(p for p in places if (p / "benchmarks/results").is_dir())
recorded = json.loads((root / "benchmarks/results/headline.json").read_text())
peers = ("POT", "published torch")
rows = [r for r in recorded["speedups"] if r["peer"].startswith(peers)]
for r in rows:
    print(f"{r['low']:g}-{r['high']:g}x against {r['peer']}")
    print(f"    {r['what']}\n    {r['command']}")

fig, (ax1, ax2) = plt.subplots(
    1, 2, figsize=(9, 3.6), layout="constrained", width_ratios=[1, 1.4]
)
for name, values in us.items():
    if values:
        ax1.plot(sizes, values, "o-", label=name)
ax1.set(yscale="log", xlabel="pool size M", ylabel="µs per update pair")
ax1.set_title("Sinkhorn, timed here")
ax1.legend()
labels = [textwrap.fill(f"{r['peer']}: {r['what']}", 34) for r in rows]
low = np.array([r["low"] for r in rows])
high = np.array([r["high"] for r in rows])
ax2.barh(labels, low, xerr=[0 * low, high - low], capsize=3, color="#2d5d9f")
for y, (lo, hi) in enumerate(zip(low, high)):
    span = f"{lo:g}x" if lo == hi else f"{lo:g}-{hi:g}x"
    ax2.text(hi * 1.15, y, span, va="center")
ax2.set(xscale="log", xlim=(1, 2000), xlabel="speed-up of jkofast")
ax2.set_title("recorded (benchmarks/results/headline.json)")
ax2.tick_params(axis="y", labelsize=7)
ax2.invert_yaxis()
plt.show()
