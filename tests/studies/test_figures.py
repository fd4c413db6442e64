"""The ``--plot`` figures of ``study dual-rank`` and ``study mr-jko``: the PNG is written with the expected series."""

import numpy as np
import pytest

from jkofast.studies.common import StudyResult

plt = pytest.importorskip("matplotlib.pyplot", reason="the figures need the optional 'plot' extra (matplotlib)")


@pytest.fixture
def kept_figure(monkeypatch):
    """The figure a ``plot`` draws, kept open (``plt.close`` does nothing) for its lines to be read back."""
    plt.close("all")
    monkeypatch.setattr(plt, "close", lambda *a, **k: None)
    yield lambda: plt.figure(plt.get_fignums()[-1])
    monkeypatch.undo()
    plt.close("all")


def _lines(ax) -> dict:
    return {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()}


def _is_png(path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_dual_rank_plot_draws_coverage_curves_of_the_three_signals(tmp_path, kept_figure):
    import jkofast.studies.dual_rank as dr

    grid = [1.0, 0.5, 0.1]
    rng = np.random.default_rng(0)
    cov = {
        s: [
            {"coverage": c, "n_kept": int(10 * c), "ndcg10": rng.random(), "recall10": 0.5, "top1_acc": rng.random()}
            for c in grid
        ]
        for s in dr.SIGNALS
    }
    pub = {s: [{"coverage": c, "ndcg10": 0.7, "top1_acc": 0.6} for c in grid] for s in dr.SIGNALS}
    res = StudyResult("dual-rank", "scifact", 10, [], extra={"coverage": cov, "coverage_published": pub})
    assert dr.plot(res, str(tmp_path)) == ["dual_rank_coverage.png"]
    assert _is_png(tmp_path / "dual_rank_coverage.png")
    ax_ndcg, ax_top1 = kept_figure().axes
    for ax, key in ((ax_ndcg, "ndcg10"), (ax_top1, "top1_acc")):
        lines = _lines(ax)
        assert set(lines) == {*dr.SIGNALS, *(f"{s} (published)" for s in dr.SIGNALS)}
        for s in dr.SIGNALS:
            assert lines[s] == (grid, [r[key] for r in cov[s]])
            assert lines[f"{s} (published)"][1] == [0.7 if key == "ndcg10" else 0.6] * 3
    assert "top-1" in ax_top1.get_ylabel() and "nDCG@10" in ax_ndcg.get_ylabel()


def test_dual_rank_plot_without_published_curves(tmp_path, kept_figure):
    import jkofast.studies.dual_rank as dr

    cov = {s: [{"coverage": 1.0, "ndcg10": 0.5, "top1_acc": 0.4}] for s in dr.SIGNALS}
    dr.plot(StudyResult("dual-rank", "mine", 3, [], extra={"coverage": cov, "coverage_published": None}), str(tmp_path))
    assert set(_lines(kept_figure().axes[0])) == set(dr.SIGNALS)


def _mr_rows():
    import jkofast.studies.multires as mr

    rows = []
    for grad, suffix in mr.GRADS:
        for i, (name, _, _) in enumerate(mr.METHODS):
            rows.append(
                {
                    "method": name + suffix,
                    "grad": grad,
                    "ms_per_query": 10.0 + i + (5 if suffix else 0),
                    "ndcg10": 0.6 + 0.01 * i,
                }
            )
    return rows


def test_mr_jko_pareto_series_and_plot(tmp_path, kept_figure):
    import jkofast.studies.multires as mr

    rows = _mr_rows()
    series = mr.pareto_series(rows)
    assert set(series) == {"unrolled", "implicit"}
    sam_betas = sorted(b for n, c, b in mr.METHODS if c == "sam")
    for by in series.values():
        assert set(by) == {"vanilla", "MR", "SAM"}
        assert [p[0] for p in by["SAM"]] == sam_betas and len(by["vanilla"]) == len(by["MR"]) == 1
    assert series["implicit"]["vanilla"] == [(None, 15.0, 0.6)]
    res = StudyResult("mr-jko", "scifact", 300, rows)
    assert mr.plot(res, str(tmp_path)) == ["mr_jko_pareto.png"]
    assert _is_png(tmp_path / "mr_jko_pareto.png")
    ax_u, ax_i = kept_figure().axes
    assert ax_u.get_title() == "grad = unrolled" and ax_i.get_title() == "grad = implicit"
    lines = _lines(ax_i)
    assert set(lines) == {"vanilla", "MR", "SAM"}
    assert lines["SAM"] == ([p[1] for p in series["implicit"]["SAM"]], [p[2] for p in series["implicit"]["SAM"]])
    assert ax_i.get_xscale() == "log"
    # the unrolled panel also carries the published points (SPEC A.9.6)
    assert {"vanilla (published)", "MR (published)", "SAM (published)"} <= set(_lines(ax_u))
    assert len([t for t in ax_i.texts if t.get_text().startswith("β=")]) == len(sam_betas)
