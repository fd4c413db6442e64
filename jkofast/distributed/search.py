"""Batch first-stage retrieval on Dask (``jkofast search --dask``): BM25 / TF-IDF / SGR over many queries.

The saved index (``jkofast index --out DIR``) is loaded once per worker process and kept for
the next tasks -- a sparse index memory-mapped (its ``.npy`` arrays; the page cache is shared
by the workers of a machine), an SGR index read from its ``index.npz`` -- never pickled per
task.  The queries are cut into chunks of ``chunk_size``; each task returns its chunk's top-k
``(indices, scores)`` and the client stacks them in query order, so the run is the one the
single-machine command writes (each query's top-k does not depend on its batch or on the
thread count).
"""

from __future__ import annotations

import os
import resource
import threading

import numpy as np

from jkofast.distributed.cluster import worker_name
from jkofast.pools.retrievers import load_retriever
from jkofast.sparse.report import SearchReport

__all__ = ["cached_retriever", "index_info", "search_chunk_task", "search_on_dask"]

_RETRIEVERS: dict = {}  # per process: the last index, loaded once
_LOCK = threading.Lock()  # one load and one kernel launch at a time per process


def _index_key(path: str, method: str) -> tuple:
    path = os.path.abspath(path)
    files = tuple(sorted((f, os.stat(os.path.join(path, f)).st_mtime_ns) for f in os.listdir(path)))
    return path, method, files


def cached_retriever(path: str, method: str, name: str | None = None):
    """Return the retriever saved in folder ``path`` (``method``: ``sgr`` or a sparse method), cached per process.

    ``name`` is how a mismatch message names the folder (see :func:`jkofast.pools.retrievers.load_retriever`).
    """
    key = _index_key(path, method)
    retr = _RETRIEVERS.get(key)
    if retr is None:
        retr = load_retriever(method, path, name=name)  # memory-mapped arrays
        _RETRIEVERS.clear()  # one index at a time
        _RETRIEVERS[key] = retr
    return retr


def index_info(path: str, method: str, name: str | None = None) -> dict:
    """Return what the client checks of a saved index: its method, ``n_docs`` and saved document ids (or None)."""
    with _LOCK:
        retr = cached_retriever(path, method, name)
    ids = getattr(retr, "ids_", None)
    return {
        "method": getattr(retr, "method", method),
        "n_docs": int(retr.n_docs),
        "ids": None if ids is None else list(ids),
    }


def search_chunk_task(path: str, method: str, texts: list, k: int, threads: int | None) -> tuple:
    """Search one chunk of query texts with this process's cached index: one Dask task.

    Returns ``(indices int64 (n, k), scores float32 (n, k), report, worker, peak RSS in MB)``;
    ``report`` is the chunk's :class:`~jkofast.sparse.report.SearchReport` (why a row is empty).
    """
    with _LOCK:
        retr = cached_retriever(path, method)
        idx, sc, report = retr.search(texts, k, n_threads=threads, return_report=True)
    return idx, sc, report, worker_name(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def search_on_dask(
    client,
    index_path: str,
    method: str,
    texts: list,
    k: int,
    *,
    threads: int = 1,
    chunk_size: int = 1000,
    tick=None,
    return_report: bool = False,
):
    """Search ``texts`` on a Dask client's workers; return ``(indices, scores, workers)`` in query order.

    Parameters
    ----------
    client : dask.distributed.Client
    index_path : str
        Saved index folder, on a filesystem the workers share (made absolute here).
    method : str
        ``bm25``, ``bm25-lucene``, ``tfidf`` or ``sgr``.
    texts : list of str
        Query texts.
    k : int
        Results per query (at most the corpus size).
    threads : int
        Numba threads per worker.
    chunk_size : int
        Queries per task.
    tick : callable, optional
        ``tick(n)`` with the queries of each finished chunk.
    return_report : bool
        Also return the :class:`~jkofast.sparse.report.SearchReport` of all queries (the
        single-machine ``search(..., return_report=True)``'s: why each unanswered row is empty).

    Returns
    -------
    indices : ndarray of int64, shape (n, k)
    scores : ndarray of float32, shape (n, k)
    report : SearchReport
        Only with ``return_report=True``.
    workers : dict
        Worker -> queries, chunks, peak RSS (MB).
    """
    from distributed import as_completed

    if chunk_size < 1:
        raise ValueError(f"--chunk-size must be >= 1, got {chunk_size}")
    path = os.path.abspath(index_path)
    starts = list(range(0, len(texts), chunk_size))
    window = max(2, 2 * sum(client.nthreads().values()))
    parts: dict = {}
    workers: dict = {}
    ac = as_completed()
    pos: dict = {}

    def collect(fut):
        idx, sc, report, worker, rss = fut.result()
        parts[pos.pop(fut.key)] = (idx, sc, report)
        w = workers.setdefault(worker, {"queries": 0, "chunks": 0, "peak_rss_mb": 0.0})
        w["queries"] += len(idx)
        w["chunks"] += 1
        w["peak_rss_mb"] = max(w["peak_rss_mb"], rss)
        if tick is not None:
            tick(len(idx))

    for a in starts:
        while len(pos) >= window:
            collect(next(ac))
        fut = client.submit(search_chunk_task, path, method, texts[a : a + chunk_size], k, threads, pure=False)
        pos[fut.key] = a
        ac.add(fut)
    while pos:
        collect(next(ac))
    if starts:
        idx = np.concatenate([parts[a][0] for a in starts])
        sc = np.concatenate([parts[a][1] for a in starts])
    else:
        idx, sc = np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
    if return_report:
        return idx, sc, SearchReport.concat(parts[a][2] for a in starts), workers
    return idx, sc, workers
