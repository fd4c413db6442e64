"""Naive NumPy oracles of MR-JKO / SAM-JKO (SPEC A.6.3): clustering and the two-stage flow.

Written from the SPEC text, float64 throughout; the JKO stages use ``reference_ot.jko_naive``
(the published loop with the truncated-unroll gradient).
"""

from __future__ import annotations

import numpy as np
from reference_ot import jko_naive


def mr_minmax_naive(x):
    """``(x - min)/(max - min)``, all zeros when ``max - min < 1e-9`` (SPEC A.1)."""
    x = np.asarray(x, np.float64)
    r = x.max() - x.min()
    return np.zeros_like(x) if r < 1e-9 else (x - x.min()) / r


def mr_softmax_naive(x, tau):
    z = (np.asarray(x, np.float64) - np.max(x)) / max(tau, 1e-9)
    e = np.exp(z)
    return e / e.sum()


def mr_normalise_naive(A):
    return A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-8)


def mr_lloyd_naive(X, init, n_iter, assign_fn, centre_fn):
    """Lloyd iterations with the SPEC's rules: assignments start all zero, stop when unchanged,
    an empty group keeps its centroid. Returns (assign, centroids, passes)."""
    cent = centre_fn(X[init].copy(), None)
    assign = np.zeros(X.shape[0], np.int64)
    passes = 0
    for _ in range(n_iter):
        passes += 1
        new = assign_fn(X, cent)
        if np.array_equal(new, assign):
            break
        assign = new
        for g in range(cent.shape[0]):
            members = X[assign == g]
            if len(members):
                cent[g] = centre_fn(members.mean(axis=0)[None, :], g)[0]
    return assign, cent, passes


def mr_spherical_kmeans_naive(Z, init, n_iter=30):
    """Spherical k-means (MR-JKO): max cosine to normalised centroids (np.argmax: first index)."""
    Z = np.asarray(Z, np.float64)
    return mr_lloyd_naive(
        Z, np.asarray(init), n_iter, lambda X, c: np.argmax(X @ c.T, axis=1), lambda c, g: mr_normalise_naive(c)
    )


def mr_sam_kmeans_naive(Z, rel, beta, init, n_iter=30):
    """SAM k-means on [z, beta*rel] (squared Euclidean, plain means); centroids = first d coords normalised."""
    Z = np.asarray(Z, np.float64)
    d = Z.shape[1]
    aug = np.concatenate([Z, beta * np.asarray(rel, np.float64)[:, None]], axis=1)

    def assign(X, c):
        return np.argmin(((X[:, None, :] - c[None, :, :]) ** 2).sum(axis=-1), axis=1)

    a, c, passes = mr_lloyd_naive(aug, np.asarray(init), n_iter, assign, lambda c, g: c)
    return a, mr_normalise_naive(c[:, :d]), passes


def _stage_naive(r, tau0, Zs, cfg):
    x = mr_minmax_naive(r)
    E, p0 = -x, mr_softmax_naive(x, tau0)
    if len(r) == 1:
        return np.ones(1)
    S = np.clip(Zs @ Zs.T, -1, 1)
    C, K = (1 - S) ** 2, np.maximum(S, 0)
    p, _ = jko_naive(
        p0,
        E,
        C,
        K,
        h=cfg.h,
        lam=cfg.lam,
        rho=cfg.rho,
        eps=cfg.sinkhorn_eps,
        T=cfg.T,
        inner=cfg.inner_steps,
        lr=cfg.inner_lr,
        n_iter=cfg.sinkhorn_iter,
        n_grad=cfg.sinkhorn_iter_grad,
    )
    return p


def mr_jko_naive(Z, rel, G, G_keep, coarse, fine, clustering="kmeans", beta=1.0, n_iter=30):
    """MR/SAM-JKO on one pool (rows L2-normalised here). ``coarse``/``fine``: objects with the
    JKOConfig field names. Returns (p (M,), refined pool indices, passes, G used)."""
    Z = mr_normalise_naive(np.asarray(Z, np.float64))
    rel = np.asarray(rel, np.float64)
    M = Z.shape[0]
    if G >= M:
        G = max(2, M // 4)
    init = np.random.default_rng(0).choice(M, G, replace=False)
    Zc = Z.astype(np.float32).astype(np.float64)  # the rows are clustered in float32 (as published)
    if clustering == "sam":
        assign, cent, passes = mr_sam_kmeans_naive(Zc, rel, beta, init, n_iter)
    else:
        assign, cent, passes = mr_spherical_kmeans_naive(Zc, init, n_iter)
    grel = np.array([rel[assign == g].mean() if np.any(assign == g) else 0.0 for g in range(G)])
    pc = _stage_naive(grel, coarse.tau0, cent, coarse)
    top = np.argsort(-pc, kind="stable")[: min(G_keep, G)]
    pool = np.flatnonzero(np.isin(assign, top))
    if len(pool) < 2:
        pool = np.arange(M)
    pf = _stage_naive(rel[pool], fine.tau0, Z[pool], fine)
    p = np.zeros(M)
    p[pool] = pf
    return p, pool, passes, G
