"""``jkofast study linear-response``: the JKO step's linear response, checked directly (beyond the paper).

The paper infers a linear-response theorem (the flow acts on energy perturbations as a
band-dependent gain) from E2/E3. Here the response of **one converged JKO step** is computed
exactly and checked: for the first outer step of each sampled query (``q = p0``), the step is
solved to a stationarity residual below 1e-11 (:func:`jkofast.jko.linear_response.solve_step`:
proximal term ``OT_ε`` for ``wasserstein`` — ``objective="entropic"``, the one with a
well-defined stationary point, see that module — and ``KL`` for ``kl``), the Jacobian-vector
product ``δp = A·v`` comes from implicit differentiation of the optimality conditions
(:func:`jkofast.jko.linear_response.jvp`), and central finite differences
``(p(E + s v) − p(E − s v))/(2s)`` for several s check it. Directions v: 4 Laplacian bands × 2
(:func:`jkofast.jko.theory.band_direction`, one ``default_rng(0)`` consumed query → band →
direction; the same directions for both modes, paired). Reported per (mode, band): the relative
error ``‖δp_FD − δp_JVP‖/‖δp_JVP‖`` and the gain ``‖A v‖/‖v‖``.

Inputs as the theory experiments (SPEC A.7.7): SciFact test sample by ``default_rng(0)``,
``E = −minmax(rerank)``, ``p0 = softmax_{0.1}(−E)``, base config (h 0.5, λ 0.05, ρ 0.05, ε 0.1).
The solver's Adam loop (``JKOConfig(objective="entropic")`` with many inner steps) is compared
with the exact step on a few queries (``adam_l1``, ``adam_residual``).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from jkofast._status import ConvergenceWarning
from jkofast.datasets.beir import load_dataset
from jkofast.eval.metrics import bootstrap_ci
from jkofast.jko.linear_response import jvp, ot_duals, solve_step, step_gradient
from jkofast.jko.solver import operating_point, run_jko
from jkofast.jko.theory import TheoryBatch, band_direction, band_edges, gibbs_laplacian
from jkofast.studies.common import StudyOptions, StudyResult, require_matplotlib, save_figure, study_inputs
from jkofast.studies.theory import select_queries, single_blas, theory_energy

__all__ = ["N_QUERIES", "QUICK_QUERIES", "S_REF", "S_VALUES", "LinearResponseResult", "plot", "study"]

N_QUERIES = 10
QUICK_QUERIES = 2
N_BANDS = 4
N_DIRS = 2
S_VALUES = (1e-2, 1e-3, 1e-4)
S_REF = 1e-3  # the step at which rel_err is reported (truncation ~ s², rounding ~ 1e-12/s)
STEP_TOL = 1e-11
ADAM_QUERIES = 3
ADAM_STEPS = 300
TARGET = 1e-3
MODES = (("wasserstein", "entropic"), ("kl", "transport"))


class LinearResponseResult(StudyResult):
    """A :class:`StudyResult` whose text report is the per-(mode, band) table (rows carry no nDCG)."""

    def table(self) -> str:
        """Return the text report."""
        lines = [f"jkofast study {self.study}: {self.dataset}, {self.n_queries} queries", ""]
        head = (
            f"{'mode':<11} {'band':>4} {'n':>3}  {'rel_err max':>11} {'median':>9}  "
            + " ".join(f"{'max@' + format(s, 'g'):>10}" for s in S_VALUES)
            + f"  {'gain ||Av||/||v|| [95% CI]':<30} {'gain FD':>8}"
        )
        lines += [head, "-" * len(head)]
        for r in self.rows:
            by_s = " ".join(f"{r['rel_err_by_s'][format(s, 'g')]:10.2e}" for s in S_VALUES)
            lines.append(
                f"{r['mode']:<11} {r['band']:>4} {r['n']:>3}  {r['rel_err']:11.2e} {r['rel_err_median']:9.2e}  {by_s}  "
                f"{r['gain']:.5f} [{r['gain_ci'][0]:.5f}, {r['gain_ci'][1]:.5f}]   {r['gain_fd']:8.5f}"
            )
        lines.append("-" * len(head))
        return "\n".join(lines + self.footer())


def _directions(batch, pools) -> tuple[list, list]:
    """Per query, ``N_DIRS`` random directions in each of the ``N_BANDS`` Laplacian bands (and their bands)."""
    rng = np.random.default_rng(0)
    V, bands = [], []
    for q in pools:
        U = gibbs_laplacian(batch.cost(q))[1]
        e = band_edges(U.shape[0], N_BANDS)
        cols = [band_direction(U, e[b], e[b + 1], rng) for b in range(N_BANDS) for _ in range(N_DIRS)]
        V.append(np.stack(cols, axis=1).astype(np.float64))
        bands.append([b for b in range(N_BANDS) for _ in range(N_DIRS)])
    return V, bands


def _one_query(E, p0, C, K, V, cfg) -> dict:
    """Exact step, JVPs of the columns of V, central differences at every s."""
    t0 = time.perf_counter()
    sol = solve_step(E, p0, C, K, cfg, tol=STEP_TOL)
    A = jvp(sol, V)
    t_jvp = time.perf_counter() - t0
    err = {s: np.empty(V.shape[1]) for s in S_VALUES}
    fd_ref = np.empty_like(A)
    worst_res = sol.residual
    for k in range(V.shape[1]):
        v = V[:, k]
        for s in S_VALUES:
            sp = solve_step(E + s * v, p0, C, K, cfg, tol=STEP_TOL, start=sol)
            sm = solve_step(E - s * v, p0, C, K, cfg, tol=STEP_TOL, start=sol)
            worst_res = max(worst_res, sp.residual, sm.residual)
            fd = (sp.p - sm.p) / (2 * s)
            err[s][k] = np.linalg.norm(fd - A[:, k]) / max(np.linalg.norm(A[:, k]), 1e-300)
            if s == S_REF:
                fd_ref[:, k] = fd
    vn = np.linalg.norm(V, axis=0)
    return {
        "sol": sol,
        "err": err,
        "gain": np.linalg.norm(A, axis=0) / vn,
        "gain_fd": np.linalg.norm(fd_ref, axis=0) / vn,
        "residual": sol.residual,
        "worst_residual": worst_res,
        "n_newton": sol.n_newton,
        "jvp_s": t_jvp,
    }


def _adam_check(E, p0, C, K, cfg, sol) -> dict:
    """Distance of the solver's Adam step (entropic objective, many inner steps) to the exact step."""
    c = cfg.replace(T=1, inner_steps=ADAM_STEPS, tol=1e-9, sinkhorn_max_iter=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pa = run_jko(p0, E, C, K, c)
    f = ot_duals(pa, sol.q, sol.C, sol.eps)[0] if sol.mode == "wasserstein" else None
    G = step_gradient(sol, pa, f)
    return {"adam_l1": float(np.abs(pa - sol.p).sum()), "adam_residual": float(np.abs(G - pa @ G).max())}


def _rows(res: dict, bands: list) -> list:
    """One row per (mode, band): relative JVP error against finite differences, gain with its CI."""
    rows = []
    for mode, _ in MODES:
        per = res[mode]
        bnd = np.concatenate([np.asarray(b) for b in bands])
        err = {s: np.concatenate([r["err"][s] for r in per]) for s in S_VALUES}
        gain = np.concatenate([r["gain"] for r in per])
        gfd = np.concatenate([r["gain_fd"] for r in per])
        for b in range(N_BANDS):
            sel = bnd == b
            e = err[S_REF][sel]
            g = gain[sel]
            m, lo, hi = bootstrap_ci(g)
            rows.append(
                {
                    "method": f"{mode}_band{b}",
                    "mode": mode,
                    "band": b,
                    "n": int(sel.sum()),
                    "rel_err": float(e.max()),
                    "rel_err_median": float(np.median(e)),
                    "rel_err_by_s": {format(s, "g"): float(err[s][sel].max()) for s in S_VALUES},
                    "rel_err_best": float(np.min([err[s][sel] for s in S_VALUES], axis=0).max()),
                    "gain": float(m),
                    "gain_ci": [float(lo), float(hi)],
                    "gain_fd": float(gfd[sel].mean()),
                    "within_target": bool(e.max() <= TARGET),
                }
            )
    return rows


def study(opts: StudyOptions) -> StudyResult:
    """Run the linear-response check (see the module docstring) and return its rows.

    Rows (JSON ``rows``): one per (mode, band) with ``rel_err`` (max over queries x directions
    at s = ``S_REF``), ``rel_err_median``, ``rel_err_by_s``, ``rel_err_best``, ``gain`` (mean
    ``‖Av‖/‖v‖`` with bootstrap CI), ``gain_fd``. ``extra["steps"]``: per mode and query the
    stationarity residual and Newton iterations; ``extra["adam"]``: the solver's Adam step vs
    the exact one.
    """
    t_all = time.perf_counter()
    ds = load_dataset(opts.dataset)
    qids = list(ds.split_query_ids("test"))
    sel = select_queries(qids, ds.qrels("test"), QUICK_QUERIES if opts.quick else N_QUERIES)
    inp = study_inputs(opts, "test", study="linear-response", query_ids=[qids[i] for i in sel])
    res, steps, adam, bands = _solve_all(inp, opts)
    rows = _rows(res, bands)
    extra = {
        "steps": steps,
        "adam": adam,
        "s_values": list(S_VALUES),
        "s_ref": S_REF,
        "target": TARGET,
        "timings_s": {"total": time.perf_counter() - t_all},
    }
    return LinearResponseResult(
        "linear-response",
        inp.dataset,
        inp.n_queries,
        rows,
        extra=extra,
        blocks=_blocks(steps, adam),
        notes=_notes(inp, rows, opts.quick),
    )


def _solve_all(inp, opts: StudyOptions):
    """Exact steps, JVPs and finite differences of every query in both modes -> ``(res, steps, adam, bands)``."""
    batch = TheoryBatch.from_embeddings(inp.Z, inp.offsets, n_threads=opts.n_threads)
    E, p0 = theory_energy(inp.rerank, inp.offsets)
    off = inp.offsets
    pools = list(range(inp.n_queries))
    res: dict = {}
    steps: dict = {}
    adam: dict = {}
    with single_blas():
        V, bands = _directions(batch, pools)
        for mode, obj in MODES:
            cfg = operating_point("base", mode=mode, objective=obj)
            res[mode], steps[mode], adam[mode] = [], [], []
            for q in pools:
                Eq = E[off[q] : off[q + 1]].astype(np.float64)
                pq = p0[off[q] : off[q + 1]]
                r = _one_query(Eq, pq, batch.cost(q), batch.kernel(q), V[q], cfg)
                res[mode].append(r)
                steps[mode].append(
                    {"query": inp.query_ids[q], "residual": r["residual"], "worst_fd_residual": r["worst_residual"],
                     "n_newton": r["n_newton"], "step_and_jvp_s": r["jvp_s"]}
                )  # fmt: skip
                if q < ADAM_QUERIES:
                    adam[mode].append(
                        {
                            "query": inp.query_ids[q],
                            **_adam_check(Eq, pq, batch.cost(q), batch.kernel(q), cfg, r["sol"]),
                        }
                    )
                opts.log("linear-response", f"{mode} query {q + 1}/{len(pools)}: max rel_err "
                         f"{max(r['err'][S_REF]):.2e}, residual {r['residual']:.1e}")  # fmt: skip
    return res, steps, adam, bands


def _notes(inp, rows: list, quick: bool) -> list:
    """Return the notes: the per-step objective, the error target and whether it was met, the directions."""
    worst = max(r["rel_err"] for r in rows)
    notes = [
        *inp.notes,
        "per-step objective: wasserstein = entropic OT_eps proximal term (objective='entropic'; the published "
        "transport-only term of a truncated plan has no stationary point to differentiate), kl = KL(p||q); the "
        f"step is solved exactly (damped Newton, stationarity residual < {STEP_TOL:g}) from q = p0",
        f"rel_err = ||FD - JVP|| / ||JVP|| with central differences at s = {S_REF:g} (max over queries x "
        f"directions); target <= {TARGET:g}: {'met' if worst <= TARGET else 'NOT met'} (worst {worst:.2e})",
        "directions: 4 Laplacian bands x 2 per query from one default_rng(0) (query -> band -> direction), "
        "shared by both modes",
        "adam: the solver's own step (Adam, objective='entropic' / 'kl', "
        f"{ADAM_STEPS} inner steps) vs the exact step: L1 distance and stationarity residual",
    ]
    if quick:
        notes.append(f"--quick: {QUICK_QUERIES} queries")
    return notes


def _blocks(steps: dict, adam: dict) -> list:
    t = [
        "exact step (q = p0): stationarity residual max_i |G_i - <p,G>| and Newton iterations; the solver's Adam "
        f"step ({ADAM_STEPS} inner) vs the exact one",
        f"  {'mode':<11} {'residual max':>12} {'FD solves max':>13} {'Newton mean':>11}   {'adam L1 (mean)':>14} "
        f"{'adam residual (mean)':>20}",
    ]
    for mode, _ in MODES:
        st = steps[mode]
        ad = adam[mode]
        t.append(
            f"  {mode:<11} {max(x['residual'] for x in st):12.1e} {max(x['worst_fd_residual'] for x in st):13.1e} "
            f"{np.mean([x['n_newton'] for x in st]):11.1f}   "
            + (
                f"{np.mean([x['adam_l1'] for x in ad]):14.2e} {np.mean([x['adam_residual'] for x in ad]):20.2e}"
                if ad
                else f"{'--':>14} {'--':>20}"
            )
        )
    return ["\n".join(t)]


def plot(result: StudyResult, out_dir: str) -> list:
    """Write the figure: relative error per band and mode, and the per-band gain."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    colors = {"wasserstein": "C0", "kl": "C3"}
    for k, mode in enumerate(("wasserstein", "kl")):
        rs = [r for r in result.rows if r["mode"] == mode]
        x = np.arange(len(rs)) + (k - 0.5) * 0.35
        ax[0].bar(x, [r["rel_err"] for r in rs], 0.35, color=colors[mode], label=mode)
        g = [r["gain"] for r in rs]
        err = np.array([[r["gain"] - r["gain_ci"][0], r["gain_ci"][1] - r["gain"]] for r in rs]).T
        ax[1].bar(x, g, 0.35, yerr=err, color=colors[mode], label=f"{mode} (JVP)")
        ax[1].plot(x, [r["gain_fd"] for r in rs], "k_", markersize=14)
    ax[0].axhline(TARGET, color="k", ls="--", lw=0.8)
    ax[0].set(yscale="log", title=f"JVP vs central differences (s = {S_REF:g})", xlabel="Laplacian band",
              ylabel="max relative error")  # fmt: skip
    ax[1].set(title="gain ||A v|| / ||v|| (— finite differences)", xlabel="Laplacian band (low → high)", ylabel="gain")
    for a in ax:
        a.set_xticks(range(N_BANDS))
        a.legend(fontsize=8)
    return save_figure(fig, out_dir, "linear_response.png")
