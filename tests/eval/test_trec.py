"""TREC run / qrels IO: formats, round trips, atomic writes, errors with file:line."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from jkofast.eval.fastread import read_run_arrays
from jkofast.eval.trec import (
    QrelsArrays,
    RunArrays,
    read_qrels,
    read_qrels_arrays,
    read_run,
    write_run,
)

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def _write(path, text, gz=False):
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def test_read_run_six_columns(tmp_path):
    p = _write(tmp_path / "r.trec", "q1 Q0 d1 1 2.5 tag\nq1 Q0 d2 2 1.5 tag\n\n# comment\nq2 Q0 d1 1 -3 tag\n")
    assert read_run(p) == {"q1": {"d1": 2.5, "d2": 1.5}, "q2": {"d1": -3.0}}
    ra = read_run_arrays(p)
    assert ra.query_ids == ["q1", "q2"]
    assert_array_equal(ra.offsets, [0, 2, 3])
    assert ra.doc_ids.tolist() == ["d1", "d2", "d1"]
    assert_array_equal(ra.scores, [2.5, 1.5, -3.0])


@pytest.mark.parametrize("gz", [False, True])
def test_read_run_three_columns_with_header_and_gz(tmp_path, gz):
    name = "r.tsv.gz" if gz else "r.tsv"
    p = _write(tmp_path / name, "query-id\tcorpus-id\tscore\n1\t10\t0.5\n1\t9\t0.25\n", gz)
    assert read_run(p) == {"1": {"10": 0.5, "9": 0.25}}
    p2 = _write(tmp_path / ("n" + name), "1\t10\t0.5\n", gz)  # no header
    assert read_run(p2) == {"1": {"10": 0.5}}


def test_read_run_duplicates_last_wins_in_dict_kept_in_arrays(tmp_path):
    p = _write(tmp_path / "r.trec", "q Q0 a 1 3 t\nq Q0 b 2 2 t\nq Q0 a 3 1 t\n")
    assert read_run(p) == {"q": {"a": 1.0, "b": 2.0}}
    assert read_run_arrays(p).doc_ids.tolist() == ["a", "b", "a"]
    assert RunArrays.from_dict(read_run(p)).to_dict() == read_run(p)
    assert read_run_arrays(p).to_dict() == read_run(p)


@pytest.mark.parametrize(
    "text,line,msg",
    [
        ("q Q0 a 1 3 t\nq Q0 b 2\n", 2, "expected 6 columns"),
        ("q Q0 a 1 x t\n", 1, "not a number"),
        ("q Q0 a 1 3 t\nq Q0 b 2 y t\n", 2, "not a number"),
        ("q Q0 a one 3 t\n", 1, "rank"),
        ("q a\n", 1, "6 columns"),
        ("q Q0 a 1 nan t\n", 1, "NaN"),
        ("q\ta\t1\nq\tb\n", 2, "expected 3 columns"),
    ],
)
def test_read_run_malformed_names_file_and_line(tmp_path, text, line, msg):
    p = _write(tmp_path / "bad.trec", text)
    with pytest.raises(ValueError, match=msg) as ei:
        read_run(p)
    assert f"bad.trec:{line}" in str(ei.value)


def test_read_run_arrays_requires_contiguous_queries(tmp_path):
    p = _write(tmp_path / "r.trec", "q1 Q0 a 1 3 t\nq2 Q0 a 1 3 t\nq1 Q0 b 2 2 t\n")
    with pytest.raises(ValueError, match="contiguous"):
        read_run_arrays(p)
    assert read_run(p) == {"q1": {"a": 3.0, "b": 2.0}, "q2": {"a": 3.0}}


def test_read_qrels_trec_and_beir():
    trec = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 -1\nq2 0 d4 2\n"
    beir = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t-1\nq2\td4\t2\n"
    expected = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": -1, "d4": 2}}
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for name, text in (("q.trec", trec), ("q.tsv", beir)):
            p = os.path.join(d, name)
            with open(p, "w") as fh:
                fh.write(text)
            assert read_qrels(p) == expected
            qa = read_qrels_arrays(p)
            assert qa.to_dict() == expected
            assert qa.labels.dtype == np.int64
    assert QrelsArrays.from_dict(expected).to_dict() == expected


def test_read_qrels_bundled_scifact_copy():
    q = read_qrels(os.path.join(DATA, "metrics_scifact_qrels_test.tsv"))
    assert len(q) == 300 and sum(len(v) for v in q.values()) == 339


@pytest.mark.parametrize(
    "text,line,msg",
    [
        ("q1 0 d1 1\nq1 0 d2\n", 2, "expected 4 columns"),
        ("q1 0 d1 x\n", 1, "not an integer"),
        ("q1 0 d1 1.5\n", 1, "not an integer"),
        ("q1 d1\n", 1, "4 columns"),
    ],
)
def test_read_qrels_malformed(tmp_path, text, line, msg):
    p = _write(tmp_path / "bad.qrels", text)
    with pytest.raises(ValueError, match=msg) as ei:
        read_qrels(p)
    assert f"bad.qrels:{line}" in str(ei.value)


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        read_run("/nonexistent/run.trec")


@pytest.mark.parametrize("suffix", [".trec", ".trec.gz"])
def test_write_run_dict_round_trip_trec_order(tmp_path, suffix):
    run = {"q1": {"a": 1.0, "b": 3.0, "c": 1.0}, "q2": {"x": 0.1 + 0.2}}
    p = tmp_path / ("out" + suffix)
    write_run(p, run, tag="bm25")
    assert read_run(p) == run  # float64 repr round-trips exactly
    ra = read_run_arrays(p)
    # score desc, ties by doc id desc (trec_eval's order)
    assert ra.doc_ids.tolist() == ["b", "c", "a", "x"]
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(p, "rt") as fh:
        first = fh.readline().split()
    assert first == ["q1", "Q0", "b", "1", "3.0", "bm25"]


def test_write_run_arrays_and_retriever_tuple(tmp_path):
    ra = RunArrays(
        ["q1", "q2"], np.array([0, 2, 3]), np.array(["d2", "d0", "d1"]), np.array([0.7, 0.3, 0.9], np.float32)
    )
    p = tmp_path / "a.trec"
    write_run(p, ra)
    back = read_run_arrays(p)
    assert back.doc_ids.tolist() == ["d2", "d0", "d1"]
    assert_array_equal(back.scores.astype(np.float32), ra.scores)  # float32 exact
    # (indices, scores) as a retriever returns them, padded with -1 / -inf
    idx = np.array([[2, 0, -1], [1, -1, -1]], np.int64)
    sc = np.array([[0.7, 0.3, -np.inf], [0.9, -np.inf, -np.inf]], np.float32)
    p2 = tmp_path / "b.trec"
    write_run(p2, (idx, sc), query_ids=["q1", "q2"], doc_ids=["d0", "d1", "d2"])
    assert read_run(p2) == read_run(p)
    with pytest.raises(ValueError, match="query_ids"):
        write_run(p2, (idx, sc), doc_ids=["d0", "d1", "d2"])
    with pytest.raises(ValueError, match="doc_ids"):
        write_run(p2, (idx, sc), query_ids=["q1", "q2"])
    with pytest.raises(TypeError, match="run"):
        write_run(p2, [1, 2])
    with pytest.raises(ValueError, match="tag"):
        write_run(p2, {"q": {"a": 1.0}}, tag="has space")


def test_write_run_is_atomic(tmp_path):
    p = tmp_path / "run.trec"
    write_run(p, {"q": {"a": 1.0}})
    before = p.read_text()

    class Boom(dict):
        def items(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_run(p, {"q": Boom(a=2.0)})
    assert p.read_text() == before  # the old file is untouched
    assert sorted(os.listdir(tmp_path)) == ["run.trec"]  # no temporary left behind


# ---- adversarial inputs (QA review) ---------------------------------------------------------
@pytest.mark.parametrize(
    "run, match",
    [
        ({"q 1": {"d1": 1.0}}, "query id 'q 1'"),
        ({"": {"d1": 1.0}}, "query id ''"),
        ({"q1": {"d 1": 1.0}}, "document id 'd 1'"),
        ({"q1": {"d\nx": 1.0}}, "document id 'd\\\\nx'"),
        ({"q1": {"": 1.0}}, "document id ''"),
        ({"q1": {"d1": float("nan")}}, r"run\['q1'\]\['d1'\]: score is NaN"),
    ],
)
def test_write_run_rejects_lines_that_would_not_read_back(tmp_path, run, match):
    # these runs were written silently and the file then failed to parse (or parsed wrong)
    p = tmp_path / "r.trec"
    with pytest.raises(ValueError, match=match):
        write_run(p, run)
    assert not p.exists()


def test_write_run_validates_arrays_and_scores(tmp_path):
    p = tmp_path / "r.trec"
    with pytest.raises(TypeError, match=r"run\['q'\]: scores must be numbers"):
        write_run(p, {"q": {"d": "x"}})
    with pytest.raises(TypeError, match=r"run\['q'\] must be a dict"):
        write_run(p, {"q": 5})
    # offsets past the data wrote a truncated run silently
    with pytest.raises(ValueError, match=r"run\.offsets"):
        write_run(p, RunArrays(["q"], np.array([0, 5]), np.array(["a"]), np.array([1.0])))
    with pytest.raises(ValueError, match="query_ids"):
        write_run(p, RunArrays(["q", "r"], np.array([0, 1]), np.array(["a"]), np.array([1.0])))
    with pytest.raises(ValueError, match="indices: 5 is out of range"):  # IndexError before
        write_run(p, (np.array([[5]]), np.array([[1.0]])), query_ids=["q"], doc_ids=["a"])
    with pytest.raises(ValueError, match="scores contain NaN"):
        write_run(p, (np.array([[0]]), np.array([[np.nan]])), query_ids=["q"], doc_ids=["a"])
    write_run(p, (np.array([[0, -1]]), np.array([[2.0, -np.inf]])), query_ids=["q"], doc_ids=["a"])
    assert read_run(p) == {"q": {"a": 2.0}}


def test_invalid_utf8_names_the_file_and_exact_line(tmp_path):
    p = tmp_path / "bad.trec"
    p.write_bytes(b"q Q0 d 1 1.0 t\nq Q0 \xff 2 0.5 t\n")
    with pytest.raises(ValueError, match=r"bad\.trec:2: invalid UTF-8 at byte 5 of the line"):
        read_run(p)
    # deep in a file (the text decoder works on blocks, so its own error knows no line), and with
    # \r\n and a lone \r counted as text mode counts them
    lines = [f"q Q0 d{i} {i + 1} {20 - i} t\n".encode() for i in range(12)]
    lines[9] = lines[9].replace(b"d9", b"d\xff9")
    p.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match=r"bad\.trec:10: invalid UTF-8 at byte 6 of the line"):
        read_run(p)
    with pytest.raises(ValueError, match=r"bad\.trec:10: invalid UTF-8"):
        read_run_arrays(p)
    p.write_bytes(b"q Q0 a 1 1 t\r\nq Q0 b 2 0.5 t\rq Q0 c\xff 3 0.2 t\n")
    with pytest.raises(ValueError, match=r"bad\.trec:3: invalid UTF-8 at byte 6 of the line"):
        read_run(p)


def test_write_run_file_mode_follows_the_umask(tmp_path):
    # mkstemp made every run file mode 0600 (unreadable to other users)
    p = tmp_path / "r.trec"
    write_run(p, {"q": {"d": 1.0}})
    ref_file = tmp_path / "plain.txt"
    ref_file.write_text("x")
    assert (p.stat().st_mode & 0o777) == (ref_file.stat().st_mode & 0o777)
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp-")]


def test_nul_in_an_id_is_rejected_everywhere(tmp_path):
    """NumPy string arrays drop a trailing NUL, so the fast reader read ``d\\0`` as ``d`` (found by the fuzz suite)."""
    from jkofast.eval.fastread import evaluate_files, read_run_arrays_fast

    p = tmp_path / "nul.trec"
    p.write_bytes(b"q1\td1\t0.5\nq1\td\x00\t0.25\n")
    for reader in (read_run, read_run_arrays, read_run_arrays_fast):
        with pytest.raises(ValueError, match=r"nul\.trec:2: NUL character in an id"):
            reader(p)
    q = tmp_path / "qrels.txt"
    q.write_bytes(b"q1 0 d\x00 1\n")
    with pytest.raises(ValueError, match=r"qrels\.txt:1: NUL character in an id"):
        read_qrels(q)
    p.write_bytes(b"q1\td1\t0.5\n")
    with pytest.raises(ValueError, match=r"qrels\.txt:1: NUL character"):
        evaluate_files(p, q, ["ndcg@10"])
    with pytest.raises(ValueError, match="no whitespace or NUL"):
        write_run(tmp_path / "w.trec", {"q1": {"d\x00": 1.0}})
