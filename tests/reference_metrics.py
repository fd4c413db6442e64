"""Naive oracles for ranking metrics and bootstrap CIs (plain Python / NumPy)."""

from __future__ import annotations

import math

import numpy as np


def trec_eval_order(run_q: dict) -> list:
    """trec_eval's ranking of one query: float32 score desc, then doc id desc (strcmp)."""
    items = [(float(np.float32(s)), d) for d, s in run_q.items()]
    items.sort(key=lambda t: (t[0], t[1].encode("utf-8")), reverse=True)
    return [d for _, d in items]


def _dcg(gains) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def metric_one(ranked: list, qrels_q: dict, kind: str, k: int, *, gain: str = "linear", clamp: bool = True) -> float:
    """One metric of one ranked list (doc ids, duplicates allowed) by the formulas.

    ``kind`` in ndcg/recall/p/mrr/map/hit; ``k = 0`` = whole list.  ``clamp``: negative labels
    give gain 0 (trec_eval); otherwise literal gains (SPEC A.7.1).
    """
    top = ranked if k == 0 else ranked[:k]
    labels = [qrels_q.get(d, 0) for d in top]
    num_rel = sum(1 for v in qrels_q.values() if v > 0)

    def g(x):
        if clamp and x < 0:
            return 0.0
        return (2.0**x - 1.0) if gain == "exponential" else float(x)

    if kind == "ndcg":
        ideal = sorted(qrels_q.values(), reverse=True)
        if k:
            ideal = ideal[:k]
        idcg = _dcg([g(x) for x in ideal])
        return _dcg([g(x) for x in labels]) / idcg if idcg > 0 else 0.0
    if kind == "recall":
        return sum(1 for x in labels if x > 0) / num_rel if num_rel else 0.0
    if kind == "p":
        denom = k if k else len(ranked)
        return sum(1 for x in labels if x > 0) / denom if denom else 0.0
    if kind == "mrr":
        for i, x in enumerate(labels):
            if x > 0:
                return 1.0 / (i + 1)
        return 0.0
    if kind == "hit":
        return 1.0 if any(x > 0 for x in labels) else 0.0
    if kind == "map":
        if not num_rel:
            return 0.0
        hits, acc = 0, 0.0
        for i, x in enumerate(labels):
            if x > 0:
                hits += 1
                acc += hits / (i + 1)
        return acc / num_rel
    raise ValueError(kind)


def split_metric(name: str) -> tuple[str, int]:
    """'ndcg@10' -> ('ndcg', 10); 'map' -> ('map', 0)."""
    if "@" in name:
        a, b = name.split("@")
        return a, int(b)
    return name, 0


def trec_eval_metrics(run: dict, qrels: dict, metrics) -> dict:
    """{metric: {qid: value}} with trec_eval conventions (queries in both run and qrels)."""
    out = {m: {} for m in metrics}
    for q in run:
        if not qrels.get(q):
            continue
        ranked = trec_eval_order(run[q])
        for m in metrics:
            kind, k = split_metric(m)
            out[m][q] = metric_one(ranked, qrels[q], kind, k)
    return out


def jko_metrics(ranked: dict, qrels: dict, metrics, gain: str = "exponential") -> dict:
    """Published JKO-RAG evaluator: ``ranked`` = {qid: [doc ids in order]} (duplicates
    counted), literal gains, IDCG over the k largest qrels labels."""
    out = {m: {} for m in metrics}
    for q, lst in ranked.items():
        if q not in qrels:
            continue
        for m in metrics:
            kind, k = split_metric(m)
            out[m][q] = metric_one(list(lst), qrels[q], kind, k, gain=gain, clamp=False)
    return out


def bootstrap_ci_loop(x, n_boot=2000, alpha=0.05, seed=0):
    """SPEC A.7.2 literally: one ``rng.integers(0, n, n)`` per replicate."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        means.append(float(np.mean(x[idx])))
    lo, hi = np.quantile(np.array(means), [alpha / 2, 1 - alpha / 2])
    return float(np.mean(x)), float(lo), float(hi)


PYTREC_NAMES = {"ndcg": "ndcg_cut", "recall": "recall", "p": "P", "map": "map_cut"}


def pytrec_measure(name: str) -> tuple[str, str]:
    """jkofast metric name -> (pytrec_eval measure to request, result key)."""
    kind, k = split_metric(name)
    if k == 0:
        key = {"ndcg": "ndcg", "map": "map", "mrr": "recip_rank"}[kind]
        return key, key
    if kind == "mrr":
        raise ValueError("mrr@k has no trec_eval measure; truncate the run instead")
    base = PYTREC_NAMES[kind]
    return f"{base}.{k}", f"{base}_{k}"


def diversity_one(ranked: list, emb: dict, k: int) -> float:
    """Diversity@k of one ranked list: mean over pairs i < j of ``1 - z_i . z_j`` (0 below two docs)."""
    top = ranked[:k]
    pairs = [(i, j) for i in range(len(top)) for j in range(i + 1, len(top))]
    if not pairs:
        return 0.0
    return sum(1.0 - float(np.dot(emb[top[i]], emb[top[j]])) for i, j in pairs) / len(pairs)
