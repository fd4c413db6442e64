"""Streaming SGR build (jkofast.sgr.streaming): tokens, vocabulary, TF-IDF rows,
calibration subsets, resume, bad input -- against the in-memory ``fit`` and naive oracles."""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

from jkofast.kernels.sgr import stream as _st
from jkofast.sgr import _persist as persist
from jkofast.sgr import layout
from jkofast.sgr import streaming as st
from jkofast.sgr.retriever import TOKEN_PATTERN, SparseGeometricRetriever
from jkofast.text.scripts import script_tokenizer

ANALYSE = script_tokenizer(TOKEN_PATTERN)
SMALL = {"pool_size": 20}  # a small pool: tiny corpora


def _texts(n, n_words=300, seed=0, extra=()):
    """Seeded Zipf texts of mixed case and punctuation; ``extra`` texts appended (non-ASCII ones)."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" if i % 7 else f"Term_{i}" for i in range(n_words)]
    p = 1.0 / np.arange(1, n_words + 1) ** 1.1
    p /= p.sum()
    out = []
    for _ in range(n):
        w = rng.choice(n_words, size=int(rng.integers(3, 25)), p=p)
        out.append(" ".join(words[j] for j in w) + rng.choice([".", ", a x", "!", " 42 7"]))
    return out + list(extra)


NON_ASCII = [
    "Café crème brûlée au lait, 2015",
    "كَتَبَ الكتـــاب ٢٠٢٣ w1 w2",
    "किताब पढ़ना w3",
    "Ἀθῆναι ΣΟΦΙΑΣ σοφίας İstanbul w1",
    "naïve 東京 タワー w2 w2",
]


def _write_corpus(path, texts, ids=None, titles=None, gz=False):
    ids = ids or [f"d{i}" for i in range(len(texts))]
    lines = []
    for i, t in enumerate(texts):
        title = titles[i] if titles else ""
        lines.append(json.dumps({"_id": ids[i], "title": title, "text": t}) + "\n")
    data = "".join(lines).encode("utf-8")
    if gz:
        with gzip.open(path, "wb") as fh:
            fh.write(data)
    else:
        with open(path, "wb") as fh:
            fh.write(data)
    return [(titles[i] if titles else "") + " " + t for i, t in enumerate(texts)], ids


# ------------------------------------------------------------------------------------ tokens
def test_token_kernel_matches_regex_on_ascii():
    rng = np.random.default_rng(3)
    alphabet = np.frombuffer(b"abcXYZ019_ .,-'\n\t", np.uint8)
    for _ in range(20):
        docs = [alphabet[rng.integers(0, alphabet.size, rng.integers(0, 40))].tobytes().decode() for _ in range(15)]
        joined = "\n".join(docs).lower()
        buf = np.frombuffer(joined.encode(), np.uint8)
        off = np.zeros(len(docs) + 1, np.int64)
        np.cumsum([len(d) + 1 for d in docs], out=off[1:])
        off[1:] -= 1
        dl = np.zeros(len(docs), np.int64)
        n = _st.count_tokens(buf, off, dl)
        ids = np.zeros(n, np.int32)
        a, b, h = np.zeros(max(n, 1), np.int64), np.zeros(max(n, 1), np.int64), np.zeros(max(n, 1), np.uint64)
        nv = _st.token_ids(buf, off, n, ids, a, b, h)
        terms = [joined[x : x + m] for x, m in zip(a[:nv], b[:nv])]
        want = [re.findall(TOKEN_PATTERN, d.lower()) for d in docs]
        assert dl.tolist() == [len(w) for w in want]
        assert [terms[i] for i in ids] == [t for w in want for t in w]
        assert len(set(terms)) == nv  # distinct ids for distinct terms


def test_token_table_grows_past_its_first_size():
    docs = [" ".join(f"t{i}x{j}" for j in range(50)) for i in range(100)]  # 5,000 distinct terms
    out = st.shard_term_counts(docs)
    assert out["terms"].shape[0] == 5000
    assert out["tf"].tolist() == [1] * 5000


def test_shard_counts_equal_the_analyser_ascii_and_not():
    texts = [*_texts(60, extra=NON_ASCII), "", "a b c", "x_y __ 12"]
    out = st.shard_term_counts(texts)
    terms = out["terms"].tolist()
    assert len(set(terms)) == len(terms)
    tf = Counter()
    df = Counter()
    for i, t in enumerate(texts):
        toks = ANALYSE(t)
        assert out["dl"][i] == len(toks)
        c = Counter(toks)
        lo, hi = out["indptr"][i], out["indptr"][i + 1]
        got = {terms[j]: int(n) for j, n in zip(out["indices"][lo:hi], out["counts"][lo:hi])}
        assert got == dict(c)
        assert np.all(np.diff(out["indices"][lo:hi]) > 0)  # sorted, unique
        tf.update(c)
        df.update(set(c))
    assert dict(zip(terms, out["tf"].tolist())) == dict(tf)
    assert dict(zip(terms, out["df"].tolist())) == dict(df)


# ------------------------------------------------------------------------------------ vocabulary
def _cv(texts, max_features):
    cv = CountVectorizer(analyzer=ANALYSE, max_features=max_features, dtype=np.float32)
    counts = cv.fit_transform(texts)
    return cv, counts


@pytest.mark.parametrize("max_features", [5, 37, 120, 100_000])
@pytest.mark.parametrize("shard", [1, 13, 1000])
def test_vocabulary_is_countvectorizers(max_features, shard):
    texts = _texts(150, extra=NON_ASCII)
    cv, _ = _cv(texts, max_features)
    toks = [st.shard_term_counts(texts[i : i + shard]) for i in range(0, len(texts), shard)]
    voc = st.stream_vocabulary(toks, max_features)
    assert voc["exact"] and voc["guaranteed"]
    assert voc["terms"].tolist() == cv.get_feature_names_out().tolist()  # same terms, same (tie) order


def test_heavy_hitters_keep_the_top_terms_when_guaranteed():
    texts = _texts(400, n_words=2000, seed=5)
    toks = [st.shard_term_counts(texts[i : i + 50]) for i in range(0, len(texts), 50)]
    full = st.stream_vocabulary(toks, 10**9)
    tf = dict(zip(full["terms"].tolist(), full["tf"].tolist()))
    V = 40
    voc = st.stream_vocabulary(toks, V, local_k=100, candidate_k=150)
    assert not voc["exact"]
    assert voc["guaranteed"]
    cut = min(tf[t] for t in voc["terms"].tolist())
    # every term above the cut is kept; the kept ones tie at most at the cut
    assert {t for t, f in tf.items() if f > cut} <= set(voc["terms"].tolist())
    assert sorted(tf[t] for t in voc["terms"].tolist()) == sorted(tf.values(), reverse=True)[:V][::-1]
    assert voc["tf"].tolist() == [tf[t] for t in voc["terms"].tolist()]  # exact counts


def test_heavy_hitters_warn_when_the_cut_is_not_proven():
    texts = _texts(400, n_words=2000, seed=5)
    toks = [st.shard_term_counts(texts[i : i + 50]) for i in range(0, len(texts), 50)]
    with pytest.warns(RuntimeWarning, match="not above the bound"):
        voc = st.stream_vocabulary(toks, 500, local_k=20, candidate_k=40)
    assert not voc["guaranteed"]


def test_idf_and_rows_are_tfidftransformers():
    texts = _texts(120, extra=NON_ASCII)
    cv, counts = _cv(texts, 90)
    tr = TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)
    X = tr.fit_transform(counts).tocsr().astype(np.float32)
    X.sort_indices()
    toks = [st.shard_term_counts(texts[i : i + 17]) for i in range(0, len(texts), 17)]
    voc = st.stream_vocabulary(toks, 90)
    idf = st.smooth_idf(voc["df"], len(texts))
    assert idf.dtype == tr.idf_.dtype and np.array_equal(idf, tr.idf_)
    index = {t: i for i, t in enumerate(voc["terms"].tolist())}
    Y = sp.vstack([st.shard_rows(t, index, idf)[0] for t in toks], format="csr")
    assert np.array_equal(Y.indptr, X.indptr) and np.array_equal(Y.indices, X.indices)
    assert np.array_equal(Y.data, X.data)


# ------------------------------------------------------------------------------------ build = fit
def _same_index(a, b):
    assert a.n_docs_ == b.n_docs_ and a.terms_ == b.terms_ and list(a.ids_) == list(b.ids_)
    for k in a._ix:
        x, y = np.asarray(a._ix[k]), np.asarray(b._ix[k])
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), k


@pytest.mark.parametrize("shard_size, gz", [(1, False), (23, True), (10_000, False)])
def test_build_equals_fit(tmp_path, shard_size, gz):
    texts = _texts(90, extra=NON_ASCII)
    titles = ["A title" if i % 3 == 0 else "" for i in range(len(texts))]
    path = tmp_path / ("corpus.jsonl.gz" if gz else "corpus.jsonl")
    joined, ids = _write_corpus(path, texts, titles=titles, gz=gz)
    ref = SparseGeometricRetriever(**SMALL).fit(joined, ids=ids, n_threads=1)
    r = st.build_index(path, tmp_path / "ix", shard_size=shard_size, params=SMALL, n_threads=2, progress=False)
    _same_index(ref, r)
    qs = ["w1 w3", "term_7 w2 w5", "café w9", "nothing"]
    a, b = ref.search(qs, k=10), r.search(qs, k=10)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not os.path.exists(tmp_path / "ix" / "_build") and not os.path.exists(tmp_path / "ix" / "shards")
    again = SparseGeometricRetriever.load(tmp_path / "ix", mmap=True)
    assert np.array_equal(again.search(qs, k=10)[1], a[1])


def test_build_from_a_beir_folder_and_scifact_equals_fit(tmp_path):
    from jkofast.datasets.beir import bundled_path, load_dataset

    ds = load_dataset("scifact")
    ref = SparseGeometricRetriever().fit(ds.doc_texts(" "), ids=ds.doc_ids, n_threads=2)
    r = st.build_index(bundled_path("scifact"), tmp_path / "ix", shard_size=1500, n_threads=2, progress=False)
    _same_index(ref, r)
    qs = [ds.queries[q] for q in ds.split_query_ids("test")]
    a, b = ref.search(qs, k=100), r.search(qs, k=100)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_vocabulary_above_uint16_falls_back_to_uint32(tmp_path):
    texts = [" ".join(f"u{i}v{j}" for j in range(30)) + " common" for i in range(2200)]  # 66,000 + 1 terms
    path = tmp_path / "corpus.jsonl"
    joined, ids = _write_corpus(path, texts)
    p = {"max_features": 70_000, "pool_size": 5, "centre_size": 4, "assoc_k": 4, "route_k": 4}
    r = st.build_index(path, tmp_path / "ix", shard_size=700, params=p, n_threads=2, progress=False)
    assert r.n_terms_ == 66_001
    assert np.asarray(r._ix["s_idx"]).dtype == np.uint32 and np.asarray(r._ix["code_term"]).dtype == np.uint32
    ref = SparseGeometricRetriever(**p).fit(joined, ids=ids, n_threads=2)
    _same_index(ref, r)


# ------------------------------------------------------------------------------------ calibration
def _fit_rows(joined):
    cv = CountVectorizer(analyzer=ANALYSE, max_features=50_000, dtype=np.float32)
    counts = cv.fit_transform(joined)
    tr = TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)
    X = tr.fit_transform(counts).tocsr().astype(np.float32)
    X.sort_indices()
    return X


@pytest.mark.parametrize("mode", ["first", "uniform"])
def test_calibration_subset(tmp_path, mode):
    texts = _texts(120)
    path = tmp_path / "corpus.jsonl"
    joined, ids = _write_corpus(path, texts)
    n = 50
    r = st.build_index(
        path, tmp_path / "ix", calibrate=n, calibrate_mode=mode, seed=7, shard_size=31, params=SMALL,
        n_threads=1, progress=False,
    )  # fmt: skip
    X = _fit_rows(joined)
    pick = np.arange(n) if mode == "first" else np.sort(np.random.default_rng(7).choice(len(texts), n, replace=False))
    g = layout.calibrate(X[pick], SMALL, 1)
    assert r.n_calibration_ == n
    for k in ("c_indptr", "c_vals", "gvar", "a_idx", "g_val", "g_idx"):  # values (g_idx is stored as term ids)
        assert np.array_equal(np.asarray(r._ix[k]), np.asarray(getattr(g, k))), k
    assert np.array_equal(np.asarray(r._ix["r_w"]), layout.half_bits(g.r_w))  # float16 bits in the index
    shard = layout.encode(X, g, SMALL, 1, counts=X)  # every passage encoded against the subset geometry
    assert np.array_equal(np.sort(np.asarray(r._ix["mem_doc"])), np.sort(shard.mem_doc))
    assert r.search(["w1 w2"], k=5)[0].shape == (1, 5)


def test_calibrate_bad_values(tmp_path):
    path = tmp_path / "corpus.jsonl"
    _write_corpus(path, _texts(20))
    for bad in (0, -3):
        with pytest.raises(ValueError, match="calibrate must be a positive"):
            st.build_index(path, tmp_path / "ix", calibrate=bad, progress=False)
    with pytest.raises(TypeError, match="calibrate must be an integer"):
        st.build_index(path, tmp_path / "ix", calibrate=1.5, progress=False)
    with pytest.raises(ValueError, match="calibrate_mode"):
        st.build_index(path, tmp_path / "ix", calibrate=5, calibrate_mode="random", progress=False)


def test_calibrate_above_the_corpus_is_clamped(tmp_path):
    path = tmp_path / "corpus.jsonl"
    joined, ids = _write_corpus(path, _texts(40))
    with pytest.warns(UserWarning, match="exceeds the corpus"):
        r = st.build_index(path, tmp_path / "ix", calibrate=10**6, params=SMALL, n_threads=1, progress=False)
    _same_index(SparseGeometricRetriever(**SMALL).fit(joined, ids=ids, n_threads=1), r)


# ------------------------------------------------------------------------------------ resume, bad input
def test_resume_after_an_interruption_skips_completed_shards(tmp_path, monkeypatch):
    texts = _texts(100)
    path = tmp_path / "corpus.jsonl"
    joined, ids = _write_corpus(path, texts)
    ref = SparseGeometricRetriever(**SMALL).fit(joined, ids=ids, n_threads=1)
    calls = []
    real = layout.encode

    def failing(X, g, p, nt=None, first_doc=0, *, counts):
        calls.append(first_doc)
        if first_doc == 40:
            raise KeyboardInterrupt
        return real(X, g, p, nt, first_doc, counts=counts)

    monkeypatch.setattr(layout, "encode", failing)
    with pytest.raises(KeyboardInterrupt):
        st.build_index(path, tmp_path / "ix", shard_size=20, params=SMALL, n_threads=1, progress=False)
    assert calls == [0, 20, 40]
    with pytest.raises(ValueError, match=r"meta\.json missing"):
        SparseGeometricRetriever.load(tmp_path / "ix")
    calls.clear()
    monkeypatch.setattr(layout, "encode", lambda *a, **k: (calls.append(a[4]), real(*a, **k))[1])
    r = st.build_index(path, tmp_path / "ix", shard_size=20, params=SMALL, n_threads=1, progress=False)
    assert calls == [40, 60, 80]
    _same_index(ref, r)


def test_bad_line_names_file_and_line_and_a_completed_corpus_resumes(tmp_path):
    texts = _texts(50)
    path = tmp_path / "corpus.jsonl"
    joined, ids = _write_corpus(path, texts)
    good = path.read_bytes()
    lines = good.splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:33]) + lines[33][:25])  # a download cut in the middle of line 34
    with pytest.raises(ValueError, match=r"corpus\.jsonl:34: invalid JSON"):
        st.build_index(path, tmp_path / "ix", shard_size=10, params=SMALL, n_threads=1, progress=False)
    tok = tmp_path / "ix" / "_build" / "tokens"
    assert sorted(os.listdir(tok)) == ["00000", "00001", "00002"]  # the completed shards stay
    path.write_bytes(good)  # the download completed
    r = st.build_index(path, tmp_path / "ix", shard_size=10, params=SMALL, n_threads=1, progress=False)
    _same_index(SparseGeometricRetriever(**SMALL).fit(joined, ids=ids, n_threads=1), r)


def test_a_corpus_changed_since_is_refused(tmp_path, monkeypatch):
    texts = _texts(40)
    path = tmp_path / "corpus.jsonl"
    _write_corpus(path, texts)
    monkeypatch.setattr(layout, "encode", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        st.build_index(path, tmp_path / "ix", shard_size=10, params=SMALL, progress=False)
    _write_corpus(path, ["changed text", *texts[1:]])
    monkeypatch.undo()
    with pytest.raises(ValueError, match="changed since the interrupted build"):
        st.build_index(path, tmp_path / "ix", shard_size=10, params=SMALL, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        st.build_index(path, tmp_path / "ix", shard_size=7, params=SMALL, progress=False)
    r = st.build_index(path, tmp_path / "ix", shard_size=10, params=SMALL, progress=False, resume=False)
    assert r.n_docs_ == 40


@pytest.mark.parametrize(
    "line, match",
    [
        (b"not json\n", "invalid JSON"),
        (b"[1, 2]\n", "expected a JSON object"),
        (b'{"title": "x"}\n', "'_id' must be a string"),
        (b'{"_id": "a b", "text": "x"}\n', "without whitespace"),
        (b'{"_id": "z", "text": 5}\n', "must be strings"),
        (b'{"_id": "z", "text": "\xff"}\n', "invalid UTF-8"),
    ],
)
def test_bad_lines(tmp_path, line, match):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"_id": "a", "text": "one two"}\n\n' + line)
    with pytest.raises(ValueError, match=rf"corpus\.jsonl:3: .*{match}"):
        st.build_index(path, tmp_path / "ix", progress=False)


def test_empty_duplicate_and_missing(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\n\n")
    with pytest.raises(ValueError, match="no document"):
        st.build_index(path, tmp_path / "ix", progress=False)
    path.write_bytes(b'{"_id": "a", "text": "one two"}\n{"_id": "a", "text": "three four"}\n')
    with pytest.raises(ValueError, match="duplicate document id 'a'"):
        st.build_index(path, tmp_path / "ix2", params=SMALL, progress=False)
    with pytest.raises(FileNotFoundError):
        st.build_index(tmp_path / "nope.jsonl", tmp_path / "ix3", progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no corpus\.jsonl"):
        st.build_index(tmp_path / "empty", tmp_path / "ix3", progress=False)


def test_a_failed_final_write_leaves_no_complete_index(tmp_path, monkeypatch):
    texts = _texts(30)
    path = tmp_path / "corpus.jsonl"
    _write_corpus(path, texts)
    out = tmp_path / "ix"
    st.build_index(path, out, params=SMALL, n_threads=1, progress=False)
    assert os.path.isfile(out / "meta.json")

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(persist, "atomic_write_manifest", disk_full)  # the meta.json write fails
    with pytest.raises(OSError, match="No space left"):
        st.build_index(path, out, params=SMALL, n_threads=1, progress=False, resume=False)
    assert not os.path.exists(out / "meta.json")
    with pytest.raises(ValueError, match=r"meta\.json missing"):
        SparseGeometricRetriever.load(out)


def test_progress_line(tmp_path, capsys):
    path = tmp_path / "corpus.jsonl"
    _write_corpus(path, _texts(30))
    st.build_index(path, tmp_path / "ix", shard_size=10, params=SMALL, n_threads=1, progress=True)
    err = capsys.readouterr().err
    assert "tokens: 30 passages" in err and "encode: 30 passages" in err and "ETA" in err and "/s" in err
    assert "calibrate: done in" in err and "assemble: done in" in err
