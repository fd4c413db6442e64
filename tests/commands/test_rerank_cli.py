"""``jkofast rerank``: streaming chunks, malformed lines, pass-through, atomic parts, resume = same bytes."""

import sys

import numpy as np
import pytest
from rerank_helpers import FakeCfg, interrupted_after, use_fake_solver
from rerank_helpers import fake_core as _fake_core
from rerank_helpers import write_inputs as _write_inputs

from jkofast.cli import main


def _cmd(tmp_path, pools, out, *extra, quiet=True):
    """The ``jkofast rerank`` command line of these tests: ``pools`` on the dense geometry of
    :func:`_write_inputs` (``E.npy``, ``ids.txt``), written to ``out`` (None: no ``--out``), then ``extra``."""
    argv = [
        "rerank",
        "--pools",
        str(pools),
        "--embeddings",
        str(tmp_path / "E.npy"),
        "--ids",
        str(tmp_path / "ids.txt"),
    ]
    if out is not None:
        argv += ["--out", str(out)]
    return argv + (["--quiet"] if quiet else []) + list(extra)


def _read(p):
    return p.read_bytes()


def test_resume_is_byte_identical_and_reports(tmp_path, monkeypatch, capsys):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    base = _cmd(tmp_path, str(run), None, "--chunk-size", "2", "--config", "fast")
    assert main([*base, "--out", str(tmp_path / "a.trec"), "--dist", str(tmp_path / "a.npz")]) == 0
    err = capsys.readouterr().err
    assert "run.trec:4: malformed" in err and "run.trec:10: malformed" in err
    full = _read(tmp_path / "a.trec")
    # interrupted after 2 chunks, then resumed
    with pytest.raises(RuntimeError, match="injected"), interrupted_after(2):
        main([*base, "--out", str(tmp_path / "b.trec"), "--dist", str(tmp_path / "b.npz")])
    parts = sorted(p.name for p in (tmp_path / "b.trec.parts").iterdir())
    assert parts == [
        "chunk_000000.npz",
        "chunk_000000.sum",
        "chunk_000000.trec",
        "chunk_000001.npz",
        "chunk_000001.sum",
        "chunk_000001.trec",
        "manifest.json",
    ]
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
    assert main(_cmd(tmp_path, str(run), str(tmp_path / "o.trec"), "--k", "3")) == 0
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
    base = _cmd(tmp_path, str(run), str(tmp_path / "c.trec"))
    with pytest.raises(RuntimeError), interrupted_after(1):
        main([*base, "--chunk-size", "2"])
    assert main([*base, "--chunk-size", "3"]) == 2  # ValueError -> exit status 2


@pytest.mark.parametrize("edited", ["E.npy", "ids.txt", "run.trec"])
def test_an_input_edited_in_place_refuses_resume(tmp_path, monkeypatch, capsys, edited):
    """The chunk store keyed its inputs by path (and the pool file by size and mtime): an embeddings file edited
    between two runs resumed the parts made from the old vectors."""
    import os

    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    base = _cmd(tmp_path, str(run), str(tmp_path / "c.trec"), "--chunk-size", "2")
    with pytest.raises(RuntimeError), interrupted_after(1):
        main(base)
    p = tmp_path / edited
    st = os.stat(p)
    data = bytearray(p.read_bytes())
    i = len(data) - 3 if edited == "E.npy" else data.index(b"d1") + 1
    data[i] ^= 0x01 if edited == "E.npy" else 0  # a changed vector byte; the text files: one id character
    if edited != "E.npy":
        data[i : i + 1] = b"X"
    p.write_bytes(bytes(data))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and modification time as before
    assert main(base) == 2
    assert "holds parts of a run with other settings/input" in capsys.readouterr().err


def test_missing_geometry_is_an_error(tmp_path, capsys):
    run = _write_inputs(tmp_path)
    assert main(["rerank", "--pools", str(run), "--out", str(tmp_path / "x.trec")]) == 2
    assert "geometry" in capsys.readouterr().err


def test_real_core_tiny(tmp_path):
    from jkofast.jko import solver as jko

    if not hasattr(jko, "rerank_batch"):
        pytest.skip("jkofast.jko.solver.rerank_batch not available")
    run = _write_inputs(tmp_path, nq=3, m=6)
    assert main(_cmd(tmp_path, str(run), str(tmp_path / "r.trec"), "--config", "fast", "--chunk-size", "2")) == 0
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
    assert (
        main(
            [
                "rerank",
                "--pools",
                str(run),
                "--tfidf-corpus",
                str(tmp_path / "corpus.jsonl"),
                "--out",
                str(tmp_path / "t.trec"),
                "--quiet",
            ]
        )
        == 0
    )
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
    base = _cmd(tmp_path, str(run), None, "--scores", str(tmp_path / "s.tsv"), "--chunk-size", "2")
    assert main([*base, "--out", str(tmp_path / "a.trec")]) == 0
    assert "1 queries had no rerank scores" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "b.trec"), "--scores-in-memory"]) == 0
    assert (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()
    no_scores = [a for a in base if a not in ("--scores", str(tmp_path / "s.tsv"))]
    assert main([*no_scores, "--out", str(tmp_path / "n.trec")]) == 0
    assert (tmp_path / "n.trec").read_bytes() != (tmp_path / "a.trec").read_bytes()  # scores were used
    # resume with streamed scores: skipped chunks still advance the stream
    with pytest.raises(RuntimeError), interrupted_after(1):
        main([*base, "--out", str(tmp_path / "c.trec")])
    assert main([*base, "--out", str(tmp_path / "c.trec")]) == 0
    assert (tmp_path / "c.trec").read_bytes() == (tmp_path / "a.trec").read_bytes()


# ---------------------------------------------------------------------------------------------
# block parser / vectorised formatter against naive line-by-line oracles
# ---------------------------------------------------------------------------------------------
def _oracle_queries(path):
    """The line-by-line reference: text mode, str.split per line; -> (queries, reports)."""
    out, rep = [], []
    cur, docs, sstr, vals, seen = None, [], [], [], set()
    with open(path, encoding="utf-8") as fh:
        for ln, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) in (3, 6):
                q, d, s = (parts[0], parts[2], parts[4]) if len(parts) == 6 else parts
                try:
                    v = float(s)
                    err = None if np.isfinite(v) else f"non-finite score {s!r}"
                except ValueError as exc:
                    err = str(exc)
            else:
                err = f"expected 6 fields (TREC run) or 3 (qid docid score), got {len(parts)}"
            if err is not None:
                if not (ln == 1 and len(parts) == 3):
                    rep.append((ln, err))
                continue
            if q != cur:
                if cur is not None:
                    out.append((cur, docs, sstr, vals))
                cur, docs, sstr, vals, seen = q, [], [], [], set()
            if d in seen:
                rep.append((ln, f"duplicate document {d!r} in query {q!r} (ignored)"))
                continue
            seen.add(d)
            docs.append(d)
            sstr.append(s)
            vals.append(v)
    if cur is not None:
        out.append((cur, docs, sstr, vals))
    return out, rep


def _tricky_run(path, seed=0, n=60):
    """Clean 6-column blocks mixed with every case the fast path must hand to the slow path."""
    rng = np.random.default_rng(seed)
    lines = ["query-id corpus-id score\n"]
    for q in range(n):
        qid = [f"q{q}", f"query-with-a-long-id-{q % 4}", f"é{q}", "q1"][q % 4] if q % 5 else f"q{q}"
        for r in range(int(rng.integers(1, 9))):
            d = f"d{int(rng.integers(0, 40))}"  # d30..d39: not in the geometry; repeats = duplicates
            s = f"{[1.0, 2.5, 2.5, 0.125][r % 4] if q % 3 == 0 else rng.random() * 10:.4f}"  # ties
            line = f"{qid} Q0 {d} {r + 1} {s} bm25"
            u = rng.random()
            if u < 0.03:
                line = f"{qid}\t{d}\t{s}"
            elif u < 0.05:
                line = f"{qid} Q0 {d} {r + 1} {['nan', 'inf', 'x', '1_0'][int(rng.integers(0, 4))]} bm25"
            elif u < 0.06:
                line = "malformed line"
            elif u < 0.07:
                line = line.replace(" ", "\x1c", 1)
            elif u < 0.08:
                line = "   "
            end = ["\n", "\r\n", "\r"][int(rng.integers(0, 3))] if rng.random() < 0.04 else "\n"
            lines.append(line + end)
    text = "".join(lines).rstrip("\n")  # last line without a newline
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


@pytest.mark.parametrize("block", [1, 16, 97, 1 << 22])
@pytest.mark.parametrize("chunk_size", [1, 3, 1000])
def test_block_parser_matches_line_oracle(tmp_path, monkeypatch, block, chunk_size):
    from jkofast.eval import runio as R

    monkeypatch.setattr(R, "_BLOCK_BYTES", block)
    fast = []
    real = R._fast_columns
    monkeypatch.setattr(R, "_fast_columns", lambda b: fast.append(real(b)) or fast[-1])
    for seed in range(3):
        path = tmp_path / f"run{seed}.trec"
        _tricky_run(path, seed)
        want, want_rep = _oracle_queries(path)
        rep: list = []
        chunks = list(R.iter_chunks(str(path), chunk_size, lambda ln, m, rep=rep: rep.append((ln, m))))
        assert all(len(c) == chunk_size for c in chunks[:-1]) and 0 < len(chunks[-1]) <= chunk_size
        got = [q for c in chunks for q in c]
        assert got == want and rep == want_rep
        assert want_rep and any("duplicate" in m for _, m in want_rep)  # the file exercises the reports
    if block in (16, 97):  # small clean blocks take the fast path, the others the line-by-line one
        assert any(f is not None for f in fast) and any(f is None for f in fast)


def test_fast_columns_and_fallbacks():
    from jkofast.eval.runio import _fast_columns

    block = (
        b"q1 Q0 d1 1 2.5 t\n\nq1 Q0 d2 2 1e-3 t\r\nquery-long-identifier Q0 d3 1 -1 t\n"
        b"query-long-identifieR\tQ0\td4\t1\t7\tt\n"
    )
    n_lines, qids, sizes, docs, sstr = _fast_columns(block)
    assert (n_lines, qids, sizes) == (5, ["q1", "query-long-identifier", "query-long-identifieR"], [2, 1, 1])
    assert docs == ["d1", "d2", "d3", "d4"] and sstr == ["2.5", "1e-3", "-1", "7"]
    assert _fast_columns(b"a b c\nd e f")[1:] == (["a", "d"], [1, 1], ["b", "e"], ["c", "f"])
    assert _fast_columns(b"\n  \n")[1] == []
    for bad in (
        b"q1 Q0 d1 1 2 t\nq1 d2 3\n",  # mixed field counts
        b"q1 Q0 d1 1 2 t\nbad\n",  # a malformed line
        "é Q0 d1 1 2 t\n".encode(),  # non-ASCII
        b"q1 Q0 d1 1 2 t\rq2 Q0 d1 1 2 t\n",  # lone CR = line break in text mode
        b"q1\x1cQ0 d1 1 2 t\n",
    ):  # \x1c is whitespace to str.split only
        assert _fast_columns(bad) is None, bad


def _naive_format(qids, off, docs, sstr, p, ok, k, tag):
    out = []
    for i, q in enumerate(qids):
        a, b = int(off[i]), int(off[i + 1])
        kk = b - a if k <= 0 else min(k, b - a)
        if ok[i]:
            order = np.argsort(-p[a:b], kind="stable")
            out += [f"{q} Q0 {docs[a + j]} {r + 1} {p[a + j]:.9g} {tag}\n" for r, j in enumerate(order[:kk])]
        else:
            out += [f"{q} Q0 {docs[a + r]} {r + 1} {sstr[a + r]} {tag}\n" for r in range(kk)]
    return "".join(out)


def test_format_lines_matches_fstring_oracle():
    from jkofast.jko.stream import format_lines

    rng = np.random.default_rng(1)
    for trial in range(40):
        nq = int(rng.integers(1, 12))
        lens = rng.integers(1, 9, nq)
        off = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
        n = int(off[-1])
        p = rng.choice([0.5, 0.25, 0.125, 1e-7, 1 / 3, 0.0, -0.0, np.nan, 1e20], n)  # ties, NaN, exponents
        if trial % 2:
            p = rng.random(n)
        ok = rng.random(nq) < (1.0 if trial % 3 == 0 else 0.7)
        qids = [f"q{i}" for i in range(nq)]
        docs = [f"d{j}" for j in range(n)]
        sstr = [f"{x:.4f}" for x in rng.random(n)]
        for k in (0, 1, 3):
            for tag in ("jkofast", "t%s%d%%"):
                assert format_lines(qids, off, docs, sstr, p, ok, k, tag) == _naive_format(
                    qids, off, docs, sstr, p, ok, k, tag
                )


def _fake_core_failing(monkeypatch):
    """As _fake_core, plus: pools of exactly 3 documents fail (status 2, no message)."""
    inner = _fake_core(monkeypatch)

    def rerank_batch(energy, p0, offsets, **kw):
        res = inner(energy, p0, offsets, **kw)
        res.status[np.diff(offsets) == 3] = 2
        return res

    use_fake_solver(monkeypatch, rerank_batch, FakeCfg())


def test_cli_output_bytes_match_line_oracle(tmp_path, monkeypatch, capsys):
    """Ties, unknown documents, malformed lines, duplicates and failed queries: the CLI writes
    exactly the bytes of the per-line reference (parse line by line, per query: energy, p0,
    the stand-in core, stable descending sort, f-string formatting)."""
    from jkofast.eval import runio as R
    from jkofast.jko.energy import blend, softmax_tau

    _fake_core_failing(monkeypatch)
    _write_inputs(tmp_path, n_docs=30)
    path = tmp_path / "tricky.trec"
    _tricky_run(path, seed=5, n=80)
    queries, _ = _oracle_queries(path)
    row = {f"d{i}": i for i in range(30)}
    expected = []
    for q, docs, sstr, vals in queries:
        if any(d not in row for d in docs) or len(docs) == 3:  # unknown doc / failed solve
            expected += [f"{q} Q0 {d} {r + 1} {s} run%tag\n" for r, (d, s) in enumerate(zip(docs, sstr, strict=True))]
            continue
        off = np.array([0, len(docs)], np.int64)
        r = blend(off, dense=np.asarray(vals, np.float64), alpha=1.0)
        p0 = softmax_tau(r, off, FakeCfg().tau0)
        p = p0 * np.exp(r)
        p /= p.sum()
        for rank, j in enumerate(np.argsort(-p, kind="stable")):
            expected.append(f"{q} Q0 {docs[j]} {rank + 1} {p[j]:.9g} run%tag\n")
    assert any(len(d) == 3 for _, d, _, _ in queries) and any("d3" in "".join(d) for _, d, _, _ in queries)
    for block, cs in ((1 << 22, 1000), (64, 7)):
        monkeypatch.setattr(R, "_BLOCK_BYTES", block)
        out = tmp_path / f"o{block}.trec"
        assert main(_cmd(tmp_path, str(path), str(out), "--tag", "run%tag", "--chunk-size", str(cs))) == 0
        assert out.read_text(encoding="utf-8") == "".join(expected)
    err = capsys.readouterr().err
    assert "solver status 2" in err and "not in the geometry" in err


def _oracle_score_blocks(path):
    from jkofast.eval.runio import parse_score_fields as _parse_score_line

    out, cur = [], None
    with open(path, encoding="utf-8") as fh:
        for ln, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                q, d, v = _parse_score_line(parts)
            except ValueError:
                if ln == 1:
                    continue
                raise ValueError(f"{path}:{ln}: malformed") from None
            if not np.isfinite(v):
                raise ValueError(f"{path}:{ln}: non-finite")
            if q != cur:
                out.append((q, {}))
                cur = q
            out[-1][1][d] = v
    return out


@pytest.mark.parametrize("block", [1, 16, 1 << 22])
def test_score_blocks_match_line_oracle(tmp_path, monkeypatch, block):
    from jkofast.eval import runio as R
    from jkofast.jko.energy import read_score_file

    monkeypatch.setattr(R, "_BLOCK_BYTES", block)
    rng = np.random.default_rng(2)
    lines = ["query-id\tcorpus-id\tscore\n"]
    for q in range(40):
        for _ in range(int(rng.integers(1, 6))):
            d = f"d{int(rng.integers(0, 8))}"  # repeats: the last score wins
            x = rng.normal()
            lines.append(f"q{q % 13}\t{d}\t{x:.5f}\n" if q % 4 else f"q{q % 13} Q0 {d} 1 {x:.5f} x\r\n")
    good = tmp_path / "s.tsv"
    good.write_bytes("".join(lines).encode())
    assert list(R.iter_score_blocks(str(good))) == _oracle_score_blocks(good)
    assert R.read_scores(str(good)) == read_score_file(str(good))  # non-contiguous qids merged
    for bad_line, what in (("q1 d1\n", "malformed"), ("q1 d1 inf\n", "non-finite")):
        bad = tmp_path / "bad.tsv"
        bad.write_bytes("".join([*lines[:50], bad_line, *lines[50:]]).encode())
        with pytest.raises(ValueError, match=f"bad.tsv:51: {what}"):
            list(R.iter_score_blocks(str(bad)))
        with pytest.raises(ValueError, match=f"bad.tsv:51: {what}"):
            R.read_scores(str(bad))


def test_real_core_workqueue_layer_many_chunks(tmp_path):
    """Only the kernel thread launches Numba kernels: with the workqueue threading layer (which
    aborts on concurrent parallel launches) the 3-stage pipeline runs and matches the default."""
    import os
    import subprocess

    from jkofast.jko import solver as jko

    if not hasattr(jko, "rerank_batch"):
        pytest.skip("jkofast.jko.solver.rerank_batch not available")
    run = _write_inputs(tmp_path, nq=100, m=8)  # 100 one-query chunks: many overlapping launches
    args = _cmd(tmp_path, str(run), None, "--config", "fast", "--chunk-size", "1", "--threads", "2")
    assert main([*args, "--out", str(tmp_path / "a.trec")]) == 0
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue", NUMBA_NUM_THREADS="2")
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    r = subprocess.run(
        [sys.executable, "-m", "jkofast", *args, "--out", str(tmp_path / "b.trec")],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "b.trec").read_bytes() == (tmp_path / "a.trec").read_bytes()


def test_gzip_input_same_as_plain(tmp_path, monkeypatch):
    import gzip

    from jkofast.eval import runio as R

    monkeypatch.setattr(R, "_BLOCK_BYTES", 97)
    path = tmp_path / "run.trec"
    _tricky_run(path, seed=7)
    (tmp_path / "run.trec.gz").write_bytes(gzip.compress(path.read_bytes()))
    rep_a, rep_b = [], []
    a = [q for c in R.iter_chunks(str(path), 4, lambda ln, m: rep_a.append(ln)) for q in c]
    b = [q for c in R.iter_chunks(str(tmp_path / "run.trec.gz"), 4, lambda ln, m: rep_b.append(ln)) for q in c]
    assert a == b and rep_a == rep_b and a


# ---- adversarial inputs (QA review) ---------------------------------------------------------
@pytest.mark.parametrize(
    "extra, match",
    [
        (["--k", "-1"], "--k must be >= 0"),  # wrote the whole pool silently
        (["--tag", "a b"], "--tag must be non-empty without whitespace"),  # unreadable TREC output
        (["--scores", "SCORES", "--alpha", "nan"], "--alpha must be finite"),
        (["--scores", "SCORES", "--gamma", "-1"], "--gamma must be finite and >= 0"),
        (["--alpha", "0.5"], "--alpha applies under --scores only"),  # was ignored without --scores
        (["--threads", "0"], "n_threads must be >= 1"),
    ],
)
def test_bad_options_fail_before_any_work(tmp_path, monkeypatch, capsys, extra, match):
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path, nq=2)
    out = tmp_path / "o.trec"
    (tmp_path / "s.txt").write_text("q0 d0 1.0\n")
    extra = [str(tmp_path / "s.txt") if x == "SCORES" else x for x in extra]
    assert main(_cmd(tmp_path, str(run), str(out), *extra)) == 2
    assert match in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "o.trec.parts").exists()


def test_repeated_geometry_ids_are_an_error(tmp_path, monkeypatch, capsys):
    # every pool with a repeated id was passed through as "not in the geometry"
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path, nq=2)
    (tmp_path / "ids.txt").write_text("".join(f"d{min(i, 28)}\n" for i in range(30)))
    assert main(_cmd(tmp_path, str(run), str(tmp_path / "o.trec"))) == 2
    assert "document id 'd28' is repeated (row 29)" in capsys.readouterr().err


def test_split_query_is_reported(tmp_path, monkeypatch, capsys):
    import json

    _fake_core(monkeypatch)
    lines = [
        "q1 Q0 d0 1 3 r\n",
        "q1 Q0 d1 2 2 r\n",
        "q2 Q0 d2 1 3 r\n",
        "q2 Q0 d3 2 1 r\n",
        "q1 Q0 d4 3 1 r\n",
        "q1 Q0 d5 4 0 r\n",
    ]
    run = _write_inputs(tmp_path, nq=1)
    run.write_text("".join(lines))
    for chunk in ("1", "10"):  # across chunks and inside one chunk
        out = tmp_path / f"o{chunk}.trec"
        assert main(_cmd(tmp_path, str(run), str(out), "--json", "--chunk-size", chunk, quiet=False)) == 0
        cap = capsys.readouterr()
        assert "query 'q1' reappears after other queries" in cap.err
        assert json.loads(cap.out)["split_queries"] == 1
        assert [ln.split()[0] for ln in out.read_text().splitlines()] == ["q1", "q1", "q2", "q2", "q1", "q1"]


def test_user_scores_beyond_float32_name_the_line(tmp_path, monkeypatch, capsys):
    # cast to float32 inf, the run died with "rerank contains NaN or inf" (no file, no line)
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path, nq=2)
    sc = tmp_path / "s.tsv"
    sc.write_text("q0 d1 1.0\nq0 d2 1e39\n")
    for extra in ([], ["--scores-in-memory"]):
        assert main(_cmd(tmp_path, str(run), str(tmp_path / "o.trec"), "--scores", str(sc), *extra)) == 2
        assert "s.tsv:2: score 1e+39 is outside the float32 range" in capsys.readouterr().err


def test_dist_folder_is_created_up_front(tmp_path, monkeypatch):
    # a missing --dist folder failed only after every chunk was solved and the run written
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path, nq=2)
    dist = tmp_path / "new" / "sub" / "p.npz"
    assert main(_cmd(tmp_path, str(run), str(tmp_path / "o.trec"), "--dist", str(dist))) == 0
    z = np.load(dist)
    assert list(z["query_ids"]) == ["q0", "q1"] and z["p"].shape[0] == int(z["offsets"][-1])


def test_capped_inner_steps_are_summed_over_the_run(tmp_path, monkeypatch, capsys):
    import json

    _fake_core(monkeypatch, unconverged=(1, 2))
    run = _write_inputs(tmp_path)
    assert (
        main(_cmd(tmp_path, str(run), str(tmp_path / "a.trec"), "--chunk-size", "2", "--config", "fast", "--json")) == 0
    )
    cap = capsys.readouterr()
    summ = json.loads(cap.out)
    # 7 queries in 4 chunks, all reranked by the fake: every one reports 1 + 2 capped steps
    assert summ["unconverged_queries"] == 7 and summ["unconverged_inner_steps"] == [7, 14]
    assert cap.err.count("stopped at an iteration cap") == 1
    assert "in 7 queries" in cap.err and "Sinkhorn 7 steps" in cap.err and "CG 14 steps" in cap.err


@pytest.mark.parametrize(
    "extra, grad",
    [
        ([], "implicit"),  # a named operating point runs the batch fast path
        (["--config", "fast"], "implicit"),
        (["--grad", "unrolled"], "unrolled"),  # the published path, when asked for
        (["--config", "base", "--grad", "unrolled"], "unrolled"),
        (["--grad", "implicit"], "implicit"),
        (["--mode", "kl"], "none"),  # no transport term: no gradient path to choose
    ],
)
def test_batch_default_is_the_implicit_path_and_grad_wins(tmp_path, monkeypatch, capsys, extra, grad):
    import json

    inner = _fake_core(monkeypatch)
    seen = []

    def rerank_batch(energy, p0, offsets, *, config, **kw):
        seen.append(config)
        return inner(energy, p0, offsets, config=config, **kw)

    use_fake_solver(monkeypatch, rerank_batch, None)  # the real operating points, the stand-in solver
    run = _write_inputs(tmp_path)
    out = tmp_path / "o.trec"
    assert main(_cmd(tmp_path, run, out, "--keep-parts", "--chunk-size", "4", "--json", *extra)) == 0
    assert json.loads(capsys.readouterr().out)["grad"] == grad
    assert seen and all(c.grad == ("implicit" if grad == "none" else grad) for c in seen)
    manifest = json.loads((tmp_path / "o.trec.parts" / "manifest.json").read_text())
    assert manifest["grad"] == seen[0].grad  # the parts record the path they were written on
    assert main(_cmd(tmp_path, run, tmp_path / "t.trec", *extra)) == 0
    text = capsys.readouterr().out
    assert f"; gradient path {grad}" in text


def test_grad_help_says_why_the_defaults_differ(capsys):
    with pytest.raises(SystemExit):
        main(["rerank", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default implicit" in text and "run_jko and jkofast.compat" in text


def test_a_damaged_finished_part_is_solved_again(tmp_path, monkeypatch):
    """A finished part edited or damaged on disk was concatenated into the resumed output (found by the fuzz suite)."""
    _fake_core(monkeypatch)
    run = _write_inputs(tmp_path)
    base = _cmd(tmp_path, str(run), None, "--chunk-size", "2")
    assert main([*base, "--out", str(tmp_path / "full.trec")]) == 0
    with pytest.raises(RuntimeError), interrupted_after(2):
        main([*base, "--out", str(tmp_path / "o.trec")])
    part = tmp_path / "o.trec.parts" / "chunk_000000.trec"
    part.write_bytes(b"x" + part.read_bytes()[1:])
    assert main([*base, "--out", str(tmp_path / "o.trec"), "--json"]) == 0
    assert _read(tmp_path / "o.trec") == _read(tmp_path / "full.trec")
