"""Naive oracles for the theory experiments (SPEC A.7.7) and the linear-response check.

Written from the SPEC's formulas with plain NumPy / scipy loops, no jkofast code.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp, softmax


def free_energy(p, E, K, lam, rho):
    """F(p) = <p,E> + lam Σ p log p + ½ rho pᵀKp, p clipped at 1e-30, float64."""
    p = np.maximum(np.asarray(p, np.float64), 1e-30)
    E = np.asarray(E, np.float64)
    K = np.asarray(K, np.float64)
    return float(p @ E + lam * np.sum(p * np.log(p)) + 0.5 * rho * p @ K @ p)


def wc(p, q, C, eps=0.1, n_iter=80):
    """Cold log-domain Sinkhorn on log(clip(p, 1e-12)), log(clip(q, 1e-12)); <Π, C> after n_iter pairs."""
    C = np.asarray(C, np.float64)
    la = np.log(np.maximum(np.asarray(p, np.float64), 1e-12))
    lb = np.log(np.maximum(np.asarray(q, np.float64), 1e-12))
    f = np.zeros(C.shape[0])
    g = np.zeros(C.shape[1])
    for _ in range(n_iter):
        f = eps * (la - logsumexp((g[None, :] - C) / eps, axis=1))
        g = eps * (lb - logsumexp((f[:, None] - C) / eps, axis=0))
    P = np.exp((f[:, None] + g[None, :] - C) / eps)
    return float(np.sum(P * C))


def gibbs_laplacian_matrix(C, eps=0.1):
    """L = I − D^-1/2 Γ D^-1/2 of Γ = exp(−C/eps) with zero diagonal, degrees floored at 1e-12, symmetrised."""
    C = np.asarray(C, np.float64)
    m = C.shape[0]
    G = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            if i != j:
                G[i, j] = np.exp(-C[i, j] / eps)
    deg = np.array([max(G[i].sum(), 1e-12) for i in range(m)])
    L = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            L[i, j] = (1.0 if i == j else 0.0) - G[i, j] / np.sqrt(deg[i] * deg[j])
    return 0.5 * (L + L.T)


def radius(preserved, grid):
    """Walk the grid; the radius is the last value before the first s with preservation < 1."""
    last = grid[0]
    for s, pr in zip(grid, preserved, strict=True):
        if s == 0:
            continue
        if pr < 1.0:
            return last
        last = s
    return last


def kl_step_closed_form(E, q, lam, h):
    """Exact KL-prox step with rho = 0: p = softmax((−E + w log q)/(lam + w)), w = 1/(2h)."""
    w = 1.0 / (2.0 * h)
    return softmax((-np.asarray(E, np.float64) + w * np.log(q)) / (lam + w))


def noprox_jacobian(p, lam):
    """dp/dE of p = softmax(−E/lam): −(diag(p) − p pᵀ)/lam."""
    p = np.asarray(p, np.float64)
    return -(np.diag(p) - np.outer(p, p)) / lam


def entropic_ot(p, q, C, eps, n_iter=20000):
    """OT_ε(p, q) = max Σ p f + Σ q g − ε Σ exp((f + g − C)/ε) by plain log-domain Sinkhorn (converged)."""
    la, lb = np.log(p), np.log(q)
    f = np.zeros(len(p))
    g = np.zeros(len(q))
    for _ in range(n_iter):
        f = eps * (la - logsumexp((g[None, :] - C) / eps, axis=1))
        g = eps * (lb - logsumexp((f[:, None] - C) / eps, axis=0))
    P = np.exp((f[:, None] + g[None, :] - C) / eps)
    return float(p @ f + q @ g - eps * P.sum()), f, g
