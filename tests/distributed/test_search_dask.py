"""``jkofast search --dask``: the saved index loaded once per worker, runs identical to the single-machine ones."""

import json
import os

import pytest
from beir_helpers import write_beir

from jkofast.cli import main

pytest.importorskip("distributed")


@pytest.mark.parametrize("method", ["bm25", "tfidf", "sgr"])
def test_search_runs_identical(tmp_path, data_dir, dask_client, method, capsys):
    ds = os.path.join(data_dir, "beir_tiny")
    idx = str(tmp_path / "idx")
    assert main(["index", "--dataset", ds, "--method", method, "--out", idx]) == 0
    base = ["search", "--dataset", ds, "--method", method, "--index", idx, "--split", "all", "--k", "3"]
    assert main([*base, "--out", str(tmp_path / "a.trec")]) == 0
    capsys.readouterr()
    args = [*base, "--out", str(tmp_path / "b.trec"), "--dask", dask_client.scheduler.address, "--chunk-size", "1"]
    assert main([*args, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()
    assert sum(w["queries"] for w in info["workers"].values()) == info["n_queries"] == 4
    assert sum(w["chunks"] for w in info["workers"].values()) == 4


def test_search_dask_needs_a_saved_index(tmp_path, data_dir, capsys):
    ds = os.path.join(data_dir, "beir_tiny")
    assert main(["search", "--dataset", ds, "--out", str(tmp_path / "a.trec"), "--dask", "local:1"]) == 2
    assert "jkofast search: error: --dask needs --index" in capsys.readouterr().err


def test_search_dask_checks_the_index_method(tmp_path, data_dir, dask_client, capsys):
    ds = os.path.join(data_dir, "beir_tiny")
    idx = str(tmp_path / "idx")
    assert main(["index", "--dataset", ds, "--method", "tfidf", "--out", idx]) == 0
    args = ["search", "--dataset", ds, "--method", "bm25", "--index", idx, "--out", str(tmp_path / "a.trec")]
    assert main([*args, "--dask", dask_client.scheduler.address]) == 2
    assert "--index holds a tfidf index, not bm25" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["bm25", "sgr"])
def test_search_dask_reports_why_a_row_is_empty_as_the_single_machine_run_does(tmp_path, dask_client, method, capsys):
    docs = [("d1", "", "solar panels convert sunlight"), ("d2", "", "wind turbines make power"), ("d3", "", "cats")]
    queries = [("q1", "solar power"), ("q2", "zzzz qqqq"), ("q3", "wind")]
    ds = write_beir(str(tmp_path / "beir"), docs, queries, [("q1", "d1", 1)])
    idx = str(tmp_path / "idx")
    assert main(["index", "--dataset", ds, "--method", method, "--out", idx]) == 0
    base = ["search", "--dataset", ds, "--method", method, "--index", idx, "--split", "all", "--k", "2", "--json"]
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "a.trec")]) == 0
    single = json.loads(capsys.readouterr().out)
    args = [*base, "--out", str(tmp_path / "b.trec"), "--dask", dask_client.scheduler.address, "--chunk-size", "1"]
    assert main(args) == 0
    on_dask = json.loads(capsys.readouterr().out)
    assert on_dask["unanswered"] == single["unanswered"]
    assert "q2" in json.dumps(single["unanswered"])  # the query with no known term is named, with its reason
    assert (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()
