"""``jkofast embed``: the bundled layout, resume by chunk, checks before any work (tiny random BERT)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from beir_helpers import write_beir

from jkofast.cli import main

pytest.importorskip("tokenizers", reason='the encode extra: pip install "jkofast[encode]"')
pytest.importorskip("safetensors", reason='the encode extra: pip install "jkofast[encode]"')

from encode.encode_helpers import write_tiny_bert  # tests/encode/encode_helpers.py

DOCS = [
    ("d1", "Solar", "solar panels convert sunlight"),
    ("d2", "Wind", "wind turbines make power"),
    ("d3", "", "sunlight and wind"),
    ("d4", "Cat", "the cat sat on mat"),
    ("d5", "Dog", "dog and cat"),
]
QUERIES = (("q1", "sunlight power"), ("q2", "cat"), ("q3", "wind"))


def tiny_beir(root) -> str:
    return write_beir(root, DOCS, QUERIES, (("q1", "d1", 1), ("q2", "d4", 1)))


@pytest.fixture
def folders(tmp_path):
    return tiny_beir(tmp_path / "beir"), write_tiny_bert(tmp_path / "tiny-bert")


def test_embed_writes_the_bundled_layout(folders, capsys):
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.bert import encode
    from jkofast.encode.model import load_model

    ds_path, model = folders
    assert main(["embed", "--dataset", ds_path, "--model", model, "--batch-size", "2", "--threads", "1"]) == 0
    out = os.path.join(ds_path, "embeddings", "tiny-bert")
    assert sorted(os.listdir(os.path.join(ds_path, "embeddings"))) == ["tiny-bert"]  # parts folder removed
    assert sorted(os.listdir(out)) == [
        "docs.npy", "docs_digests.npy", "docs_ids.txt", "meta.json", "queries.npy", "queries_digests.npy",
        "query_ids.txt",
    ]  # fmt: skip
    bundled = os.path.join(os.path.dirname(__file__), "..", "..", "jkofast", "datasets", "scifact", "embeddings")
    assert np.load(os.path.join(bundled, "minilm-l6-v2", "docs.npy"), mmap_mode="r").dtype == np.float16
    docs = np.load(os.path.join(out, "docs.npy"))
    assert docs.dtype == np.float16 and docs.shape == (5, 8)
    assert open(os.path.join(out, "docs_ids.txt")).read().split() == [d[0] for d in DOCS]
    meta = json.load(open(os.path.join(out, "meta.json")))
    assert meta["n_docs"] == 5 and meta["n_queries"] == 3 and meta["dtype"] == "float16" and meta["dim"] == 8
    ds = load_dataset(ds_path)
    D, Q = ds.embeddings("tiny-bert")
    m = load_model(model)
    np.testing.assert_allclose(D, encode(m, ds.doc_texts(" ")), atol=2e-3)  # float16 storage
    np.testing.assert_allclose(Q, encode(m, ds.query_texts), atol=2e-3)
    assert "wrote" in capsys.readouterr().out
    assert main(["embed", "--dataset", ds_path, "--model", model]) == 0  # up to date: kept
    assert "up to date with the corpus: 0 texts re-encoded" in capsys.readouterr().out
    # then the main job on the folder, from the saved embeddings
    assert main(["run", "--dataset", ds_path, "--embeddings", "tiny-bert", "--config", "fast", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["methods"]
    assert {"bm25", "dense", "hybrid_rrf", "jko_blend", "sgr", "jko_sparse"} <= set(rows)


def test_embed_resumes_by_chunk(folders, monkeypatch):
    import jkofast.encode.embed as B
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.embed import embed_dataset
    from jkofast.encode.model import load_model

    ds_path, model = folders
    ds, m = load_dataset(ds_path), load_model(model)
    calls = []
    real = B.encode

    def flaky(model, texts, **kw):
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt  # interrupted during the second chunk
        return real(model, texts, **kw)

    monkeypatch.setattr(B, "encode", flaky)
    with pytest.raises(KeyboardInterrupt):
        embed_dataset(ds, m, chunk_size=2, name="x")
    parts = os.path.join(ds_path, "embeddings", "x.parts")
    names = sorted(os.listdir(parts))
    assert len(names) == 2 and names[0].startswith("docs-00000-") and names[1] == "manifest.json"
    assert not os.path.isdir(os.path.join(ds_path, "embeddings", "x"))  # the loader sees nothing
    assert load_dataset(ds_path).embeddings("x") is None
    calls.clear()
    monkeypatch.setattr(B, "encode", lambda model, texts, **kw: (calls.append(len(texts)), real(model, texts, **kw))[1])
    done = []
    embed_dataset(ds, m, chunk_size=2, name="x", progress=done.append)
    assert calls == [2, 1, 2, 1]  # docs chunks 1, 2 and the queries: chunk 0 was skipped
    assert sum(done) == 8
    fresh = embed_dataset(ds, m, chunk_size=4, name="y")
    for f in ("docs.npy", "queries.npy"):
        np.testing.assert_array_equal(
            np.load(os.path.join(ds_path, "embeddings", "x", f)), np.load(os.path.join(fresh, f))
        )


def test_stale_parts_are_discarded(folders):
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.embed import embed_dataset
    from jkofast.encode.model import load_model

    ds_path, model = folders
    parts = os.path.join(ds_path, "embeddings", "x.parts")
    os.makedirs(parts)
    np.save(os.path.join(parts, "docs-00000.npy"), np.full((2, 8), 7, np.float16))  # other chunking, no manifest
    out = embed_dataset(load_dataset(ds_path), load_model(model), chunk_size=2, name="x")
    assert not (np.load(os.path.join(out, "docs.npy")) == 7).any()


def test_embeddings_that_disagree_with_the_corpus_fail_before_work(folders, capsys):
    ds_path, model = folders
    assert main(["embed", "--dataset", ds_path, "--model", model, "--quiet"]) == 0
    out = os.path.join(ds_path, "embeddings", "tiny-bert")
    np.save(os.path.join(out, "docs.npy"), np.zeros((4, 8), np.float16))
    assert main(["run", "--dataset", ds_path, "--embeddings", "tiny-bert", "--quick"]) == 2
    assert "docs.npy: 4 rows for 5 corpus documents" in capsys.readouterr().err
    assert main(["embed", "--dataset", ds_path, "--model", model]) == 0  # a damaged folder is made again
    assert "8 texts re-encoded (5 documents, 3 queries; every text: its docs.npy" in capsys.readouterr().out
    np.save(os.path.join(out, "docs.npy"), np.zeros((4, 8), np.float16))
    with open(os.path.join(out, "query_ids.txt"), "w") as fh:
        fh.write("q1\nqX\nq3\n")
    np.save(os.path.join(out, "docs.npy"), np.zeros((5, 8), np.float16))
    assert main(["run", "--dataset", ds_path, "--embeddings", "tiny-bert", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "query_ids.txt:2: id 'qX' where the dataset has 'q2'" in err
    assert "[bm25_index]" not in err  # before any work


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--chunk-size", "0"], "--chunk-size must be >= 1"),
        (["--threads", "0"], "n_threads must be >= 1"),
        (["--model", "/nonexistent/model"], "model folder '/nonexistent/model' not found"),
    ],
)
def test_bad_arguments(folders, capsys, extra, match):
    ds_path, model = folders
    argv = ["embed", "--dataset", ds_path, *(["--model", model] if "--model" not in extra else []), *extra]
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_missing_model_file_and_architecture(folders, capsys):
    ds_path, model = folders
    os.remove(os.path.join(model, "tokenizer.json"))
    assert main(["embed", "--dataset", ds_path, "--model", model]) == 2
    assert "tokenizer.json not found" in capsys.readouterr().err


def test_missing_extra_names_the_pip_command(folders, capsys, monkeypatch):
    import sys

    ds_path, model = folders
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    assert main(["embed", "--dataset", ds_path, "--model", model]) == 2
    assert 'pip install "jkofast[encode]"' in capsys.readouterr().err


def test_resume_reencodes_a_part_whose_texts_changed(folders, monkeypatch):
    """Resume compared the model, chunking and ids, never the texts: an edited document kept its old vector."""
    import json as _json

    import jkofast.encode.embed as E
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.model import load_model

    ds_path, model = folders
    m = load_model(model)
    real = E.encode
    calls = []

    def stop_after_first(model, texts, **kw):
        calls.append(list(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(model, texts, **kw)

    monkeypatch.setattr(E, "encode", stop_after_first)
    with pytest.raises(KeyboardInterrupt):
        E.embed_dataset(load_dataset(ds_path), m, chunk_size=2, name="x")
    # the user edits the text of a document whose part is already saved, then resumes
    corpus = os.path.join(ds_path, "corpus.jsonl")
    lines = open(corpus, encoding="utf-8").read().splitlines()
    rec = _json.loads(lines[0])
    rec["text"] = "an entirely different abstract about something else"
    lines[0] = _json.dumps(rec)
    open(corpus, "w", encoding="utf-8").write("\n".join(lines) + "\n")
    ds = load_dataset(ds_path)
    calls.clear()
    monkeypatch.setattr(
        E, "encode", lambda model, texts, **kw: (calls.append(list(texts)), real(model, texts, **kw))[1]
    )
    out = E.embed_dataset(ds, m, chunk_size=2, name="x")
    assert calls[0] == ds.doc_texts(" ")[:2]  # chunk 0 encoded again: its texts changed
    fresh = E.embed_dataset(ds, m, chunk_size=2, name="fresh")
    for f in ("docs.npy", "queries.npy"):
        np.testing.assert_array_equal(np.load(os.path.join(out, f)), np.load(os.path.join(fresh, f)))


def test_resume_reencodes_a_damaged_part(folders, monkeypatch):
    import jkofast.encode.embed as E
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.model import load_model

    ds_path, model = folders
    ds, m = load_dataset(ds_path), load_model(model)
    real = E.encode
    calls = []

    def stop_after_first(model, texts, **kw):
        calls.append(len(texts))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(model, texts, **kw)

    monkeypatch.setattr(E, "encode", stop_after_first)
    with pytest.raises(KeyboardInterrupt):
        E.embed_dataset(ds, m, chunk_size=2, name="x")
    parts = os.path.join(ds_path, "embeddings", "x.parts")
    part = next(f for f in os.listdir(parts) if f.startswith("docs-00000-"))
    with open(os.path.join(parts, part), "r+b") as fh:
        fh.truncate(40)  # a damaged file (disk full, a copy cut short)
    calls.clear()
    monkeypatch.setattr(E, "encode", lambda model, texts, **kw: (calls.append(len(texts)), real(model, texts, **kw))[1])
    out = E.embed_dataset(ds, m, chunk_size=2, name="x")
    assert calls[0] == 2  # the damaged part was encoded again
    fresh = E.embed_dataset(ds, m, chunk_size=2, name="fresh")
    np.testing.assert_array_equal(np.load(os.path.join(out, "docs.npy")), np.load(os.path.join(fresh, "docs.npy")))
