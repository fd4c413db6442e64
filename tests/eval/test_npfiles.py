"""The NumPy-only file engine (``jkofast evaluate --n-boot 0``): the Numba engine's values to the last bit.

References: :func:`jkofast.eval.fastread.evaluate_files` (the Numba engine, itself checked against the
line-by-line readers, pytrec_eval and the naive oracles), the naive oracles of
``tests/reference_metrics.py`` on the dict readers' content, and Python's ``float`` for the scores.
"""

import gzip
import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference as ref
from jkofast.eval import _conventions as conv
from jkofast.eval import _npfiles as npfiles
from jkofast.eval._npfiles import evaluate_files_numpy
from jkofast.eval.fastread import evaluate_files, read_run_arrays
from jkofast.eval.trec import read_qrels, read_run
from jkofast.kernels.eval import metrics as kernel_codes

METRICS = ("ndcg@10", "recall@10", "p@5", "mrr@10", "map", "ndcg", "map@5", "hit@3", "recall@100", "mrr")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(npfiles.__file__))))


def _write(tmp_path, text, name):
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(p)


def _bits(x: np.ndarray) -> list:
    return np.ascontiguousarray(x, np.float64).view(np.int64).tolist()


def _same_as_numba(rp, qp, metrics=METRICS, **kw):
    """The NumPy engine's result equals the Numba engine's: queries, counts, per-query values bit for bit."""
    got = evaluate_files_numpy(rp, qp, metrics, **kw)
    assert got is not None
    exp, info = evaluate_files(rp, qp, metrics, counts=True, **kw)
    assert got.query_ids == exp.query_ids
    assert list(got.per_query) == list(exp.per_query)
    for m in exp.per_query:
        assert _bits(got.per_query[m]) == _bits(exp.per_query[m]), m
    assert got.n_ret.tolist() == exp.n_ret.tolist()
    assert (got.run_only, got.qrels_only) == (info["run_only"], info["qrels_only"])
    assert got.means == exp.means
    return got


def _doc(rng) -> str:
    """Document ids of 1 to 3 words, sharing prefixes (d1, d10, d1x...): the word packing and strcmp order."""
    d = int(rng.integers(0, 60))
    return ["d", "doc-", "a-long-document-id-"][d % 3] + str(d) + ("x" * int(rng.integers(0, 3)) if d % 5 == 0 else "")


def _random_files(tmp_path, seed, *, cols=6, sep=" ", qcols=4, n_q=30, depth=25, eol="\n"):
    """A run with ties, repeated documents, run-only queries; qrels with repeats, 0 and negative labels."""
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(n_q):
        qid = f"q{q}" if q % 4 else f"query-number-{q}-with-a-long-id"
        for r in range(depth):
            s = repr(float(rng.integers(-4, 6) / 4)) if r % 3 else f"{rng.normal():.3f}"  # ties, signs
            f = [qid, "Q0", _doc(rng), str(r + 1), s, "t"] if cols == 6 else [qid, _doc(rng), s]
            lines.append(sep.join(f))
    qlines = []
    for q in range(3, n_q + 5):  # q0-q2 unjudged, q30-q34 judged without run lines
        qid = f"q{q}" if q % 4 else f"query-number-{q}-with-a-long-id"
        for _ in range(6):
            lab = int(rng.integers(-1, 4))
            f = [qid, "0", _doc(rng), str(lab)] if qcols == 4 else [qid, _doc(rng), str(lab)]
            qlines.append(sep.join(f))
    rng.shuffle(qlines)  # a query's judgments need not be contiguous
    return (
        _write(tmp_path, eol.join(lines) + eol, "run.trec"),
        _write(tmp_path, eol.join(qlines) + eol, "qrels"),
    )


def test_codes_equal_the_kernels():
    for name in ("NDCG", "RECALL", "PRECISION", "RR", "AP", "HIT", "GAIN_LINEAR", "GAIN_EXPONENTIAL"):
        assert getattr(conv, name) == getattr(kernel_codes, name), name
    assert (conv.TIE_TREC_EVAL, conv.TIE_GIVEN) == (kernel_codes.TIE_TREC_EVAL, kernel_codes.TIE_GIVEN)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tie_break", ["trec_eval", "given"])
@pytest.mark.parametrize("gain", ["linear", "exponential"])
@pytest.mark.parametrize("missing", ["skip", "zero"])
def test_random_files_equal_the_numba_engine_and_the_oracle(tmp_path, seed, tie_break, gain, missing):
    rp, qp = _random_files(tmp_path, seed)
    got = _same_as_numba(rp, qp, tie_break=tie_break, gain=gain, missing=missing)
    run, qrels = read_run(rp), read_qrels(qp)
    names = [m for m in got.per_query]
    if tie_break == "trec_eval":
        exp = {m: {} for m in names}
        for q in run:
            if qrels.get(q):
                ranked = ref.trec_eval_order(run[q])
                for m in names:
                    kind, k = ref.split_metric(m)
                    exp[m][q] = ref.metric_one(ranked, qrels[q], kind, k, gain=gain)
    else:
        ra = read_run_arrays(rp)
        lists = {q: ra.doc_ids[ra.offsets[i] : ra.offsets[i + 1]].tolist() for i, q in enumerate(ra.query_ids)}
        exp = ref.jko_metrics(lists, qrels, names, gain=gain)
    for m in names:
        mine = dict(zip(got.query_ids, got.per_query[m].tolist(), strict=True))
        for q, v in exp[m].items():
            assert mine[q] == pytest.approx(v, rel=1e-12, abs=1e-15), (m, q)
        assert all(mine[q] == 0.0 for q in mine if q not in exp[m])  # judged, no run lines (missing="zero")
    assert got.run_only == 3 and got.qrels_only == 5
    assert len(got.query_ids) == 27 + (5 if missing == "zero" else 0)


@pytest.mark.parametrize(
    "layout",
    [
        dict(cols=3, sep="\t", qcols=3),
        dict(cols=3, sep=" ", qcols=4),
        dict(cols=6, sep="\t", qcols=3),
        dict(cols=6, sep="  ", qcols=4),  # separators of several spaces
        dict(cols=6, sep=" ", qcols=4, eol="\r\n"),  # CRLF
        dict(cols=6, sep=" ", qcols=4, eol="\n\n"),  # blank lines
    ],
)
def test_layouts_equal_the_numba_engine(tmp_path, layout):
    rp, qp = _random_files(tmp_path, 5, **layout)
    for tie in ("trec_eval", "given"):
        _same_as_numba(rp, qp, tie_break=tie)


def test_header_lines_and_gzip(tmp_path):
    rp, qp = _random_files(tmp_path, 6, cols=3, sep="\t", qcols=3)
    for p in (rp, qp):
        with open(p) as fh:
            body = fh.read()
        with open(p, "w") as fh:
            fh.write("query-id\tcorpus-id\tscore\n" + body)
        with open(p, "rb") as src, gzip.open(p + ".gz", "wb") as dst:
            dst.write(src.read())
    _same_as_numba(rp, qp)
    _same_as_numba(rp + ".gz", qp + ".gz")


@pytest.mark.parametrize("block", [64, 200, 4096])
def test_small_read_blocks(tmp_path, monkeypatch, block):
    # queries span blocks; lines longer than a block grow the buffer
    rp, qp = _random_files(tmp_path, 9, n_q=12, depth=15)
    with open(rp, "a") as fh:
        fh.write(f"q99 Q0 {'x' * 200} 1 0.5 t\nq99 Q0 y 2 0.25 t\n")
    with open(qp, "a") as fh:
        fh.write(f"q99 0 {'x' * 200} 1\n")
    monkeypatch.setattr(npfiles, "_BLOCK", block)
    for tie in ("trec_eval", "given"):
        _same_as_numba(rp, qp, tie_break=tie)


@pytest.mark.parametrize("order", ["trec", "reversed", "shuffled"])
def test_every_file_order_ranks_as_trec_eval(tmp_path, order):
    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in rng.choice(1000, 200, replace=False)]
    rows = sorted(zip(rng.integers(0, 40, 200) / 8, docs, strict=True), reverse=True)
    if order == "reversed":
        rows = rows[::-1]
    elif order == "shuffled":
        rows = [rows[i] for i in rng.permutation(len(rows))]
    ranked = sorted(rows, reverse=True)
    run = "".join(f"q1 Q0 {d} {r + 1} {s} t\n" for r, (s, d) in enumerate(rows))
    run += "".join(f"q2 Q0 {d} {r + 1} {s} t\n" for r, (s, d) in enumerate(ranked))  # q2 in trec order
    qrels = "".join(f"q{1 + i % 2} 0 {d} {int(rng.integers(0, 3))}\n" for i, d in enumerate(docs[::3]))
    _same_as_numba(_write(tmp_path, run, "run.trec"), _write(tmp_path, qrels, "qrels"))


def test_hand_worked_ties_duplicates_and_order(tmp_path):
    # q1: d2 and d1 tie at 1.0 -> id descending: d2, d1; d3 appears twice, its last score (3.0) ranks it first.
    # Labels: d1 = 1 (the qrels repeat: the last label wins), d9 unretrieved = 2.
    run = "q1 Q0 d3 1 0.5 t\nq1 Q0 d1 2 1.0 t\nq1 Q0 d2 3 1.0 t\nq1 Q0 d3 4 3.0 t\n"
    qrels = "q1 0 d1 0\nq1 0 d9 2\nq1 0 d1 1\n"
    rp, qp = _write(tmp_path, run, "r"), _write(tmp_path, qrels, "q")
    res = evaluate_files_numpy(rp, qp, ["mrr", "p@3", "recall@3", "ndcg"])
    assert res.per_query["mrr"].tolist() == [1 / 3]  # ranking d3, d2, d1
    assert res.per_query["p@3"].tolist() == [1 / 3]
    assert res.per_query["recall@3"].tolist() == [0.5]
    assert res.per_query["ndcg"].tolist() == [(1 / np.log2(4)) / (2 + 1 / np.log2(3))]
    assert res.n_ret.tolist() == [3]
    given_ = evaluate_files_numpy(rp, qp, ["mrr"], tie_break="given")
    assert given_.per_query["mrr"].tolist() == [1 / 2] and given_.n_ret.tolist() == [4]  # file order, every line


@pytest.mark.parametrize(
    "run, qrels",
    [
        ("# a comment\nq1 Q0 d1 1 1 t\n", "q1 0 d1 1\n"),  # comment lines: the line reader
        ("q1 Q0 d\u00e9 1 0.5 t\n", "q1 0 d\u00e9 1\n"),  # non-ASCII
        ("q1 Q0 d1 1 0.5 t\nq2 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.75 t\n", "q1 0 d2 1\n"),  # q1 not contiguous
        ("q1 Q0 d1 1 nan t\n", "q1 0 d1 1\n"),  # NaN: the line reader raises
        ("q1 Q0 d1 1 inf t\nq1 Q0 d2 2 1 t\n", "q1 0 d1 1\n"),  # not finite
        ("q1 Q0 d1 1 0.5 t\rq1 Q0 d2 2 1 t\n", "q1 0 d2 1\n"),  # a lone CR ends a line for Python
        ("q1\tQ0 d1\t1\t0.5\tt\n", "q1 0 d1 1\n"),  # tab line with a space inside a field
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.5\n", "q1 0 d1 1\n"),  # a short line: the reader names it
        ("q1 Q0 d1 one 0.5 t\n", "q1 0 d1 1\n"),  # rank not an integer
        ("q1 Q0 d1 1 0.5 t\n", "q1 0 d1 1.5\n"),  # label not an integer
        ("", "q1 0 d1 1\n"),  # empty run
        ("q1 Q0 d1 1 0.5 t\n", ""),  # empty qrels
        (f"q1 Q0 {'d' * 300} 1 0.5 t\n", "q1 0 d1 1\n"),  # an id beyond the word windows
        ("q1 Q0 d1 1 0.5 t\n", "q1 0 d1 2000\n"),  # exponential gain overflow: the Numba engine raises
    ],
)
def test_files_outside_the_layout_are_handed_back(tmp_path, run, qrels):
    rp, qp = _write(tmp_path, run, "run.trec"), _write(tmp_path, qrels, "qrels.txt")
    assert evaluate_files_numpy(rp, qp, ["ndcg@10"], gain="exponential") is None


@pytest.mark.parametrize(
    "run, qrels",
    [
        ("q1 Q0 d1 1 1e30 t\nq1 Q0 d2 2 +1 t\nq1 Q0 d3 3 -.5 t\nq1 Q0 d4 4 7. t\n", "q1 0 d1 1\nq1 0 d4 2\n"),
        ("q1 Q0 d1 1 0.12345678901234567891 t\nq1 Q0 d2 2 9223372036854776.000 t\n", "q1 0 d2 1\n"),
        ("q1 Q0 d1 +1 0.5 t\nq1 Q0 d2 002 0.5 t\n", "q1 0 d2 +1\nq1 0 d1 -0\n"),
        ("q1 Q0 d1 1 0.5 t\n", "q1 0 d1 1_0\n"),  # int() reads 1_0 as 10, as the line reader does
        ("q1 Q0 d1 1 1e39 t\nq1 Q0 d2 2 0.5 t\n", "q1 0 d2 1\n"),  # beyond float32: warns, ties as inf
    ],
)
def test_unusual_values_equal_the_numba_engine(tmp_path, run, qrels):
    rp, qp = _write(tmp_path, run, "run.trec"), _write(tmp_path, qrels, "qrels.txt")
    with pytest.warns() if "1e39" in run else _nothing():
        _same_as_numba(rp, qp)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_given_order_counts_every_line_in_both_engines(tmp_path):
    # 1e39 sends the Numba engine to the line reader; with tie_break="given" it too counts both d1 lines
    rp = _write(tmp_path, "q1 d1 0\nq1 d1 1e39\nq1 d2 5\n", "run.tsv")
    qp = _write(tmp_path, "q1 d1 1\n", "qrels.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _same_as_numba(rp, qp, ["mrr", "p@3"], tie_break="given")
    assert got.n_ret.tolist() == [3] and got.per_query["p@3"].tolist() == [2 / 3]


def test_score_beyond_float32_warns_naming_the_line(tmp_path):
    rp = _write(tmp_path, "q1 Q0 d1 1 1e39 t\nq1 Q0 d2 2 0.5 t\n", "run.trec")
    qp = _write(tmp_path, "q1 0 d2 1\n", "qrels.txt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate_files_numpy(rp, qp)
    assert [type(w.message) for w in caught] == [conv.ScoreRangeWarning]  # no raw cast overflow warning
    assert "query 'q1', document 'd1', score 1e+39" in str(caught[0].message)


def test_handed_back_files_warn_once(tmp_path):
    # q1's lines are not contiguous: the Numba engine evaluates the files and warns; the NumPy engine does not
    rp = _write(tmp_path, "q1 Q0 d1 1 1e39 t\nq2 Q0 d2 1 0.5 t\nq1 Q0 d3 2 0.5 t\n", "run.trec")
    qp = _write(tmp_path, "q1 0 d1 1\n", "qrels.txt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert evaluate_files_numpy(rp, qp) is None
    assert caught == []


def test_bad_arguments(tmp_path):
    rp, qp = _random_files(tmp_path, 0, n_q=4)
    with pytest.raises(ValueError, match="diversity"):
        evaluate_files_numpy(rp, qp, ["diversity@10"])
    with pytest.raises(ValueError, match="unknown metric"):
        evaluate_files_numpy(rp, qp, ["nope"])
    with pytest.raises(ValueError, match="gain"):
        evaluate_files_numpy(rp, qp, gain="log")
    with pytest.raises(ValueError, match="tie_break"):
        evaluate_files_numpy(rp, qp, tie_break="random")
    with pytest.raises(ValueError, match="missing"):
        evaluate_files_numpy(rp, qp, missing="drop")
    with pytest.raises(TypeError, match="metric"):
        evaluate_files_numpy(rp, qp, 5)
    with pytest.raises(FileNotFoundError):
        evaluate_files_numpy(str(tmp_path / "missing.trec"), qp)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from(["{!r}", "{:.4f}", "{:.12g}", "{:e}", "{:.3E}", "{:f}", "{:+.17f}", "{:.0f}."]),
)
def test_decimals_are_python_float(x, fmt):
    texts = [fmt.format(x), "-" + fmt.format(abs(x)), "00" + fmt.format(abs(x))]
    data = ("\n" + " ".join(texts) + "\n").encode()
    buf = np.zeros(npfiles._PAD * 2 + len(data), np.uint8)
    buf[npfiles._PAD : npfiles._PAD + len(data)] = np.frombuffer(data, np.uint8)
    starts, pos = [], npfiles._PAD + 1
    for t in texts:
        starts.append(pos)
        pos += len(t) + 1
    lengths = np.array([len(t) for t in texts])
    got = npfiles._decimals(buf, np.array(starts), lengths)
    try:
        want = [float(t) for t in texts]
    except ValueError:  # e.g. "-+0.5": not a number for the line reader either
        assert got is None
        return
    if all(np.isfinite(want)):
        assert got is not None and _bits(got) == _bits(np.array(want)), texts


def _modules_and_output(args: list[str], env: dict | None = None) -> tuple[dict, dict]:
    code = (
        "import json, os, sys\nfrom jkofast.cli import main\n"
        f"rc = main({args!r})\n"
        "print(json.dumps({'rc': rc, 'numba': sorted(m for m in sys.modules if m.split('.')[0] == 'numba'), "
        "'blas': os.environ.get('OPENBLAS_NUM_THREADS')}))\n"
    )
    env = {**(os.environ if env is None else env), "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    lines = r.stdout.strip().splitlines()
    return json.loads(lines[-1]), json.loads("\n".join(lines[:-1]))


def test_cli_without_bootstrap_imports_no_numba(tmp_path):
    rp, qp = _random_files(tmp_path, 4)
    args = [
        "evaluate",
        "--run",
        rp,
        "--qrels",
        qp,
        "--n-boot",
        "0",
        "--json",
        "--per-query",
        "--metrics",
        ",".join(METRICS),
    ]
    status, out = _modules_and_output(args)
    assert status["rc"] == 0 and status["numba"] == []
    exp, info = evaluate_files(rp, qp, METRICS, counts=True)
    assert out["metrics"] == {m: {"mean": v} for m, v in exp.means.items()}
    assert out["per_query"]["query_ids"] == exp.query_ids
    assert all(out["per_query"][m] == exp.per_query[m].tolist() for m in exp.per_query)
    assert (out["skipped_run_queries_without_qrels"], out["qrels_queries_without_run"]) == (3, 5)
    assert out["ci"] is None and out["n_queries"] == 27


def test_cli_evaluate_asks_openblas_for_one_thread_unless_told(tmp_path):
    """The evaluate process does no linear algebra: OpenBLAS gets one thread (no spinning pool)
    unless the user set a thread count, which is kept."""
    import threadpoolctl

    rp, qp = _random_files(tmp_path, 4)
    args = ["evaluate", "--run", rp, "--qrels", qp, "--n-boot", "0", "--json"]
    plain = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    }
    status, out = _modules_and_output(args, plain)
    assert status["rc"] == 0 and status["blas"] == "1"
    status, again = _modules_and_output(args, {**plain, "OPENBLAS_NUM_THREADS": "3"})
    assert status["blas"] == "3" and again["metrics"] == out["metrics"]
    status, _ = _modules_and_output(args, {**plain, "OMP_NUM_THREADS": "2"})
    assert status["blas"] is None  # OpenBLAS reads OMP_NUM_THREADS: left to it
    # NumPy loaded before the command (a Python caller): its pool runs already, nothing is changed
    from jkofast.cli import main

    environ, pools = dict(os.environ), threadpoolctl.threadpool_info()
    assert main(args) == 0
    assert dict(os.environ) == environ and threadpoolctl.threadpool_info() == pools


def test_cli_hands_unusual_files_to_the_numba_engine(tmp_path):
    rp, qp = _random_files(tmp_path, 4)
    with open(rp) as fh:
        text = fh.read()
    rp2 = _write(tmp_path, "# a comment line\n" + text, "commented.trec")
    status, out = _modules_and_output(["evaluate", "--run", rp2, "--qrels", qp, "--n-boot", "0", "--json"])
    assert status["rc"] == 0 and status["numba"]  # the Numba engine read it
    _, plain = _modules_and_output(["evaluate", "--run", rp, "--qrels", qp, "--n-boot", "0", "--json"])
    assert out["metrics"] == plain["metrics"]


@pytest.mark.parametrize(
    "field",
    ["1", "12", "+1", "-1", "+", "-", "1a", "a1", "12345678", "1234567x", "007", "1+", "1-2", ":", "/",
     "99999999", "123456789012", "+12345678", "12345678:", "1_0"],
)  # fmt: skip
def test_rank_check_is_signed_digits(field):
    data = ("\n" + field + "\n").encode()
    buf = np.zeros(npfiles._PAD * 2 + len(data), np.uint8)
    buf[npfiles._PAD : npfiles._PAD + len(data)] = np.frombuffer(data, np.uint8)
    got = npfiles._integer_fields(buf, np.array([npfiles._PAD + 1]), np.array([len(field)]))
    assert got == bool(re.fullmatch(r"[+-]?[0-9]+", field))


_NOISE = ["q1", "d1", "0", "1", "0.5", "x", "#", " ", "  ", "\t", "\n", "\r\n", "\r", "1_0", "nan", "\u00e9"]
_QIDS = ["q1", "q2", "q10", "query-with-a-long-id"]
_DOCS = ["d1", "d2", "d10", "d1x", "doc-number-0001", "doc-number-0001-b"]
_SCORES = ["0", "1", "0.5", "1.25", "-3", "+1", "1e3", ".5", "7.", "-0", "2.50", "1e39", "0.333333333333333314"]
_INTS = ["0", "1", "2", "3", "-1", "+1", "007", "1_0"]
_BAD = ["nan", "0x", "1.5", "-", ""]


def _lines(draw, kind: str, ncol: int) -> str:
    """A run (``kind="run"``) or qrels text: mostly well-formed lines on one separator, some noise."""
    sep = draw(st.sampled_from([" ", "\t", "  "]))
    out = []
    qids = draw(st.lists(st.sampled_from(_QIDS), max_size=8))
    if kind == "run" and draw(st.integers(0, 4)):  # mostly each query's lines together
        qids.sort()
    for q in qids:
        d = draw(st.sampled_from(_DOCS))
        bad = draw(st.integers(0, 29)) == 0  # now and then a value the line reader rejects
        if kind == "run":
            v = draw(st.sampled_from(_BAD if bad else _SCORES))
            fields = [q, "Q0", d, draw(st.sampled_from(_INTS)), v, "t"] if ncol == 6 else [q, d, v]
        else:
            v = draw(st.sampled_from(_BAD if bad else _INTS))
            fields = [q, "0", d, v] if ncol == 4 else [q, d, v]
        line = sep.join(fields)
        if draw(st.integers(0, 19)) == 0:  # noise inside the line
            at = draw(st.integers(0, len(line)))
            line = line[:at] + draw(st.sampled_from(_NOISE)) + line[at:]
        out.append(line)
    return "\n".join(out) + draw(st.sampled_from(["", "\n", "\r\n"]))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzzed_files_are_the_numba_engines_or_handed_back(tmp_path_factory, data):
    """Untrusted text: the NumPy engine returns the Numba engine's result, or None (never another answer)."""
    tmp = tmp_path_factory.mktemp("fuzz")
    run = _lines(data.draw, "run", data.draw(st.sampled_from([3, 6])))
    qrels = _lines(data.draw, "qrels", data.draw(st.sampled_from([3, 4])))
    rp, qp = _write(tmp, run, "run.trec"), _write(tmp, qrels, "qrels.txt")
    tie = data.draw(st.sampled_from(["trec_eval", "given"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = evaluate_files_numpy(rp, qp, ["ndcg@10", "map", "p@2", "mrr"], tie_break=tie)
        try:
            exp = evaluate_files(rp, qp, ["ndcg@10", "map", "p@2", "mrr"], tie_break=tie)
        except ValueError:
            assert got is None  # the line reader rejects the file: only the Numba engine answers
            return
    if got is not None:
        assert got.query_ids == exp.query_ids
        assert all(_bits(got.per_query[m]) == _bits(exp.per_query[m]) for m in exp.per_query)
        assert got.n_ret.tolist() == exp.n_ret.tolist()


def test_huge_page_advice_is_restored(tmp_path):
    rp, qp = _random_files(tmp_path, 1, n_q=4)
    switch = npfiles._multiarray._set_madvise_hugepage
    before = switch(True)
    try:
        evaluate_files_numpy(rp, qp)
        assert switch(True) is True  # the engine's own setting was undone
        switch(False)
        evaluate_files_numpy(rp, qp)
        assert switch(False) is False
    finally:
        switch(before)
