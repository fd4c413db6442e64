"""One writer per output: an exclusive lock file beside each output folder or file.

A command that writes ``OUT`` (an index folder, an embeddings folder, a run file, a folder of
runs) holds ``OUT.lock`` for as long as it writes, as Lucene's ``write.lock``.  The lock is an
OS lock on the open file (``fcntl.flock``; ``msvcrt.locking`` on Windows), so it is released
by the kernel when the holder exits in any way -- a crash or ``kill -9`` leaves no lock to
clean by hand: the next writer takes it over.  The file holds the holder's pid, host, command
and start time, which a second writer names when it refuses (:class:`OutputLocked`, a
``ValueError``: exit 2 on the command line).  The holder removes the file when it finishes.

The lock is re-entrant within a process (a command that calls a library function locking the
same output holds it once).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time

try:  # POSIX
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

except ImportError:  # pragma: no cover - Windows
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True


__all__ = ["OutputLocked", "lock_path", "output_lock"]

_HELD: dict[str, list] = {}  # lock path -> [fd, depth]
_GUARD = threading.Lock()


class OutputLocked(ValueError):
    """Another process is writing the output (the message names it: pid, host, command, since)."""


class _NoLockFile(OutputLocked):
    """The lock file cannot be created (the output's folder cannot be written)."""


def lock_path(out) -> str:
    """Return the lock file of the output ``out``: ``OUT.lock`` beside it."""
    return os.path.abspath(os.fspath(out)).rstrip(os.sep) + ".lock"


def _holder(path: str) -> str:
    """Return the holder recorded in a lock file, in words."""
    try:
        with open(path, encoding="utf-8") as fh:
            rec = json.loads(fh.read() or "{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(rec["since"])))
        return f"pid {int(rec['pid'])} on {rec['host']}, {rec['command']}, since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet recorded itself"


def _acquire(out, path: str, command: str) -> int:
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise _NoLockFile(f"cannot create the lock file {path} of {out}: {e.strerror}") from None
        if not _try_lock(fd):
            os.close(fd)
            raise OutputLocked(
                f"{out} is being written by another process ({_holder(path)}; lock file {path}); "
                "wait for it to finish (a lock left by a process that died is taken over by the next writer)"
            )
        # the file locked must still be the one at ``path``: a holder that finished removed it, and a
        # third writer may have made a new one meanwhile -- then lock that one instead
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        rec = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "since": time.time()}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(rec).encode("utf-8"))
        return fd


@contextlib.contextmanager
def output_lock(out, command: str, *, required: bool = True):
    """Hold the exclusive write lock of ``out`` (folder or file) for the ``with`` block.

    Parameters
    ----------
    out : str or path
        The output (it need not exist yet; its parent folder must).
    command : str
        What writes it, named to a second writer (e.g. ``"jkofast index"``).
    required : bool
        False: when the lock file cannot be created (a folder that cannot be written), run the block
        without the lock and leave the error to the write itself (whose message names the option).

    Raises
    ------
    OutputLocked
        Another live process holds the lock (the message names its pid, host, command and start).
    """
    path = lock_path(out)
    with _GUARD:
        held = _HELD.get(path)
        if held is not None:
            held[1] += 1
        else:
            try:
                _HELD[path] = [_acquire(out, path, command), 1]
            except _NoLockFile:
                if required:
                    raise
                path = None
    if path is None:
        yield None
        return
    try:
        yield path
    finally:
        with _GUARD:
            held = _HELD[path]
            held[1] -= 1
            if held[1] == 0:
                del _HELD[path]
                with contextlib.suppress(OSError):
                    os.unlink(path)  # while still locked: a waiter then sees another inode and retries
                os.close(held[0])
