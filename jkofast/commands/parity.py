"""``jkofast parity``: rerank the 30 bundled SciFact parity pools at every stored config.

Compares jkofast (``grad="unrolled"``, and the ``implicit`` fast path) with the published
torch solver's outputs stored in the fixture, and prints agreement and ms/query.
"""

from __future__ import annotations

import json
import os
import time

from jkofast.datasets.beir import parity_fixture_path

_FIXTURE = parity_fixture_path()


def add_parser(sub) -> None:
    """Register ``jkofast parity`` on the sub-command parser ``sub``."""
    p = sub.add_parser("parity", help="rerank the 30 parity pools and compare with the published solver")
    p.add_argument("--fixture", default=_FIXTURE, help="path of jko_reference_scifact30.npz")
    p.add_argument("--queries", type=int, default=30, help="number of pools to use (<= 30)")
    p.add_argument("--configs", default="all", help="comma-separated config keys, or 'all'")
    p.add_argument("--no-implicit", action="store_true", help="skip the implicit fast path")
    p.add_argument("--threads", type=int, default=1, help="Numba threads (default 1)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def fixture_pool(z, q: int, tau0: float):
    """(p0, E, C, K) of pool ``q``, rebuilt as the fixture README says (float32)."""
    import numpy as np

    def minmax(x):
        lo, hi = x.min(), x.max()
        return np.zeros_like(x) if hi - lo < 1e-9 else (x - lo) / (hi - lo)

    Z = z["pool_emb_f16"][q].astype(np.float32)
    S = np.clip(Z @ Z.T, -1, 1)
    C = ((1 - S) ** 2).astype(np.float32)
    K = np.maximum(S, 0).astype(np.float32)
    r = (
        np.float32(0.4) * minmax(z["dense_pool"][q].astype(np.float32))
        + np.float32(0.6) * minmax(z["bm25_pool"][q].astype(np.float32))
    ).astype(np.float32)
    x = r / max(tau0, 1e-9)
    e = np.exp(x - x.max())
    return (e / e.sum()).astype(np.float32), -r, C, K


def run(args) -> int:
    """Rerank the fixture's pools at the chosen configs and print the agreement (exit status)."""
    import numpy as np

    from jkofast._threads import numba_threads, resolve_threads
    from jkofast.commands._common import Progress, emit
    from jkofast.jko.solver import JKOConfig, run_jko, run_jko_with_duals
    from jkofast.warmup import warmup

    if not os.path.exists(args.fixture):
        print(f"fixture not found: {args.fixture}")
        return 2
    if args.queries < 1:
        raise ValueError(f"--queries must be >= 1, got {args.queries}")
    resolve_threads(args.threads)
    z = np.load(args.fixture)
    configs = json.loads(str(z["configs"]))
    tau = json.loads(str(z["tau0"]))
    keys = list(configs) if args.configs == "all" else [k for k in args.configs.split(",") if k]
    unknown = [k for k in keys if k not in configs]
    if unknown or not keys:
        raise ValueError(f"--configs: unknown config(s) {unknown}; choose from {sorted(configs)} or 'all'")
    warmup()
    nq = min(args.queries, z["cand_idx"].shape[0])
    runs = [(k, "unrolled") for k in keys]
    if not args.no_implicit:
        runs += [(k, "implicit") for k in keys if k.startswith(("tuned_wasserstein", "contrib"))]
    out = {}
    prog = Progress(len(runs) * nq, "parity", enabled=not args.json)
    with numba_threads(args.threads):
        for key, grad in runs:
            cfg = JKOConfig(**configs[key], grad=grad)
            tau0 = tau[key.split("_")[0]]
            maxabs, l1, same, ms = [], [], 0, []
            for q in range(nq):
                p0, E, C, K = fixture_pool(z, q, tau0)
                t0 = time.perf_counter()
                if key.startswith("contrib"):
                    p = run_jko_with_duals(p0, E, C, K, cfg)[0]
                else:
                    p = run_jko(p0, E, C, K, cfg)
                ms.append(1000 * (time.perf_counter() - t0))
                ref = z[f"{key}/p_T"][q].astype(np.float64)
                maxabs.append(float(np.abs(p - ref).max()))
                l1.append(float(np.abs(p - ref).sum()))
                same += set(np.argsort(-p)[:10]) == set(np.argsort(-ref)[:10])
                prog.update()
            out[f"{key}[{grad}]"] = {
                "max_abs_dp": max(maxabs),
                "max_l1": max(l1),
                "top10_identical": same,
                "pools": nq,
                "ms_per_query_mean": float(np.mean(ms)),
                "ms_per_query_median": float(np.median(ms)),
            }
    prog.close()
    ref_ms = str(z["reference_ms_per_query_1thread"])
    try:  # stored as a JSON string: --json printed it as a string holding JSON, not an object
        ref_obj = json.loads(ref_ms)
    except ValueError:
        ref_obj = ref_ms
    lines = [f"{'config':34s} {'max|dp|':>9s} {'max L1':>9s} {'top10':>7s} {'ms/query':>9s}"]
    for k, v in out.items():
        lines.append(
            f"{k:34s} {v['max_abs_dp']:9.2e} {v['max_l1']:9.2e} {v['top10_identical']:>3d}/{v['pools']:<3d} "
            f"{v['ms_per_query_median']:9.1f}"
        )
    lines.append(f"published torch solver (fixture README, ms/query, 1 thread): {ref_ms}")
    emit(
        {"results": out, "reference_ms_per_query_1thread": ref_obj, "threads": args.threads},
        args.json,
        "\n".join(lines),
    )
    return 0
