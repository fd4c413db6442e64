"""Index integrity of a saved SGR folder: checksums in meta.json, checks at open, verify, check_index (issue #26).

Every bad file is a ValueError (``IndexDamage``) naming it; an index written before checksums were
recorded (jkofast 0.1.0: meta.json without ``files`` / ``manifest_crc32``) still opens.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib

import numpy as np
import pytest
from beir_helpers import write_beir
from stamp_helpers import trust_stamps

from jkofast._io import IndexDamage, atomic_write_manifest, crc32_file, read_manifest
from jkofast.sgr import _persist as persist
from jkofast.sgr.retriever import SparseGeometricRetriever

TEXTS = [
    "solar panels convert sunlight into power",
    "wind turbines make power from wind",
    "sunlight and wind are renewable energy",
    "the cat sat on the mat",
    "dog and cat play in the sunlight",
    "coffee and cream in the morning",
]
IDS = [f"d{i}" for i in range(len(TEXTS))]
QUERIES = ["sunlight power", "cat dog", "wind"]


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    path = tmp_path_factory.mktemp("sgr") / "ix"
    SparseGeometricRetriever(pool_size=5).fit(TEXTS, ids=IDS).save(path)
    return path


@pytest.fixture
def ix(golden, tmp_path):
    dst = tmp_path / "ix"
    shutil.copytree(golden, dst)
    return dst


def _set(path, name, fn):
    a = np.load(path / f"{name}.npy")
    fn(a)
    np.save(path / f"{name}.npy", a)


def test_meta_records_size_crc_dtype_shape_and_its_own_crc(ix):
    meta, summed = read_manifest(ix / "meta.json", missing="m", invalid="i")
    assert summed and meta["checksum"] == "crc32"
    on_disk = sorted(f for f in os.listdir(ix) if f.endswith(".npy"))
    assert sorted(meta["files"]) == on_disk
    for f, rec in meta["files"].items():
        assert rec["bytes"] == os.path.getsize(ix / f)
        assert rec["crc32"] == f"{zlib.crc32((ix / f).read_bytes()):08x}" == f"{crc32_file(ix / f):08x}"
        a = np.load(ix / f)
        assert meta["arrays"][f[:-4]] == [a.dtype.str, list(a.shape)]
    raw = (ix / "meta.json").read_bytes()
    assert raw.rstrip().endswith(f'"manifest_crc32": "{zlib.crc32(raw[: raw.rfind(b", ")]):08x}"}}'.encode())


def test_clean_index_opens_checks_and_answers(ix):
    ref = SparseGeometricRetriever(pool_size=5).fit(TEXTS, ids=IDS).search(QUERIES, k=3)
    for mmap, verify in ((True, False), (True, True), (False, False)):
        got = SparseGeometricRetriever.load(ix, mmap=mmap, verify=verify).search(QUERIES, k=3)
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])
    rep = persist.check_index(ix)
    assert rep["ok"] and rep["error"] is None and rep["checksums"] == "crc32"
    assert {r["status"] for r in rep["files"]} == {"ok"} and len(rep["files"]) == 35  # 33 arrays + 2 id files


def test_manifest_byte_change_is_caught_at_every_open(ix):
    raw = (ix / "meta.json").read_bytes()
    # a parameter that still parses: "alpha": 0.1 -> 0.0
    i = raw.index(b'"alpha": ') + len(b'"alpha": ') + 2
    (ix / "meta.json").write_bytes(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :])
    with pytest.raises(ValueError, match=r"meta\.json: checksum mismatch"):
        SparseGeometricRetriever.load(ix, mmap=True)
    rep = persist.check_index(ix)
    assert not rep["ok"] and rep["bad_file"] == "meta.json"


def test_file_checksum_caught_at_open_for_small_files_and_by_verify_for_large(ix, monkeypatch):
    _set(ix, "mem_m", lambda a: a.__setitem__(0, a[0] * 0.5))  # same size, same structure
    with pytest.raises(IndexDamage, match=r"mem_m\.npy: checksum mismatch") as e:
        SparseGeometricRetriever.load(ix, mmap=True)
    assert e.value.file == "mem_m.npy"
    # as a large file: its stamp no longer matches (the file changed since it was verified): checksummed
    monkeypatch.setattr(persist, "OPEN_CHECKSUM_BYTES", 0)
    with pytest.raises(IndexDamage, match=r"mem_m\.npy: checksum mismatch"):
        SparseGeometricRetriever.load(ix, mmap=True)
    # a large file trusted by its stamp: size and structure at open (the change is invisible there) ...
    trust_stamps(monkeypatch, persist)
    SparseGeometricRetriever.load(ix, mmap=True)
    # ... its checksum with verify, an in-memory load and --check
    for kw in ({"mmap": True, "verify": True}, {"mmap": False}):
        with pytest.raises(ValueError, match=r"mem_m\.npy: checksum mismatch"):
            SparseGeometricRetriever.load(ix, **kw)
    rep = persist.check_index(ix)
    assert rep["bad_file"] == "mem_m.npy" and "checksum mismatch" in rep["error"]
    assert [r["file"] for r in rep["files"] if r["status"] != "ok"] == ["mem_m.npy"]


def test_truncated_or_missing_file_named_at_open(ix, monkeypatch):
    monkeypatch.setattr(persist, "OPEN_CHECKSUM_BYTES", 0)
    raw = (ix / "t_tfq.npy").read_bytes()
    (ix / "t_tfq.npy").write_bytes(raw[:-4])
    with pytest.raises(ValueError, match=r"t_tfq\.npy: has \d+ bytes, the manifest records"):
        SparseGeometricRetriever.load(ix, mmap=True)
    os.remove(ix / "t_tfq.npy")
    with pytest.raises(ValueError, match=r"t_tfq\.npy: missing"):
        SparseGeometricRetriever.load(ix, mmap=True)


def _damages(V, N, F):
    # (array, damage, what the message says): every id/pointer/sentinel the query kernels index with
    dec = rf"does not decode to the \d+ ascending documents in \[0, {N}\)"
    return [
        # the compressed postings: a code running past its term, documents past N
        ("t_code", lambda a: a.__setitem__(slice(0, 64), 255), dec),
        ("t_code", lambda a: a.__setitem__(slice(None), 127), dec),
        ("mem_doc", lambda a: a.__setitem__(0, N), rf"holds ids outside \[0, {N}\)"),
        ("s_idx", lambda a: a.__setitem__(0, V), rf"holds ids outside \[0, {V}\)"),
        ("s_indptr", lambda a: a.__setitem__(2, a[3] + 1), "must be non-decreasing"),
        ("code_term", lambda a: a.__setitem__((0, 0), 65535), "term id after a sentinel"),
        ("mem_doc", lambda a: a.__setitem__(slice(None), 0), f"memberships, but params n_memberships = {F}"),
        ("c_terms", lambda a: a.__setitem__(0, V + 3), rf"holds ids outside \[0, {V}\)"),
        ("g_indptr", lambda a: a.__setitem__(1, a[-1] + 5), "non-decreasing"),
        ("dl", lambda a: a.__setitem__(0, 7), None),  # a valid length: only the checksum sees it
    ]


@pytest.mark.parametrize("k", range(10))
def test_every_kernel_index_array_is_range_checked_at_open(ix, monkeypatch, k):
    r = SparseGeometricRetriever.load(ix, mmap=True)
    name, fn, what = _damages(r.n_terms_, r.n_docs_, r.config.n_memberships)[k]
    monkeypatch.setattr(persist, "OPEN_CHECKSUM_BYTES", 0)  # as on a large index, its stamps trusted:
    trust_stamps(monkeypatch, persist)  # no checksum at open (the range checks stand alone)
    _set(ix, name, fn)
    # np.save kept the size: the manifest's record of it still holds
    if what is None:
        SparseGeometricRetriever.load(ix, mmap=True)
    else:
        with pytest.raises(IndexDamage, match=what) as e:
            SparseGeometricRetriever.load(ix, mmap=True)
        assert e.value.file == f"{name}.npy" and f"{name}.npy" in str(e.value)
    rep = persist.check_index(ix)
    assert not rep["ok"] and rep["bad_file"] == f"{name}.npy"


def _as_released(path):
    """Rewrite meta.json as jkofast 0.1.0 wrote it: no file checksums, no manifest checksum."""
    meta, _ = read_manifest(path / "meta.json", missing="m", invalid="i")
    for k in ("checksum", "files"):
        del meta[k]
    for k in ("ids_utf8", "ids_off"):
        del meta["arrays"][k]
    (path / "meta.json").write_text(json.dumps(meta))


def test_index_without_checksums_still_opens_and_check_says_so(ix, capsys):
    from jkofast.cli import main

    _as_released(ix)
    ref = SparseGeometricRetriever(pool_size=5).fit(TEXTS, ids=IDS).search(QUERIES, k=3)
    got = SparseGeometricRetriever.load(ix, mmap=True, verify=True).search(QUERIES, k=3)
    assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])
    rep = persist.check_index(ix)
    assert rep["ok"] and rep["checksums"] == "none recorded"
    assert main(["index", "--check", str(ix)]) == 0
    assert "no checksums recorded" in capsys.readouterr().out
    # structure is still checked, and a damaged id array is still refused
    _set(ix, "t_code", lambda a: a.__setitem__(slice(None), 127))
    with pytest.raises(ValueError, match=r"t_code\.npy: t_code does not decode"):
        SparseGeometricRetriever.load(ix, mmap=True)


def test_damaged_checksum_field_is_not_taken_for_an_old_index(ix):
    raw = (ix / "meta.json").read_bytes()
    (ix / "meta.json").write_bytes(raw.replace(b'"manifest_crc32"', b'"manifest_crc33"'))
    with pytest.raises(ValueError, match="records file checksums but not its own"):
        SparseGeometricRetriever.load(ix, mmap=True)


def test_manifest_writer_round_trip_and_refusals(tmp_path):
    p = tmp_path / "m.json"
    atomic_write_manifest(p, {"a": [1, 2], "b": 'x"y'}, indent=2)
    assert read_manifest(p, missing="m", invalid="i") == ({"a": [1, 2], "b": 'x"y'}, True)
    assert json.loads(p.read_text())["b"] == 'x"y'
    with pytest.raises(ValueError, match="non-empty dict"):
        atomic_write_manifest(p, {})
    p.write_text("[1]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        read_manifest(p, missing="m", invalid="i")


def test_check_cli_exit_codes_and_json(ix, capsys):
    from jkofast.cli import main

    assert main(["index", "--check", str(ix)]) == 0
    assert "OK: no problem found" in capsys.readouterr().out
    _set(ix, "c_vals", lambda a: a.__setitem__(0, a[0] + 1.0))
    assert main(["index", "--check", str(ix), "--json"]) == 2
    rep = json.loads(capsys.readouterr().out)
    assert rep["bad_file"] == "c_vals.npy" and not rep["ok"]
    assert [r["file"] for r in rep["files"] if r["status"] != "ok"] == ["c_vals.npy"]
    assert main(["index", "--check", str(ix)]) == 2
    err = capsys.readouterr().err
    assert "c_vals.npy: checksum mismatch" in err
    assert main(["index", "--check", str(ix.parent)]) == 2
    assert "not an index folder" in capsys.readouterr().err
    assert main(["index", "--check", str(ix), "--out", str(ix)]) == 2
    assert main(["index"]) == 2
    assert "--out is required" in capsys.readouterr().err


def test_damaged_postings_search_exits_2_not_segfault(tmp_path):
    """Issue #26: damaged postings (t_code.npy), then ``jkofast search --index`` (was exit 139 with t_docs.npy)."""
    ds = tmp_path / "ds"
    write_beir(ds, [(i, "", t) for i, t in zip(IDS, TEXTS)], (("q1", "sunlight power"),), (("q1", "d0", 1),))
    out = tmp_path / "ix"
    env = dict(os.environ)
    run = [sys.executable, "-m", "jkofast"]
    subprocess.run([*run, "index", "--method", "sgr", "--dataset", str(ds), "--out", str(out), "--quiet"], env=env,
                   check=True, capture_output=True)  # fmt: skip
    # as on a large index (files above the per-open checksum size) and as written by 0.1.0: no checksum at open
    _as_released(out)
    a = np.load(out / "t_code.npy", mmap_mode="r+")
    a[:] = 127
    a.flush()
    del a
    p = subprocess.run([*run, "search", "--method", "sgr", "--dataset", str(ds), "--index", str(out),
                        "--out", str(tmp_path / "run.trec")], env=env, capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "t_code.npy" in p.stderr and "does not decode" in p.stderr
    p = subprocess.run([*run, "index", "--check", str(out)], env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "t_code.npy: t_code does not decode" in p.stderr
