"""Naive oracles for the stability / distractor evaluators (SPEC A.7.5, A.7.6, Appendix 2).

Written from the SPEC text line by line, dict- and loop-based, no shared code with jkofast.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

STOP = {"the", "a", "an", "of", "to", "in", "on", "at", "for", "with", "by", "from"}
HEDGES = [" in some cases.", " under certain conditions.", " according to studies."]


def wc_published_naive(p_ids, p, q_ids, q, emb, eps=0.1, n_iter=80, floor=1e-8, dtype=np.float32):
    """SPEC A.7.5 W_C: union lifting, +floor and renormalise, Sinkhorn (zero init, row then column), <Pi, C>.

    ``dtype=np.float32`` runs every step in float32 (the published precision).
    """
    U = sorted(set(int(i) for i in p_ids) | set(int(i) for i in q_ids))
    pos = {u: i for i, u in enumerate(U)}
    P = np.zeros(len(U), dtype)
    Q = np.zeros(len(U), dtype)
    for i, m in zip(p_ids, p, strict=True):
        P[pos[int(i)]] += dtype(m)
    for i, m in zip(q_ids, q, strict=True):
        Q[pos[int(i)]] += dtype(m)
    P = P + dtype(floor)
    P = P / P.sum()
    Q = Q + dtype(floor)
    Q = Q / Q.sum()
    Z = np.asarray(emb, dtype)[U]
    S = np.clip(Z @ Z.T, -1, 1)
    C = ((1 - S) ** 2).astype(dtype)
    eps = dtype(eps)
    a = np.log(P)
    b = np.log(Q)
    f = np.zeros(len(U), dtype)
    g = np.zeros(len(U), dtype)
    for _ in range(n_iter):
        f = (eps * (a - logsumexp(-C / eps + g[None, :] / eps, axis=1))).astype(dtype)
        g = (eps * (b - logsumexp(-C / eps + f[:, None] / eps, axis=0))).astype(dtype)
    Pi = np.exp((f[:, None] + g[None, :] - C) / eps)
    return float(np.sum(Pi * C))


def leakage_naive(top_ids, injected_ids, k=10):
    """SPEC A.7.6: (# top-k ids in the injected set) / k, duplicates counted each time."""
    s = set(injected_ids)
    return sum(1 for d in list(top_ids)[:k] if d in s) / k


def drop_stop_naive(query, draw):
    """SPEC A.7.5 drop_stop with the draw ``draw(n)`` (index among the n candidates)."""
    toks = query.split()
    idxs = [i for i, t in enumerate(toks) if t.lower().strip(".,?!") in STOP]
    if not idxs:
        return query
    j = idxs[draw(len(idxs))]
    return " ".join(t for i, t in enumerate(toks) if i != j)


def hedge_naive(query):
    """SPEC A.7.5 hedge with the seed-0 draw 2 (Appendix 2)."""
    return query.rstrip(".") + HEDGES[2]


def lower_nop_naive(query):
    """SPEC A.7.5 lower_nop: drop . ? ! (commas kept), lower-case."""
    return "".join(c for c in query if c not in ".?!").lower()


def ndcg_exp_naive(top_ids, qrels, k=10):
    """Exponential-gain nDCG@k over a list that may repeat ids (SPEC A.7.1)."""
    dcg = sum((2 ** qrels.get(d, 0) - 1) / np.log2(i + 2) for i, d in enumerate(list(top_ids)[:k]))
    ideal = sorted(qrels.values(), reverse=True)[:k]
    idcg = sum((2**lab - 1) / np.log2(i + 2) for i, lab in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0
