"""``jkofast tune``: the fold logic, the grid's corners, the point file, the command and its outputs."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from beir_helpers import write_beir

from jkofast.cli import main
from jkofast.eval.metrics import evaluate
from jkofast.eval.trec import read_run
from jkofast.jko.config import published_point
from jkofast.studies.tune import (
    FLOW_FIELDS,
    POINT_FORMAT,
    cross_validate,
    grid,
    kfold,
    load_point,
    save_point,
    tune_dataset,
)
from jkofast.studies.tuning import sample_configs

PUBLISHED_POINT = published_point()  # the SciFact point (#12), spelled in jkofast/jko/operating_points.json


# ---------------------------------------------------------------------------------------------
# folds
# ---------------------------------------------------------------------------------------------
def test_kfold_partitions_and_is_seeded():
    f = kfold(23, 5, seed=3)
    assert sorted(np.bincount(f).tolist()) == [4, 4, 5, 5, 5]
    assert np.array_equal(f, kfold(23, 5, seed=3))
    assert not np.array_equal(f, kfold(23, 5, seed=4))
    with pytest.raises(ValueError):
        kfold(3, 5)
    with pytest.raises(ValueError):
        kfold(10, 1)


def _naive_cv(S, folds):
    choices, oof = [], np.empty(S.shape[1])
    for f in range(folds.max() + 1):
        means = [np.mean([S[p, j] for j in range(S.shape[1]) if folds[j] != f]) for p in range(S.shape[0])]
        c = int(np.argmax(means))  # first of the highest
        choices.append(c)
        for j in range(S.shape[1]):
            if folds[j] == f:
                oof[j] = S[c, j]
    return choices, oof


@pytest.mark.parametrize("seed", range(5))
def test_cross_validate_matches_naive_oracle(seed):
    rng = np.random.default_rng(seed)
    S = rng.integers(0, 4, (7, 31)).astype(float)  # exact means: ties are frequent, the first best wins
    folds = kfold(31, 5, seed)
    choices, oof, chosen = cross_validate(S, folds)
    ch2, oof2 = _naive_cv(S, folds)
    assert choices == ch2
    assert np.array_equal(oof, oof2)
    assert np.array_equal(chosen, np.asarray(choices)[folds])


@pytest.mark.parametrize("seed", range(5))
def test_no_query_scored_by_a_point_chosen_with_it(seed):
    """Changing the scores of fold f's queries never changes fold f's choice."""
    rng = np.random.default_rng(seed)
    S = rng.random((9, 40))
    folds = kfold(40, 4, seed)
    choices, _, _ = cross_validate(S, folds)
    for f in range(4):
        T = S.copy()
        T[:, folds == f] = rng.random((9, int((folds == f).sum())))
        T[0, folds == f] = 10.0  # point 0 becomes by far the best on fold f only
        assert cross_validate(T, folds)[0][f] == choices[f]


def test_a_point_good_only_on_its_own_fold_is_not_chosen_for_it():
    S = np.full((3, 10), 0.5)
    folds = np.arange(10) % 2
    S[2, folds == 0] = 1.0  # the best point on fold 0, bad on fold 1
    S[2, folds == 1] = 0.0
    choices, oof, _ = cross_validate(S, folds)
    assert choices == [0, 2]  # fold 1 sees point 2's fold-0 scores; fold 0 does not
    assert np.allclose(oof[folds == 0], 0.5) and np.allclose(oof[folds == 1], 0.0)


def test_cross_validate_rejects_bad_input():
    with pytest.raises(ValueError):
        cross_validate(np.zeros((2, 3)), np.zeros(4, int))
    with pytest.raises(ValueError, match="NaN"):
        cross_validate(np.array([[np.nan, 1.0], [0.0, 0.0]]), np.array([0, 1]))
    with pytest.raises(ValueError, match="fold 1"):
        cross_validate(np.zeros((2, 3)), np.array([0, 0, 2]))


# ---------------------------------------------------------------------------------------------
# the grid
# ---------------------------------------------------------------------------------------------
def test_grid_corners_first_and_readouts_of_every_energy():
    g = grid("published")
    assert g[0] == {"kind": "dense"} and g[1] == {"kind": "bm25"}
    flows = [p for p in g if p["kind"] == "jko" and p["T"] > 0]
    reads = [p for p in g if p["kind"] == "jko" and p["T"] == 0]
    published = [c for c in sample_configs(25) if c["alpha"] or c["gamma"]]
    assert len(flows) == len(published)
    for p, c in zip(flows, published):
        assert all(p[k] == c[k] for k in FLOW_FIELDS) and (p["alpha"], p["gamma"]) == (c["alpha"], c["gamma"])
    assert {(p["alpha"], p["beta"], p["gamma"]) for p in flows} == {(p["alpha"], p["beta"], p["gamma"]) for p in reads}
    assert PUBLISHED_POINT in flows  # the SciFact point (#12) is a grid point
    assert g.index(reads[0]) < g.index(flows[0])  # read-outs (simpler) before the flows
    # the lexical-only and dense-only energies are read out too
    wide = grid("wide")
    assert {(1.0, 0.0, 0.0), (0.0, 0.0, 1.0)} <= {(p["alpha"], p["beta"], p["gamma"]) for p in wide if p.get("T") == 0}
    assert all(p in wide for p in g)
    assert {p.get("pool") for p in wide if p["kind"] == "jko"} == {200, 100}  # the pool size is searched too
    assert any(p.get("beta") for p in grid("wide", lexical_rerank=False))
    with pytest.raises(ValueError, match="grid"):
        grid("huge")


# ---------------------------------------------------------------------------------------------
# tune on a tiny corpus
# ---------------------------------------------------------------------------------------------
WORDS = "solar wind cat dog river rain panel turbine power mat sun fish tree".split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 40-document folder whose saved 'embeddings' make dense retrieval perfect on 12 queries."""
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("tune") / "beir"
    docs = [(f"d{i}", "", " ".join(rng.choice(WORDS, 6))) for i in range(40)]
    qs = [(f"q{i}", " ".join(rng.choice(WORDS, 2))) for i in range(12)]
    rel = rng.choice(40, 12, replace=False)
    write_beir(root, docs, qs, [(f"q{i}", f"d{rel[i]}", 1) for i in range(12)])
    D = rng.normal(size=(40, 16)).astype(np.float32)
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    Q = D[rel] + 0.01 * rng.normal(size=(12, 16)).astype(np.float32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    e = root / "embeddings" / "minilm-l6-v2"
    os.makedirs(e)
    np.save(e / "docs.npy", D)
    np.save(e / "queries.npy", Q.astype(np.float32))
    return str(root)


@pytest.fixture(scope="module")
def tuned(tiny):
    return tune_dataset(tiny, folds=3, progress=False, n_threads=1)


def test_tune_on_a_folder_without_train_split(tuned):
    r = tuned
    assert r["protocol"] == "3-fold" and r["n_eval_queries"] == 12
    pq = r["_per_query"]
    # dense is perfect here: every fold picks a point that is perfect too, so tune reaches its best input
    assert r["baselines"]["dense"]["ndcg10"] == pytest.approx(1.0)
    assert r["oof_ndcg10"] == pytest.approx(1.0)
    assert np.allclose(pq["tune_oof"], pq["dense"])
    assert set(r["baselines"]) == {"dense", "bm25", "hybrid_rrf", "readout", "published"}
    for b in r["baselines"].values():
        d, lo, hi = b["oof_minus"]
        assert lo <= d <= hi
    # the folds partition the queries; each fold's choice is a grid index
    qs = [q for f in r["folds"] for q in f["queries"]]
    assert sorted(qs) == sorted(r["oof_per_query"]) and len(qs) == 12
    assert all(0 <= f["index"] < len(r["grid"]) for f in r["folds"])
    assert r["grid"][0]["kind"] == "dense" and r["grid"][1]["kind"] == "bm25"
    assert r["oof_ndcg10"] == pytest.approx(np.mean(list(r["oof_per_query"].values())))


def test_oof_values_are_the_grid_scores_of_each_folds_choice(tiny):
    """With the per-query grid scores recomputed, each query's oof value is its fold's point's score."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.studies.readout import evaluate_topk
    from jkofast.studies.tune import prepare, run_point
    from jkofast.text.analyzer import Analyzer

    r = tune_dataset(tiny, folds=4, seed=5, progress=False, n_threads=1)
    ds = load_dataset(tiny)
    qids = ds.split_query_ids("test")
    emb = ds.embeddings()
    qrow = {q: i for i, q in enumerate(ds.query_ids)}
    an = Analyzer.from_dict(r["analyser"])
    data = prepare(ds, qids, ds.qrels("test"), (emb[0], emb[1][[qrow[q] for q in qids]]), an)
    for f in r["folds"]:
        p = {k: v for k, v in r["grid"][f["index"]].items() if k != "analyser"}
        nd = evaluate_topk(run_point(data, p)[0], qids, ds.qrels("test"), ds.doc_ids)["ndcg"]
        for q in f["queries"]:
            assert r["oof_per_query"][q] == pytest.approx(nd[qids.index(q)])


def test_point_file_round_trip(tuned, tmp_path):
    path = tmp_path / "point.json"
    save_point(tuned, path)
    d = json.loads(path.read_text())
    assert d["format"] == POINT_FORMAT
    for key in ("selected", "grid", "grid_ndcg10", "folds", "oof_ndcg10", "oof_per_query", "baselines", "analyser"):
        assert key in d
    assert not any(k.startswith("_") for k in d)
    pt = load_point(path)
    cfg, weights, analyser = pt
    sel = d["selected"]
    assert weights["kind"] == sel["kind"]
    if sel["kind"] == "jko":
        assert (weights["alpha"], weights["beta"], weights["gamma"]) == (sel["alpha"], sel["beta"], sel["gamma"])
        assert all(getattr(cfg, k) == sel[k] for k in FLOW_FIELDS)
    else:
        assert cfg.T == 0
    assert analyser.to_dict() == d["analyser"]


def test_load_point_rejects_bad_files(tmp_path):
    p = tmp_path / "p.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match="invalid JSON"):
        load_point(p)
    p.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a point file"):
        load_point(p)
    good = {"format": POINT_FORMAT, "analyser": {"token_pattern": "word"}, "selected": {**PUBLISHED_POINT}}
    p.write_text(json.dumps(good))
    assert load_point(p).config.T == 5
    p.write_text(json.dumps({**good, "selected": {**PUBLISHED_POINT, "alpha": -1}}))
    with pytest.raises(ValueError, match="invalid selected point"):
        load_point(p)
    p.write_text(json.dumps({**good, "selected": {"kind": "jko", "alpha": 1}}))
    with pytest.raises(ValueError, match="invalid selected point"):
        load_point(p)
    with pytest.raises(FileNotFoundError):
        load_point(tmp_path / "absent.json")


def test_tune_command_writes_point_runs_and_per_query(tiny, tmp_path, capsys):
    out, runs, pq = tmp_path / "p.json", tmp_path / "runs", tmp_path / "pq.tsv"
    rc = main(["tune", "--dataset", tiny, "--folds", "3", "--threads", "1", "--out", str(out), "--runs", str(runs),
               "--per-query", str(pq), "--json"])  # fmt: skip
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    assert set(s["baselines"]) == {"dense", "bm25", "hybrid_rrf", "readout", "published"}
    assert "oof_ndcg10" in s
    d = json.loads(out.read_text())
    # the out-of-fold run, evaluated by the metrics module, gives the reported out-of-fold nDCG@10
    run = read_run(runs / "tune_oof.run")
    from jkofast.datasets.beir import load_dataset

    qrels = load_dataset(tiny).qrels("test")
    res = evaluate(run, qrels, metrics=("ndcg@10",))
    assert np.mean(res["ndcg@10"]) == pytest.approx(d["oof_ndcg10"])
    for name in ("dense", "bm25", "hybrid_rrf", "readout", "published"):
        assert (runs / f"{name}.run").is_file()
    lines = pq.read_text().splitlines()
    assert lines[0] == "query_id\tmethod\tndcg@10"
    assert len(lines) == 1 + 12 * 6
    vals = {ln.split("\t")[0]: float(ln.split("\t")[2]) for ln in lines[1:] if ln.split("\t")[1] == "tune_oof"}
    assert vals == pytest.approx(d["oof_per_query"])


def test_tune_command_usage_errors(tiny, tmp_path, capsys):
    assert main(["tune", "--dataset", tiny, "--folds", "1"]) == 2
    assert main(["tune", "--dataset", tiny, "--folds", "13", "--quiet"]) == 2
    bare = write_beir(tmp_path / "bare", [("d1", "", "a b")], [("q1", "a")], [("q1", "d1", 1)])
    assert main(["tune", "--dataset", bare, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--folds must be >= 2" in err and "13 folds" in err and "jkofast embed" in err


def test_tune_with_a_train_split(tiny, tmp_path):
    import shutil

    root = tmp_path / "tt"
    shutil.copytree(tiny, root)
    lines = (root / "qrels" / "test.tsv").read_text().splitlines()
    (root / "qrels" / "train.tsv").write_text("\n".join([lines[0], *lines[1:7]]) + "\n")
    (root / "qrels" / "test.tsv").write_text("\n".join([lines[0], *lines[7:]]) + "\n")
    r = tune_dataset(str(root), split="train", progress=False, n_threads=1)
    assert r["protocol"] == "train-test"
    assert r["n_selection_queries"] == 6 and r["n_eval_queries"] == 6
    assert len(r["folds"]) == 1
    assert set(r["oof_per_query"]) == {ln.split("\t")[0] for ln in lines[7:]}
    assert r["grid_ndcg10"][r["selected_index"]] == max(r["grid_ndcg10"])


def test_encoder_note_for_other_languages():
    from jkofast.studies.tune import encoder_note

    assert encoder_note("english", "minilm-l6-v2") is None
    assert encoder_note("arabic", "my-multilingual-e5") is None
    note = encoder_note("arabic", "minilm-l6-v2")
    assert "English-only" in note and "arabic" in note and "lexical" in note


# ---------------------------------------------------------------------------------------------
# the point file drives run and rerank
# ---------------------------------------------------------------------------------------------
def test_run_with_point_runs_and_per_query(tiny, tuned, tmp_path, capsys):
    point, runs, pq = tmp_path / "p.json", tmp_path / "runs", tmp_path / "pq.tsv"
    save_point(tuned, point)
    rc = main(["run", "--dataset", tiny, "--point", str(point), "--methods", "hybrid_rrf,jko_tuned", "--no-sgr",
               "--threads", "1", "--runs", str(runs), "--per-query", str(pq), "--json"])  # fmt: skip
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    assert {"bm25", "dense", "hybrid_rrf", "jko_tuned", "point"} <= set(s["methods"])
    # the point row scores what tune selected on all queries: here dense is perfect and so is the point
    sel = tuned["selected_index"]
    assert s["methods"]["point"]["ndcg@10"] == pytest.approx(tuned["grid_ndcg10"][sel])
    from jkofast.datasets.beir import load_dataset

    qrels = load_dataset(tiny).qrels("test")
    got = {}
    for name in s["methods"]:
        got[name] = float(np.mean(evaluate(read_run(runs / f"{name}.run"), qrels, metrics=("ndcg@10",))["ndcg@10"]))
    assert got == pytest.approx({name: row["ndcg@10"] for name, row in s["methods"].items()})
    lines = pq.read_text().splitlines()
    assert lines[0] == "query_id\tmethod\tndcg@10\tndcg_exp@10\trecall@10\tdiv@10"
    assert len(lines) == 1 + 12 * len(s["methods"])
    # with embeddings every row carries its Diversity@10, the eval metric on its run file
    ds = load_dataset(tiny)
    emb = (ds.doc_ids, ds.embeddings()[0])
    for name, row in s["methods"].items():
        ev = evaluate(read_run(runs / f"{name}.run"), qrels, metrics=("diversity@10",), tie_break="given",
                      embeddings=emb)  # fmt: skip
        assert row["div@10"] == pytest.approx(float(np.mean(ev["diversity@10"])), abs=1e-9)


def test_run_table_shows_diversity_only_with_embeddings(tiny, tmp_path, capsys):
    from jkofast.studies.main_job import run_main_job

    res = run_main_job(tiny, methods=("dpp_map", "mmr"), include_sgr=False, progress=False, n_threads=1)
    assert "Div@10" in res.table() and 0 < res.summary()["methods"]["dpp_map"]["div@10"] <= 2
    bare = tmp_path / "bare"
    import shutil

    shutil.copytree(tiny, bare, ignore=shutil.ignore_patterns("embeddings"))
    res = run_main_job(str(bare), methods=("dpp_map",), include_sgr=False, progress=False, n_threads=1)
    assert "Div@10" not in res.table() and "div@10" not in res.summary()["methods"]["bm25"]


def test_run_with_a_lucene_corner_point(tiny, tuned, tmp_path, capsys):
    """A point file that selected the Lucene-style BM25 corner runs that ranking with its analyser."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.studies.readout import evaluate_topk
    from jkofast.studies.tune import lexical_top
    from jkofast.text.analyzer import Analyzer

    lucene = next(i for i, p in enumerate(tuned["grid"]) if p["kind"] == "bm25-lucene")
    r = {**tuned, "selected": {"kind": "bm25-lucene"}, "selected_index": lucene}
    point = tmp_path / "lucene.json"
    save_point(r, point)
    assert load_point(point).weights["kind"] == "bm25-lucene"
    rc = main(["run", "--dataset", tiny, "--point", str(point), "--methods", "hybrid_rrf", "--no-sgr",
               "--threads", "1", "--json"])  # fmt: skip
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    ds = load_dataset(tiny)
    qids = ds.split_query_ids("test")
    top = lexical_top(ds, qids, Analyzer.from_dict(tuned["analyser"]), "bm25-lucene", 1)
    want = evaluate_topk(top[0], qids, ds.qrels("test"), ds.doc_ids)["ndcg"].mean()
    assert s["methods"]["point"]["ndcg@10"] == pytest.approx(want)


def test_run_point_errors_before_work(tiny, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["run", "--dataset", tiny, "--point", str(bad), "--quiet"]) == 2
    assert "not a point file" in capsys.readouterr().err
    assert main(["run", "--dataset", tiny, "--point", str(tmp_path / "absent.json"), "--quiet"]) == 2


def test_rerank_with_point(tiny, tuned, tmp_path, capsys):
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset(tiny)
    point = tmp_path / "p.json"
    sel = {**PUBLISHED_POINT, "T": 2}
    save_point({**tuned, "selected": sel}, point)
    lines = []
    for q in ds.split_query_ids("test"):
        for r, d in enumerate(ds.doc_ids[:15]):
            lines.append(f"{q} Q0 {d} {r + 1} {15 - r} x")
    pools = tmp_path / "pools.run"
    pools.write_text("\n".join(lines) + "\n")
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(ds.doc_ids) + "\n")
    out = tmp_path / "out.run"
    rc = main(["rerank", "--pools", str(pools), "--embeddings", os.path.join(tiny, "embeddings", "minilm-l6-v2",
               "docs.npy"), "--ids", str(ids), "--point", str(point), "--out", str(out), "--threads", "1",
               "--json"])  # fmt: skip
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    assert s["config"] == str(point) and s["queries"] == 12
    assert len(read_run(out)) == 12
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main(["rerank", "--pools", str(pools), "--point", str(bad), "--out", str(out)]) == 2


def test_run_picks_the_analyser_of_the_corpus_language(tmp_path):
    pytest.importorskip("Stemmer")
    from jkofast.studies.main_job import run_main_job

    docs = [("d1", "", "المكتبات الوطنية كبيرة جدا"), ("d2", "", "يدرس الطلاب في الجامعة"), ("d3", "", "الطقس جميل")]
    root = write_beir(tmp_path / "ar", docs, [("q1", "مكتبة وطنية")], [("q1", "d1", 1)])
    res = run_main_job(root, progress=False, methods=("jko_sparse",), include_sgr=False)
    note = next(n for n in res.notes if n.startswith("corpus language"))
    assert "arabic" in note and "Snowball" in note
    assert any("English recipe" in n for n in res.notes)
    assert res.summary()["methods"]["bm25"]["ndcg@10"] == 1.0


def test_a_smaller_pool_reads_out_of_the_first_entries(tiny):
    from jkofast.datasets.beir import load_dataset
    from jkofast.studies.tune import prepare, run_point
    from jkofast.text.analyzer import Analyzer

    ds = load_dataset(tiny)
    qids = ds.split_query_ids("test")
    emb = ds.embeddings()
    qrow = {q: i for i, q in enumerate(ds.query_ids)}
    data = prepare(ds, qids, ds.qrels("test"), (emb[0], emb[1][[qrow[q] for q in qids]]), Analyzer())
    P = data.pools
    for point in ({**PUBLISHED_POINT, "pool": 5}, {**PUBLISHED_POINT, "T": 0, "pool": 5}):
        rows, vals = run_point(data, point, n_threads=1)
        for q in range(len(qids)):
            first = set(P.doc_idx[P.offsets[q] : P.offsets[q] + 5].tolist())
            got = [r for r in rows[q].tolist() if r >= 0]
            assert set(got) == first
            assert np.all(np.diff(vals[q][: len(got)]) <= 0)


def test_tune_on_a_foreign_corpus_warns_and_uses_its_analyser(tmp_path):
    """An Arabic corpus with English-encoder vectors: the Arabic stemmer, the warning, lexical beats dense."""
    pytest.importorskip("Stemmer")
    rng = np.random.default_rng(1)
    stems = ["مكتب", "طالب", "جامع", "مدين", "شمس", "كتاب", "نهر", "بحر", "جبل", "قمر"]
    docs = [(f"d{i}", "", " ".join("ال" + stems[j] + "ات" for j in rng.choice(10, 3, replace=False)))
            for i in range(30)]  # fmt: skip
    qs, qrels = [], []
    for i in range(10):
        words = docs[i][2].split()
        qs.append((f"q{i}", words[0][2:-2] + " " + words[1][2:-2]))  # the bare stems: only a stemmer matches them
        qrels.append((f"q{i}", f"d{i}", 1))
    root = write_beir(tmp_path / "ar", docs, qs, qrels)
    e = tmp_path / "ar" / "embeddings" / "minilm-l6-v2"
    os.makedirs(e)
    D = rng.normal(size=(30, 8)).astype(np.float32)
    Q = rng.normal(size=(10, 8)).astype(np.float32)
    np.save(e / "docs.npy", D / np.linalg.norm(D, axis=1, keepdims=True))
    np.save(e / "queries.npy", Q / np.linalg.norm(Q, axis=1, keepdims=True))
    r = tune_dataset(root, folds=2, progress=False, n_threads=1)
    assert r["language"]["language"] == "arabic"
    assert r["analyser"]["stemmer"] == "snowball-arabic" and r["analyser"]["stopwords"] is None
    assert any("English-only" in n for n in r["notes"])
    assert r["baselines"]["bm25"]["ndcg10"] > r["baselines"]["dense"]["ndcg10"]
    assert r["oof_ndcg10"] >= r["baselines"]["dense"]["ndcg10"]


def test_operating_point_reads_a_point_file(tmp_path):
    """``operating_point(path)`` gives the flow of a ``jkofast tune`` point file (the jko wing reads it itself)."""
    import json as _json

    from jkofast.jko.config import POINT_FORMAT, operating_point
    from jkofast.studies.tune import load_point

    doc = {
        "format": POINT_FORMAT,
        "grad": "unrolled",
        "selected": {"kind": "jko", "alpha": 0.4, "beta": 0.0, "gamma": 0.3, "pool": 100, "h": 1.5, "lam": 0.05,
                     "rho": 0.1, "sinkhorn_eps": 0.2, "T": 3, "inner_steps": 20, "tau0": 0.5},
        "analyser": {"token_pattern": r"(?u)\w+", "lowercase": True, "stopwords": None, "stemmer": None,
                     "compounds": False, "scripts": True},
    }  # fmt: skip
    p = tmp_path / "point.json"
    p.write_text(_json.dumps(doc))
    cfg = operating_point(str(p))
    assert (cfg.h, cfg.lam, cfg.rho, cfg.sinkhorn_eps, cfg.T, cfg.inner_steps, cfg.tau0) == (
        1.5,
        0.05,
        0.1,
        0.2,
        3,
        20,
        0.5,
    )
    assert cfg.grad == "unrolled" and cfg.mode == "wasserstein"
    assert operating_point(p, grad="implicit").grad == "implicit"
    assert load_point(p).config == cfg
    doc["selected"] = {"kind": "dense"}
    p.write_text(_json.dumps(doc))
    assert operating_point(str(p)).T == 0
    p.write_text("{not json")
    with pytest.raises(ValueError, match="not a point file"):
        operating_point(str(p))
    with pytest.raises(ValueError, match="unknown operating point 'nope'"):
        operating_point("nope")


# ---------------------------------------------------------------------------------------------
# the one-standard-error rule
# ---------------------------------------------------------------------------------------------
def _naive_one_se(S, levels):
    """The rule spelled out: best mean; each point's paired SE to it; the simplest level within; its best mean."""
    n = S.shape[1]
    means = [sum(row) / n for row in S.tolist()]
    best = max(range(len(means)), key=lambda i: (means[i], -i))
    se = []
    for row in S.tolist():
        d = [b - x for b, x in zip(S[best].tolist(), row, strict=True)]
        md = sum(d) / n
        se.append((sum((x - md) ** 2 for x in d) / (n - 1)) ** 0.5 / n**0.5)
    ok = [i for i in range(len(means)) if means[best] - means[i] <= se[i] + 1e-15]
    lv = min(levels[i] for i in ok)
    choice = max((i for i in ok if levels[i] == lv), key=lambda i: (means[i], -i))
    return choice, se[choice]


def test_one_se_rule_prefers_a_corner_within_one_standard_error():
    from jkofast.studies.tune import select_point

    # point 0 (a corner) is 0.01 below the best; the paired difference's SE is about 0.025
    S = np.array(
        [
            [0.60, 0.50, 0.60, 0.50],  # corner, mean 0.55
            [0.20, 0.20, 0.20, 0.20],  # corner, far below
            [0.65, 0.45, 0.65, 0.49],  # read-out, mean 0.56
            [0.66, 0.46, 0.66, 0.46],  # flow, mean 0.56
        ]
    )
    levels = [0, 0, 2, 4]
    c, info = select_point(S, levels, "1se")
    assert c == 0 and info["best"] in (2, 3)
    assert info["se"] == pytest.approx(_naive_one_se(S, levels)[1]) and info["se"] >= 0.01
    assert select_point(S, levels, "best")[0] == info["best"]
    # a corner further below than its paired SE is not kept: the simplest level within the band wins
    T = S.copy()
    T[0] -= 0.1
    assert select_point(T, levels, "1se")[0] == 2
    # the same gap with a corner that moves with the best point on every query: a tiny SE, not kept
    U = S.copy()
    U[0] = S[2] - 0.02
    assert select_point(U, levels, "1se")[0] == 2


@pytest.mark.parametrize("seed", range(6))
def test_one_se_rule_matches_naive_oracle(seed):
    from jkofast.studies.tune import select_point

    rng = np.random.default_rng(seed)
    S = rng.random((9, 15)) * 0.3 + rng.random((9, 1)) * 0.2
    levels = rng.integers(0, 5, 9).tolist()
    c, info = select_point(S, levels, "1se")
    assert c == _naive_one_se(S, levels)[0]
    assert info["chosen_mean"] >= info["best_mean"] - info["se"] - 1e-12


def test_one_se_rule_keeps_the_fold_discipline():
    """Under the 1-SE rule too, fold f's queries never change fold f's choice."""
    rng = np.random.default_rng(3)
    S = rng.random((8, 40))
    levels = [0, 0, 1, 2, 2, 3, 4, 4]
    folds = kfold(40, 4, 1)
    choices, oof, chosen = cross_validate(S, folds, levels, "1se")
    for f in range(4):
        T = S.copy()
        T[:, folds == f] = rng.random((8, int((folds == f).sum())))
        T[7, folds == f] = 10.0
        assert cross_validate(T, folds, levels, "1se")[0][f] == choices[f]
        assert np.array_equal(oof[folds == f], S[choices[f], folds == f])
    assert np.array_equal(chosen, np.asarray(choices)[folds])


def test_select_point_rejects_bad_input():
    from jkofast.studies.tune import select_point

    with pytest.raises(ValueError, match="rule"):
        select_point(np.zeros((2, 3)), rule="median")
    with pytest.raises(ValueError, match="levels"):
        select_point(np.zeros((2, 3)), [0], "1se")
    with pytest.raises(ValueError, match="NaN"):
        select_point(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        select_point(np.zeros((0, 3)))


def test_complexity_orders_corners_readouts_flows():
    from jkofast.studies.tune import complexity

    g = grid("published")
    lv = [complexity(p) for p in g]
    assert lv[:3] == [0, 0, 0] and [p["kind"] for p in g[:3]] == ["dense", "bm25", "bm25-lucene"]
    assert all(complexity(p) == 4 for p in g if p["kind"] == "jko" and p["T"] > 0)
    reads = [p for p in g if p["kind"] == "jko" and p["T"] == 0]
    assert all(complexity(p) == sum(p[k] != 0 for k in ("alpha", "beta", "gamma")) for p in reads)


def test_tune_reports_the_selection_cost(tuned):
    sel = tuned["selection"]
    assert sel["rule"] == "1se" and len(sel["folds"]) == 3
    corners = [i for i, p in enumerate(tuned["grid"]) if p["kind"] in ("dense", "bm25", "bm25-lucene")]
    assert sel["best_corner"]["index"] in corners
    pq = tuned["_per_query"]["tune_oof"]
    assert sel["oof_ndcg10"] == pytest.approx(float(np.mean(pq)))
    assert sel["cost"] == pytest.approx(sel["oof_ndcg10"] - sel["best_corner"]["ndcg10"])
    assert sel["other_rule"]["rule"] == "best"
    # the Lucene-style BM25 corner is in the grid; English adds the stop-word variants as corners
    kinds = {p["kind"] for p in tuned["grid"]}
    assert {"dense", "bm25", "bm25-lucene"} <= kinds
