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

import contextlib
import dataclasses
import os
import time

import numpy as np
import scipy.stats  # noqa: F401  (rankdata of the ECE, imported here so its first import is not timed)

from jkofast._ahead import compile_ahead
from jkofast.eval.selective import COVERAGE_GRID, ece_rank, selective_coverage, top1_accuracy
from jkofast.jko.confidence import ConfidenceSignals, confidence_signals, dual_confidence
from jkofast.jko.energy import energy_and_p0
from jkofast.jko.solver import RerankResult, operating_point, rerank_batch
from jkofast.kernels.eval import metrics as _metric_kernels
from jkofast.kernels.jko import confidence as _confidence_kernels
from jkofast.studies.common import (
    StudyOptions,
    StudyResult,
    method_row,
    require_matplotlib,
    save_figure,
    study_inputs,
    topk_metrics,
)
from jkofast.studies.published import published

__all__ = ["QUICK_QUERIES", "SIGNALS", "DualRankRun", "PublishedDualRank", "plot", "run_dual_rank", "study"]

QUICK_QUERIES = 30
ALPHA, GAMMA = 0.4, 0.6
# signal key -> (ConfidenceSignals attribute, published column name)
SIGNALS = {
    "dual": ("conf_dual", "dual"),
    "softmax": ("conf_softmax", "softmax-max"),
    "margin": ("conf_margin", "margin"),
}
# the coverages of the published spread table (SPEC A.9.7)
KEPT_AT = (0.95, 0.5, 0.1)


@dataclasses.dataclass(frozen=True)
class PublishedDualRank:
    """The published Dual-Rank figures of one dataset (SPEC A.9.1 / A.9.7 / A.9.8).

    Attributes
    ----------
    dataset : str
    n : int
        Test queries.
    ece : float
        ECE of ``top1_f``.
    conf_dual_range : list of float
        ``conf_dual`` (min, median, max).
    wall_s : float
        Wall time of the published run.
    n_kept : dict
        Coverage (0.95, 0.5, 0.1) -> queries kept.
    jko_dual, rerank : dict
        The two rows (nDCG@10 [CI], Recall@10, ``jko_dual − rerank``).
    coverage : dict
        Coverage (1.0, 0.5, 0.1) -> signal -> (nDCG@10, top-1 accuracy) of the kept queries.
    """

    dataset: str
    n: int
    ece: float
    conf_dual_range: list
    wall_s: float
    n_kept: dict
    jko_dual: dict
    rerank: dict
    coverage: dict

    @classmethod
    def of(cls, dataset: str) -> PublishedDualRank | None:
        """Return the published figures of the dataset named by the folder ``dataset`` (or None)."""
        key = os.path.basename(os.path.normpath(str(dataset))).lower()
        tables = published("dual_rank")
        if key not in tables["datasets"]:
            return None
        return cls(dataset=key, coverage=tables["coverage"][key], **tables["datasets"][key])

    def coverage_rows(self) -> dict:
        """Signal -> ``[{"coverage", "ndcg10", "top1_acc"}, ...]`` (the JSON form of :attr:`coverage`)."""
        return {
            k: [{"coverage": c, "ndcg10": v[k][0], "top1_acc": v[k][1]} for c, v in self.coverage.items()]
            for k in SIGNALS
        }


@dataclasses.dataclass
class DualRankRun:
    """What :func:`run_dual_rank` computes on built inputs.

    Attributes
    ----------
    result : jkofast.jko.solver.RerankResult
        ``p_T`` and the duals ``f``.
    signals : jkofast.jko.confidence.ConfidenceSignals
    metrics : dict
        Per-query ``ndcg``, ``ndcg_exp``, ``recall`` and the read-out ``top``.
    top1_acc : ndarray
        Per query, whether the top-1 document is judged.
    ok : ndarray of bool
        Queries without failure (solver and confidence).
    coverage : dict
        Signal -> one dict per coverage (``coverage``, ``n_kept``, ``ndcg10``, ``recall10``, ``top1_acc``).
    ece : float
        Rank-based ECE of ``top1_f``.
    conf_dual_range : dict
        ``min``, ``median``, ``max`` of ``conf_dual``.
    rerank_metrics : dict
        The rerank term's own top-20 read-out (the baseline row).
    times : dict
        Seconds per stage: ``energy``, ``jko_duals``, ``confidence``, ``evaluation``, ``pipeline``
        (all but the baseline), ``method`` (solver and confidence), ``rerank_baseline``.
    """

    result: RerankResult
    signals: ConfidenceSignals
    metrics: dict
    top1_acc: np.ndarray
    ok: np.ndarray
    coverage: dict
    ece: float
    conf_dual_range: dict
    rerank_metrics: dict
    times: dict

    def n_kept(self) -> dict:
        """Coverage -> queries kept (the ``dual`` curve)."""
        return {r["coverage"]: r["n_kept"] for r in self.coverage.get("dual", [])}


def _ahead(grad: str):
    """Start a child compiling the JKO flow with duals, then the metrics, when the cache lacks them (or None).

    The flow of the implicit gradient (``"jko.flow.duals"``) and the metrics (``"evaluation"``): this
    process builds the pools and compiles the rest of the rerank meanwhile (``jkofast._ahead``).
    """
    entries = {"evaluation": (_metric_kernels.evaluate_batch_chars,)}
    if grad == "implicit":  # probed by the confidence read-out, compiled where this flow is: in this study
        entries = {"jko.flow.duals": (_confidence_kernels.confidence_pools,), **entries}
    return compile_ahead(tuple(entries), entries)


def _warm(cfg, inputs, n_threads, ahead=None) -> float:
    """Compile (or load from the cache) what the timed pipeline runs; return the seconds it took.

    The solver and the confidence read-out on a tiny batch, the min-max/softmax kernels, the top-k
    read-out and the metrics on the real pools (an all-zero ``p``); ``scipy.stats`` (the ECE's ranks,
    slow to import the first time) is imported with this module. With ``ahead`` (:func:`_ahead`'s
    child), the solver waits for the child's flow and the metrics for its metric kernels.
    """
    t0 = time.perf_counter()
    Z = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], np.float32)
    off = np.array([0, 3], np.int64)
    x = np.array([1.0, 0.5, 0.0], np.float64)
    E, p0 = energy_and_p0(off, dense=x.astype(inputs.pools.dense.dtype), rerank=x, tau0=cfg.tau0, n_threads=n_threads)
    confidence_signals(p0, np.zeros(3), x, off, n_threads=n_threads)  # p and the duals f: float64, as the solver's
    if ahead is not None:
        ahead.wait_for("jko.flow.duals")
    tiny = cfg.replace(T=1, inner_steps=2)
    res = rerank_batch(E, p0, off, embeddings=Z, config=tiny, return_duals=True, n_threads=n_threads)
    confidence_signals(res.p, res.f, x, off, n_threads=n_threads)
    if ahead is not None:
        ahead.wait_for("evaluation")
    topk_metrics(np.zeros(int(inputs.offsets[-1])), inputs)
    return time.perf_counter() - t0


def run_dual_rank(inputs, cfg, *, n_threads: int | None = None) -> DualRankRun:
    """Run the Dual-Rank pipeline on built inputs (everything after the pools); return its pieces.

    Parameters
    ----------
    inputs : jkofast.studies.common.StudyInputs
    cfg : jkofast.jko.solver.JKOConfig
        The solver configuration (the study uses contrib, mode ``wasserstein``).
    n_threads : int, optional

    Returns
    -------
    DualRankRun
    """
    off = inputs.offsets
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
    coverage, ece, rng = _calibration(sig, metrics, acc, ok)
    t4 = time.perf_counter()
    times = dict(
        energy=t1 - t0, jko_duals=t2 - t1, confidence=t3 - t2, evaluation=t4 - t3, pipeline=t4 - t0, method=t3 - t1
    )
    # the baseline row: the rerank term's own top-20 (not part of the timed pipeline)
    t5 = time.perf_counter()
    rer_metrics = topk_metrics(np.asarray(inputs.rerank, np.float64), inputs)
    times["rerank_baseline"] = time.perf_counter() - t5
    return DualRankRun(res, sig, metrics, acc, ok, coverage, ece, rng, rer_metrics, times)


def _calibration(sig: ConfidenceSignals, metrics: dict, acc, ok) -> tuple[dict, float, dict]:
    """Coverage curves of every signal, the ECE of ``top1_f`` and the ``conf_dual`` range over the ``ok`` queries."""
    per_query = {"ndcg10": metrics["ndcg_exp"][ok], "recall10": metrics["recall"][ok], "top1_acc": acc[ok]}
    if not ok.any():
        return {}, float("nan"), {"min": float("nan"), "median": float("nan"), "max": float("nan")}
    coverage = {
        key: selective_coverage(getattr(sig, attr)[ok], per_query, COVERAGE_GRID) for key, (attr, _) in SIGNALS.items()
    }
    ece = ece_rank(sig.top1_f[ok], acc[ok], n_bins=10)
    cd = sig.conf_dual[ok]
    return coverage, ece, {"min": float(cd.min()), "median": float(np.median(cd)), "max": float(cd.max())}


def _fmt_pair(v) -> str:
    return "  --/--   " if v is None else f"{v[0]:.3f}/{v[1]:.3f}"


def _coverage_block(coverage: dict, pub: PublishedDualRank | None, dataset: str) -> str:
    """Return the selective-coverage table: ours per signal and coverage, the published pair beside it."""
    src = f"published {dataset} (SPEC A.9.7, cross-encoder)" if pub else "no published numbers for this dataset"
    lines = [
        f"Selective coverage: ours nDCG@10 / Recall@10 / top-1 acc of the kept queries; {src}: nDCG@10 / top-1 acc",
        f"{'cov':>5} {'kept':>5} |" + "".join(f" {SIGNALS[k][1]:<19} {'pub':<11} |" for k in SIGNALS),
    ]
    lines.append("-" * len(lines[-1]))
    pub_cov = pub.coverage if pub else {}
    for i, r in enumerate(coverage.get("dual", [])):
        cov = r["coverage"]
        line = f"{cov:5.2f} {r['n_kept']:5d} |"
        for k in SIGNALS:
            c = coverage[k][i]
            ours = f"{c['ndcg10']:.3f}/{c['recall10']:.3f}/{c['top1_acc']:.3f}"
            pv = pub_cov.get(cov, {}).get(k)
            line += f" {ours:<19} {_fmt_pair(pv) if pv else '':<11} |"
        lines.append(line)
    return "\n".join(lines)


def _ece_block(run: DualRankRun, pub: PublishedDualRank | None) -> str:
    """Return the calibration and spread lines: ECE, the ``conf_dual`` range, queries kept, queries scored."""
    rng = run.conf_dual_range
    kept = run.n_kept()
    pr = pub.conf_dual_range if pub else None
    lines = [
        "Calibration and spread (published beside ours where known)",
        f"  ECE of top1_f (rank conf, 10 bins) {run.ece:.4f}   published {pub.ece if pub else '--'}",
        f"  conf_dual min / median / max      {rng['min']:.3f} / {rng['median']:.3f} / {rng['max']:.3f}"
        + (f"   published {pr[0]:.3f} / {pr[1]:.3f} / {pr[2]:.3f}" if pr else ""),
        "  n kept at 0.95 / 0.50 / 0.10      "
        + " / ".join(str(kept.get(c, "--")) for c in KEPT_AT)
        + ("   published " + " / ".join(str(pub.n_kept[c]) for c in KEPT_AT) if pub else ""),
        f"  queries scored                    {int(np.count_nonzero(run.ok))} of {run.ok.size}",
    ]
    return "\n".join(lines)


def _timing_block(times: dict, n: int, n_threads, warm_s: float, pub: PublishedDualRank | None) -> str:
    """Return the timing lines: the warm pipeline beside the published wall time, stages, warm-up."""
    pw = pub.wall_s if pub else None
    lines = [
        f"Timing (warm, {n_threads or 'all'} threads; pools excluded): pipeline {times['pipeline']:.3f} s "
        f"for {n} queries ({1000 * times['pipeline'] / n:.2f} ms/query)"
        + (f"; published {pw:.0f} s for {pub.n} queries ({1000 * pw / pub.n:.0f} ms/query)" if pw else ""),
        "  stages: "
        + ", ".join(
            f"{k} {v:.3f} s" for k, v in times.items() if k in ("energy", "jko_duals", "confidence", "evaluation")
        ),
        f"  kernel warm-up before the clock (compile or cache load): {warm_s:.2f} s",
    ]
    return "\n".join(lines)


def _rows(run: DualRankRun, pub: PublishedDualRank | None, n: int, grad: str) -> list:
    """Return the ``rerank`` and ``jko_dual`` rows (ms/query, exponential-gain nDCG, top-1 accuracy)."""
    m, rer, times = run.metrics, run.rerank_metrics, run.times
    return [
        method_row(
            "rerank",
            rer,
            1000 * times["rerank_baseline"] / n,
            published=pub.rerank if pub else None,
            ndcg10_exp=float(np.mean(rer["ndcg_exp"])),
        ),
        method_row(
            "jko_dual",
            m,
            1000 * times["method"] / n,
            baseline=("rerank", rer["ndcg"]),
            published=pub.jko_dual if pub else None,
            ndcg10_exp=float(np.mean(m["ndcg_exp"])),
            top1_acc=float(np.mean(run.top1_acc)),
            grad=grad,
        ),
    ]


def _notes(inp, cfg, run: DualRankRun, grad: str, n_queries, quick: bool) -> list:
    """Return the notes: the cross-encoder stand-in, the operating point, the gradient path, failures."""
    n_sk, n_cg = (int(x) for x in run.result.unconverged.sum(axis=0))
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
    bad = int(np.count_nonzero(~run.ok))
    if bad:
        notes.append(f"{bad} queries failed and are left out of the coverage curves and ECE")
    if n_queries is not None:
        notes.append(f"first {n_queries} test queries only" + (" (--quick)" if quick else ""))
    return notes


def _extra(run: DualRankRun, pub: PublishedDualRank | None, cfg, grad: str, n_threads, warm_s: float) -> dict:
    """Return the JSON sections beside the rows: coverage, ECE, spread, timing, configuration."""
    times = run.times
    return {
        "coverage": run.coverage,
        "ece": run.ece,
        "ece_published": pub.ece if pub else None,
        "conf_dual_range": run.conf_dual_range,
        "conf_dual_range_published": dict(zip(("min", "median", "max"), pub.conf_dual_range, strict=True))
        if pub
        else None,
        "coverage_published": pub.coverage_rows() if pub else None,
        "timing": {
            "n_threads": n_threads,
            "pipeline_s": times["pipeline"],
            "stages_s": {k: v for k, v in times.items() if k not in ("pipeline", "method")},
            "warmup_s": warm_s,
            "published_wall_s": pub.wall_s if pub else None,
        },
        "config": {"operating_point": "contrib", "mode": cfg.mode, "grad": grad, "alpha": ALPHA, "gamma": GAMMA},
    }


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
    name = "dual-rank"
    cfg = operating_point("contrib", mode="wasserstein", grad=grad)
    if n_queries is None and opts.quick:
        n_queries = QUICK_QUERIES
    # cold cache, >= 2 cores: a child compiles the flow and the metrics while the pools are built
    with _ahead(grad) or contextlib.nullcontext() as ahead:
        inp = study_inputs(opts, "test", study=name, n_queries=n_queries)
        warm_s = _warm(cfg, inp, opts.n_threads, ahead)
    opts.log(name, f"JKO + duals + confidence on {inp.n_queries} queries (contrib, grad={grad}) ...")
    run = run_dual_rank(inp, cfg, n_threads=opts.n_threads)
    n = inp.n_queries
    opts.log(name, f"pipeline {run.times['pipeline']:.2f} s ({1000 * run.times['pipeline'] / n:.1f} ms/query)")
    pub = PublishedDualRank.of(inp.dataset)
    blocks = [
        _coverage_block(run.coverage, pub, pub.dataset if pub else inp.dataset),
        _ece_block(run, pub),
        _timing_block(run.times, n, opts.n_threads, warm_s, pub),
    ]
    return StudyResult(
        name,
        inp.dataset,
        n,
        _rows(run, pub, n, grad),
        extra=_extra(run, pub, cfg, grad, opts.n_threads, warm_s),
        blocks=blocks,
        notes=_notes(inp, cfg, run, grad, n_queries, opts.quick),
    )


def plot(result: StudyResult, out_dir: str) -> list[str]:
    """Write ``dual_rank_coverage.png``: nDCG@10 and top-1 accuracy of the kept queries against coverage.

    One line per signal (``dual``, ``softmax``, ``margin``) from ``result.extra["coverage"]``; the
    published curves (SPEC A.9.7) dashed beside them when the dataset has them.
    """
    plt = require_matplotlib()
    cov = result.extra["coverage"]
    pub = result.extra.get("coverage_published") or {}
    colors = {"dual": "#1b9e77", "softmax": "#7570b3", "margin": "#d95f02"}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.0))
    for ax, key, label in ((axes[0], "ndcg10", "nDCG@10"), (axes[1], "top1_acc", "top-1 accuracy")):
        for sig in SIGNALS:
            rs = cov.get(sig) or []
            ax.plot([r["coverage"] for r in rs], [r[key] for r in rs], marker="o", color=colors[sig], label=sig)
            ps = pub.get(sig) or []
            if ps:
                ax.plot(
                    [r["coverage"] for r in ps],
                    [r[key] for r in ps],
                    ls="--",
                    color=colors[sig],
                    alpha=0.6,
                    label=f"{sig} (published)",
                )
        ax.set_xlabel("coverage (fraction of queries kept, most confident first)")
        ax.set_ylabel(label + " of the kept queries")
        ax.invert_xaxis()
        ax.legend(fontsize=7)
    return save_figure(
        fig,
        out_dir,
        "dual_rank_coverage.png",
        f"Dual-Rank selective coverage, {result.dataset} ({result.n_queries} queries)",
    )
