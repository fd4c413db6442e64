"""``jkofast study stability``: the paraphrase-stability protocol on a few bundled SciFact queries."""

import json

import numpy as np
import pytest

import jkofast.studies.stability as st
from jkofast.studies._perturb import PERTURBATIONS
from jkofast.studies.common import StudyOptions, pool_inputs, run_study
from jkofast.studies.published import published


@pytest.fixture
def three_queries(monkeypatch):
    monkeypatch.setattr(st, "QUICK_QUERIES", 3)


def _fake_encoder(monkeypatch):
    """A deterministic stand-in query encoder (unit rows from the text's hash): the study's wiring only."""

    def enc(texts, nt):
        out = np.empty((len(texts), 384), np.float32)
        for i, t in enumerate(texts):
            v = np.random.default_rng(sum(map(ord, t))).normal(size=384)
            out[i] = v / np.linalg.norm(v)
        return out

    monkeypatch.setattr(st, "_query_encoder", lambda log: (enc, None))


def test_sample_is_the_seed0_choice_in_draw_order():
    ids = [str(i) for i in range(1, 101)]
    pick = np.random.default_rng(0).choice(ids, size=60, replace=False)
    assert st.sample_queries(ids) == [str(x) for x in pick]
    assert st.sample_queries(ids[:5], 60) == [ids[int(i)] for i in np.random.default_rng(0).choice(5, 5, False)]
    with pytest.raises(ValueError, match="query sample is empty"):
        st.sample_queries([])


def test_stability_rows_and_decomposition(three_queries, monkeypatch, tmp_path):
    _fake_encoder(monkeypatch)
    res = run_study("stability", StudyOptions(quick=True, progress=False, out=str(tmp_path), n_threads=2))
    assert [r["method"] for r in res.rows] == list(st.METHODS)
    for r in res.rows:
        # the headline is the mean of the per-perturbation means; debiased = W_C - floor exactly, per cell
        per = r["per_perturbation"]
        have = [k for k in PERTURBATIONS if per[k]["wc"]["n"]]
        assert r["wc_mean"] == pytest.approx(np.mean([per[k]["wc"]["mean"] for k in have]), rel=1e-12)
        assert r["wc_debiased_mean"] == pytest.approx(r["wc_mean"] - r["self_floor_mean"], abs=1e-12)
        assert r["self_floor_mean"] > 0  # W_C(p, p) > 0
        assert r["published"]["wc_mean"] == published("stability")["wc_mean"]["scifact"][r["method"]]
        for k in have:
            c = per[k]["wc"]
            assert c["q25"] <= c["median"] <= c["q75"] and c["n"] == res.extra["n_per_perturbation"][k]
    # hedge never leaves a query unchanged
    assert res.extra["n_per_perturbation"]["hedge"] == 3
    assert res.extra["pools"] == "hybrid"
    doc = json.loads((tmp_path / "stability.json").read_text())
    assert doc["rows"][0]["wc_mean"] == res.rows[0]["wc_mean"]
    assert any("BM25" in n for n in res.notes)


def test_bm25_only_fallback_without_an_encoder(three_queries, monkeypatch):
    monkeypatch.setattr(st, "_query_encoder", lambda log: (None, "no encoder in this test"))
    res = run_study("stability", StudyOptions(quick=True, progress=False))
    assert "dense_topk" not in [r["method"] for r in res.rows]
    assert res.extra["pools"] == "bm25-only"
    assert any("no query encoder (no encoder in this test): BM25-only pools" in n for n in res.notes)


def test_original_pools_are_the_cached_hybrid_pools(monkeypatch):
    _fake_encoder(monkeypatch)
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset("scifact")
    doc_emb, q_all = ds.embeddings()
    qids = st.sample_queries(ds.split_query_ids("test"))[:2]
    row = {q: i for i, q in enumerate(ds.query_ids)}
    opts = StudyOptions(progress=False)
    pp = st._build_pools(ds, doc_emb, q_all[[row[q] for q in qids]], qids, opts, lambda m: None)
    ref = pool_inputs("scifact", "test", query_ids=qids)
    n0 = int(ref.offsets[-1])
    np.testing.assert_array_equal(pp.pools.offsets[: len(qids) + 1], ref.offsets)
    np.testing.assert_array_equal(pp.pools.doc_idx[:n0], ref.pools.doc_idx)
    np.testing.assert_array_equal(pp.rerank[:n0], ref.rerank)
    assert [c[0] for c in pp.cases if c[1] == "hedge"] == qids


def test_dataset_without_embeddings(tmp_path):
    d = tmp_path / "tiny"
    (d / "qrels").mkdir(parents=True)
    (d / "corpus.jsonl").write_text('{"_id": "d1", "title": "t", "text": "x"}\n')
    (d / "queries.jsonl").write_text('{"_id": "1", "text": "q"}\n')
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n")
    with pytest.raises(ValueError, match="no saved MiniLM embeddings") as err:
        st.study(StudyOptions(dataset=str(d), progress=False))
    assert "jkofast embed --dataset" in str(err.value) and "jkofast encode" not in str(err.value)


def test_extension_methods_bw_and_nm(monkeypatch, tmp_path):
    """``bw:ALPHA`` and ``nm:W.npz`` beside the current methods: BW-JKO at alpha 0 is the KL flow bit for bit,
    NM-JKO with W = I is the Wasserstein flow; every method gets W_C biased / floor / debiased."""
    from jkofast.jko.metric import save_metric

    monkeypatch.setattr(st, "QUICK_QUERIES", 2)
    _fake_encoder(monkeypatch)
    W = save_metric(np.eye(384), tmp_path / "W.npz")
    methods = ("jko_rerank", "kl_rerank", "bw:0", "bw:0.50", "bw:1", f"nm:{W}")
    res = run_study("stability", StudyOptions(quick=True, progress=False, n_threads=2, methods=methods))
    rows = {r["method"]: r for r in res.rows}
    assert list(rows) == ["jko_rerank", "kl_rerank", "bw:0", "bw:0.5", "bw:1", f"nm:{W}"]
    for r in res.rows:
        assert r["wc_debiased_mean"] == pytest.approx(r["wc_mean"] - r["self_floor_mean"], abs=1e-12)
        assert r["self_floor_mean"] > 0
    for key in ("wc_mean", "self_floor_mean", "wc_debiased_mean", "ndcg10"):
        assert rows["bw:0"][key] == rows["kl_rerank"][key]  # alpha 0: the KL flow, bit for bit
        assert rows["bw:1"][key] == rows["jko_rerank"][key]  # alpha 1: the Wasserstein flow
        assert rows[f"nm:{W}"][key] == pytest.approx(rows["jko_rerank"][key], rel=1e-5)  # W = I: the cosine cost
    assert "published" not in rows["bw:0.5"]
    assert res.extra["methods"] == list(rows)
    # the bw-stability row set: kl (alpha 0) ... jko (alpha 1), in its own block of the table
    assert [r["method"] for r in st.bw_rows(res.rows)] == ["bw:0", "kl_rerank", "bw:0.5", "bw:1", "jko_rerank"]
    assert "BW-JKO under paraphrase" in res.table()


def test_parse_methods_and_bad_methods(tmp_path, capsys):
    from jkofast.cli import main

    assert st.parse_methods(None) == st.METHODS
    assert st.parse_methods(["bw:0.250", "noprox", "bw:1e-1"]) == ("bw:0.25", "noprox", "bw:0.1")
    with pytest.raises(TypeError, match="not a str"):
        st.parse_methods("jko_rerank")
    with pytest.raises(TypeError, match="must be a str"):
        st.parse_methods([0.5])
    for bad, msg in (
        (["bw:1.5"], "ALPHA must be in"),
        (["bw:x"], "expected bw:ALPHA"),
        (["bw:nan"], "ALPHA must be in"),
        (["jko"], "unknown stability method"),
        (["bw:0.5", "bw:.5"], "given twice"),
        ([], "at least one method"),
        (["nm:"], "needs a metric file"),
    ):
        with pytest.raises(ValueError, match=msg):
            st.parse_methods(bad)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable"):
        st.parse_methods([f"nm:{tmp_path / 'bad.npz'}"])
    # on the command line: exit 2 before any work, naming the problem
    for argv, msg in (
        (["study", "stability", "--methods", "bw:2"], "ALPHA must be in"),
        (["study", "stability", "--methods", f"nm:{tmp_path / 'none.npz'}"], "not found"),
        (["study", "dual-rank", "--methods", "jko_rerank"], "stability study only"),
    ):
        assert main([*argv, "--quiet"]) == 2
        assert msg in capsys.readouterr().err


def test_report_runs_the_bw_row_set():
    import dataclasses

    from jkofast.studies import _report as report

    opts = StudyOptions(quick=True, progress=False)
    got = report._with_bw(opts).methods
    assert got[: len(st.METHODS)] == st.METHODS and got[len(st.METHODS) :] == tuple(f"bw:{a:g}" for a in st.BW_ALPHAS)
    mine = dataclasses.replace(opts, methods=("jko_rerank",))
    assert report._with_bw(mine) is mine  # the user's methods are kept
    rows = [
        {"method": m, "wc_mean": w, "self_floor_mean": 0.1, "wc_debiased_mean": w - 0.1, "ndcg10": 0.6}
        for m, w in (("jko_rerank", 0.2), ("kl_rerank", 0.4), ("bw:0.5", 0.3), ("noprox", 0.9))
    ]
    assert [r["method"] for r in st.bw_rows(rows)] == ["kl_rerank", "bw:0.5", "jko_rerank"]
    block = st.bw_block(rows).splitlines()
    assert block[3].split()[:3] == ["kl_rerank", "0.00", "0.4000"] and block[-1].split()[1] == "1.00"
    assert st.bw_rows(rows[:2]) == []  # no bw: row, no row set


def test_protocols_base_and_extension():
    """--config fast is the published extension protocol: 50 queries, its seven methods, its table beside ours."""
    base = st.protocol(StudyOptions(), "scifact")
    assert (base["config"], base["n"], base["methods"], base["cfg"].inner_steps) == ("base", 60, st.METHODS, 40)
    assert base["cfg"].tau0 == 0.1
    assert base["published"] == {m: published("stability")["wc_mean"]["scifact"][m] for m in st.METHODS}
    assert st.protocol(StudyOptions(), "nfcorpus")["cfg"].inner_steps == 25  # inner 40 was SciFact's run only
    ext = st.protocol(StudyOptions(config="fast"), "fiqa")
    assert (ext["n"], ext["methods"], ext["cfg"].T, ext["cfg"].inner_steps, ext["cfg"].tau0) == (
        50,
        st.EXTENSION_METHODS,
        2,
        15,
        1.0,
    )
    table = published("stability")["extension_wc_mean"]["fiqa"]
    names = ["kl_rerank", "bw_jko_a25", "bw_jko_a50", "bw_jko_a75", "jko_rerank", "nm_jko", "nm_bw_a50"]
    assert list(ext["published"]) == list(st.EXTENSION_METHODS)
    assert list(ext["published"].values()) == [table[n] for n in names]
    assert ext["published_n"] == published("stability")["extension_n_per_perturbation"]["fiqa"]
    assert st.protocol(StudyOptions(config="fast", n_queries=7), "fiqa")["n"] == 7
    # no published extension table for SCIDOCS, none at all at the contrib point
    assert st.protocol(StudyOptions(config="fast"), "scidocs")["published"] == {}
    assert st.protocol(StudyOptions(config="contrib"), "scifact")["published"] == {}
    with pytest.raises(ValueError, match="n_queries"):
        st.protocol(StudyOptions(n_queries=0), "scifact")


def test_extension_protocol_run_and_alpha_figure(monkeypatch, tmp_path):
    """The fast protocol end to end on 2 queries: nm-bw with W = I is BW-JKO at the same alpha, the trained
    metric ('train') is used by both nm methods, the published extension values sit beside ours."""
    from jkofast.jko.metric import LearnedMetric, save_metric
    from jkofast.studies import nm_jko

    monkeypatch.setattr(st, "QUICK_QUERIES", 2)
    _fake_encoder(monkeypatch)
    W = save_metric(np.eye(384), tmp_path / "W.npz")
    calls = []

    def fake_train(opts, n_tuning, epochs, log=None):  # the identity metric, without the 5-epoch training
        calls.append((n_tuning, epochs))
        m = LearnedMetric(W=np.eye(384), loss_history=np.array([1.0]), n_train=3, epochs=epochs, seed=0)
        return m, type("Sel", (), {"n_train": 3})(), {}

    monkeypatch.setattr(nm_jko, "train_split_metric", fake_train)
    methods = ("kl_rerank", "bw:0.5", "jko_rerank", f"nm-bw:0.5:{W}", "nm:train", "nm-bw:0.5:train")
    opts = StudyOptions(quick=True, progress=False, n_threads=2, methods=methods, config="fast")
    res = run_study("stability", opts)
    assert calls == [(nm_jko.QUICK_TUNING, nm_jko.QUICK_EPOCHS)]  # trained once for both nm methods
    rows = {r["method"]: r for r in res.rows}
    for key in ("wc_mean", "self_floor_mean", "ndcg10"):
        assert rows[f"nm-bw:0.5:{W}"][key] == pytest.approx(rows["bw:0.5"][key], rel=1e-5)
        assert rows["nm-bw:0.5:train"][key] == pytest.approx(rows["bw:0.5"][key], rel=1e-5)
        assert rows["nm:train"][key] == pytest.approx(rows["jko_rerank"][key], rel=1e-5)
    ext = published("stability")["extension_wc_mean"]["scifact"]
    assert rows["bw:0.5"]["published"]["wc_mean"] == ext["bw_jko_a50"]
    assert rows["nm-bw:0.5:train"]["published"]["wc_mean"] == ext["nm_bw_a50"]
    assert rows["nm:train"]["published"]["wc_mean"] == ext["nm_jko"]
    assert res.extra["protocol"] == "extension" and res.extra["config"]["tau0"] == 1.0
    assert res.extra["published_n_per_perturbation"] == dict(zip(PERTURBATIONS, [46, 50, 50], strict=True))
    assert "first 2 queries of the 50-query sample" in " ".join(res.notes)
    # the table prints the published extension value beside ours
    block = res.table().split("W_C: mean over the three perturbation means", 1)[1]
    line = next(x for x in block.splitlines() if x.startswith("bw:0.5 "))
    assert line.split()[1] == f"{ext['bw_jko_a50']:.4f}"
    pytest.importorskip("matplotlib")  # the figure needs the plot extra
    assert st.plot(res, str(tmp_path)) == ["stability_wc.png", "stability_alpha.png"]
    assert (tmp_path / "stability_alpha.png").stat().st_size > 0
    no_bw = dataclasses_replace_rows(res, [rows["jko_rerank"]])
    assert st.plot_alpha(no_bw, str(tmp_path)) == []


def dataclasses_replace_rows(res, rows):
    import dataclasses

    return dataclasses.replace(res, rows=rows)


def test_nm_bw_method_names_and_cli_options(tmp_path, capsys):
    from jkofast.cli import main
    from jkofast.jko.metric import save_metric

    W = save_metric(np.eye(8), tmp_path / "W.npz")
    assert st.parse_methods([f"nm-bw:0.50:{W}", "nm:train"]) == (f"nm-bw:0.5:{W}", "nm:train")
    assert st.parse_methods(None, "fast") == st.EXTENSION_METHODS and st.parse_methods(None, "base") == st.METHODS
    for bad, msg in (
        (["nm-bw:0.5"], "expected nm-bw:ALPHA:W.npz"),
        (["nm-bw:2:train"], "ALPHA must be in"),
        (["nm-bw:x:train"], "expected nm-bw:ALPHA:W.npz with ALPHA a number"),
        (["nm-bw:0.5:"], "needs a metric file"),
    ):
        with pytest.raises(ValueError, match=msg):
            st.parse_methods(bad)
    for argv, msg in (
        (["study", "stability", "--config", "slow"], "--config 'slow': choose from"),
        (["study", "stability", "--n", "0"], "--n must be at least 1"),
        (["study", "theory", "--config", "fast"], "--config applies to the stability study only"),
        (["study", "theory", "--n", "5"], "--n applies to the stability study only"),
    ):
        assert main([*argv, "--quiet"]) == 2
        assert msg in capsys.readouterr().err
