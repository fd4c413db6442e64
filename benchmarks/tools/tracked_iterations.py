"""Tracking the last 8 Sinkhorn iterations vs all of them: the published solver and jkofast side by side.

    python benchmarks/tools/tracked_iterations.py --published DIR [--pools 4] [--repeat 5] [--json OUT]

The published JKO-RAG paper says that differentiating only the last 8 of the 60 Sinkhorn update pairs
(the other 52 run detached) is about 20x faster than differentiating all of them. This measures it.
``DIR`` holds the published solver module (``jko.py``, from ``src/`` of the JKO-RAG repository); it
needs PyTorch (``pip install "jkofast[torch]"``). Nothing of the published code is stored here. Without
``--published``, or when ``DIR/jko.py`` or torch is missing, only jkofast is measured and the report
says that the published side was skipped, and why.

**Inputs**: the first ``--pools`` SciFact pools of the parity fixture (M = 200; ``C``, the ``wc``
log-marginal pair of ``compare_published_loss.pool_inputs``), and for the whole solver the base
operating point's inputs of the same pools: ``E = -(0.4 minmax(dense) + 0.6 minmax(bm25))``,
``p0 = softmax(-E / 0.1)``, ``K = max(S, 0)``.

**Two levels**, each at ``n_iter_grad`` = 8 (as published) and 60 (all pairs tracked), eps 0.1, 60 pairs:

* ``loss``: one loss call with its gradient w.r.t. ``log_p`` (what the JKO step needs): published =
  ``log_sinkhorn_loss(...)`` + ``backward()`` (autograd; ``log_q`` and ``C`` constant, as in its
  ``jko_step``); jkofast = ``jkofast.compat.log_sinkhorn_loss_and_grad`` (hand-written reverse sweep,
  all three gradients);
* ``solve``: the whole published recipe, T 3 outer steps x 25 Adam steps (base point, mode
  ``wasserstein``): published ``run_jko``, jkofast ``jkofast.jko.solver.run_jko`` with
  ``grad="unrolled"`` (the published gradient), ``sinkhorn_iter_grad`` 8 or 60.

One thread each (``torch.set_num_threads(1)`` after numba's pool starts; asserted), rounds interleaved,
the median of ``--repeat`` rounds (the typical round) in ms per pool, process CPU time beside it.
The ratio reported is ``time(all 60 tracked) / time(last 8 tracked)`` per library and level.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np

N_ITER = 60
EPS = 0.1
TRACKED = (8, 60)


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _minmax(x):
    x = np.asarray(x, np.float32)
    lo, hi = x.min(), x.max()
    return np.zeros_like(x) if hi - lo < 1e-9 else (x - lo) / (hi - lo)


def pools(n: int) -> list:
    """``C``, the ``wc`` pair, and ``E, p0, K`` of the first ``n`` parity-fixture pools (float32)."""
    cpl = _tool("compare_published_loss")
    fx = cpl.load_parity_fixture()
    out = []
    for q in range(n):
        d = cpl.pool_inputs(fx, q)
        Z = fx["pool_emb_f16"][q].astype(np.float64)
        S = np.clip(Z @ Z.T, -1.0, 1.0)
        r = np.float32(0.4) * _minmax(fx["dense_pool"][q]) + np.float32(0.6) * _minmax(fx["bm25_pool"][q])
        E = (-r).astype(np.float32)
        x = r / np.float32(0.1)
        p0 = np.exp(x - x.max())
        d.update(E=E, p0=(p0 / p0.sum()).astype(np.float32), K=np.maximum(S, 0.0).astype(np.float32))
        out.append(d)
    return out


def published_module(path: str | None):
    """``(module, torch, None)`` or ``(None, None, why not)``."""
    if not path:
        return None, None, "no --published DIR given"
    if not os.path.isfile(os.path.join(path, "jko.py")):
        return None, None, f"{os.path.join(path, 'jko.py')} not found"
    try:
        import torch
    except ImportError:
        return None, None, 'PyTorch is not installed (pip install "jkofast[torch]")'
    spec = importlib.util.spec_from_file_location("published_jko", os.path.join(path, "jko.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up while the module runs
    spec.loader.exec_module(mod)
    return mod, torch, None


def _runners(pub, torch, data) -> dict:
    """name -> (library, level, n_tracked, callable over all pools)."""
    from jkofast import compat
    from jkofast.jko.solver import JKOConfig, operating_point, run_jko

    base = operating_point("base")
    out = {}
    for k in TRACKED:
        cfg = JKOConfig(**{**base.__dict__, "sinkhorn_iter_grad": k, "grad": "unrolled"}).validate()

        def jk_loss(k=k):
            for d in data:
                compat.log_sinkhorn_loss_and_grad(d["wc"][0], d["wc"][1], d["C"], EPS, N_ITER, k)

        def jk_solve(cfg=cfg):
            for d in data:
                run_jko(d["p0"], d["E"], d["C"], d["K"], cfg)

        out[f"jkofast/loss/{k}"] = jk_loss
        out[f"jkofast/solve/{k}"] = jk_solve
        if pub is None:
            continue
        tens = [
            (
                torch.from_numpy(d["wc"][0]).clone().requires_grad_(True),
                torch.from_numpy(d["wc"][1]),
                torch.from_numpy(d["C"]),
            )
            for d in data
        ]
        pcfg = pub.JKOConfig(
            h=base.h, lam=base.lam, rho=base.rho, sinkhorn_eps=base.sinkhorn_eps, sinkhorn_iter=N_ITER,
            sinkhorn_iter_grad=k, inner_steps=base.inner_steps, inner_lr=base.inner_lr, T=base.T, mode="wasserstein",
        )  # fmt: skip

        def pub_loss(k=k, tens=tens):
            for a, b, C in tens:
                a.grad = None
                pub.log_sinkhorn_loss(a, b, C, eps=EPS, n_iter=N_ITER, n_iter_grad=k).backward()

        def pub_solve(pcfg=pcfg):
            for d in data:
                pub.run_jko(d["p0"], d["E"], d["C"], d["K"], pcfg)

        out[f"published/loss/{k}"] = pub_loss
        out[f"published/solve/{k}"] = pub_solve
    return out


def measure(pub, torch, data, repeat: int) -> dict:
    """Median (and best) ms per pool and CPU ms per pool of every runner; the all/8 ratios."""
    import numba

    from jkofast import numba_threads

    with numba_threads(1):
        threads = {"numba": numba.get_num_threads()}
        if torch is not None:
            torch.set_num_threads(1)  # after numba's pool is up (shared libgomp; see compare_published_loss.py)
            threads["torch"] = torch.get_num_threads()
        assert set(threads.values()) == {1}, threads
        fns = _runners(pub, torch, data)
        for fn in fns.values():  # warm-up: compilation, allocator
            fn()
        wall = {k: [] for k in fns}
        cpu = {k: [] for k in fns}
        for _ in range(repeat):
            for k, fn in fns.items():
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                wall[k].append(1e3 * (time.perf_counter() - t0) / len(data))
                cpu[k].append(1e3 * (time.process_time() - c0) / len(data))
    res = {
        k: {"median_ms": float(np.median(wall[k])), "best_ms": float(min(wall[k])), "cpu_ms": float(np.median(cpu[k]))}
        for k in fns
    }
    ratios = {}
    for lib in ("published", "jkofast"):
        for level in ("loss", "solve"):
            a, b = res.get(f"{lib}/{level}/60"), res.get(f"{lib}/{level}/8")
            if a and b:
                ratios[f"{lib}/{level}"] = {"wall": a["median_ms"] / b["median_ms"], "cpu": a["cpu_ms"] / b["cpu_ms"]}
    return {"threads": threads, "times": res, "ratio_all_over_8": ratios}


def report(doc: dict) -> str:
    """Return the text table of a measurement."""
    lines = [
        f"tracked Sinkhorn pairs: last 8 vs all {N_ITER} (eps {EPS}, M 200, {doc['pools']} SciFact pools, "
        f"1 thread, median of {doc['repeat']} rounds)",
        f"{'library':<10} {'level':<6} {'8 tracked ms':>13} {'60 tracked ms':>14} {'60/8 wall':>10} {'60/8 cpu':>9}",
    ]
    t = doc["times"]
    for key, r in doc["ratio_all_over_8"].items():
        lib, level = key.split("/")
        lines.append(
            f"{lib:<10} {level:<6} {t[f'{key}/8']['median_ms']:>13.2f} {t[f'{key}/60']['median_ms']:>14.2f} "
            f"{r['wall']:>10.2f} {r['cpu']:>9.2f}"
        )
    if doc.get("published_skipped"):
        lines.append(f"published solver skipped: {doc['published_skipped']}")
    lines.append("the paper's claim: tracking only the last 8 is about 20x faster than tracking all")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--published", default=None, help="folder holding the published jko.py (needs torch)")
    ap.add_argument("--pools", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None, help="also write the measurement as JSON")
    a = ap.parse_args(argv)
    pub, torch, why = published_module(a.published)
    if why:
        print(f"published solver skipped: {why}; measuring jkofast only", file=sys.stderr)
    doc = {"pools": a.pools, "repeat": a.repeat, "published_skipped": why, "load": os.getloadavg()[0]}
    doc.update(measure(pub, torch, pools(a.pools), a.repeat))
    doc["load_after"] = os.getloadavg()[0]
    print(report(doc))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
