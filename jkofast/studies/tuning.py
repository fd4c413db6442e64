"""The published hyper-parameter search (SPEC A.7.9) and its train-query protocol.

* Sampler: Python ``random.Random(42)``; each configuration draws ``choice`` over the lists
  of :data:`SEARCH_SPACE` in the listed order (h, λ, ρ, ε, T, inner, τ0, α, γ).  The first
  25 draws reproduce the 25 logged SciFact configurations (SPEC Appendix 1; tested).
* Train queries: the keys of ``qrels["train"]`` present in the queries, shuffled with
  ``random.Random(0)``, first ``n`` (SciFact 80).
* Score: mean nDCG@10 of the top-10 by ``p_T`` with the configuration's own (α, γ); a
  configuration with α = γ = 0 scores 0 without running.  Best = the first configuration
  with the strictly highest score.  Mode is always ``wasserstein``.
"""

from __future__ import annotations

import dataclasses
import random
import time

import numpy as np

from jkofast._validation import check_int
from jkofast.jko.energy import energy_and_p0
from jkofast.jko.solver import operating_point, rerank_batch
from jkofast.studies.readout import evaluate_topk, readout_topk

__all__ = ["SEARCH_SPACE", "sample_configs", "select_best", "train_queries", "tune"]

SEARCH_SPACE: tuple[tuple[str, tuple], ...] = (
    ("h", (0.1, 0.2, 0.5, 1.0, 2.0)),
    ("lam", (0.005, 0.01, 0.03, 0.05, 0.1)),
    ("rho", (0, 0.01, 0.05, 0.1, 0.2)),
    ("sinkhorn_eps", (0.05, 0.1, 0.2)),
    ("T", (1, 2, 3, 5)),
    ("inner_steps", (15, 25, 40)),
    ("tau0", (0.05, 0.1, 0.3, 1.0)),
    ("alpha", (0, 0.2, 0.4, 0.7, 1.0)),
    ("gamma", (0, 0.3, 0.6, 1.0)),
)


def sample_configs(n: int = 25, seed: int = 42) -> list[dict]:
    """Return the first ``n`` configurations of the published stream.

    Examples
    --------
    >>> c = sample_configs(12)[11]
    >>> tuple(c[k] for k, _ in SEARCH_SPACE)
    (2.0, 0.1, 0.05, 0.2, 5, 40, 1.0, 0.4, 0.3)
    """
    n = check_int(n, "n", min_value=0)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        out.append({name: rng.choice(values) for name, values in SEARCH_SPACE})
    return out


def train_queries(qrels_train: dict, known_query_ids, n: int = 80, seed: int = 0) -> list[str]:
    """Return the train query ids of the published protocol.

    The keys of ``qrels_train`` present in ``known_query_ids`` (dict order), shuffled with
    ``random.Random(seed)``, first ``n``.
    """
    n = check_int(n, "n", min_value=0)  # a negative n would slice off the last queries instead
    known = set(known_query_ids)
    qids = [q for q in qrels_train if q in known]
    random.Random(seed).shuffle(qids)
    return qids[:n]


def select_best(scores) -> int:
    """Index of the first configuration with the strictly highest score.

    Raises ``ValueError`` for no scores or a NaN score (it would never be selected, silently).
    """
    scores = [float(s) for s in scores]
    if not scores:
        raise ValueError("scores must not be empty")
    if any(s != s for s in scores):
        raise ValueError(f"scores contains NaN (at index {next(i for i, s in enumerate(scores) if s != s)})")
    best, best_s = 0, -np.inf
    for i, s in enumerate(scores):
        if s > best_s:
            best, best_s = i, s
    return best


def tune(
    pools,
    rerank,
    qrels: dict,
    doc_ids,
    *,
    embeddings=None,
    csr=None,
    configs=None,
    base="tuned",
    k: int = 10,
    n_threads: int | None = None,
    grad: str | None = None,
    progress=None,
) -> dict:
    """Run the published search on a batch of (train) pools.

    Parameters
    ----------
    pools : jkofast.pools.candidates.Pools
        Train pools (``dense`` may be None: the α term is then absent).
    rerank : float (n_total,)
        The rerank score of every pool entry (the cross-encoder in the paper; any score here).
    qrels : dict qid -> {docid: label}
    doc_ids : list of str, corpus ids by row
    embeddings / csr :
        Geometry rows aligned with the flat pool order (see ``jkofast.jko.solver.rerank_batch``).
    configs : list of dict, default :func:`sample_configs` ``(25)``
    base : str
        Operating point supplying the fields the search does not set.
    grad : str or None
        Override of the config's gradient path (``"unrolled"``/``"implicit"``).

    Returns
    -------
    dict with ``configs``, ``scores`` (mean nDCG@10 per config), ``recall`` (mean R@10),
    ``seconds`` per config, ``best`` (index) and ``best_config``.
    """
    configs = sample_configs(25) if configs is None else configs
    base_cfg = operating_point(base) if isinstance(base, str) else base
    scores, recalls, secs = [], [], []
    for ci, c in enumerate(configs):
        t0 = time.perf_counter()
        if c["alpha"] == 0 and c["gamma"] == 0:
            scores.append(0.0)
            recalls.append(0.0)
            secs.append(0.0)
            continue
        fields = {kk: c[kk] for kk in ("h", "lam", "rho", "sinkhorn_eps", "T", "inner_steps", "tau0")}
        fields["mode"] = "wasserstein"
        if grad is not None:
            fields["grad"] = grad
        cfg = dataclasses.replace(base_cfg, **fields)
        E, p0 = energy_and_p0(
            pools.offsets,
            dense=pools.dense,
            rerank=rerank,
            alpha=c["alpha"],
            gamma=c["gamma"],
            tau0=c["tau0"],
            n_threads=n_threads,
        )
        res = rerank_batch(E, p0, pools.offsets, embeddings=embeddings, csr=csr, config=cfg, n_threads=n_threads)
        top = readout_topk(res.p, pools, k)
        m = evaluate_topk(top, pools.query_ids, qrels, doc_ids, k=k)
        scores.append(float(np.mean(m["ndcg_exp"])))
        recalls.append(float(np.mean(m["recall"])))
        secs.append(time.perf_counter() - t0)
        if progress is not None:
            progress(ci, c, scores[-1], secs[-1])
    best = select_best(scores)
    return {
        "configs": configs,
        "scores": scores,
        "recall": recalls,
        "seconds": secs,
        "best": best,
        "best_config": configs[best],
    }
