"""``jkofast search --queries FILE``: ad-hoc queries (JSONL or TSV) instead of a split's."""

from __future__ import annotations

import gzip
import json
import warnings

import pytest
from beir_helpers import write_beir

from jkofast.cli import main
from jkofast.datasets.beir import DataWarning, read_query_file
from jkofast.pools.retrievers import get_retriever

DOCS = [
    ("d0", "Solar", "solar panels turn sunlight into power"),
    ("d1", "Wind", "wind turbines turn moving air into power"),
    ("d2", "River", "a river carries rain water to the sea"),
    ("d3", "Cats", "cats sleep on the warm mat all day"),
]


@pytest.fixture()
def folder(tmp_path):
    return write_beir(tmp_path / "beir", DOCS, [("q1", "solar power")], [("q1", "d0", 1)])


def _run(path) -> dict:
    by_q: dict = {}
    for ln in path.read_text().splitlines():
        q, _, d, rank, score, _tag = ln.split()
        by_q.setdefault(q, []).append(d)
    return by_q


@pytest.mark.parametrize("method", ["bm25", "sgr"])
@pytest.mark.parametrize("fmt", ["jsonl", "tsv", "tsv-header"])
def test_search_runs_the_queries_of_a_file(folder, tmp_path, capsys, method, fmt):
    queries = [("a1", "wind turbines"), ("b_2", "cats on a mat"), ("c3", "river rain")]
    path = tmp_path / f"q.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries))
    else:
        head = "id\ttext\n" if fmt == "tsv-header" else ""
        path.write_text(head + "\n".join(f"{i}\t{t}" for i, t in queries) + "\n\n")
    out = tmp_path / "run.trec"
    assert main(["search", "--dataset", folder, "--method", method, "--queries", str(path), "--k", "2",
                 "--out", str(out), "--json", "--threads", "1"]) == 0  # fmt: skip
    info = json.loads(capsys.readouterr().out)
    assert info["n_queries"] == 3 and info["queries"] == str(path) and info["split"] is None
    run = _run(out)
    assert list(run) == [q for q, _ in queries]  # file order, the file's ids
    # the same rankings as the retriever on those texts
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset(folder)
    r = get_retriever(method).fit(ds.doc_texts(". " if method != "sgr" else " "))
    idx, _ = r.search([t for _, t in queries], 2, n_threads=1)
    for (q, _), row in zip(queries, idx, strict=True):
        assert run[q] == [ds.doc_ids[j] for j in row if j >= 0]
    assert run["a1"][0] == "d1" and run["c3"][0] == "d2"


def test_read_query_file_formats_and_errors(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("x1\tone\ttab inside\n\nx2\t two \n")
    assert read_query_file(str(p)) == (["x1", "x2"], ["one\ttab inside", " two "])
    g = tmp_path / "q.jsonl.gz"
    with gzip.open(g, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"_id": 7, "text": "seven"}) + "\n")
    assert read_query_file(str(g)) == (["7"], ["seven"])
    bad = {
        "notab.tsv": ("x1 no tab\n", "no tab"),
        "dup.tsv": ("x1\ta\nx1\tb\n", "duplicate"),
        "space.tsv": ("x 1\ta\n", "whitespace"),
        "empty.tsv": ("\n\n", "empty"),
        "bad.jsonl": ('{"_id": "a", "text": "x"}\n{oops\n', ":2: invalid JSON"),
    }
    for name, (text, match) in bad.items():
        f = tmp_path / name
        f.write_text(text)
        with pytest.raises(ValueError, match=match):
            read_query_file(str(f))
    blank = tmp_path / "blank.tsv"
    blank.write_text("x1\t  \nx2\tok\n")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert read_query_file(str(blank)) == (["x2"], ["ok"])
    assert any(issubclass(x.category, DataWarning) for x in w)
    with pytest.raises(ValueError, match="no text"):
        read_query_file(str(blank), strict=True)


def test_search_queries_errors_exit_2(folder, tmp_path, capsys):
    out = str(tmp_path / "run.trec")
    q = tmp_path / "q.tsv"
    q.write_text("a\tsolar\n")
    assert main(["search", "--dataset", folder, "--queries", str(q), "--split", "test", "--out", out]) == 2
    assert "give one" in capsys.readouterr().err
    assert main(["search", "--dataset", folder, "--queries", str(tmp_path / "nope.tsv"), "--out", out]) == 2
    assert "--queries" in capsys.readouterr().err
    q.write_text("a solar\n")
    assert main(["search", "--dataset", folder, "--queries", str(q), "--out", out]) == 2
    assert "no tab" in capsys.readouterr().err


def test_the_warm_up_batch_takes_the_kernel_the_whole_batch_takes():
    # SGR runs batches below SERIAL_BELOW queries on a serial twin of its parallel kernel: the
    # warm-up before the clock must compile the kernel the timed batch runs, and only that one
    from jkofast.commands.search import _warm_queries
    from jkofast.sgr.retriever import SERIAL_BELOW

    texts = [f"query {i}" for i in range(3 * SERIAL_BELOW)]
    assert _warm_queries("sgr", texts) == texts[:SERIAL_BELOW]
    assert _warm_queries("sgr", texts[: SERIAL_BELOW - 1]) == texts[:1]  # the batch itself runs the twin
    assert _warm_queries("bm25", texts) == texts[:1]
