"""``jkofast rerank --multires mr|sam``: MR-JKO / SAM-JKO through the streaming job, its resume and its checks."""

import os
from itertools import pairwise

import numpy as np
import pytest

from jkofast.cli import main


def _write(tmp_path, sizes=(30, 12, 45, 8, 25), n_docs=200, d=8, seed=1, nan_doc=None, unknown_in=None):
    """A pool file of pools of the given sizes (E.npy / ids.txt beside it); return its path."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n_docs, d)).astype(np.float32)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    if nan_doc is not None:
        Z[nan_doc] = np.nan
    np.save(tmp_path / "E.npy", Z)
    (tmp_path / "ids.txt").write_text("".join(f"d{i}\n" for i in range(n_docs)))
    lines = []
    for q, m in enumerate(sizes):
        docs = rng.choice(n_docs, m, replace=False)
        if nan_doc is not None and q == 1:
            docs[0] = nan_doc
        for r, doc in enumerate(docs):
            lines.append(f"q{q} Q0 d{doc} {r + 1} {20 - r * 0.3 + rng.random():.4f} bm25\n")
        if unknown_in == q:
            lines.append(f"q{q} Q0 nowhere {m + 1} 0.5 bm25\n")
    run = tmp_path / "run.trec"
    run.write_text("".join(lines))
    return str(run)


def _argv(tmp_path, run, out, *extra):
    return [
        "rerank",
        "--pools",
        run,
        "--embeddings",
        str(tmp_path / "E.npy"),
        "--ids",
        str(tmp_path / "ids.txt"),
        "--quiet",
        "--out",
        str(tmp_path / out),
        *extra,
    ]


def _pools(run):
    """Query id -> (doc ids, run scores) in file order."""
    out: dict = {}
    for ln in open(run):
        q, _, d, _, s, _ = ln.split()
        out.setdefault(q, ([], []))
        out[q][0].append(d)
        out[q][1].append(float(s))
    return out


@pytest.mark.parametrize("variant", ["mr", "sam"])
def test_stream_matches_multires_rerank_per_pool(tmp_path, variant):
    """Each pool's p is the library call's on that pool alone: rel = minmax(run score), rows of E.npy."""
    from jkofast.jko.multires import coarse_config, fine_config, multires_rerank

    run = _write(tmp_path)
    beta = ("--beta", "1.5") if variant == "sam" else ()  # --beta applies to SAM-JKO only
    extra = ("--multires", variant, "--clusters", "5", "--refine", "2", *beta, "--chunk-size", "2")
    assert main(_argv(tmp_path, run, "o.trec", *extra, "--dist", str(tmp_path / "o.npz"))) == 0
    Z = np.load(tmp_path / "E.npy")
    z = np.load(tmp_path / "o.npz")
    off = z["offsets"]
    for i, (q, (docs, scores)) in enumerate(_pools(run).items()):
        assert z["query_ids"][i] == q
        s = np.asarray(scores)
        rel = (s - s.min()) / (s.max() - s.min())
        ref = multires_rerank(
            rel,
            None,
            Z[[int(d[1:]) for d in docs]],
            G=5,
            G_keep=2,
            clustering="sam" if variant == "sam" else "kmeans",
            sam_beta=1.5,
            coarse=coarse_config(grad="implicit"),
            fine=fine_config(reported=True, grad="implicit"),
            n_threads=1,
            warn_unconverged=False,
        )
        assert ref.status[0] == 0
        np.testing.assert_allclose(z["p"][off[i] : off[i + 1]], ref.p.astype(np.float32), rtol=0, atol=0)
        assert np.count_nonzero(z["p"][off[i] : off[i + 1]] == 0) == len(docs) - ref.pool_size[0]
    # the output ranks each pool by p, ties in input order
    lines = open(tmp_path / "o.trec").read().splitlines()
    assert len(lines) == int(off[-1])
    first = lines[0].split()
    assert first[0] == "q0" and first[3] == "1" and first[5] == "jkofast"


def test_bytes_identical_across_threads_chunks_and_row_batches(tmp_path, monkeypatch):
    from jkofast.jko import _chunks as chunks

    run = _write(tmp_path, sizes=(30, 12, 45, 8, 25, 60, 3, 1))
    base = ("--multires", "sam", "--clusters", "6", "--refine", "2")
    assert main(_argv(tmp_path, run, "a.trec", *base, "--threads", "1", "--chunk-size", "3")) == 0
    assert main(_argv(tmp_path, run, "b.trec", *base, "--threads", "2", "--chunk-size", "100")) == 0
    monkeypatch.setattr(chunks, "MULTIRES_ROWS", 40)  # runs of whole pools of <= 40 rows; a larger pool alone
    assert main(_argv(tmp_path, run, "c.trec", *base, "--threads", "2", "--chunk-size", "5")) == 0
    a = (tmp_path / "a.trec").read_bytes()
    assert a == (tmp_path / "b.trec").read_bytes() == (tmp_path / "c.trec").read_bytes()


def test_row_batches_cover_the_pools_in_order():
    from jkofast.jko._chunks import _row_batches

    off = np.cumsum([0, 30, 12, 45, 8, 25, 60, 3, 1])
    for cap in (1, 40, 50, 1000):
        runs = _row_batches(off, cap)
        assert runs[0][0] == 0 and runs[-1][1] == len(off) - 1
        assert all(b0 == a1 for (_, b0), (a1, _) in pairwise(runs))
        for a, b in runs:
            assert b - a == 1 or off[b] - off[a] <= cap


def test_resume_is_byte_identical_and_refuses_other_settings(tmp_path):
    from rerank_helpers import interrupted_after

    run = _write(tmp_path)
    base = ("--multires", "mr", "--clusters", "5", "--chunk-size", "2")
    assert main(_argv(tmp_path, run, "full.trec", *base)) == 0
    with interrupted_after(2), pytest.raises(RuntimeError, match="injected failure"):
        main(_argv(tmp_path, run, "r.trec", *base))
    parts = sorted(os.listdir(tmp_path / "r.trec.parts"))
    assert "chunk_000000.trec" in parts and "chunk_000002.trec" not in parts
    # another variant, another cluster count, or the vanilla flow: the parts are not theirs
    for other in (("--multires", "sam"), ("--multires", "mr", "--clusters", "6"), ()):
        assert main(_argv(tmp_path, run, "r.trec", *other, "--chunk-size", "2")) == 2
    assert main(_argv(tmp_path, run, "r.trec", *base, "--json")) == 0
    assert (tmp_path / "r.trec").read_bytes() == (tmp_path / "full.trec").read_bytes()


def test_bad_pools_pass_through_and_the_others_are_reranked(tmp_path, capsys):
    run = _write(tmp_path, nan_doc=7, unknown_in=3)
    assert main(_argv(tmp_path, run, "o.trec", "--multires", "sam", "--clusters", "4")) == 0
    err = capsys.readouterr().err
    assert "query 'q1' passed through unchanged: embeddings contain NaN or inf" in err
    assert "query 'q3' passed through unchanged: document 'nowhere' not in the geometry" in err
    pools = _pools(run)
    out = [ln.split() for ln in open(tmp_path / "o.trec")]
    for q in ("q1", "q3"):  # input order and input score strings
        got = [(r[2], r[4]) for r in out if r[0] == q]
        assert [d for d, _ in got] == pools[q][0]
    assert {r[0] for r in out} == set(pools)


def test_large_pools_from_a_run_file(tmp_path):
    """Pools of 1,000 - 5,000 candidates, solved in bounded runs of rows."""
    run = _write(tmp_path, sizes=(1000, 5000, 2000), n_docs=6000, d=16)
    assert main(_argv(tmp_path, run, "o.trec", "--multires", "sam", "--dist", str(tmp_path / "o.npz"))) == 0
    z = np.load(tmp_path / "o.npz")
    assert list(np.diff(z["offsets"])) == [1000, 5000, 2000]
    assert not z["status"].any()
    for i in range(3):
        p = z["p"][z["offsets"][i] : z["offsets"][i + 1]]
        assert abs(float(p.sum()) - 1.0) < 1e-5
        assert np.count_nonzero(p) < p.size  # exactly 0 outside the refined pool


@pytest.mark.parametrize(
    ("extra", "msg"),
    [
        (("--multires", "mr", "--clusters", "0"), "--clusters must be >= 1"),
        (("--multires", "mr", "--refine", "0"), "--refine must be >= 1"),
        (("--multires", "sam", "--beta", "-1"), "--beta must be finite and >= 0"),
        (("--multires", "sam", "--beta", "nan"), "--beta must be finite and >= 0"),
        (("--multires", "mr", "--mode", "kl"), "does not take --mode"),
        (("--multires", "mr", "--confidence", "c.tsv"), "does not take --confidence"),
    ],
)
def test_bad_settings_are_exit_2_before_any_work(tmp_path, capsys, extra, msg):
    run = _write(tmp_path, sizes=(5,))
    assert main(_argv(tmp_path, run, "o.trec", *extra)) == 2
    assert msg in capsys.readouterr().err
    assert not (tmp_path / "o.trec.parts").exists()


def test_multires_needs_dense_rows_and_a_known_variant(tmp_path, capsys):
    import dataclasses

    from jkofast.jko.stream import RerankOptions, check_options

    run = _write(tmp_path, sizes=(5,))
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d0", "title": "", "text": "a b"}\n')
    argv = ["rerank", "--pools", run, "--tfidf-corpus", str(tmp_path / "corpus.jsonl"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--multires", "mr", "--quiet"]) == 2
    assert "--multires needs --embeddings" in capsys.readouterr().err
    opts = RerankOptions(pools=run, out=str(tmp_path / "o"), embeddings=str(tmp_path / "E.npy"), ids="i")
    with pytest.raises(ValueError, match="--multires must be one of"):
        check_options(dataclasses.replace(opts, multires="kmeans"))
    with pytest.raises(TypeError, match="--clusters must be an integer"):
        check_options(dataclasses.replace(opts, multires="mr", clusters=2.5))
    with pytest.raises(TypeError, match="--beta must be a real number"):
        check_options(dataclasses.replace(opts, multires="sam", beta="2"))
