"""The streaming library behind ``jkofast rerank`` and the eval wing's run-file IO, called directly."""

import dataclasses
import gzip
import os

import numpy as np
import pytest
from rerank_helpers import fake_core as _fake_core
from rerank_helpers import write_inputs as _write_inputs

from jkofast.cli import main


def _opts(tmp_path, run, **kw):
    from jkofast.jko.stream import RerankOptions

    return RerankOptions(
        pools=str(run),
        out=str(tmp_path / "lib.trec"),
        embeddings=str(tmp_path / "E.npy"),
        ids=str(tmp_path / "ids.txt"),
        chunk_size=2,
        config="fast",
        **kw,
    )


def test_rerank_stream_equals_the_command_and_reports_through_callbacks(tmp_path, monkeypatch):
    from jkofast.jko.stream import rerank_stream

    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    opts = _opts(tmp_path, run, dist=str(tmp_path / "lib.npz"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.k = 3  # options are a frozen value, never a namespace
    said, ticks = [], []
    summ = rerank_stream(opts, report=said.append, progress=ticks.append)
    argv = ["rerank", "--pools", str(run), "--embeddings", str(tmp_path / "E.npy"), "--ids", str(tmp_path / "ids.txt")]
    argv += ["--chunk-size", "2", "--config", "fast", "--quiet", "--out", str(tmp_path / "cli.trec")]
    assert main(argv) == 0
    assert (tmp_path / "lib.trec").read_bytes() == (tmp_path / "cli.trec").read_bytes()
    assert (summ.queries, summ.reranked_now, summ.chunks, summ.malformed_lines) == (7, 7, 4, 2)
    assert ticks[0] == 0 and sum(ticks) == 7  # 0 = the streaming starts
    assert any(m.startswith(f"{run}:4: malformed line skipped") for m in said)
    assert not any(m.startswith("jkofast rerank:") for m in said)  # the prefix is the command's
    assert not (tmp_path / "lib.trec.parts").exists()
    z = np.load(tmp_path / "lib.npz")
    assert z["p"].shape[0] == int(z["offsets"][-1]) == 35


@pytest.mark.parametrize("fmt", ["%.9g", "%.6f", "%r"])
def test_format_run_matches_fstring_oracle(fmt):
    from jkofast.eval.runio import format_run

    rng = np.random.default_rng(0)
    lens = np.array([3, 0, 1, 4])
    off = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    qids = ["q0", "q1", "q%2", "q3"]
    docs = [f"d{j}" for j in range(off[-1])]
    scores = [float(x) for x in rng.choice([1 / 3, 0.0, -0.0, 1e20, np.nan, -np.inf, 2.5], off[-1])]
    verbatim = np.array([False, False, True, False])
    sc = list(scores)
    sc[off[2] : off[3]] = ["7.25"]
    spec = {"%.9g": ".9g", "%.6f": ".6f", "%r": "r"}[fmt]
    want = []
    for i, q in enumerate(qids):
        for r, j in enumerate(range(off[i], off[i + 1])):
            s = sc[j] if verbatim[i] else (repr(sc[j]) if spec == "r" else format(sc[j], spec))
            want.append(f"{q} Q0 {docs[j]} {r + 1} {s} t%g\n")
    assert format_run(qids, off, docs, sc, "t%g", score_format=fmt, verbatim=verbatim) == "".join(want)
    assert format_run([], np.zeros(1, np.int64), [], [], "t") == ""


def test_topk_to_ragged_cuts_each_row_at_its_padding():
    from jkofast.eval.runio import topk_to_ragged

    idx = np.array([[2, 0, -1], [1, 2, 0], [-1, -1, -1]])
    sc = np.array([[0.5, 0.25, -np.inf], [3.0, 2.0, 1.0], [-np.inf] * 3], np.float32)
    off, docs, scores = topk_to_ragged(idx, sc, ["a", "b", "c"])
    assert off.tolist() == [0, 2, 5, 5] and docs == ["c", "a", "b", "c", "a"]
    assert scores == [0.5, 0.25, 3.0, 2.0, 1.0]


def test_atomic_open_replaces_only_on_success(tmp_path):
    from jkofast.eval.runio import atomic_open

    p = tmp_path / "x.txt"
    with atomic_open(p) as fh:
        fh.write(b"one\n")
    with pytest.raises(RuntimeError), atomic_open(p) as fh:
        fh.write(b"two\n")
        raise RuntimeError("interrupted")
    assert p.read_bytes() == b"one\n" and os.listdir(tmp_path) == ["x.txt"]


def test_read_score_file_is_the_eval_reader(tmp_path):
    from jkofast.eval.runio import read_scores
    from jkofast.jko.energy import read_score_file

    text = "query-id corpus-id score\nq1\td1\t0.5\nq2 Q0 d2 1 2.5 run\nq1\td3\t-1\n"
    (tmp_path / "s.tsv").write_text(text)
    (tmp_path / "s.tsv.gz").write_bytes(gzip.compress(text.encode()))
    want = {"q1": {"d1": 0.5, "d3": -1.0}, "q2": {"d2": 2.5}}
    assert read_score_file(str(tmp_path / "s.tsv")) == read_scores(str(tmp_path / "s.tsv.gz")) == want
