"""``jkofast study mr-jko``: the synthetic construction of SPEC A.7.10, one scaling run, a tiny study."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from jkofast.studies import multires as st
from jkofast.studies.published import published


def _naive_scaling(m_values, d=384):
    """SPEC A.7.10 written out: one default_rng(0) across M in the published order (100 first)."""
    rng = np.random.default_rng(0)
    out = {}
    for M in (100, 200, 500):
        centres = rng.normal(size=(20, d))
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        Z, rel = [], []
        for ci in range(20):
            for _ in range(M // 20):
                z = centres[ci] + 0.05 * rng.normal(size=d)
                Z.append(z / np.linalg.norm(z))
                rel.append(0.9 + 0.05 * rng.normal() if ci == 0 else 0.3 + 0.1 * rng.normal())
        if M in m_values:
            out[M] = (np.array(Z, np.float32), np.clip(rel, 0, 1).astype(np.float32))
    return out


def test_scaling_inputs_follow_the_spec_construction():
    got = st.scaling_inputs((200, 500))
    ref = _naive_scaling((200, 500))
    for M in (200, 500):
        Z, rel = got[M]
        assert Z.dtype == np.float32 and Z.shape == (M, 384)
        assert_array_equal(Z, ref[M][0])
        assert_array_equal(rel, ref[M][1])
        assert np.all((rel >= 0) & (rel <= 1))
        assert rel[: M // 20].mean() > 0.8 > rel[M // 20 :].mean()  # cluster 0 is the gold cluster
    # the same inputs whichever subset is asked for (one shared stream in a fixed order)
    assert_array_equal(st.scaling_inputs((500,))[500][0], got[500][0])


def test_scaling_run_reports_the_published_fields():
    Z, rel = st.scaling_inputs((200,))[200]
    s = st.scaling_run(Z, rel, "implicit", n_threads=1)
    assert s["M"] == 200 and s["G"] == 10 and s["per_cluster"] == 10
    for k in ("vanilla_ms", "mr_ms", "speedup", "vanilla_cpu_ms", "mr_cpu_ms"):
        assert s[k] > 0
    for k in ("vanilla_mass_gold", "mr_mass_gold"):
        assert 0 <= s[k] <= 1 + 1e-12
    for k in ("vanilla_top10_in_gold", "mr_top10_in_gold"):
        assert 0 <= s[k] <= 1
    assert 2 <= s["pool_size"] <= 200
    assert s["published"] == published("multires")["scaling"][200]


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(st, "QUICK_QUERIES", 4)
    monkeypatch.setattr(st, "SCALING_M_QUICK", (200,))
    monkeypatch.setattr(st, "UNROLLED_MAX_M", 0)


def test_quick_study_rows_and_json(tiny):
    from jkofast.studies.common import StudyOptions

    res = st.study(StudyOptions(dataset="scifact", quick=True, progress=False, n_threads=1))
    js = res.summary()
    names = [r["method"] for r in js["rows"]]
    assert names == [n for n, _, _ in st.METHODS] + [n + "_impl" for n, _, _ in st.METHODS]
    for r in js["rows"]:
        assert {"method", "ndcg10", "recall10", "ms_per_query", "div10", "speedup", "published"} <= set(r)
        assert 0 <= r["ndcg10"] <= 1 and isinstance(r["ms_per_query"], float)
        if not r["method"].startswith("vanilla"):
            assert any(k.startswith("diff_vs_vanilla") for k in r)
            assert r["pool_size_mean"] >= 2
    assert [s["M"] for s in js["scaling"]] == [200]
    assert any("rerank term" in n for n in js["notes"])
    assert "Synthetic scaling" in res.table()
