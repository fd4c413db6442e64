"""read_run_arrays_fast: the same run as read_run (ids, order, bit-identical scores), any thread count;
read_run_arrays: the line-by-line reader's arrays (every line), from the Numba parse."""

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jkofast.eval.fastread import _read_run_arrays_lines, read_run_arrays, read_run_arrays_fast
from jkofast.eval.metrics import evaluate
from jkofast.eval.trec import read_run
from jkofast.kernels.eval.parse import _POW10, _parse_decimal


def _same_as_read_run(path, n_threads=None):
    ra = read_run_arrays_fast(path, n_threads=n_threads)
    ref = read_run(path)
    assert ra.query_ids == list(ref)
    for i, q in enumerate(ra.query_ids):
        lo, hi = ra.offsets[i], ra.offsets[i + 1]
        ids = [d.decode() if isinstance(d, bytes) else str(d) for d in ra.doc_ids[lo:hi]]
        got = dict(zip(ids, ra.scores[lo:hi].tolist(), strict=True))
        assert got == ref[q] and list(got) == list(ref[q])
        assert all(np.float64(got[d]).tobytes() == np.float64(ref[q][d]).tobytes() for d in got)
    return ra


def _write(tmp_path, text, name="run.trec"):
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(p)


TREC = "q1 Q0 d1 1 3.25 t\nq1 Q0 d2 2 -0.5 t\nq2 Q0 d3 1 1e-3 t\nq2 Q0 d1 2 12 t\n"


@pytest.mark.parametrize(
    "text, fast",
    [
        (TREC, True),
        (TREC.replace("\n", "\r\n"), True),  # CRLF
        ("# comment\n\n" + TREC + "\n", True),  # comments and blank lines
        ("q1\td 1\t0.5\nq1\td 2\t0.25\n", True),  # 3 columns on tabs: ids with spaces
        ("query-id\tcorpus-id\tscore\nq1\td1\t0.5\n", True),  # header (not a number for float())
        ("q1\td1\t1e400\nq1\td2\t0.5\n", False),  # first value not fast-parsed but a float: not a header
        ("q1 Q0 d\u00e9 1 0.5 t\n", False),  # non-ASCII id: the line reader
        ("q1 Q0 d1 1 0.12345678901234567891 t\n", False),  # 20 significant digits
        ("q1 Q0 d1 1 9223372036854776.000 t\n", False),  # 19 digits: would overflow an int64 mantissa
        ("q1 Q0 d1 1 1e30 t\nq1 Q0 d2 2 inf t\n", False),
        ("q1 Q0 d1 1 0.5 t\nq2 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25 t\n", False),  # q1 not contiguous: merged
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.75 t\n", True),  # a repeated doc: the last score (dict semantics)
    ],
)
def test_equals_read_run(tmp_path, text, fast):
    ra = _same_as_read_run(_write(tmp_path, text))
    assert (ra.doc_ids.dtype.kind == "S") == fast


@pytest.mark.parametrize(
    "text",
    [
        TREC,
        TREC.replace("\n", "\r\n"),
        "# comment\n\n" + TREC + "\n",
        "q1\td 1\t0.5\nq1\td 2\t0.25\n",
        "query-id\tcorpus-id\tscore\nq1\td1\t0.5\n",
        "q1 Q0 d\u00e9 1 0.5 t\n",  # non-ASCII: the line-by-line reader
        "q1 Q0 d1 1 1e30 t\nq1 Q0 d2 2 inf t\n",
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.75 t\nq1 Q0 d1 3 0.25 t\n",  # repeated: every line kept
        "",
    ],
)
def test_read_run_arrays_equals_the_line_by_line_reader(tmp_path, text):
    """Every line, file order, str ids, bit-identical scores: what the line-by-line reader gives."""
    path = _write(tmp_path, text)
    got, want = read_run_arrays(path), _read_run_arrays_lines(path)
    assert got.query_ids == want.query_ids
    np.testing.assert_array_equal(got.offsets, want.offsets)
    assert got.doc_ids.dtype.kind == "U" and got.doc_ids.tolist() == want.doc_ids.tolist()
    assert got.scores.dtype == np.float64 and got.scores.tobytes() == want.scores.tobytes()


def test_read_run_arrays_refuses_a_query_split_in_two(tmp_path):
    """A query whose lines are not contiguous: the line-by-line reader's ValueError, on the fast path too."""
    path = _write(tmp_path, "q1 Q0 d1 1 0.5 t\nq2 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25 t\n")
    with pytest.raises(ValueError, match="lines of query 'q1' are not contiguous"):
        read_run_arrays(path)


def test_gzip_and_threads(tmp_path):
    rng = np.random.default_rng(0)
    lines = [
        f"q{q} Q0 d{int(rng.integers(0, 500))}_{r} {r} {rng.normal() * 10:.6f} run\n"
        for q in range(300)
        for r in range(20)
    ]
    p = tmp_path / "run.trec.gz"
    with gzip.open(p, "wt") as fh:
        fh.writelines(lines)
    a = _same_as_read_run(str(p), n_threads=1)
    b = read_run_arrays_fast(str(p), n_threads=2)
    assert a.query_ids == b.query_ids
    assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.doc_ids, b.doc_ids)
    assert a.scores.tobytes() == b.scores.tobytes()


def test_metrics_equal_the_dict_path(tmp_path):
    rng = np.random.default_rng(1)
    text = "".join(
        f"q{q} Q0 d{int(d)} {r} {float(rng.integers(0, 5)) / 4} x\n"  # ties: the id tie-break decides
        for q in range(40)
        for r, d in enumerate(rng.choice(60, 15, replace=False))
    )
    path = _write(tmp_path, text)
    qrels = {f"q{q}": {f"d{int(d)}": int(rng.integers(0, 3)) for d in rng.choice(60, 5)} for q in range(40)}
    m = ("ndcg@10", "map", "mrr@10", "recall@5")
    a = evaluate(read_run_arrays_fast(path), qrels, m)
    b = evaluate(read_run(path), qrels, m)
    assert a.query_ids == b.query_ids
    for k in a.per_query:
        assert np.array_equal(a.per_query[k], b.per_query[k])


def test_malformed_file_errors_name_the_line(tmp_path):
    with pytest.raises(ValueError, match=r"run.trec:2: expected 6 columns, got 5"):
        read_run_arrays_fast(_write(tmp_path, "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.5\n"))
    with pytest.raises(ValueError, match="score is NaN"):
        read_run_arrays_fast(_write(tmp_path, "q1 Q0 d1 1 nan t\n"))
    with pytest.raises(FileNotFoundError):
        read_run_arrays_fast(str(tmp_path / "missing.trec"))


@settings(max_examples=300, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from(["{!r}", "{:.4f}", "{:.12g}", "{:e}", "{:.3E}", "{:f}"]),
)
def test_decimal_fast_path_is_python_float(x, fmt):
    text = fmt.format(x)
    buf = np.frombuffer(text.encode(), np.uint8)
    v, ok = _parse_decimal(buf, 0, buf.shape[0], _POW10)
    if ok:  # else the line reader parses it
        assert np.float64(v).tobytes() == np.float64(float(text)).tobytes(), text
