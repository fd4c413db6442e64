"""Helpers of the rerank-job tests: a stand-in solver and an interruption, both through ``monkeypatch``."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest

from jkofast.distributed.tasks import ClientStages
from jkofast.jko import _chunks as chunks
from jkofast.jko import config, stream
from jkofast.jko.stream import LocalStages


def use_fake_solver(monkeypatch, rerank_batch, cfg) -> None:
    """Run the rerank job on ``rerank_batch`` with config ``cfg`` (whatever the operating point; None: the
    real operating points) and no warm-up.

    Patches the names :mod:`jkofast.jko.stream` and :mod:`jkofast.jko._chunks` call, so the chunks solved in
    this process (the local stages, the worker threads of an in-process Dask cluster) use the stand-in.
    """
    monkeypatch.setattr(chunks, "rerank_batch", rerank_batch)
    monkeypatch.setattr(stream, "batch_config", config.batch_config if cfg is None else (lambda name: cfg))
    monkeypatch.setattr(stream, "warm_rerank_kernels", lambda say, **kw: None)


@contextlib.contextmanager
def interrupted_after(n_chunks: int):
    """Within this block a rerank job finishes its first ``n_chunks`` chunks, then stops with
    ``RuntimeError("injected failure before chunk N")`` -- an interruption, local or on Dask."""
    with pytest.MonkeyPatch.context() as mp:
        for cls in (LocalStages, ClientStages):

            def submit_chunk(self, ci, chunk, user_scores, _submit=cls.submit_chunk):
                if ci >= n_chunks:
                    self.flush()
                    raise RuntimeError(f"injected failure before chunk {ci}")
                _submit(self, ci, chunk, user_scores)

            mp.setattr(cls, "submit_chunk", submit_chunk)
        yield


def write_inputs(tmp_path, nq=7, m=5, n_docs=30, d=4, seed=0):
    """Write a tiny dense rerank job (E.npy, ids.txt, run.trec with two malformed lines); return run.trec."""
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
class FakeCfg:
    tau0: float = 0.5
    sinkhorn_max_iter: int = 1000
    cg_max_iter: int = 200
    mode: str = "wasserstein"
    alpha_prox: float = 0.5
    objective: str = "transport"
    grad: str = "implicit"


def fake_core(monkeypatch, unconverged=None):
    """A stand-in for jkofast.jko.solver: p = p0 reweighted by exp(-E) (deterministic); query 2 fails.
    ``unconverged``: (sinkhorn, cg) capped-step counts the fake reports for every query."""

    @dataclasses.dataclass
    class Res:
        p: np.ndarray
        offsets: np.ndarray
        status: np.ndarray
        errors: dict
        unconverged: np.ndarray | None = None

    def rerank_batch(
        energy,
        p0,
        offsets,
        *,
        embeddings=None,
        csr=None,
        config="tuned",
        return_duals=False,
        n_threads=None,
        warn_unconverged=True,
    ):
        assert warn_unconverged is False  # the CLI sums the counts and reports them once
        rows = embeddings if embeddings is not None else csr
        assert rows is not None and rows.shape[0] == len(energy)
        p = p0 * np.exp(-energy)
        nq = len(offsets) - 1
        status = np.zeros(nq, np.int32)
        for q in range(nq):
            p[offsets[q] : offsets[q + 1]] /= p[offsets[q] : offsets[q + 1]].sum()
        un = np.zeros((nq, 2), np.int64)
        if unconverged is not None:
            un[:] = unconverged
        return Res(p, offsets, status, {}, un)

    use_fake_solver(monkeypatch, rerank_batch, FakeCfg())
    return rerank_batch


def warm_up_order(monkeypatch, module, ahead_name: str, patches: dict, **warm_kw) -> tuple[list, list]:
    """Run ``stream.warm_rerank_kernels(**warm_kw)`` with a recording stand-in for ``module.<ahead_name>``'s child.

    ``patches``: name -> callable set on ``module``, each getting the event list as its first argument.
    Returns ``(asked, events)``: the entries and probe names the real ``<ahead_name>`` asks ``compile_ahead``
    for (a stub that starts nothing), and the events in order (the patched calls, the warm-up entries
    ``jko`` and ``energy``, the child's ``wait`` and ``close``).
    """
    asked, events = [], []
    monkeypatch.setattr(module, "compile_ahead", lambda entries, probes: asked.append((entries, sorted(probes))))
    assert getattr(module, ahead_name)() is None  # (the stub starts nothing)

    class Child:
        def wait(self):
            events.append("wait")
            return True

        def close(self):
            events.append("close")

    monkeypatch.setattr(module, ahead_name, Child)
    for name, fn in patches.items():
        monkeypatch.setattr(module, name, lambda *a, fn=fn, **k: fn(events, *a, **k))
    for name in ("jko", "energy"):
        monkeypatch.setitem(stream.WARMUPS, name, lambda name=name: events.append(name))
    stream.warm_rerank_kernels(print, **warm_kw)
    return asked, events
