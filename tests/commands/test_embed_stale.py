"""Embeddings tied to their corpus: a stale folder is refused by its readers and updated in place by ``embed``.

The probe's case: ``embed``, then one document's text edited (same id), then ``embed`` again kept the old
vector (0 texts encoded) and ``run`` ranked with it.  Now every reader compares the folder's recorded
text digests with the corpus and ``embed`` encodes exactly the texts that changed.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from beir_helpers import TINY_DOCS, TINY_QUERIES, write_beir

from jkofast.cli import main

pytest.importorskip("tokenizers", reason='the encode extra: pip install "jkofast[encode]"')
pytest.importorskip("safetensors", reason='the encode extra: pip install "jkofast[encode]"')

from encode.encode_helpers import write_tiny_bert  # tests/encode/encode_helpers.py

DOCS, QUERIES = TINY_DOCS, TINY_QUERIES
QRELS = (("q1", "d1", 1), ("q2", "d4", 1))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("m") / "tiny-bert")


def _fresh(ds_path, model, name="fresh"):
    """Arrays of a from-scratch embedding of the folder as it is now (the oracle of an update)."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.embed import embed_dataset

    out = embed_dataset(load_dataset(ds_path), model, name=name, force=True)
    return np.load(os.path.join(out, "docs.npy")), np.load(os.path.join(out, "queries.npy"))


def _embed(ds_path, model, *extra):
    return main(["embed", "--dataset", ds_path, "--model", model, "--quiet", *extra])


def test_edited_document_is_refused_then_reencoded_alone(tmp_path, model, capsys, monkeypatch):
    import jkofast.encode.embed as E
    from jkofast.datasets.beir import StaleEmbeddings, load_dataset

    ds_path = write_beir(tmp_path / "b", DOCS, QUERIES, QRELS)
    assert _embed(ds_path, model) == 0
    out = os.path.join(ds_path, "embeddings", "tiny-bert")
    meta = json.load(open(os.path.join(out, "meta.json")))
    assert "model_path" not in meta and os.path.dirname(model) not in json.dumps(meta)  # no machine path
    assert meta["model"] == "tiny-bert" and len(meta["model_sha256"]) == 64
    capsys.readouterr()
    edited = [d if d[0] != "d3" else ("d3", "", "the cat and the dog") for d in DOCS]
    write_beir(tmp_path / "b", edited, QUERIES, QRELS)
    with pytest.raises(StaleEmbeddings, match="document 'd3' edited"):
        load_dataset(ds_path).embeddings("tiny-bert")
    # every reader with the dataset refuses it, naming the folder, the document and the fix
    assert main(["run", "--dataset", ds_path, "--embeddings", "tiny-bert", "--quick", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and out in err and "document 'd3' edited" in err
    assert f"jkofast embed --dataset {ds_path} --name tiny-bert --model M" in err
    assert main(["tune", "--dataset", ds_path, "--embeddings", "tiny-bert", "--folds", "2"]) == 2
    assert "document 'd3' edited" in capsys.readouterr().err
    calls = []
    real = E.encode
    monkeypatch.setattr(E, "encode", lambda m, texts, **kw: (calls.append(list(texts)), real(m, texts, **kw))[1])
    assert _embed(ds_path, model) == 0
    said = capsys.readouterr().out
    assert "1 texts re-encoded (1 documents, 0 queries" in said and "7 kept" in said
    assert calls == [["the cat and the dog"]]
    D, Q = load_dataset(ds_path).embeddings("tiny-bert")
    fd, fq = _fresh(ds_path, model)
    np.testing.assert_allclose(D, fd, atol=2e-3)
    np.testing.assert_array_equal(Q, fq)
    calls.clear()
    assert _embed(ds_path, model) == 0 and calls == []
    assert "0 texts re-encoded" in capsys.readouterr().out
    assert _embed(ds_path, model, "--force") == 0 and sum(map(len, calls)) == 8  # --force: every text


def test_added_removed_and_reordered_texts(tmp_path, model, capsys):
    from jkofast.datasets.beir import StaleEmbeddings, load_dataset

    ds_path = write_beir(tmp_path / "b", DOCS, QUERIES, QRELS)
    assert _embed(ds_path, model) == 0
    no_d2, no_q2 = [d for d in DOCS if d[0] != "d2"], [q for q in QUERIES if q[0] != "q2"]
    cases = [  # each step changes the folder of the step before
        ([*DOCS, ("d6", "", "rain river")], QUERIES, "document 'd6' added", "1 texts re-encoded (1 documents"),
        (no_d2, QUERIES, "document 'd2' removed", "0 texts re-encoded (0 documents"),
        (no_d2, no_q2, "query 'q2' removed", "0 texts re-encoded"),
        (no_d2[::-1], no_q2, "order changed", "0 texts re-encoded"),
        (no_d2[::-1], [no_q2[0], ("q3", "wind energy")], "query 'q3' edited", "1 texts re-encoded (0 documents, 1"),
    ]
    for docs, queries, refusal, update in cases:
        write_beir(tmp_path / "b", docs, queries, [r for r in QRELS if r[1] in {d[0] for d in docs}])
        with pytest.raises(StaleEmbeddings, match=refusal):
            load_dataset(ds_path).embeddings("tiny-bert")
        capsys.readouterr()
        assert _embed(ds_path, model) == 0
        assert update in capsys.readouterr().out
        D, Q = load_dataset(ds_path).embeddings("tiny-bert")
        fd, fq = _fresh(ds_path, model)
        np.testing.assert_allclose(D, fd, atol=2e-3)
        np.testing.assert_allclose(Q, fq, atol=2e-3)


def test_folder_without_digests_warns_and_embed_encodes_it_again(tmp_path, model, capsys):
    from jkofast.datasets.beir import DataWarning, load_dataset

    ds_path = write_beir(tmp_path / "b", DOCS, QUERIES, QRELS)
    assert _embed(ds_path, model) == 0
    out = os.path.join(ds_path, "embeddings", "tiny-bert")
    meta = json.load(open(os.path.join(out, "meta.json")))
    del meta["corpus_sha256"]  # as written by an older jkofast
    json.dump(meta, open(os.path.join(out, "meta.json"), "w"))
    with pytest.warns(DataWarning, match="records no text digests"):
        load_dataset(ds_path).embeddings("tiny-bert")
    capsys.readouterr()
    assert _embed(ds_path, model) == 0
    assert "8 texts re-encoded (5 documents, 3 queries; every text: no digests recorded" in capsys.readouterr().out
    assert "corpus_sha256" in json.load(open(os.path.join(out, "meta.json")))


def test_other_weights_are_refused_without_force(tmp_path, model, capsys):
    ds_path = write_beir(tmp_path / "b", DOCS, QUERIES, QRELS)
    assert _embed(ds_path, model) == 0
    other = write_tiny_bert(tmp_path / "other", seed=1)
    assert _embed(ds_path, other, "--name", "tiny-bert") == 2
    assert "was made with other weights" in capsys.readouterr().err
    assert _embed(ds_path, other, "--name", "tiny-bert", "--force") == 0


def test_run_embed_updates_a_stale_folder(tmp_path, model):
    from jkofast.studies.main_job import run_main_job

    ds_path = write_beir(tmp_path / "b", DOCS, QUERIES, QRELS)
    assert _embed(ds_path, model) == 0
    write_beir(tmp_path / "b", [d if d[0] != "d1" else ("d1", "", "rain") for d in DOCS], QUERIES, QRELS)
    res = run_main_job(ds_path, progress=False, embed=True, model=model, methods=("hybrid_rrf",))
    assert any("embeddings made with tiny-bert" in n for n in res.summary()["notes"])
    from jkofast.datasets.beir import load_dataset

    assert load_dataset(ds_path).embeddings("tiny-bert") is not None  # fresh now
