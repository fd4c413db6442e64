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


def _recorded_embeddings(root: str) -> str:
    """An embeddings folder as ``jkofast embed`` records it (vectors, id lists, per-row digests, corpus SHA-256)."""
    import json as _json

    from jkofast._digest import corpus_sha256, text_digests

    d = _embeddings(root)
    ds = load_dataset(root)
    meta = {"model": "m"}
    for stem, idname, ids, texts, key in (
        ("docs", "docs_ids.txt", ds.doc_ids, ds.doc_texts(" "), "corpus_sha256"),
        ("queries", "query_ids.txt", ds.query_ids, list(ds.query_texts), "queries_sha256"),
    ):
        np.save(os.path.join(d, f"{stem}_digests.npy"), text_digests(texts))
        with open(os.path.join(d, idname), "w", encoding="utf-8") as fh:
            fh.write("".join(i + "\n" for i in ids))
        meta[key] = corpus_sha256(ids, texts)
    with open(os.path.join(d, "meta.json"), "w") as fh:
        _json.dump(meta, fh)
    return d


_TEXT = st.text(alphabet=st.sampled_from("ab \u00e9\u0645"), min_size=1, max_size=6).filter(str.strip)


@given(st.data())
def test_embeddings_of_a_changed_corpus_are_refused_naming_a_changed_text(data):
    """Any edit, addition, removal or reordering of documents or queries after embedding: refused, naming a
    document or query that did change; an unchanged corpus (or an edit back to the same text) loads."""
    from jkofast.datasets.beir import StaleEmbeddings

    root = _folder()
    d = _recorded_embeddings(root)
    docs, queries = list(DOCS), list(QUERIES)
    for step in range(data.draw(st.integers(0, 3))):
        which = data.draw(st.sampled_from(["doc", "query"]))
        rows = docs if which == "doc" else queries
        op = data.draw(st.sampled_from(["edit", "same", "add", "remove", "swap"]))
        i = data.draw(st.integers(0, len(rows) - 1))
        if op == "edit":
            rows[i] = (*rows[i][:-1], data.draw(_TEXT))
        elif op == "add":
            rows.append((f"new{step}", *(("",) if which == "doc" else ()), data.draw(_TEXT)))
        elif op == "remove" and len(rows) > 1:
            del rows[i]
        elif op == "swap":
            j = data.draw(st.integers(0, len(rows) - 1))
            rows[i], rows[j] = rows[j], rows[i]
    write_beir(root, docs, queries, [r for r in QRELS if r[1] in {x[0] for x in docs}])
    embedded = {"doc": {i: (t + " " + x).strip() for i, t, x in DOCS}, "query": dict(QUERIES)}
    now = {"doc": [(i, (t + " " + x).strip()) for i, t, x in docs], "query": list(queries)}
    changed = {
        w: [i for i, x in now[w] if embedded[w].get(i) != x] + [i for i in embedded[w] if i not in dict(now[w])]
        for w in ("doc", "query")
    }
    same = {w: [i for i, _ in now[w]] == list(embedded[w]) and not changed[w] for w in ("doc", "query")}
    ds = _load(root)
    if same["doc"] and same["query"]:
        doc, qry = ds.embeddings("m")
        assert doc.shape == (4, 8) and qry.shape == (3, 8)
        return
    try:
        ds.embeddings("m")
    except StaleEmbeddings as exc:
        msg = str(exc)
        assert msg.startswith(d) and "jkofast embed --dataset" in msg
        what = "document" if not same["doc"] else "query"
        named = msg.split(f"{what} ", 1)[1].split(" ", 1)[0].strip("'")
        assert named in changed["doc" if what == "document" else "query"] or "order changed" in msg, msg
        return
    raise AssertionError("a changed corpus loaded its stale vectors")
