"""``jkofast index --method sgr`` (the streaming build) and ``jkofast search --index`` (mmap): issue #17 item 4."""

from __future__ import annotations

import json

import numpy as np
import pytest
from beir_helpers import write_beir

from jkofast.cli import main
from jkofast.sgr.retriever import SparseGeometricRetriever

DOCS = [
    ("d1", "Solar", "solar panels convert sunlight into power"),
    ("d2", "Wind", "wind turbines make power from wind"),
    ("d3", "", "sunlight and wind are renewable"),
    ("d4", "Cat", "the cat sat on the mat"),
    ("d5", "Dog", "dog and cat play in the sunlight"),
    ("d6", "Café", "crème brûlée and coffee"),
]


def _beir(root):
    write_beir(root, DOCS, (("q1", "sunlight power"), ("q2", "cat dog")), (("q1", "d1", 1), ("q2", "d5", 1)))
    return root


def test_index_corpus_then_search_index(tmp_path, capsys):
    ds = _beir(tmp_path / "ds")
    out = tmp_path / "ix"
    rc = main(
        ["index", "--method", "sgr", "--corpus", str(ds / "corpus.jsonl"), "--calibrate", "4", "--out", str(out),
         "--threads", "1", "--shard-size", "2", "--param", "pool_size=5", "--json"]
    )  # fmt: skip
    assert rc == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_docs"] == 6 and info["calibrate"] == 4 and info["n_shards"] == 3
    r = SparseGeometricRetriever.load(out, mmap=True)
    assert r.n_calibration_ == 4 and list(r.ids_) == [d[0] for d in DOCS]
    run = tmp_path / "run.trec"
    rc = main(["search", "--method", "sgr", "--dataset", str(ds), "--index", str(out), "--out", str(run), "--k", "3"])
    assert rc == 0
    lines = run.read_text().splitlines()
    assert lines and all(line.split()[0] in ("q1", "q2") for line in lines)
    idx, sc = r.search(["sunlight power"], k=3)
    q1 = [line.split() for line in lines if line.startswith("q1 ")]
    assert [x[2] for x in q1] == [DOCS[i][0] for i in idx[0] if i >= 0]


def test_index_dataset_equals_fit_and_in_memory_methods_unchanged(tmp_path, capsys):
    ds = _beir(tmp_path / "ds")
    out = tmp_path / "ix"
    assert main(["index", "--method", "sgr", "--dataset", str(ds), "--out", str(out), "--param", "pool_size=5"]) == 0
    r = SparseGeometricRetriever.load(out)
    ref = SparseGeometricRetriever(pool_size=5).fit([f"{t} {x}" for _, t, x in DOCS], ids=[d[0] for d in DOCS])
    a, b = ref.search(["sunlight power", "cat"], k=4), r.search(["sunlight power", "cat"], k=4)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert main(["index", "--method", "bm25", "--dataset", str(ds), "--out", str(tmp_path / "bm")]) == 0
    assert "indexed 6 docs" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--method", "sgr", "--calibrate", "0"], "--calibrate must be >= 1"),
        (["--method", "sgr", "--shard-size", "0"], "--shard-size must be >= 1"),
        (["--method", "bm25", "--calibrate", "5"], "apply to --method sgr only"),
        (["--method", "tfidf", "--corpus", "x.jsonl"], "apply to --method sgr only"),
        (["--method", "bm25", "--seed", "3"], "--seed apply to --method sgr only"),
        (["--method", "bm25", "--shard-size", "10", "--no-resume"], "--shard-size, --no-resume apply to"),
        (["--method", "tfidf", "--calibrate-mode", "uniform", "--quiet"], "--calibrate-mode, --quiet apply"),
        (["--method", "sgr", "--corpus", "missing.jsonl"], "not found"),
    ],
)
def test_bad_arguments(tmp_path, capsys, extra, match):
    ds = _beir(tmp_path / "ds")
    assert main(["index", "--dataset", str(ds), "--out", str(tmp_path / "ix"), *extra]) == 2
    assert match in capsys.readouterr().err


def test_bad_corpus_line_exit_2_names_file_and_line(tmp_path, capsys):
    ds = _beir(tmp_path / "ds")
    with open(ds / "corpus.jsonl", "a") as fh:
        fh.write('{"_id": "d7", "text": "trunc')
    assert main(["index", "--method", "sgr", "--dataset", str(ds), "--out", str(tmp_path / "ix"), "--quiet"]) == 2
    assert "corpus.jsonl:7: invalid JSON" in capsys.readouterr().err


def test_calibrate_above_corpus_warns_and_clamps(tmp_path, capsys):
    ds = _beir(tmp_path / "ds")
    with pytest.warns(UserWarning, match="exceeds the corpus"):
        rc = main(
            ["index", "--method", "sgr", "--dataset", str(ds), "--out", str(tmp_path / "ix"), "--calibrate", "99"]
        )
    assert rc == 0
    assert SparseGeometricRetriever.load(tmp_path / "ix").n_calibration_ == 6
