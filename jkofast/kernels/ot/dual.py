"""Entropic-OT dual read-outs: centred potentials -> ∂/∂a, ∂/∂b; plan -> ∂/∂C.

POT convention (``ot.sinkhorn2`` gradients): the gradient of ``OT_ε(a, b)`` w.r.t. the
weights is the dual potential, defined up to an additive constant, returned **centred**
(mean over the support removed); w.r.t. the cost it is the plan Π.
"""

from __future__ import annotations

import numpy as np

from jkofast._numba import kernel

__all__ = ["centred_potential", "entropic_value"]


@kernel()
def centred_potential(f, out):
    """``out = f - mean(f over finite entries)``; -inf entries (zero mass) -> 0."""
    s = 0.0
    n = 0
    for i in range(f.shape[0]):
        if np.isfinite(f[i]):
            s += f[i]
            n += 1
    mu = s / n if n > 0 else 0.0
    for i in range(f.shape[0]):
        out[i] = f[i] - mu if np.isfinite(f[i]) else 0.0


@kernel()
def entropic_value(C, f, g, eps, P):
    """Fill the plan ``P`` and return ``(<P,C> + ε Σ P(log P - 1), <P, C>)`` (strict IEEE)."""
    m, n = C.shape
    inv = 1.0 / eps
    val = 0.0
    cost = 0.0
    for i in range(m):
        for j in range(n):
            if f[i] == -np.inf or g[j] == -np.inf:
                P[i, j] = 0.0
                continue
            x = (f[i] + g[j] - C[i, j]) * inv
            pij = np.exp(x)
            P[i, j] = pij
            cost += pij * C[i, j]
            val += pij * C[i, j] + eps * pij * (x - 1.0)
    return val, cost
