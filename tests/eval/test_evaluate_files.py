"""evaluate_files: the metrics of evaluate(read_run(run), read_qrels(qrels)) straight from the file bytes.

References: the line-by-line readers + ``evaluate`` (itself checked against pytrec_eval and the
naive oracles in test_metrics.py), ``read_run_arrays`` (every line, file order) for
``tie_break="given"``, and pytrec_eval on the same files.
"""

import gzip

import numpy as np
import pytest

from jkofast.eval.fastread import evaluate_files, read_run_arrays
from jkofast.eval.metrics import evaluate
from jkofast.eval.trec import RunArrays, read_qrels, read_run
from jkofast.kernels.eval import fileeval

METRICS = ("ndcg@10", "recall@10", "p@5", "mrr@10", "map", "ndcg", "map@5", "hit@3", "recall@100")


def _write(tmp_path, text, name):
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(p)


def _same(a, b):
    assert a.query_ids == b.query_ids
    assert list(a.per_query) == list(b.per_query)
    for m in a.per_query:
        assert np.array_equal(a.per_query[m], b.per_query[m]), m
    assert np.array_equal(a.n_ret, b.n_ret)


def _check(run_path, qrels_path, metrics=METRICS, **kw):
    """evaluate_files == evaluate on the dict readers (trec_eval) or on every line (given)."""
    got = evaluate_files(run_path, qrels_path, metrics, **kw)
    run = read_run(run_path)
    if kw.get("tie_break") == "given":
        try:
            run = read_run_arrays(run_path)
        except ValueError:  # a query's lines not contiguous: merged as the dict reader does
            run = RunArrays.from_dict(run)
    _same(got, evaluate(run, read_qrels(qrels_path), metrics, **kw))
    return got


def _random_files(tmp_path, seed, *, cols=6, sep=" ", qcols=4, n_q=30, depth=25, n_docs=80):
    """A run with ties, repeated documents and run-only queries; qrels with repeats, 0 and negative labels."""
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(n_q):
        docs = rng.choice(n_docs, depth)  # with replacement: repeated documents
        scores = rng.integers(0, 6, depth) / 4  # few values: many ties, decided by the doc id
        for r, (d, s) in enumerate(zip(docs, scores, strict=True)):
            f = [f"q{q}", "Q0", f"d{d}", str(r + 1), repr(float(s)), "t"] if cols == 6 else [f"q{q}", f"d{d}", f"{s}"]
            lines.append(sep.join(f))
    qlines = []
    for q in range(3, n_q + 5):  # q0-q2 unjudged, q30-q34 judged without run lines
        for d in rng.choice(n_docs, 6):
            lab = int(rng.integers(-1, 4))
            f = [f"q{q}", "0", f"d{d}", str(lab)] if qcols == 4 else [f"q{q}", f"d{d}", str(lab)]
            qlines.append(sep.join(f))
    rng.shuffle(qlines)  # a query's judgments need not be contiguous
    return _write(tmp_path, "\n".join(lines) + "\n", "run.trec"), _write(tmp_path, "\n".join(qlines) + "\n", "qrels")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tie_break", ["trec_eval", "given"])
@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_random_files_equal_the_dict_readers(tmp_path, seed, tie_break, gain):
    rp, qp = _random_files(tmp_path, seed)
    _check(rp, qp, tie_break=tie_break, gain=gain)
    got = _check(rp, qp, tie_break=tie_break, gain=gain, missing="zero")
    assert set(got.query_ids[-5:]) == {f"q{q}" for q in range(30, 35)}  # judged, no run lines: scored 0
    assert all(got[m][-5:].sum() == 0 for m in METRICS)


@pytest.mark.parametrize(
    "layout", [dict(cols=3, sep="\t", qcols=3), dict(cols=3, sep=" ", qcols=4), dict(cols=6, sep="\t", qcols=3)]
)
def test_three_columns_and_tabs(tmp_path, layout):
    rp, qp = _random_files(tmp_path, 5, **layout)
    _check(rp, qp)


def test_counts_and_threads(tmp_path):
    rp, qp = _random_files(tmp_path, 7, n_q=60, depth=40)
    a, info = evaluate_files(rp, qp, METRICS, n_threads=1, counts=True)
    b = evaluate_files(rp, qp, METRICS, n_threads=2)
    _same(a, b)
    run, qrels = read_run(rp), read_qrels(qp)
    assert info == {"run_only": sum(q not in qrels for q in run), "qrels_only": sum(q not in run for q in qrels)}
    assert info == {"run_only": 3, "qrels_only": 5}


def test_equals_pytrec_eval(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(11)
    run_lines, qrels_lines = [], []
    for q in range(50):
        docs = rng.choice(300, 40, replace=False)
        scores = np.round(rng.gamma(2.0, 2.0, 40), 1)  # 1 decimal: ties
        order = np.argsort(-scores, kind="stable")
        run_lines += [f"q{q} Q0 doc{docs[i]} {r + 1} {scores[i]:.1f} x" for r, i in enumerate(order)]
        judged = np.unique(np.concatenate([docs[:4], rng.choice(300, 3)]))  # pytrec_eval: no repeats
        qrels_lines += [f"q{q} 0 doc{d} {int(rng.integers(0, 3))}" for d in judged]
    rp = _write(tmp_path, "\n".join(run_lines) + "\n", "run.trec")
    qp = _write(tmp_path, "\n".join(qrels_lines) + "\n", "qrels.txt")
    names = {"ndcg@10": "ndcg_cut_10", "recall@10": "recall_10", "p@10": "P_10", "mrr": "recip_rank", "map": "map"}
    got = evaluate_files(rp, qp, list(names))
    with open(qp) as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(rp) as f:
        run = pytrec_eval.parse_run(f)
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10", "P.10", "recip_rank", "map"}).evaluate(run)
    assert sorted(got.query_ids) == sorted(ref)
    for m, key in names.items():
        mine = dict(zip(got.query_ids, got[m].tolist(), strict=True))
        assert max(abs(mine[q] - ref[q][key]) for q in ref) == 0.0, m


def test_hand_worked_ties_duplicates_and_order(tmp_path):
    # q1: d2 and d1 tie at 1.0 -> id descending: d2 (rank 1), d1 (rank 2); d3 appears twice, the last score
    # (3.0) wins -> rank 0.  Labels: d1 = 1 (the qrels repeat: the last label wins), d9 unretrieved = 2.
    run = "q1 Q0 d3 1 0.5 t\nq1 Q0 d1 2 1.0 t\nq1 Q0 d2 3 1.0 t\nq1 Q0 d3 4 3.0 t\n"
    qrels = "q1 0 d1 0\nq1 0 d9 2\nq1 0 d1 1\n"
    res = evaluate_files(_write(tmp_path, run, "r"), _write(tmp_path, qrels, "q"), ["mrr", "p@3", "recall@3", "ndcg"])
    # ranking d3, d2, d1: first relevant at rank 3
    assert res["mrr"].tolist() == [1 / 3]
    assert res["p@3"].tolist() == [1 / 3]
    assert res["recall@3"].tolist() == [0.5]
    assert res["ndcg"].tolist() == [(1 / np.log2(4)) / (2 + 1 / np.log2(3))]
    assert res.n_ret.tolist() == [3]
    given = evaluate_files(_write(tmp_path, run, "r"), _write(tmp_path, qrels, "q"), ["mrr"], tie_break="given")
    assert given["mrr"].tolist() == [1 / 2] and given.n_ret.tolist() == [4]  # file order, every line


def test_hash_collision_is_told_apart(tmp_path):
    # rotate-by-7 xor: bit 1 of the first byte of a 10-byte id meets bit 0 of its last byte, so these
    # two ids have the same hash; the byte comparison keeps them apart (as query ids and as doc ids)
    a, b = "aXXXXXXXXa", "cXXXXXXXX`"
    buf = np.frombuffer((a + b).encode(), np.uint8).copy()
    assert fileeval._hash(buf, 0, 10) == fileeval._hash(buf, 10, 10)
    run = f"{a} Q0 {a} 1 2.0 t\n{a} Q0 {b} 2 1.0 t\n{b} Q0 {b} 1 1.0 t\n"
    qrels = f"{a} 0 {b} 1\n{b} 0 {a} 1\n"
    rp, qp = _write(tmp_path, run, "r"), _write(tmp_path, qrels, "q")
    res = _check(rp, qp, ["mrr"])
    assert res.query_ids == [a, b] and res["mrr"].tolist() == [0.5, 0.0]


@pytest.mark.parametrize(
    "run, qrels",
    [
        ("q1 Q0 d1 1 1 t\r\nq1 Q0 d2 2 2 t\r\n", "q1 0 d1 1\r\n"),  # CRLF
        ("# a comment\n\nq1 Q0 d1 1 1 t\n\n# x\nq1 Q0 d2 2 2 t", "\n# c\nq1 0 d2 1\n\n"),  # comments, blanks
        ("q1\td1\t0.5\n", "query-id\tcorpus-id\tscore\nq1\td1\t1\n"),  # qrels header line
        ("query-id\tcorpus-id\tscore\nq1\td1\t0.5\n", "q1\td1\t1\n"),  # run header line
        ("q1 Q0 d\u00e9 1 0.5 t\nq1 Q0 d1 2 0.25 t\n", "q1 0 d\u00e9 1\n"),  # non-ASCII: the line readers
        ("q1 Q0 d1 1 0.5 t\nq2 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.75 t\n", "q1 0 d2 1\nq2 0 d1 1\n"),  # q1 not contiguous
        ("q1 Q0 d1 1 1e30 t\nq1 Q0 d2 2 1 t\n", "q1 0 d1 1\n"),  # beyond the decimal fast path
        ("q1 Q0 d1 1 0.5 t\rq1 Q0 d2 2 1 t\n", "q1 0 d2 1\n"),  # a lone CR ends a line for Python
        ("q1 Q0 d1 1 0.5 t\n", "q1 0 d1 1_0\n"),  # int() reads 1_0 as 10: the line reader
        ("q1 Q0 d1 1 0.5 t\n", "q1 0 d1 7\n"),
        ("", "q1 0 d1 1\n"),  # empty run
        ("q1 Q0 d1 1 0.5 t\n", ""),  # empty qrels
    ],
)
def test_unusual_files_equal_the_dict_readers(tmp_path, run, qrels):
    rp, qp = _write(tmp_path, run, "run.trec"), _write(tmp_path, qrels, "qrels.txt")
    for tie in ("trec_eval", "given"):
        for missing in ("skip", "zero"):
            _check(rp, qp, tie_break=tie, missing=missing, gain="exponential")


def test_gzip(tmp_path):
    rp, qp = _random_files(tmp_path, 3)
    for p in (rp, qp):
        with open(p, "rb") as src, gzip.open(p + ".gz", "wb") as dst:
            dst.write(src.read())
    _same(evaluate_files(rp + ".gz", qp + ".gz", METRICS), evaluate_files(rp, qp, METRICS))


def test_malformed_files_name_the_file_and_line(tmp_path):
    good_q = _write(tmp_path, "q1 0 d1 1\n", "qrels.txt")
    good_r = _write(tmp_path, "q1 Q0 d1 1 0.5 t\n", "good.trec")
    bad_runs = {
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.5\n": r"bad.trec:2: expected 6 columns, got 5",
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 x t\n": r"bad.trec:2: score 'x' is not a number",
        "q1 Q0 d1 1 0.5 t\n\nq1 Q0 d2 two 0.5 t\n": r"bad.trec:3: rank 'two' is not an integer",
        "q1 Q0 d1 1 nan t\n": r"bad.trec:1: score is NaN",
    }
    for text, msg in bad_runs.items():
        with pytest.raises(ValueError, match=msg):
            evaluate_files(_write(tmp_path, text, "bad.trec"), good_q)
    bad_qrels = {
        "q1 0 d1 1\nq1 0 d2 x\n": r"bad.qrels:2: relevance 'x' is not an integer",
        "q1 0 d1 1\nq1 0 d2 1 9\n": r"bad.qrels:2: expected 4 columns, got 5",
        "q1 0 d1 1.5\n": r"bad.qrels:1: relevance '1.5' is not an integer",
    }
    for text, msg in bad_qrels.items():
        with pytest.raises(ValueError, match=msg):
            evaluate_files(good_r, _write(tmp_path, text, "bad.qrels"))
    with pytest.raises(FileNotFoundError):
        evaluate_files(str(tmp_path / "missing.trec"), good_q)


def test_bad_arguments(tmp_path):
    rp, qp = _random_files(tmp_path, 0, n_q=4)
    with pytest.raises(ValueError, match="diversity"):
        evaluate_files(rp, qp, ["diversity@10"])
    with pytest.raises(ValueError, match="unknown metric"):
        evaluate_files(rp, qp, ["nope"])
    with pytest.raises(ValueError, match="gain"):
        evaluate_files(rp, qp, gain="log")
    with pytest.raises(ValueError, match="tie_break"):
        evaluate_files(rp, qp, tie_break="random")
    with pytest.raises(ValueError, match="missing"):
        evaluate_files(rp, qp, missing="drop")
    with pytest.raises(ValueError, match="n_threads"):
        evaluate_files(rp, qp, n_threads=0)
    big = _write(tmp_path, "q1 0 d1 2000\n", "big.qrels")
    with pytest.raises(ValueError, match="label 2000 overflows"):
        evaluate_files(rp, big, ["ndcg@10"], gain="exponential")
    assert evaluate_files(rp, big, ["ndcg@10"]).query_ids == ["q1"]  # linear gain: fine


@pytest.mark.parametrize("order", ["trec", "ties_swapped", "reversed", "shuffled"])
def test_every_file_order_ranks_as_trec_eval(tmp_path, order):
    # in order: no sort; ties swapped: the bounded insertion sort; reversed / shuffled: the full sort
    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in rng.choice(1000, 200, replace=False)]
    scores = rng.integers(0, 40, 200) / 8
    rows = sorted(zip(scores, docs, strict=True), reverse=True)  # trec_eval order: score desc, id desc
    if order == "ties_swapped":
        rows = sorted(rows, key=lambda t: -t[0])
        for i in range(0, len(rows) - 1, 2):
            if rows[i][0] == rows[i + 1][0]:
                rows[i], rows[i + 1] = rows[i + 1], rows[i]
    elif order == "reversed":
        rows = rows[::-1]
    elif order == "shuffled":
        rows = [rows[i] for i in rng.permutation(len(rows))]
    run = "".join(f"q1 Q0 {d} {r + 1} {s} t\n" for r, (s, d) in enumerate(rows))
    qrels = "".join(f"q1 0 {d} {int(rng.integers(0, 3))}\n" for d in docs[::3])
    _check(_write(tmp_path, run, "run.trec"), _write(tmp_path, qrels, "qrels"))


@pytest.mark.parametrize("n_threads", [1, 2])
def test_many_chunks(tmp_path, monkeypatch, n_threads):
    # tiny parse chunks: queries span chunks, comment and blank lines leave gaps between them
    from jkofast.eval import fastread

    rp, qp = _random_files(tmp_path, 9, n_q=20, depth=15)
    with open(rp) as fh:
        lines = fh.read().splitlines()
    text = "\n".join(ln + ("\n# note\n" if i % 7 == 0 else "\n" if i % 5 == 0 else "") for i, ln in enumerate(lines))
    rp = _write(tmp_path, text, "gaps.trec")
    whole = evaluate_files(rp, qp, METRICS, n_threads=n_threads)
    monkeypatch.setattr(fastread, "_CHUNK_BYTES", 40)
    for tie in ("trec_eval", "given"):
        _check(rp, qp, tie_break=tie, n_threads=n_threads)
    _same(evaluate_files(rp, qp, METRICS, n_threads=n_threads), whole)
    ra = fastread.read_run_arrays_fast(rp, n_threads=n_threads)
    assert ra.doc_ids.dtype.kind == "S" and ra.query_ids == list(read_run(rp))


def test_scores_beyond_float32_warn_once_naming_the_line(tmp_path):
    """Scores beyond float32 ended in a raw numpy 'overflow encountered in cast' RuntimeWarning (or none at all)."""
    import warnings

    from jkofast.eval.metrics import ScoreRangeWarning, evaluate
    from jkofast.eval.trec import read_qrels, read_run

    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 1e39 t\nq1 Q0 d2 2 0.5 t\nq2 Q0 d1 1 -5e40 t\nq2 Q0 d3 2 1 t\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq2 0 d3 1\n")
    for fn in (
        lambda: evaluate_files(run, qrels, ["ndcg@10"]),
        lambda: evaluate(read_run(run), read_qrels(qrels), ["ndcg@10"]),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = fn()
        assert [type(w.message) for w in caught] == [ScoreRangeWarning]
        msg = str(caught[0].message)
        assert "2 score(s) beyond the float32 range" in msg and "query 'q1', document 'd1', score 1e+39" in msg
        # +inf ranks first, -inf last: trec_eval's float order
        np.testing.assert_array_equal(res.per_query["ndcg@10"], [1.0, 1.0])
