"""The byte-level corpus path of the streaming SGR build (jkofast.sgr._corpus.ByteShards,
byte_shard_term_counts, the parallel block tokeniser, the TF-IDF row kernel): bit for bit the
json + str path (read_corpus_shards + shard_term_counts), at any block count and thread count."""

from __future__ import annotations

import gzip
import hashlib
import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

from jkofast.kernels.sgr import stream as _st
from jkofast.sgr import _corpus, _vocab
from jkofast.sgr import streaming as st
from jkofast.sgr.retriever import TOKEN_PATTERN, SparseGeometricRetriever
from jkofast.text.scripts import script_tokenizer

SMALL = {"pool_size": 20}
WORDS = ["Alpha", "beta", "GAMMA", "x", "y_z", "12", "a1", "Q", "TERM_9", "dé", "東京", "naïve", "w1", "w2", "w3"]


def _rows(n, seed=0):
    """Seeded BEIR rows covering what the byte parser reads and what it leaves to json."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        text = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), rng.integers(0, 14)))
        row = {"_id": f"d{i}", "title": ["", "A Title", "T-2"][i % 3], "text": text}
        kind = i % 11
        if kind == 1:
            row["text"] += ' "quoted" \\ slash\ttab'  # escapes: json path, ASCII text
        elif kind == 2:
            row = {"text": row["text"], "_id": row["_id"]}  # other key order, no title
        elif kind == 3:
            row["metadata"] = {"k": [1, 2]}  # another key: json path
        elif kind == 4:
            row["title"] = None  # null: json path
        elif kind == 5:
            row["_id"] = 1000 + i  # an integer id: json path
        line = json.dumps(row, ensure_ascii=bool(i % 2))  # odd rows escape non-ASCII, even rows keep UTF-8
        if kind == 6:
            line = line.replace(": ", ":").replace(", ", " ,  ")  # other JSON spacing
        if kind == 7:
            line = "  " + line + " \r"  # surrounding whitespace, CRLF
        out.append(line)
        if i % 13 == 0:
            out.append(" \t ")  # a blank line
    return out


def _write(path, lines, tail="\n", gz=False):
    data = ("\n".join(lines) + tail).encode("utf-8")
    if gz:
        with gzip.open(path, "wb") as fh:
            fh.write(data)
    else:
        path.write_bytes(data)


def _json_path(path, shard):
    out = []
    for _, ids, texts, digest in st.read_corpus_shards(str(path), shard):
        tok = st.shard_term_counts(texts)
        tok["ids"] = np.array(ids, dtype=str)
        out.append((tok, digest))
    return out


def _byte_path(path, shard, n_threads, n_blocks, chunk=1 << 12):
    src = _corpus.ByteShards(str(path), chunk=chunk)
    out = []
    try:
        while (part := src.take(shard)) is not None:
            buf, starts, ends, linenos = part
            digest = hashlib.sha1(buf).hexdigest()
            tok = st.byte_shard_term_counts(buf, starts, ends, linenos, str(path), n_threads, n_blocks)
            out.append((tok, digest))
    finally:
        src.close()
    return out


def _assert_same(a, b):
    assert len(a) == len(b)
    for (x, dx), (y, dy) in zip(a, b, strict=True):
        assert dx == dy
        assert sorted(x) == sorted(y)
        for k in x:
            assert x[k].dtype == y[k].dtype and x[k].shape == y[k].shape, k
            assert x[k].tobytes() == y[k].tobytes(), k


@pytest.mark.parametrize("shard", [1, 7, 64, 10_000])
@pytest.mark.parametrize("n_threads, n_blocks", [(1, None), (2, None), (2, 3), (1, 5)])
def test_byte_path_equals_the_json_path(tmp_path, shard, n_threads, n_blocks):
    path = tmp_path / "corpus.jsonl"
    _write(path, _rows(150), tail="\n\n  \n")  # trailing blank lines go to the last shard's digest
    _assert_same(_json_path(path, shard), _byte_path(path, shard, n_threads, n_blocks))


@pytest.mark.parametrize("gz", [False, True])
def test_byte_path_without_final_newline_and_gzip(tmp_path, gz):
    path = tmp_path / ("corpus.jsonl.gz" if gz else "corpus.jsonl")
    _write(path, _rows(60, seed=3), tail="", gz=gz)
    _assert_same(_json_path(path, 16), _byte_path(path, 16, 2, None, chunk=100))


def test_block_count_does_not_change_the_shard():
    """The merged block tables give the shard's first-seen term order whatever the blocks."""
    rng = np.random.default_rng(1)
    vocab = [f"t{i}" for i in range(400)]
    texts = [" ".join(vocab[j] for j in rng.zipf(1.3, 30) % 400) for _ in range(300)]
    lines = [json.dumps({"_id": str(i), "text": t}) for i, t in enumerate(texts)]
    buf = np.frombuffer("\n".join(lines).encode(), np.uint8).copy()  # writable, as the reader gives it
    starts, ends, nonblank = _st.line_bounds(buf, 0, buf.shape[0], True)
    assert nonblank.all() and starts.shape[0] == 300
    ref = st.shard_term_counts(texts)
    for nb in (1, 2, 7, 300):
        got = st.byte_shard_term_counts(buf, starts, ends, np.arange(1, 301), "c", 2, nb)
        for k in ref:
            assert np.array_equal(ref[k], got[k]) and ref[k].dtype == got[k].dtype, (nb, k)


@pytest.mark.parametrize(
    "line, fast",
    [
        (b'{"_id": "a", "title": "T", "text": "one two"}', True),
        (b'{"text":"x","_id":"b"}', True),
        (b' \t{ "_id" : "c" , "title" : "" }\r ', True),
        (b'{"_id": "d", "text": "a \\"q\\""}', False),  # an escape
        (b'{"_id": "e", "text": "d\xc3\xa9j\xc3\xa0 vu"}', False),  # non-ASCII
        (b'{"_id": "f", "text": "x", "extra": 1}', False),  # another key
        (b'{"_id": "g", "_id": "h"}', False),  # a repeated key (json keeps the last)
        (b'{"_id": "i", "title": null}', False),
        (b'{"_id": 5, "text": "x"}', False),
        (b'{"_id": "", "text": "x"}', False),  # empty id: json path names it
        (b'{"_id": "a b", "text": "x"}', False),  # space in the id
        (b'{"_id": "j", "text": "x"} x', False),  # trailing data
        (b'{"_id": "k", "text": "x"', False),  # truncated
        (b'{"title": "x"}', False),  # no id
        (b"{}", False),
        (b'{"_id": "l", "text": "a\tb"}', False),  # a raw control byte
    ],
)
def test_parse_lines_reads_plain_rows_and_leaves_the_rest_to_json(line, fast):
    buf = np.frombuffer(line, np.uint8).copy()
    out = np.zeros((1, 6), np.int64)
    ok = np.zeros(1, bool)
    _st.parse_lines(buf, np.array([0], np.int64), np.array([len(line)], np.int64), out, ok)
    assert bool(ok[0]) is fast
    if fast:
        obj = json.loads(line)
        got = [line[out[0, 2 * f] : out[0, 2 * f + 1]].decode() for f in range(3)]
        assert got == [obj["_id"], obj.get("title", ""), obj.get("text", "")]


def test_line_bounds_blank_lines_and_final_line():
    data = b'a\n \t\r\n\n{"x"}\n\x0b\x0c\nlast'
    buf = np.frombuffer(data, np.uint8).copy()
    s, e, nb = _st.line_bounds(buf, 0, buf.shape[0], False)  # the last line is incomplete: not returned
    lines = data.split(b"\n")
    assert [data[a:b] for a, b in zip(s, e, strict=True)] == lines[:-1]
    assert nb.tolist() == [bool(x.strip()) for x in lines[:-1]]
    s, e, nb = _st.line_bounds(buf, 0, buf.shape[0], True)
    assert [data[a:b] for a, b in zip(s, e, strict=True)] == lines and nb[-1]


def test_bad_gzip_is_a_value_error_naming_the_line(tmp_path):
    path = tmp_path / "corpus.jsonl.gz"
    _write(path, _rows(400), gz=True)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a download cut short
    with pytest.raises(ValueError, match=r"corrupted gzip data at or after line \d+"):
        st.build_index(path, tmp_path / "ix", shard_size=50, params=SMALL, progress=False)


def test_build_is_thread_and_shard_invariant_on_mixed_rows(tmp_path):
    path = tmp_path / "corpus.jsonl"
    lines = [ln for ln in _rows(120, seed=5) if '"_id": 1' not in ln and '"_id":1' not in ln]
    _write(path, lines)
    rows = [json.loads(ln) for ln in lines if ln.strip()]
    joined = [(r.get("title") or "") + " " + (r.get("text") or "") for r in rows]
    ref = SparseGeometricRetriever(**SMALL).fit(joined, ids=[str(r["_id"]) for r in rows], n_threads=1)
    for nt, shard in ((1, 17), (2, 17), (2, 1000)):
        out = tmp_path / f"ix{nt}_{shard}"
        r = st.build_index(path, out, shard_size=shard, params=SMALL, n_threads=nt, progress=False)
        assert r.terms_ == ref.terms_ and list(r.ids_) == list(ref.ids_)
        for k in ref._ix:
            assert np.asarray(ref._ix[k]).tobytes() == np.asarray(r._ix[k]).tobytes(), k


# ------------------------------------------------------------------------------------ TF-IDF rows
def test_tfidf_rows_kernel_equals_tfidftransformer_with_long_rows():
    rng = np.random.default_rng(2)
    vocab = [f"v{i:03d}" for i in range(300)]
    texts = [" ".join(rng.choice(vocab, size=int(rng.integers(0, 200)))) for _ in range(60)]  # rows > 32 terms
    texts[5] = "zzz_unknown only"
    cv = CountVectorizer(analyzer=script_tokenizer(TOKEN_PATTERN), max_features=250, dtype=np.float32)
    counts = cv.fit_transform(texts)
    tr = TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)
    X = tr.fit_transform(counts).tocsr().astype(np.float32)
    X.sort_indices()
    toks = [st.shard_term_counts(texts[i : i + 25]) for i in range(0, len(texts), 25)]
    voc = st.stream_vocabulary(toks, 250)
    idf = st.smooth_idf(voc["df"], len(texts))
    as_dict = {t: i for i, t in enumerate(voc["terms"].tolist())}
    for index in (voc["terms"], as_dict):  # a sorted str array or a dict
        for nt in (1, 2):
            parts = [st.shard_rows(t, index, idf, nt) for t in toks]
            Y = sp.vstack([p[0] for p in parts], format="csr")
            C = sp.vstack([p[1] for p in parts], format="csr")
            assert np.array_equal(Y.indptr, X.indptr) and np.array_equal(Y.indices, X.indices)
            assert Y.data.dtype == np.float32 and np.array_equal(Y.data, X.data)
            assert np.array_equal(C.toarray(), counts.toarray())


def test_global_ids_search_is_the_dict_lookup():
    vocab = np.array(sorted(["ab", "abc", "b", "zz", "a_long_term"]), dtype=str)
    terms = np.array(["abc", "a", "zz", "zzz", "b", "a_long_term_longer", ""], dtype=str)
    got = _vocab._global_ids(terms, vocab)
    want = [{t: i for i, t in enumerate(vocab.tolist())}.get(t, -1) for t in terms.tolist()]
    assert got.tolist() == want and got.dtype == np.int64
    assert _vocab._global_ids(terms, vocab[:0]).tolist() == [-1] * len(terms)
