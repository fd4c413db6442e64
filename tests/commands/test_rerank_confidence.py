"""``jkofast rerank --confidence FILE`` (Dual-Rank signals per query) and ``--projection W.npz`` (NM-JKO)."""

import numpy as np
import pytest
from rerank_helpers import interrupted_after

from jkofast.cli import main
from jkofast.eval.trec import read_run


def _inputs(tmp_path, nq=5, m=6, n_docs=40, d=6, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n_docs, d)).astype(np.float32)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    np.save(tmp_path / "E.npy", Z)
    (tmp_path / "ids.txt").write_text("".join(f"d{i}\n" for i in range(n_docs)))
    lines, pools = [], []
    for q in range(nq):
        docs = rng.choice(n_docs, m, replace=False)
        scores = np.sort(rng.random(m) * 10)[::-1]
        pools.append((f"q{q}", [f"d{i}" for i in docs], scores))
        lines += [f"q{q} Q0 d{doc} {r + 1} {s:.4f} bm25\n" for r, (doc, s) in enumerate(zip(docs, scores, strict=True))]
    lines.insert(7, "q1 Q0 nosuchdoc 3 1.0 bm25\n")  # q1 cannot be reranked: passed through, nan confidence
    (tmp_path / "run.trec").write_text("".join(lines))
    return tmp_path / "run.trec", Z, pools


def _argv(tmp_path, run, out, *extra):
    geo = ["--embeddings", str(tmp_path / "E.npy"), "--ids", str(tmp_path / "ids.txt")]
    return ["rerank", "--pools", str(run), *geo, "--out", str(out), "--quiet", "--config", "fast", *extra]


def _read_conf(path):
    text = path.read_text().splitlines()
    assert text[0] == "# query_id\tconf_dual\tconf_softmax\tconf_margin"
    return {ln.split("\t")[0]: [float(x) for x in ln.split("\t")[1:]] for ln in text[1:]}


def test_confidence_file_matches_the_library_and_the_run(tmp_path):
    from jkofast.jko.confidence import dual_confidence
    from jkofast.jko.config import batch_config
    from jkofast.jko.energy import blend, softmax_tau
    from jkofast.jko.solver import rerank_batch

    run, Z, pools = _inputs(tmp_path)
    conf_path = tmp_path / "conf.tsv"
    argv = _argv(tmp_path, run, tmp_path / "r.trec", "--confidence", str(conf_path), "--chunk-size", "2")
    assert main(argv) == 0
    conf = _read_conf(conf_path)
    assert list(conf) == [f"q{i}" for i in range(5)]  # input order, one line per query
    assert all(np.isnan(v) for v in conf["q1"])
    # the library on the rerankable queries, as the job builds them
    ok = [p for p in pools if p[0] != "q1"]
    row = {f"d{i}": i for i in range(Z.shape[0])}
    off = np.cumsum([0] + [len(p[1]) for p in ok])
    s = np.concatenate([p[2] for p in ok]).astype(np.float64)
    s = np.array([float(f"{x:.4f}") for x in s])
    cfg = batch_config("fast")  # the config the job runs (a named point: the implicit path)
    r = blend(off, dense=s, alpha=1.0)
    res = rerank_batch(
        -r,
        softmax_tau(r, off, cfg.tau0),
        off,
        embeddings=Z[[row[d] for p in ok for d in p[1]]],
        config=cfg,
        return_duals=True,
    )
    sig = dual_confidence(res, s)
    for j, (q, _, _) in enumerate(ok):
        np.testing.assert_allclose(conf[q], [sig.conf_dual[j], sig.conf_softmax[j], sig.conf_margin[j]], rtol=1e-12)
    ranked = read_run(tmp_path / "r.trec")["q0"]
    top = sorted(ranked.values(), reverse=True)
    assert conf["q0"][2] == pytest.approx(top[0] - top[1], abs=1e-6)  # margin = p(1) - p(2) of the output


def test_confidence_resume_is_byte_identical(tmp_path):
    run, _, _ = _inputs(tmp_path, nq=6)
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    assert main(_argv(tmp_path, run, tmp_path / "a.trec", "--confidence", str(a), "--chunk-size", "2")) == 0
    with pytest.raises(RuntimeError, match="injected failure"), interrupted_after(1):
        main(_argv(tmp_path, run, tmp_path / "b.trec", "--confidence", str(b), "--chunk-size", "2"))
    assert main(_argv(tmp_path, run, tmp_path / "b.trec", "--confidence", str(b), "--chunk-size", "2")) == 0
    assert a.read_bytes() == b.read_bytes()
    assert (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--confidence", "CONF", "--mode", "kl"], "--confidence needs a transport term"),
        (["--confidence", "FOLDER"], "is a folder"),
        (["--projection", "MISSING"], "--projection file not found"),
    ],
)
def test_bad_confidence_and_projection_exit_2(tmp_path, capsys, extra, match):
    run, _, _ = _inputs(tmp_path)
    (tmp_path / "folder").mkdir()
    sub = {"CONF": str(tmp_path / "c.tsv"), "FOLDER": str(tmp_path / "folder"), "MISSING": str(tmp_path / "no.npz")}
    assert main(_argv(tmp_path, run, tmp_path / "r.trec", *[sub.get(x, x) for x in extra])) == 2
    err = capsys.readouterr().err
    assert "jkofast rerank: error:" in err and match in err
    assert not (tmp_path / "r.trec").exists()


def test_projection_needs_dense_rows(tmp_path, capsys):
    run, _, _ = _inputs(tmp_path)
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d0", "title": "", "text": "x"}\n')
    (tmp_path / "W.npz").write_bytes(b"")
    argv = [
        "rerank",
        "--pools",
        str(run),
        "--tfidf-corpus",
        str(tmp_path / "corpus.jsonl"),
        "--projection",
        str(tmp_path / "W.npz"),
        "--out",
        str(tmp_path / "r.trec"),
    ]
    assert main(argv) == 2
    assert "--projection needs --embeddings" in capsys.readouterr().err


def test_projection_uses_the_learned_cost(tmp_path):
    from jkofast.jko.metric import save_metric

    run, Z, _ = _inputs(tmp_path)
    W = np.random.default_rng(3).normal(size=(3, Z.shape[1]))
    save_metric(W, tmp_path / "W.npz")
    assert main(_argv(tmp_path, run, tmp_path / "plain.trec")) == 0
    assert main(_argv(tmp_path, run, tmp_path / "proj.trec", "--projection", str(tmp_path / "W.npz"))) == 0
    plain, proj = read_run(tmp_path / "plain.trec"), read_run(tmp_path / "proj.trec")
    assert plain.keys() == proj.keys()
    assert any(abs(plain[q][d] - proj[q][d]) > 1e-7 for q in plain for d in plain[q] if q != "q1")
    save_metric(np.eye(Z.shape[1]), tmp_path / "I.npz")  # identity projection: the cosine geometry
    assert main(_argv(tmp_path, run, tmp_path / "ident.trec", "--projection", str(tmp_path / "I.npz"))) == 0
    ident = read_run(tmp_path / "ident.trec")
    for q in plain:
        for d in plain[q]:
            assert ident[q][d] == pytest.approx(plain[q][d], abs=1e-7)
