"""Draw the figures of the Benchmarks page from the results file ``benchmarks/results/headline.json``.

The results file holds the measured figures the Benchmarks page reports (each with the command that
reproduces it); this script only draws them, so a new measurement is one edit of the JSON and one run:

    python benchmarks/tools/plot_benchmarks.py            # writes docs/_static/bench/*.svg

Figures: ``speedups.svg`` (jkofast against each peer, log scale, the reported range as a bar),
``sgr_scale.svg`` (SparseGeometricRAG ms/query and bytes/passage against corpus size),
``thread_scaling.svg`` (throughput relative to one thread) and ``rerank_throughput.svg``.
Needs matplotlib (``pip install "jkofast[plot]"``).
"""

from __future__ import annotations

import argparse
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "benchmarks", "results", "headline.json")
OUT = os.path.join(ROOT, "docs", "_static", "bench")
BLUE, GREY, ORANGE = "#1f5fa8", "#9a9a9a", "#d9822b"


def _save(fig, folder: str, name: str) -> str:
    """Write ``fig`` as a reproducible SVG (no date, fixed ids) and return its path."""
    path = os.path.join(folder, name)
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    return path


def speedups(d: dict, plt, folder: str) -> str:
    rows = sorted(d["speedups"], key=lambda r: r["low"])
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(rows) + 0.9))
    y = range(len(rows))
    ax.barh(y, [r["low"] for r in rows], color=BLUE, height=0.6)
    for i, r in enumerate(rows):
        if r["high"] > r["low"]:
            ax.plot([r["low"], r["high"]], [i, i], color=ORANGE, lw=4, solid_capstyle="butt")
        label = f"{r['low']:g}×" if r["high"] == r["low"] else f"{r['low']:g}–{r['high']:g}×"
        ax.text(r["high"] * 1.12, i, label, va="center", fontsize=9)
    ax.set_yticks(list(y), [f"{r['what']}\nvs {r['peer']}" for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(1, max(r["high"] for r in rows) * 4)
    ax.axvline(1, color=GREY, lw=0.8)
    ax.set_xlabel("speed-up of jkofast over the peer (same machine, same run; log scale)")
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, folder, "speedups.svg")


def sgr_scale(d: dict, plt, folder: str) -> str:
    s = d["sgr_scale"]
    n = s["passages"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
    pts = [(x, v) for x, v in zip(n, s["ms_per_query_1t"], strict=True) if v is not None]
    a1.plot([x for x, _ in pts], [v for _, v in pts], "o-", color=BLUE, label="jkofast, 1 thread")
    pub = s["published"]
    a1.plot([pub["passages"]], [pub["ms_per_query"]], "s", color=ORANGE, label="published (5 threads)")
    a1.set(xscale="log", yscale="log", xlabel="passages", ylabel="ms per query (median)", title="Query time")
    a1.legend(fontsize=8, frameon=False)
    b = [(x, v, m) for x, v, m in zip(n, s["bytes_per_passage"], s["build"], strict=True) if v is not None]
    a2.plot([x for x, _, _ in b], [v for _, v, _ in b], "o-", color=BLUE, label="jkofast")
    for x, v, m in b:
        a2.annotate(m, (x, v), textcoords="offset points", xytext=(4, 6), fontsize=6.5)
    a2.plot([pub["passages"]], [pub["bytes_per_passage"]], "s", color=ORANGE, label="published")
    a2.set(xscale="log", yscale="log", xlabel="passages", ylabel="index bytes per passage", title="Index size")
    a2.legend(fontsize=8, frameon=False)
    for a in (a1, a2):
        a.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return _save(fig, folder, "sgr_scale.svg")


def thread_scaling(d: dict, plt, folder: str) -> str:
    t = d["thread_scaling"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(t["threads"], t["threads"], "--", color=GREY, lw=1, label="linear")
    for name, v in t["workloads"].items():
        ax.plot(t["threads"], v, "o-", ms=4, label=name)
    ax.set(xscale="log", yscale="log", xlabel="threads", ylabel="throughput / 1 thread")
    ax.set_xticks(t["threads"], [str(x) for x in t["threads"]])
    ax.set_yticks(t["threads"], [str(x) for x in t["threads"]])
    ax.set_title(f"Thread scaling ({t['machine']})", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, folder, "thread_scaling.svg")


def rerank_throughput(d: dict, plt, folder: str) -> str:
    rows = d["rerank_throughput"]["rows"]
    fig, ax = plt.subplots(figsize=(6.5, 2.4))
    y = range(len(rows))
    ax.barh(y, [r["low"] for r in rows], color=[GREY] + [BLUE] * (len(rows) - 1), height=0.6)
    for i, r in enumerate(rows):
        label = f"{r['low']:g}" if r["high"] == r["low"] else f"{r['low']:g}–{r['high']:g}"
        ax.text(r["high"] + 4, i, label, va="center", fontsize=9)
    ax.set_yticks(list(y), [r["label"] for r in rows], fontsize=8)
    ax.set_xlabel("queries per second, jkofast rerank (file to file)")
    ax.set_xlim(0, max(r["high"] for r in rows) * 1.2)
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, folder, "rerank_throughput.svg")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=RESULTS, help="the results file (JSON)")
    ap.add_argument("--out", default=OUT, help="folder for the SVG figures")
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "jkofast"  # fixed element ids: the same data gives the same file
    with open(args.results, encoding="utf-8") as fh:
        d = json.load(fh)
    os.makedirs(args.out, exist_ok=True)
    for draw in (speedups, sgr_scale, thread_scaling, rerank_throughput):
        print("wrote", os.path.relpath(draw(d, plt, args.out)))
        plt.close("all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
