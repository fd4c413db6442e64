"""Fuzz: a damaged index folder (SGR, BM25) fails naming the file or answers as the undamaged one; never a crash.

Hypothesis draws damages of one file at a time -- every ``.npy`` and the manifest: flipped bytes,
truncation, a zeroed header, two files swapped, an array rewritten with another dtype, ids set out
of range -- and one subprocess (``index_worker.py``) applies them case by case to a copy of a tiny
index, opens it (memory-mapped and in memory; with the per-open checksum threshold as shipped, and
at 0, as every large file of a large index is opened) and searches.  Each open must end in a
``ValueError`` / ``TypeError`` naming the damaged file, or in results identical to the undamaged
index's; damage that changed bytes must be caught by ``check_index`` (``jkofast index --check``)
whatever the open did.  A crash of the subprocess fails the test naming the case it died on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jkofast.sgr.retriever import SparseGeometricRetriever
from jkofast.sparse.index import BM25Index

TEXTS = [
    "solar panels convert sunlight into power",
    "wind turbines make power from wind",
    "sunlight and wind are renewable energy",
    "the cat sat on the mat",
    "dog and cat play in the sunlight",
    "coffee and cream in the morning",
    "energy from the sun and the wind",
    "a dog sleeps on the mat",
]
QUERIES = ["sunlight power", "cat dog mat", "wind energy", "coffee"]
# arrays whose entries are ids or pointers (the ones a kernel indexes with)
ID_ARRAYS = {
    "sgr": ["s_indptr", "s_idx", "b_indptr", "mem_doc", "code_term", "c_indptr", "c_terms", "r_indptr", "r_terms",
            "a_indptr", "a_idx", "g_indptr", "g_idx", "t_indptr", "t_off", "t_code", "t_tfq", "ids_off"],
    "sparse": ["term_ptr", "post_docs", "doc_len"],
}  # fmt: skip
MANIFEST = {"sgr": "meta.json", "sparse": "manifest.json"}


def _golden(kind: str, root: str) -> str:
    path = os.path.join(root, f"golden-{kind}")
    if kind == "sgr":
        SparseGeometricRetriever(pool_size=5).fit(TEXTS, ids=[f"d{i}" for i in range(len(TEXTS))]).save(path)
    else:
        BM25Index("okapi").fit(TEXTS).save(path)
    return path


def _cases(files: list, kind: str):
    npy = [f for f in files if f.endswith(".npy")]
    ids = [f"{k}.npy" for k in ID_ARRAYS[kind] if f"{k}.npy" in npy]
    flip = st.fixed_dictionaries(
        {"op": st.just("flip"), "file": st.sampled_from(files), "at": st.integers(0, 1 << 16),
         "mask": st.integers(1, 255)}
    )  # fmt: skip
    trunc = st.fixed_dictionaries(
        {"op": st.just("truncate"), "file": st.sampled_from(files), "at": st.integers(0, 1 << 16)}
    )
    zero = st.fixed_dictionaries({"op": st.just("zero_header"), "file": st.sampled_from(npy)})
    swap = st.fixed_dictionaries(
        {"op": st.just("swap"), "file": st.sampled_from(npy), "other": st.sampled_from(npy)}
    ).filter(lambda c: c["file"] != c["other"])
    dtype = st.fixed_dictionaries(
        {"op": st.just("dtype"), "file": st.sampled_from(npy),
         "dtype": st.sampled_from(["float32", "float64", "int32", "int64", "uint16", "uint8"])}
    )  # fmt: skip
    bad_ids = st.fixed_dictionaries(
        {"op": st.just("ids"), "file": st.sampled_from(ids), "value": st.sampled_from(["big", "neg", "edge"]),
         "edge": st.integers(0, 40), "count": st.integers(1, 64), "at": st.integers(0, 1 << 16)}
    )  # fmt: skip
    return st.one_of(flip, trunc, zero, swap, dtype, bad_ids)


def _run_worker(kind: str, tmp_path, cases: list) -> list:
    spec = {"kind": kind, "golden": _golden(kind, str(tmp_path)), "work": str(tmp_path), "queries": QUERIES}
    spec["cases"] = cases
    sp = tmp_path / "cases.json"
    sp.write_text(json.dumps(spec))
    worker = os.path.join(os.path.dirname(__file__), "index_worker.py")
    proc = subprocess.run([sys.executable, worker, str(sp)], capture_output=True, text=True, timeout=600)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0:
        n = len(lines)
        case = cases[n] if n < len(cases) else None
        pytest.fail(f"worker exit {proc.returncode} on case {n} {case}:\n{proc.stderr[-3000:]}")
    assert len(lines) == len(cases)
    return lines


def _names(case: dict) -> tuple:
    return (case["file"], case["other"]) if case["op"] == "swap" else (case["file"],)


def _check_outcomes(kind: str, cases: list, lines: list) -> None:
    for case, out in zip(cases, lines):
        names = _names(case)
        for row in out["opens"]:
            if "error" in row:
                assert any(n in row["error"] for n in names), (case, row)
            elif row["threshold"] > 0 or not row["mmap"] or not out["changed"]:
                # every file of the tiny index is checksummed at open as shipped, and an in-memory
                # open checksums every file: an open that did not fail answers as the undamaged index
                assert row["same"], (case, row)
        if out["changed"]:
            assert not out["check_ok"] and any(n in out["check_error"] for n in names), (case, out)
        else:
            assert out["check_ok"], (case, out)


@pytest.mark.parametrize("kind", ["sgr", "sparse"])
def test_damaged_index_fails_naming_the_file_or_answers_unchanged(kind, tmp_path):
    golden = _golden(kind, str(tmp_path / "probe"))
    files = sorted(os.listdir(golden))
    cases = []

    @given(_cases(files, kind))
    def collect(case):
        cases.append(case)

    collect()
    # the damages Hypothesis drew, plus the manifest's and the crash of issue #26 every time
    cases += [
        {"op": "flip", "file": MANIFEST[kind], "at": 40, "mask": 1},
        {"op": "truncate", "file": MANIFEST[kind], "at": 100},
        {"op": "ids", "file": "t_code.npy" if kind == "sgr" else "post_docs.npy", "value": "big", "edge": 0,
         "count": 64, "at": 0},
    ]  # fmt: skip
    lines = _run_worker(kind, tmp_path, cases)
    _check_outcomes(kind, cases, lines)
