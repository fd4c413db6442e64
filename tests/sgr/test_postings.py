"""Compressed SGR postings (format 3): the variable-byte code against a naive oracle, exact term
frequencies, damaged or fuzzed codes refused before a query kernel reads them, format 2."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal

from jkofast._io import IndexDamage, read_manifest
from jkofast.kernels.sgr import postings as kp
from jkofast.sgr import _persist as persist
from jkofast.sgr.layout import compress_postings
from jkofast.sgr.retriever import SparseGeometricRetriever

TEXTS = [
    "solar panels convert sunlight into electric power",
    "wind turbines convert wind into electric power",
    "the cat sat on the mat near the window",
    "dogs and cats are common household pets",
    "electric cars store power in large batteries",
    "sunlight and wind are renewable energy sources",
    "a battery stores chemical energy for later use",
    "household pets need food water and care",
]


def _naive_encode(t_indptr, t_docs) -> bytes:
    out = bytearray()
    for t in range(len(t_indptr) - 1):
        prev = -1
        for d in t_docs[t_indptr[t] : t_indptr[t + 1]].tolist():
            g = d - prev - 1
            prev = d
            while True:
                if g < 128:
                    out.append(g)
                    break
                out.append((g & 127) | 128)
                g >>= 7
    return bytes(out)


def _naive_decode(code: bytes, start: int, n: int) -> list:
    docs, q, d = [], start, -1
    for _ in range(n):
        g, sh = 0, 0
        while True:
            b = code[q]
            q += 1
            g |= (b & 127) << sh
            sh += 7
            if b < 128:
                break
        d += g + 1
        docs.append(d)
    return docs


def _random_postings(rng, V, N, max_df, wide=True):
    """Ascending documents per term, some terms empty; a last term with gaps of 1 to 5 bytes (``wide``) or N - 1."""
    rows = []
    for _ in range(V):
        df = int(rng.integers(0, max_df + 1))
        rows.append(np.sort(rng.choice(N, size=min(df, N), replace=False)))
    if wide:
        rows.append(np.array([0, 1, 127, 128, 255, 16_383, 16_512, 2_097_151, 2_097_280, N - 1]))
    else:
        rows.append(np.array([N - 1]))  # the last term is never empty
    t_indptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([r.shape[0] for r in rows], out=t_indptr[1:])
    return t_indptr, np.concatenate(rows).astype(np.int32)


@pytest.mark.parametrize("seed", range(3))
def test_code_matches_naive_oracle_and_round_trips(seed):
    rng = np.random.default_rng(seed)
    N = 300_000_000
    t_indptr, t_docs = _random_postings(rng, 40, N, 60)
    tf = rng.integers(1, 4, t_docs.shape[0]).astype(np.float32)
    c = compress_postings(t_indptr, t_docs, tf)
    assert c["t_code"].tobytes() == _naive_encode(t_indptr, t_docs)
    assert int(kp.check_postings(t_indptr, c["t_off"], c["t_code"], N)) == -1
    assert int(kp.check_postings(t_indptr, c["t_off"], c["t_code"], N - 1)) == len(t_indptr) - 2  # doc N-1 >= N-1
    code = c["t_code"].tobytes()
    for t in range(len(t_indptr) - 1):
        want = t_docs[t_indptr[t] : t_indptr[t + 1]]
        out = np.full(want.shape[0] + 1, -7, np.int64)
        assert kp.decode_term(t_indptr, c["t_off"], c["t_code"], t, out) == want.shape[0]
        assert_array_equal(out[:-1], want)
        assert out[-1] == -7  # nothing written past df
        assert _naive_decode(code, int(c["t_off"][t]), want.shape[0]) == want.tolist()
    # gaps 0, 0, 125, 0, 126 (one byte each), 16,127 and 128 (two), 2,080,638 (three), 128 (two),
    # 297,902,718 (five: above 2**28)
    assert int(c["t_off"][-1] - c["t_off"][-2]) == 5 * 1 + 2 + 2 + 3 + 2 + 5


def test_term_frequencies_exact_with_escapes():
    tf = np.array([1, 255, 256, 0.5, 3, 1e6, 2.25, 7, 0], np.float32)
    t_indptr = np.array([0, 4, 4, 9], np.int64)
    t_docs = np.array([0, 5, 9, 11, 1, 2, 3, 4, 10], np.int32)
    c = compress_postings(t_indptr, t_docs, tf)
    assert_array_equal(c["t_tfq"], [1, 255, 0, 0, 3, 0, 0, 7, 0])
    assert_array_equal(c["t_xpos"], [2, 3, 5, 6, 8])
    assert_array_equal(c["t_xval"], tf[[2, 3, 5, 6, 8]])
    got = [kp.posting_tf(p, c["t_tfq"], c["t_xpos"], c["t_xval"]) for p in range(tf.shape[0])]
    assert_array_equal(np.array(got), tf.astype(np.float64))


def test_fitted_index_postings_equal_the_transposed_counts():
    """Oracle: scipy's CSC of the count matrix (documents and counts, counts above 255 and fractional)."""
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((60, 40)) < 0.3, rng.choice(np.array([1, 2, 3, 300, 2.5], np.float32), (60, 40)), 0)
    dense[:, 0] = 1.0  # every document holds a term
    C = sp.csr_matrix(dense.astype(np.float32))
    r = SparseGeometricRetriever(pool_size=5).fit(C)
    ix = r._ix
    Ct = C.tocsc()
    Ct.sort_indices()
    assert_array_equal(ix["t_indptr"], Ct.indptr)
    for t in range(C.shape[1]):
        assert_array_equal(r._query.term_docs(t), Ct.indices[Ct.indptr[t] : Ct.indptr[t + 1]])
    got = [kp.posting_tf(p, ix["t_tfq"], ix["t_xpos"], ix["t_xval"]) for p in range(Ct.nnz)]
    assert_array_equal(np.array(got), Ct.data.astype(np.float64))
    assert ix["t_xpos"].size == int(np.count_nonzero((Ct.data > 255) | (Ct.data != np.floor(Ct.data))))


def test_postings_two_bytes_per_posting_on_a_small_corpus():
    """Gaps below 128 (8 documents) and counts below 256: one byte each, against 8 bytes raw."""
    r = SparseGeometricRetriever(pool_size=5).fit(TEXTS)
    ix = r._ix
    nnz = int(ix["t_indptr"][-1])
    assert ix["t_code"].nbytes == nnz and ix["t_tfq"].nbytes == nnz and ix["t_xpos"].size == 0
    want = ix["t_indptr"].nbytes + ix["t_off"].nbytes + 2 * nnz
    assert r.index_nbytes(breakdown=True)["postings"] == want


@pytest.mark.parametrize("seed", range(4))
def test_fuzzed_code_is_refused_or_decodes_in_bounds(seed):
    """Random byte damage: the check reports a term, or every term decodes to df ascending ids below N."""
    rng = np.random.default_rng(seed)
    N = 5_000
    t_indptr, t_docs = _random_postings(rng, 30, N, 40, wide=False)
    c = compress_postings(t_indptr, t_docs, np.ones(t_docs.shape[0], np.float32))
    refused = 0
    for _ in range(200):
        code = c["t_code"].copy()
        k = int(rng.integers(1, 4))
        code[rng.integers(0, code.shape[0], k)] = rng.integers(0, 256, k)
        bad = int(kp.check_postings(t_indptr, c["t_off"], code, N))
        if bad >= 0:
            refused += 1
            continue
        for t in range(len(t_indptr) - 1):
            out = np.empty(int(t_indptr[t + 1] - t_indptr[t]), np.int64)
            kp.decode_term(t_indptr, c["t_off"], code, t, out)
            assert out.size == 0 or (out.min() >= 0 and out.max() < N and np.all(np.diff(out) > 0))
    assert refused > 0
    # a code cut short, one byte too many, a six-byte number
    for off, code in (
        (c["t_off"].copy(), c["t_code"][:-1]),
        (c["t_off"], np.append(c["t_code"], np.uint8(0))),
    ):
        off = off.copy()
        off[-1] = code.shape[0]
        assert int(kp.check_postings(t_indptr, off, code, N)) >= 0
    t1 = np.array([0, 1], np.int64)
    assert int(kp.check_postings(t1, np.array([0, 6], np.int64), np.array([128] * 5 + [0], np.uint8), 2**40)) == 0
    assert int(kp.check_postings(t1, np.array([0, 5], np.int64), np.array([128] * 4 + [1], np.uint8), 2**40)) == -1


def _no_checksums(d):
    meta, _ = read_manifest(os.path.join(d, "meta.json"), missing="m", invalid="i")
    for k in ("checksum", "files"):
        del meta[k]
    return meta


def _write_meta(d, meta):
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f)


def test_damaged_postings_files_refused_before_a_kernel(tmp_path):
    r = SparseGeometricRetriever(pool_size=5).fit(TEXTS)
    d = str(tmp_path / "ix")
    r.save(d)
    _write_meta(d, _no_checksums(d))  # as on a large index: only the structural checks stand between
    code = np.load(os.path.join(d, "t_code.npy"))
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(30):
        bad = code.copy()
        bad[rng.integers(0, bad.shape[0], 3)] = rng.integers(128, 256, 3)  # continuation bits: runs on
        np.save(os.path.join(d, "t_code.npy"), bad)
        try:
            r2 = SparseGeometricRetriever.load(d, mmap=True)
        except IndexDamage as exc:
            assert exc.file == "t_code.npy" and "does not decode" in str(exc)
            refused += 1
            continue
        r2.search(["solar power", "household pets"], k=3)  # a damage the check accepts decodes in bounds
    assert refused > 0
    np.save(os.path.join(d, "t_code.npy"), code)
    tfq = np.load(os.path.join(d, "t_tfq.npy"))
    tfq[0] = 0  # a frequency sent to the escape list that does not hold it
    np.save(os.path.join(d, "t_tfq.npy"), tfq)
    with pytest.raises(IndexDamage, match=r"t_xpos must list exactly") as e:
        SparseGeometricRetriever.load(d, mmap=True)
    assert e.value.file == "t_xpos.npy"
    assert not persist.check_index(d)["ok"]


def _as_format_2(r, d) -> tuple[np.ndarray, np.ndarray]:
    """Rewrite the saved format-3 folder ``d`` of ``r`` as format 2 (uncompressed ``t_docs``/``t_tf``,
    decoded by the naive oracle); return them."""
    ix = r._ix
    ptr, off, code = ix["t_indptr"], ix["t_off"], bytes(ix["t_code"])
    docs = np.concatenate(
        [np.array(_naive_decode(code, int(off[t]), int(ptr[t + 1] - ptr[t])), np.int32) for t in range(len(ptr) - 1)]
    )
    tf = ix["t_tfq"].astype(np.float32)
    tf[ix["t_xpos"]] = ix["t_xval"]
    meta = _no_checksums(d)
    meta["format"] = 2
    for k in ("t_off", "t_code", "t_tfq", "t_xpos", "t_xval"):
        del meta["arrays"][k]
        os.remove(os.path.join(d, k + ".npy"))
    meta["arrays"]["t_docs"] = ["<i4", [docs.shape[0]]]
    meta["arrays"]["t_tf"] = ["<f4", [docs.shape[0]]]
    np.save(os.path.join(d, "t_docs.npy"), docs)
    np.save(os.path.join(d, "t_tf.npy"), tf)
    _write_meta(d, meta)
    return docs, tf


def _same_search(a, b, queries) -> None:
    for x, y in zip(a.search(queries, k=3), b.search(queries, k=3), strict=True):
        assert_array_equal(x, y)


def test_format_2_opens_and_its_postings_are_compressed_on_load(tmp_path):
    """A format-2 index opens: without postings as it is; with them (t_docs/t_tf), compressed on load
    into the same arrays a format-3 build holds; saving it writes format 3."""
    queries = [*TEXTS[:3], "renewable wind power", "nothing known here"]
    for postings in (False, True):
        r = SparseGeometricRetriever(pool_size=5, postings=postings).fit(TEXTS)
        d = str(tmp_path / f"ix{postings}")
        r.save(d)
        if postings:
            _as_format_2(r, d)
        else:
            meta = _no_checksums(d)
            meta["format"] = 2
            _write_meta(d, meta)
        for mmap in (False, True):
            got = SparseGeometricRetriever.load(d, mmap=mmap)
            _same_search(got, r, queries)
            for k in ("t_off", "t_code", "t_tfq", "t_xpos", "t_xval") if postings else ():
                assert_array_equal(got._ix[k], r._ix[k], err_msg=k)
            assert "t_docs" not in got._ix and "t_tf" not in got._ix
            if postings:
                for mode in ("postings", "scan"):
                    _same_search(got.set_params(rescue_mode=mode), r.set_params(rescue_mode=mode), queries)
                r.set_params(rescue_mode="auto")
        assert persist.check_index(d)["ok"]
        d3 = str(tmp_path / f"ix{postings}-3")
        got.save(d3)
        meta3, _ = read_manifest(os.path.join(d3, "meta.json"), missing="m", invalid="i")
        assert meta3["format"] == 3 and ("t_code" in meta3["arrays"]) == postings and "t_docs" not in meta3["arrays"]
        _same_search(SparseGeometricRetriever.load(d3, mmap=True), r, queries)


@pytest.mark.parametrize(
    "damage, file",
    [
        ("doc_out_of_range", "t_docs.npy"),
        ("doc_negative", "t_docs.npy"),
        ("docs_descending", "t_docs.npy"),
        ("doc_repeated", "t_docs.npy"),
        ("docs_int64", "t_docs.npy"),
        ("tf_nan", "t_tf.npy"),
        ("tf_short", "t_tf.npy"),
        ("pointer_end", "t_indptr.npy"),
        ("pointer_falls", "t_indptr.npy"),
    ],
)
def test_format_2_postings_checked_before_they_are_compressed(tmp_path, damage, file):
    """Damaged format-2 postings are refused naming their file, before the encoder (which trusts
    its input) reads them."""
    r = SparseGeometricRetriever(pool_size=5).fit(TEXTS)
    d = str(tmp_path / "ix")
    r.save(d)
    docs, tf = _as_format_2(r, d)
    ptr = r._ix["t_indptr"].copy()
    t = int(np.argmax(np.diff(ptr)))  # the term with most postings (>= 2)
    lo = int(ptr[t])
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)  # as _as_format_2 wrote it (no checksums)
    if damage == "doc_out_of_range":
        docs[lo] = len(TEXTS)
    elif damage == "doc_negative":
        docs[lo] = -1
    elif damage == "docs_descending":
        docs[lo], docs[lo + 1] = docs[lo + 1], docs[lo]
    elif damage == "doc_repeated":
        docs[lo + 1] = docs[lo]
    elif damage == "docs_int64":
        docs = docs.astype(np.int64)
        meta["arrays"]["t_docs"][0] = "<i8"
    elif damage == "tf_nan":
        tf[lo] = np.nan
    elif damage == "tf_short":
        tf = tf[:-1]
        meta["arrays"]["t_tf"][1] = [tf.shape[0]]
    elif damage == "pointer_end":
        ptr[-1] += 1
    elif damage == "pointer_falls":
        ptr[t + 1] = ptr[t] - 1
    np.save(os.path.join(d, "t_docs.npy"), docs)
    np.save(os.path.join(d, "t_tf.npy"), tf)
    np.save(os.path.join(d, "t_indptr.npy"), ptr)
    _write_meta(d, meta)
    for mmap in (False, True):
        with pytest.raises(IndexDamage) as e:
            SparseGeometricRetriever.load(d, mmap=mmap)
        assert e.value.file == file, str(e.value)
    rep = persist.check_index(d)
    assert not rep["ok"] and rep["bad_file"] == file


def test_mapped_index_saved_to_a_new_folder(tmp_path):
    """An index loaded with mmap=True saves into a new folder (its arrays copied, the source kept)."""
    r = SparseGeometricRetriever(pool_size=5).fit(TEXTS)
    d, d2 = str(tmp_path / "a"), str(tmp_path / "b")
    r.save(d)
    SparseGeometricRetriever.load(d, mmap=True).save(d2)
    assert sorted(os.listdir(d2)) == sorted(os.listdir(d))
    for src in (d, d2):
        _same_search(SparseGeometricRetriever.load(src, mmap=True), r, TEXTS[:4])
        assert persist.check_index(src)["ok"]
