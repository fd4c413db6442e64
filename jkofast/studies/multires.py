"""``jkofast study mr-jko``: MR-JKO / SAM-JKO against vanilla JKO (SPEC A.6.3, A.7.10, A.9.6).

**SciFact part.** Test queries (``--quick``: the first 30), hybrid pools of M = 200,
``rel = minmax(0.4·minmax(dense) + 0.6·minmax(rerank))``. Methods: ``vanilla`` (contrib
operating point, ``E = −rel``, ``p0 = softmax(rel/1.0)``, :func:`jkofast.jko.solver.rerank_batch`),
``mr_kmeans`` and ``sam_b05`` / ``sam_b10`` / ``sam_b20`` / ``sam_b40`` (SAM β = 0.5, 1, 2, 4)
with G = 20, G_keep = 4, the coarse config and the reported fine config (inner 20), via
:func:`jkofast.jko.multires.multires_rerank`. Every method runs with both gradients: the
reference-faithful truncated unroll (rows named as published) and the exact implicit gradient
(rows suffixed ``_impl``, the fast path). Each method is one batched call over all queries,
timed by wall clock; the methods are run interleaved ``REPEATS`` times (1 with ``--quick``) and
the best time is kept, so every method sees the same machine load.

Timing protocol vs the published one (SPEC A.7.10, C.1 #16): the published vanilla timing
excludes building C and K, ours cannot (``rerank_batch`` builds them inside its kernel); the
serial time of building them (``geometry_ms``) is measured separately and, at one thread, the
speed-up excluding it is reported too (``speedup_excl_geometry``). MR/SAM timings include the
clustering and their own C/K, as published.

**Synthetic scaling part** (SPEC A.7.10 construction): one ``default_rng(0)`` shared across
M ∈ (100, 200, 500, 1000, 2000, 5000) in that order (100 is drawn, not run, so that M = 200,
500, 1000 get the published inputs); 20 clusters of M/20 points ``centre + 0.05·N(0, I)``
normalised (d = 384, float32); ``rel = 0.9 + 0.05·N`` in cluster 0 and ``0.3 + 0.1·N`` elsewhere,
clipped to [0, 1]; vanilla h 2, λ 0.1, ρ 0.05, ε 0.2, T 3, inner 20, ``p0 = softmax(rel/0.2)``,
``E = −rel``; MR-JKO (spherical k-means) with ``G = max(10, M // 25)``, G_keep 4, the function
defaults (fine inner 25). Runs M ∈ {200, 500, 1000, 2000, 5000} (``--quick``: {200, 500}) with
the implicit gradient, and the unrolled one up to ``UNROLLED_MAX_M``.
"""

from __future__ import annotations

import time

import numpy as np

from jkofast.jko.energy import minmax, softmax_tau
from jkofast.jko.multires import coarse_config, fine_config, multires_rerank
from jkofast.jko.solver import JKOConfig, operating_point, rerank_batch
from jkofast.kernels.jko.geometry import cost_kernel_dense
from jkofast.studies.common import (
    StudyOptions,
    StudyResult,
    diversity_at_k,
    method_row,
    require_matplotlib,
    save_figure,
    study_inputs,
    topk_metrics,
)
from jkofast.studies.published import published

__all__ = [
    "G_KEEP",
    "METHODS",
    "SCALING_M",
    "G",
    "pareto_series",
    "plot",
    "scaling_inputs",
    "scaling_run",
    "scaling_table",
    "study",
]

STUDY = "mr-jko"
G = 20
G_KEEP = 4
QUICK_QUERIES = 30
REPEATS = 3
# (name, clustering, beta); None = vanilla
METHODS = (
    ("vanilla", None, None),
    ("mr_kmeans", "kmeans", 1.0),
    ("sam_b05", "sam", 0.5),
    ("sam_b10", "sam", 1.0),
    ("sam_b20", "sam", 2.0),
    ("sam_b40", "sam", 4.0),
)
SCALING_STREAM = (100, 200, 500, 1000, 2000, 5000)  # draw order of the shared generator
SCALING_M = (200, 500, 1000, 2000, 5000)
SCALING_M_QUICK = (200, 500)
UNROLLED_MAX_M = 1000
GRADS = (("unrolled", ""), ("implicit", "_impl"))


# ---------------------------------------------------------------------------------------------
# SciFact part
# ---------------------------------------------------------------------------------------------
def _configs(grad: str):
    """Return the (vanilla, coarse, fine) configurations of the SciFact part for gradient path ``grad``."""
    return operating_point("contrib", grad=grad), coarse_config(grad=grad), fine_config(reported=True, grad=grad)


def _run_method(inp, rel, name, clustering, beta, grad, n_threads):
    """One batched call of a method; returns ``(p, wall seconds, CPU seconds, pool sizes or None)``."""
    van, co, fi = _configs(grad)
    c0 = time.process_time()
    t0 = time.perf_counter()
    if clustering is None:
        res = rerank_batch(-rel, None, inp.offsets, embeddings=inp.Z, config=van, n_threads=n_threads)
        sizes = None
    else:
        res = multires_rerank(
            rel,
            inp.offsets,
            inp.Z,
            G=G,
            G_keep=G_KEEP,
            clustering=clustering,
            sam_beta=beta,
            coarse=co,
            fine=fi,
            n_threads=n_threads,
        )
        sizes = res.pool_size
    dt = time.perf_counter() - t0
    dc = time.process_time() - c0
    bad = int(np.count_nonzero(res.status))
    if bad:
        raise RuntimeError(f"{name} ({grad}): {bad} pools failed: {sorted(res.errors.items())[:3]}")
    return res.p, dt, dc, sizes


def _geometry_seconds(inp, repeats: int) -> tuple[float, float]:
    """Return the serial (wall, CPU) seconds of building C and K for every pool, best of ``repeats``.

    The published vanilla timing excludes this step.
    """
    off = inp.offsets
    cost_kernel_dense(inp.Z, 0, 1, True, np.empty((1, 1)), np.empty((1, 1)))  # compiled / loaded untimed
    wall = cpu = np.inf
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        for q in range(off.shape[0] - 1):
            m = int(off[q + 1] - off[q])
            cost_kernel_dense(inp.Z, int(off[q]), int(off[q + 1]), True, np.empty((m, m)), np.empty((m, m)))
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def _scifact_rows(inp, rel, opts: StudyOptions, repeats: int):
    """Run every method with both gradients ``repeats`` times interleaved; return its rows and the geometry ms/q."""
    pub = published("multires")["rows"]  # SPEC A.9.6, SciFact test, M = 200 (PyTorch float32, cross-encoder)
    runs = {}
    best = {}
    best_cpu = {}
    for rep in range(repeats):
        for grad, suffix in GRADS:
            for name, clustering, beta in METHODS:
                key = name + suffix
                p, dt, dc, sizes = _run_method(inp, rel, key, clustering, beta, grad, opts.n_threads)
                if rep == 0:
                    runs[key] = (p, sizes)
                best[key] = min(best.get(key, np.inf), dt)
                best_cpu[key] = min(best_cpu.get(key, np.inf), dc)
        opts.log(STUDY, f"timing pass {rep + 1}/{repeats} done")
    geo_wall, geo_cpu = _geometry_seconds(inp, repeats)
    geo_ms = 1000 * geo_wall / inp.n_queries
    rows = []
    for grad, suffix in GRADS:
        base_key = "vanilla" + suffix
        ms_base = 1000 * best[base_key] / inp.n_queries
        cpu_base = best_cpu[base_key]
        base_metrics = None
        for name, clustering, _ in METHODS:
            key = name + suffix
            p, sizes = runs[key]
            m = topk_metrics(p, inp)
            if base_metrics is None:
                base_metrics = m
            ms = 1000 * best[key] / inp.n_queries
            extra = {
                "grad": grad,
                "div10": float(np.mean(diversity_at_k(m["top"], inp.doc_emb))),
                "speedup": ms_base / ms,
                "cpu_ms_per_query": 1000 * best_cpu[key] / inp.n_queries,
                "speedup_cpu": cpu_base / best_cpu[key],
            }
            if opts.n_threads == 1 and clustering is not None:
                # CPU based: the serial geometry loop and the one-thread batch are comparable there
                extra["speedup_excl_geometry"] = (cpu_base - geo_cpu) / best_cpu[key]
            if sizes is not None:
                extra["pool_size_mean"] = float(np.mean(sizes))
            rows.append(
                method_row(
                    key,
                    m,
                    ms,
                    baseline=None if clustering is None else (base_key, base_metrics["ndcg"]),
                    published=pub[name],
                    **extra,
                )
            )
            opts.log(STUDY, f"{key:<16} nDCG@10 {rows[-1]['ndcg10']:.4f}  {ms:8.2f} ms/q  x{extra['speedup']:.2f}")
    return rows, (geo_ms, 1000 * geo_cpu / inp.n_queries)


# ---------------------------------------------------------------------------------------------
# synthetic scaling part
# ---------------------------------------------------------------------------------------------
def scaling_inputs(m_values=SCALING_M, d: int = 384, n_clusters: int = 20) -> dict:
    """Return the SPEC A.7.10 synthetic pools: ``{M: (Z float32 (M, d), rel float32 (M,))}``.

    One ``numpy.random.default_rng(0)`` is drawn in the order of ``SCALING_STREAM`` (then any
    other requested M in ascending order), so each M gets the same inputs whichever subset is
    asked for; cluster 0 (rows ``0 .. M/20 - 1``) is the gold cluster.
    """
    order = list(SCALING_STREAM) + sorted(set(m_values) - set(SCALING_STREAM))
    last = max(order.index(m) for m in m_values)
    rng = np.random.default_rng(0)
    out = {}
    for M in order[: last + 1]:
        centres = rng.normal(size=(n_clusters, d))
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        per = M // n_clusters
        Z = np.empty((per * n_clusters, d))
        rel = np.empty(per * n_clusters)
        i = 0
        for ci in range(n_clusters):
            for _ in range(per):
                z = centres[ci] + 0.05 * rng.normal(size=d)
                Z[i] = z / np.linalg.norm(z)
                rel[i] = 0.9 + 0.05 * rng.normal() if ci == 0 else 0.3 + 0.1 * rng.normal()
                i += 1
        if M in m_values:
            out[M] = (Z.astype(np.float32), np.clip(rel, 0.0, 1.0).astype(np.float32))
    return out


def scaling_run(Z, rel, grad: str, n_threads=None, repeats: int = 1) -> dict:
    """Vanilla vs MR-JKO on one synthetic pool (SPEC A.7.10); best of ``repeats`` interleaved timings."""
    M = Z.shape[0]
    per = M // 20
    off = np.array([0, M], np.int64)
    r = np.asarray(rel, np.float64)
    van = JKOConfig(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=3, inner_steps=20, grad=grad)
    p0 = softmax_tau(r, off, 0.2)
    g_mr = max(10, M // 25)
    t_van = t_mr = c_van = c_mr = np.inf
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        rv = rerank_batch(-r, p0, off, embeddings=Z, config=van, n_threads=n_threads)
        t_van = min(t_van, time.perf_counter() - t0)
        c_van = min(c_van, time.process_time() - c0)
        c0, t0 = time.process_time(), time.perf_counter()
        rm = multires_rerank(
            r,
            off,
            Z,
            G=g_mr,
            G_keep=4,
            coarse=coarse_config(grad=grad),
            fine=fine_config(grad=grad),
            n_threads=n_threads,
        )
        t_mr = min(t_mr, time.perf_counter() - t0)
        c_mr = min(c_mr, time.process_time() - c0)
    gold = np.arange(per)

    def top10_in_gold(p):
        top = np.argsort(-p, kind="stable")[:10]
        return len(np.intersect1d(top, gold)) / per

    return {
        "M": int(M),
        "grad": grad,
        "per_cluster": int(per),
        "G": int(g_mr),
        "vanilla_ms": 1000 * t_van,
        "mr_ms": 1000 * t_mr,
        "speedup": t_van / t_mr,
        "vanilla_cpu_ms": 1000 * c_van,
        "mr_cpu_ms": 1000 * c_mr,
        "speedup_cpu": c_van / c_mr,
        "vanilla_mass_gold": float(rv.p[:per].sum()),
        "mr_mass_gold": float(rm.p[:per].sum()),
        "vanilla_top10_in_gold": top10_in_gold(rv.p),
        "mr_top10_in_gold": top10_in_gold(rm.p),
        "pool_size": int(rm.pool_size[0]),
        "published": published("multires")["scaling"].get(int(M)),  # SPEC A.9.6 synthetic scaling
    }


def _scaling(opts: StudyOptions, repeats: int) -> list:
    ms = SCALING_M_QUICK if opts.quick else SCALING_M
    data = scaling_inputs(ms)
    rows = []
    for M in ms:
        for grad in ("implicit", "unrolled"):
            if grad == "unrolled" and M > UNROLLED_MAX_M:
                continue
            rows.append(scaling_run(*data[M], grad, opts.n_threads, repeats))
            s = rows[-1]
            opts.log(STUDY, f"scaling M={M:<5} {grad:<9} vanilla {s['vanilla_ms']:.1f} ms  MR {s['mr_ms']:.1f} ms  "
                     f"x{s['speedup']:.2f}")  # fmt: skip
    return rows


# ---------------------------------------------------------------------------------------------
# text blocks
# ---------------------------------------------------------------------------------------------
def _scifact_block(rows) -> str:
    head = (
        f"{'method':<16} {'Div@10':>7} {'pub':>7} {'speed-up':>9} {'excl C,K':>9} {'CPU ms/q':>9} {'CPU x':>7} "
        f"{'pub':>7} {'pub ms/q':>9} {'pool':>6}"
    )
    lines = [
        "SciFact: diversity, speed-up vs the vanilla of the same gradient (wall; CPU time), refined pool size",
        head,
        "-" * len(head),
    ]
    for r in rows:
        pub = r["published"]
        ex = r.get("speedup_excl_geometry")
        pool = r.get("pool_size_mean")
        lines.append(
            f"{r['method']:<16} {r['div10']:7.4f} {pub['div10']:7.4f} {r['speedup']:8.2f}x "
            f"{(f'{ex:8.2f}x' if ex is not None else '       --')} {r['cpu_ms_per_query']:9.2f} "
            f"{r['speedup_cpu']:6.2f}x {pub['speedup']:6.2f}x {pub['ms_per_query']:9.1f} "
            f"{(f'{pool:6.1f}' if pool is not None else '    --')}"
        )
    return "\n".join(lines)


def scaling_table(rows) -> str:
    """Return the text table of :func:`scaling_run` rows with the published figures beside them."""
    head = (
        f"{'M':>5} {'grad':<9} {'van ms':>8} {'MR ms':>8} {'speed-up':>9} {'CPU x':>7} {'pub':>6} "
        f"{'mass gold van/MR':>17} "
        f"{'pub':>11} {'top10 gold v/MR':>16} {'pub':>5} {'pool':>5} {'pub':>4}"
    )
    lines = ["Synthetic scaling (SPEC A.7.10; published: single cold call, PyTorch)", head, "-" * len(head)]
    for s in rows:
        p = s["published"] or {}

        def pub(key, fmt, p=p):
            return format(p[key], fmt) if key in p else "--"

        lines.append(
            f"{s['M']:>5} {s['grad']:<9} {s['vanilla_ms']:8.1f} {s['mr_ms']:8.1f} {s['speedup']:8.2f}x "
            f"{s['speedup_cpu']:6.2f}x "
            f"{pub('speedup', '.2f'):>6} {s['vanilla_mass_gold']:8.3f}/{s['mr_mass_gold']:.3f} "
            f"{pub('vanilla_mass_gold', '.3f') + '/' + pub('mr_mass_gold', '.3f'):>11} "
            f"{s['vanilla_top10_in_gold']:8.2f}/{s['mr_top10_in_gold']:.2f} {pub('top10_in_gold', '.2f'):>5} "
            f"{s['pool_size']:>5} {pub('pool_size', 'd'):>4}"
        )
    return "\n".join(lines)


def study(opts: StudyOptions) -> StudyResult:
    """Run the MR-JKO / SAM-JKO study (module docstring) and return its rows.

    Rows: ``vanilla``, ``mr_kmeans``, ``sam_b05`` … ``sam_b40`` (unrolled gradient) and the same
    with ``_impl`` (implicit gradient); each with ``div10``, ``speedup`` (vs the vanilla of its
    gradient), the paired nDCG@10 difference vs that vanilla and the published figures.
    ``extra["scaling"]``: one dict per (M, gradient) of the synthetic part.
    """
    inp = study_inputs(opts, "test", study=STUDY, n_queries=QUICK_QUERIES if opts.quick else None)
    rel = np.asarray(minmax(inp.blend(0.4, 0.6), inp.offsets), np.float64)
    repeats = 1 if opts.quick else REPEATS
    rows, (geo_ms, geo_cpu_ms) = _scifact_rows(inp, rel, opts, repeats)
    scaling = _scaling(opts, max(repeats, 2))
    sizes = np.diff(inp.offsets)
    van, co, fi = _configs("unrolled")
    notes = [
        *inp.notes,
        f"pools M = {int(sizes.min())}..{int(sizes.max())}; rel = minmax(0.4 minmax(dense) + 0.6 minmax(rerank)); "
        f"G = {G}, G_keep = {G_KEEP}; coarse (h {co.h}, lam {co.lam}, rho {co.rho}, eps {co.sinkhorn_eps}, T {co.T}, "
        f"inner {co.inner_steps}, tau0 {co.tau0}); fine (h {fi.h}, lam {fi.lam}, rho {fi.rho}, eps {fi.sinkhorn_eps}, "
        f"T {fi.T}, inner {fi.inner_steps}, tau0 {fi.tau0}); vanilla = contrib (T {van.T}, inner {van.inner_steps})",
        "rows without suffix: grad='unrolled' (the published truncated unroll); '_impl': grad='implicit' (exact "
        "gradient, converged Sinkhorn) in both stages and in vanilla",
        f"ms/query = best of {repeats} interleaved batched passes / n_queries at n_threads={opts.n_threads} (wall "
        "clock; CPU = process time, robust to other load on the machine, summed over threads); vanilla "
        f"includes building C and K in its kernel (the published vanilla excludes it); building them serially takes "
        f"{geo_ms:.2f} ms/query wall, {geo_cpu_ms:.2f} CPU"
        + ("; 'excl C,K' = CPU speed-up with that subtracted from vanilla" if opts.n_threads == 1 else ""),
        "published ms/query: PyTorch float32, one query at a time, reference machine (SPEC A.9.6)",
        f"scaling: G = max(10, M // 25), G_keep 4, coarse/fine function defaults (fine inner 25); unrolled only up to "
        f"M = {UNROLLED_MAX_M}; best of {max(repeats, 2)} warm calls (published: one cold call)",
    ]
    if opts.quick:
        notes.append(f"--quick: first {QUICK_QUERIES} test queries; scaling M in {list(SCALING_M_QUICK)}")
    extra = {
        "scaling": scaling,
        "geometry_ms_per_query": geo_ms,
        "geometry_cpu_ms_per_query": geo_cpu_ms,
        "G": G,
        "G_keep": G_KEEP,
    }
    blocks = [_scifact_block(rows), scaling_table(scaling)]
    return StudyResult(STUDY, inp.dataset, inp.n_queries, rows, extra=extra, blocks=blocks, notes=notes)


def pareto_series(rows) -> dict:
    """Return the speed-quality points of the SciFact rows: ``{grad: {series: [(beta, ms/query, nDCG@10)]}}``.

    Series ``vanilla``, ``MR`` (beta None) and ``SAM`` (one point per beta, in increasing beta);
    ``grad`` is the gradient path of the rows (``unrolled``, ``implicit``).
    """
    betas = {name: beta for name, _, beta in METHODS}
    out: dict = {}
    for r in rows:
        key = r["method"]
        name = key.removesuffix("_impl")
        series = "vanilla" if name == "vanilla" else "MR" if name == "mr_kmeans" else "SAM"
        pt = (betas[name] if series == "SAM" else None, r["ms_per_query"], r["ndcg10"])
        out.setdefault(r["grad"], {}).setdefault(series, []).append(pt)
    for by in out.values():
        by.get("SAM", []).sort(key=lambda t: t[0])
    return out


def plot(result: StudyResult, out_dir: str) -> list[str]:
    """Write ``mr_jko_pareto.png``: ms/query (log) against nDCG@10 of vanilla, MR and SAM at each beta.

    One panel per gradient path; the published points (SPEC A.9.6, PyTorch, one query at a time)
    are drawn hollow on the unrolled panel.
    """
    plt = require_matplotlib()
    series = pareto_series(result.rows)
    style = {"vanilla": ("s", "k"), "MR": ("^", "#d95f02"), "SAM": ("o", "#1b9e77")}
    fig, axes = plt.subplots(1, len(series), figsize=(5.2 * len(series), 4.0), squeeze=False)
    pub = published("multires")["rows"]
    for ax, (grad, by) in zip(axes[0], series.items(), strict=True):
        for name, pts in by.items():
            marker, color = style[name]
            ax.plot([p[1] for p in pts], [p[2] for p in pts], marker=marker, color=color, label=name)
            for beta, x, y in pts:
                if beta is not None:
                    ax.annotate(f"β={beta:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        if grad == "unrolled":
            for name, marker, color, keys in (
                ("vanilla", "s", "k", ["vanilla"]),
                ("MR", "^", "#d95f02", ["mr_kmeans"]),
                ("SAM", "o", "#1b9e77", [n for n, c, _ in METHODS if c == "sam"]),
            ):
                ax.plot(
                    [pub[k]["ms_per_query"] for k in keys],
                    [pub[k]["ndcg10"] for k in keys],
                    marker=marker,
                    color=color,
                    ls=":",
                    mfc="none",
                    alpha=0.6,
                    label=f"{name} (published)",
                )
        ax.set_xscale("log")
        ax.set_xlabel("ms / query (log)")
        ax.set_ylabel("nDCG@10")
        ax.set_title(f"grad = {grad}")
        ax.legend(fontsize=7)
    return save_figure(
        fig,
        out_dir,
        "mr_jko_pareto.png",
        f"MR-JKO / SAM-JKO speed-quality, {result.dataset} ({result.n_queries} queries)",
    )
