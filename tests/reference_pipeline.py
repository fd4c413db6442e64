"""Naive oracles for the retrieval pipeline (pools, energies, baselines): SPEC A.2.6, A.3, A.5.

Written straight from the SPEC's pseudo-code with Python dicts / NumPy, one query at a time.
Ties are broken by lowest index wherever the reference's order is arbitrary (SPEC A.1).
"""

from __future__ import annotations

import numpy as np


def rrf_pool_naive(sparse_list, dense_list, M=200, k_rrf=60):
    """Global RRF: dict accumulation, sparse list first, stable sort, first M (ids, scores)."""
    fused = {}
    for r, d in enumerate(sparse_list):
        if d < 0:
            continue
        fused[int(d)] = fused.get(int(d), 0.0) + 1.0 / (k_rrf + r + 1)
    for r, d in enumerate(dense_list if dense_list is not None else []):
        if d < 0:
            continue
        fused[int(d)] = fused.get(int(d), 0.0) + 1.0 / (k_rrf + r + 1)
    items = sorted(fused.items(), key=lambda kv: -kv[1])  # Python's sort is stable
    items = items[:M]
    return [d for d, _ in items], [s for _, s in items]


def minmax_naive(x):
    x = np.asarray(x)
    mn, mx = x.min(), x.max()
    if mx - mn < 1e-9:
        return np.zeros_like(x)
    return (x - mn) / (mx - mn)


def softmax_naive(x, tau):
    x = np.asarray(x, dtype=np.float64)
    z = np.exp((x - x.max()) / max(tau, 1e-9))
    return z / z.sum()


def stable_desc_order(x):
    return np.argsort(-np.asarray(x, dtype=np.float64), kind="stable")


def inpool_rrf_naive(sparse, dense, k, k_rrf=60):
    m = len(sparse)
    rs = np.empty(m, int)
    rd = np.empty(m, int)
    rs[stable_desc_order(sparse)] = np.arange(m)
    rd[stable_desc_order(dense)] = np.arange(m)
    fused = 1.0 / (k_rrf + rs + 1) + 1.0 / (k_rrf + rd + 1)
    return list(stable_desc_order(fused)[:k])


def mmr_naive(rel, Z, k, lam=0.5):
    """SPEC A.5 MMR pseudo-code verbatim (ascending scan, strict >, best_score -1e18)."""
    rel = np.asarray(rel, np.float64)
    Z = np.asarray(Z, np.float64)
    sim = Z @ Z.T
    m = len(rel)
    selected = []
    remaining = list(range(m))
    while len(selected) < min(k, m):
        best, best_score = -1, -1e18
        for i in remaining:
            if not selected:
                score = rel[i]
            else:
                score = lam * rel[i] - (1 - lam) * max(sim[i, j] for j in selected)
            if score > best_score:
                best, best_score = i, score
        selected.append(best)
        remaining.remove(best)
    return selected


def dpp_map_naive(rel, Z, k, delta=1e-3):
    """SPEC A.5 DPP-MAP Gram-Schmidt pseudo-code verbatim, float64, with the fill-up rule."""
    r = np.maximum(np.asarray(rel, np.float64), 1e-8)
    Z = np.asarray(Z, np.float64)
    Z = Z / np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-8)
    R = r[:, None] * Z
    d = (R * R).sum(1) + delta
    chosen = []
    for _ in range(min(k, len(r))):
        d = d.copy()
        d[chosen] = -np.inf
        if d.max() <= 0:
            break
        b = int(np.argmax(d))
        chosen.append(b)
        s = np.sqrt(d[b])
        if s < 1e-12:
            break
        u = R[b] / s
        R = R - np.outer(R @ u, u)
        d = (R * R).sum(1) + delta
    if len(chosen) < min(k, len(r)):
        for i in np.argsort(-r, kind="stable"):
            if len(chosen) >= min(k, len(r)):
                break
            if int(i) not in chosen:
                chosen.append(int(i))
    return chosen
