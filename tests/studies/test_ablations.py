"""``jkofast study ablations`` (SPEC A.7.8): the ablation costs by hand, the study's rows and figure."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import jkofast.studies.ablations as ab
from jkofast.studies.common import StudyOptions, run_study
from jkofast.studies.published import published


def test_ablation_costs_by_hand():
    ident = ab.ablation_cost("identity", 3)
    assert_array_equal(ident, [[0, 1, 1], [1, 0, 1], [1, 1, 0]])
    R = ab.ablation_cost("random", 4)
    raw = np.random.default_rng(0).uniform(0, 4, size=(4, 4))
    expect = 0.5 * (raw + raw.T)
    np.fill_diagonal(expect, 0.0)
    assert_array_equal(R, expect)
    assert_array_equal(R, ab.ablation_cost("random", 4))  # re-created per query: the same matrix
    assert (R >= 0).all() and (R <= 4).all()
    with pytest.raises(ValueError, match="kind"):
        ab.ablation_cost("gaussian", 3)


def test_ablations_quick_rows_and_plot(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib", reason="the figure needs the optional 'plot' extra (matplotlib)")
    monkeypatch.setattr(ab, "QUICK_QUERIES", 3)
    res = run_study("ablations", StudyOptions(quick=True, progress=False, out=str(tmp_path), plot=True))
    assert [r["method"] for r in res.rows] == list(ab.ABLATIONS)
    full = res.rows[0]
    for r in res.rows[1:]:
        d, lo, hi = r["diff_W_full_minus"]
        assert d == pytest.approx(full["ndcg10"] - r["ndcg10"], abs=1e-12)
        assert lo <= d + 1e-12 and d <= hi + 1e-12
        assert r["published"] == published("ablations")["rows"][r["method"]]
    assert len(res.extra["blend_ablation"]) == 6
    assert res.figures == ["ablations.png"] and (tmp_path / "ablations.png").stat().st_size > 1000
    assert "ablations.png" in (tmp_path / "ablations.md").read_text()
