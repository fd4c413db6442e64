"""The phased SGR build (jkofast.sgr.layout): calibrate + encode (shards) + assemble == fit;
shard files; the compact index on disk (format 3) and memory-mapped; half rounding."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal
from test_sgr_build import SMALL, synthetic_corpus

from jkofast.kernels.sgr import build as kb
from jkofast.sgr import layout
from jkofast.sgr.retriever import SparseGeometricRetriever

QUERIES = ["w00 w03 w07", "w01 w12 w12 w20", "w05", "w09 w02 w28 w13 w04", "zzz", "w15 w16 w18 w19 w25 w26"]


def _tfidf(corpus):
    """Counts, TF-IDF rows, idf and dl as ``fit`` computes them (scikit-learn semantics)."""
    from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

    cv = CountVectorizer(token_pattern=r"(?u)\b\w\w+\b", dtype=np.float32)
    C = cv.fit_transform(corpus).tocsr()
    C.sort_indices()
    tr = TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)
    X = tr.fit_transform(C).tocsr().astype(np.float32)
    X.sort_indices()
    an = cv.build_analyzer()
    dl = np.array([len(an(t)) for t in corpus], np.float64)
    return C, X, np.asarray(tr.idf_, np.float64), dl, list(cv.get_feature_names_out())


@pytest.fixture(scope="module")
def parts():
    corpus = synthetic_corpus(n_docs=40, seed=1)
    C, X, idf, dl, terms = _tfidf(corpus)
    fitted = SparseGeometricRetriever(**SMALL).fit(corpus)
    return corpus, C, X, idf, dl, terms, fitted


def _same_results(a, b):
    for x, y in ((a.search(QUERIES, k=8), b.search(QUERIES, k=8)),):
        assert_array_equal(x[0], y[0])
        assert_array_equal(x[1], y[1])
    pa, pb = a.pool(QUERIES), b.pool(QUERIES)
    for name in ("doc", "n", "tail", "lexadj", "sem", "rare", "relevance", "lex1"):
        assert_array_equal(getattr(pa, name), getattr(pb, name), err_msg=name)


@pytest.mark.parametrize("cuts", [(0, 40), (0, 13, 40), (0, 1, 22, 40)])
def test_phases_in_shards_equal_fit(parts, cuts, tmp_path):
    """fit == calibrate (whole corpus) + encode in 1-3 shards + assemble: every array equal,
    in memory and written to a folder; same ids and scores."""
    _, C, X, idf, dl, terms, fitted = parts
    g = layout.calibrate(X, SMALL)
    shards = [layout.encode(X[a:b], g, SMALL, first_doc=a, counts=C[a:b]) for a, b in itertools.pairwise(cuts)]
    ix = layout.assemble(g, shards, idf, dl, SMALL)
    folders = []
    for k, sh in enumerate(shards):
        f = str(tmp_path / f"shard{k}")
        layout.write_shard(f, sh)
        folders.append(f)
    ix_disk = layout.assemble(g, folders, idf, dl, SMALL, out=str(tmp_path / "merged"))
    for name, v in ix.items():
        assert_array_equal(v, fitted._ix[name], err_msg=name)
        assert v.dtype == fitted._ix[name].dtype, name
        assert_array_equal(ix_disk[name], v, err_msg=name)
    r = SparseGeometricRetriever.from_parts(ix_disk, params=SMALL, terms=terms)
    _same_results(r, fitted)
    assert r.n_calibration_ == 40


def test_calibrate_on_a_subset(parts):
    """A geometry calibrated on half the corpus encodes the other half; the index queries;
    the reliability entries unseen by the calibration get the one-occurrence weight."""
    _, C, X, idf, dl, terms, _ = parts
    g = layout.calibrate(X[:20], SMALL)
    assert g.n_calibration == 20
    ix = layout.assemble(g, [layout.encode(X, g, SMALL, counts=C)], idf, dl, SMALL)
    r = SparseGeometricRetriever.from_parts(ix, params=SMALL, terms=terms, n_calibration=20)
    idx, sc = r.search(QUERIES, k=5)
    assert idx.shape == (len(QUERIES), 5) and np.isfinite(sc[idx >= 0]).all()


def test_shard_files_roundtrip_and_incomplete(parts, tmp_path):
    _, C, X, _, _, _, _ = parts
    g = layout.calibrate(X, SMALL)
    sh = layout.encode(X[5:17], g, SMALL, first_doc=5, counts=C[5:17])
    f = str(tmp_path / "s")
    layout.write_shard(f, sh)
    for mmap in (True, False):
        back = layout.read_shard(f, mmap=mmap)
        assert back.first_doc == 5 and back.n_docs == 12 and back.n_terms == sh.n_terms
        for name in layout._SHARD_ARRAYS:
            assert_array_equal(getattr(back, name), getattr(sh, name), err_msg=name)
    assert not [n for n in os.listdir(f) if ".tmp" in n]
    os.remove(os.path.join(f, "shard.json"))  # written last: without it the shard is incomplete
    with pytest.raises(ValueError, match="incomplete shard"):
        layout.read_shard(f)
    layout.write_shard(f, sh)
    np.save(os.path.join(f, "mem_m.npy"), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="mem_m"):
        layout.read_shard(f)


def test_phase_bad_input(parts):
    _, C, X, idf, dl, _, _ = parts
    g = layout.calibrate(X, SMALL)
    sh = [layout.encode(X[:20], g, SMALL, counts=C[:20]), layout.encode(X[20:], g, SMALL, first_doc=20, counts=C[20:])]
    with pytest.raises(TypeError, match="float32"):
        layout.calibrate(X.astype(np.float64), SMALL)
    with pytest.raises(TypeError, match="CSR"):
        layout.calibrate(X.toarray(), SMALL)
    with pytest.raises(TypeError, match="unknown"):
        layout.calibrate(X, {"poolsize": 3})
    with pytest.raises(ValueError, match="columns"):
        layout.encode(X[:, :10], g, SMALL, counts=C[:, :10])
    with pytest.raises(ValueError, match="counts"):
        layout.encode(X, g, SMALL, counts=C[:, ::-1])
    with pytest.raises(ValueError, match="first_doc"):
        layout.encode(X, g, SMALL, first_doc=-1, counts=C)
    with pytest.raises(ValueError, match="contiguous"):
        layout.assemble(g, sh[::-1], idf, dl, SMALL)
    with pytest.raises(ValueError, match="dl"):
        layout.assemble(g, sh, idf, dl[:-1], SMALL)
    with pytest.raises(ValueError, match="code_size"):
        layout.assemble(g, sh, idf, dl, {**SMALL, "code_size": 4})
    with pytest.raises(ValueError, match="empty"):
        layout.assemble(g, [], idf, dl, SMALL)
    with pytest.raises(ValueError, match="missing array"):
        SparseGeometricRetriever.from_parts({"idf": idf}, params=SMALL)


def _kernel_outputs(r, q_counts):
    """``search_counts`` at k = pool size, with every output of the query kernel kept (ranked
    documents, all component scores, pool sizes, routing counts, status)."""
    outs = []
    run = r._query.run
    r._query.run = lambda *a, **kw: outs.append(run(*a, **kw)) or outs[-1]  # the query path's own run, recorded
    try:
        r.search_counts(q_counts, k=r.params["pool_size"], n_threads=1)
    finally:
        del r._query.run
    return outs[0]


def test_wide_layout_uint32_terms_int64_pointer(parts):
    """Both wide fallbacks in one index (one extra query-kernel compile for the two):
    V > 65,535 stores term ids as uint32 (sentinel 2**32 - 1) in the index; ``s_indptr`` is
    uint32 below 2**32 support entries, and the int64 pointer of larger corpora (forced here)
    is read the same.  The wide index (uint32 ids, int64 pointer; V = 70,000 with the corpus's
    terms split between both ends) gives the narrow index (uint16 ids, uint32 pointer, the
    same counts renumbered) every kernel output bit for bit, with and without postings.
    One thread, few queries: the serial twin, the cheaper compile of the two (the id and
    pointer types are read only in the chunk body both twins share; serial == batch is
    tests/sgr/test_sgr.py's)."""
    from sklearn.feature_extraction.text import CountVectorizer

    _, C, _, _, _, terms, _ = parts
    V0, V = C.shape[1], 70_000
    wide_col = np.where(np.arange(V0) < V0 // 2, np.arange(V0), V - V0 + np.arange(V0))  # order kept
    Cw = sp.csr_matrix((C.data, wide_col[C.indices], C.indptr), shape=(C.shape[0], V))
    cv = CountVectorizer(token_pattern=r"(?u)\b\w\w+\b", vocabulary=terms, dtype=np.float32)
    q = cv.transform(QUERIES).tocsr()  # "zzz": an empty query
    qw = sp.csr_matrix((q.data, wide_col[q.indices], q.indptr), shape=(q.shape[0], V))
    for kw in (dict(), dict(postings=False)):
        rn = SparseGeometricRetriever(**SMALL, **kw).fit(C)
        assert rn._ix["code_term"].dtype == np.uint16 and rn._ix["s_indptr"].dtype == np.uint32
        rw = SparseGeometricRetriever(**SMALL, **kw).fit(Cw)
        for k in ("code_term", "s_idx", "c_terms", "r_terms"):
            assert rw._ix[k].dtype == np.uint32, k
        assert rw._ix["code_term"].max() == 2**32 - 1 or (rw._ix["code_term"] < V).all()
        assert rw._ix["s_idx"].max() > 65_535  # ids beyond the uint16 range are stored and read
        assert rw._ix["s_indptr"].dtype == np.uint32
        rw._ix["s_indptr"] = rw._ix["s_indptr"].astype(np.int64)  # as assemble stores it from 2**32 entries
        rw._query._kix = None
        want, got = _kernel_outputs(rn, q), _kernel_outputs(rw, qw)
        assert (
            rw._query._kix.s_indptr.dtype == np.int64 and rw._query._kix.code_term.dtype == np.uint32
        )  # what the kernel read
        assert (want[0][:3] >= 0).any()  # real pools
        for name, a, b in zip(("doc", "components", "n", "info", "status"), got, want, strict=True):
            assert_array_equal(a, b, err_msg=name)
        ia, sa = rw.search_counts(qw, k=6, n_threads=1)
        ib, sb = rn.search_counts(q, k=6, n_threads=1)
        assert_array_equal(ia, ib)
        assert_array_equal(sa, sb)


def test_save_load_mmap_equals_in_memory(parts, tmp_path):
    """Format 3 on disk: load (in memory) and load(mmap=True) give the fitted index's ids and
    scores; ids round-trip (lazy with mmap); postings=False too; an unknown format is named."""
    import json

    corpus = parts[0]
    ids = [f"d{i}é" for i in range(40)]
    for kw in (dict(), dict(postings=False)):
        r = SparseGeometricRetriever(**SMALL, **kw).fit(corpus, ids=ids)
        d = str(tmp_path / f"idx{len(kw)}")
        r.save(d)
        for mm in (False, True):
            r2 = SparseGeometricRetriever.load(d, mmap=mm)
            _same_results(r2, r)
            assert list(r2.ids_) == ids and r2.ids_ == ids
            assert r2.index_nbytes() == r.index_nbytes()
        with open(os.path.join(d, "meta.json")) as f:
            m = json.load(f)
        m["format"] = 4
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(m, f)
        with pytest.raises(ValueError, match="index format 4 is not supported"):
            SparseGeometricRetriever.load(d)


def test_postings_false_same_scores_smaller(parts):
    corpus = parts[0]
    a = SparseGeometricRetriever(**SMALL).fit(corpus)
    b = SparseGeometricRetriever(**SMALL, postings=False).fit(corpus)
    _same_results(a, b)
    assert "t_code" not in b._ix
    ba, bb = a.index_nbytes(breakdown=True), b.index_nbytes(breakdown=True)
    assert bb["postings"] < ba["postings"] and bb["total"] == b.index_nbytes()
    assert sum(v for k, v in bb.items() if k != "total") == bb["total"]
    with pytest.raises(ValueError, match="postings=False"):
        b.set_params(bm25_weight=0.5).search(["w01"], k=3)


def test_half_round_matches_numpy():
    """``half_round`` (float64 -> nearest float16, ties to even) equals numpy's conversion,
    on random values over the whole half range, ties, subnormals and overflow."""
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            np.exp(rng.uniform(np.log(1e-9), np.log(7e4), 20_000)),
            np.float16(rng.uniform(0, 100, 2000)).astype(np.float64)
            + np.float64(2.0) ** (np.floor(np.log2(np.abs(rng.uniform(1, 100, 2000)))) - 11),
            [0.0, 65504.0, 65519.99, 65520.0, 1e6, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 1.0 + 2.0**-11],
        ]
    )
    x = np.concatenate([x, -x])
    with np.errstate(over="ignore"):  # 1e6 and 65520 overflow to inf, as intended
        want = x.astype(np.float16).astype(np.float64)
    got = np.array([kb.half_round(v) for v in x])
    assert_array_equal(got, want)


def test_scifact_mmap_load_and_compact_equal_in_memory(tmp_path):
    """SciFact (bundled, 5,183 passages): the index saved in format 3 and opened with
    ``load(mmap=True)`` returns the in-memory index's ids and scores on the 300 test queries,
    with and without postings (both built by ``fit``)."""
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset("scifact")
    texts = ds.doc_texts(" ")
    qs = [ds.queries[q] for q in ds.split_query_ids("test")]
    r = SparseGeometricRetriever().fit(texts, ids=list(ds.doc_ids))
    want = r.search(qs, k=10)
    r.save(str(tmp_path / "sf"))
    r2 = SparseGeometricRetriever.load(str(tmp_path / "sf"), mmap=True)
    got = r2.search(qs, k=10)
    assert_array_equal(got[0], want[0])
    assert_array_equal(got[1], want[1])
    assert r2.ids_[17] == ds.doc_ids[17]
    r3 = SparseGeometricRetriever(postings=False).fit(texts)
    got = r3.search(qs, k=10)
    assert_array_equal(got[0], want[0])
    assert_array_equal(got[1], want[1])


def test_assemble_out_then_save_in_place(parts, tmp_path):
    """assemble(out=DIR) + from_parts + save(DIR): the mapped arrays stay (not rewritten),
    meta.json is added, and the folder loads with the same results."""
    _, C, X, idf, dl, terms, fitted = parts
    g = layout.calibrate(X, SMALL)
    d = str(tmp_path / "ix")
    ix = layout.assemble(g, [layout.encode(X, g, SMALL, counts=C)], idf, dl, SMALL, out=d)
    st = os.stat(os.path.join(d, "code_term.npy"))  # any rewrite changes the inode or the stat fields
    r = SparseGeometricRetriever.from_parts(ix, params=SMALL, terms=terms, ids=[f"x{i}" for i in range(40)])
    r.save(d)
    assert os.stat(os.path.join(d, "code_term.npy")) == st
    r2 = SparseGeometricRetriever.load(d, mmap=True)
    _same_results(r2, fitted)
    assert list(r2.ids_) == [f"x{i}" for i in range(40)]
