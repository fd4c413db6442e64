"""Compile ahead: a child process fills Numba's on-disk cache while the caller does other work.

Numba compiles on one core. On a machine with two or more cores and a cold cache, a long job
(``jkofast run``) starts ``jkofast warmup --only ENTRIES`` in a child process (on its own jkofast) for
kernels it needs later (the JKO flow, the SGR retriever's search), runs its other stages
meanwhile, and waits for the child just before those kernels are first called: they then load
from the cache instead of compiling on the job's own core. The child compiles its entries in the
order given and names each in a progress file when it is done, so the job can wait for one
entry (:meth:`Ahead.wait_for`) while the child goes on with the next. Nothing is started when
the cache already holds the probed kernels, when caching is off, on one core, or with
``JKOFAST_COMPILE_AHEAD=0``; when the child fails, the job compiles the kernels itself (same
results: the child only writes cache files, through Numba's own atomic writes).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence

import numba.core.event as _event

import jkofast
from jkofast._numba import compile_switches, sources_digest

__all__ = ["Ahead", "CompileNotice", "cached", "compile_ahead", "compile_notice", "cpu_count", "jkofast_command"]

ENV_SWITCH = "JKOFAST_COMPILE_AHEAD"
# set for a compile-ahead child: the file where its warm-up names each entry, a line each, when it is done
PROGRESS_ENV = "_JKOFAST_WARMUP_PROGRESS"


def cpu_count() -> int:
    """Return the number of cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cached(dispatcher) -> bool | None:
    """Whether Numba's on-disk cache holds a specialisation of ``dispatcher`` for its current source.

    Returns None when the dispatcher does not cache (``cache=False``, or caching switched off).
    """
    cache = getattr(dispatcher, "_cache", None)
    cache_file = getattr(cache, "_cache_file", None)
    if cache_file is None:  # NullCache: nothing is written to disk, a child could not help
        return None
    load_index = getattr(cache_file, "_load_index", None)  # Numba internals (jkofast._numba.NUMBA_HOOKS_TESTED)
    if load_index is None:  # pragma: no cover - another Numba layout: nothing to probe
        return None
    keys = load_index()  # {} when missing, of another Numba version or stale
    if type(cache).__name__ != "JkofastFunctionCache":  # Numba's own keys
        return bool(keys)
    tail = (sources_digest(), compile_switches())  # jkofast's keys end with these two
    return any(isinstance(k, tuple) and len(k) >= 2 and k[-2:] == tail for k in keys)


def jkofast_command(args: Sequence[str]) -> list[str]:
    """Return the command running ``jkofast ARGS`` in a child on *this* process's jkofast.

    Not ``python -m jkofast``: from a repository root that imports the checkout in the current
    folder rather than the installed copy this process runs; when the two differ in their kernel
    sources they cache apart (the cache folder is named by the sources' digest), so the child's
    kernels would never reach this process.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(jkofast.__file__)))
    # the child drops the current folder from its path (unless this jkofast lives there) and
    # puts this jkofast's folder first only when it is not on the path already (site-packages is)
    code = (
        "import os, sys\n"
        f"root = {root!r}\n"
        "cwd = os.getcwd()\n"
        "sys.path[:] = [p for p in sys.path if os.path.abspath(p or cwd) != cwd or cwd == root]\n"
        "if root not in [os.path.abspath(p or cwd) for p in sys.path]:\n"
        "    sys.path.insert(0, root)\n"
        f"from jkofast.cli import program\nprogram({list(args)!r})\n"
    )
    return [sys.executable, "-c", code]


class Ahead:
    """A running ``jkofast warmup --only ENTRIES`` child (:func:`compile_ahead`)."""

    def __init__(self, entries: Sequence[str], proc: subprocess.Popen, err, progress: str) -> None:
        self.entries = tuple(entries)
        self._proc = proc
        self._err = err
        self._progress = progress
        self.returncode: int | None = None

    def done(self) -> list[str]:
        """Return the entries the child has compiled so far, in its order."""
        try:
            with open(self._progress, encoding="utf-8") as f:
                return [ln.strip() for ln in f if ln.endswith("\n")]
        except FileNotFoundError:
            return []

    def wait_for(self, entry: str) -> bool:
        """Wait until the child has compiled ``entry`` (True) or has ended without it (False).

        An entry the child was not given returns False at once: the caller compiles it itself.
        """
        if entry not in self.entries:
            return False
        while entry not in self.done():
            if self._proc.poll() is not None:
                return entry in self.done()
            time.sleep(0.02)
        return True

    def wait(self) -> bool:
        """Wait for the child; True when it compiled every entry (exit status 0)."""
        if self.returncode is None:
            self.returncode = self._proc.wait()
        return self.returncode == 0

    def error(self) -> str:
        """Return the last line the child wrote to stderr ('' when none)."""
        self._err.seek(0)
        lines = [ln.strip() for ln in self._err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    def close(self) -> None:
        """Stop the child if it still runs and release its stderr file (idempotent)."""
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait()
        if self.returncode is None:
            self.returncode = self._proc.returncode
        self._err.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._progress)

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def compile_ahead(entries: Sequence[str], probes: Sequence) -> Ahead | None:
    """Start a child compiling the warm-up ``entries`` when the cache lacks any of ``probes``.

    Parameters
    ----------
    entries : sequence of str
        Warm-up entry names (``jkofast.warmups.lazy_entries()`` lists them).
    probes : sequence of numba dispatchers, or mapping of entry to such a sequence
        Kernels whose cached specialisations say the entries are already compiled. A mapping
        gives each entry its own: the child then takes only the entries whose probes are not
        all cached, in the order of ``entries``.

    Returns
    -------
    Ahead or None
        The running child, or None when none was started (cache warm, caching off, one core,
        ``JKOFAST_COMPILE_AHEAD=0``).
    """
    if os.environ.get(ENV_SWITCH, "1").strip() in ("0", "false", "no", "off") or cpu_count() < 2:
        return None
    if not isinstance(probes, Mapping):  # one set of probes for all the entries
        probes = dict.fromkeys(entries, tuple(probes))
    state = {e: [cached(d) for d in probes[e]] for e in entries}
    if any(s is None for got in state.values() for s in got):  # caching off: a child could not help
        return None
    entries = [e for e in entries if not all(state[e])]  # only the entries whose kernels are not all cached
    if not entries:
        return None
    err = tempfile.TemporaryFile()
    fd, progress = tempfile.mkstemp(prefix="jkofast-ahead-", suffix=".txt")
    os.close(fd)
    cmd = jkofast_command(["warmup", "--jobs", "1", "--only", ",".join(entries)])
    env = {**os.environ, PROGRESS_ENV: progress}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=env)
    return Ahead(entries, proc, err, progress)


class CompileNotice(_event.Listener):
    """Say when a command compiles kernels (a cold cache), with a progress count; silent when all load.

    ``with CompileNotice(log, about_s):`` — at the first kernel compiled in this process, ``log``
    gets ``compiling kernels for this machine (once; about N s)``; then a count every
    ``every_s`` seconds of compiling, and at the end the number compiled and the seconds they
    took. Loads from the on-disk cache are not compiles (Numba's ``numba:compile`` event fires
    on a cache miss only), so a warm run prints nothing.
    """

    def __init__(self, log: Callable[[str], None], about_s: float, every_s: float = 15.0) -> None:
        self._log = log
        self._about = about_s
        self._every = every_s
        self._depth = 0
        self._t0 = 0.0
        self._last = 0.0
        self.seconds = 0.0  # time spent compiling (outermost compiles, callees inside them)
        self.count = 0  # signatures compiled (callees included)

    def on_start(self, event) -> None:
        """Note a compile starting; announce the first one of this process (Numba event listener)."""
        if self._depth == 0:
            now = time.perf_counter()
            if self.count == 0:
                self._log(f"compiling kernels for this machine (once; about {self._about:.0f} s)")
                self._last = now
            self._t0 = now
        self._depth += 1

    def on_end(self, event) -> None:
        """Count a compile that ended; log the count every ``every_s`` seconds (Numba event listener)."""
        self._depth -= 1
        self.count += 1
        if self._depth == 0:
            now = time.perf_counter()
            self.seconds += now - self._t0
            if now - self._last >= self._every:
                self._log(f"compiling kernels: {self.count} compiled ({self.seconds:.0f} s)")
                self._last = now

    def __enter__(self) -> CompileNotice:
        _event.register("numba:compile", self)
        return self

    def __exit__(self, *exc) -> None:
        _event.unregister("numba:compile", self)
        if self.count and exc[0] is None:
            self._log(f"compiled {self.count} kernels in {self.seconds:.0f} s (cached: later runs load them)")


def compile_notice(log: Callable[[str], None], about_s: float, enabled: bool = True):
    """Return a :class:`CompileNotice` saying ``about_s`` seconds.

    With ``enabled`` False (``--quiet``, ``--json``) a context that does nothing.
    """
    import contextlib

    return CompileNotice(log, about_s) if enabled else contextlib.nullcontext()
