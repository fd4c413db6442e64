import json
import os

import numpy as np
import pytest

import reference as ref
from jkofast._threads import numba_threads
from jkofast.datasets.beir import load_dataset
from jkofast.sparse.index import BM25Index, TfidfIndex, load_index
from jkofast.text.analyzer import Analyzer
from jkofast.text.patterns import SKLEARN, WORD

TINY = [
    "the cat sat on the mat",
    "the dog chased the cat",
    "birds fly over the dog and the cat",
    "fish swim",
    "",  # empty document
    "the cat sat on the mat",  # exact duplicate of doc 0 -> exact score ties
]
# every term in > half of the docs -> all raw okapi idfs negative -> negative floor and scores
NEG = ["a b", "a b c", "a b", "a c", "b c"]


def _tok(texts):
    return [ref.sparse_tokenize_word(t) for t in texts]


def _check_topk_consistent(idx_obj, queries, ks=(1, 3, 6, 9, 17)):
    """search() == exact top-k (desc, lowest index) of score_all in float64, padded."""
    full = idx_obj.score_all(queries, dtype=np.float64)
    for k in ks:
        ids, sc = idx_obj.search(queries, k)
        assert ids.dtype == np.int64 and sc.dtype == np.float32 and ids.shape == (len(queries), k)
        for q in range(len(queries)):
            e_idx, e_val = ref.sparse_topk_padded(full[q], k)
            np.testing.assert_array_equal(ids[q], e_idx)
            np.testing.assert_array_equal(sc[q], e_val.astype(np.float32))


QUERIES = ["cat on the mat cat", "dog", "zebra", "", "fish and birds", "the"]


def test_okapi_equals_oracle_tiny():
    idx = BM25Index("okapi").fit(TINY)
    for q in QUERIES:
        exp = ref.sparse_bm25_okapi_scores(_tok(TINY), ref.sparse_tokenize_word(q))
        np.testing.assert_allclose(idx.score_all([q], dtype=np.float64)[0], exp, rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(idx.score_all([q])[0], exp.astype(np.float32), rtol=1e-6)
    _check_topk_consistent(idx, QUERIES)


def test_okapi_negative_idf_floor():
    idx = BM25Index("okapi").fit(NEG)
    qs = ["a", "b c", "c"]
    for q in qs:
        exp = ref.sparse_bm25_okapi_scores(_tok(NEG), ref.sparse_tokenize_word(q))
        assert (exp <= 0).all() and (exp < 0).any()  # the floored idf is negative here
        np.testing.assert_allclose(idx.score_all([q], dtype=np.float64)[0], exp, rtol=1e-6)
    _check_topk_consistent(idx, qs, ks=(1, 2, 5, 7))  # untouched zero docs must beat negatives


def test_lucene_equals_oracle_tiny():
    idx = BM25Index("lucene", analyzer=Analyzer(WORD)).fit(TINY)
    for q in QUERIES:
        exp = ref.sparse_bm25_lucene_scores(_tok(TINY), ref.sparse_tokenize_word(q))
        np.testing.assert_allclose(idx.score_all([q], dtype=np.float64)[0], exp, rtol=1e-6, atol=1e-12)
    _check_topk_consistent(idx, QUERIES)


def test_tfidf_equals_sklearn_tiny():
    from sklearn.feature_extraction.text import TfidfVectorizer

    idx = TfidfIndex().fit(TINY)
    v = TfidfVectorizer()
    X = v.fit_transform(TINY)
    np.testing.assert_allclose(idx.doc_matrix().toarray(), X.toarray(), atol=1e-6)
    np.testing.assert_allclose(idx.idf, v.idf_, rtol=1e-12)
    Q = v.transform(QUERIES)
    np.testing.assert_allclose(idx.transform(QUERIES).toarray(), Q.toarray(), atol=1e-6)
    np.testing.assert_allclose(idx.score_all(QUERIES), (Q @ X.T).toarray(), atol=1e-6)
    # dense oracle too
    counts = np.zeros((len(TINY), len(idx.vocab.terms)))
    pos = {t: i for i, t in enumerate(idx.vocab.terms)}
    for d, t in enumerate(TINY):
        for w in Analyzer(SKLEARN).tokenize(t):
            counts[d, pos[w]] += 1
    D, idf = ref.sparse_tfidf_dense(counts)
    np.testing.assert_allclose(idx.doc_matrix().toarray(), D, atol=1e-6)
    _check_topk_consistent(idx, QUERIES)


def test_topk_edge_cases():
    idx = BM25Index("okapi").fit(TINY)
    ids, sc = idx.search(["fish"], k=8)  # k > n_docs: padding; zero-score docs fill in index order
    assert ids[0].tolist() == [3, 0, 1, 2, 4, 5, -1, -1]
    assert sc[0, 0] > 0 and (sc[0, 1:6] == 0).all() and np.isneginf(sc[0, 6:]).all()
    ids, _ = idx.search(["unknownword"], k=3)  # nothing touched
    assert ids[0].tolist() == [0, 1, 2]
    ids, sc = idx.search(["sat"], k=2)  # exact tie between docs 0 and 5 -> lowest index first
    assert ids[0].tolist() == [0, 5] and sc[0, 0] == sc[0, 1]
    ids, sc = idx.search([], k=2)
    assert ids.shape == (0, 2)
    with pytest.raises(ValueError, match="k must be"):
        idx.search(["cat"], k=0)
    with pytest.raises(TypeError, match="k must be"):
        idx.search(["cat"], k=1.5)
    with pytest.raises(RuntimeError, match="not fitted"):
        BM25Index().search(["cat"], 1)
    with pytest.raises(ValueError, match="variant"):
        BM25Index("bm42")
    with pytest.raises(ValueError, match="b must be"):
        BM25Index(b=2.0)
    with pytest.raises(ValueError, match="k1"):
        BM25Index(k1=-1.0)


def test_token_ids_build_equals_text_build():
    toks = _tok(TINY)
    vocab = sorted({t for d in toks for t in d})
    pos = {t: i for i, t in enumerate(vocab)}
    ids = [np.array([pos[t] for t in d], np.int64) for d in toks]
    a = BM25Index("okapi").fit(TINY)
    b = BM25Index("okapi").fit_token_ids(ids)
    assert a.vocab.terms == vocab
    np.testing.assert_array_equal(a.post_w, b.post_w)
    q = [np.array([pos["cat"], pos["mat"], pos["cat"], 999])]  # unknown id ignored
    ea = a.search(["cat mat cat"], k=4)
    eb = b.search_token_ids(q, k=4)
    np.testing.assert_array_equal(ea[0], eb[0])
    np.testing.assert_array_equal(ea[1], eb[1])
    with pytest.raises(RuntimeError, match="token ids"):
        b.search(["cat"], 1)


@pytest.mark.parametrize("make", [lambda: BM25Index("okapi"), lambda: BM25Index("lucene"), lambda: TfidfIndex()])
@pytest.mark.parametrize("mmap", [True, False, "r"])
def test_save_load_roundtrip(tmp_path, make, mmap):
    idx = make().fit(TINY)
    idx.save(str(tmp_path / "ix"))
    back = load_index(str(tmp_path / "ix"), mmap=mmap)
    assert type(back) is type(idx) and back.vocab.terms == idx.vocab.terms and back.n_docs == idx.n_docs
    for q in (["cat mat", "dog", ""], ["fish"]):
        e = idx.search(q, 4)
        g = back.search(q, 4)
        np.testing.assert_array_equal(e[0], g[0])
        np.testing.assert_array_equal(e[1], g[1])
    if mmap:
        assert isinstance(back.post_w, np.memmap)


def test_load_errors(tmp_path):
    d = tmp_path / "ix"
    BM25Index("okapi").fit(TINY).save(str(d))
    man = json.loads((d / "manifest.json").read_text())
    for k in ("manifest_crc32", "files", "checksum"):  # edited by hand: as a manifest without checksums
        del man[k]

    def reset():
        (d / "manifest.json").write_text(json.dumps(man))

    m2 = dict(man, format_version=999)
    (d / "manifest.json").write_text(json.dumps(m2))
    with pytest.raises(ValueError, match="format version 999 is not supported"):
        load_index(str(d))
    (d / "manifest.json").write_text(json.dumps(dict(man, format="other")))
    with pytest.raises(ValueError, match="not a jkofast sparse index"):
        load_index(str(d))
    (d / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="invalid manifest"):
        load_index(str(d))
    reset()
    raw = (d / "post_w.npy").read_bytes()
    (d / "post_w.npy").write_bytes(raw[: len(raw) - 8])  # truncated
    for mm in (True, False):
        with pytest.raises(ValueError, match=r"post_w\.npy"):
            load_index(str(d), mmap=mm)
    (d / "post_w.npy").write_bytes(raw)
    vocab = (d / "vocab.txt").read_text()
    (d / "vocab.txt").write_text("\n".join(vocab.split("\n")[:3]) + "\n")
    with pytest.raises(ValueError, match="truncated"):
        load_index(str(d))
    (d / "vocab.txt").write_text(vocab)
    os.remove(d / "idf.npy")
    with pytest.raises(ValueError, match=r"idf\.npy: array file missing"):
        load_index(str(d))
    with pytest.raises(ValueError, match=r"manifest\.json missing"):
        load_index(str(tmp_path))
    with pytest.raises(ValueError, match="mmap"):
        load_index(str(d), mmap="w")


def test_load_rejects_postings_outside_the_document_range(tmp_path):
    # a corrupt post_docs.npy (same dtype/shape) was loaded and searched: the kernels index
    # per-document buffers with it (out-of-bounds writes for the terms it belongs to)
    d = tmp_path / "ix"
    BM25Index("okapi").fit(TINY).save(str(d))
    pd_ = np.load(d / "post_docs.npy")
    tp = np.load(d / "term_ptr.npy")
    for bad, match in ((999, r"post_docs\.npy: (holds document ids outside|checksum mismatch)"), (-3, "post_docs")):
        a = pd_.copy()
        a[0] = bad
        np.save(d / "post_docs.npy", a)
        with pytest.raises(ValueError, match=match):
            load_index(str(d))
    np.save(d / "post_docs.npy", pd_)
    t = tp.copy()
    t[1] = t[-1] + 1  # not monotone
    np.save(d / "term_ptr.npy", t)
    with pytest.raises(ValueError, match=r"term_ptr\.npy: (is not a valid pointer array|checksum mismatch)"):
        load_index(str(d))
    np.save(d / "term_ptr.npy", tp)
    assert load_index(str(d)).search(["cat"], 2)[0].shape == (1, 2)


def test_search_cli_rejects_a_tag_with_whitespace(tmp_path, capsys):
    from jkofast.cli import main

    tiny = os.path.join(os.path.dirname(__file__), "..", "data", "beir_tiny")
    out = tmp_path / "s.trec"
    args = ["search", "--dataset", tiny, *"--method bm25 --split test --k 3".split(), "--out", str(out)]
    assert main([*args, "--tag", "a b"]) == 2
    assert "--tag must be non-empty without whitespace" in capsys.readouterr().err
    assert not out.exists()


# ---- SciFact -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scifact():
    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")
    qm = ds.queries
    return ds, qids, [qm[q] for q in qids]


def test_scifact_tfidf_equals_sklearn(scifact):
    from sklearn.feature_extraction.text import TfidfVectorizer

    ds, _, qs = scifact
    docs = ds.doc_texts(" ")
    idx = TfidfIndex().fit(docs)
    v = TfidfVectorizer()
    X = v.fit_transform(docs)
    assert idx.vocab.terms == v.get_feature_names_out().tolist()
    assert abs(idx.doc_matrix() - X).max() < 1e-6
    Q = v.transform(qs[:40])
    np.testing.assert_allclose(idx.score_all(qs[:40]), (Q @ X.T).toarray(), atol=1e-6)
    with numba_threads(1):
        a = idx.search(qs, 20)
    with numba_threads(2):
        b = idx.search(qs, 20, n_threads=2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_scifact_okapi_equals_rank_bm25(scifact):
    rank_bm25 = pytest.importorskip("rank_bm25")
    ds, _, qs = scifact
    docs = ds.doc_texts(". ")  # JKO-RAG doc text (SPEC A.2.2)
    idx = BM25Index("okapi").fit(docs)
    oracle = rank_bm25.BM25Okapi([ref.sparse_tokenize_word(d) for d in docs])
    sample = qs[::60]  # 5 queries: rank_bm25 is slow
    ours = idx.score_all(sample)
    for q, row in zip(sample, ours):
        exp = oracle.get_scores(ref.sparse_tokenize_word(q)).astype(np.float32)
        np.testing.assert_allclose(row, exp, rtol=1e-5, atol=1e-6)
    full = idx.score_all(qs, n_threads=1)
    full2 = idx.score_all(qs, n_threads=2)
    np.testing.assert_array_equal(full, full2)
    a = idx.search(qs, 1000, n_threads=1)
    b = idx.search(qs, 1000, n_threads=2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.fixture(scope="module")
def lucene(scifact):
    ds, _, qs = scifact
    idx = BM25Index("lucene").fit(ds.doc_texts(" "))
    return idx, idx.search(qs, 10)


def test_scifact_lucene_top10_equals_bm25s(scifact, lucene):
    bm25s = pytest.importorskip("bm25s")
    ds, _, qs = scifact
    idx, (ids, sc) = lucene
    an = idx.vocab.analyzer.build()  # same tokens for both: compare the scoring
    r = bm25s.BM25()  # defaults: lucene, k1 1.5, b 0.75
    r.index([an(d) for d in ds.doc_texts(" ")], show_progress=False)
    e_ids, e_sc = r.retrieve([an(q) for q in qs], k=10, show_progress=False, n_threads=1)
    np.testing.assert_allclose(sc, e_sc, rtol=1e-5)
    mismatch = 0
    for q in range(len(qs)):
        if not np.array_equal(ids[q], e_ids[q]):
            mismatch += 1  # allowed only inside exact-score ties (bm25s breaks them differently)
            for r_ in np.flatnonzero(ids[q] != e_ids[q]):
                assert np.sum(np.isclose(sc[q], sc[q, r_], rtol=1e-6)) >= 2 or sc[q, r_] == sc[q, -1]
    assert mismatch <= 3


def test_scifact_lucene_ndcg(scifact, lucene):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    ds, qids, _ = scifact
    _, (ids, sc) = lucene
    run = {q: {ds.doc_ids[i]: float(s) for i, s in zip(ids[n], sc[n])} for n, q in enumerate(qids)}
    res = pytrec_eval.RelevanceEvaluator(ds.qrels("test"), {"ndcg_cut.10"}).evaluate(run)
    ndcg = float(np.mean([v["ndcg_cut_10"] for v in res.values()]))
    # reference: bm25s 0.3.16 lucene + English stop-words, no stemming = 0.6617 (data README)
    assert abs(ndcg - 0.662) <= 0.01, ndcg


@pytest.mark.parametrize("variant", ["okapi", "lucene"])
def test_topk_large_k_paths_with_ties(variant):
    """k >= 64 takes the quickselect path; duplicates give exact ties, a 4-term vocabulary
    gives negative okapi idfs (full-scan fallback), unknown ids give untouched documents."""
    rng = np.random.default_rng(7)
    base = [rng.integers(0, 4, rng.integers(1, 5)) for _ in range(40)]
    docs = [base[i % 40] for i in range(160)] + [np.array([5, 6])] * 20  # 180 docs, many exact copies
    idx = BM25Index(variant).fit_token_ids(docs, 8)
    queries = [np.array([0]), np.array([1, 2, 2]), np.array([5]), np.array([3, 6]), np.array([7])]
    q_ptr, q_terms, q_w = idx._token_query_csr(queries)
    full = np.zeros((len(queries), idx.n_docs))
    from jkofast.kernels.sparse import scoring as _ks

    _ks.score_dense_batch(idx.term_ptr, idx.post_docs, idx.post_w, idx.n_docs, q_ptr, q_terms, q_w, 2, full)
    for k in (1, 10, 16, 17, 40, 64, 100, 179, 200):
        ids, sc = idx.search_token_ids(queries, k)
        for q in range(len(queries)):
            e_idx, e_val = ref.sparse_topk_padded(full[q], k)
            np.testing.assert_array_equal(ids[q], e_idx)
            np.testing.assert_array_equal(sc[q], e_val.astype(np.float32))


@pytest.mark.parametrize("variant", ["okapi", "lucene"])
def test_topk_small_k_dense_and_touched_paths(variant):
    """k <= 16: the dense-accumulator scan (seeded by a short postings list or not, blocks of
    64 plus a tail) and the touched-list path give the exact top-k of the float64 scores,
    at 1 and 2 threads; duplicate documents give exact ties (lowest index first).  Larger k
    covers the heap and the radix-sorted partition path over doc ids > 255."""
    from jkofast.kernels.sparse import scoring as _ks

    rng = np.random.default_rng(11)
    base = [rng.integers(0, 12, rng.integers(1, 9)) for _ in range(90)]
    docs = [base[i % 90] for i in range(250)] + [np.array([12, 13])] * 3  # 253 docs (3 full blocks + tail)
    idx = BM25Index(variant).fit_token_ids(docs, 15)
    queries = [
        np.array([0]),
        np.array([1, 5, 5]),
        np.array([12]),
        np.array([3, 13]),
        np.array([14]),
        np.array([0, 2, 4, 6, 8, 10]),
        np.array([13, 7]),
    ]
    q_ptr, q_terms, q_w = idx._token_query_csr(queries)
    nq = len(queries)
    full = np.zeros((nq, idx.n_docs))
    _ks.score_dense_batch(idx.term_ptr, idx.post_docs, idx.post_w, idx.n_docs, q_ptr, q_terms, q_w, 2, full)
    positive = idx._positive_weights()
    for k in (1, 3, 10, 16, 17, 64, 100, 253, 260):  # k >= 64: radix-sorted partition path
        expect = [ref.sparse_topk_padded(full[q], k) for q in range(nq)]
        for dense_ratio in (0.0, 8.0, 1e18):  # never / auto / always the dense scan
            for nt in (1, 2):
                ids = np.empty((nq, k), np.int64)
                sc = np.empty((nq, k), np.float32)
                with numba_threads(nt):
                    _ks.score_topk_batch(
                        idx.term_ptr,
                        idx.post_docs,
                        idx.post_w,
                        idx.n_docs,
                        q_ptr,
                        q_terms,
                        q_w,
                        k,
                        positive,
                        dense_ratio,
                        2,
                        ids,
                        sc,
                    )
                for q in range(nq):
                    np.testing.assert_array_equal(ids[q], expect[q][0])
                    np.testing.assert_array_equal(sc[q], expect[q][1].astype(np.float32))


def test_search_csr_rejects_float_ids_and_non_canonical_queries():
    ix = BM25Index("okapi").fit(TINY)
    with pytest.raises(TypeError, match="queries: indices must be an integer array"):
        ix.search_csr([0, 1], [1.7], [1.0], 2)  # was truncated to term 1 silently
    with pytest.raises(TypeError, match="queries: indptr must be an integer array"):
        ix.search_csr([0.0, 1.0], [1], [1.0], 2)
    with pytest.raises(ValueError, match="not canonical"):
        ix.search_csr([0, 2], [3, 1], [1.0, 1.0], 2)
    with pytest.raises(ValueError, match="non-decreasing"):
        ix.search_csr([0, 2, 1, 2], [1, 3], [1.0, 1.0], 2)
    a = ix.search_csr([0, 2], [1, 3], [1.0, 1.0], 2)
    assert a[0].shape == (1, 2)
