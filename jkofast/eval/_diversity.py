"""Diversity@k of a ranked run (SPEC A.7.1) for :func:`jkofast.eval.metrics.evaluate`.

Diversity is no label metric: it is read from document embeddings, in Python, over the ranking
the label kernel uses (list order for ``tie_break="given"``, trec_eval's order otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from jkofast.kernels.eval import metrics as _k

__all__ = ["check_diversity", "diversity", "embedding_lookup", "ranked_ids"]


def embedding_lookup(embeddings) -> tuple[dict, np.ndarray]:
    """Return ``(doc_id -> row, matrix)`` from ``(doc_ids, matrix)`` or ``{doc_id: vector}`` (validated)."""
    if isinstance(embeddings, Mapping):
        ids = [str(k) for k in embeddings]
        Z = np.array([np.asarray(v, np.float64).ravel() for v in embeddings.values()]) if ids else np.zeros((0, 0))
    elif isinstance(embeddings, tuple) and len(embeddings) == 2:
        ids = [str(d) for d in embeddings[0]]
        Z = np.asarray(embeddings[1])
    else:
        raise TypeError("embeddings must be (doc_ids, matrix) or {doc_id: vector}")
    if Z.ndim != 2 or Z.shape[0] != len(ids):
        raise ValueError(f"embeddings: the matrix must have one row per doc id ({len(ids)}), got shape {Z.shape}")
    if Z.dtype.kind not in "fiu" or not np.isfinite(Z).all():
        raise ValueError("embeddings must be finite real numbers")
    return {d: i for i, d in enumerate(ids)}, Z


def check_diversity(wanted: bool, embeddings):
    """Return the embedding lookup when a diversity metric is asked (None otherwise)."""
    if not wanted:
        return None
    if embeddings is None:
        raise ValueError("diversity@k needs embeddings=(doc_ids, matrix) or {doc_id: vector}")
    return embedding_lookup(embeddings)


def ranked_ids(ids, scores, tie_mode: int) -> list:
    """Return the ranking the label kernel uses: list order (``given``) or trec_eval's (score desc, id desc)."""
    ids = [str(d) for d in ids]
    if tie_mode == _k.TIE_GIVEN:
        return ids
    last = {d: i for i, d in enumerate(ids)}  # a repeated doc keeps its last score
    by_id = sorted(last, reverse=True)
    return sorted(by_id, key=lambda d: -float(np.float32(scores[last[d]])))  # stable: ties keep id desc


def diversity(roff, run_ids, scores, k: int, tie_mode: int, lookup) -> np.ndarray:
    """Per-query Diversity@k of the ranked run (SPEC A.7.1): mean pairwise ``1 − z_iᵀz_j`` of the top k."""
    rows, Z = lookup
    out = np.zeros(roff.shape[0] - 1)
    for q in range(out.shape[0]):
        top = ranked_ids(run_ids[roff[q] : roff[q + 1]], scores[roff[q] : roff[q + 1]], tie_mode)[:k]
        if len(top) < 2:
            continue
        missing = [d for d in top if d not in rows]
        if missing:
            raise ValueError(f"diversity@{k}: no embedding for ranked document {missing[0]!r}")
        Zq = np.asarray(Z[[rows[d] for d in top]], np.float64)
        out[q] = float((1.0 - Zq @ Zq.T)[np.triu_indices(len(top), 1)].mean())
    return out
