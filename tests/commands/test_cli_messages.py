"""CLI messages that say what to do: the sub-command's own parser, the option of a missing file, the
missing ``qrels/`` folder, an ids file that matches no document, the files written, descriptions,
throughput lines that say whether compilation is counted, and the SGR settings of the main job's row."""

import json
import pathlib
import shutil

import pytest
from rerank_helpers import fake_core as _fake_core
from rerank_helpers import write_inputs as _write_inputs

from jkofast.cli import COMMANDS, build_parser, main

TINY = pathlib.Path(__file__).resolve().parents[1] / "data" / "beir_tiny"


def _rerank(tmp_path, run, *extra):
    return ["rerank", "--pools", str(run), "--embeddings", str(tmp_path / "E.npy"), "--ids", str(tmp_path / "ids.txt"),
            "--out", str(tmp_path / "out.trec"), "--quiet", *extra]  # fmt: skip


def test_unknown_option_is_reported_by_the_sub_command_with_a_suggestion(capsys):
    with pytest.raises(SystemExit) as ex:
        main(["search", "--dataset", "scifact", "--method", "bm25", "--topk", "10", "--out", "x.trec"])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert "usage: jkofast search" in err
    assert "jkofast search: error: unrecognized arguments: --topk 10; did you mean --k?" in err


def test_unknown_option_without_a_close_match_has_no_suggestion(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--dataset", "scifact", "--run", "r.trec", "--zzzzzz"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "jkofast evaluate: error: unrecognized arguments: --zzzzzz"


def test_missing_file_names_its_option(tmp_path, capsys):
    run = tmp_path / "nope.trec"
    assert main(["evaluate", "--dataset", "scifact", "--run", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"jkofast evaluate: error: --run {run}: no such file or directory"


def test_missing_file_inside_a_folder_names_the_folder_option(tmp_path, capsys):
    run = _write_inputs(tmp_path)
    (tmp_path / "ids.txt").unlink()
    assert main(_rerank(tmp_path, run)) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("jkofast rerank: error: --ids ") and "no such file or directory" in err


def _no_qrels_copy(tmp_path, keep=()):
    folder = tmp_path / "corpus"
    shutil.copytree(TINY, folder)
    for f in (folder / "qrels").iterdir():
        if f.stem not in keep:
            f.unlink()
    if not keep:
        (folder / "qrels").rmdir()
    return folder


@pytest.mark.parametrize("command", ["tune", "run"])
def test_no_qrels_folder_says_so(tmp_path, capsys, command):
    folder = _no_qrels_copy(tmp_path)
    argv = [command, "--dataset", str(folder), "--split", "train"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"--dataset {folder} has no qrels/ folder" in err
    assert "--split train reads" in err and "train.tsv" in err  # the split actually asked for


def test_tune_names_the_missing_eval_split(tmp_path, capsys):
    folder = _no_qrels_copy(tmp_path, keep=("test",))
    (folder / "qrels" / "test.tsv").rename(folder / "qrels" / "train.tsv")
    assert main(["tune", "--dataset", str(folder), "--split", "train"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("jkofast tune: error: --eval-split test: no ") and "are: train" in err


def test_ids_file_matching_no_document_exits_2_and_the_flag_accepts_it(tmp_path, monkeypatch, capsys):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    (tmp_path / "ids.txt").write_text("".join(f"other{i}\n" for i in range(30)))
    assert main(_rerank(tmp_path, run)) == 2
    err = capsys.readouterr().err
    assert "--ids" in err and "names 0.0% of the documents" in err and "--min-known-ids 0" in err
    assert not (tmp_path / "out.trec").exists()
    assert main(_rerank(tmp_path, run, "--min-known-ids", "0", "--json")) == 0
    summ = json.loads(capsys.readouterr().out)
    assert summ["passed_through"] == summ["queries"] == 7


def test_ids_file_below_the_stated_share(tmp_path, monkeypatch, capsys):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    # 10 of the 30 ids kept: about a third of the pool lines are known
    (tmp_path / "ids.txt").write_text("".join(f"d{i}\n" if i < 10 else f"x{i}\n" for i in range(30)))
    assert main(_rerank(tmp_path, run, "--min-known-ids", "0.9")) == 2
    assert "below --min-known-ids 0.9" in capsys.readouterr().err
    assert main(_rerank(tmp_path, run, "--min-known-ids", "0.1")) == 0
    assert main(_rerank(tmp_path, run, "--min-known-ids", "1.5")) == 2


def test_rerank_throughput_says_compilation_is_not_counted(tmp_path, monkeypatch, capsys):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    assert main(_rerank(tmp_path, run)) == 0
    out = capsys.readouterr().out
    assert "queries/s (kernels compiled before the clock started)" in out


def test_search_throughput_says_compilation_is_excluded(tmp_path, capsys):
    out = tmp_path / "run.trec"
    assert main(["search", "--dataset", str(TINY), "--method", "bm25", "--k", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "q/s, compilation excluded" in text and str(out) in text


def test_every_sub_command_has_a_description():
    parser = build_parser()
    sub = parser._subparsers._group_actions[0]
    assert set(sub.choices) == set(COMMANDS)
    helps = {a.dest: a.help for a in sub._choices_actions}
    for name, p in sub.choices.items():
        assert helps.get(name), f"{name}: no line in jkofast --help"
        assert p.description and p.description.strip(), f"jkofast {name} --help: no description"


def test_study_names_the_figures_it_writes(tmp_path, monkeypatch, capsys):
    """``study --plot`` writes into the current folder and says so (one ``wrote`` line per file)."""
    pytest.importorskip("matplotlib")
    from jkofast.studies import common

    def fake_save(name, res, opts):
        return ["./fig.png"]

    class Res:
        def table(self):
            return "table"

        def summary(self):
            return {}

    monkeypatch.setattr(common, "run_study", lambda name, opts, save=False: Res())
    monkeypatch.setattr(common, "save_study", fake_save)
    monkeypatch.chdir(tmp_path)
    assert main(["study", "theory", "--quick", "--plot"]) == 0
    assert "wrote ./fig.png" in capsys.readouterr().out


def test_main_job_table_names_the_sgr_settings():
    from jkofast.sgr.config import SGRConfig
    from jkofast.studies.main_job import _sgr_settings_note

    note = _sgr_settings_note(SGRConfig())
    assert "semantic_neighbours='strongest'" in note and "ppmi_include_self=False" in note and "P = 100" in note
    assert "--preset published" in note


def test_readme_lists_every_command_and_what_embed_needs():
    """Every sub-command (``demo`` included) has a row in the README; the ``encode`` extra's row names
    the second command that installs the default weights (the extra alone is not enough for ``embed``)."""
    from jkofast.encode.model import MODEL_HINT

    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert [c for c in COMMANDS if f"`jkofast {c}" not in readme] == []
    row = next(line for line in readme.splitlines() if line.startswith("| `encode` |"))
    assert MODEL_HINT in row
