"""Fuzz: a damaged NM-JKO projection (``.npz``) or rerank chunk store fails naming the file, or reads as written.

``load_metric`` must end in a ``ValueError`` naming the file (never ``BadZipFile``, ``zlib.error`` or a
numpy message) or return exactly the saved ``W``; a rerank job whose ``OUT.parts/manifest.json`` or finished
parts were damaged must refuse to resume (exit 2, naming the parts folder) or produce the same bytes as an
undamaged run — never a crash, never a silently different output.
"""

import os
import tempfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mutate import mutated
from rerank_helpers import fake_core, interrupted_after, write_inputs

from jkofast.cli import main
from jkofast.jko.metric import LearnedMetric, load_metric, save_metric

W = np.arange(12, dtype=np.float64).reshape(4, 3) / 7.0


def _metric_file() -> str:
    d = tempfile.mkdtemp(prefix="jkofast-fuzz-npz-")
    p = os.path.join(d, "W.npz")
    save_metric(LearnedMetric(W=W, loss_history=np.zeros(2), final_loss=0.0, n_train=1, epochs=1), p)
    return p


def _good_metric() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "W.npz")
        save_metric(LearnedMetric(W=W, loss_history=np.zeros(2), final_loss=0.0, n_train=1, epochs=1), p)
        return open(p, "rb").read()


GOOD_METRIC = _good_metric()


@given(mutated(GOOD_METRIC, max_ops=3))
def test_damaged_projection_file_fails_naming_it_or_reads_as_saved(raw):
    p = _metric_file()
    with open(p, "wb") as fh:
        fh.write(raw)
    try:
        m = load_metric(p, d=4)
    except ValueError as exc:
        assert "W.npz" in str(exc), exc
        return
    np.testing.assert_array_equal(m.W, W)


def test_a_zip_version_zipfile_lacks_fails_naming_the_file():
    raw = bytearray(GOOD_METRIC)
    at = raw.index(b"PK\x01\x02")  # the first central-directory entry; its "version needed" field at +6
    raw[at + 6 : at + 8] = (101).to_bytes(2, "little")  # zip 10.1: zipfile raises NotImplementedError
    p = _metric_file()
    with open(p, "wb") as fh:
        fh.write(bytes(raw))
    with pytest.raises(ValueError, match=r"W\.npz.*NotImplementedError"):
        load_metric(p, d=4)


def _job(tmp, monkeypatch):
    fake_core(monkeypatch)
    run = write_inputs(tmp)
    return ["rerank", "--pools", str(run), "--embeddings", str(tmp / "E.npy"), "--ids", str(tmp / "ids.txt"),
            "--quiet", "--chunk-size", "2", "--dist", str(tmp / "o.npz")]  # fmt: skip


@given(st.sampled_from(["manifest.json", "chunk_000000.trec", "chunk_000000.sum", "chunk_000001.npz"]), st.data())
def test_damaged_chunk_store_refuses_or_resumes_to_the_same_bytes(name, data):
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        tmp = __import__("pathlib").Path(tempfile.mkdtemp(prefix="jkofast-fuzz-parts-"))
        base = _job(tmp, mp)
        assert main([*base, "--out", str(tmp / "full.trec")]) == 0
        full = (tmp / "full.trec").read_bytes()
        with pytest.raises(RuntimeError), interrupted_after(2):
            main([*base, "--out", str(tmp / "o.trec")])
        part = tmp / "o.trec.parts" / name
        raw = data.draw(mutated(part.read_bytes(), max_ops=3))
        part.write_bytes(raw)
        rc = main([*base, "--out", str(tmp / "o.trec")])
        if rc == 0:
            assert (tmp / "o.trec").read_bytes() == full, "a damaged part was resumed into a different output"
        else:
            assert rc == 2
