"""Batch JKO-RAG reranking on Dask: the ``jkofast rerank --dask`` job and a per-partition function.

:func:`rerank_on_dask` is :func:`jkofast.jko.stream.rerank_stream` on a cluster
(:class:`~jkofast.distributed.tasks.ClientStages`): the client
parses the pool file into the single-machine job's chunks (same chunking, same malformed-line
and split-query reports, same score stream), each chunk is a task that prepares, solves and
writes its part atomically into ``OUT.parts/`` on a worker (geometry loaded once per worker,
memory-mapped), and the client concatenates the parts in input order: the output is
byte-identical to ``jkofast rerank`` without ``--dask``, and an interrupted run resumes from
the finished parts (the manifest) whichever way it is run again.

:func:`rerank_partition` reranks one partition of TREC lines where it runs (a ``dask.bag``
partition, a shard file): no client, no part files.

Example (a cluster started with ``dask scheduler`` and ``dask worker tcp://10.0.0.5:8786 --nthreads 1``
on each machine; the files on a shared filesystem)::

    from dask.distributed import Client
    from jkofast.distributed.rerank import rerank_on_dask
    from jkofast.jko.stream import RerankOptions

    opts = RerankOptions(pools="run.trec", out="reranked.trec", embeddings="E.npy", ids="ids.txt",
                         config="tuned", chunk_size=1000, threads=1)  # threads: Numba threads per worker
    with Client("tcp://10.0.0.5:8786") as client:
        summary = rerank_on_dask(opts, client)
    print(summary.queries_per_s, summary.workers)  # worker -> queries, chunks, peak RSS (MB)

    import dask.bag as db                                            # one query-aligned shard per file
    lines = db.read_text("shards/*.trec").map_partitions(rerank_partition, embeddings="E.npy", ids="ids.txt")
    lines.to_textfiles("reranked/*.trec")
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import tempfile
import threading
from collections.abc import Callable, Iterable

from jkofast.distributed.cluster import check_workers, dask_client
from jkofast.distributed.tasks import ClientStages, rerank_chunk
from jkofast.eval.runio import iter_chunks
from jkofast.jko.stream import RerankOptions, check_options, job_config, rerank_stream, warm_rerank_kernels

__all__ = ["count_queries", "rerank_on_dask", "rerank_partition"]


def count_queries(path: str, sample_bytes: int = 32 << 20) -> int:
    """Estimate the number of query blocks of a pool file (runs of lines with the same first field), for the ETA.

    Lines are counted up to ``sample_bytes`` of the file as stored (compressed bytes for ``.gz``);
    a larger file's count is scaled by its size, so the estimate costs the same for any input.
    Lines with a field count other than 3 or 6 are left out and a header counts as a query: exact
    for a clean file read to its end.
    """
    size = os.path.getsize(path)
    n, last, rest = 0, None, b""
    with open(path, "rb") as raw:
        fh = gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw
        while True:
            buf = fh.read(min(1 << 22, sample_bytes))
            lines = (rest + buf).split(b"\n")
            rest = lines.pop() if buf else b""
            for line in lines:
                f = line.split()
                if len(f) in (3, 6) and f[0] != last:
                    n += 1
                    last = f[0]
            if not buf:
                return n
            if raw.tell() >= sample_bytes:
                return max(n, round(n * size / raw.tell()))


def rerank_on_dask(
    opts,
    scheduler,
    *,
    timeout: float = 10.0,
    report: Callable[[str], None] | None = None,
    progress=None,
):
    """Run a rerank job on Dask; return its :class:`~jkofast.jko.stream.RerankSummary`.

    A named operating point runs on ``grad="implicit"`` as on one machine; ``opts.grad="unrolled"``
    selects the published path.

    Parameters
    ----------
    opts : RerankOptions
        The job; ``opts.threads`` is each worker's Numba threads (``None`` -> 1).
    scheduler : str or dask.distributed.Client
        ``tcp://host:port``, ``local:N``, or a connected client (used as is, not closed).
    timeout : float
        Seconds to reach the scheduler and its first worker.
    report : callable, optional
        ``report(message)`` as in :func:`~jkofast.jko.stream.rerank_stream`.
    progress : object, optional
        A progress line (the CLI's), with ``update``, ``start`` and ``set_total``: ``update`` gets
        the queries of each finished chunk; ``set_total`` gets a count of the
        input's queries, made in a background thread (for the ETA).

    Raises
    ------
    ValueError
        A bad scheduler string, an unreachable scheduler, a worker without jkofast or with other
        versions, and whatever the job itself rejects.
    RuntimeError
        A chunk failed on the cluster; the finished parts are kept for a resume.
    """
    if opts.threads is None:
        opts = dataclasses.replace(opts, threads=1)
    check_options(opts)  # settings are refused before the cluster starts
    tick = None
    if progress is not None:
        threading.Thread(target=lambda: progress.set_total(count_queries(opts.pools)), daemon=True).start()

        def tick(n):
            if n:
                progress.update(n)
            else:
                progress.start()

    if not isinstance(scheduler, str):
        check_workers(scheduler)
        return rerank_stream(opts, report=report, progress=tick, stages=ClientStages(scheduler))
    with dask_client(scheduler, timeout=timeout, warm=_warm_worker) as client:
        return rerank_stream(opts, report=report, progress=tick, stages=ClientStages(client))


def _warm_worker() -> None:
    """Compile / load the rerank kernels on a worker before the clock of the job starts."""
    warm_rerank_kernels(lambda msg: None)


def rerank_partition(
    lines: Iterable[str],
    *,
    embeddings: str | None = None,
    ids: str | None = None,
    tfidf_corpus: str | None = None,
    config="tuned",
    k: int = 0,
    tag: str = "jkofast",
    threads: int | None = 1,
    report: Callable[[str], None] | None = None,
) -> list[str]:
    """Rerank the queries of one partition of pool-file lines; return the output lines.

    A ``dask.bag`` partition function (``bag.map_partitions(rerank_partition, ...)``): the
    partition must hold whole queries (e.g. one query-aligned shard file per partition).  The
    lines are those ``jkofast rerank`` writes for the same input (line numbers in reports
    count from the partition's first line).  The geometry is loaded once per process.

    Parameters
    ----------
    lines : iterable of str
        TREC run or ``qid docid score`` lines (with or without line feeds).
    embeddings, ids, tfidf_corpus : str, optional
        The geometry, as in :class:`~jkofast.jko.stream.RerankOptions`.
    config, k, tag : optional
        As in :class:`~jkofast.jko.stream.RerankOptions`.
    threads : int, optional
        Numba threads in this process (1: one per Dask task thread).
    report : callable, optional
        ``report(message)`` for malformed lines and passed-through queries (default: dropped).

    Returns
    -------
    list of str
        Output lines, each ending with a line feed.
    """
    say = report or (lambda msg: None)
    with tempfile.TemporaryDirectory(prefix="jkofast-part-") as tmp:
        path = os.path.join(tmp, "part.trec")
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(ln if ln.endswith("\n") else ln + "\n" for ln in lines)
        opts = RerankOptions(
            pools=path,
            out=os.path.join(tmp, "out.trec"),
            embeddings=embeddings and os.path.abspath(embeddings),
            ids=ids and os.path.abspath(ids),
            tfidf_corpus=tfidf_corpus and os.path.abspath(tfidf_corpus),
            config=config,
            k=k,
            tag=tag,
            threads=threads,
        )
        check_options(opts)
        cfg = job_config(opts)
        out: list[str] = []
        for chunk in iter_chunks(path, opts.chunk_size, lambda ln, msg: say(f"partition line {ln}: {msg}")):
            text = rerank_chunk(opts, cfg, chunk, None, say)[0]
            out.extend(text.splitlines(keepends=True))
    return out
