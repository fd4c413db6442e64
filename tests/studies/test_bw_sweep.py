"""``jkofast study bw-sweep`` and the study framework it runs in (registry, CLI, outputs)."""

import json

import numpy as np
import pytest

import jkofast.studies.bw_sweep as bw
from jkofast.cli import main
from jkofast.studies.common import STUDIES, StudyOptions, diversity_at_k, method_row, run_study
from jkofast.studies.published import published


@pytest.fixture
def three_queries(monkeypatch):
    monkeypatch.setattr(bw, "QUICK_QUERIES", 3)


def test_bw_sweep_ends_are_kl_and_wasserstein(three_queries, tmp_path):
    res = run_study("bw-sweep", StudyOptions(quick=True, progress=False, out=str(tmp_path)))
    names = [r["method"] for r in res.rows]
    assert names == ["kl_blend", "bw_jko_a00", "bw_jko_a25", "bw_jko_a50", "bw_jko_a75", "bw_jko_a100", "jko_blend"]
    assert res.extra["ends_identical"] == {"alpha0_equals_kl": True, "alpha1_equals_wasserstein": True}
    for r in res.rows:
        assert {"method", "ndcg10", "recall10", "ms_per_query"} <= set(r)
        assert 0.0 <= r["ndcg10"] <= 1.0 and isinstance(r["ms_per_query"], float)
    a0 = res.rows[1]
    assert a0["diff_vs_kl_blend"] == [0.0, 0.0, 0.0]
    assert res.rows[2]["published"]["ndcg10"] == published("bw_sweep")["rows"]["bw_jko_a25"]["ndcg10"]
    doc = json.loads((tmp_path / "bw-sweep.json").read_text())
    assert doc["study"] == "bw-sweep" and doc["n_queries"] == 3 and len(doc["rows"]) == 7
    assert "BM25" in (tmp_path / "bw-sweep.md").read_text()


def test_study_cli_json(three_queries, capsys):
    assert main(["study", "bw-sweep", "--quick", "--json", "--threads", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in doc["rows"]][-1] == "jko_blend"
    assert any("rerank term" in n for n in doc["notes"])


def test_study_cli_unknown_name_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["study", "nope"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, match",
    [
        (["study", "bw-sweep", "--threads", "0"], "n_threads must be >= 1"),
        (["study", "bw-sweep", "--scores", "/nonexistent/scores.txt"], "--scores"),
    ],
)
def test_study_cli_bad_input_exits_2_before_work(capsys, argv, match):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and "jkofast study: error" in err and "pools for" not in err


def test_study_cli_out_must_be_a_folder(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["study", "bw-sweep", "--quick", "--out", str(f)]) == 2
    assert "is not a folder" in capsys.readouterr().err


def _no_work(opts):
    raise AssertionError("the study ran before its output folder was checked")


@pytest.mark.parametrize("out", ["/proc/no-such-folder", "/proc/x/y"])
def test_study_cli_unwritable_out_fails_before_work(monkeypatch, capsys, out):
    """--out that cannot be created was found only after the whole study (108 s), and the table was lost."""
    import jkofast.studies.bw_sweep as bw

    monkeypatch.setattr(bw, "study", _no_work)
    assert main(["study", "bw-sweep", "--quick", "--out", out]) == 2
    assert "--out: cannot" in capsys.readouterr().err


@pytest.mark.parametrize("as_json", [False, True])
def test_study_cli_prints_the_result_even_when_a_write_fails(tmp_path, monkeypatch, capsys, as_json):
    import jkofast.studies.bw_sweep as bw
    from jkofast.studies.common import StudyResult

    def canned(opts):
        row = method_row("canned-method", {"ndcg": np.array([0.5, 1.0, 0.0]), "recall": np.ones(3)}, 1.0)
        return StudyResult("bw-sweep", "scifact", 3, [row], notes=["canned"])

    def full_disk(self, out_dir):
        raise OSError(28, "No space left on device", str(tmp_path / "out" / "bw-sweep.json"))

    monkeypatch.setattr(bw, "study", canned)
    monkeypatch.setattr(StudyResult, "write", full_disk)
    argv = ["study", "bw-sweep", "--quick", "--out", str(tmp_path / "out"), *(["--json"] if as_json else [])]
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert "bw-sweep.json" in cap.err and "No space left on device" in cap.err
    if as_json:
        assert json.loads(cap.out)["rows"][0]["method"] == "canned-method"
    else:
        assert "canned-method" in cap.out


def test_registry_and_unknown_study():
    assert {"dual-rank", "mr-jko", "nm-jko", "bw-sweep"} <= set(STUDIES)
    with pytest.raises(ValueError, match="unknown study 'x'"):
        run_study("x")


def test_method_row_and_diversity_hand_cases():
    m = {"ndcg": np.array([1.0, 0.0, 0.5]), "recall": np.array([1.0, 0.0, 1.0])}
    row = method_row("a", m, 2.0, baseline=("b", np.array([1.0, 0.0, 0.5])), published={"ndcg10": 0.7})
    assert row["ndcg10"] == pytest.approx(0.5) and row["recall10"] == pytest.approx(2 / 3)
    assert row["diff_vs_b"] == [0.0, 0.0, 0.0] and row["published"] == {"ndcg10": 0.7}
    assert row["ndcg10_ci"][0] <= 0.5 <= row["ndcg10_ci"][1]
    emb = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    div = diversity_at_k(np.array([[0, 1, 2], [0, -1, -1]]), emb, k=3)
    # pairs (0,1): 1, (0,2): 0, (1,2): 1 -> mean 2/3; one document -> 0
    assert div == pytest.approx([2 / 3, 0.0])


def test_study_on_a_folder_without_embeddings_says_how_to_make_them(tmp_path, capsys):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "title": "", "text": f"word{i} text"}) + "\n" for i in range(4))
    )
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "word1"}) + "\n")
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert main(["study", "bw-sweep", "--dataset", str(tmp_path), "--quick"]) == 2
    err = capsys.readouterr().err
    assert "no saved MiniLM embeddings" in err and f"jkofast embed --dataset {tmp_path}" in err
