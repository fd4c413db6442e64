"""Run files carry full precision: the shortest repr that round-trips the score dtype (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from jkofast.eval.fastread import read_run_arrays
from jkofast.eval.runio import format_run, shortest_repr, topk_to_ragged
from jkofast.eval.trec import RunArrays, read_run, write_run


def _f32_edge_values():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.random(200).astype(np.float32) * 30,
            rng.standard_normal(200).astype(np.float32) * 1e-3,
            np.array([0.1, 1 / 3, 2.0, -0.0, 0.0, 1e-7, 123456789.0, 3e38, -1.5e-38, 16777217.0], np.float32),
            np.nextafter(np.float32(1.0), np.float32(2.0), dtype=np.float32)[None],  # 1 + ulp
        ]
    ).astype(np.float32)
    return x


def test_shortest_repr_float32_round_trips_and_matches_numpy():
    x = _f32_edge_values()
    s = shortest_repr(x)
    assert s == [str(v) for v in x]  # numpy's shortest unique repr (Dragon4) is the oracle
    assert_array_equal(np.array([float(t) for t in s]).astype(np.float32), x)  # exact round trip
    digits = [len(t.split("e")[0].replace("-", "").replace(".", "").strip("0")) for t in s]
    assert max(digits) <= 9  # float32 needs at most 9 significant digits
    assert shortest_repr(np.array([0.1], np.float32)) == ["0.1"]  # '%.9g' wrote 0.100000001


def test_shortest_repr_float64_is_repr():
    x = np.random.default_rng(1).standard_normal(50) * 10.0 ** np.arange(-25, 25)
    assert shortest_repr(x) == [repr(v) for v in x.tolist()]
    assert shortest_repr(x.tolist()) == [repr(v) for v in x.tolist()]
    assert shortest_repr(np.zeros(0)) == []
    with pytest.raises(TypeError, match="float32 or float64"):
        shortest_repr(x, np.float16)


def test_format_run_shortest_default():
    sc = np.array([0.1, 0.30000001, 1 / 3], np.float32)
    off = np.array([0, 2, 3], np.int64)
    text = format_run(["a", "b"], off, ["x", "y", "z"], sc, "t")
    assert text == "a Q0 x 1 0.1 t\na Q0 y 2 0.3 t\nb Q0 z 1 0.33333334 t\n"
    # float32 values passed as Python floats: say which dtype they round-trip
    assert format_run(["a", "b"], off, ["x", "y", "z"], sc.tolist(), "t", score_dtype=np.float32) == text
    # verbatim queries keep their strings; the others get the shortest repr
    mixed = format_run(["a", "b"], off, ["x", "y", "z"], [0.1, 0.25, "7.50"], "t", verbatim=np.array([False, True]))
    assert mixed == "a Q0 x 1 0.1 t\na Q0 y 2 0.25 t\nb Q0 z 1 7.50 t\n"


def _near_tie_scores(nq=20, k=30, seed=0):
    """float32 scores decreasing by a few ulps: every %.6f rounding makes ties (SGR's close scores)."""
    rng = np.random.default_rng(seed)
    base = (rng.random(nq) * 5 + 1).astype(np.float32)
    sc = np.empty((nq, k), np.float32)
    for i in range(nq):
        v = base[i]
        for j in range(k):
            sc[i, j] = v
            for _ in range(int(rng.integers(1, 4))):
                v = np.nextafter(v, np.float32(0), dtype=np.float32)
    return sc


def _trec_resort(run: dict) -> dict:
    """trec_eval's order: score desc, then doc id desc."""
    return {q: [d for d, _ in sorted(r.items(), key=lambda t: (t[1], t[0]), reverse=True)] for q, r in run.items()}


@pytest.mark.parametrize("as_dtype", [np.float32, np.float64])
def test_written_run_reads_back_exactly_and_keeps_its_order(tmp_path, as_dtype):
    sc = _near_tie_scores().astype(as_dtype)
    nq, k = sc.shape
    rng = np.random.default_rng(1)
    idx = np.stack([rng.permutation(1000)[:k] for _ in range(nq)]).astype(np.int64)
    docs = [f"d{i:04d}" for i in range(1000)]
    qids = [f"q{i}" for i in range(nq)]
    p = tmp_path / "r.trec"
    write_run(p, (idx, sc), query_ids=qids, doc_ids=docs)
    back = read_run_arrays(p)
    assert_array_equal(back.scores.astype(as_dtype), sc.ravel())  # exact scores back
    order = {q: [docs[j] for j in idx[i]] for i, q in enumerate(qids)}
    assert _trec_resort(read_run(p)) == order  # re-sorting by score changes nothing
    # the old 6-decimal writer made ties, and trec_eval's re-sort then reordered by doc id
    off, dlist, slist = topk_to_ragged(idx, sc, docs)
    old = tmp_path / "old.trec"
    old.write_text(format_run(qids, off, dlist, slist, "t", score_format="%.6f"))
    assert _trec_resort(read_run(old)) != order
    # the search writer's path: topk_to_ragged + format_run with the scores' dtype
    new = tmp_path / "new.trec"
    new.write_text(format_run(qids, off, dlist, slist, "t", score_dtype=sc.dtype))
    assert new.read_text() == p.read_text().replace(" jkofast\n", " t\n")


def test_run_arrays_float32_shortest(tmp_path):
    ra = RunArrays(["q"], np.array([0, 3]), np.array(["a", "b", "c"]), np.array([0.1, 0.2, 0.7], np.float32))
    p = tmp_path / "a.trec"
    write_run(p, ra)
    assert [ln.split()[4] for ln in p.read_text().splitlines()] == ["0.1", "0.2", "0.7"]  # was 0.100000001 ...
    write_run(p, {"q": {"a": 0.1, "b": 1 / 3}})
    assert [ln.split()[4] for ln in p.read_text().splitlines()] == ["0.3333333333333333", "0.1"]


def test_sgr_ranking_survives_a_written_run(tmp_path):
    """SGR's ranking (best first, exact ties by lowest row) is what a trec_eval-style re-sort of its run gives."""
    from jkofast.sgr.retriever import SparseGeometricRetriever

    texts = [
        "solar panels convert sunlight into power",
        "wind turbines make power from wind",
        "sunlight and wind are renewable power",
        "the cat sat on the mat",
        "power grids carry solar and wind power",
        "batteries store solar power for the night",
    ]
    r = SparseGeometricRetriever(pool_size=6).fit(texts)
    qs = ["solar power", "wind power", "sunlight"]
    idx, sc = r.search(qs, k=6)
    assert sc.dtype == np.float32
    ids = [f"d{i}" for i in range(len(texts))]
    p = tmp_path / "sgr.trec"
    write_run(p, (idx, sc), query_ids=[f"q{i}" for i in range(3)], doc_ids=ids)
    back = read_run(p)
    for i in range(3):
        got = np.array(list(back[f"q{i}"].values())).astype(np.float32)
        keep = idx[i] >= 0
        assert_array_equal(got, sc[i][keep])
        # SGR caps its scores strictly decreasing in rank (often 1 float32 ulp apart: %.6f made them ties)
        assert np.all(np.diff(sc[i][keep]) < 0)
        assert _trec_resort({"q": back[f"q{i}"]})["q"] == [ids[j] for j in idx[i][keep]]
