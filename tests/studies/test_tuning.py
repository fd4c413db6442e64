"""jkofast.studies.tuning helpers: argument validation (QA review)."""

import numpy as np
import pytest

from jkofast.studies.tuning import sample_configs, select_best, train_queries


def test_counts_must_be_non_negative_integers():
    qrels = {f"q{i}": {"d": 1} for i in range(5)}
    # n = -1 returned every query but the last (qids[:-1]) silently
    with pytest.raises(ValueError, match="n must be >= 0"):
        train_queries(qrels, list(qrels), n=-1)
    with pytest.raises(TypeError, match="n must be an integer"):
        train_queries(qrels, list(qrels), n=2.5)
    with pytest.raises(ValueError, match="n must be >= 0"):
        sample_configs(-1)
    assert sorted(train_queries(qrels, list(qrels), n=99)) == sorted(qrels)
    assert len(sample_configs(3)) == 3


def test_select_best_rejects_empty_and_nan():
    with pytest.raises(ValueError, match="scores must not be empty"):  # returned index 0
        select_best([])
    with pytest.raises(ValueError, match="scores contains NaN"):
        select_best([0.5, np.nan])
    assert select_best([0.5, 0.7, 0.7]) == 1  # first of the strictly highest
