"""Index integrity of a saved BM25 / TF-IDF folder: checksums in manifest.json, checks at open, verify, check_index."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from stamp_helpers import trust_stamps

from jkofast._io import IndexDamage, read_manifest
from jkofast.sparse import index as sparse_index
from jkofast.sparse.index import BM25Index, TfidfIndex, check_index, load_index
from jkofast.sparse.retriever import SparseRetriever

TEXTS = ["the cat sat on the mat", "a dog and a cat", "sunlight and wind power", "wind turbines", "coffee"]
QUERIES = ["cat mat", "wind power", "coffee dog"]


@pytest.fixture(params=["bm25", "tfidf"])
def ix(request, tmp_path):
    idx = BM25Index("okapi") if request.param == "bm25" else TfidfIndex()
    return idx.fit(TEXTS).save(str(tmp_path / "ix"))


def _set(path, name, fn):
    f = os.path.join(path, f"{name}.npy")
    a = np.load(f)
    fn(a)
    np.save(f, a)


def test_manifest_records_every_file_and_clean_index_checks(ix):
    man, summed = read_manifest(os.path.join(ix, "manifest.json"), missing="m", invalid="i")
    assert summed and man["checksum"] == "crc32"
    assert sorted(man["files"]) == sorted(f for f in os.listdir(ix) if f != "manifest.json")
    rep = check_index(ix)
    assert rep["ok"] and rep["kind"] == "sparse" and rep["checksums"] == "crc32"
    ref = load_index(ix, mmap=False).search(QUERIES, k=3)
    got = SparseRetriever.load(ix, verify=True).index.search(QUERIES, k=3)
    assert np.array_equal(ref[0], got[0]) and np.array_equal(ref[1], got[1])


def test_changed_weight_caught_at_open_small_and_by_verify_large(ix, monkeypatch):
    _set(ix, "post_w", lambda a: a.__setitem__(0, a[0] * 2))
    with pytest.raises(IndexDamage, match=r"post_w\.npy: checksum mismatch"):
        load_index(ix)
    monkeypatch.setattr(sparse_index, "OPEN_CHECKSUM_BYTES", 0)
    with pytest.raises(IndexDamage, match=r"post_w\.npy: checksum mismatch"):
        load_index(ix)  # a large file changed since its verification stamp: checksummed
    trust_stamps(monkeypatch, sparse_index)
    load_index(ix)  # a large file trusted by its stamp: structure only at open
    with pytest.raises(ValueError, match=r"post_w\.npy: checksum mismatch"):
        load_index(ix, verify=True)
    with pytest.raises(ValueError, match=r"post_w\.npy: checksum mismatch"):
        load_index(ix, mmap=False)
    rep = check_index(ix)
    assert not rep["ok"] and rep["bad_file"] == "post_w.npy"


@pytest.mark.parametrize(
    "name, fn, what",
    [
        ("post_docs", lambda a: a.__setitem__(0, 10**6), r"post_docs\.npy: holds document ids outside"),
        ("post_docs", lambda a: a.__setitem__(0, -1), r"post_docs\.npy: holds document ids outside"),
        ("term_ptr", lambda a: a.__setitem__(1, a[-1] + 3), r"term_ptr\.npy: is not a valid pointer"),
        ("idf", lambda a: a.__setitem__(0, np.nan), r"idf\.npy: checksum mismatch"),
    ],
)
def test_ids_and_pointers_checked_at_open(ix, monkeypatch, name, fn, what):
    monkeypatch.setattr(sparse_index, "OPEN_CHECKSUM_BYTES", 0)
    trust_stamps(monkeypatch, sparse_index)  # as a large file whose stamp matched: the range checks alone
    _set(ix, name, fn)
    if name == "idf":  # a value, not an index: verify and --check see it
        load_index(ix)
        with pytest.raises(ValueError, match=what):
            load_index(ix, verify=True)
    else:
        with pytest.raises(IndexDamage, match=what):
            load_index(ix)
    assert check_index(ix)["bad_file"] == f"{name}.npy"


def test_tfidf_document_rows_checked(tmp_path, monkeypatch):
    ix = TfidfIndex().fit(TEXTS).save(str(tmp_path / "ix"))
    monkeypatch.setattr(sparse_index, "OPEN_CHECKSUM_BYTES", 0)
    trust_stamps(monkeypatch, sparse_index)
    _set(ix, "doc_terms", lambda a: a.__setitem__(0, 10**5))
    with pytest.raises(IndexDamage, match=r"doc_terms\.npy: holds term ids outside"):
        load_index(ix)


def test_manifest_and_vocab_damage_named(ix):
    raw = open(os.path.join(ix, "manifest.json"), "rb").read()
    i = raw.index(b'"n_docs": ') + len(b'"n_docs": ')
    open(os.path.join(ix, "manifest.json"), "wb").write(raw[:i] + b"9" + raw[i + 1 :])
    with pytest.raises(ValueError, match=r"manifest\.json: checksum mismatch"):
        load_index(ix)
    open(os.path.join(ix, "manifest.json"), "wb").write(raw)
    with open(os.path.join(ix, "vocab.txt"), "r+b") as fh:
        fh.write(b"\xff")
    with pytest.raises(ValueError, match=r"vocab\.txt: checksum mismatch"):
        load_index(ix)


def test_index_without_checksums_still_opens(ix, capsys):
    from jkofast.cli import main

    man, _ = read_manifest(os.path.join(ix, "manifest.json"), missing="m", invalid="i")
    del man["checksum"], man["files"]
    with open(os.path.join(ix, "manifest.json"), "w") as fh:
        json.dump(man, fh, indent=2)  # as jkofast 0.1.0 wrote it
    ref = BM25Index("okapi").fit(TEXTS) if man["class"] == "BM25Index" else TfidfIndex().fit(TEXTS)
    got = load_index(ix, verify=True)
    assert np.array_equal(got.search(QUERIES, k=3)[0], ref.search(QUERIES, k=3)[0])
    assert check_index(ix)["checksums"] == "none recorded"
    assert main(["index", "--check", ix]) == 0
    assert "no checksums recorded" in capsys.readouterr().out
    shutil.rmtree(ix)
