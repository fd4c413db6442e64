"""Fuzz: damaged BEIR folders (corpus / queries JSONL, embeddings .npy) load correctly or fail naming the file.

A corpus or queries file damaged at random either loads to exactly what its well-formed lines say
(each record parsed by ``json.loads``) or ends in a ``ValueError`` naming the file (and its line);
a damaged embeddings folder returns the saved arrays or ends in a ``ValueError`` naming the array.
Never a crash, a numpy-internal message or a silently different result.
"""

import json
import os
import shutil
import tempfile
import warnings

import numpy as np
from beir_helpers import write_beir
from hypothesis import given
from hypothesis import strategies as st
from mutate import mutated

from jkofast.datasets.beir import DataWarning, load_dataset

DOCS = [("d1", "T one", "alpha beta"), ("d2", "", "gamma \u00e9t\u00e9"), ("d3", "Three", "delta"), ("d4", "x", "y")]
QUERIES = [("q1", "alpha?"), ("q2", "gamma delta"), ("q3", "\u0645\u0631\u062d\u0628\u0627")]
QRELS = [("q1", "d1", 1), ("q2", "d3", 2), ("q3", "d2", 1)]


def _folder() -> str:
    return write_beir(tempfile.mkdtemp(prefix="jkofast-fuzz-beir-"), DOCS, QUERIES, QRELS)


def _naive_records(data: bytes):
    """The records a well-formed JSONL file holds, or None when any non-blank line is not one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    out = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            return None
        out.append(obj)
    return out


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return load_dataset(path)


@given(st.sampled_from(["corpus.jsonl", "queries.jsonl"]), st.data())
def test_damaged_jsonl_loads_as_written_or_fails_naming_the_file(fname, data):
    root = _folder()
    p = os.path.join(root, fname)
    raw = data.draw(mutated(open(p, "rb").read()))
    with open(p, "wb") as fh:
        fh.write(raw)
    try:
        ds = _load(root)
    except ValueError as exc:
        assert fname in str(exc) or "qrels" in str(exc), f"the message names no file: {exc}"
        return
    records = _naive_records(raw)
    assert records is not None, f"loaded a file that is not JSONL: {raw!r}"
    if fname == "corpus.jsonl":
        want = [(str(r["_id"]), r.get("title") or "", r.get("text") or "") for r in records]
        got = list(zip(ds.doc_ids, ds.titles, ds.texts))
        assert got == want
    else:
        want = {str(r["_id"]): r.get("text") for r in records if (r.get("text") or "").strip()}
        assert {q: ds.queries[q] for q in ds.query_ids} == want


def _embeddings(root: str) -> str:
    d = os.path.join(root, "embeddings", "m")
    os.makedirs(d)
    rng = np.random.default_rng(0)
    np.save(os.path.join(d, "docs.npy"), rng.standard_normal((4, 8)).astype(np.float16))
    np.save(os.path.join(d, "queries.npy"), rng.standard_normal((3, 8)).astype(np.float16))
    return d


@given(st.sampled_from(["docs.npy", "queries.npy"]), st.data())
def test_damaged_embeddings_load_as_saved_or_fail_naming_the_array(fname, data):
    root = _folder()
    d = _embeddings(root)
    want = tuple(np.load(os.path.join(d, f)).astype(np.float32) for f in ("docs.npy", "queries.npy"))
    p = os.path.join(d, fname)
    how = data.draw(st.sampled_from(["bytes", "swap", "dtype", "nan", "shape"]))
    if how == "bytes":
        raw = data.draw(mutated(open(p, "rb").read(), max_ops=3))
        with open(p, "wb") as fh:
            fh.write(raw)
    elif how == "swap":
        other = os.path.join(d, "queries.npy" if fname == "docs.npy" else "docs.npy")
        tmp = p + ".x"
        shutil.move(p, tmp)
        shutil.move(other, p)
        shutil.move(tmp, other)
    elif how == "dtype":
        dt = data.draw(st.sampled_from(["U3", "complex64", "int8", "float64", "bool"]))
        np.save(p, np.zeros(np.load(p).shape, dtype=dt))
    elif how == "nan":
        a = np.load(p)
        a[data.draw(st.integers(0, a.shape[0] - 1)), 0] = np.nan
        np.save(p, a)
    else:
        np.save(p, np.zeros(data.draw(st.sampled_from([(4,), (4, 8, 1), (0, 8), (5, 8)])), np.float16))
    ds = _load(root)
    try:
        doc, qry = ds.embeddings("m")
    except ValueError as exc:
        assert "docs.npy" in str(exc) or "queries.npy" in str(exc) or d in str(exc), exc
        return
    if how == "bytes":  # a change that kept the file valid (e.g. a flipped data byte) must read as written
        a = np.load(p).astype(np.float32)
        np.testing.assert_array_equal(doc if fname == "docs.npy" else qry, a)
    elif how == "dtype":
        assert doc.shape == want[0].shape and qry.shape == want[1].shape
    else:
        raise AssertionError(f"{how}: accepted a damaged folder")
