"""Large mapped arrays verified after every change: the verification stamp (``verified.json``).

The probe's case: a slice of ``c_vals.npy`` (> 4 MiB, so not checksummed at a mapped open) scaled in place;
``jkofast search --index`` exited 0 with 18 of 60 queries answering another top-10.  Now a mapped open
trusts a large file only when its stamp (size, mtime, ctime, inode, device and CRC32, recorded after a
verification) matches; any other is checksummed before use.  Here every file counts as large
(``OPEN_CHECKSUM_BYTES = 0``) and the racy window is 0, as on an index verified long ago.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from beir_helpers import write_beir

import jkofast._io as _io
from jkofast._io import STAMP_FILE, IndexDamage
from jkofast.cli import main
from jkofast.sgr import _persist as persist
from jkofast.sgr.retriever import SparseGeometricRetriever
from jkofast.sparse import index as sparse_index
from jkofast.sparse.index import BM25Index, load_index

TEXTS = [f"doc {i} about solar wind cat dog river {i % 7} energy rain" for i in range(60)]
IDS = [f"d{i}" for i in range(60)]


@pytest.fixture
def ix(tmp_path, monkeypatch):
    monkeypatch.setattr(persist, "OPEN_CHECKSUM_BYTES", 0)
    monkeypatch.setattr(_io, "RACY_NS", 0)
    path = tmp_path / "ix"
    SparseGeometricRetriever(pool_size=5).fit(TEXTS, ids=IDS).save(path)
    return path


def _count_crc(monkeypatch):
    seen = []
    real = _io.crc32_file
    monkeypatch.setattr(_io, "crc32_file", lambda p, **kw: (seen.append(os.path.basename(p)), real(p, **kw))[1])
    return seen


def test_first_open_verifies_and_stamps_then_opens_trust_the_stamp(ix, monkeypatch):
    seen = _count_crc(monkeypatch)
    SparseGeometricRetriever.load(ix, mmap=True)
    meta = json.load(open(ix / "meta.json"))
    assert sorted(seen) == sorted(meta["files"])  # every file verified once
    stamps = json.load(open(ix / STAMP_FILE))
    assert sorted(stamps) == sorted(meta["files"])
    assert all(s[-1] == meta["files"][n]["crc32"] for n, s in stamps.items())
    seen.clear()
    SparseGeometricRetriever.load(ix, mmap=True)
    assert seen == []  # an untouched index: no file read for its checksum


def test_in_place_change_of_a_large_file_is_caught_at_the_next_mapped_open(ix, monkeypatch):
    SparseGeometricRetriever.load(ix, mmap=True)  # stamped
    f = ix / "c_vals.npy"
    st = os.stat(f)
    a = np.load(f, mmap_mode="r+")
    a[: max(1, a.shape[0] // 3)] *= 1.5  # the probe: a slice scaled in place (same size, same inode)
    a.flush()
    del a
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with its modification time put back
    seen = _count_crc(monkeypatch)
    with pytest.raises(IndexDamage, match=r"c_vals\.npy: checksum mismatch") as e:
        SparseGeometricRetriever.load(ix, mmap=True)
    assert e.value.file == "c_vals.npy" and seen == ["c_vals.npy"]  # only the changed file re-verified


def test_replaced_file_with_same_bytes_is_verified_once_and_stamped_again(ix, monkeypatch):
    SparseGeometricRetriever.load(ix, mmap=True)
    f = ix / "c_vals.npy"
    shutil.copyfile(f, ix / "copy.tmp")
    os.replace(ix / "copy.tmp", f)  # a new inode, the same content
    seen = _count_crc(monkeypatch)
    SparseGeometricRetriever.load(ix, mmap=True)
    assert seen == ["c_vals.npy"]
    seen.clear()
    SparseGeometricRetriever.load(ix, mmap=True)
    assert seen == []


def test_a_file_written_just_now_is_not_stamped(tmp_path, monkeypatch):
    monkeypatch.setattr(persist, "OPEN_CHECKSUM_BYTES", 0)
    path = tmp_path / "ix"
    SparseGeometricRetriever(pool_size=5).fit(TEXTS, ids=IDS).save(path)
    SparseGeometricRetriever.load(path, mmap=True)  # within the racy window of its writing
    assert not os.path.exists(path / STAMP_FILE)


def test_damaged_or_foreign_stamp_is_not_trusted(ix, monkeypatch):
    SparseGeometricRetriever.load(ix, mmap=True)
    stamps = json.load(open(ix / STAMP_FILE))
    stamps["c_vals.npy"][-1] = "00000000"  # a stamp for other bytes than the manifest records
    json.dump(stamps, open(ix / STAMP_FILE, "w"))
    seen = _count_crc(monkeypatch)
    SparseGeometricRetriever.load(ix, mmap=True)
    assert seen == ["c_vals.npy"]
    (ix / STAMP_FILE).write_text("{not json")
    seen.clear()
    SparseGeometricRetriever.load(ix, mmap=True)
    assert sorted(seen) == sorted(json.load(open(ix / "meta.json"))["files"])


def test_read_only_folder_opens(ix, monkeypatch):
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    SparseGeometricRetriever.load(ix, mmap=True)
    assert not os.path.exists(ix / STAMP_FILE)


def test_sparse_index_stamp(tmp_path, monkeypatch):
    monkeypatch.setattr(sparse_index, "OPEN_CHECKSUM_BYTES", 0)
    monkeypatch.setattr(_io, "RACY_NS", 0)
    path = BM25Index().fit(TEXTS).save(str(tmp_path / "bm"))
    load_index(path)
    assert os.path.isfile(os.path.join(path, STAMP_FILE))
    a = np.load(os.path.join(path, "post_w.npy"))
    a[0] *= 2
    np.save(os.path.join(path, "post_w.npy"), a)
    with pytest.raises(IndexDamage, match=r"post_w\.npy: checksum mismatch"):
        load_index(path)


def test_search_index_after_in_place_change_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(persist, "OPEN_CHECKSUM_BYTES", 0)
    monkeypatch.setattr(_io, "RACY_NS", 0)
    ds = write_beir(tmp_path / "b", list(zip(IDS, [""] * 60, TEXTS)), [("q1", "solar cat")], [("q1", "d1", 1)])
    ix = tmp_path / "ix"
    assert main(["index", "--method", "sgr", "--dataset", ds, "--out", str(ix), "--quiet"]) == 0
    argv = ["search", "--dataset", ds, "--method", "sgr", "--index", str(ix), "--out", str(tmp_path / "r.trec")]
    assert main(argv) == 0
    a = np.load(ix / "c_vals.npy", mmap_mode="r+")
    a[:5] *= 3
    a.flush()
    del a
    capsys.readouterr()
    assert main(argv) == 2
    assert "c_vals.npy: checksum mismatch" in capsys.readouterr().err
