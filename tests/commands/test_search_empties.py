"""``jkofast search`` and ``jkofast run`` name the queries a retriever could not answer.

The held-out-like case of issue 26: a small Arabic BEIR folder where some queries have known terms
but SparseGeometricRAG routes no document.  Each document holds 14 topic words (each in ~10 of 48
documents) and one distinct combination of 3 of 8 general words; a general word is never among a
document's top TF-IDF terms (lower idf, tf 1), so it has no branch and no routing row.  A query
made of 3 general words therefore routes nothing, and exactly one document holds all three: its
relevant document, which BM25 ranks first.
"""

import itertools
import json

import numpy as np
import pytest
from beir_helpers import write_beir

from jkofast.cli import main
from jkofast.studies.main_job import run_main_job

TOPIC = (
    "الطاقة الشمسية الرياح المياه الزراعة القمح النخيل التمر الصحراء البحر الأسماك الميناء السفن التجارة "
    "الأسواق الذهب الفضة النحاس الحديد المصانع السيارات القطارات الطائرات المطار السفر الفنادق السياحة "
    "الآثار المتاحف التاريخ الشعر الأدب الرواية المكتبة الكتب المدارس الجامعة الطلاب المعلم الرياضيات "
    "الفيزياء الكيمياء الأحياء الطب المستشفى الأطباء الدواء اللقاح الفيروس المرض القلب الدماغ الرئة الكلى "
    "العظام الجلد العيون الأسنان الغذاء الحليب الخبز الأرز اللحوم الخضروات"
).split()
GENERAL = "الناس الحياة العالم اليوم المدينة الدولة العمل الوقت".split()
N_DOCS = 48
N_ROUTELESS = 4  # queries of general words only


def arabic_beir(root) -> str:
    """Write the folder; queries q0..q3 are general-word combinations (no routed document), q4..q7 topic words."""
    rng = np.random.default_rng(26)
    combos = list(itertools.combinations(range(len(GENERAL)), 3))
    rng.shuffle(combos)
    docs = []
    for j in range(N_DOCS):
        words = [TOPIC[t] for t in rng.choice(len(TOPIC), 14, replace=False)] + [GENERAL[g] for g in combos[j]]
        rng.shuffle(words)
        docs.append((f"d{j}", "", " ".join(words)))
    queries, qrels = [], []
    for i in range(N_ROUTELESS):
        j = 3 * i + 1
        queries.append((f"q{i}", " ".join(GENERAL[g] for g in combos[j])))
        qrels.append((f"q{i}", f"d{j}", 1))
    for i in range(N_ROUTELESS, 2 * N_ROUTELESS):
        j = 5 * i
        topic = [w for w in docs[j][2].split() if w in TOPIC][:3]
        queries.append((f"q{i}", " ".join(topic)))
        qrels.append((f"q{i}", f"d{j}", 1))
    queries.append(("qx", "كلمات غير معروفة"))  # no known term
    qrels.append(("qx", "d0", 1))
    return write_beir(root, docs, queries, qrels)


def _run_lines(path) -> dict:
    by_q: dict = {}
    for ln in path.read_text().splitlines():
        q, _, d, _, _, _ = ln.split()
        by_q.setdefault(q, []).append(d)
    return by_q


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return arabic_beir(tmp_path_factory.mktemp("ar"))


def test_sgr_search_names_and_answers_routeless_queries(folder, tmp_path, capsys):
    out = tmp_path / "run.trec"
    assert main(["search", "--dataset", folder, "--method", "sgr", "--k", "10", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "note: 1 query with no known term (qx): 1 with no result" in text
    assert "4 queries with no routed document (q0, q1, q2, q3): 4 answered by the lexical fallback" in text
    runs = _run_lines(out)
    for i in range(N_ROUTELESS):  # the relevant document first, as BM25 ranks it
        assert runs[f"q{i}"][0] == f"d{3 * i + 1}"
    assert "qx" not in runs and all(f"q{i}" in runs for i in range(2 * N_ROUTELESS))
    # JSON: the counts and the named queries
    assert main(["search", "--dataset", folder, "--method", "sgr", "--out", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["unanswered"]
    assert info["no_routed_document_queries"] == ["q0", "q1", "q2", "q3"] and info["fallback"] == 4
    assert info["empty_queries"] == ["qx"] and info["no_known_term"] == 1


def test_sgr_search_published_behaviour(folder, tmp_path, capsys):
    out = tmp_path / "run.trec"
    argv = ["search", "--dataset", folder, "--method", "sgr", "--k", "10", "--out", str(out)]
    assert main([*argv, "--param", "empty_fallback=none"]) == 0
    text = capsys.readouterr().out
    assert "4 queries with no routed document (q0, q1, q2, q3): 4 with no result" in text
    runs_none = _run_lines(out)
    assert not {"q0", "q1", "q2", "q3", "qx"} & set(runs_none)
    # every other query's lines are byte-identical to the default run's
    none_text = out.read_text()
    assert main(argv) == 0
    capsys.readouterr()
    lex = [ln for ln in out.read_text().splitlines() if ln.split()[0] not in {"q0", "q1", "q2", "q3"}]
    assert lex == none_text.splitlines()


def test_sgr_search_from_saved_index(folder, tmp_path, capsys):
    ix = tmp_path / "ix"
    assert main(["index", "--dataset", folder, "--method", "sgr", "--out", str(ix)]) == 0
    out = tmp_path / "run.trec"
    assert main(["search", "--dataset", folder, "--method", "sgr", "--index", str(ix), "--out", str(out)]) == 0
    assert "4 answered by the lexical fallback" in capsys.readouterr().out


@pytest.mark.parametrize("method", ["bm25", "tfidf"])
def test_sparse_search_names_no_known_term(folder, tmp_path, capsys, method):
    out = tmp_path / "run.trec"
    assert main(["search", "--dataset", folder, "--method", method, "--k", "5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "note: 1 query with no known term (qx): 1 filled with score-0 documents in corpus order" in text
    assert "no routed document" not in text


def test_main_job_notes_name_unanswered_queries(folder):
    res = run_main_job(folder, progress=False, methods=("sgr",))
    notes = [n for n in res.notes if n.startswith(("sgr:", "bm25:"))]
    assert any(n.startswith("sgr: ") and "no routed document (q0, q1, q2, q3)" in n for n in notes)
    assert any(n.startswith("bm25: 1 query with no known term (qx)") for n in notes)


def test_main_job_status_note_names_empty_pools():
    from jkofast.jko.solver import rerank_batch
    from jkofast.studies.main_job import _report_status

    rng = np.random.default_rng(0)
    off = np.array([0, 4, 4, 9])  # query "b" has an empty pool
    res = rerank_batch(rng.normal(size=9), None, off, embeddings=rng.normal(size=(9, 3)), warn_unconverged=False)
    assert res.status[1] != 0 and res.errors[1] == "empty pool"
    notes = []
    _report_status(res, "jko", notes, ["a", "b", "c"])
    assert notes[0].startswith("jko: 1 pools reported a non-zero solver status") and "b: empty pool" in notes[0]


def test_sgr_search_waits_for_the_compile_ahead_child_only_when_it_builds(folder, tmp_path, capsys, monkeypatch):
    # a built SGR index: a child compiles the search kernels meanwhile and the search waits for them (a
    # failed child is said, and the search compiles them itself); a loaded index or BM25: no child
    import jkofast.commands.search as search_cmd

    events = []

    class FailedChild:
        def wait_for(self, entry):
            events.append(f"wait_for {entry}")
            return False

        def error(self):
            return "boom"

        def close(self):
            events.append("close")

    monkeypatch.setattr(search_cmd, "_search_ahead", lambda: events.append("start") or FailedChild())
    out = tmp_path / "run.trec"
    assert main(["search", "--dataset", folder, "--method", "sgr", "--out", str(out)]) == 0
    assert events == ["start", "wait_for sgr.search", "close"]
    assert "the compile-ahead process failed (boom); compiling here instead" in capsys.readouterr().err
    assert set(_run_lines(out)) == {f"q{i}" for i in range(2 * N_ROUTELESS)}  # every answerable query answered
    events.clear()
    assert main(["search", "--dataset", folder, "--method", "bm25", "--out", str(out)]) == 0
    ix = tmp_path / "ix"
    assert main(["index", "--dataset", folder, "--method", "sgr", "--out", str(ix)]) == 0
    assert main(["search", "--dataset", folder, "--method", "sgr", "--index", str(ix), "--out", str(out)]) == 0
    assert events == []
