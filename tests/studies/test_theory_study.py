"""``jkofast study theory`` (E1–E4, SPEC A.7.7): query sample, energy, the rows and their invariants."""

import json

import numpy as np
import pytest
from numpy.testing import assert_allclose

import jkofast.studies.theory as th
from jkofast.cli import main
from jkofast.jko.theory import RADIUS_GRID
from jkofast.studies.common import StudyOptions, run_study
from jkofast.studies.published import published

TINY = {"E1": 2, "E2": 2, "E3": 2, "E4": 2}


def test_select_queries_filters_and_draws():
    qids = ["a", "b", "c", "d", "e"]
    qrels = {"a": {"x": 1}, "b": {"y": 0}, "c": {"z": 2, "w": 0}, "e": {"v": 1}}  # b: label 0 only; d: none
    eligible = np.array([0, 2, 4])
    out = th.select_queries(qids, qrels, 2)
    pick = np.random.default_rng(0).choice(eligible, 2, replace=False)
    expected = np.sort(pick)
    assert out.tolist() == expected.tolist()
    assert set(out.tolist()) <= {0, 2, 4}
    assert th.select_queries(qids, qrels, 10).tolist() == [0, 2, 4]  # n above the eligible count: all
    with pytest.raises(ValueError, match="empty query sample"):
        th.select_queries(qids, {"a": {"x": 0}}, 3)


def test_theory_energy_hand_worked():
    # pool 1: minmax(1, 3, 2) = (0, 1, 0.5); pool 2 constant -> zeros (the 1e-9 rule) -> uniform p0
    E, p0 = th.theory_energy(np.array([1.0, 3.0, 2.0, 5.0, 5.0]), np.array([0, 3, 5]))
    assert E.dtype == np.float32
    assert_allclose(E, [0.0, -1.0, -0.5, 0.0, 0.0])
    z = np.exp(np.array([0.0, 1.0, 0.5]) / 0.1)
    assert_allclose(p0[:3], z / z.sum(), rtol=1e-6)
    assert_allclose(p0[3:], [0.5, 0.5])


@pytest.fixture
def tiny_study(monkeypatch):
    monkeypatch.setattr(th, "QUICK_QUERIES", TINY)
    monkeypatch.setattr(th, "H_GRID", (0.5, 2.0))


def test_theory_study_rows(tiny_study, tmp_path):
    res = run_study("theory", StudyOptions(quick=True, progress=False, out=str(tmp_path), n_threads=1))
    by = {}
    for r in res.rows:
        by.setdefault(r["experiment"], []).append(r)
    assert [r["mode"] for r in by["E1"]] == ["wasserstein", "kl"]
    for r in by["E1"]:
        assert len(r["F_mean"]) == 6 and len(r["velocity"]) == 5 and r["n"] == 2
        assert 0.0 <= r["monotone_frac"] <= 1.0
        assert r["total_drop_mean"] == pytest.approx(r["F_mean"][0] - r["F_mean"][-1])
        assert r["published"] == published("theory")["E1"][r["mode"]]
    assert by["E1"][0]["F_mean"][0] == by["E1"][1]["F_mean"][0]  # same p0 for both modes
    assert [(r["mode"], r["band"]) for r in by["E2"]] == [(m, b) for m in ("wasserstein", "kl") for b in range(4)]
    assert all(r["wc_gain_ci"][0] <= r["wc_gain"] <= r["wc_gain_ci"][1] for r in by["E2"])
    assert [r["h"] for r in by["E3"]] == [0.5, 2.0]
    for r in by["E3"]:
        assert r["gap"][0] == pytest.approx(r["wc_kl"] - r["wc_w"])
        assert r["rel_gap"] == pytest.approx(r["gap"][0] / r["wc_kl"])
    for r in by["E4"]:
        assert r["s"] == list(RADIUS_GRID)
        assert r["wc"][0] == 0.0 and r["preserved"][0] == 1.0  # set, not computed
        assert all(x in RADIUS_GRID for row in r["radii"] for x in row)
        assert all(0.0 <= x <= 1.0 for x in r["preserved"])
    w4, k4 = (next(r for r in by["E4"] if r["mode"] == m) for m in ("wasserstein", "kl"))
    assert w4["provable"] is None and "not convex" in w4["provable_why"]  # no certificate for the W flow
    # the provable radius of the KL flow never exceeds that flow's own walk radius, per (query, direction)
    bound, walk = np.array(k4["provable"]), np.array(k4["exact_walk"])
    assert bound.shape == walk.shape == (2, 2) and np.all((bound > 0) & (bound <= walk))
    assert k4["provable_violations_exact"] == 0 and 0 < k4["provable_ratio_exact"] <= 1
    assert 0 <= k4["solver_changed_within_bound"] <= 4
    assert set(res.extra["e2_ratios"]) == {"wasserstein_high_low", "kl_high_low", "cross_band_w_over_kl"}
    doc = json.loads((tmp_path / "theory.json").read_text())
    assert doc["study"] == "theory" and len(doc["rows"]) == len(res.rows)
    md = (tmp_path / "theory.md").read_text()
    assert "BM25" in md and "E4 certified radius" in md and "[published" in md and "provable radius, kl" in md


def test_theory_cli_json(tiny_study, capsys):
    assert main(["study", "theory", "--quick", "--json", "--threads", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["experiment"] for r in doc["rows"]} == {"E1", "E2", "E3", "E4"}
    assert any("rerank term" in n for n in doc["notes"])


def test_theory_plot(tiny_study, tmp_path):
    pytest.importorskip("matplotlib")  # the optional 'plot' extra, not jkofast
    res = run_study("theory", StudyOptions(quick=True, progress=False, out=str(tmp_path), plot=True, n_threads=1))
    assert res.figures == ["theory_e1_e4.png"]
    assert (tmp_path / "theory_e1_e4.png").stat().st_size > 1000


def _fake_setup(sizes=(8, 8)):
    from jkofast.jko.theory import TheoryBatch

    rng = np.random.default_rng(5)
    Z = rng.normal(size=(sum(sizes), 4)).astype(np.float32)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    b = TheoryBatch.from_embeddings(Z, off)
    E = [-rng.uniform(size=m).astype(np.float32) for m in sizes]
    p0 = [np.full(m, 1.0 / m) for m in sizes]
    return th._Setup(b, E, p0, {"E2": [0, 1], "E3": [0, 1], "E4": [0, 1]})


def _capture(monkeypatch):
    seen = []

    def fake_response(st, pools, items_sv, cfg, T, k=None):
        seen.append((cfg.mode, cfg.h, T, [[(s, np.array(v)) for s, v in it] for it in items_sv]))
        n = len(items_sv[0])
        z = np.zeros((len(pools), n))
        return z + 0.01, z + 0.02, (np.ones((len(pools), n)) if k else None)

    monkeypatch.setattr(th, "_response", fake_response)
    return seen


def test_e2_draws_query_mode_band_direction(monkeypatch):
    from jkofast.jko.theory import band_direction, band_edges, gibbs_laplacian

    st = _fake_setup()
    seen = _capture(monkeypatch)
    th._e2(st, _base())
    rng = np.random.default_rng(0)
    expected = {"wasserstein": [], "kl": []}
    for q in (0, 1):
        U = gibbs_laplacian(st.batch.cost(q))[1]
        e = band_edges(8, 4)
        for mode in ("wasserstein", "kl"):
            expected[mode].append([band_direction(U, e[b], e[b + 1], rng) for b in range(4) for _ in range(2)])
    assert [x[0] for x in seen] == ["wasserstein", "kl"]
    for mode, h, T, items in seen:
        assert (h, T) == (0.5, 2)
        for q in (0, 1):
            assert [s for s, _ in items[q]] == [0.25] * 8
            for (_, v), w in zip(items[q], expected[mode][q], strict=True):
                np.testing.assert_array_equal(v, w)  # W and KL get different (unpaired) directions


def test_e3_e4_directions_are_paired(monkeypatch):
    st = _fake_setup()
    seen = _capture(monkeypatch)
    th._e3(st, _base())
    th._e4(st, _base())
    e3 = [x for x in seen if x[2] == 3 and len(x[3][0]) == 1]
    assert len(e3) == 2 * len(th.H_GRID)  # every h, both modes
    for x in e3:
        np.testing.assert_array_equal(x[3][0][0][1], e3[0][3][0][0][1])  # one direction reused everywhere
        assert x[3][0][0][0] == 0.3
    e4 = [x for x in seen if len(x[3][0]) == 14]
    assert [x[0] for x in e4] == ["wasserstein", "kl"]
    for q in (0, 1):
        s_w = [s for s, _ in e4[0][3][q]]
        assert s_w == list(RADIUS_GRID[1:]) * 2  # direction-major s-grid, s = 0 not run
        for (_, a), (_, b) in zip(e4[0][3][q], e4[1][3][q], strict=True):
            np.testing.assert_array_equal(a, b)  # paired across modes


def _base():
    from jkofast.jko.solver import operating_point

    return operating_point("base")
