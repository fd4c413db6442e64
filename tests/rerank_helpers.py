"""Helpers of the rerank-job tests: a stand-in solver and an interruption, both through ``monkeypatch``."""

from __future__ import annotations

import contextlib

import pytest

from jkofast.distributed.tasks import ClientStages
from jkofast.jko import chunks, config, stream
from jkofast.jko.stream import LocalStages


def use_fake_solver(monkeypatch, rerank_batch, cfg) -> None:
    """Run the rerank job on ``rerank_batch`` with config ``cfg`` (whatever the operating point; None: the
    real operating points) and no warm-up.

    Patches the names :mod:`jkofast.jko.stream` and :mod:`jkofast.jko.chunks` call, so the chunks solved in
    this process (the local stages, the worker threads of an in-process Dask cluster) use the stand-in.
    """
    monkeypatch.setattr(chunks, "rerank_batch", rerank_batch)
    monkeypatch.setattr(stream, "batch_config", config.batch_config if cfg is None else (lambda name: cfg))
    monkeypatch.setattr(stream, "warm_rerank_kernels", lambda say: None)


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
