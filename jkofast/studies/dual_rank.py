"""``jkofast study dual-rank``: OT duals as a per-query confidence (SPEC A.6.4; published A.9.7, A.9.8).

On the test pools (SciFact: all 300 queries; ``--quick``: the first :data:`QUICK_QUERIES`), contrib
operating point (h 2, λ 0.1, ρ 0.05, ε 0.2, T 3, inner 20, τ0 1), mode ``wasserstein``, energy
``E = −(0.4·minmax(dense) + 0.6·minmax(rerank))``, ``p0 = softmax_{τ0}(−E)``, MiniLM cosine cost:

1. ``rerank_batch(..., return_duals=True)``: ``p_T`` and the duals ``f`` of the uniform-target
   read-out (SPEC A.4.5), all queries in one ``prange`` kernel;
2. per query (:func:`jkofast.jko.confidence.dual_confidence`): ``conf_dual = f[top1] − median f``,
   ``top1_f``, ``conf_softmax = max softmax(rerank logits)``, ``conf_margin = p_(1) − p_(2)``;
3. nDCG@10 (exponential gain, the published tables' definition; equal to the linear gain on binary
   labels) and Recall@10 of the top-20 read-out, and top-1 accuracy (the top-1 document is *judged*,
   label 0 included);
4. the selective-coverage curve of each signal over the published grid, the rank-based ECE of
   ``top1_f``, the range of ``conf_dual``.

The gradient path is ``grad="implicit"`` (exact gradient at a converged plan; the fast path) unless
the caller passes ``grad="unrolled"`` (the reference-faithful truncated adjoint, ~10x slower).
Timing: the whole pipeline after the pools (energy, JKO + duals, read-out, metrics, curves, ECE)
is timed, warm (the kernels are compiled or loaded from the cache before the clock starts).
"""

from __future__ import annotations

import os
import time

import numpy as np

from jkofast.studies.common import StudyOptions, StudyResult, method_row, study_inputs, topk_metrics

__all__ = ["PUBLISHED", "PUBLISHED_COVERAGE", "QUICK_QUERIES", "SIGNALS", "run_dual_rank", "study"]

QUICK_QUERIES = 30
ALPHA, GAMMA = 0.4, 0.6
# signal key -> (ConfidenceSignals attribute, published column name)
SIGNALS = {
    "dual": ("conf_dual", "dual"),
    "softmax": ("conf_softmax", "softmax-max"),
    "margin": ("conf_margin", "margin"),
}

# SPEC A.9.7: nDCG@10 / top-1 accuracy of the kept queries at coverage 1.00, 0.50, 0.10 (cross-encoder rerank term)
PUBLISHED_COVERAGE = {
    "scifact": {
        1.0: {"dual": (0.710, 0.593), "softmax": (0.710, 0.593), "margin": (0.710, 0.593)},
        0.5: {"dual": (0.809, 0.707), "softmax": (0.877, 0.820), "margin": (0.860, 0.807)},
        0.1: {"dual": (0.896, 0.800), "softmax": (1.000, 1.000), "margin": (0.993, 1.000)},
    },
    "nfcorpus": {
        1.0: {"dual": (0.359, 0.477), "softmax": (0.359, 0.477), "margin": (0.359, 0.477)},
        0.5: {"dual": (0.483, 0.660), "softmax": (0.439, 0.642), "margin": (0.380, 0.556)},
        0.1: {"dual": (0.541, 0.719), "softmax": (0.511, 0.781), "margin": (0.439, 0.750)},
    },
    "fiqa": {
        1.0: {"dual": (0.411, 0.392), "softmax": (0.411, 0.392), "margin": (0.411, 0.392)},
        0.5: {"dual": (0.546, 0.540), "softmax": (0.519, 0.543), "margin": (0.523, 0.574)},
        0.1: {"dual": (0.724, 0.723), "softmax": (0.691, 0.831), "margin": (0.759, 0.877)},
    },
    "scidocs": {
        1.0: {"dual": (0.197, 0.232), "softmax": (0.197, 0.232), "margin": (0.197, 0.232)},
        0.5: {"dual": (0.256, 0.320), "softmax": (0.238, 0.304), "margin": (0.235, 0.322)},
        0.1: {"dual": (0.385, 0.510), "softmax": (0.297, 0.440), "margin": (0.294, 0.470)},
    },
}
# SPEC A.9.1 / A.9.7 / A.9.8 per dataset: n, ECE of top1_f, conf_dual (min, median, max), wall s,
# n kept at 0.95 / 0.50 / 0.10, jko_blend (= jko_dual) nDCG@10 [CI], jko_blend - rerank
PUBLISHED = {
    "scifact": {
        "n": 300,
        "ece": 0.1405,
        "conf_dual_range": (0.786, 1.371, 1.840),
        "wall_s": 288.0,
        "n_kept": {0.95: 285, 0.5: 150, 0.1: 30},
        "jko_dual": {"ndcg10": 0.7105, "ndcg10_ci": [0.666, 0.753], "diff_vs_rerank": [0.0267, 0.0128, 0.0410]},
        "rerank": {"ndcg10": 0.6838, "ndcg10_ci": [0.637, 0.728], "recall10": 0.802},
    },
    "nfcorpus": {
        "n": 323,
        "ece": 0.1988,
        "conf_dual_range": (0.729, 1.407, 1.896),
        "wall_s": 311.0,
        "n_kept": {0.95: 307, 0.5: 162, 0.1: 32},
        "jko_dual": {"ndcg10": 0.3585, "ndcg10_ci": [0.322, 0.393], "diff_vs_rerank": [0.0061, 0.0003, 0.0120]},
        "rerank": {"ndcg10": 0.3525, "ndcg10_ci": [0.317, 0.387], "recall10": 0.163},
    },
    "fiqa": {
        "n": 648,
        "ece": 0.1408,
        "conf_dual_range": (0.521, 1.090, 1.718),
        "wall_s": 625.0,
        "n_kept": {0.95: 616, 0.5: 324, 0.1: 65},
        "jko_dual": {"ndcg10": 0.4106, "ndcg10_ci": [0.382, 0.438], "diff_vs_rerank": [0.0428, 0.0334, 0.0519]},
        "rerank": {"ndcg10": 0.3678, "ndcg10_ci": [0.340, 0.394], "recall10": 0.443},
    },
    "scidocs": {
        "n": 1000,
        "ece": 0.2681,
        "conf_dual_range": (0.459, 1.192, 1.798),
        "wall_s": 944.0,
        "n_kept": {0.95: 950, 0.5: 500, 0.1: 100},
        "jko_dual": {"ndcg10": 0.1971, "ndcg10_ci": [0.183, 0.212], "diff_vs_rerank": [0.0299, 0.0250, 0.0348]},
        "rerank": {"ndcg10": 0.1672, "ndcg10_ci": [0.154, 0.181], "recall10": 0.173},
    },
}


def _published_key(dataset: str) -> str | None:
    key = os.path.basename(os.path.normpath(str(dataset))).lower()
    return key if key in PUBLISHED else None


def _warm(cfg, inputs, n_threads) -> float:
    """Compile (or load from the cache) what the timed pipeline runs; return the seconds it took.

    The solver and the confidence read-out on a tiny batch, the min-max/softmax kernels, the top-k
    read-out and the metrics on the real pools (an all-zero ``p``), and ``scipy.stats`` (ranks).
    """
    import scipy.stats  # noqa: F401  (rankdata of the ECE; its first import is slow)

    from jkofast.jko.confidence import confidence_signals
    from jkofast.jko.energy import energy_and_p0
    from jkofast.jko.solver import rerank_batch

    t0 = time.perf_counter()
    Z = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], np.float32)
    off = np.array([0, 3], np.int64)
    x = np.array([1.0, 0.5, 0.0], np.float64)
    E, p0 = energy_and_p0(off, dense=x.astype(inputs.pools.dense.dtype), rerank=x, tau0=cfg.tau0, n_threads=n_threads)
    tiny = cfg.replace(T=1, inner_steps=2)
    res = rerank_batch(E, p0, off, embeddings=Z, config=tiny, return_duals=True, n_threads=n_threads)
    confidence_signals(res.p, res.f, x, off, n_threads=n_threads)
    topk_metrics(np.zeros(int(inputs.offsets[-1])), inputs)
    return time.perf_counter() - t0


def run_dual_rank(inputs, cfg, *, n_threads: int | None = None) -> dict:
    """Run the Dual-Rank pipeline on built inputs (everything after the pools); return its pieces.

    Parameters
    ----------
    inputs : jkofast.studies.common.StudyInputs
    cfg : jkofast.jko.solver.JKOConfig
        The solver configuration (the study uses contrib, mode ``wasserstein``).
    n_threads : int, optional

    Returns
    -------
    dict
        ``result`` (RerankResult), ``signals`` (ConfidenceSignals), ``metrics`` (per-query
        ``ndcg``, ``ndcg_exp``, ``recall``, ``top``), ``top1_acc``, ``ok`` (queries without
        failure), ``coverage`` (signal -> rows), ``ece``, ``conf_dual_range``, ``rerank_metrics``
        and ``times`` (seconds per stage; ``pipeline`` = all but the rerank baseline).
    """
    from jkofast.eval.selective import PUBLISHED_COVERAGES, ece_rank, selective_coverage, top1_accuracy
    from jkofast.jko.confidence import dual_confidence
    from jkofast.jko.energy import energy_and_p0
    from jkofast.jko.solver import rerank_batch

    off = inputs.offsets
    times = {}
    t0 = time.perf_counter()
    E, p0 = energy_and_p0(
        off,
        dense=inputs.pools.dense,
        rerank=inputs.rerank,
        alpha=ALPHA,
        gamma=GAMMA,
        tau0=cfg.tau0,
        n_threads=n_threads,
    )
    t1 = time.perf_counter()
    res = rerank_batch(
        E, p0, off, embeddings=inputs.Z, config=cfg, return_duals=True, n_threads=n_threads, warn_unconverged=False
    )
    t2 = time.perf_counter()
    sig = dual_confidence(res, inputs.rerank, n_threads=n_threads)
    t3 = time.perf_counter()
    ok = (sig.status == 0) & (res.status == 0)
    p = np.where(np.repeat(ok, np.diff(off)), res.p, 0.0)  # failed pools read out nothing useful
    metrics = topk_metrics(p, inputs)
    doc_idx = inputs.pools.doc_idx
    top1_docs = [inputs.doc_ids[int(doc_idx[off[q] + sig.top1[q]])] if ok[q] else None for q in range(inputs.n_queries)]
    acc = top1_accuracy(top1_docs, inputs.query_ids, inputs.qrels)
    per_query = {"ndcg10": metrics["ndcg_exp"][ok], "recall10": metrics["recall"][ok], "top1_acc": acc[ok]}
    coverage = {}
    if ok.any():
        for key, (attr, _) in SIGNALS.items():
            coverage[key] = selective_coverage(getattr(sig, attr)[ok], per_query, PUBLISHED_COVERAGES)
        ece = ece_rank(sig.top1_f[ok], acc[ok], n_bins=10)
        cd = sig.conf_dual[ok]
        rng = {"min": float(cd.min()), "median": float(np.median(cd)), "max": float(cd.max())}
    else:
        ece, rng = float("nan"), {"min": float("nan"), "median": float("nan"), "max": float("nan")}
    t4 = time.perf_counter()
    times.update(
        energy=t1 - t0, jko_duals=t2 - t1, confidence=t3 - t2, evaluation=t4 - t3, pipeline=t4 - t0, method=t3 - t1
    )
    # the baseline row: the rerank term's own top-20 (not part of the timed pipeline)
    t5 = time.perf_counter()
    rer_metrics = topk_metrics(np.asarray(inputs.rerank, np.float64), inputs)
    times["rerank_baseline"] = time.perf_counter() - t5
    return {
        "result": res,
        "signals": sig,
        "metrics": metrics,
        "top1_acc": acc,
        "ok": ok,
        "coverage": coverage,
        "ece": ece,
        "conf_dual_range": rng,
        "rerank_metrics": rer_metrics,
        "times": times,
    }


def _fmt_pair(v) -> str:
    return "  --/--   " if v is None else f"{v[0]:.3f}/{v[1]:.3f}"


def _coverage_block(coverage: dict, pub: dict | None, dataset: str) -> str:
    src = f"published {dataset} (SPEC A.9.7, cross-encoder)" if pub else "no published numbers for this dataset"
    lines = [
        f"Selective coverage: ours nDCG@10 / Recall@10 / top-1 acc of the kept queries; {src}: nDCG@10 / top-1 acc",
        f"{'cov':>5} {'kept':>5} |" + "".join(f" {SIGNALS[k][1]:<19} {'pub':<11} |" for k in SIGNALS),
    ]
    lines.append("-" * len(lines[-1]))
    rows = coverage.get("dual", [])
    for i, r in enumerate(rows):
        cov = r["coverage"]
        line = f"{cov:5.2f} {r['n_kept']:5d} |"
        for k in SIGNALS:
            c = coverage[k][i]
            ours = f"{c['ndcg10']:.3f}/{c['recall10']:.3f}/{c['top1_acc']:.3f}"
            pv = (pub or {}).get(cov, {}).get(k) if pub else None
            line += f" {ours:<19} {_fmt_pair(pv) if pv else '':<11} |"
        lines.append(line)
    return "\n".join(lines)


def _ece_block(run: dict, pub: dict | None, n_ok: int, n_all: int) -> str:
    rng = run["conf_dual_range"]
    kept = {r["coverage"]: r["n_kept"] for r in run["coverage"].get("dual", [])}
    pr = pub["conf_dual_range"] if pub else None
    lines = [
        "Calibration and spread (published beside ours where known)",
        f"  ECE of top1_f (rank conf, 10 bins) {run['ece']:.4f}   published {pub['ece'] if pub else '--'}",
        f"  conf_dual min / median / max      {rng['min']:.3f} / {rng['median']:.3f} / {rng['max']:.3f}"
        + (f"   published {pr[0]:.3f} / {pr[1]:.3f} / {pr[2]:.3f}" if pr else ""),
        "  n kept at 0.95 / 0.50 / 0.10      "
        + " / ".join(str(kept.get(c, "--")) for c in (0.95, 0.5, 0.1))
        + ("   published " + " / ".join(str(pub["n_kept"][c]) for c in (0.95, 0.5, 0.1)) if pub else ""),
        f"  queries scored                    {n_ok} of {n_all}",
    ]
    return "\n".join(lines)


def _timing_block(times: dict, n: int, n_threads, warm_s: float, pub: dict | None) -> str:
    pw = pub["wall_s"] if pub else None
    lines = [
        f"Timing (warm, {n_threads or 'all'} threads; pools excluded): pipeline {times['pipeline']:.3f} s "
        f"for {n} queries ({1000 * times['pipeline'] / n:.2f} ms/query)"
        + (f"; published {pw:.0f} s for {pub['n']} queries ({1000 * pw / pub['n']:.0f} ms/query)" if pw else ""),
        "  stages: "
        + ", ".join(
            f"{k} {v:.3f} s" for k, v in times.items() if k in ("energy", "jko_duals", "confidence", "evaluation")
        ),
        f"  kernel warm-up before the clock (compile or cache load): {warm_s:.2f} s",
    ]
    return "\n".join(lines)


def study(opts: StudyOptions, *, grad: str = "implicit", n_queries: int | None = None) -> StudyResult:
    """Run the Dual-Rank study (see the module docstring) and return its result.

    Parameters
    ----------
    opts : StudyOptions
    grad : {"implicit", "unrolled"}
        Gradient path of the Wasserstein term (``"unrolled"``: the reference-faithful parity path).
    n_queries : int, optional
        Only the first n test queries (default: all; ``--quick``: :data:`QUICK_QUERIES`).

    Returns
    -------
    StudyResult
        Rows ``rerank`` (top-20 by the rerank term) and ``jko_dual`` (with its paired difference vs
        ``rerank``); ``extra``: ``coverage`` (signal -> one dict per coverage: ``coverage``,
        ``n_kept``, ``ndcg10``, ``recall10``, ``top1_acc``), ``ece``, ``conf_dual_range``,
        ``coverage_published``, ``timing``, ``config``.
    """
    from jkofast.jko.solver import operating_point

    name = "dual-rank"
    cfg = operating_point("contrib", mode="wasserstein", grad=grad)
    if n_queries is None and opts.quick:
        n_queries = QUICK_QUERIES
    inp = study_inputs(
        opts.dataset,
        "test",
        n_queries=n_queries,
        scores_file=opts.scores_file,
        n_threads=opts.n_threads,
        log=lambda m: opts.log(name, m),
    )
    warm_s = _warm(cfg, inp, opts.n_threads)
    opts.log(name, f"JKO + duals + confidence on {inp.n_queries} queries (contrib, grad={grad}) ...")
    run = run_dual_rank(inp, cfg, n_threads=opts.n_threads)
    times = run["times"]
    n = inp.n_queries
    ok = run["ok"]
    opts.log(name, f"pipeline {times['pipeline']:.2f} s ({1000 * times['pipeline'] / n:.1f} ms/query)")
    key = _published_key(inp.dataset)
    pub = PUBLISHED.get(key) if key else None
    m = run["metrics"]
    rer = run["rerank_metrics"]
    rows = [
        method_row(
            "rerank",
            rer,
            1000 * times["rerank_baseline"] / n,
            published=pub["rerank"] if pub else None,
            ndcg10_exp=float(np.mean(rer["ndcg_exp"])),
        ),
        method_row(
            "jko_dual",
            m,
            1000 * times["method"] / n,
            baseline=("rerank", rer["ndcg"]),
            published=pub["jko_dual"] if pub else None,
            ndcg10_exp=float(np.mean(m["ndcg_exp"])),
            top1_acc=float(np.mean(run["top1_acc"])),
            grad=grad,
        ),
    ]
    res = run["result"]
    n_sk, n_cg = (int(x) for x in res.unconverged.sum(axis=0))
    notes = [
        *inp.notes,
        "conf_softmax = max softmax of the rerank term's raw scores (tau 1): with the BM25 stand-in these are "
        "BM25 pool scores, not cross-encoder logits (pass --scores FILE for your own)",
        f"contrib operating point (h {cfg.h}, lam {cfg.lam}, rho {cfg.rho}, eps {cfg.sinkhorn_eps}, T {cfg.T}, "
        f"inner {cfg.inner_steps}, tau0 {cfg.tau0}), mode {cfg.mode}, energy ({ALPHA}, {GAMMA}), MiniLM cosine cost",
        f"grad={grad}"
        + (
            " (exact gradient at a converged plan, the fast path); the reference-faithful parity path "
            "grad='unrolled' is available: jkofast.studies.dual_rank.study(opts, grad='unrolled')"
            if grad == "implicit"
            else " (the reference-faithful truncated adjoint, parity path)"
        ),
        "nDCG@10 in the coverage table: exponential gain (published definition; = linear on binary labels); "
        "top-1 accuracy counts a top-1 document judged with any label, 0 included (SPEC A.7.3)",
    ]
    if n_sk or n_cg:
        notes.append(f"{n_sk} Sinkhorn / {n_cg} CG inner solves stopped at their iteration cap (inexact gradients)")
    bad = int(np.count_nonzero(~ok))
    if bad:
        notes.append(f"{bad} queries failed and are left out of the coverage curves and ECE")
    if n_queries is not None:
        notes.append(f"first {n_queries} test queries only" + (" (--quick)" if opts.quick else ""))
    pub_cov = PUBLISHED_COVERAGE.get(key) if key else None
    blocks = [
        _coverage_block(run["coverage"], pub_cov, key or inp.dataset),
        _ece_block(run, pub, int(np.count_nonzero(ok)), n),
        _timing_block(times, n, opts.n_threads, warm_s, pub),
    ]
    extra = {
        "coverage": run["coverage"],
        "ece": run["ece"],
        "ece_published": pub["ece"] if pub else None,
        "conf_dual_range": run["conf_dual_range"],
        "conf_dual_range_published": dict(zip(("min", "median", "max"), pub["conf_dual_range"], strict=True))
        if pub
        else None,
        "coverage_published": (
            {k: [{"coverage": c, "ndcg10": v[k][0], "top1_acc": v[k][1]} for c, v in pub_cov.items()] for k in SIGNALS}
            if pub_cov
            else None
        ),
        "timing": {
            "n_threads": opts.n_threads,
            "pipeline_s": times["pipeline"],
            "stages_s": {k: v for k, v in times.items() if k not in ("pipeline", "method")},
            "warmup_s": warm_s,
            "published_wall_s": pub["wall_s"] if pub else None,
        },
        "config": {"operating_point": "contrib", "mode": cfg.mode, "grad": grad, "alpha": ALPHA, "gamma": GAMMA},
    }
    return StudyResult(name, inp.dataset, n, rows, extra=extra, blocks=blocks, notes=notes)
