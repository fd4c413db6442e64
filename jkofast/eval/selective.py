r"""Selective prediction: coverage curves of a per-query confidence and a rank-based ECE (SPEC A.6.4).

* :func:`selective_coverage` — sort the queries by confidence, descending and **stable** (ties
  keep query order), keep the first ``n_keep = max(1, round(cov · n))`` (Python ``round``:
  half to even) and average per-query metrics over the kept queries, for each coverage of a
  grid (default :data:`COVERAGE_GRID`).
* :func:`top1_accuracy` — whether each query's top-1 document is *judged* (its id is in the
  query's qrels, **any label, 0 included**: the published definition, SPEC A.7.3).
* :func:`ece_rank` — expected calibration error of a raw score turned into a confidence by its
  average rank ``(rank − 1)/(n − 1)`` (``scipy.stats.rankdata``), in 10 equal-width bins
  ``[b/10, (b+1)/10)``, the last one closed.

Plain NumPy: n is the number of queries (hundreds to thousands); nothing here is a kernel.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

from jkofast._validation import as_float_array, check_int

__all__ = ["COVERAGE_GRID", "ece_rank", "n_keep", "rank_confidence", "selective_coverage", "top1_accuracy"]

# the coverage grid of the published Dual-Rank tables (SPEC A.6.4)
COVERAGE_GRID = (1.00, 0.95, 0.90, 0.80, 0.70, 0.60, 0.50, 0.40, 0.30, 0.20, 0.10)


def n_keep(coverage: float, n: int) -> int:
    """Return the number of queries kept at ``coverage``: ``max(1, round(coverage * n))`` (half to even).

    ``coverage * n`` is the float product, as the published script computes it
    (``0.5 * 5 = 2.5 -> 2``, ``0.5 * 7 = 3.5 -> 4``).

    Raises
    ------
    TypeError
        ``coverage`` not a real number, ``n`` not an integer.
    ValueError
        ``coverage`` outside ``(0, 1]``, ``n < 1``.
    """
    if isinstance(coverage, bool) or not isinstance(coverage, numbers.Real):
        raise TypeError(f"coverage must be a real number, got {type(coverage).__name__}")
    c = float(coverage)
    if not 0.0 < c <= 1.0:
        raise ValueError(f"coverage must lie in (0, 1], got {coverage!r}")
    n = check_int(n, "n", min_value=1)
    return max(1, round(c * n))


def _conf(conf, name: str = "conf") -> np.ndarray:
    c = as_float_array(conf, name, dtype=np.float64, ndim=1, finite=False)
    if np.isnan(c).any():
        raise ValueError(
            f"{name} contains NaN (first at query {int(np.flatnonzero(np.isnan(c))[0])}); drop the failed queries first"
        )
    return c


def selective_coverage(conf, metrics: Mapping, coverages=COVERAGE_GRID) -> list[dict]:
    r"""Mean per-query metrics of the most confident queries, per coverage.

    Parameters
    ----------
    conf : array_like, float (n,)
        Confidence per query (higher = keep first); ``±inf`` allowed, NaN not.
    metrics : mapping of str to array_like (n,)
        Per-query metrics in the same query order (e.g. ``{"ndcg10": ..., "recall10": ...,
        "top1_acc": ...}``); each must be finite.
    coverages : sequence of float
        Fractions in ``(0, 1]`` (default :data:`COVERAGE_GRID`).

    Returns
    -------
    list of dict
        One dict per coverage, in the given order: ``coverage``, ``n_kept`` and the mean of
        every metric over the kept queries (NumPy ``mean`` of the kept values in sorted order).

    Raises
    ------
    ValueError
        Empty or NaN ``conf``, a metric of another length or with NaN/inf, a coverage outside
        ``(0, 1]``.
    TypeError
        ``metrics`` not a mapping, non-numeric input.

    Examples
    --------
    >>> rows = selective_coverage([0.9, 0.1, 0.5, 0.5], {"acc": [1, 0, 0, 1]}, coverages=(1.0, 0.5, 0.25))
    >>> [(r["n_kept"], r["acc"]) for r in rows]
    [(4, 0.5), (2, 0.5), (1, 1.0)]
    """
    c = _conf(conf)
    n = c.shape[0]
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping name -> per-query values, got {type(metrics).__name__}")
    vals = {}
    for name, x in metrics.items():
        a = as_float_array(x, f"metrics[{name!r}]", dtype=np.float64, ndim=1)
        if a.shape[0] != n:
            raise ValueError(f"metrics[{name!r}] has {a.shape[0]} entries for {n} confidences")
        vals[name] = a
    order = np.argsort(-c, kind="stable")  # descending; ties keep query order
    keeps = [(float(cov), n_keep(cov, n)) for cov in coverages]
    out = []
    for cov, k in keeps:
        sel = order[:k]
        row = {"coverage": cov, "n_kept": int(k)}
        for name, a in vals.items():
            row[name] = float(np.mean(a[sel]))
        out.append(row)
    return out


def top1_accuracy(top1_doc_ids, query_ids, qrels: Mapping) -> np.ndarray:
    """Per query, 1.0 when its top-1 document id is in ``qrels[query]`` (any label, 0 included), else 0.0.

    Parameters
    ----------
    top1_doc_ids : sequence of str or None
        The top-1 document id per query; ``None`` (no result, e.g. a failed query) counts as 0.
    query_ids : sequence of str
    qrels : mapping
        ``qid -> {doc_id: label}``; a query absent from it counts as 0.

    Returns
    -------
    ndarray float64 (n,)

    Raises
    ------
    ValueError
        ``top1_doc_ids`` and ``query_ids`` of different lengths.
    TypeError
        ``qrels`` not a mapping.

    Examples
    --------
    >>> top1_accuracy(["d1", "d2", None], ["q1", "q2", "q3"], {"q1": {"d1": 0}, "q2": {"d9": 1}}).tolist()
    [1.0, 0.0, 0.0]
    """
    if not isinstance(qrels, Mapping):
        raise TypeError(f"qrels must be a mapping qid -> {{doc_id: label}}, got {type(qrels).__name__}")
    docs = list(top1_doc_ids)
    qids = list(query_ids)
    if len(docs) != len(qids):
        raise ValueError(f"top1_doc_ids has {len(docs)} entries for {len(qids)} query_ids")
    return np.array([float(d is not None and d in qrels.get(q, {})) for d, q in zip(docs, qids, strict=True)])


def rank_confidence(x) -> np.ndarray:
    """``(rank − 1)/(n − 1)`` with average ranks for ties (``scipy.stats.rankdata``), in [0, 1].

    ``n = 1`` gives 0.5: the value every entry gets when all ``n >= 2`` entries tie (the
    formula itself is 0/0 there).
    """
    from scipy.stats import rankdata

    a = _conf(x, "x")
    if not np.isfinite(a).all():
        raise ValueError("x contains inf")
    n = a.shape[0]
    if n == 1:
        return np.array([0.5])
    return (rankdata(a, method="average") - 1.0) / (n - 1)


def _rank_bins(a: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin of each rank confidence, compared exactly on the ranks (integer arithmetic).

    ``c = (R − 1)/(n − 1)`` with ``2R`` an integer (average ranks are halves), so
    ``b = floor(n_bins · (2R − 2) / (2(n − 1)))`` exactly, the top value (c = 1) moved into the
    last bin.  Float edges would misplace exact edge values: ``np.linspace(0, 1, 11)[3]`` is
    ``0.30000000000000004``, which puts ``3/10`` into the bin below.
    """
    from scipy.stats import rankdata

    n = a.shape[0]
    if n == 1:
        return np.array([n_bins // 2], np.int64)  # c = 0.5 lies in bin floor(n_bins/2)
    two_r = np.rint(2.0 * rankdata(a, method="average")).astype(np.int64)
    b = (n_bins * (two_r - 2)) // (2 * (n - 1))
    return np.minimum(b, n_bins - 1)


def ece_rank(top1_f, is_rel, n_bins: int = 10) -> float:
    r"""Return the expected calibration error of a score turned into a rank confidence (SPEC A.6.4).

    ``conf = (rank − 1)/(n − 1)`` (average ranks, :func:`rank_confidence`); bins
    ``[b/n_bins, (b+1)/n_bins)`` for ``b < n_bins − 1`` and ``[1 − 1/n_bins, 1]`` (last bin
    closed); ``ECE = Σ_bins (n_bin/n) · |mean conf − mean is_rel|`` over non-empty bins.

    Parameters
    ----------
    top1_f : array_like, float (n,)
        The raw score per query (Dual-Rank: ``f[top1]``, not minus the median); finite.
    is_rel : array_like (n,)
        Outcome per query in [0, 1] (Dual-Rank: :func:`top1_accuracy`); bools allowed.
    n_bins : int
        Number of equal-width bins (10 in the published runs).

    Returns
    -------
    float
        In [0, 1].  ``n = 1``: conf 0.5 (see :func:`rank_confidence`), ECE ``|0.5 − is_rel|``.

    Raises
    ------
    ValueError
        Empty input, NaN/inf scores, different lengths, ``is_rel`` outside [0, 1], ``n_bins < 1``.

    Examples
    --------
    >>> round(ece_rank([0.1, 0.2, 0.3], [0, 0, 1], n_bins=2), 4)  # conf 0 | 0.5, 1: (2/3)|0.75 - 0.5|
    0.1667
    """
    n_bins = check_int(n_bins, "n_bins", min_value=1)
    a = _conf(top1_f, "top1_f")
    if not np.isfinite(a).all():
        raise ValueError("top1_f contains inf")
    y = as_float_array(np.asarray(is_rel, dtype=np.float64), "is_rel", dtype=np.float64, ndim=1)
    if y.shape[0] != a.shape[0]:
        raise ValueError(f"is_rel has {y.shape[0]} entries for {a.shape[0]} top1_f values")
    if ((y < 0) | (y > 1)).any():
        raise ValueError("is_rel must lie in [0, 1] (1 = the top-1 document is judged)")
    conf = rank_confidence(a)
    bins = _rank_bins(a, n_bins)
    n = a.shape[0]
    ece = 0.0
    for b in range(n_bins):
        sel = bins == b
        k = int(np.count_nonzero(sel))
        if k:
            ece += (k / n) * abs(float(np.mean(conf[sel])) - float(np.mean(y[sel])))
    return float(ece)
