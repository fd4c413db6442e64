"""Agreement with the published solver on the bundled parity fixture (30 SciFact pools).

The fixture (:func:`jkofast.datasets.beir.parity_fixture_path`) stores, per pool, the candidate
embeddings (float16), the BM25 and dense pool scores and the published torch solver's ``p_T`` at
every stored configuration.  :func:`fixture_pool` rebuilds one pool's inputs exactly as the
fixture's README says; :func:`parity_report` reranks the pools and measures the agreement.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np

from jkofast.jko.solver import JKOConfig, run_jko, run_jko_with_duals

__all__ = ["fixture_pool", "parity_report"]


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(), x.max()
    return np.zeros_like(x) if hi - lo < 1e-9 else (x - lo) / (hi - lo)


def fixture_pool(z, q: int, tau0: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rebuild the inputs ``(p0, E, C, K)`` of fixture pool ``q`` (float32), as the published pipeline does.

    Parameters
    ----------
    z : mapping
        The loaded fixture (``np.load(parity_fixture_path())``).
    q : int
        Pool index, ``0 <= q < 30``.
    tau0 : float
        Temperature of the initial distribution ``p0 = softmax(r / τ0)``.

    Returns
    -------
    p0, E, C, K : numpy.ndarray
        float32; ``r = 0.4·minmax(dense) + 0.6·minmax(bm25)``, ``E = -r``, ``S = clip(ZZᵀ, -1, 1)``,
        ``C = (1 - S)²``, ``K = max(0, S)``.
    """
    Z = z["pool_emb_f16"][q].astype(np.float32)
    S = np.clip(Z @ Z.T, -1, 1)
    C = ((1 - S) ** 2).astype(np.float32)
    K = np.maximum(S, 0).astype(np.float32)
    r = (
        np.float32(0.4) * _minmax(z["dense_pool"][q].astype(np.float32))
        + np.float32(0.6) * _minmax(z["bm25_pool"][q].astype(np.float32))
    ).astype(np.float32)
    x = r / max(tau0, 1e-9)
    e = np.exp(x - x.max())
    return (e / e.sum()).astype(np.float32), -r, C, K


def parity_report(
    fixture: str,
    queries: int = 30,
    configs: str = "all",
    implicit: bool = True,
    tick: Callable[[int], None] | None = None,
    dtype: str = "float64",
) -> tuple[dict, str]:
    """Rerank the fixture's pools and compare with the published solver's ``p_T``.

    Parameters
    ----------
    fixture : str
        Path of ``jko_reference_scifact30.npz``.
    queries : int
        Number of pools to use (``>= 1``; at most the fixture's 30).
    configs : str
        Comma-separated configuration keys of the fixture, or ``"all"``.
    implicit : bool
        Also run the ``grad="implicit"`` fast path for the tuned-wasserstein and contrib configs.
    tick : callable, optional
        ``tick(total)`` is called once per reranked pool, with the number of pool runs in all (progress).
    dtype : {"float64", "float32"}
        Operators of the unrolled runs (``JKOConfig.dtype``; ``"float32"`` = the float32 parity path, its
        results keyed ``"<config>[unrolled,float32]"``); the implicit runs ignore it.

    Returns
    -------
    results : dict
        ``"<config>[<grad>]"`` -> ``max_abs_dp``, ``max_l1``, ``top10_identical``, ``pools``,
        ``ms_per_query_mean``, ``ms_per_query_median``.
    reference_ms : str
        The published solver's ms/query at 1 thread, as stored in the fixture (a JSON string).

    Raises
    ------
    ValueError
        ``queries < 1``, an unknown configuration key or ``dtype``.
    """
    dtype = JKOConfig(dtype=dtype).dtype  # checked (and normalised) before any work

    if queries < 1:
        raise ValueError(f"--queries must be >= 1, got {queries}")
    z = np.load(fixture)
    stored = json.loads(str(z["configs"]))
    tau = json.loads(str(z["tau0"]))
    keys = list(stored) if configs == "all" else [k for k in configs.split(",") if k]
    unknown = [k for k in keys if k not in stored]
    if unknown or not keys:
        raise ValueError(f"--configs: unknown config(s) {unknown}; choose from {sorted(stored)} or 'all'")
    nq = min(queries, z["cand_idx"].shape[0])
    runs = [(k, "unrolled") for k in keys]
    if implicit:
        runs += [(k, "implicit") for k in keys if k.startswith(("tuned_wasserstein", "contrib"))]
    out = {}
    for key, grad in runs:
        cfg = JKOConfig(**stored[key], grad=grad, dtype=dtype if grad == "unrolled" else "float64")
        label = f"{key}[{grad},float32]" if grad == "unrolled" and dtype == "float32" else f"{key}[{grad}]"
        tau0 = tau[key.split("_")[0]]
        maxabs, l1, same, ms = [], [], 0, []
        for q in range(nq):
            p0, E, C, K = fixture_pool(z, q, tau0)
            t0 = time.perf_counter()
            p = run_jko_with_duals(p0, E, C, K, cfg)[0] if key.startswith("contrib") else run_jko(p0, E, C, K, cfg)
            ms.append(1000 * (time.perf_counter() - t0))
            ref = z[f"{key}/p_T"][q].astype(np.float64)
            maxabs.append(float(np.abs(p - ref).max()))
            l1.append(float(np.abs(p - ref).sum()))
            same += set(np.argsort(-p)[:10]) == set(np.argsort(-ref)[:10])
            if tick is not None:
                tick(len(runs) * nq)
        out[label] = {
            "max_abs_dp": max(maxabs),
            "max_l1": max(l1),
            "top10_identical": same,
            "pools": nq,
            "ms_per_query_mean": float(np.mean(ms)),
            "ms_per_query_median": float(np.median(ms)),
        }
    return out, str(z["reference_ms_per_query_1thread"])
