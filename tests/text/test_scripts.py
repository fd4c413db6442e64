"""Scripts other than Latin (issue 14): every retriever finds a document from a query made of its terms.

Small hand-written corpora in Arabic (harakat, tatweel, Arabic-Indic digits), Persian (zero-width
non-joiner), Cyrillic, Greek (capitals, tonos), Devanagari (vowel signs, nukta, zero-width joiner)
and CJK (full-width forms); the query spells the terms differently from the document where a
reader would still call them the same word.  Before the fix, SparseGeometricRAG's analysis
(``\\b\\w\\w+\\b``) split Devanagari words at every vowel sign and vowelled Arabic into single
letters, so such queries came back empty.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import reference as ref
from jkofast.pools.retrievers import METHODS, get_retriever
from jkofast.text import scripts
from jkofast.text.analyzer import Analyzer
from jkofast.text.patterns import SKLEARN, WORD
from jkofast.text.scripts import fold_script, script_tokenizer

ZWNJ, ZWJ, TATWEEL = "\u200c", "\u200d", "\u0640"

# (documents, [(query, index of the document it must return)])
CORPORA = {
    "arabic": (
        [
            "ذهب الولد إلى المدرسة صباحا",
            "كَتَبَ الطالبُ الدرسَ في الدفتر",  # vowelled (harakat)
            f"الكت{TATWEEL * 3}اب على الطاولة الكبيرة",  # stretched with tatweel
            "اشترى أبي سيارة جديدة عام ٢٠٢٣",  # Arabic-Indic digits
        ],
        [("كتب الطالب", 1), ("الكتاب الطاولة", 2), ("سيارة 2023", 3), ("المدرسة", 0), ("الدَّفْتَر", 1)],
    ),
    "persian": (
        [f"می{ZWNJ}خواهم کتاب بخوانم", "هوا امروز سرد است", f"دانش{ZWNJ}آموزان در کلاس هستند"],
        [("میخواهم", 0), (f"دانش{ZWNJ}آموزان کلاس", 2), ("دانشآموزان", 2), ("هوا سرد", 1)],
    ),
    "cyrillic": (
        ["Человек читает интересную книгу", "Погода сегодня холодная", "Студенты сдают экзамены"],
        [("КНИГУ читает", 0), ("погода", 1), ("экзамены студенты", 2)],
    ),
    "greek": (
        ["Ο άνθρωπος διαβάζει ένα βιβλίο", "Ο καιρός σήμερα είναι κρύος", "Οι φοιτητές δίνουν εξετάσεις"],
        [("ΒΙΒΛΊΟ", 0), ("καιρός σήμερα", 1), ("ΦΟΙΤΗΤΈΣ εξετάσεις", 2)],
    ),
    "devanagari": (
        ["मैं किताब पढ़ रहा हूँ", "आज मौसम ठंडा है", f"विद्यार्थी परीक्षा दे रहे हैं क्ष{ZWJ}त्रिय"],
        [("किताब", 0), ("पढ़", 0), ("मौसम ठंडा", 1), ("परीक्षा", 2), ("क्षत्रिय", 2)],
    ),
    "cjk": (
        ["東京 大学 研究", "北京、天气、很好", "ソフトウェア 開発 チーム", "서울 날씨 좋아요"],
        [("研究", 0), ("天气", 1), ("ｿﾌﾄｳｪｱ", 2), ("날씨", 3), ("東京　大学", 0)],  # half-/full-width forms
    ),
}


def _cases():
    for script, (docs, queries) in CORPORA.items():
        for method in METHODS:
            yield pytest.param(method, docs, queries, id=f"{method}-{script}")


@pytest.mark.parametrize("method, docs, queries", list(_cases()))
def test_query_of_indexed_terms_returns_its_document(method, docs, queries):
    params = {"pool_size": len(docs)} if method == "sgr" else {}
    r = get_retriever(method, **params).fit(docs)
    idx, sc = r.search([q for q, _ in queries], k=len(docs))
    for (q, want), row in zip(queries, idx.tolist(), strict=True):
        assert want in row, f"{method}: query {q!r} did not return document {want} ({docs[want]!r}); got {row}"
        assert row[0] == want, f"{method}: query {q!r} ranked document {want} at {row.index(want) + 1}"


def test_sgr_query_paths_agree_on_every_script():
    """The analysis kernel (batch) and the per-query regex path give the same rows."""
    import numpy as np

    from jkofast.sgr.retriever import SparseGeometricRetriever

    docs = [d for ds, _ in CORPORA.values() for d in ds]
    queries = [q for _, qs in CORPORA.values() for q, _ in qs] + ["plain ascii", "", "كَتَبَ"]
    r = SparseGeometricRetriever(pool_size=4).fit(docs)
    a = r.transform_queries(queries)
    b = r._transform_each(queries)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    n = np.diff(a[0])
    assert np.all(n[:-3] > 0) and n[-1] == 1  # no empty query; the vowelled 'كَتَبَ' finds 'كتب'
    assert n[-3] == n[-2] == 0  # unknown terms, empty text


def test_sgr_index_saved_and_loaded_folds_queries(tmp_path):
    from jkofast.sgr.retriever import SparseGeometricRetriever

    docs, queries = CORPORA["devanagari"]
    r = SparseGeometricRetriever(pool_size=3).fit(docs)
    r.save(tmp_path / "i")
    back = SparseGeometricRetriever.load(tmp_path / "i")
    assert back.search([q for q, _ in queries], k=3)[0].tolist() == r.search([q for q, _ in queries], k=3)[0].tolist()


def test_fold_script_examples():
    assert fold_script("كَتَبَ") == "كتب"
    assert fold_script(f"الكت{TATWEEL}اب") == "الكتاب"
    assert fold_script(f"می{ZWNJ}خواهم") == "میخواهم"
    assert fold_script("٢٠٢٣ and ۱۲ and १२") == "2023 and 12 and 12"
    assert fold_script("ｿﾌﾄｳｪｱ ＡＢＣ１") == "ソフトウェア ABC1"
    assert fold_script("ﻻ") == "لا"  # presentation form (lam-alef ligature)
    assert fold_script("e\u0301") == "é"  # NFC
    assert fold_script("µg 10² ﬁ") == "µg 10² ﬁ"  # no full NFKC: micro sign, superscripts, ligatures kept
    text = "Plain ASCII, unchanged: il-6 T_cell"
    assert fold_script(text) is text


@pytest.mark.parametrize("pattern", [SKLEARN, WORD])
def test_script_tokenizer_equals_the_plain_regex_on_text_without_marks(pattern):
    texts = ["The cat sat on the mat, 42 times!", "naïve café — µg/ml α-helix", "A_b c", "x"]
    plain = re.compile(pattern)
    tok = script_tokenizer(pattern)
    for t in texts:
        assert tok(t) == plain.findall(t.lower())
    assert script_tokenizer(pattern, scripts=False)("किताब") == plain.findall("किताब")
    assert tok("मैं किताब") == ["मैं", "किताब"]


def test_scifact_tokens_unchanged_by_the_folding():
    """Every SciFact document and query gives the same tokens as before: published numbers cannot move."""
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset("scifact")
    for pattern in (SKLEARN, WORD):
        plain, tok = re.compile(pattern).findall, script_tokenizer(pattern)
        bad = [t for t in ds.doc_texts(" ") + ds.query_texts if tok(t) != plain(t.lower())]
        assert bad == []


def test_analyzer_scripts_option_and_old_manifests():
    an = Analyzer("sklearn")
    assert an.scripts is True and an.tokenize("كَتَبَ الكتاب") == ["كتب", "الكتاب"]
    assert Analyzer("sklearn", scripts=False).tokenize("كَتَبَ الكتاب") == ["الكتاب"]
    d = an.to_dict()
    assert Analyzer.from_dict(d) == an
    d.pop("scripts")  # a manifest written before the option: its analysis, unchanged
    assert Analyzer.from_dict(d).scripts is False
    with pytest.raises(TypeError, match="scripts"):
        Analyzer(scripts="yes")


def test_unicode_tables_are_the_scan_of_every_code_point():
    table, body, flags = scripts._script_tables()
    want_table, marks, want_flags = ref.script_tables_scan(scripts._DELETED, scripts._NFKC_RANGES)
    assert table == want_table
    assert body == scripts._class_body(marks)
    np.testing.assert_array_equal(flags, want_flags)
    np.testing.assert_array_equal(scripts.script_word_table(), ref.script_word_table_regex(marks))
