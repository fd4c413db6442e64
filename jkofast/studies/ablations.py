"""``jkofast study ablations``: one change at a time to JKO-RAG (SPEC A.7.8; published A.9.10).

SciFact test, base operating point (h 0.5, λ 0.05, ρ 0.05, ε 0.1, T 3, inner 25, τ0 0.1, the
reference-faithful unrolled gradient), energy ``E = −(0.4·minmax(dense) + 0.6·minmax(rerank))``:

* ``W_full`` the full method; ``KL_prox`` / ``no_prox`` another proximal term;
* ``random_C``: ``C ~ U[0, 4]`` i.i.d. (``default_rng(0).uniform(0, 4, (M, M))``, re-created per query, so
  every pool of one size gets the same matrix), symmetrised ``(C + Cᵀ)/2``, zero diagonal;
  ``identity_C``: 1 off the diagonal, 0 on it — both through ``rerank_batch(cost_blocks=...)``
  (K stays the cosine kernel);
* ``no_entropy`` (λ = 0), ``no_redund`` (ρ = 0), ``one_step`` (T = 1), ``many_step`` (T = 5).

Paired differences ``W_full − ablation`` (bootstrap, seed 0). A second table runs the blend
ablation: W / KL / no-prox × energy weights (0.4, 0.6) and (0.7, 0.3).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from jkofast.jko.energy import softmax_tau
from jkofast.jko.solver import operating_point, rerank_batch
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

__all__ = ["ABLATIONS", "ablation_cost", "study"]

# name -> (config changes, cost kind)
ABLATIONS = {
    "W_full": ({}, None),
    "KL_prox": ({"mode": "kl"}, None),
    "no_prox": ({"mode": "noproximal"}, None),
    "random_C": ({}, "random"),
    "identity_C": ({}, "identity"),
    "no_entropy": ({"lam": 0.0}, None),
    "no_redund": ({"rho": 0.0}, None),
    "one_step": ({"T": 1}, None),
    "many_step": ({"T": 5}, None),
}
BLENDS = ((0.4, 0.6), (0.7, 0.3))
QUICK_QUERIES = 20


def ablation_cost(kind: str, m: int) -> np.ndarray:
    """Return the ablation cost of one pool of size ``m``: ``kind`` ``"random"`` or ``"identity"``."""
    if kind == "identity":
        C = np.ones((m, m))
    elif kind == "random":
        C = np.random.default_rng(0).uniform(0.0, 4.0, size=(m, m))
        C = 0.5 * (C + C.T)
    else:
        raise ValueError(f"kind must be 'random' or 'identity', got {kind!r}")
    np.fill_diagonal(C, 0.0)
    return C


def _solve(inp, E, p0, cfg, kind, n_threads):
    blocks = None
    if kind is not None:
        sizes = np.diff(inp.offsets)
        cache = {int(m): ablation_cost(kind, int(m)) for m in np.unique(sizes)}
        blocks = [cache[int(m)] for m in sizes]
    t0 = time.perf_counter()
    res = rerank_batch(E, p0, inp.offsets, embeddings=inp.Z, cost_blocks=blocks, config=cfg, n_threads=n_threads)
    ms = 1000 * (time.perf_counter() - t0) / inp.n_queries
    if res.status.any():
        raise RuntimeError(f"{int(np.count_nonzero(res.status))} pools failed: {sorted(res.errors.items())[:3]}")
    return topk_metrics(res.p, inp), ms


def study(opts: StudyOptions) -> StudyResult:
    """Run the ablations and the blend ablation (see the module docstring)."""
    inp = study_inputs(opts, "test", study="ablations", n_queries=QUICK_QUERIES if opts.quick else None)
    pub = published("ablations")["rows"]  # SPEC A.9.10: nDCG@10 [CI], Recall@10, W_full - ablation [CI]
    base = operating_point("base")
    r = inp.blend(0.4, 0.6)
    E, p0 = -r, softmax_tau(r, inp.offsets, base.tau0)
    runs = {}
    for name, (changes, kind) in ABLATIONS.items():
        runs[name] = _solve(inp, E, p0, dataclasses.replace(base, **changes).validate(), kind, opts.n_threads)
        opts.log("ablations", f"{name:<11} nDCG@10 {np.mean(runs[name][0]['ndcg']):.4f}  {runs[name][1]:.1f} ms/q")
    full = runs["W_full"][0]["ndcg"]
    rows = []
    for name, (m, ms) in runs.items():
        row = method_row(name, m, ms, published=pub[name])
        if name != "W_full":  # published sign: W_full − ablation
            d = method_row("d", {"ndcg": full - m["ndcg"], "recall": m["recall"]}, None)
            row["diff_W_full_minus"] = [d["ndcg10"], *d["ndcg10_ci"]]
        rows.append(row)
    blend_rows = []
    for a, g in BLENDS:
        rb = inp.blend(a, g)
        Eb, p0b = -rb, softmax_tau(rb, inp.offsets, base.tau0)
        for mode in ("wasserstein", "kl", "noproximal"):
            m, ms = _solve(inp, Eb, p0b, dataclasses.replace(base, mode=mode), None, opts.n_threads)
            blend_rows.append(method_row(f"{mode}_{a}_{g}", m, ms, mode=mode, alpha=a, gamma=g))
    notes = [
        *inp.notes,
        f"base operating point (h {base.h}, lam {base.lam}, rho {base.rho}, eps {base.sinkhorn_eps}, T {base.T}, "
        f"inner {base.inner_steps}, tau0 {base.tau0}), grad={base.grad}; energy (0.4, 0.6)",
        "random_C: default_rng(0).uniform(0, 4, (M, M)) re-created per query (SPEC A.7.8 names U[0,4] i.i.d.; the "
        "exact draw call of the published script is an interpretation), symmetrised, zero diagonal",
    ]
    if opts.quick:
        notes.append(f"--quick: first {QUICK_QUERIES} test queries")
    return StudyResult(
        "ablations",
        inp.dataset,
        inp.n_queries,
        rows,
        extra={"blend_ablation": blend_rows},
        blocks=[_diff_table(rows), _blend_table(blend_rows)],
        notes=notes,
    )


def _diff_table(rows) -> str:
    lines = [
        "W_full - ablation (paired, 95% bootstrap CI) beside the published (SPEC A.9.10)",
        f"{'ablation':<12} {'ours':<28} {'published':<28}",
    ]
    for r in rows[1:]:
        d = r["diff_W_full_minus"]
        p = r["published"]["diff"]
        ours = f"{d[0]:+.4f} [{d[1]:+.4f}, {d[2]:+.4f}]"
        lines.append(f"{r['method']:<12} {ours:<28} {p[0]:+.4f} [{p[1]:+.4f}, {p[2]:+.4f}]")
    return "\n".join(lines)


def _blend_table(rows) -> str:
    lines = ["blend ablation: mode x energy weights (alpha dense, gamma rerank)"]
    lines.append(f"{'mode':<12} {'(a, g)':<11} nDCG@10")
    for r in rows:
        lines.append(f"{r['mode']:<12} ({r['alpha']}, {r['gamma']})  {r['ndcg10']:.4f}")
    return "\n".join(lines)


def plot(result: StudyResult, out_dir: str) -> list:
    """Bar chart of ``W_full − ablation`` with CIs, ours beside the published; returns the PNG name."""
    plt = require_matplotlib()
    rows = result.rows[1:]
    x = np.arange(len(rows))
    ours = np.array([r["diff_W_full_minus"] for r in rows])
    pub = np.array([r["published"]["diff"] for r in rows])
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for off, vals, label in ((-0.18, ours, "jkofast"), (0.18, pub, "published")):
        err = np.vstack([vals[:, 0] - vals[:, 1], vals[:, 2] - vals[:, 0]])
        ax.bar(x + off, vals[:, 0], width=0.36, yerr=err, capsize=3, label=label)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xticks(x, [r["method"] for r in rows], rotation=30, ha="right")
    ax.set_ylabel("nDCG@10: W_full − ablation")
    ax.legend()
    return save_figure(fig, out_dir, "ablations.png")
