"""Fuzz: TREC runs and qrels, damaged at random, are read exactly as the naive reader reads them or rejected.

Never a crash, a hang or a silently different result: each file ends in a ``ValueError`` naming it
(``FileNotFoundError`` aside) or in the naive reader's content; the fast byte parser and the line reader
agree; ``evaluate_files`` equals ``evaluate`` over the line readers. Example counts come from the
Hypothesis profile (tests/conftest.py: ``ci`` bounded, ``dev`` long: ``HYPOTHESIS_PROFILE=dev``).
"""

import math
import os
import tempfile

import numpy as np
import reference_io
from hypothesis import given
from hypothesis import strategies as st
from mutate import mutated

from jkofast.eval.fastread import evaluate_files, read_run_arrays_fast
from jkofast.eval.metrics import evaluate
from jkofast.eval.trec import read_qrels, read_run

RUN = (
    b"q1 Q0 d1 1 3.25 t\nq1 Q0 d2 2 -0.5 t\nq1 Q0 d3 3 -0.75 t\n"
    b"q2 Q0 d3 1 1e-3 t\nq2 Q0 d1 2 0.0005 t\nq3 Q0 d2 1 7 t\n"
)
RUN3 = b"query-id\tcorpus-id\tscore\nq1\td1\t0.5\nq1\td2\t0.25\nq2\td9\t1.5\n"
QRELS = b"q1 0 d1 1\nq1 0 d3 2\nq2 0 d1 1\nq3 0 d4 1\n"
QRELS3 = b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t0\nq2\td9\t2\n"


def _file(data: bytes, name: str) -> str:
    d = tempfile.mkdtemp(prefix="jkofast-fuzz-")
    p = os.path.join(d, name)
    with open(p, "wb") as fh:
        fh.write(data)
    return p


def _outcome(fn, path):
    """``("ok", value)`` or ``("error", message)``; anything but ValueError propagates (a failure)."""
    try:
        return "ok", fn(path)
    except ValueError as exc:
        assert os.path.basename(path) in str(exc), f"the message does not name the file: {exc}"
        return "error", str(exc)


def _same_scores(a: dict, b: dict) -> bool:
    if list(a) != list(b):
        return False
    for q in a:
        if list(a[q]) != list(b[q]):
            return False
        for d in a[q]:
            x, y = a[q][d], b[q][d]
            if not (x == y or (math.isinf(x) and math.isinf(y) and (x > 0) == (y > 0))):
                return False
    return True


@given(st.one_of(mutated(RUN), mutated(RUN3)))
def test_run_reader_matches_the_naive_reader_or_rejects(data):
    path = _file(data, "run.trec")
    want = reference_io.read_run(path)
    kind, got = _outcome(read_run, path)
    if want is None:
        assert kind == "error", f"accepted a file the format rejects: {data!r} -> {got!r}"
        return
    assert kind == "ok", f"rejected a valid file: {data!r}: {got}"
    assert _same_scores(got, want)


@given(st.one_of(mutated(RUN), mutated(RUN3)))
def test_fast_run_reader_agrees_with_the_line_reader(data):
    path = _file(data, "run.trec")
    k1, slow = _outcome(read_run, path)
    k2, fast = _outcome(read_run_arrays_fast, path)
    assert k1 == k2, (data, slow, fast)
    if k1 == "ok":
        as_dict = {}
        for i, q in enumerate(fast.query_ids):
            lo, hi = int(fast.offsets[i]), int(fast.offsets[i + 1])
            ids = [d.decode() if isinstance(d, bytes) else str(d) for d in fast.doc_ids[lo:hi]]
            as_dict[q] = dict(zip(ids, np.asarray(fast.scores[lo:hi], np.float64).tolist(), strict=True))
        assert _same_scores(as_dict, slow)


@given(st.one_of(mutated(QRELS), mutated(QRELS3)))
def test_qrels_reader_matches_the_naive_reader_or_rejects(data):
    path = _file(data, "qrels.txt")
    want = reference_io.read_qrels(path)
    kind, got = _outcome(read_qrels, path)
    if want is None:
        assert kind == "error", f"accepted a file the format rejects: {data!r} -> {got!r}"
    else:
        assert kind == "ok", f"rejected a valid file: {data!r}: {got}"
        assert got == want and all(list(got[q]) == list(want[q]) for q in got)


@given(mutated(RUN, max_ops=3), mutated(QRELS, max_ops=3))
def test_evaluate_files_equals_evaluate_over_the_line_readers(run_bytes, qrels_bytes):
    run, qrels = _file(run_bytes, "run.trec"), _file(qrels_bytes, "qrels.txt")
    metrics = ["ndcg@10", "recall@10", "map", "mrr@10", "p@5"]
    k_run, r = _outcome(read_run, run)
    k_qrels, q = _outcome(read_qrels, qrels)
    try:
        fast = evaluate_files(run, qrels, metrics, n_threads=1)
    except ValueError as exc:
        assert k_run == "error" or k_qrels == "error" or not q or not r, f"fast path rejected valid files: {exc}"
        return
    assert k_run == "ok" and k_qrels == "ok", "evaluate_files accepted a file the line readers reject"
    slow = evaluate(r, q, metrics)
    assert fast.query_ids == slow.query_ids
    for m in metrics:
        np.testing.assert_array_equal(fast.per_query[m], slow.per_query[m])
