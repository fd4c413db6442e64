"""Selective coverage, top-1 accuracy and the rank ECE of Dual-Rank (SPEC A.6.4): hand-worked cases and oracles."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from jkofast.eval.selective import (
    COVERAGE_GRID,
    ece_rank,
    n_keep,
    rank_confidence,
    selective_coverage,
    top1_accuracy,
)


def coverage_naive(conf, metric, cov):
    """Python's stable sorted() on -conf, then the first max(1, round(cov * n))."""
    n = len(conf)
    order = sorted(range(n), key=lambda i: -conf[i])
    kept = order[: max(1, round(cov * n))]
    return len(kept), float(np.mean([metric[i] for i in kept]))


def ece_naive(x, y, n_bins=10):
    """Average ranks by counting, float edges b/n_bins, last bin closed (valid when no conf sits on an edge)."""
    x = np.asarray(x, float)
    n = len(x)
    rank = np.array([np.sum(x < v) + (np.sum(x == v) + 1) / 2 for v in x])
    conf = (rank - 1) / (n - 1)
    ece = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        sel = (conf >= lo) & ((conf < hi) if b < n_bins - 1 else (conf <= hi))
        if sel.any():
            ece += sel.sum() / n * abs(conf[sel].mean() - np.mean(np.asarray(y, float)[sel]))
    return ece


# ---------------------------------------------------------------------------------------------
# n_keep: Python round, half to even
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cov, n, want",
    [
        (0.5, 5, 2),  # 2.5 -> 2 (even)
        (0.5, 7, 4),  # 3.5 -> 4 (even)
        (0.3, 5, 2),  # 1.5 -> 2
        (0.5, 3, 2),  # 1.5 -> 2
        (0.5, 1, 1),  # 0.5 -> 0 -> max(1, .)
        (0.1, 4, 1),  # 0.4 -> 0 -> 1
        (0.95, 300, 285),  # the published n kept (SPEC A.9.7)
        (0.5, 300, 150),
        (0.1, 300, 30),
        (0.95, 323, 307),  # 306.85
        (0.5, 323, 162),  # 161.5 -> 162 (even)
        (0.1, 648, 65),  # 64.8
    ],
)
def test_n_keep_half_to_even(cov, n, want):
    assert n_keep(cov, n) == want


@pytest.mark.parametrize("cov", [0.0, -0.1, 1.01, float("nan")])
def test_n_keep_bad_coverage(cov):
    with pytest.raises(ValueError, match="coverage"):
        n_keep(cov, 10)


def test_n_keep_bad_types():
    with pytest.raises(TypeError, match="coverage"):
        n_keep("0.5", 10)
    with pytest.raises(ValueError, match="n must be >= 1"):
        n_keep(0.5, 0)


# ---------------------------------------------------------------------------------------------
# selective_coverage
# ---------------------------------------------------------------------------------------------
def test_selective_coverage_hand_worked_ties_keep_query_order():
    # conf [0.5, 0.9, 0.5, 0.5, 0.1]: stable descending order = 1, 0, 2, 3, 4 (the 0.5 ties in query order)
    conf = [0.5, 0.9, 0.5, 0.5, 0.1]
    m = [1.0, 2.0, 3.0, 4.0, 5.0]
    rows = selective_coverage(conf, {"m": m}, coverages=(1.0, 0.7, 0.6, 0.5, 0.1))
    # n_keep: 5; 0.7*5 = 3.5 -> 4; 3; 2.5 -> 2; 0.5 -> 0 -> 1
    assert [r["n_kept"] for r in rows] == [5, 4, 3, 2, 1]
    # kept: all -> 3; {1,0,2,3} -> (2+1+3+4)/4; {1,0,2} -> 2; {1,0} -> 1.5; {1} -> 2
    assert [r["m"] for r in rows] == [3.0, 2.5, 2.0, 1.5, 2.0]
    assert [r["coverage"] for r in rows] == [1.0, 0.7, 0.6, 0.5, 0.1]


def test_selective_coverage_matches_oracle_with_many_ties():
    rng = np.random.default_rng(0)
    n = 37
    conf = rng.integers(0, 5, n).astype(float)  # many exact ties
    nd, rec, acc = rng.random(n), rng.random(n), rng.integers(0, 2, n)
    rows = selective_coverage(conf, {"ndcg10": nd, "recall10": rec, "top1_acc": acc})
    assert [r["coverage"] for r in rows] == list(COVERAGE_GRID)
    for r in rows:
        for name, x in (("ndcg10", nd), ("recall10", rec), ("top1_acc", acc)):
            k, mean = coverage_naive(conf, x, r["coverage"])
            assert r["n_kept"] == k
            assert_allclose(r[name], mean, rtol=1e-13)


def test_selective_coverage_infinite_confidence_sorts_first_and_last():
    rows = selective_coverage([0.0, np.inf, -np.inf], {"m": [1.0, 2.0, 3.0]}, coverages=(0.3, 0.6))
    assert [(r["n_kept"], r["m"]) for r in rows] == [(1, 2.0), (2, 1.5)]


@pytest.mark.parametrize(
    "conf, metrics, cov, exc, match",
    [
        ([0.1, np.nan], {"m": [1, 2]}, (1.0,), ValueError, "conf contains NaN"),
        ([], {"m": []}, (1.0,), ValueError, "conf must not be empty"),
        ([0.1, 0.2], {"m": [1, 2, 3]}, (1.0,), ValueError, r"metrics\['m'\] has 3 entries"),
        ([0.1, 0.2], {"m": [1, np.nan]}, (1.0,), ValueError, "NaN or inf"),
        ([0.1, 0.2], [1, 2], (1.0,), TypeError, "metrics must be a mapping"),
        ([0.1, 0.2], {"m": [1, 2]}, (0.0,), ValueError, "coverage must lie"),
        (["a", "b"], {"m": [1, 2]}, (1.0,), TypeError, "conf must be a real numeric"),
    ],
)
def test_selective_coverage_bad_input(conf, metrics, cov, exc, match):
    with pytest.raises(exc, match=match):
        selective_coverage(conf, metrics, coverages=cov)


# ---------------------------------------------------------------------------------------------
# top-1 accuracy: judged with any label, 0 included
# ---------------------------------------------------------------------------------------------
def test_top1_accuracy_counts_label_zero():
    qrels = {"q1": {"d1": 0, "d2": 1}, "q2": {"d3": 2}, "q3": {}}
    got = top1_accuracy(["d1", "d2", "d3", None, "d1"], ["q1", "q2", "q2", "q1", "q9"], qrels)
    assert got.tolist() == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert got.dtype == np.float64


def test_top1_accuracy_bad_input():
    with pytest.raises(ValueError, match="top1_doc_ids has 1 entries for 2"):
        top1_accuracy(["d"], ["q1", "q2"], {})
    with pytest.raises(TypeError, match="qrels must be a mapping"):
        top1_accuracy(["d"], ["q1"], [("q1", "d")])


# ---------------------------------------------------------------------------------------------
# rank confidence and ECE
# ---------------------------------------------------------------------------------------------
def test_rank_confidence_average_ranks_and_n1():
    # [3, 1, 3, 2] -> ranks [3.5, 1, 3.5, 2] -> (r - 1)/3
    assert_allclose(rank_confidence([3.0, 1.0, 3.0, 2.0]), [2.5 / 3, 0.0, 2.5 / 3, 1 / 3], rtol=1e-15)
    assert rank_confidence([7.0]).tolist() == [0.5]
    assert rank_confidence([2.0, 2.0, 2.0]).tolist() == [0.5, 0.5, 0.5]  # all tied: the n = 1 value


def test_ece_last_bin_closed():
    # conf [0, 1]; both outcomes 0: bin 0 contributes 0, the closed last bin |1 - 0| * 1/2
    assert ece_rank([1.0, 2.0], [0, 0]) == 0.5
    assert ece_rank([1.0, 2.0], [False, True]) == 0.0


def test_ece_hand_worked_ties():
    # ranks [3.5, 1, 3.5, 2] -> conf [5/6, 0, 5/6, 1/3] -> bins 8, 0, 8, 3
    # bin 8: |5/6 - 1/2| * 2/4 = 1/6; bin 0: |0 - 0| = 0; bin 3: |1/3 - 1| * 1/4 = 1/6  -> 1/3
    assert_allclose(ece_rank([3.0, 1.0, 3.0, 2.0], [1, 0, 0, 1]), 1 / 3, rtol=1e-14)


def test_ece_exact_edges():
    # n = 11, conf = k/10: 3/10 belongs to [0.3, 0.4) (float edges from np.linspace would put it
    # below 0.30000000000000004). Only query 3 is relevant:
    # bin 3 = {0.3}: |0.3 - 1|; bins k != 3, 9 = {k/10}: k/10; bin 9 = {0.9, 1.0}: 2 * 0.95; all / 11
    y = np.zeros(11)
    y[3] = 1
    assert_allclose(ece_rank(np.arange(11.0), y), (0.7 + 5.5 - 0.3) / 11, rtol=1e-14)


def test_ece_n1_is_defined():
    assert ece_rank([4.2], [1]) == 0.5 and ece_rank([4.2], [0]) == 0.5


@pytest.mark.parametrize("n", [2, 3, 300])  # n - 1 coprime with 10: no confidence on an interior edge
def test_ece_matches_naive_float_edges(n):
    rng = np.random.default_rng(n)
    x = np.round(rng.normal(size=n), 1)  # ties
    y = rng.integers(0, 2, n)
    assert_allclose(ece_rank(x, y), ece_naive(x, y), rtol=1e-12, atol=1e-15)
    assert_allclose(ece_rank(x, y, n_bins=7), ece_naive(x, y, 7), rtol=1e-12, atol=1e-15)


def test_ece_is_rank_invariant():
    rng = np.random.default_rng(1)
    x = rng.normal(size=50)
    y = rng.integers(0, 2, 50)
    assert ece_rank(x, y) == ece_rank(np.exp(x), y)  # any increasing map of the score: same ranks
    assert 0.0 <= ece_rank(x, y) <= 1.0


@pytest.mark.parametrize(
    "x, y, kw, match",
    [
        ([0.1, np.nan], [0, 1], {}, "top1_f contains NaN"),
        ([0.1, np.inf], [0, 1], {}, "top1_f contains inf"),
        ([0.1, 0.2], [0, 1, 1], {}, "is_rel has 3 entries"),
        ([0.1, 0.2], [0, 2], {}, r"is_rel must lie in \[0, 1\]"),
        ([0.1, 0.2], [0, 1], {"n_bins": 0}, "n_bins must be >= 1"),
        ([], [], {}, "top1_f must not be empty"),
    ],
)
def test_ece_bad_input(x, y, kw, match):
    with pytest.raises(ValueError, match=match):
        ece_rank(x, y, **kw)
