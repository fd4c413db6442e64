"""Inputs of the distributed tests: a small pool file with every per-query case, and the rerank arguments."""

from __future__ import annotations

import contextlib
import os

import numpy as np


@contextlib.contextmanager
def loopback_client(distributed, log_level):
    """A client of a fresh 2-worker LocalCluster on 127.0.0.1 (one thread each, spawned processes), warmed."""
    from jkofast.distributed.rerank import _warm_worker

    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=log_level,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(_warm_worker)
        yield client


def write_pools(path, nq=9, m=6, n_docs=40, d=4, seed=0, extra=True):
    """A pool file with a malformed line, an unknown doc (pass-through), a repeated doc and a split query;
    ``E.npy`` / ``ids.txt`` beside it.  Returns the run's path."""
    path = os.fspath(path)
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n_docs, d)).astype(np.float32)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    np.save(os.path.join(path, "E.npy"), Z)
    with open(os.path.join(path, "ids.txt"), "w") as fh:
        fh.write("".join(f"d{i}\n" for i in range(n_docs)))
    lines = []
    for q in range(nq):
        docs = rng.choice(n_docs, m, replace=False)
        for r, doc in enumerate(docs):
            lines.append(f"q{q} Q0 d{doc} {r + 1} {10 - r + rng.random():.4f} bm25\n")
    if extra:
        lines.insert(3, "this line is malformed\n")
        lines.insert(2 * m + 2, f"q2 Q0 unknown_doc {m + 1} 1.5 bm25\n")  # q2 passes through unchanged
        lines.insert(3 * m + 3, lines[3 * m + 2])  # a repeated document line in q3
        lines.append("q0 Q0 d1 1 3.25 bm25\n")  # q0 reappears: a split query
    run = os.path.join(path, "run.trec")
    with open(run, "w") as fh:
        fh.write("".join(lines))
    return run


def rerank_args(run, out, *extra):
    base = os.path.dirname(run)
    return [
        "rerank",
        "--pools",
        run,
        "--embeddings",
        os.path.join(base, "E.npy"),
        "--ids",
        os.path.join(base, "ids.txt"),
        "--config",
        "fast",
        "--quiet",
        "--out",
        out,
        *extra,
    ]
