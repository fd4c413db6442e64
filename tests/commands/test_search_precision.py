"""``jkofast search`` writes full-precision scores (the shortest repr that reads back to the same float32)."""

import numpy as np

from jkofast.cli import main
from jkofast.datasets.beir import load_dataset
from jkofast.pools.retrievers import get_retriever


def test_search_scores_round_trip(tmp_path):
    out = tmp_path / "run.trec"
    assert (
        main(
            [
                "search",
                "--dataset",
                "scifact",
                "--method",
                "bm25",
                "--split",
                "test",
                "--k",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")
    idx, sc = get_retriever("bm25").fit(ds.doc_texts(". ")).search([ds.queries[q] for q in qids[:20]], 5)
    lines = [ln.split() for ln in out.read_text().splitlines()]
    by_q = {}
    for q, _, d, _, s, _ in lines:
        by_q.setdefault(q, []).append((d, s))
    for i, q in enumerate(qids[:20]):
        got = by_q[q]
        assert [d for d, _ in got] == [ds.doc_ids[j] for j in idx[i] if j >= 0]
        for (_, text), v in zip(got, sc[i], strict=False):
            assert np.float32(float(text)) == np.float32(v)  # exact, not rounded to 6 decimals
