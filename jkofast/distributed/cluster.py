"""Dask clusters for jkofast: the ``SCHEDULER`` string, a client within a timeout, the workers' versions.

``SCHEDULER`` is a scheduler address (``tcp://host:8786``; ``host:8786`` means TCP) or
``local:N``: a ``LocalCluster`` of N worker processes on this machine, over loopback, one
task thread each (a worker's Numba threads are the job's ``threads``).  Every check here runs
before any work: a bad string, an unreachable scheduler (within ``timeout`` seconds), a
scheduler without workers, a worker that cannot import jkofast or runs another version of it
(or of Numba / NumPy, which could change the bytes of the output).

Dask is an optional extra (``pip install "jkofast[distributed]"``); importing this module
imports neither Dask nor any kernel.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Callable

import jkofast

__all__ = [
    "DaskUnavailableError",
    "add_dask_args",
    "check_workers",
    "dask_client",
    "dask_config_for_workers",
    "parse_scheduler",
    "require_dask",
    "worker_name",
    "worker_versions",
]

INSTALL_HINT = 'pip install "jkofast[distributed]"'


class DaskUnavailableError(ImportError, ValueError):
    """Dask (``distributed``) is not installed; a ``ValueError`` too, so the CLI exits with status 2."""


def require_dask():
    """Return the ``distributed`` module.

    Raises
    ------
    DaskUnavailableError
        It is not installed; the message names the extra to install.
    """
    try:
        import distributed
    except ImportError as exc:
        raise DaskUnavailableError(
            f"--dask needs dask.distributed, which is not installed ({exc}); install the optional extra: {INSTALL_HINT}"
        ) from None
    return distributed


def parse_scheduler(spec: str) -> tuple[str, object]:
    """Split a ``SCHEDULER`` string into ``("local", n_workers)`` or ``("address", "scheme://host:port")``.

    Raises
    ------
    ValueError
        ``local:`` without a count >= 1, or a string that is not ``[scheme://]host:port``.

    Examples
    --------
    >>> parse_scheduler("local:2")
    ('local', 2)
    >>> parse_scheduler("10.0.0.5:8786")
    ('address', 'tcp://10.0.0.5:8786')
    """
    spec = str(spec).strip()
    if spec.startswith("local:") or spec == "local":
        n = spec.partition(":")[2]
        try:
            n_workers = int(n)
        except ValueError:
            n_workers = None
        if n_workers is None or n_workers < 1:
            raise ValueError(f"--dask local:N needs a number of workers N >= 1, got {spec!r}")
        return "local", n_workers
    scheme, sep, rest = spec.rpartition("://")
    address = spec if sep else f"tcp://{spec}"
    host, colon, port = (rest if sep else spec).rpartition(":")
    if not (colon and host and port.isdigit()) or (sep and not scheme):
        raise ValueError(f"--dask must be a scheduler address (tcp://host:8786) or local:N, got {spec!r}")
    return "address", address


def worker_versions() -> dict:
    """Return the versions that decide a chunk's bytes: jkofast, Numba, NumPy, Python (run on each worker)."""
    import numba  # here, not at import: this module stays light for the command line's parsers
    import numpy

    return {
        "jkofast": jkofast.__version__,
        "numba": numba.__version__,
        "numpy": numpy.__version__,
        "python": "{}.{}".format(*sys.version_info[:2]),
    }


def check_workers(client, expected: dict | None = None) -> dict:
    """Check that every worker imports jkofast with the client's versions; return worker -> versions.

    Parameters
    ----------
    client : dask.distributed.Client
    expected : dict, optional
        The versions to require (default: this process's :func:`worker_versions`).

    Raises
    ------
    ValueError
        A worker cannot import jkofast, or one of its versions differs (the message names both).
    """
    expected = expected or worker_versions()
    found = client.run(worker_versions, on_error="return")
    for addr, got in sorted(found.items()):
        if isinstance(got, BaseException):
            raise ValueError(
                f"Dask worker {addr} cannot run jkofast ({type(got).__name__}: {got}); install jkofast "
                f"{expected['jkofast']} on every worker ({INSTALL_HINT})"
            )
        for name in ("jkofast", "numba", "numpy", "python"):
            if got.get(name) != expected.get(name):
                raise ValueError(
                    f"version mismatch: Dask worker {addr} has {name} {got.get(name)}, this client has "
                    f"{expected.get(name)}; install the same versions on the client and every worker"
                )
    return found


def worker_name() -> str:
    """Return this Dask worker's address, or ``host:pid`` outside a worker."""
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):  # not inside a Dask worker
        return f"{socket.gethostname()}:{os.getpid()}"


def dask_config_for_workers():
    """Return a ``dask.config.set`` context for the workers a LocalCluster spawns: no ``MALLOC_TRIM_THRESHOLD_``.

    Dask's nannies set ``MALLOC_TRIM_THRESHOLD_=65536`` in a worker's environment, which fixes
    glibc's mmap threshold low: every large temporary array of a chunk (the gathered geometry
    rows, the solver's buffers) is then mapped and unmapped afresh, 7-20 % of a rerank task's
    time on this VM.  The other variables (``OMP_NUM_THREADS=1`` ...) stay.  For ``dask worker``
    processes started by hand, set ``DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON='{}'`` or start
    them with ``--no-nanny``.
    """
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return dask.config.set({"distributed.nanny.pre-spawn-environ": env})


@contextlib.contextmanager
def dask_client(scheduler: str, *, timeout: float = 10.0, warm: Callable[[], None] | None = None):
    """Yield a checked ``dask.distributed.Client`` for ``scheduler`` (closed, with its local cluster, on exit).

    Parameters
    ----------
    scheduler : str
        ``tcp://host:port`` or ``local:N`` (see :func:`parse_scheduler`).
    timeout : float
        Seconds to reach the scheduler and to wait for its first worker.
    warm : callable, optional
        Run on every worker up front, e.g. to load a job's kernels (from the Numba cache the
        workers inherit through ``NUMBA_CACHE_DIR``; for ``local:N`` this process runs it first,
        compiling the kernels into that cache once instead of in every worker at the same time).

    Raises
    ------
    ValueError
        A bad ``scheduler``, an unreachable one, no worker within ``timeout``, a worker without
        jkofast or with other versions (:func:`check_workers`).
    DaskUnavailableError
        Dask is not installed.
    """
    kind, value = parse_scheduler(scheduler)  # a bad string is an error with or without Dask
    if timeout <= 0:
        raise ValueError(f"--dask-timeout must be > 0 seconds, got {timeout}")
    distributed = require_dask()
    with contextlib.ExitStack() as stack:
        if kind == "local":
            if warm:  # fill the Numba cache here first: N workers then load it instead of all compiling at once
                warm()
            with dask_config_for_workers():
                cluster = distributed.LocalCluster(
                    n_workers=value,
                    threads_per_worker=1,
                    processes=True,  # spawned processes: Numba's omp layer is not fork-safe
                    host="127.0.0.1",
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            stack.callback(cluster.close)
            address = cluster.scheduler_address
        else:
            address = value
        try:
            client = distributed.Client(address, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise ValueError(
                f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({type(exc).__name__}: {exc}); "
                "start one (`dask scheduler`, then `dask worker ADDRESS --nthreads 1` per machine) or use local:N"
            ) from None
        stack.callback(client.close)
        try:
            client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"the Dask scheduler at {address} has no workers (waited {timeout:g} s)") from exc
        check_workers(client)
        if warm:
            client.run(warm)
        yield client


def add_dask_args(parser) -> None:
    """Add ``--dask SCHEDULER`` and ``--dask-timeout`` to a sub-command's parser (imports no Dask)."""
    parser.add_argument(
        "--dask",
        metavar="SCHEDULER",
        default=None,
        help="run on Dask: a scheduler address (tcp://host:8786) or local:N (N worker processes here); "
        f"--threads is then per worker (default 1); needs {INSTALL_HINT}",
    )
    parser.add_argument(
        "--dask-timeout", type=float, default=10.0, help="seconds to reach the Dask scheduler and its workers (10)"
    )
