"""Naive NumPy/SciPy oracles for the OT / JKO core (slow, obviously correct, float64).

These follow SPEC A.4.3-A.4.7 line by line with dense M x M log-domain arrays; no
scaling tricks, no warm starts unless asked.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp


def sinkhorn_log_naive(log_a, log_b, C, eps, n_iter, f=None, g=None, dtype=np.float64):
    """f-from-rows then g-from-columns, ``n_iter`` pairs; returns (f, g, history).

    ``dtype=np.float32`` runs every operation in float32 (the published solver's precision)."""
    C = np.asarray(C, dtype)
    eps = dtype(eps)
    log_a = np.asarray(log_a, dtype)
    log_b = np.asarray(log_b, dtype)
    M, N = C.shape
    f = np.zeros(M, dtype) if f is None else np.array(f, dtype)
    g = np.zeros(N, dtype) if g is None else np.array(g, dtype)
    hist = []
    with np.errstate(divide="ignore"):
        for _ in range(n_iter):
            f = eps * (log_a - logsumexp((g[None, :] - C) / eps, axis=1))
            g = eps * (log_b - logsumexp((f[:, None] - C) / eps, axis=0))
            hist.append((f.copy(), g.copy()))
    return f, g, hist


def plan_naive(f, g, C, eps):
    with np.errstate(invalid="ignore"):
        P = np.exp((f[:, None] + g[None, :] - C) / eps)
    return np.nan_to_num(P)


def transport_cost_unrolled_naive(a, log_b, C, eps, n_iter=60, n_grad=8, dtype=np.float64):
    """Value and truncated-unrolled gradient w.r.t. a = log p (SPEC A.4.6)."""
    n_warm = max(0, n_iter - n_grad)
    C = np.asarray(C, dtype)
    a = np.asarray(a, dtype)
    log_b = np.asarray(log_b, dtype)
    eps = dtype(eps)
    f, g, _ = sinkhorn_log_naive(a, log_b, C, eps, n_warm, dtype=dtype)
    g0 = g.copy()
    fs, gs = [], [g0]
    for _ in range(n_iter - n_warm):
        f = eps * (a - logsumexp((g[None, :] - C) / eps, axis=1))
        g = eps * (log_b - logsumexp((f[:, None] - C) / eps, axis=0))
        fs.append(f)
        gs.append(g)
    P = plan_naive(f, g, C, eps)
    loss = float((P * C).sum())
    fbar = (P * C).sum(1) / eps
    gbar = (P * C).sum(0) / eps
    abar = np.zeros_like(a)
    n = len(fs)
    for k in range(n, 0, -1):
        X = (fs[k - 1][:, None] - C) / eps
        Q = np.exp(X - logsumexp(X, axis=0, keepdims=True))
        fbar = fbar - Q @ gbar
        abar = abar + eps * fbar
        Y = (gs[k - 1][None, :] - C) / eps
        Pk = np.exp(Y - logsumexp(Y, axis=1, keepdims=True))
        gbar = -(Pk.T @ fbar)
        fbar = np.zeros_like(fbar)
    return loss, abar


def transport_cost_unrolled_value(a, log_b, C, eps, n_iter=60, n_grad=8, frozen=None):
    """Value only; with ``frozen=(g0)`` the warm phase is replaced by a fixed g0 (for FD tests)."""
    n_warm = max(0, n_iter - n_grad)
    if frozen is None:
        _, g, _ = sinkhorn_log_naive(a, log_b, C, eps, n_warm)
    else:
        g = frozen
    f, g, _ = sinkhorn_log_naive(a, log_b, C, eps, n_iter - n_warm, g=g)
    return float((plan_naive(f, g, C, eps) * C).sum())


def warm_g_naive(a, log_b, C, eps, n_iter=60, n_grad=8):
    _, g, _ = sinkhorn_log_naive(a, log_b, C, eps, max(0, n_iter - n_grad))
    return g


def converged_plan_naive(log_a, log_b, C, eps, n_iter=5000):
    f, g, _ = sinkhorn_log_naive(log_a, log_b, C, eps, n_iter)
    return f, g, plan_naive(f, g, C, eps)


def jko_naive(
    p0,
    E,
    C,
    K,
    *,
    h,
    lam,
    rho,
    eps,
    T,
    inner,
    mode="wasserstein",
    alpha=0.5,
    lr=0.1,
    n_iter=60,
    n_grad=8,
    dtype=np.float64,
    order="fused",
):
    """The published JKO loop, gradient via the truncated unroll. Returns (p_T, losses).

    ``dtype=np.float32`` emulates the published float32 solver. ``order`` picks one of two
    algebraically identical evaluations of the energy gradient, to expose how much float32
    rounding alone moves p_T: "fused" = p*(E + lam*(a+1) + rho/2*(K+K^T)p + ...), "autograd" =
    the reverse-mode order of the published loss, (dL/dp)*p + lam*p with dL/dp = E + lam*a +
    rho/2*(Kp + K^T p) (+ the prox parts). In float64 the two agree to ~1e-15.
    """
    dt = dtype
    E = np.asarray(E, dt)
    C = np.asarray(C, dt)
    K = np.asarray(K, dt)
    lam, rho, eps, lr = dt(lam), dt(rho), dt(eps), dt(lr)
    b2, adam_eps = dt(0.999), dt(1e-8)
    half, one = dt(0.5), dt(1.0)
    p = np.asarray(p0, dt)
    losses = []
    for _ in range(T):
        q = p
        b = np.log(np.maximum(q, dt(1e-30)))
        theta = b.copy()
        m = np.zeros_like(theta)
        v = np.zeros_like(theta)
        for s in range(1, inner + 1):
            a = theta - logsumexp(theta)
            pp = np.exp(a)
            Kp, KTp = K @ pp, K.T @ pp
            L = pp @ E + lam * (pp @ a) + half * rho * (pp @ Kp)
            dLdp = E + lam * a + half * rho * (Kp + KTp)  # "autograd" order: w.r.t. p, then * p
            extra = lam * one  # the d/da of lam*<p, a> (times p below)
            prox_a = np.zeros_like(a)  # prox gradient w.r.t. a (W part)
            if mode in ("wasserstein", "bregman"):
                al = 1.0 if mode == "wasserstein" else min(max(alpha, 0.0), 1.0)
                if al > 0:
                    w, ga = transport_cost_unrolled_naive(a, b, C, eps, n_iter, n_grad, dtype=dt)
                    L += dt(al / (2 * h)) * w
                    prox_a = dt(al / (2 * h)) * ga
                if mode == "bregman":
                    wk = dt((1 - al) / (2 * h))
                    L += wk * (pp @ (a - b))
                    dLdp = dLdp + wk * (a - b)
                    extra = extra + wk
            elif mode == "kl":
                wk = dt(1 / (2 * h))
                L += wk * (pp @ (a - b))
                dLdp = dLdp + wk * (a - b)
                extra = extra + wk
            if order == "autograd":
                gh = dLdp * pp + extra * pp + prox_a
            else:
                gh = pp * (dLdp + extra) + prox_a
            losses.append(L)
            gt = gh - pp * gh.sum()
            # torch.optim.Adam's arithmetic: scalar factors in Python double, cast once
            m = m + dt(1 - 0.9) * (gt - m)  # exp_avg.lerp_(grad, 1 - beta1)
            v = v * b2 + dt(1 - 0.999) * (gt * gt)
            step = dt(float(lr) / (1 - 0.9**s))
            denom = np.sqrt(v) / dt(np.sqrt(1 - 0.999**s)) + adam_eps
            theta = (theta - step * (m / denom)).astype(dt)
        p = np.exp(theta - logsumexp(theta))
    return p.astype(np.float64), np.array(losses, np.float64)


def dual_readout_naive(p_T, C, eps, n_iter=60, dtype=np.float64):
    """run_jko_with_duals' read-out: cold Sinkhorn from log max(p_T, 1e-30) to uniform."""
    M = len(p_T)
    la = np.log(np.maximum(np.asarray(p_T, dtype), dtype(1e-30)))
    lb = np.full(M, -np.log(M), dtype)
    f, g, _ = sinkhorn_log_naive(la, lb, C, eps, n_iter, dtype=dtype)
    return f.astype(np.float64), g.astype(np.float64)


def geometry_dense_naive(Z):
    Z = np.asarray(Z, np.float64)
    S = np.clip(Z @ Z.T, -1, 1)
    return (1 - S) ** 2, np.maximum(S, 0)


def geometry_csr_naive(X):
    """Sparse cosine (rows normalised here) -> C, K."""
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, np.float64)
    n = np.linalg.norm(X, axis=1)
    n[n == 0] = 1.0
    Y = X / n[:, None]
    S = np.clip(Y @ Y.T, -1, 1)
    return (1 - S) ** 2, np.maximum(S, 0)


def geometry_csr_merge_naive(X):
    """Sparse cosine by a plain merge join of sorted rows (float64 sums in ascending column order) -> C, K."""
    X = X.tocsr()
    X.sort_indices()
    m = X.shape[0]
    rows = [
        dict(zip(X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(), X.data[X.indptr[i] : X.indptr[i + 1]].tolist()))
        for i in range(m)
    ]

    def dot(a, b):
        s = 0.0
        for c in sorted(set(a) & set(b)):
            s += float(a[c]) * float(b[c])
        return s

    nrm = [dot(r, r) ** 0.5 or np.inf for r in rows]
    S = np.empty((m, m))
    for i in range(m):
        for j in range(i, m):
            S[i, j] = S[j, i] = dot(rows[i], rows[j]) / (nrm[i] * nrm[j])
    S = np.clip(S, -1, 1)
    return (1 - S) ** 2, np.maximum(S, 0)


def fixture_inputs(z, q, tau0):
    """Rebuild (p0, E, C, K) of fixture pool ``q`` as the fixture README says (float32)."""

    def minmax(x):
        x = x.astype(np.float32)
        lo, hi = x.min(), x.max()
        if hi - lo < 1e-9:
            return np.zeros_like(x)
        return (x - lo) / (hi - lo)

    Z = z["pool_emb_f16"][q].astype(np.float32)
    S = np.clip(Z @ Z.T, -1, 1)
    C = ((1 - S) ** 2).astype(np.float32)
    K = np.maximum(S, 0).astype(np.float32)
    r = (np.float32(0.4) * minmax(z["dense_pool"][q]) + np.float32(0.6) * minmax(z["bm25_pool"][q])).astype(np.float32)
    E = -r
    x = r / max(tau0, 1e-9)
    e = np.exp(x - x.max())
    p0 = (e / e.sum()).astype(np.float32)
    return p0, E, C, K


def published_loss_frozen(log_a, log_b, C, eps, f0, g0, n_track):
    """The published loss as a function of (log_a, log_b, C) with the warm duals frozen at ``(f0, g0)``.

    ``n_track`` tracked pairs from ``g0`` (the row update reads only g; ``f0`` is the final f when
    ``n_track = 0``), then ``<Pi, C>``: the function whose derivatives the published autograd returns
    (for central finite differences).
    """
    f, g, _ = sinkhorn_log_naive(log_a, log_b, C, eps, n_track, f=f0, g=g0)
    return float((plan_naive(f, g, np.asarray(C, np.float64), eps) * C).sum())


def published_loss_grad_naive(log_a, log_b, C, eps, n_iter=60, n_iter_grad=3):
    """The published ``log_sinkhorn_loss`` and its truncated gradients, plain float64 reverse mode.

    ``max(0, n_iter - n_iter_grad)`` detached warm pairs from zero duals, then ``n_iter_grad`` tracked
    pairs (so ``n_iter_grad > n_iter`` runs ``n_iter_grad`` pairs), then ``L = sum Pi * C``.  Returns
    ``(loss, dL/dlog_a, dL/dlog_b, dL/dC)``, each step written out with dense softmax matrices.
    """
    C = np.asarray(C, np.float64)
    log_a = np.asarray(log_a, np.float64)
    log_b = np.asarray(log_b, np.float64)
    n_warm = max(0, n_iter - n_iter_grad)
    _, g, _ = sinkhorn_log_naive(log_a, log_b, C, eps, n_warm)
    fs, gs = [], [g]
    for _ in range(n_iter_grad):
        f = eps * (log_a - logsumexp((gs[-1][None, :] - C) / eps, axis=1))
        g = eps * (log_b - logsumexp((f[:, None] - C) / eps, axis=0))
        fs.append(f)
        gs.append(g)
    if not fs:  # no tracked pair: the warm f is a constant too
        fs.append(sinkhorn_log_naive(log_a, log_b, C, eps, n_warm)[0])
    P = plan_naive(fs[-1], gs[-1], C, eps)
    loss = float((P * C).sum())
    fbar = (P * C).sum(1) / eps
    gbar = (P * C).sum(0) / eps
    Cbar = P - P * C / eps
    abar = np.zeros_like(log_a)
    bbar = np.zeros_like(log_b)
    with np.errstate(invalid="ignore"):
        for k in range(n_iter_grad, 0, -1):
            # g_k = eps (log_b - LSE_i((f_k - C)/eps)): column softmax Q
            X = (fs[k - 1][:, None] - C) / eps
            Q = np.nan_to_num(np.exp(X - logsumexp(X, axis=0, keepdims=True)))
            bbar += eps * gbar
            fbar = (fbar if k == n_iter_grad else 0.0) - Q @ gbar
            Cbar += Q * gbar[None, :]
            # f_k = eps (log_a - LSE_j((g_{k-1} - C)/eps)): row softmax P
            Y = (gs[k - 1][None, :] - C) / eps
            Pk = np.nan_to_num(np.exp(Y - logsumexp(Y, axis=1, keepdims=True)))
            abar += eps * fbar
            Cbar += Pk * fbar[:, None]
            gbar = -(Pk.T @ fbar)
    return loss, abar, bbar, Cbar
