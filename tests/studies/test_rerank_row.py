"""The main job's ``rerank`` row (the pool ranked by the user's scores, the published "Cross-Enc" row) and
the paired differences against it."""

from __future__ import annotations

import numpy as np
import pytest

from jkofast.studies.main_job import run_main_job


def _dense_scores_file(path, n_queries):
    """Scores = the dense cosine of every (query, corpus document): the pool ranked by them is the dense top-k."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.pools.candidates import dense_scores

    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")[:n_queries]
    D, Q = ds.embeddings()
    row = {q: i for i, q in enumerate(ds.query_ids)}
    S = dense_scores(D, Q[[row[q] for q in qids]])
    with open(path, "w") as fh:
        for i, q in enumerate(qids):
            fh.writelines(f"{q} {d} {float(S[i, j]):.9g}\n" for j, d in enumerate(ds.doc_ids))
    return str(path)


def test_rerank_row_and_its_paired_differences(tmp_path):
    scores = _dense_scores_file(tmp_path / "s.txt", 4)
    res = run_main_job("scifact", n_queries=4, include_sgr=False, progress=False, scores_file=scores,
                       methods=("hybrid_rrf", "rerank", "blend"), runs=str(tmp_path / "runs"))  # fmt: skip
    assert list(res.methods) == ["bm25", "dense", "hybrid_rrf", "rerank", "blend"]
    # the dense top-20 always survives the hybrid pool's cut (RRF >= 1/81 from the dense list alone), so the
    # pool ranked by the dense cosine is the full-corpus dense ranking
    runs = {}
    for m in ("dense", "rerank"):
        lines = [ln.split() for ln in open(tmp_path / "runs" / f"{m}.run")]
        runs[m] = [(ln[0], ln[2]) for ln in lines]
    assert runs["rerank"] == runs["dense"]
    pools = [ln.split() for ln in open(tmp_path / "runs" / "pools.run")]  # the pools, in fused order
    assert len(pools) == 4 * 200 and [int(ln[3]) for ln in pools[:3]] == [1, 2, 3]
    assert set(runs["rerank"]) <= {(ln[0], ln[2]) for ln in pools}
    np.testing.assert_array_equal(res.methods["rerank"]["ndcg"], res.methods["dense"]["ndcg"])
    s = res.summary()["methods"]
    assert "diff_vs_rerank" not in s["rerank"] and s["rerank"]["diff_vs_hybrid_rrf"] == s["dense"]["diff_vs_hybrid_rrf"]
    d = np.asarray(res.methods["blend"]["ndcg"]) - np.asarray(res.methods["rerank"]["ndcg"])
    assert s["blend"]["diff_vs_rerank"][0] == pytest.approx(d.mean())
    assert s["dense"]["diff_vs_rerank"] == [0.0, 0.0, 0.0]
    table = res.table()
    head = next(ln for ln in table.splitlines() if ln.startswith("method"))
    assert "vs hybrid_rrf [95% CI]" in head and "vs rerank [95% CI]" in head
    row = next(ln for ln in table.splitlines() if ln.startswith("rerank "))
    assert row.count("--") == 1  # no difference against itself


def test_rerank_row_by_default_with_scores_only(tmp_path):
    from jkofast.studies.main_job import DEFAULT_METHODS, MainJobOptions

    scores = _dense_scores_file(tmp_path / "s.txt", 2)
    assert MainJobOptions(scores_file=scores).checked().methods == ("hybrid_rrf", "rerank", *DEFAULT_METHODS[1:])
    assert MainJobOptions(scores_file=scores, methods=("blend",)).checked().methods == ("blend",)  # as listed
    assert MainJobOptions().checked().methods == DEFAULT_METHODS
    plain = run_main_job("scifact", n_queries=2, include_sgr=False, progress=False, methods=("hybrid_rrf",))
    assert "rerank" not in plain.methods and "vs rerank" not in plain.table()
    with pytest.raises(ValueError, match="'rerank' ranks the pool by your scores: it needs scores_file"):
        run_main_job("scifact", n_queries=2, progress=False, methods=("rerank",))
