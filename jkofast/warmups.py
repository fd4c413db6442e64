"""Explicit warm-up: compile (or load from cache) the kernels of the main job on tiny inputs.

:func:`warmup` is the package's ``jkofast.warmup``; this module (``jkofast.warmups``) also holds the
entry selection (``DEFAULT``, :func:`lazy_entries`).

Wrapper modules register a warm-up with :func:`jkofast._numba.register_warmup`; :func:`warmup`
imports the modules that register the selected entries (``_HOMES``; every wrapper module of every
wing for ``"all"``) and runs the registered warm-ups, by default those of the **default set** — what ``jkofast run``
(the main job) calls: ``DEFAULT``, each entry on the argument types of the main job's own calls
(``tests/test_warmup.py`` checks that the job compiles nothing more after it). Every other entry
(per-feature kernels: the SGR retriever, the encoder, the single-pool and extension solvers,
studies' kernels, and the other dtypes / variants of the default wings: ``topk.variants``,
``index.variants``, ``baselines.float64``, ``evaluation.all``) compiles on its first use and is
cached from then on; ``warmup(features="all")`` / ``jkofast warmup --all`` compiles them now.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence

import numba.core.event as _event

import jkofast
from jkofast._ahead import PROGRESS_ENV, jkofast_command
from jkofast._cache_prune import only_cache_files
from jkofast._numba import WARMUPS
from jkofast._validation import check_int

__all__ = ["DEFAULT", "CompileRecorder", "clear_cache", "compile_cost", "lazy_entries", "warmup"]

# not wrapper modules: the CLI (imports every command), this module, the kernels (imported
# by the wrappers that use them) and the torch adapter (an optional extra, no kernels of its own)
_SKIP = {
    "jkofast.cli",
    "jkofast.__main__",
    "jkofast.warmups",
    "jkofast.commands",
    "jkofast.kernels",
    "jkofast.compat.torch",
}

# the entries the main job runs (jkofast run: BM25 / tokens, pools, baselines, energy, the JKO
# rerank paths it uses, metrics), each on the job's argument types only; the rest compile lazily
# (SGR's "sgr" entry too, though the sgr and jko_sparse rows call its kernels)
DEFAULT = ("topk", "text", "index", "energy", "pools", "baselines", "evaluation", "jko")


def _import_wrappers(path=None, prefix: str = "jkofast.") -> None:
    """Import every module of the package (private ones too: they may register warm-ups), sub-packages recursively."""
    for mod in pkgutil.iter_modules(jkofast.__path__ if path is None else path, prefix):
        if mod.name in _SKIP or mod.name.rsplit(".", 1)[-1] == "__main__":
            continue
        m = importlib.import_module(mod.name)
        if mod.ispkg:
            _import_wrappers(m.__path__, mod.name + ".")


# the module that registers each warm-up entry (tests/test_warmup.py checks it against the registrations):
# a warm-up of named entries imports just these, not every module of the package (a compile-ahead
# child starts compiling about a second sooner)
_HOMES = {
    "baselines": "jkofast.pools.baselines",
    "baselines.float64": "jkofast.pools.baselines",
    "cross_encoder": "jkofast.encode.cross",
    "encode": "jkofast.encode.bert",
    "energy": "jkofast.jko.energy",
    "eval.stability": "jkofast.eval.stability",
    "evaluate_files": "jkofast.eval.fastread",
    "evaluation": "jkofast.eval.metrics",
    "evaluation.all": "jkofast.eval.metrics",
    "index": "jkofast.sparse.index",
    "index.variants": "jkofast.sparse.index",
    "jko": "jkofast.jko.solver",
    "jko.compat": "jkofast.compat._solver",
    "jko.compat.grad": "jkofast.compat._solver",
    "jko.confidence": "jkofast.jko.confidence",
    "jko.flow": "jkofast.jko.solver",
    "jko.flow.duals": "jkofast.jko.solver",
    "jko.paths": "jkofast.jko.solver",
    "jko.rows": "jkofast.jko.solver",
    "multires": "jkofast.jko.multires",
    "multires.cluster": "jkofast.jko.multires",
    "nm_jko": "jkofast.jko.metric",
    "ot": "jkofast.ot.entropic",
    "pools": "jkofast.pools.candidates",
    "sgr": "jkofast.sgr.retriever",
    "sgr.build": "jkofast.sgr.streaming",
    "sgr.one_query": "jkofast.sgr.retriever",
    "sgr.search": "jkofast.sgr.retriever",
    "sinkhorn": "jkofast.ot.sinkhorn",
    "text": "jkofast.sparse.vocabulary",
    "theory": "jkofast.jko.theory",
    "topk": "jkofast.selection",
    "topk.variants": "jkofast.selection",
}


def _import_for(features) -> None:
    """Import the modules registering ``features``: only theirs for the default set or known entries, else all."""
    names = list(DEFAULT) if features == "default" else None if isinstance(features, str) else list(features)
    if names is None or not set(names) <= _HOMES.keys():
        _import_wrappers()
        return
    for name in names:
        importlib.import_module(_HOMES[name])


def _selected(features) -> list[str]:
    """Return the warm-up names of ``features`` ("default", "all" or names); unknown names raise."""
    if isinstance(features, str) and features in ("default", "all"):
        names = sorted(WARMUPS) if features == "all" else [n for n in DEFAULT if n in WARMUPS]
        return names
    names = [features] if isinstance(features, str) else list(features)
    unknown = sorted(set(names) - set(WARMUPS))
    if unknown:
        raise ValueError(f"features: unknown warm-up entries {unknown}; choose from {sorted(WARMUPS)}")
    return names


def lazy_entries(features="default") -> list[str]:
    """Return the registered warm-up entries that ``warmup(features)`` leaves to compile on first use."""
    _import_wrappers()
    done = set(_selected(features))
    return [n for n in sorted(WARMUPS) if n not in done]


# compile seconds per entry on an empty cache, one core of a quiet machine (`jkofast warmup --jobs 1
# --json`; the entries outside the main job's from the per-entry lines of a bounds-checked two-process
# `warmup --all`, scaled by 0.87: the sgr entry compiled in 45.6 s unchecked, 52.6 s bounds-checked),
# rounded: they order the entries a parallel warm-up's processes take (costliest first) and make the
# commands' "about N s" notice; an entry not named counts _COST_OTHER
_COST = {
    "jko": 18.0,
    "jko.flow": 9.0,
    "sgr": 46.0,
    "sgr.search": 18.0,
    "evaluation": 5.0,
    "baselines": 6.0,
    "pools": 4.0,
    "multires": 34.0,
    "theory": 21.0,
    "text": 2.0,
    "index": 2.0,
    "energy": 2.0,
    "index.variants": 15.0,
    "jko.paths": 14.0,
    "evaluate_files": 9.0,
    "encode": 5.0,
    "nm_jko": 3.0,
    "eval.stability": 3.0,
    "ot": 3.0,
    "sgr.one_query": 2.5,
    "sgr.build": 9.0,
}
_COST_OTHER = 1.5
# entries that compile on top of another entry's kernels: run in that entry's process (alone,
# "sgr.build" compiles 22 CPU s, the fit's kernels included; after "sgr", 9 s). The parts that compile-ahead
# children take ("jko.flow", "jko.rows", "jko.flow.duals", "sgr.search", "multires.cluster") run after the
# entries that compile them too: then they only load
_AFTER = {
    "sgr.build": "sgr",
    "sgr.search": "sgr",
    "jko.flow": "jko",
    "jko.rows": "jko",
    "jko.flow.duals": "jko.paths",
    "multires.cluster": "multires",
}


class CompileRecorder(_event.Listener):
    """Record every kernel compiled in this process while installed (``with CompileRecorder() as rec:``).

    Numba announces a compile (a cache miss) with a ``numba:compile`` event around it; a kernel's
    callees compile inside its own event, so each signature's seconds here are its own (the
    callees' excluded). Loads from the on-disk cache are not compiles and are not recorded.
    ``rows()`` lists ``(kernel, signature, seconds)``.
    """

    def __init__(self) -> None:
        self._stack: list[list] = []  # [start time, seconds spent in nested compiles]
        self.compiled: list[tuple[str, str, float]] = []

    def on_start(self, event) -> None:
        """Note a compile starting (Numba event listener)."""
        self._stack.append([time.perf_counter(), 0.0])

    def on_end(self, event) -> None:
        """Record a compile that ended: its signature and its own seconds (Numba event listener)."""
        t0, nested = self._stack.pop()
        total = time.perf_counter() - t0
        if self._stack:
            self._stack[-1][1] += total
        disp = event.data["dispatcher"]
        name = f"{disp.py_func.__module__}.{disp.py_func.__qualname__}"
        sig = "(" + ", ".join(str(a) for a in event.data["args"]) + ")"
        self.compiled.append((name, sig, total - nested))

    def __enter__(self) -> CompileRecorder:
        _event.register("numba:compile", self)
        return self

    def __exit__(self, *exc) -> None:
        _event.unregister("numba:compile", self)

    def rows(self) -> list[tuple[str, str, float]]:
        """Return ``(kernel, signature, own compile seconds)`` per compiled signature, slowest first."""
        return sorted(self.compiled, key=lambda r: -r[2])


def clear_cache() -> tuple[str, int]:
    """Remove jkofast's compiled kernels from its cache folder; return ``(folder, files removed)``.

    The folder is ``JKOFAST_CACHE_DIR`` (default ``~/.cache/jkofast/numba``): its sub-folders that
    hold only Numba cache files (every version's) are removed, anything else is left alone. With
    ``NUMBA_CACHE_DIR`` set, kernels are cached there instead, which is Numba's to manage.
    """
    from jkofast import _config

    root, n = _config.CACHE_DIR, 0
    if not os.path.isdir(root):
        return root, 0
    for entry in os.scandir(root):
        if entry.is_dir(follow_symlinks=False) and only_cache_files(entry.path):
            n += sum(len(files) for _, _, files in os.walk(entry.path))
            shutil.rmtree(entry.path, ignore_errors=True)
    return root, n


def compile_cost(name: str) -> float:
    """Rough compile seconds of warm-up entry ``name`` on a cold cache (one core, a quiet machine)."""
    return _COST.get(name, _COST_OTHER)


def _units(names: list[str]) -> list[list[str]]:
    """``names`` as units run in one process, costliest first (ties by name, the same order in every process).

    An entry of ``_AFTER`` goes with the entry it builds on (after it) when both are in ``names``.
    """
    follow: dict[str, list[str]] = {}
    for name in names:
        if _AFTER.get(name) in names:
            follow.setdefault(_AFTER[name], []).append(name)
    units = [[name, *follow.get(name, [])] for name in names if _AFTER.get(name) not in names]
    return sorted(units, key=lambda u: (-sum(_COST.get(x, _COST_OTHER) for x in u), u[0]))


# set for the child processes of a parallel warm-up: the folder where a process claims a unit
CLAIMS_ENV = "_JKOFAST_WARMUP_CLAIMS"


def _run(names: list[str], verbose: bool, times: dict[str, float], progress: str | None = None) -> dict[str, float]:
    """Run the warm-ups ``names`` in order, adding their seconds to ``times``; return ``times``.

    With ``progress`` (a file's path), each entry's name is appended to that file as a line when it is done.
    """
    for name in names:
        t0 = time.perf_counter()
        WARMUPS[name]()
        times[name] = time.perf_counter() - t0
        if verbose:
            print(f"warmup {name}: {times[name]:.2f}s")
        if progress:
            with open(progress, "a", encoding="utf-8") as f:
                f.write(name + "\n")
    return times


def _run_claimed(names: list[str], claims: str, verbose: bool) -> dict[str, float]:
    """Run the units of ``names`` this process claims first in the folder ``claims``; seconds per entry run.

    Every process of a parallel warm-up walks the same units, costliest first, and runs a unit
    when it creates the unit's claim file (``O_EXCL``: exactly one process does): the processes
    share the work as they go, whatever each entry really costs (entries that build on kernels
    another entry compiled cost less after it, so fixed estimates balance badly).
    """
    times: dict[str, float] = {}
    for unit in _units(names):
        try:
            os.close(os.open(os.path.join(claims, unit[0]), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        _run(unit, verbose, times)
    return times


def _warmup_parallel(names: list[str], processes: int, verbose: bool) -> dict[str, float]:
    """Run ``names`` in ``processes`` processes: this one and children (``jkofast warmup --only``).

    Each process takes the next unclaimed unit when it is done with one (:func:`_run_claimed`).
    """
    n = min(processes, len(_units(names)))
    with tempfile.TemporaryDirectory(prefix="jkofast-warmup-") as claims:
        children = [
            subprocess.Popen(
                jkofast_command(["warmup", "--jobs", "1", "--json", "--only", ",".join(names)]),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env={**os.environ, CLAIMS_ENV: claims},
            )
            for _ in range(n - 1)
        ]
        times = _run_claimed(names, claims, verbose)
        for child in children:
            out, err = child.communicate()
            if child.returncode == 0:
                got = json.loads(out.decode())["compiled"]
                times.update(got)
                if verbose:
                    for name, sec in got.items():
                        print(f"warmup {name}: {sec:.2f}s (child process)")
            elif verbose:
                last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {child.returncode}"]
                print(f"warmup: a child process failed ({last[0]}); its entries compile here")
    # what a child claimed but did not report (it failed to start or crashed): compiled here, nothing lost
    missing = [name for name in names if name not in times]
    if missing:
        times.update(warmup(verbose, missing))
    return {name: times[name] for name in names}


def warmup(verbose: bool = False, features: str | Sequence[str] = "default", processes: int = 1) -> dict[str, float]:
    """Run the registered warm-ups of ``features`` (compiles, or loads from Numba's on-disk cache).

    Parameters
    ----------
    verbose : bool
        Print one line per warm-up with its time.
    features : {"default", "all"} or sequence of str
        ``"default"``: the kernels of the main job (``DEFAULT``: top-k, tokens and sparse index,
        energy, pools, baselines, metrics, and the JKO rerank paths the main job runs: the
        implicit gradient with float32 operators on dense float32 rows and on sparse rows, and
        the KL proximal term); ``"all"``: every registered entry; or a list of entry names
        (``lazy_entries()`` lists the others).
    processes : int
        Processes to compile in (Numba compiles on one core): 1 = this process only; more =
        this one and ``processes - 1`` child processes (``jkofast warmup --only``), each taking
        the next entry not yet taken (costliest first) when done with one. The children's
        kernels land in the on-disk cache, which this process loads on first use (milliseconds
        per kernel); what a child that fails took is compiled here. ``jkofast warmup`` uses every core.

    Returns
    -------
    dict of str to float
        Seconds per warm-up entry (``"topk"``, ``"index"``, ``"jko"``, ...), in whichever
        process ran it.

    Raises
    ------
    ValueError
        An unknown entry name in ``features``, or ``processes`` < 1.

    Examples
    --------
    >>> import jkofast
    >>> times = jkofast.warmup()  # doctest: +SKIP
    """
    processes = check_int(processes, "processes", min_value=1)
    _import_for(features)
    names = _selected(features)
    progress = os.environ.pop(PROGRESS_ENV, None)  # a compile-ahead child's (jkofast._ahead), not inherited
    if processes > 1 and len(names) > 1:
        return _warmup_parallel(names, processes, verbose)
    claims = os.environ.pop(CLAIMS_ENV, None)  # not inherited by any process an entry starts
    if claims:  # a child of a parallel warm-up: the units it claims first
        return _run_claimed(names, claims, verbose)
    return _run(names, verbose, {}, progress)
