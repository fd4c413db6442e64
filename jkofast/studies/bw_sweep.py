"""``jkofast study bw-sweep``: BW-JKO, the Bregman–Wasserstein proximal term, swept over α (SPEC A.6.1).

``Prox = α·W(p, q) + (1 − α)·KL(p‖q)`` (mode ``bregman``) for α ∈ {0, 0.25, 0.5, 0.75, 1} on the
SciFact test pools, contrib operating point (h 2, λ 0.1, ρ 0.05, ε 0.2, T 3, inner 20, τ0 1),
energy ``E = −(0.4·minmax(dense) + 0.6·minmax(rerank))``, the reference-faithful unrolled
gradient. The two ends are checked against their definitions: α = 0 is ``kl_blend`` and α = 1
is ``jko_blend`` (``wasserstein``), to the last bit. Published: SPEC A.9.8 (SciFact column).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from jkofast.jko.energy import softmax_tau
from jkofast.jko.solver import operating_point, rerank_batch
from jkofast.studies.common import StudyOptions, StudyResult, method_row, study_inputs, topk_metrics
from jkofast.studies.published import published

__all__ = ["ALPHAS", "study"]

ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
QUICK_QUERIES = 30


def _name(a: float) -> str:
    return f"bw_jko_a{round(100 * a):02d}"


def study(opts: StudyOptions) -> StudyResult:
    """Run the α sweep (see the module docstring) and return its rows.

    Rows: ``kl_blend``, ``bw_jko_a00`` … ``bw_jko_a100``, ``jko_blend``; paired differences
    against ``jko_blend`` (vanilla) and ``kl_blend``; ``extra["ends_identical"]`` records that
    α = 0 / α = 1 reproduce ``kl`` / ``wasserstein`` exactly.
    """
    inp = study_inputs(opts, "test", study="bw-sweep", n_queries=QUICK_QUERIES if opts.quick else None)
    pub = published("bw_sweep")["rows"]  # SPEC A.9.8, SciFact column, nDCG@10 means
    cfg = operating_point("contrib")
    r = inp.blend(0.4, 0.6)
    E = -r
    p0 = softmax_tau(r, inp.offsets, cfg.tau0)
    runs = {}
    settings = (
        [("kl_blend", "kl", 0.5)] + [(_name(a), "bregman", a) for a in ALPHAS] + [("jko_blend", "wasserstein", 0.5)]
    )
    for name, mode, a in settings:
        c = dataclasses.replace(cfg, mode=mode, alpha_prox=a)
        t0 = time.perf_counter()
        res = rerank_batch(E, p0, inp.offsets, embeddings=inp.Z, config=c, n_threads=opts.n_threads)
        ms = 1000 * (time.perf_counter() - t0) / inp.n_queries
        bad = int(np.count_nonzero(res.status))
        if bad:
            raise RuntimeError(f"{name}: {bad} pools failed: {sorted(res.errors.items())[:3]}")
        runs[name] = (res.p, topk_metrics(res.p, inp), ms)
        opts.log("bw-sweep", f"{name:<12} nDCG@10 {np.mean(runs[name][1]['ndcg']):.4f}  {ms:.1f} ms/q")
    base = ("jko_blend", runs["jko_blend"][1]["ndcg"])
    kl = ("kl_blend", runs["kl_blend"][1]["ndcg"])
    rows = []
    for name, _, a in settings:
        _, m, ms = runs[name]
        rows.append(
            method_row(
                name,
                m,
                ms,
                baseline=None if name == "jko_blend" else base,
                published=pub.get(name),
                alpha=None if name.endswith("_blend") else a,
            )
        )
        if name not in ("jko_blend", "kl_blend"):
            d = method_row(name, m, ms, baseline=kl)
            rows[-1]["diff_vs_kl_blend"] = d["diff_vs_kl_blend"]
    ends = {
        "alpha0_equals_kl": bool(np.array_equal(runs[_name(0.0)][0], runs["kl_blend"][0])),
        "alpha1_equals_wasserstein": bool(np.array_equal(runs[_name(1.0)][0], runs["jko_blend"][0])),
    }
    notes = [
        *inp.notes,
        f"contrib operating point (h {cfg.h}, lam {cfg.lam}, rho {cfg.rho}, eps {cfg.sinkhorn_eps}, T {cfg.T}, "
        f"inner {cfg.inner_steps}, tau0 {cfg.tau0}), grad={cfg.grad} (reference-faithful); energy (0.4, 0.6)",
        f"alpha = 0 reproduces kl_blend bit for bit: {ends['alpha0_equals_kl']}; alpha = 1 reproduces "
        f"jko_blend: {ends['alpha1_equals_wasserstein']}",
        "published (SPEC A.9.8, cross-encoder rerank term): every BW vs vanilla / KL paired difference has a CI "
        "containing 0, |diff| <= 0.0010",
    ]
    if opts.quick:
        notes.append(f"--quick: first {QUICK_QUERIES} test queries")
    extra = {"alphas": list(ALPHAS), "ends_identical": ends}
    return StudyResult("bw-sweep", inp.dataset, inp.n_queries, rows, extra=extra, notes=notes)
