"""``jkofast run``: arguments are checked before the job starts (QA review)."""

import json
import re

import numpy as np
import pytest
from beir_helpers import write_beir

from jkofast.cli import main


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--config", "nope"], "unknown operating point 'nope'"),  # --quick ran the job with 'fast'
        (["--threads", "0"], "n_threads must be >= 1"),
        (["--methods", ""], "--methods names no method"),  # an empty list ran every method
        (["--methods", "jko_blend,nope"], "unknown methods ['nope']"),
    ],
)
def test_bad_arguments_fail_up_front(capsys, extra, match):
    assert main(["run", "--dataset", "scifact", "--quick", "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert match in err
    assert "[pools]" not in err  # no stage ran


# ------------------------------------------------- QA round 2: index / search arguments


def _tiny_beir(root):
    docs = [
        ("d1", "Solar", "solar panels convert sunlight"),
        ("d2", "Wind", "wind turbines make power"),
        ("d3", "", "sunlight and wind"),
        ("d4", "Cat", "the cat sat on mat"),
        ("d5", "Dog", "dog and cat"),
    ]
    queries = (("q1", "sunlight power"), ("q2", "cat"))
    return write_beir(root, docs, queries, (("q1", "d1", 1), ("q2", "d4", 1)))


@pytest.mark.parametrize(
    "argv, match",
    [
        (["index", "--method", "bm25", "--threads", "0"], "n_threads must be >= 1"),  # was ignored
        (["index", "--method", "sgr", "--stemmer", "porter"], "--stemmer do(es) not apply to --method sgr"),
        (["index", "--method", "tfidf", "--k1", "2"], "--k1 do(es) not apply to --method tfidf"),
        (["search", "--method", "sgr", "--max-features", "10"], "--max-features do(es) not apply"),
    ],
)
def test_index_search_refuse_ignored_or_bad_options(tmp_path, capsys, argv, match):
    ds = _tiny_beir(tmp_path / "tiny")
    out = str(tmp_path / ("o.trec" if argv[0] == "search" else "o"))
    assert main([*argv, "--dataset", ds, "--out", out]) == 2
    assert match in capsys.readouterr().err


def test_out_paths_checked_before_the_work(tmp_path, capsys):
    ds = _tiny_beir(tmp_path / "tiny")
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert main(["index", "--dataset", ds, "--method", "bm25", "--out", str(f)]) == 2  # FileExistsError traceback
    assert "--out" in capsys.readouterr().err
    assert main(["search", "--dataset", ds, "--method", "bm25", "--out", str(tmp_path)]) == 2  # IsADirectoryError
    assert "--out" in capsys.readouterr().err


def test_search_sgr_index_of_another_corpus_is_refused(tmp_path, capsys):
    """An SGR index had no n_docs: one built on another corpus wrote wrong doc ids silently."""
    ds = _tiny_beir(tmp_path / "tiny")
    assert main(["index", "--dataset", ds, "--method", "sgr", "--out", str(tmp_path / "sgr"), "--json"]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "search",
                "--dataset",
                "scifact",
                "--method",
                "sgr",
                "--index",
                str(tmp_path / "sgr"),
                "--out",
                str(tmp_path / "r.trec"),
            ]
        )
        == 2
    )
    assert "--index has 5 docs" in capsys.readouterr().err
    assert (
        main(
            [
                "search",
                "--dataset",
                ds,
                "--method",
                "sgr",
                "--index",
                str(tmp_path / "sgr"),
                "--out",
                str(tmp_path / "r.trec"),
                "--k",
                "3",
            ]
        )
        == 0
    )
    lines = (tmp_path / "r.trec").read_text().split()
    assert set(lines[2::6]) <= {"d1", "d2", "d3", "d4", "d5"}


def test_search_huge_k_writes_the_whole_ranking(tmp_path, capsys):
    """--k 10**12 failed with a 21 TiB MemoryError; ranks past the corpus are never written."""
    ds = _tiny_beir(tmp_path / "tiny")
    for k, name in (("1000000000000", "a.trec"), ("5", "b.trec")):
        assert main(["search", "--dataset", ds, "--method", "bm25", "--k", k, "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert (tmp_path / "a.trec").read_text() == (tmp_path / "b.trec").read_text()


def test_a_folder_given_as_a_file_is_a_clean_error(tmp_path, capsys):
    """evaluate --run DIR / --qrels DIR ended in an IsADirectoryError traceback (exit 1)."""
    ds = _tiny_beir(tmp_path / "tiny")
    assert main(["evaluate", "--dataset", ds, "--run", str(tmp_path)]) == 2
    assert "jkofast evaluate: error:" in capsys.readouterr().err
    run = tmp_path / "r.trec"
    run.write_text("q1 Q0 d1 1 1.0 t\n")
    assert main(["evaluate", "--qrels", str(tmp_path), "--run", str(run)]) == 2
    assert "jkofast evaluate: error:" in capsys.readouterr().err


def test_parity_json_reference_times_are_an_object(capsys):
    """--json printed the published solver's times as a string holding JSON."""
    import json

    assert main(["parity", "--queries", "1", "--configs", "base_kl", "--no-implicit", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = out["reference_ms_per_query_1thread"]
    assert isinstance(ref, dict) and ref["base_kl"] > 0


@pytest.mark.parametrize(
    "run_text, qrels_text, extra, match",
    [
        ("", "q1 0 d1 1\n", [], r"--run '.*run\.txt' holds no result line"),
        ("q1 Q0 d1 1 1.0 t\n", "", [], r"the qrels '.*qrels\.txt' hold no judgement"),
        ("", "", [], r"hold no query"),
        ("q1 Q0 d1 1 1.0 t\n", "q9 0 d1 1\n", [], r"\(1 queries\) and the qrels .* \(1\) share no query id"),
        ("", "q1 0 d1 1\n", ["--missing", "zero"], r"holds no result line"),
    ],
)
def test_evaluate_refuses_empty_inputs(tmp_path, capsys, run_text, qrels_text, extra, match):
    """An empty run or qrels (or no query in common) printed every metric as 0.0000 over 0 queries, exit 0."""
    run, qrels = tmp_path / "run.txt", tmp_path / "qrels.txt"
    run.write_text(run_text)
    qrels.write_text(qrels_text)
    argv = ["evaluate", "--run", str(run), "--qrels", str(qrels), "--n-boot", "0", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(match, err), err
    assert "--allow-empty to accept" in err
    assert main([*argv, "--allow-empty", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["ndcg@10"]["mean"] == 0.0


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--dataset", "scifact", "--method", "bm25", "--out", "/proc/no/such/run.trec"],
        ["index", "--dataset", "scifact", "--method", "bm25", "--out", "/proc/no-such-index"],
    ],
)
def test_outputs_are_checked_before_any_work(argv, capsys, monkeypatch):
    """An output that cannot be written fails before the search or the build, naming the option."""
    import jkofast.sparse.index as index

    def no_build(*a, **k):
        raise AssertionError("the work started before the output was checked")

    monkeypatch.setattr(index.SparseIndex, "fit", no_build)
    assert main(argv) == 2
    assert "--out: cannot" in capsys.readouterr().err


def test_rerank_run_and_tune_outputs_are_checked_before_work(tmp_path, capsys):
    """--out / --dist / --confidence of rerank, --runs / --per-query of run and tune: exit 2 before any work."""
    pools = tmp_path / "pools.trec"
    pools.write_text("q1 Q0 d1 1 1.0 t\n")
    emb, ids = tmp_path / "E.npy", tmp_path / "ids.txt"
    np.save(emb, np.eye(2, dtype=np.float32))
    ids.write_text("d1\nd2\n")
    base = ["rerank", "--pools", str(pools), "--embeddings", str(emb), "--ids", str(ids), "--quiet"]
    for extra, flag in (
        (["--out", "/proc/no/such/o.trec"], "--out"),
        (["--out", str(tmp_path / "o.trec"), "--dist", "/proc/no/such/p.npz"], "--dist"),
        (["--out", str(tmp_path / "o.trec"), "--confidence", "/proc/no/such/c.tsv"], "--confidence"),
    ):
        assert main([*base, *extra]) == 2
        assert f"{flag}: cannot" in capsys.readouterr().err
    assert not (tmp_path / "o.trec.parts").exists()
    for argv, flag in (
        (["run", "--dataset", "scifact", "--runs", "/proc/no/such/runs"], "--runs"),
        (["run", "--dataset", "scifact", "--per-query", "/proc/no/such/pq.tsv"], "--per-query"),
        (["tune", "--dataset", "scifact", "--runs", "/proc/no/such/runs"], "--runs"),
    ):
        assert main(argv) == 2
        assert f"{flag}: " in capsys.readouterr().err
