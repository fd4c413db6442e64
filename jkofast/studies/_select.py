"""Selection of ``jkofast tune``'s operating point: folds, simplicity levels, the one-standard-error rule.

The statistics of :mod:`jkofast.studies.tune` (which re-exports every name here): the seeded
K folds over the judged queries (:func:`kfold`), each grid point's simplicity
(:func:`complexity`), the choice of one point from a score matrix (:func:`select_point`:
the highest mean, or the one-standard-error rule over paired per-query differences) and the
out-of-fold selection (:func:`cross_validate`).
"""

from __future__ import annotations

import math

import numpy as np

from jkofast._validation import check_int
from jkofast.studies.tuning import select_best

__all__ = ["RULES", "complexity", "cross_validate", "kfold", "select_point"]

RULES = ("1se", "best")  # selection: the one-standard-error rule (default), or the highest mean


def kfold(n: int, k: int = 5, seed: int = 0) -> np.ndarray:
    """Fold of each of ``n`` queries: a seeded permutation dealt round-robin into ``k`` folds.

    Raises
    ------
    ValueError
        ``k < 2`` or more folds than queries.
    """
    n = check_int(n, "n", min_value=1)
    k = check_int(k, "k", min_value=2)
    if k > n:
        raise ValueError(f"{k} folds need at least {k} judged queries, got {n}")
    folds = np.empty(n, np.int64)
    folds[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return folds


def complexity(p: dict) -> int:
    """Simplicity level of a grid point for the one-standard-error rule (lower = simpler).

    0: a corner (one input ranked alone over the corpus); 1, 2, 3: an energy read out without the
    flow with that many non-zero weights; 4: a JKO flow.
    """
    if p["kind"] != "jko":
        return 0
    if p["T"] == 0:
        return sum(1 for k in ("alpha", "beta", "gamma") if p[k] != 0)
    return 4


def select_point(scores, levels=None, rule: str = "1se") -> tuple[int, dict]:
    """Select a point from its per-query scores on the selection queries.

    Parameters
    ----------
    scores : float (n_points, n_queries)
        Per-query metric of each point on the selection queries only.
    levels : int (n_points,), optional
        :func:`complexity` of each point (default: all 0, i.e. the plain order).
    rule : {"1se", "best"}
        ``"best"``: the first point with the highest mean.  ``"1se"``: the one-standard-error
        rule -- a point is within one standard error of the best when ``best mean - its mean`` is
        at most the standard error of that difference over the same queries
        (``std(best - point, ddof=1) / sqrt(n)``; 0 with one query); of those, the lowest level,
        and within it the first with the highest mean.

    Returns
    -------
    choice : int
    info : dict
        ``best`` (index of the highest mean), ``best_mean``, ``chosen_mean`` and ``se`` (the
        standard error of the chosen point's difference to the best; 0 when the best is chosen).

    Raises
    ------
    ValueError
        An unknown rule, no point or no query, NaN scores, ``levels`` of another length.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    S = np.asarray(scores, np.float64)
    if S.ndim != 2 or S.shape[0] == 0 or S.shape[1] == 0:
        raise ValueError(f"scores must be (points, queries) with at least one of each, got shape {S.shape}")
    means = S.mean(axis=1)
    best = select_best(means)  # raises on NaN
    n = S.shape[1]
    # paired: the points are scored on the same queries, so the difference's own spread decides
    se = S[best][None, :] - S
    se = se.std(axis=1, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(S.shape[0])
    choice = best
    if rule == "1se":
        lv = np.zeros(S.shape[0], np.int64) if levels is None else np.asarray(levels, np.int64)
        if lv.shape != (S.shape[0],):
            raise ValueError(f"levels must hold one level per point ({S.shape[0]}), got shape {lv.shape}")
        ok = means[best] - means <= se
        simplest = lv[ok].min()
        cand = np.flatnonzero(ok & (lv == simplest))
        choice = int(cand[select_best(means[cand])])
    info = {"best": int(best), "best_mean": float(means[best]), "se": float(se[choice]),
            "chosen_mean": float(means[choice])}  # fmt: skip
    return choice, info


def cross_validate(scores, folds, levels=None, rule: str = "best") -> tuple[list[int], np.ndarray, np.ndarray]:
    """Out-of-fold selection over a score matrix.

    Parameters
    ----------
    scores : float (n_points, n_queries)
        Per-query metric of each grid point.
    folds : int (n_queries,)
        Fold of each query (0..K-1).
    levels : int (n_points,), optional
        :func:`complexity` of each point (the ``"1se"`` rule prefers the lowest).
    rule : {"best", "1se"}
        How each fold selects on the other folds' queries (:func:`select_point`).

    Returns
    -------
    choices : list of int
        Point chosen for each fold: :func:`select_point` on the queries of the *other* folds.
    oof : float (n_queries,)
        Each query's value under its fold's point.
    chosen : int (n_queries,)
        The point index that scored each query.

    Raises
    ------
    ValueError
        Shapes that disagree, a fold without queries, NaN scores.
    """
    S = np.asarray(scores, np.float64)
    folds = np.asarray(folds)
    if S.ndim != 2 or folds.ndim != 1 or folds.shape[0] != S.shape[1]:
        raise ValueError(f"scores must be (points, queries) and folds (queries,), got {S.shape} and {folds.shape}")
    K = int(folds.max()) + 1 if folds.size else 0
    choices, oof, chosen = [], np.empty(S.shape[1]), np.empty(S.shape[1], np.int64)
    for f in range(K):
        test = folds == f
        if not test.any() or test.all():
            raise ValueError(f"fold {f} holds {int(test.sum())} of {folds.size} queries")
        c = select_point(S[:, ~test], levels, rule)[0]
        choices.append(c)
        oof[test] = S[c, test]
        chosen[test] = c
    return choices, oof, chosen
