"""The selection rules of ``jkofast tune`` on small query sets: highest mean, 1-SE (best point's SE), 1-SE (paired SE).

Procedure (fixed before it ran): score the published grid of ``jkofast tune`` (43 points: the five
corners, the read-outs, the flows) per query on the 300 SciFact **test** queries, once as they are
and once with the query vectors permuted across queries (the dense input then carries no signal and
a lexical corner is the best input).  For n in (30, 50, 100): 300 random subsets of n queries
(``default_rng(0)``), 5-fold cross-validation (``kfold(n, 5, rep)``) under each rule; the cost of a
subset = its out-of-fold nDCG@10 minus the best corner's mean on the same queries.  Prints the mean
cost and the share of subsets losing more than .005.  Run from the repository root:
``python experiments/tune_one_se.py`` (about 15 CPU-minutes: two grids).
"""

from __future__ import annotations

import json
import math

import numpy as np

import jkofast.studies.tune as T
from jkofast.datasets.beir import load_dataset
from jkofast.text.language import detect_language


def score_matrix(permute: bool):
    ds = load_dataset("scifact")
    emb, qids, _, qrels, q_emb = T._inputs(ds, T.DEFAULT_EMBEDDINGS, None, "test", 5)
    if permute:
        q_emb = q_emb[np.random.default_rng(1).permutation(len(qids))]
    lang = detect_language(ds.doc_texts(" ")).language
    tried = T._analysers(lang, "published")
    pts, S, *_ = T._score_analysers((ds, qids, qrels, (emb[0], q_emb)), T.grid("published"), tried, None,
                                    "implicit", None, lambda m: None, T._corner_analysers(lang, tried))  # fmt: skip
    return pts, S


def unpaired(S, levels):
    """The 1-SE rule with the best point's own standard error (not an option of ``tune``)."""
    means = S.mean(axis=1)
    best = int(np.argmax(means))
    ok = means >= means[best] - S[best].std(ddof=1) / math.sqrt(S.shape[1])
    cand = np.flatnonzero(ok & (levels == levels[ok].min()))
    return int(cand[np.argmax(means[cand])])


def choose(S, levels, rule):
    return unpaired(S, levels) if rule == "unpaired" else T.select_point(S, levels, rule)[0]


def simulate(pts, S):
    levels = np.array([T.complexity(p) for p in pts])
    corners = np.flatnonzero(levels == 0)
    rng = np.random.default_rng(0)
    out = {}
    for n in (30, 50, 100, S.shape[1]):
        res = {r: [] for r in ("best", "unpaired", "1se")}
        for rep in range(300 if n < S.shape[1] else 1):
            cols = rng.choice(S.shape[1], n, replace=False) if n < S.shape[1] else np.arange(n)
            Ss, folds = S[:, cols], T.kfold(n, 5, rep)
            bc = Ss[corners].mean(axis=1).max()
            for r in res:
                oof = np.empty(n)
                for f in range(5):
                    oof[folds == f] = Ss[choose(Ss[:, folds != f], levels, r), folds == f]
                res[r].append(oof.mean() - bc)
        out[n] = {r: {"mean_cost": float(np.mean(v)), "lose_005": float(np.mean(np.array(v) < -0.005))}
                  for r, v in res.items()}  # fmt: skip
        print(n, json.dumps(out[n]), flush=True)
    return out


if __name__ == "__main__":
    for name, permute in (("scifact", False), ("dense permuted", True)):
        print(name)
        simulate(*score_matrix(permute))
