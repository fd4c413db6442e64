"""``jkofast rerank --dask``: the same bytes as the single-machine command, resume, version checks."""

import dataclasses
import json

import numpy as np
import pytest
from dask_inputs import rerank_args, write_pools
from rerank_helpers import interrupted_after, use_fake_solver

from jkofast.cli import main

pytest.importorskip("distributed")


def _single_and_dask(tmp_path, client, extra=(), name="x"):
    run = write_pools(tmp_path)
    a, b = str(tmp_path / f"{name}_single.trec"), str(tmp_path / f"{name}_dask.trec")
    assert main(rerank_args(run, a, *extra)) == 0
    assert main([*rerank_args(run, b, *extra), "--dask", client.scheduler.address]) == 0
    return a, b


def test_bytes_identical_with_pass_through_and_dist(tmp_path, dask_client, capsys):
    extra = ("--chunk-size", "2", "--dist")
    run = write_pools(tmp_path)
    a, b = str(tmp_path / "a.trec"), str(tmp_path / "b.trec")
    assert main(rerank_args(run, a, *extra, str(tmp_path / "a.npz"))) == 0
    err_single = capsys.readouterr().err
    assert main([*rerank_args(run, b, *extra, str(tmp_path / "b.npz")), "--dask", dask_client.scheduler.address]) == 0
    err_dask = capsys.readouterr().err
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()
    za, zb = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    for k in ("p", "offsets", "query_ids", "status"):
        np.testing.assert_array_equal(za[k], zb[k])
    # the same reports: malformed line, repeated document, split query, the pass-through of q2
    for err in (err_single, err_dask):
        assert "run.trec:4: malformed line skipped" in err
        assert "duplicate document" in err and "reappears" in err
        assert "query 'q2' passed through unchanged: document 'unknown_doc' not in the geometry" in err
    assert sorted(err_single.splitlines()) == sorted(err_dask.splitlines())
    assert not (tmp_path / "b.trec.parts").exists()


@pytest.mark.parametrize("extra", [("--chunk-size", "100", "--k", "3", "--tag", "dsk"), ("--chunk-size", "1")])
def test_bytes_identical_chunk_sizes(tmp_path, dask_client, extra):
    a, b = _single_and_dask(tmp_path, dask_client, extra)  # 100 > the input: one task
    assert open(a, "rb").read() == open(b, "rb").read()


@pytest.mark.parametrize("in_memory", [False, True])
def test_user_scores_identical(tmp_path, dask_client, in_memory):
    run = write_pools(tmp_path, extra=False)
    rows = [ln.split() for ln in open(run)]
    rng = np.random.default_rng(3)
    (tmp_path / "s.tsv").write_text("".join(f"{r[0]}\t{r[2]}\t{rng.normal():.4f}\n" for r in rows))
    extra = ["--chunk-size", "2", "--scores", str(tmp_path / "s.tsv"), *(["--scores-in-memory"] if in_memory else [])]
    a, b = str(tmp_path / "a.trec"), str(tmp_path / "b.trec")
    assert main(rerank_args(run, a, *extra)) == 0
    assert main([*rerank_args(run, b, *extra), "--dask", dask_client.scheduler.address]) == 0
    assert open(a, "rb").read() == open(b, "rb").read()


def test_interrupted_client_run_resumes_from_parts(tmp_path, dask_client, capsys):
    run = write_pools(tmp_path)
    full = str(tmp_path / "full.trec")
    assert main(rerank_args(run, full, "--chunk-size", "2")) == 0
    out = str(tmp_path / "r.trec")
    args = [*rerank_args(run, out, "--chunk-size", "2"), "--dask", dask_client.scheduler.address]
    with pytest.raises(RuntimeError, match="injected"), interrupted_after(3):
        main(args)
    parts = sorted(p.name for p in (tmp_path / "r.trec.parts").iterdir())
    assert parts == [f"chunk_00000{i}.{ext}" for i in range(3) for ext in ("sum", "trec")] + ["manifest.json"]
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    summ = json.loads(capsys.readouterr().out)
    assert summ["skipped_finished"] == 6 and summ["reranked_now"] == summ["queries"] - 6
    assert sum(w["queries"] for w in summ["workers"].values()) == summ["reranked_now"]
    assert all(w["peak_rss_mb"] > 0 for w in summ["workers"].values())
    assert open(out, "rb").read() == open(full, "rb").read()
    # the parts of a Dask run resume a single-machine run, and the other way round
    with pytest.raises(RuntimeError, match="injected"), interrupted_after(2):
        main(args)
    assert main(rerank_args(run, out, "--chunk-size", "2")) == 0
    assert open(out, "rb").read() == open(full, "rb").read()


def test_version_mismatch_is_detected_up_front(tmp_path, dask_client, capsys, monkeypatch):
    import jkofast

    worker_version = jkofast.__version__
    monkeypatch.setattr(jkofast, "__version__", "0.0.0-client")
    run = write_pools(tmp_path)
    assert main([*rerank_args(run, str(tmp_path / "x.trec")), "--dask", dask_client.scheduler.address]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jkofast rerank: error: version mismatch: Dask worker tcp://127.0.0.1:")
    assert f"has jkofast {worker_version}, this client has 0.0.0-client" in err
    assert not (tmp_path / "x.trec.parts").exists()


def test_rerank_partition_lines_match_the_command(tmp_path):
    import dask.bag as db

    from jkofast.distributed.rerank import rerank_partition

    run = write_pools(tmp_path)
    out = str(tmp_path / "cli.trec")
    assert main(rerank_args(run, out, "--k", "4")) == 0
    said = []
    kw = dict(embeddings=str(tmp_path / "E.npy"), ids=str(tmp_path / "ids.txt"), config="fast", k=4)
    got = rerank_partition(open(run).read().splitlines(), report=said.append, **kw)
    assert "".join(got) == open(out).read()
    assert any("passed through" in m for m in said) and any("partition line 4" in m for m in said)
    bag = db.from_sequence(open(run).readlines(), npartitions=1).map_partitions(rerank_partition, **kw)
    assert "".join(bag.compute(scheduler="sync")) == open(out).read()


def _fake_solver(monkeypatch):
    """A stand-in for jkofast.jko.solver (in this process): p = softmax(-E) per query; the second query of
    every chunk fails with status 3."""

    @dataclasses.dataclass
    class Cfg:
        tau0: float = 0.5
        mode: str = "wasserstein"
        alpha_prox: float = 0.5
        objective: str = "transport"
        grad: str = "implicit"

    @dataclasses.dataclass
    class Res:
        p: np.ndarray
        status: np.ndarray
        errors: dict
        unconverged: np.ndarray

    def rerank_batch(energy, p0, offsets, *, config=None, n_threads=None, warn_unconverged=True, **geometry):
        p = np.exp(-energy)
        nq = len(offsets) - 1
        for q in range(nq):
            p[offsets[q] : offsets[q + 1]] /= p[offsets[q] : offsets[q + 1]].sum()
        status = np.zeros(nq, np.int32)
        if nq > 1:
            status[1] = 3
        return Res(p, status, {}, np.zeros((nq, 2), np.int64))

    use_fake_solver(monkeypatch, rerank_batch, Cfg())


def test_failed_solves_pass_through_identically(tmp_path, capsys, monkeypatch):
    """Per-query solver errors: an in-process cluster (worker threads) so the fake solver applies to the tasks."""
    import logging

    from distributed import Client, LocalCluster

    from jkofast.distributed.rerank import rerank_on_dask
    from jkofast.jko.stream import RerankOptions, rerank_stream

    _fake_solver(monkeypatch)
    run = write_pools(tmp_path)
    kw = dict(pools=run, embeddings=str(tmp_path / "E.npy"), ids=str(tmp_path / "ids.txt"), chunk_size=3, k=5)
    said_a, said_b = [], []
    rerank_stream(RerankOptions(out=str(tmp_path / "a.trec"), **kw), report=said_a.append)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                     silence_logs=logging.ERROR) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        summ = rerank_on_dask(RerankOptions(out=str(tmp_path / "b.trec"), **kw), client, report=said_b.append)
    assert open(tmp_path / "a.trec", "rb").read() == open(tmp_path / "b.trec", "rb").read()
    assert sorted(said_a) == sorted(said_b) and any("solver status 3" in m for m in said_b)
    # a task's reports come in input order (after the parse-time reports of the client)
    assert [m for m in said_a if "passed through" in m] == [m for m in said_b if "passed through" in m]
    assert summ.passed_through == 1 + 3  # the unknown doc + the second query of the 3 chunks of 3 (the 4th has 1)


def test_worker_side_input_error_is_exit_2(tmp_path, dask_client, capsys):
    """An error of the input found on a worker (a repeated geometry id) ends as without --dask."""
    run = write_pools(tmp_path)
    (tmp_path / "ids.txt").write_text("".join(f"d{min(i, 38)}\n" for i in range(40)))  # d38 twice
    args = [*rerank_args(run, str(tmp_path / "x.trec")), "--dask", dask_client.scheduler.address]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "jkofast rerank: error:" in err and "document id 'd38' is repeated" in err


def test_progress_and_per_worker_summary(tmp_path, dask_client, capsys):
    run = write_pools(tmp_path)
    args = [a for a in rerank_args(run, str(tmp_path / "x.trec"), "--chunk-size", "2") if a != "--quiet"]
    assert main([*args, "--dask", dask_client.scheduler.address]) == 0
    cap = capsys.readouterr()
    assert "rerank: 10/10 queries (" in cap.err and "/s, 100 %, ETA 0:00)" in cap.err
    assert "; per worker: tcp://127.0.0.1:" in cap.out and "peak RSS" in cap.out


def test_count_queries_for_the_eta(tmp_path):
    import gzip

    from jkofast.distributed.rerank import count_queries

    run = write_pools(tmp_path, nq=300, m=6)  # + the split q0: 301 blocks; malformed lines are not counted
    assert count_queries(run) == 301
    with open(run, "rb") as src, gzip.open(tmp_path / "run.trec.gz", "wb") as dst:
        dst.write(src.read())
    assert count_queries(str(tmp_path / "run.trec.gz")) == 301
    assert abs(count_queries(run, sample_bytes=16 << 10) - 301) <= 15  # scaled from the first 16 kB


def test_confidence_file_identical_on_dask(tmp_path, dask_client):
    run = write_pools(tmp_path)
    ca, cb = tmp_path / "a.tsv", tmp_path / "b.tsv"
    extra = ("--chunk-size", "2", "--confidence")
    assert main(rerank_args(run, str(tmp_path / "a.trec"), *extra, str(ca))) == 0
    argv = [*rerank_args(run, str(tmp_path / "b.trec"), *extra, str(cb)), "--dask", dask_client.scheduler.address]
    assert main(argv) == 0
    assert ca.read_bytes() == cb.read_bytes()
    assert (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()
    lines = ca.read_text().splitlines()
    assert lines[0].startswith("# query_id") and len(lines) > 2


@pytest.mark.parametrize("variant", ["mr", "sam"])
def test_multires_bytes_identical_on_dask_and_resumed_across(tmp_path, dask_client, variant):
    """``--multires``: the cluster writes the single-machine bytes, and a local job resumes the cluster's parts."""
    from rerank_helpers import interrupted_after

    extra = ("--multires", variant, "--clusters", "3", "--refine", "1", "--chunk-size", "2")
    a, b = _single_and_dask(tmp_path, dask_client, extra, name=variant)
    assert open(a, "rb").read() == open(b, "rb").read()
    run = str(tmp_path / "run.trec")
    c = str(tmp_path / f"{variant}_resumed.trec")
    with interrupted_after(2), pytest.raises(RuntimeError, match="injected failure"):
        main([*rerank_args(run, c, *extra), "--dask", dask_client.scheduler.address])
    assert main(rerank_args(run, c, *extra)) == 0
    assert open(a, "rb").read() == open(c, "rb").read()
