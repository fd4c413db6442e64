"""``jkofast score``: a pool file's pairs scored by a tiny random cross-encoder, the file ``--scores`` reads,
resume by chunk, pairs naming unknown ids reported, checks before any work."""

from __future__ import annotations

import os

import numpy as np
import pytest
from beir_helpers import write_beir

from jkofast.cli import main

pytest.importorskip("tokenizers", reason='the encode extra: pip install "jkofast[encode]"')
pytest.importorskip("safetensors", reason='the encode extra: pip install "jkofast[encode]"')

from encode.cross_helpers import write_cross_encoder  # tests/encode/cross_helpers.py

DOCS = [
    ("d1", "Solar", "solar panels convert sunlight"),
    ("d2", "Wind", "wind turbines make power"),
    ("d3", "", "sunlight and wind"),
    ("d4", "Cat", "the cat sat on mat"),
    ("d5", "Dog", "dog and cat"),
]
QUERIES = (("q1", "sunlight power"), ("q2", "cat"), ("q3", "wind"))
POOLS = [("q2", "d4"), ("q2", "d5"), ("q2", "d1"), ("q1", "d1"), ("q1", "d3"), ("q1", "d2"), ("q1", "d9"),
         ("q7", "d1"), ("q3", "d2")]  # fmt: skip


@pytest.fixture
def setup(tmp_path):
    ds = write_beir(tmp_path / "beir", DOCS, QUERIES, (("q1", "d1", 1), ("q2", "d4", 1)))
    model = write_cross_encoder(tmp_path / "ce", model_max_length=12)
    pools = tmp_path / "pools.run"
    pools.write_text("".join(f"{q} Q0 {d} {i + 1} {10 - i} bm25\n" for i, (q, d) in enumerate(POOLS)))
    return ds, model, str(pools), tmp_path


def _expected(model, pairs):
    from jkofast.encode.cross import cross_scores, load_cross_encoder

    m = load_cross_encoder(model)
    q, d = dict(QUERIES), {i: f"{t} {x}".strip() for i, t, x in DOCS}  # title + " " + text
    return cross_scores(m, [q[a] for a, _ in pairs], [d[b] for _, b in pairs])


def test_score_writes_the_scores_file(setup, capsys):
    from jkofast.jko.energy import read_score_file

    ds, model, pools, tmp = setup
    out = str(tmp / "ce.scores")
    assert main(["score", "--cross-encoder", model, "--pools", pools, "--dataset", ds, "--out", out,
                 "--threads", "1"]) == 0  # fmt: skip
    io = capsys.readouterr()
    assert "2 pairs of" in io.err and "q1/d9" in io.err and "q7/d1" in io.err  # unknown doc / query: named
    assert "wrote" in io.out and "7 pairs, 3 queries" in io.out and "max_length 12" in io.out
    kept = [p for p in POOLS if p not in (("q1", "d9"), ("q7", "d1"))]
    lines = [ln.split() for ln in open(out).read().splitlines()]
    assert [(a, b) for a, b, _ in lines] == kept  # the pool file's order
    want = _expected(model, kept)
    got = read_score_file(out)  # the reader of run / rerank / tune --scores
    # one chunk, one batch: the pairs packed as cross_scores packs them, so the float32 scores read back exactly
    np.testing.assert_array_equal(np.array([got[a][b] for a, b in kept], np.float32), want)
    assert not os.path.exists(out + ".parts")
    assert main(["score", "--cross-encoder", model, "--pools", pools, "--dataset", ds, "--out", out]) == 0
    assert "exists (pass --force" in capsys.readouterr().out


def test_score_depth(setup):
    ds, model, pools, tmp = setup
    out = str(tmp / "d.scores")
    assert main(["score", "--cross-encoder", model, "--pools", pools, "--dataset", ds, "--out", out, "--depth", "2",
                 "--quiet"]) == 0  # fmt: skip
    pairs = [tuple(ln.split()[:2]) for ln in open(out).read().splitlines()]
    assert pairs == [("q2", "d4"), ("q2", "d5"), ("q1", "d1"), ("q1", "d3"), ("q3", "d2")]


def test_score_resumes_from_finished_chunks(setup):
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.cross import load_cross_encoder
    from jkofast.encode.score import score_pairs

    ds_path, model, _, tmp = setup
    ds = load_dataset(ds_path)
    m = load_cross_encoder(model)
    pairs = [p for p in POOLS if p not in (("q1", "d9"), ("q7", "d1"))]
    docs = dict(zip(ds.doc_ids, ds.doc_texts(" "), strict=True))
    out = str(tmp / "r.scores")
    seen = []

    def stop_after_first_chunk(n):
        seen.append(n)
        if sum(seen) > 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        score_pairs(m, pairs, ds.queries, docs, out, chunk_size=3, progress=stop_after_first_chunk)
    assert not os.path.exists(out) and len([f for f in os.listdir(out + ".parts") if f.startswith("scores-")]) == 1
    info = score_pairs(m, pairs, ds.queries, docs, out, chunk_size=3)
    assert info["reused"] == 3 and info["n_pairs"] == 7
    fresh = str(tmp / "fresh.scores")
    score_pairs(m, pairs, ds.queries, docs, fresh, chunk_size=3)  # the same packing: the same bits
    assert open(out).read() == open(fresh).read()
    # an edited text: its chunk is scored again, not read back
    with pytest.raises(KeyboardInterrupt):
        score_pairs(m, pairs, ds.queries, docs, out, chunk_size=3, progress=stop_after_first_chunk)
    edited = {**ds.queries, "q2": "dog"}
    info = score_pairs(m, pairs, edited, docs, out, chunk_size=3)
    assert info["reused"] == 0


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--depth", "-1"], "--depth must be >= 0"),
        (["--label", "1"], "single output"),
        (["--max-length", "999"], "exceeds the model's 64 position"),
    ],
)
def test_score_refuses_before_work(setup, capsys, extra, match):
    ds, model, pools, tmp = setup
    out = str(tmp / "x.scores")
    assert main(["score", "--cross-encoder", model, "--pools", pools, "--dataset", ds, "--out", out, *extra]) == 2
    assert match in capsys.readouterr().err and not os.path.exists(out)


def test_score_missing_files(setup, capsys):
    ds, model, pools, tmp = setup
    out = str(tmp / "x.scores")
    assert main(["score", "--cross-encoder", str(tmp / "nope"), "--pools", pools, "--dataset", ds, "--out", out]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["score", "--cross-encoder", model, "--pools", str(tmp / "p"), "--dataset", ds, "--out", out]) == 2
    assert "--pools" in capsys.readouterr().err


def test_the_paper_energy_workflow(setup, capsys):
    """run --runs (pools.run) -> score --pools -> run --scores: the rerank row and the cross-encoder energy."""
    from encode.encode_helpers import write_tiny_bert

    ds, model, _, tmp = setup
    enc = write_tiny_bert(tmp / "tiny-bert")
    runs = str(tmp / "runs")
    base = ["run", "--dataset", ds, "--quiet", "--no-sgr", "--config", "fast"]
    assert main([*base, "--embed", "--model", enc, "--methods", "hybrid_rrf", "--runs", runs]) == 0
    assert "pools.run" in capsys.readouterr().out
    out = str(tmp / "ce.scores")
    assert main(["score", "--cross-encoder", model, "--pools", os.path.join(runs, "pools.run"), "--dataset", ds,
                 "--out", out, "--quiet"]) == 0  # fmt: skip
    n_pool = sum(1 for _ in open(os.path.join(runs, "pools.run")))
    assert sum(1 for _ in open(out)) == n_pool  # every pool pair scored
    capsys.readouterr()
    args = [*base, "--embeddings", "tiny-bert", "--scores", out, "--methods", "hybrid_rrf,rerank,jko_blend"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "\nrerank " in text and "vs rerank [95% CI]" in text and "(0 pool pairs missing)" in text
