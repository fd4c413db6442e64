import gzip
import os
import shutil
import warnings

import numpy as np
import pytest

from jkofast.datasets.beir import DataWarning, load_dataset, read_corpus, read_qrels_beir, read_queries


@pytest.fixture
def tiny(data_dir):
    return os.path.join(data_dir, "beir_tiny")


@pytest.fixture
def tiny_copy(tiny, tmp_path):
    dst = tmp_path / "tiny"
    shutil.copytree(tiny, dst)
    return dst


def test_tiny_folder(tiny):
    ds = load_dataset(tiny)
    assert ds.doc_ids == ["d1", "d2", "d3", "d4", "d5"]
    assert ds.titles[3] == "" and ds.texts[3] == "Fish swim."  # missing title -> ""
    assert ds.query_ids == ["10", "2", "3", "4"]
    q = ds.qrels("test")
    assert q["10"] == {"d1": 1, "d5": 0}  # label-0 kept
    assert q["2"] == {"d2": 2, "d3": 1}
    # qid 99 is not in queries.jsonl; numeric sort for decimal ids
    assert ds.split_query_ids("test") == ["2", "3", "10"]
    # (title + sep + text).strip(): an empty title leaves the separator, stripped of spaces
    assert ds.doc_texts(". ")[2] == ". Birds fly over the dog and the cat."
    assert ds.doc_texts(" ")[2] == "Birds fly over the dog and the cat."
    assert ds.doc_texts(". ")[0] == "Cats. The cat sat on the mat."
    assert ds.embeddings() is None
    assert ds.splits() == ["test"]
    with pytest.raises(ValueError, match="split 'dev' not found"):
        ds.qrels("dev")


def test_gzip_and_missing(tiny_copy):
    src = tiny_copy / "corpus.jsonl"
    with open(src, "rb") as f, gzip.open(str(src) + ".gz", "wb") as g:
        g.write(f.read())
    os.remove(src)
    assert load_dataset(str(tiny_copy)).n_docs == 5
    os.remove(str(src) + ".gz")
    with pytest.raises(FileNotFoundError, match=r"corpus\.jsonl"):
        load_dataset(str(tiny_copy))
    with pytest.raises(FileNotFoundError):
        load_dataset(str(tiny_copy / "nope"))


@pytest.mark.parametrize(
    "fname,line,content,match",
    [
        ("corpus.jsonl", 3, '{"_id": "d3", "text": oops}\n', r"corpus.jsonl:3: invalid JSON"),
        ("corpus.jsonl", 2, '{"title": "x", "text": "y"}\n', r"corpus.jsonl:2: missing '_id'"),
        ("corpus.jsonl", 2, '{"_id": "d1", "text": "dup"}\n', r"corpus.jsonl:2: duplicate document id"),
        ("corpus.jsonl", 1, '["not", "an", "object"]\n', r"corpus.jsonl:1: expected a JSON object"),
        ("queries.jsonl", 2, '{"_id": "2", "text": \n', r"queries.jsonl:2: invalid JSON"),
        ("queries.jsonl", 4, '{"text": "no id"}\n', r"queries.jsonl:4: missing '_id'"),
        ("qrels/test.tsv", 3, "10\td5\n", r"test.tsv:3: expected 3 tab-separated fields, got 2"),
        ("qrels/test.tsv", 2, "10\td1\t1\textra\n", r"test.tsv:2: expected 3 tab-separated fields, got 4"),
        ("qrels/test.tsv", 4, "2\tnope\t1\n", r"test.tsv:4: unknown document id 'nope'"),
        ("qrels/test.tsv", 5, "3\td4\thigh\n", r"test.tsv:5: label 'high' is not an integer"),
        # QA round 2: ids that are not non-empty strings, repeated / empty judgements
        ("corpus.jsonl", 2, '{"_id": null, "text": "x"}\n', r"corpus.jsonl:2: _id must be a string, got NoneType"),
        ("corpus.jsonl", 2, '{"_id": [1, 2], "text": "x"}\n', r"corpus.jsonl:2: _id must be a string, got list"),
        ("corpus.jsonl", 2, '{"_id": 1.5, "text": "x"}\n', r"corpus.jsonl:2: _id must be a string, got float"),
        ("corpus.jsonl", 2, '{"_id": "", "text": "x"}\n', r"corpus.jsonl:2: _id '' must be non-empty"),
        ("corpus.jsonl", 2, '{"_id": "d 2", "text": "x"}\n', r"corpus.jsonl:2: _id 'd 2' must be non-empty without"),
        ("queries.jsonl", 2, '{"_id": "q 2", "text": "x"}\n', r"queries.jsonl:2: _id 'q 2'"),
        ("qrels/test.tsv", 3, "10\td1\t2\n", r"test.tsv:3: duplicate judgement for query '10' and document 'd1'"),
        ("qrels/test.tsv", 3, "\td1\t2\n", r"test.tsv:3: empty query id"),
        # valid JSON that is not valid Unicode text: a lone surrogate escape (the encoder failed later with a
        # message naming neither the file, the line nor the document)
        (
            "corpus.jsonl",
            2,
            '{"_id": "d2", "text": "ok \\ud800 x"}\n',
            r"corpus.jsonl:2: field 'text' of id 'd2' holds a lone surrogate",
        ),
        (
            "corpus.jsonl",
            2,
            '{"_id": "d2", "title": "\\udfff"}\n',
            r"corpus.jsonl:2: field 'title' of id 'd2' holds a lone",
        ),
        ("corpus.jsonl", 2, '{"_id": "d\\ud800", "text": "x"}\n', r"corpus.jsonl:2: _id holds a lone surrogate"),
        (
            "queries.jsonl",
            2,
            '{"_id": "2", "text": "why \\udbff"}\n',
            r"queries.jsonl:2: field 'text' of id '2' holds a lone",
        ),
    ],
)
def test_malformed_names_file_and_line(tiny_copy, fname, line, content, match):
    p = tiny_copy / fname
    lines = p.read_text().splitlines(keepends=True)
    lines[line - 1] = content
    p.write_text("".join(lines))
    with pytest.raises(ValueError, match=match):
        ds = load_dataset(str(tiny_copy), strict=True)  # strict: an unknown document id is an error
        ds.qrels("test")


def test_read_qrels_without_known_docs(tiny):
    q = read_qrels_beir(os.path.join(tiny, "qrels", "test.tsv"))
    assert q["99"] == {"d1": 1}
    ids, titles, texts = read_corpus(os.path.join(tiny, "corpus.jsonl"))
    assert len(ids) == len(titles) == len(texts) == 5


def test_bundled_scifact():
    ds = load_dataset("scifact")
    assert ds.n_docs == 5183 and len(set(ds.doc_ids)) == 5183
    assert len(ds.query_ids) == 1109
    test_q, train_q = ds.split_query_ids("test"), ds.split_query_ids("train")
    assert len(test_q) == 300 and len(train_q) == 809 and not set(test_q) & set(train_q)
    assert test_q == sorted(test_q, key=int)
    assert sum(len(v) for v in ds.qrels("test").values()) == 339
    assert sum(len(v) for v in ds.qrels("train").values()) == 919
    doc, qry = ds.embeddings()
    assert doc.shape == (5183, 384) and qry.shape == (1109, 384)
    assert doc.dtype == np.float32 and qry.dtype == np.float32
    # stored L2-normalised in float16
    np.testing.assert_allclose(np.linalg.norm(doc[:50], axis=1), 1.0, atol=2e-3)


def test_embeddings_id_mismatch(tmp_path, tiny):
    dst = tmp_path / "t"
    shutil.copytree(tiny, dst)
    e = dst / "embeddings" / "m"
    e.mkdir(parents=True)
    np.save(e / "docs.npy", np.zeros((5, 4), np.float16))
    np.save(e / "queries.npy", np.zeros((4, 4), np.float16))
    (e / "docs_ids.txt").write_text("d1\nd2\nd3\nd5\nd4\n")
    with pytest.raises(ValueError, match=r"docs_ids\.txt"):  # the embeddings check (its wording is its owner's)
        load_dataset(str(dst)).embeddings("m")
    (e / "docs_ids.txt").write_text("d1\nd2\nd3\nd4\nd5\n")
    d, q = load_dataset(str(dst)).embeddings("m")
    assert d.shape == (5, 4) and q.dtype == np.float32


def test_load_dataset_type_error():
    with pytest.raises(TypeError, match="name_or_path"):
        load_dataset(3)


# ------------------------------------------------------------ QA round 2: malformed files


def test_integer_ids_still_read(tiny_copy):
    p = tiny_copy / "corpus.jsonl"
    p.write_text(p.read_text().replace('"_id": "d5"', '"_id": 5'))
    assert load_dataset(str(tiny_copy)).doc_ids[-1] == "5"


def test_empty_files_and_bad_utf8(tiny_copy):
    for name, match in (("corpus.jsonl", "no document"), ("queries.jsonl", "no query")):
        p = tiny_copy / name
        keep = p.read_bytes()
        p.write_text("\n")
        with pytest.raises(ValueError, match=match):
            load_dataset(str(tiny_copy))
        p.write_bytes(keep)
    p = tiny_copy / "corpus.jsonl"
    p.write_bytes(p.read_bytes() + b'{"_id": "d9", "text": "\xff\xfe"}\n')
    # was a bare UnicodeDecodeError, then a line 'at or after' the bad byte: lines are decoded one by one
    with pytest.raises(ValueError, match=r"corpus\.jsonl:6: invalid UTF-8"):
        load_dataset(str(tiny_copy))


def test_qrels_without_header_keeps_first_judgement(tiny_copy):
    p = tiny_copy / "qrels" / "test.tsv"
    with_header = read_qrels_beir(str(p))
    p.write_text("".join(p.read_text().splitlines(keepends=True)[1:]))
    assert read_qrels_beir(str(p)) == with_header  # the first line was dropped as a 'header'


def test_embeddings_nan_shape_and_dimension(tmp_path, tiny):
    dst = tmp_path / "t"
    shutil.copytree(tiny, dst)
    e = dst / "embeddings" / "m"
    e.mkdir(parents=True)
    d = np.ones((5, 4), np.float32)
    d[3, 1] = np.nan
    np.save(e / "docs.npy", d)
    np.save(e / "queries.npy", np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"docs\.npy: row 3 holds NaN"):
        load_dataset(str(dst)).embeddings("m")
    np.save(e / "docs.npy", np.ones((5, 3), np.float32))
    with pytest.raises(ValueError, match=r"docs\.npy has dimension 3, queries\.npy 4"):
        load_dataset(str(dst)).embeddings("m")
    np.save(e / "docs.npy", np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"docs\.npy: expected a 2-D"):
        load_dataset(str(dst)).embeddings("m")


def test_corrupted_gzip_names_the_file(tiny_copy):
    src = tiny_copy / "corpus.jsonl"
    data = src.read_bytes()
    os.remove(src)
    gz = tiny_copy / "corpus.jsonl.gz"
    gz.write_bytes(b"garbage, not gzip")
    with pytest.raises(ValueError, match=r"corpus\.jsonl\.gz: corrupted gzip data"):  # bare BadGzipFile
        load_dataset(str(tiny_copy))
    gz.write_bytes(gzip.compress(data)[:-12])  # truncated stream: EOFError
    with pytest.raises(ValueError, match=r"corpus\.jsonl\.gz"):
        load_dataset(str(tiny_copy))


# ------------------------------------------------------------ issue 14: robust data


def _edit(path, keep, extra=""):
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[i] for i in keep) + extra)


def test_unknown_documents_dropped_with_one_warning(tiny_copy):
    p = tiny_copy / "qrels" / "test.tsv"
    # two judgements on absent documents; query 3's only judgement is one of them
    p.write_text(p.read_text().replace("3\td4\t1", "3\tgone\t1") + "2\talso-gone\t1\n")
    ds = load_dataset(str(tiny_copy))
    with pytest.warns(DataWarning) as rec:
        q = ds.qrels("test")
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert "test.tsv: dropped 2 judgement(s) on 2 document id(s)" in msg and "line 6" in msg
    assert "1 judged query(ies) lost every judgement and leave the evaluation ('3')" in msg
    assert q["2"] == {"d2": 2, "d3": 1} and "3" not in q
    assert ds.split_query_ids("test") == ["2", "10"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.qrels("test")  # cached: warned once
    with pytest.raises(ValueError, match=r"test\.tsv:6: unknown document id 'gone'"):
        load_dataset(str(tiny_copy), strict=True).qrels("test")
    with pytest.raises(ValueError, match=r"test\.tsv:6: unknown document id"):
        read_qrels_beir(str(p), known_docs={"d1", "d2", "d3", "d5"}, strict=True)


def test_queries_without_text_dropped_with_one_warning(tiny_copy):
    p = tiny_copy / "queries.jsonl"
    p.write_text(p.read_text() + '{"_id": "5"}\n{"_id": "6", "text": "  "}\n{"_id": "7", "text": null}\n')
    with pytest.warns(DataWarning, match=r"queries\.jsonl: dropped 3 query record\(s\) without text \(first: line 5"):
        ds = load_dataset(str(tiny_copy))
    assert ds.query_ids == ["10", "2", "3", "4"]
    with pytest.raises(ValueError, match=r"queries\.jsonl:5: query '5' has no text"):
        load_dataset(str(tiny_copy), strict=True)
    with pytest.raises(ValueError, match=r"queries\.jsonl:5: query '5' has no text"):
        read_queries(str(p), strict=True)
    with pytest.raises(TypeError, match="strict"):
        load_dataset(str(tiny_copy), strict="yes")


def test_clean_folder_warns_nothing(tiny):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_dataset(tiny)
        ds.qrels("test")  # query 99 is absent from queries.jsonl, its document d1 exists: no warning


def test_corpus_bad_utf8_and_json_name_file_and_line(tiny_copy):
    p = tiny_copy / "corpus.jsonl"
    good = p.read_bytes()
    lines = good.splitlines(keepends=True)
    p.write_bytes(b"".join(lines[:2]) + b'{"_id": "dx", "text": "na\xefve"}\n' + b"".join(lines[2:]))
    with pytest.raises(ValueError, match=r"corpus\.jsonl:3: invalid UTF-8"):
        load_dataset(str(tiny_copy))
    p.write_bytes(b"".join(lines[:3]) + b"{not json\n" + b"".join(lines[3:]))
    with pytest.raises(ValueError, match=r"corpus\.jsonl:4: invalid JSON"):
        load_dataset(str(tiny_copy))
    gz = tiny_copy / "corpus.jsonl.gz"
    gz.write_bytes(gzip.compress(b"".join(lines[:4]) + b"\xff\n"))
    p.unlink()
    with pytest.raises(ValueError, match=r"corpus\.jsonl\.gz:5: invalid UTF-8"):
        load_dataset(str(tiny_copy))


def test_judged_queries_without_text_are_counted_per_kind(tmp_path):
    """The qrels warning counted dropped judgements but hid that judged queries with and without text left."""
    from beir_helpers import write_beir

    docs = [("d1", "", "a b"), ("d2", "", "c d")]
    queries = [("q1", "a"), ("q2", "c"), ("q3", ""), ("q4", "zz")]
    qrels = [("q1", "d1", 1), ("q2", "dX", 1), ("q2", "dY", 1), ("q4", "d9", 1), ("q3", "d1", 1)]
    d = write_beir(tmp_path / "b", docs, queries, qrels)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ds = load_dataset(d)
        assert ds.split_query_ids("test") == ["q1"]
        ds.split_query_ids("test")  # warned once per split
    msgs = [str(w.message) for w in rec if issubclass(w.category, DataWarning)]
    assert len(msgs) == 3
    assert "queries.jsonl: dropped 1 query record(s) without text" in msgs[0]
    assert "dropped 3 judgement(s) on 3 document id(s) not in the corpus" in msgs[1]
    assert "2 judged query(ies) lost every judgement and leave the evaluation ('q2', 'q4')" in msgs[1]
    assert "test.tsv: 1 judged query(ies) have no query text and are not evaluated ('q3')" in msgs[2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = load_dataset(d)
        ds.qrels("test")  # the judgements on unknown documents dropped (not strict) ...
    ds.strict = True  # ... then the textless judged query is an error under strict
    with pytest.raises(ValueError, match=r"1 judged query\(ies\) have no query text"):
        ds.split_query_ids("test")
