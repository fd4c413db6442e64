"""``jkofast rerank``: streaming chunks, malformed lines, pass-through, atomic parts, resume = same bytes."""

import dataclasses
import sys
import types

import numpy as np
import pytest

from jkofast.cli import main


def _write_inputs(tmp_path, nq=7, m=5, n_docs=30, d=4, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n_docs, d)).astype(np.float32)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    np.save(tmp_path / "E.npy", Z)
    (tmp_path / "ids.txt").write_text("".join(f"d{i}\n" for i in range(n_docs)))
    lines = []
    for q in range(nq):
        docs = rng.choice(n_docs, m, replace=False)
        for r, doc in enumerate(docs):
            lines.append(f"q{q} Q0 d{doc} {r + 1} {10 - r + rng.random():.4f} bm25\n")
    lines.insert(3, "this line is malformed\n")
    lines.insert(9, "q1 Q0 d1 x notanumber bm25\n")
    (tmp_path / "run.trec").write_text("".join(lines))
    return tmp_path / "run.trec"


@dataclasses.dataclass
class _Cfg:
    tau0: float = 0.5


def _fake_core(monkeypatch):
    """A stand-in for jkofast.jko: p = p0 reweighted by exp(-E) (deterministic); query 2 fails."""

    @dataclasses.dataclass
    class Res:
        p: np.ndarray
        offsets: np.ndarray
        status: np.ndarray
        errors: dict

    def rerank_batch(energy, p0, offsets, *, embeddings=None, csr=None, config="tuned", return_duals=False,
                     n_threads=None):
        rows = embeddings if embeddings is not None else csr
        assert rows is not None and rows.shape[0] == len(energy)
        p = p0 * np.exp(-energy)
        status = np.zeros(len(offsets) - 1, np.int32)
        for q in range(len(offsets) - 1):
            p[offsets[q]:offsets[q + 1]] /= p[offsets[q]:offsets[q + 1]].sum()
        return Res(p, offsets, status, {})

    mod = types.ModuleType("jkofast.jko")
    mod.JKOConfig = _Cfg
    mod.operating_point = lambda name: _Cfg()
    mod.rerank_batch = rerank_batch
    monkeypatch.setitem(sys.modules, "jkofast.jko", mod)


def _read(p):
    return p.read_bytes()


def test_resume_is_byte_identical_and_reports(tmp_path, monkeypatch, capsys):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    base = ["rerank", "--pools", str(run), "--embeddings", str(tmp_path / "E.npy"), "--ids",
            str(tmp_path / "ids.txt"), "--chunk-size", "2", "--quiet", "--config", "fast"]
    assert main([*base, "--out", str(tmp_path / "a.trec"), "--dist", str(tmp_path / "a.npz")]) == 0
    err = capsys.readouterr().err
    assert "run.trec:4: malformed" in err and "run.trec:10: malformed" in err
    full = _read(tmp_path / "a.trec")
    # interrupted after 2 chunks, then resumed
    with pytest.raises(RuntimeError, match="injected"):
        main([*base, "--out", str(tmp_path / "b.trec"), "--dist", str(tmp_path / "b.npz"),
              "--fail-after-chunks", "2"])
    parts = sorted(p.name for p in (tmp_path / "b.trec.parts").iterdir())
    assert parts == ["chunk_000000.npz", "chunk_000000.trec", "chunk_000001.npz", "chunk_000001.trec",
                     "manifest.json"]
    assert main([*base, "--out", str(tmp_path / "b.trec"), "--dist", str(tmp_path / "b.npz"), "--json"]) == 0
    out = capsys.readouterr().out
    import json

    summ = json.loads(out)
    assert summ["skipped_finished"] == 4 and summ["reranked_now"] == 3 and summ["queries"] == 7
    assert _read(tmp_path / "b.trec") == full
    assert not (tmp_path / "b.trec.parts").exists()
    za, zb = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    for k in ("p", "offsets", "query_ids", "status"):
        np.testing.assert_array_equal(za[k], zb[k])
    assert za["offsets"][-1] == za["p"].size == 7 * 5  # the two malformed lines were extra lines


def test_output_order_and_passthrough(tmp_path, monkeypatch, capsys):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path, nq=3)
    # an unknown document makes q2 unrerankable -> passed through in input order
    with open(run, "a") as fh:
        fh.write("q9 Q0 d1 1 5.0 bm25\nq9 Q0 unknown 2 4.0 bm25\n")
    assert main(["rerank", "--pools", str(run), "--embeddings", str(tmp_path / "E.npy"), "--ids",
                 str(tmp_path / "ids.txt"), "--out", str(tmp_path / "o.trec"), "--quiet", "--k", "3"]) == 0
    err = capsys.readouterr().err
    assert "'q9' passed through" in err
    rows = [ln.split() for ln in (tmp_path / "o.trec").read_text().splitlines()]
    by_q = {}
    for r in rows:
        by_q.setdefault(r[0], []).append(r)
    assert [r[2] for r in by_q["q9"]] == ["d1", "unknown"] and by_q["q9"][0][4] == "5.0"
    for q in ("q0", "q1", "q2"):
        assert [int(r[3]) for r in by_q[q]] == [1, 2, 3]
        sc = [float(r[4]) for r in by_q[q]]
        assert sc == sorted(sc, reverse=True)
    # fake core = softmax(r/tau0) * exp(r) is monotone in the run score -> same order as the input
    in_rows = [ln.split() for ln in run.read_text().splitlines() if ln.startswith("q0 ")]
    assert [r[2] for r in by_q["q0"]] == [r[2] for r in in_rows[:3]]


def test_settings_change_refuses_resume(tmp_path, monkeypatch):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    base = ["rerank", "--pools", str(run), "--embeddings", str(tmp_path / "E.npy"), "--ids",
            str(tmp_path / "ids.txt"), "--out", str(tmp_path / "c.trec"), "--quiet"]
    with pytest.raises(RuntimeError):
        main([*base, "--chunk-size", "2", "--fail-after-chunks", "1"])
    assert main([*base, "--chunk-size", "3"]) == 2  # ValueError -> exit status 2


def test_missing_geometry_is_an_error(tmp_path, capsys):
    run = _write_inputs(tmp_path)
    assert main(["rerank", "--pools", str(run), "--out", str(tmp_path / "x.trec")]) == 2
    assert "geometry" in capsys.readouterr().err


def test_real_core_tiny(tmp_path):
    jko = pytest.importorskip("jkofast.jko")
    if not hasattr(jko, "rerank_batch"):
        pytest.skip("jkofast.jko.rerank_batch not available")
    run = _write_inputs(tmp_path, nq=3, m=6)
    assert main(["rerank", "--pools", str(run), "--embeddings", str(tmp_path / "E.npy"), "--ids",
                 str(tmp_path / "ids.txt"), "--out", str(tmp_path / "r.trec"), "--quiet", "--config", "fast",
                 "--chunk-size", "2"]) == 0
    rows = [ln.split() for ln in (tmp_path / "r.trec").read_text().splitlines()]
    assert len(rows) == 3 * 6  # the malformed lines are extra lines
    p = {}
    for r in rows:
        p.setdefault(r[0], []).append(float(r[4]))
    for v in p.values():
        assert abs(sum(v) - 1) < 1e-5 and v == sorted(v, reverse=True)


def test_tfidf_geometry(tmp_path, monkeypatch):
    _fake_core(monkeypatch)
    import json

    run = _write_inputs(tmp_path, nq=2, m=4)
    with open(tmp_path / "corpus.jsonl", "w") as fh:
        for i in range(30):
            fh.write(json.dumps({"_id": f"d{i}", "title": f"t{i}", "text": f"word{i % 5} common text {i}"}) + "\n")
    assert main(["rerank", "--pools", str(run), "--tfidf-corpus", str(tmp_path / "corpus.jsonl"),
                 "--out", str(tmp_path / "t.trec"), "--quiet"]) == 0
    assert len((tmp_path / "t.trec").read_text().splitlines()) == 8


def test_scores_streamed_equals_in_memory(tmp_path, monkeypatch, capsys):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path, nq=5)
    rng = np.random.default_rng(3)
    lines = ["query-id\tcorpus-id\tscore\n"]
    for ln in run.read_text().splitlines():
        parts = ln.split()
        if len(parts) == 6 and parts[0] != "q2":  # q2 has no scores at all
            lines.append(f"{parts[0]}\t{parts[2]}\t{rng.normal():.5f}\n")
    (tmp_path / "s.tsv").write_text("".join(lines))
    base = ["rerank", "--pools", str(run), "--embeddings", str(tmp_path / "E.npy"), "--ids",
            str(tmp_path / "ids.txt"), "--scores", str(tmp_path / "s.tsv"), "--chunk-size", "2", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "a.trec")]) == 0
    assert "1 queries had no rerank scores" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "b.trec"), "--scores-in-memory"]) == 0
    assert (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()
    no_scores = [a for a in base if a not in ("--scores", str(tmp_path / "s.tsv"))]
    assert main([*no_scores, "--out", str(tmp_path / "n.trec")]) == 0
    assert (tmp_path / "n.trec").read_bytes() != (tmp_path / "a.trec").read_bytes()  # scores were used
    # resume with streamed scores: skipped chunks still advance the stream
    with pytest.raises(RuntimeError):
        main([*base, "--out", str(tmp_path / "c.trec"), "--fail-after-chunks", "1"])
    assert main([*base, "--out", str(tmp_path / "c.trec")]) == 0
    assert (tmp_path / "c.trec").read_bytes() == (tmp_path / "a.trec").read_bytes()
