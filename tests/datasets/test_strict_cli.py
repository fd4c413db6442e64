"""``--strict`` on the CLI commands that read qrels: unknown documents dropped with a warning, or an error."""

import json

import pytest

from jkofast.cli import main
from jkofast.datasets.beir import DataWarning


def _folder(root):
    (root / "qrels").mkdir(parents=True)
    docs = [("d1", "solar panels convert sunlight"), ("d2", "wind turbines make power"), ("d3", "the cat sat")]
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": x}) + "\n" for i, x in docs))
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": x}) + "\n" for i, x in (("q1", "sunlight power"), ("q2", "cat")))
    )
    # line 3 judges a document that is not in the corpus (the BEIR-tooling case of issue 14)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tmissing\t1\nq2\td3\t1\n")
    return str(root)


def test_search_and_evaluate_drop_unknown_documents(tmp_path, capsys):
    ds = _folder(tmp_path / "ds")
    run = str(tmp_path / "r.trec")
    with pytest.warns(DataWarning, match=r"test\.tsv: dropped 1 judgement"):
        assert main(["search", "--dataset", ds, "--method", "bm25", "--k", "3", "--out", run]) == 0
    capsys.readouterr()
    with pytest.warns(DataWarning, match=r"test\.tsv: dropped 1 judgement"):
        assert main(["evaluate", "--dataset", ds, "--run", run, "--n-boot", "10", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["n_queries"] == 2


def test_strict_keeps_the_error(tmp_path, capsys):
    ds = _folder(tmp_path / "ds")
    run = str(tmp_path / "r.trec")
    assert main(["search", "--dataset", ds, "--method", "bm25", "--out", run, "--strict"]) == 2
    assert "test.tsv:3: unknown document id 'missing'" in capsys.readouterr().err
    (tmp_path / "r.trec").write_text("q1 Q0 d1 1 1.0 t\n")
    assert main(["evaluate", "--dataset", ds, "--run", run, "--strict"]) == 2
    err = capsys.readouterr().err
    assert "jkofast evaluate: error:" in err and "test.tsv:3: unknown document id 'missing'" in err


def test_run_accepts_strict(tmp_path, capsys):
    """The qrels warning of `jkofast run` suggested --strict, which `jkofast run` rejected."""
    ds = _folder(tmp_path / "ds")
    argv = ["run", "--dataset", ds, "--no-sgr", "--quiet"]
    assert main([*argv, "--strict"]) == 2
    err = capsys.readouterr().err
    assert "jkofast run: error:" in err and "test.tsv:3: unknown document id 'missing'" in err
    with pytest.warns(DataWarning, match=r"--strict makes this an error"):
        assert main([*argv, "--json"]) == 0
