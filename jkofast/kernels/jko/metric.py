"""NM-JKO metric learning kernels (SPEC A.6.2): InfoNCE value and gradient in W, AdamW, one epoch.

One training query = its embedding ``z_q`` (d,), its pool rows ``Z[lo:hi]`` (M x d) and a gold
mask over the pool. With ``d_j = z_q - z_j`` and ``P_j = W d_j`` (W is r x d):

    s_j  = -||W d_j||^2                                   (every pool row j)
    L(W) = -(1/n_g) Σ_{g ∈ gold} log softmax(s)_g = LSE_j(s_j) - (1/n_g) Σ_g s_g
    c_j  = ∂L/∂s_j = softmax(s)_j - [j ∈ gold]/n_g        (Σ_j c_j = 0)
    ∂s_j/∂W = -2 W d_j d_jᵀ = -2 P_j d_jᵀ
    ∂L/∂W = Σ_j c_j ∂s_j/∂W = -2 Σ_j c_j P_j d_jᵀ         (r x d)

No temperature (the scale is absorbed by ||W||). The log-sum-exp is max-shifted and strict IEEE;
the two matrix products (``P = W Dᵀ`` and the weighted outer-product sum) are pure arithmetic
leaves (``FASTMATH_ARITH``).

Everything here is serial. Training is sequential over queries (each step needs the previous W),
and one step is small (M = 200, d = 384, r = 64: about 10 M multiply-adds, well under 1 ms): a
``prange`` over the rows of W (owner-writes, row k of ``P`` and of the gradient per iteration)
was measured 1.7x slower at 1 thread and 6x slower at 2 threads than serial loops on the 2-core
dev machine (one parallel-region launch per product per step), so the kernels stay serial and
the result is trivially independent of the thread count. Both products are register-blocked
(4 rows of W per pass over the differences; the gradient as dot products against
the column-major ``DT``): 1.6x / 2x less CPU time than the plain loops.

Everything is float64 (the reference trains in float32 with torch; the float64 loss and
gradient are the exact values the float32 ones approximate). The wrapper
(:mod:`jkofast.jko.metric`) coerces and validates; kernels trust their inputs: rows C-contiguous
float64, ``gold`` a bool mask aligned with the flat pool rows, every trained query with at
least one gold row and a non-empty pool.

AdamW follows ``torch.optim.AdamW`` (single-tensor path, ``amsgrad=False``, ``maximize=False``):
decoupled weight decay first (``W <- W·(1 - lr·wd)``), then ``m <- m + (1-β1)(g - m)`` (torch's
``lerp_``), ``v <- β2·v + (1-β2)·g²``, ``W <- W - (lr/(1-β1^t)) · m / (sqrt(v)/sqrt(1-β2^t) + eps)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jkofast import _codes
from jkofast._config import FASTMATH_ARITH
from jkofast._numba import kernel

__all__ = [
    "InfoNCEWork",
    "adamw_step",
    "infonce_grad",
    "infonce_losses",
    "infonce_scores_grad",
    "infonce_work",
    "pool_differences",
    "project_rows",
    "train_epoch",
    "weighted_outer_grad",
]

_ARITH = set(FASTMATH_ARITH)


class InfoNCEWork(NamedTuple):
    """Scratch of one InfoNCE evaluation (pools of up to ``mmax`` rows; :func:`infonce_work`).

    ``D`` (mmax, d) and ``DT`` (d, mmax): the differences ``d_j = z_q - z_j`` row- and column-major;
    ``P`` (r, mmax): ``W d_j`` as columns; ``B`` (r, mmax): ``-2 c_j (W d_j)``; ``s``, ``c`` (mmax,):
    scores and ``∂L/∂s``; ``G`` (r, d): the gradient.
    """

    D: np.ndarray
    DT: np.ndarray
    P: np.ndarray
    B: np.ndarray
    s: np.ndarray
    c: np.ndarray
    G: np.ndarray


@kernel()
def infonce_work(r, d, mmax):
    """Allocate an :class:`InfoNCEWork` for W of shape (r, d) and pools of up to ``mmax`` rows."""
    return InfoNCEWork(
        np.empty((mmax, d)),
        np.empty((d, mmax)),
        np.empty((r, mmax)),
        np.empty((r, mmax)),
        np.empty(mmax),
        np.empty(mmax),
        np.empty((r, d)),
    )


@kernel(fastmath=_ARITH)
def pool_differences(zq, Z, lo, hi, D, DT):
    """Write ``D[j] = DT[:, j] = zq - Z[lo + j]`` for ``j < hi - lo`` (rows float64)."""
    d = zq.shape[0]
    for j in range(hi - lo):
        for t in range(d):
            x = zq[t] - Z[lo + j, t]
            D[j, t] = x
            DT[t, j] = x


@kernel(fastmath=_ARITH)
def project_rows(W, D, m, P):
    """Write ``P[k, j] = W[k] · D[j]`` (k < r, j < m): the projected differences ``W d_j`` as columns.

    Four rows of W share one pass over ``D`` (each ``D[j]`` is read once per block of four; the
    remainder rows one by one).
    """
    r, d = W.shape
    k0 = 0
    while k0 + 4 <= r:
        for j in range(m):
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            for t in range(d):
                x = D[j, t]
                a0 += W[k0, t] * x
                a1 += W[k0 + 1, t] * x
                a2 += W[k0 + 2, t] * x
                a3 += W[k0 + 3, t] * x
            P[k0, j] = a0
            P[k0 + 1, j] = a1
            P[k0 + 2, j] = a2
            P[k0 + 3, j] = a3
        k0 += 4
    for k in range(k0, r):
        for j in range(m):
            acc = 0.0
            for t in range(d):
                acc += W[k, t] * D[j, t]
            P[k, j] = acc


@kernel(fastmath=_ARITH)
def weighted_outer_grad(P, c, DT, m, B, G):
    """Write ``G[k, t] = Σ_{j<m} B[k, j] DT[t, j]`` with ``B[k, j] = -2 c_j P[k, j]``: the InfoNCE gradient in W.

    (``G = -2 Σ_j c_j P_j d_jᵀ``, computed as dot products over j against the column-major
    differences ``DT``; four rows of B share one pass over ``DT``.)
    """
    r, d = G.shape
    for k in range(r):
        for j in range(m):
            B[k, j] = -2.0 * c[j] * P[k, j]
    k0 = 0
    while k0 + 4 <= r:
        for t in range(d):
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            for j in range(m):
                x = DT[t, j]
                a0 += B[k0, j] * x
                a1 += B[k0 + 1, j] * x
                a2 += B[k0 + 2, j] * x
                a3 += B[k0 + 3, j] * x
            G[k0, t] = a0
            G[k0 + 1, t] = a1
            G[k0 + 2, t] = a2
            G[k0 + 3, t] = a3
        k0 += 4
    for k in range(k0, r):
        for t in range(d):
            acc = 0.0
            for j in range(m):
                acc += B[k, j] * DT[t, j]
            G[k, t] = acc


@kernel()
def infonce_scores_grad(P, m, gold, lo, s, c):
    """InfoNCE from the projected differences: ``s``, ``c = ∂L/∂s`` and the loss (strict IEEE).

    Parameters
    ----------
    P : float64 (r, >= m)
        ``P[:, j] = W d_j``.
    m : int
        Pool size.
    gold : bool (n_total,)
        Gold mask of the flat pool rows; this pool is ``gold[lo:lo+m]``.
    lo : int
        Flat offset of the pool.
    s, c : float64 (>= m,)
        Written: scores ``s_j = -||P[:, j]||²`` and ``c_j = softmax(s)_j - [j gold]/n_gold``.

    Returns
    -------
    loss : float
        ``LSE(s) - mean_{gold} s`` (NaN when the status is not OK).
    status : int
        ``OK``; ``EMPTY`` (no row or no gold row); ``NON_FINITE`` (a score or the loss is not finite).
    """
    r = P.shape[0]
    n_gold = 0
    for j in range(m):
        acc = 0.0
        for k in range(r):
            acc += P[k, j] * P[k, j]
        s[j] = -acc
        if gold[lo + j]:
            n_gold += 1
    if m == 0 or n_gold == 0:
        return np.nan, _codes.EMPTY
    smax = s[0]
    for j in range(1, m):
        if s[j] > smax:
            smax = s[j]
    if not np.isfinite(smax):
        return np.nan, _codes.NON_FINITE
    tot = 0.0
    for j in range(m):
        tot += np.exp(s[j] - smax)
    lse = smax + np.log(tot)
    gsum = 0.0
    inv_g = 1.0 / n_gold
    for j in range(m):
        c[j] = np.exp(s[j] - lse)
        if gold[lo + j]:
            gsum += s[j]
            c[j] -= inv_g
    loss = lse - gsum * inv_g
    if not np.isfinite(loss):
        return np.nan, _codes.NON_FINITE
    return loss, _codes.OK


@kernel()
def infonce_grad(W, zq, Z, lo, hi, gold, want_grad, work):
    """InfoNCE loss of one query and (``want_grad``) its gradient in W, written into ``work.G`` (r x d).

    Parameters
    ----------
    W : float64 (r, d)
    zq : float64 (d,)
        Query embedding.
    Z : float64 (n_total, d)
        Flat pool rows; this query's pool is ``Z[lo:hi]``.
    lo, hi : int
    gold : bool (n_total,)
        Gold mask of the flat pool rows.
    want_grad : bool
        False: only the loss (``work.G`` untouched).
    work : InfoNCEWork
        Scratch for pools of at least ``hi - lo`` rows; holds ``d_j``, ``W d_j``, ``s``, ``c``
        (and ``G``) after the call.

    Returns
    -------
    loss : float
    status : int
        As :func:`infonce_scores_grad`.
    """
    m = hi - lo
    pool_differences(zq, Z, lo, hi, work.D, work.DT)
    project_rows(W, work.D, m, work.P)
    loss, status = infonce_scores_grad(work.P, m, gold, lo, work.s, work.c)
    if want_grad and status == _codes.OK:
        weighted_outer_grad(work.P, work.c, work.DT, m, work.B, work.G)
    return loss, status


@kernel()
def adamw_step(W, G, exp_avg, exp_avg_sq, step, lr, weight_decay, beta1, beta2, eps):
    """One ``torch.optim.AdamW`` step in place on ``W`` (r x d) with gradient ``G``; ``step`` = t >= 1.

    ``exp_avg`` / ``exp_avg_sq`` (r x d) are the first / second moments, updated in place.
    """
    r, d = W.shape
    decay = 1.0 - lr * weight_decay
    bias1 = 1.0 - beta1**step
    bias2_sqrt = np.sqrt(1.0 - beta2**step)
    step_size = lr / bias1
    for k in range(r):
        for t in range(d):
            g = G[k, t]
            w = W[k, t] * decay
            m = exp_avg[k, t] + (1.0 - beta1) * (g - exp_avg[k, t])
            v = exp_avg_sq[k, t] * beta2 + (1.0 - beta2) * g * g
            exp_avg[k, t] = m
            exp_avg_sq[k, t] = v
            W[k, t] = w - step_size * (m / (np.sqrt(v) / bias2_sqrt + eps))


@kernel()
def _max_pool(offsets):
    mmax = 0
    for q in range(offsets.shape[0] - 1):
        if offsets[q + 1] - offsets[q] > mmax:
            mmax = offsets[q + 1] - offsets[q]
    return mmax


@kernel()
def train_epoch(W, exp_avg, exp_avg_sq, step0, Q, Z, offsets, gold, order, hp, losses):
    """One epoch of NM-JKO training: for each query of ``order``, InfoNCE gradient then one AdamW step.

    Batch = one query, one optimiser step per query, serial over ``order`` (each step needs the
    previous W).

    Parameters
    ----------
    W, exp_avg, exp_avg_sq : float64 (r, d)
        Parameters and AdamW moments, updated in place.
    step0 : int
        AdamW steps taken before this epoch (step t of the i-th query here is ``step0 + i + 1``).
    Q : float64 (n_queries, d)
        Query embeddings.
    Z : float64 (n_total, d)
        Flat pool rows.
    offsets : int64 (n_queries + 1,)
    gold : bool (n_total,)
    order : int64 (n_steps,)
        Query indices in training order (each with a non-empty pool and >= 1 gold row).
    hp : float64 (5,)
        ``lr, weight_decay, beta1, beta2, eps``.
    losses : float64 (n_steps,)
        Written: the loss of each step, evaluated before its update.

    Returns
    -------
    n_done : int
        Steps completed.
    status : int
        ``OK``; else the first step's non-OK InfoNCE status (training stops there, W holds the
        last good update).
    """
    r, d = W.shape
    work = infonce_work(r, d, _max_pool(offsets))
    for i in range(order.shape[0]):
        q = order[i]
        loss, status = infonce_grad(W, Q[q], Z, offsets[q], offsets[q + 1], gold, True, work)
        if status != _codes.OK:
            return i, status
        losses[i] = loss
        adamw_step(W, work.G, exp_avg, exp_avg_sq, step0 + i + 1, hp[0], hp[1], hp[2], hp[3], hp[4])
    return order.shape[0], _codes.OK


@kernel()
def infonce_losses(W, Q, Z, offsets, gold, queries, out):
    """Write ``out[i]`` = the InfoNCE loss of query ``queries[i]`` at ``W`` (no update); return the status.

    Same layouts as :func:`train_epoch`. Returns ``OK`` or the first non-OK status (its ``out`` entry is NaN).
    """
    r, d = W.shape
    work = infonce_work(r, d, _max_pool(offsets))
    first = _codes.OK
    for i in range(queries.shape[0]):
        q = queries[i]
        loss, status = infonce_grad(W, Q[q], Z, offsets[q], offsets[q + 1], gold, False, work)
        out[i] = loss
        if status != _codes.OK and first == _codes.OK:
            first = status
    return first
