"""Instruction counts per kernel family under callgrind: the regression check noise cannot fool.

    python benchmarks/tools/instructions.py --json                # {family: instructions}, working tree
    python benchmarks/tools/instructions.py --base HEAD~1         # + REV (its jkofast/, exported); exit 1
                                                                  #   when a family grows > --threshold
    python benchmarks/tools/instructions.py --families metrics,bm25_topk --repeat 3   # spread

Each count is the instructions one warm run of the family's workload executes
(``benchmarks/instr_workloads.py``: what runs, how the region is marked).  The process runs under
``valgrind --tool=callgrind --instr-atstart=no`` behind ``setarch -R`` (no address randomisation),
with ``PYTHONHASHSEED=0`` and every thread pool pinned to one thread (a spinning pool's
instructions would count), and Numba generating code for one fixed CPU (x86-64: ``haswell``, AVX2
+ FMA, what valgrind emulates, the host's AVX-512 would not run under it; arm64: ``generic``), so
the counts are also the same on another machine of the architecture with the same library
versions.  The child's environment is reduced to a few variables, glibc's ``rep movsb`` copies
are turned off (valgrind counts them per byte, and glibc picks them by address), and the child
finds jkofast and the workloads in copies at a fixed path (``TMP/jkofast-instr/NN``): the same
commit counts the same from any checkout.  Before the counted process, the same families run once
natively with the same settings: they compile into a cache of their own (``--cache-dir``), which
the counted process then loads.

With ``--base`` only the families whose inputs changed are counted, on both sides (a module a
family imports changed in code, or a data file; :func:`for_families`); the others read
``unchanged``.  What a family imports is listed from a native run with the caller's own settings
and kernel cache (:func:`list_imports`), where CI's warm-up has compiled the kernels already.
A family's count is compared with the base's: ``ratio = tree / base``; above ``1 + threshold``
(default 2 %) it is a regression unless ``benchmarks/instructions_accepted.txt`` has a line
``FAMILY reason`` (an accepted regression: commit the line with the change; remove it afterwards).
Exit status: 0 (no regression), 1 (a regression; the table names it), 2 (cannot count: no valgrind,
not Linux on x86-64 or arm64, a child failed).  docs/instruction_counts.md says when counts and time disagree.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import fcntl
import glob
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WORKLOADS = os.path.join(ROOT, "benchmarks", "instr_workloads.py")
ACCEPTED = os.path.join(ROOT, "benchmarks", "instructions_accepted.txt")
THRESHOLD = 0.02

ARCH = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine())
# The child's environment: deterministic counts (see the module docstring).
PINNED_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONHASHSEED": "0",
}
# One fixed code-generation target per architecture, what valgrind runs: x86-64 Haswell (AVX2 +
# FMA; valgrind 3.19 runs no AVX-512); arm64: LLVM's generic ARMv8-A (not run on arm64 hardware).
CPU_ENV = {
    "x86_64": {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "+avx2,+fma"},
    "aarch64": {"NUMBA_CPU_NAME": "generic"},
}
# glibc's memcpy / memset switch to ``rep movsb`` / ``rep stosb`` above a size threshold, and
# between the two by the source and destination's page offsets; valgrind counts every iteration of
# a ``rep`` instruction (one per byte), so a copy's count depended on where the heap put it (0.7 %
# of the metrics family between two checkouts).  With these thresholds out of reach the vector
# loops always copy (a count of a few instructions per 32 bytes, whatever the addresses).
GLIBC_TUNABLES = ":".join(  # x86-64 only: other architectures' string functions have no rep copies
    [
        "glibc.cpu.x86_rep_movsb_threshold=0xffffffffffffffff",
        "glibc.cpu.x86_rep_stosb_threshold=0xffffffffffffffff",
        "glibc.cpu.x86_non_temporal_threshold=0xfffffffffffffff",
    ]
)
# What the counted child keeps of the caller's environment (everything else is dropped: a
# variable's length moves the initial stack, and with it every later address).
KEPT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "XDG_CACHE_HOME", "LD_LIBRARY_PATH")
VALGRIND_ARGS = ["--tool=callgrind", "--instr-atstart=no", "--dump-line=no", "--dump-instr=no"]


def _workloads():
    spec = importlib.util.spec_from_file_location("instr_workloads", WORKLOADS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def families(examples: bool = False) -> list[str]:
    """The family names, in counting order (``examples``: and the docs' ungated examples)."""
    mod = _workloads()
    return list(mod.FAMILIES) + (list(mod.EXAMPLES) if examples else [])


def unavailable() -> str | None:
    """Why counts cannot be taken here (None: they can)."""
    if sys.platform != "linux" or ARCH is None:
        return f"instruction counts need Linux on x86-64 or arm64 (this is {sys.platform} {platform.machine()})"
    if shutil.which("valgrind") is None:
        return "instruction counts need valgrind (apt-get install valgrind)"
    if shutil.which("setarch") is None:
        return "instruction counts need setarch (util-linux)"
    return None


def _setarch() -> list[str]:
    """``setarch ARCH -R`` (no address randomisation), or nothing where the sandbox refuses it."""
    cmd = ["setarch", platform.machine(), "-R"]
    ok = subprocess.run([*cmd, "true"], capture_output=True).returncode == 0
    return cmd if ok else []


def default_cache_dir() -> str:
    """``$JKOFAST_INSTRUCTIONS_CACHE``, else ``~/.cache/jkofast/instructions`` (``XDG_CACHE_HOME`` honoured)."""
    if os.environ.get("JKOFAST_INSTRUCTIONS_CACHE"):
        return os.environ["JKOFAST_INSTRUCTIONS_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jkofast", "instructions")


def _pycache(cache_dir: str) -> str:
    return os.path.join(cache_dir, "pycache")


def child_env(tree: str | None, cache_dir: str) -> dict[str, str]:
    """The counted child's environment: jkofast from ``tree`` (None: the installed one, as under
    asv), the pinned settings, the harness cache, and of the caller's environment only
    :data:`KEPT_ENV`."""
    env = {k: v for k, v in os.environ.items() if k in KEPT_ENV}
    env.update(
        PINNED_ENV,
        JKOFAST_CACHE_DIR=cache_dir,
        JKOFAST_NUMBA_CACHE="1",
        PYTHONPYCACHEPREFIX=_pycache(cache_dir),
    )
    env.update(CPU_ENV[ARCH])
    if ARCH == "x86_64":
        env["GLIBC_TUNABLES"] = GLIBC_TUNABLES
    if tree is not None:
        env["PYTHONPATH"] = tree
    return env


class _SamePaths:
    """Where the counted child finds the harness and the tree: copies of their ``benchmarks/``
    and ``jkofast/`` in ``TMP/jkofast-instr/NN/h`` and ``.../t``, and the folder it starts in;
    ``NN`` is the first slot no other count holds (a lock per slot), so the paths are the same
    strings from any checkout.

    Python keeps the paths it was given (module ``__file__``, ``sys.path``, code objects' file
    names) and jkofast resolves some (``realpath``); their lengths decide how much the imports
    allocate, so where the heap puts the measured region's objects, which a few instructions
    depend on (the interpreter's method cache is indexed by addresses): 0.03 % of a family
    between two checkouts.  Copies (not links: a link resolves to the checkout) make those
    paths the same.  The byte-code cache goes with them (``PYTHONPYCACHEPREFIX``, in the harness
    cache): a checkout's own ``__pycache__`` names the checkout's path, and loading it renames
    every code object's file, which allocates differently by checkout."""

    def __init__(self, pycache: str):
        self.pycache = pycache

    def __enter__(self):
        root = os.path.join(tempfile.gettempdir(), "jkofast-instr")
        os.makedirs(root, exist_ok=True)
        for slot in range(100):
            self._lock = open(os.path.join(root, f"{slot:02d}.lock"), "w")
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self._lock.close()
                continue
            self.dir = os.path.join(root, f"{slot:02d}")
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir)
            # the last count's byte code of this slot: another tree's (same path, maybe same stamps)
            shutil.rmtree(os.path.join(self.pycache, self.dir.lstrip(os.sep)), ignore_errors=True)
            return self
        raise RuntimeError(f"no free slot in {root} (100 counts running?)")

    def copy(self, name: str, tree: str, package: str) -> str:
        """Copy ``tree/package`` (modification times kept, no byte code) to ``SLOT/name``;
        returns ``SLOT/name``, the folder to put first on ``sys.path``."""
        dest = os.path.join(self.dir, name)
        shutil.copytree(
            os.path.join(tree, package),
            os.path.join(dest, package),
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__", "results"),
        )
        return dest

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)
        self._lock.close()


def parse_dumps(out_prefix: str, events: bool = False) -> dict:
    """``{family: instructions}`` from the per-family dumps ``out_prefix.N`` a child wrote
    (``events=True``: ``{family: {event: count}}``, e.g. the cache misses of ``--cache-sim=yes``)."""
    counts = {}
    for path in glob.glob(out_prefix + ".*"):
        label = total = names = None
        with open(path) as fh:
            for line in fh:
                if line.startswith("desc: Trigger: Program termination"):
                    label = ""  # a process's final dump: nothing is collected outside the regions
                elif line.startswith("desc: Trigger: Client Request: "):
                    label = line.split(": ", 3)[-1].strip()
                elif line.startswith("events:"):
                    names = line.split()[1:]
                elif line.startswith("totals:"):
                    total = [int(v) for v in line.split()[1:]]
        if label == "":
            if total and total[0] != 0:
                raise RuntimeError(f"{path}: instructions counted outside a family's region")
            continue
        if label is None or total is None:
            raise RuntimeError(f"{path}: not a per-family callgrind dump")
        counts[label] = dict(zip(names or ["Ir"], total)) if events else total[0]
    return counts


def count(
    tree: str | None = ROOT,
    names: list[str] | None = None,
    cache_dir: str | None = None,
    log=None,
    *,
    threads: int = 1,
    cache_sim: bool = False,
    timed: dict | None = None,
) -> dict:
    """Count ``names`` (default: every family) for the jkofast of ``tree`` (None: the installed
    jkofast of this interpreter): ``{family: instructions}``.  ``threads``: NUMBA_NUM_THREADS of the
    child (the docs' threading example; the gate always counts 1); ``cache_sim``: ``--cache-sim=yes``,
    ``{family: {event: count}}`` returned; ``timed``: a dict filled with each family's native median
    seconds (from the warm-up process).  What each family imports: :func:`list_imports`.

    Raises RuntimeError (with the reason) when counts cannot be taken or a child fails."""
    why = unavailable()
    if why:
        raise RuntimeError(why)
    names = list(names or families())
    cache_dir = cache_dir or default_cache_dir()
    log = log or sys.stderr
    with _SamePaths(_pycache(cache_dir)) as paths:
        harness = paths.copy("h", ROOT, "benchmarks")
        env = child_env(tree and paths.copy("t", os.path.abspath(tree), "jkofast"), cache_dir)
        env["NUMBA_NUM_THREADS"] = str(threads)
        counts = _count(tree, names, env, harness, paths.dir, log, cache_sim, timed)
    return counts


def list_imports(tree: str, names: list[str]) -> dict:
    """``{family: package files}``: what each family's native run imports (paths relative to ``jkofast/``).

    Run with this process's own environment (the CPU, the compile switches and the kernel cache of
    the caller; jkofast from ``tree``), not the counted child's pinned one: in CI the warm-up
    step has compiled the kernels for these settings, so the families load them instead of
    compiling every workload for the pinned CPU, which only a counted family needs.

    Raises RuntimeError (with the child's error) when a family fails.
    """
    path = os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    res = subprocess.run([sys.executable, WORKLOADS, "--native", *names], env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"listing the imports of {tree} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])["families"]


def _count(tree, names, env, harness, cwd, log, cache_sim, timed) -> dict:
    """:func:`count` with the child's environment and paths fixed."""
    workloads = os.path.join(harness, os.path.relpath(WORKLOADS, ROOT))
    t0 = time.perf_counter()
    # 1. natively, same settings: compile (or load) every kernel the workloads use into the harness cache
    flags = ["--native"] + (["--time"] if timed is not None else [])
    warm = subprocess.run([sys.executable, workloads, *flags, *names], env=env, cwd=cwd, capture_output=True, text=True)
    if warm.returncode != 0:
        raise RuntimeError(f"warm-up of {tree} failed:\n{warm.stderr[-3000:]}")
    report = json.loads(warm.stdout.strip().splitlines()[-1])
    if timed is not None:
        timed.update(report["seconds"])
    t1 = time.perf_counter()
    # 2. counted: one process, one callgrind dump per family
    with tempfile.TemporaryDirectory(prefix="jkofast-instr-") as tmp:
        prefix = os.path.join(tmp, "cg.out")
        sim = ["--cache-sim=yes"] if cache_sim else []
        cmd = [
            *_setarch(),
            "valgrind",
            *VALGRIND_ARGS,
            *sim,
            f"--callgrind-out-file={prefix}.%p",  # one file per process (each family's is a fork)
            sys.executable,
            workloads,
        ]
        res = subprocess.run([*cmd, *names], env=env, cwd=cwd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"counted run of {tree} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
        counts = parse_dumps(prefix, events=cache_sim)
    missing = [n for n in names if n not in counts]
    if missing:
        raise RuntimeError(f"no count for {', '.join(missing)}")
    log.write(f"instructions: {tree}: warm-up {t1 - t0:.0f} s, counted run {time.perf_counter() - t1:.0f} s\n")
    return {n: counts[n] for n in names}


def read_accepted(path: str = ACCEPTED) -> dict[str, str]:
    """``{family: reason}`` from the accepted-regressions file (``FAMILY reason`` lines, ``#`` comments).

    A line without a reason is refused (ValueError): an override says why."""
    accepted = {}
    if not os.path.exists(path):
        return accepted
    with open(path) as fh:
        for no, raw in enumerate(fh, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            family, _, reason = line.partition(" ")
            if not reason.strip():
                raise ValueError(f"{path}:{no}: '{family}' needs a reason ('FAMILY reason')")
            accepted[family] = reason.strip()
    return accepted


def compare(tree: dict, base: dict, threshold: float = THRESHOLD, accepted: dict | None = None) -> list[dict]:
    """One row per family counted on both sides: counts, ratio and verdict.

    verdict: ``regression`` (ratio > 1 + threshold, not accepted), ``accepted`` (same, with a line
    in the accepted file), ``ok``; a family only one side has is ``new`` / ``gone`` (never fails)."""
    accepted = accepted or {}
    rows = []
    for family in list(tree) + [f for f in base if f not in tree]:
        t, b = tree.get(family), base.get(family)
        if t is None or b is None:
            rows.append(
                {"family": family, "base": b, "tree": t, "ratio": None, "verdict": "new" if b is None else "gone"}
            )
            continue
        ratio = t / b
        verdict = "ok"
        if ratio > 1 + threshold:
            verdict = "accepted" if family in accepted else "regression"
        rows.append({"family": family, "base": b, "tree": t, "ratio": ratio, "verdict": verdict})
    return rows


def table(rows: list[dict], accepted: dict | None = None) -> str:
    """The comparison as aligned text (one line per family; an accepted line shows its reason)."""
    accepted = accepted or {}
    lines = [f"{'family':<16} {'base':>15} {'tree':>15} {'ratio':>8}  verdict"]
    for r in rows:
        b = "-" if r["base"] is None else f"{r['base']:,}"
        t = "-" if r["tree"] is None else f"{r['tree']:,}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.4f}"
        note = f" ({accepted[r['family']]})" if r["verdict"] == "accepted" else ""
        lines.append(f"{r['family']:<16} {b:>15} {t:>15} {ratio:>8}  {r['verdict']}{note}")
    return "\n".join(lines)


def _commit(rev: str) -> str:
    """The full id of commit ``rev`` (ValueError: not a commit of this repository)."""
    sha = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--verify", rev + "^{commit}"], capture_output=True, text=True
    )
    if sha.returncode != 0:
        raise ValueError(f"--base: {rev!r} is not a commit of this repository")
    return sha.stdout.strip()


def _export(sha: str, dest: str) -> str:
    """``jkofast/`` of commit ``sha`` (``git archive``) under ``dest``; returns ``dest``.  The
    counted child sees only a tree's ``jkofast/`` (:class:`_SamePaths`), so that is all a base needs."""
    archive = subprocess.Popen(["git", "-C", ROOT, "archive", "--format=tar", sha, "jkofast"], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        raise RuntimeError(f"git archive {sha} failed")
    return dest


_IGNORED = ("__pycache__", "results")  # not copied for the child (:meth:`_SamePaths.copy`)


def _blob(data: bytes) -> str:
    """Git's blob id of ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _tree_files(tree: str) -> dict[str, str]:
    """``{path under jkofast/: blob id}`` of what the child's copy of ``tree`` holds."""
    pkg, files = os.path.join(tree, "jkofast"), {}
    for folder, dirs, names in os.walk(pkg):
        dirs[:] = [d for d in dirs if d not in _IGNORED]
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as fh:
                files[os.path.relpath(path, pkg)] = _blob(fh.read())
    return files


def _rev_files(rev: str) -> dict[str, str]:
    """``{path under jkofast/: blob id}`` of commit ``rev``."""
    out = subprocess.run(
        ["git", "-C", ROOT, "ls-tree", "-r", "-z", rev, "--", "jkofast/"], capture_output=True, check=True
    ).stdout.decode()
    files = {}
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        rel = os.path.relpath(path, "jkofast")
        if not set(rel.split("/")) & set(_IGNORED):
            files[rel] = meta.split()[2]
    return files


def _code_digest(data: bytes) -> str:
    """A digest of what a module runs: its syntax tree without docstrings (comments, blank lines
    and positions are not in the tree).  Source that does not parse is compared byte for byte."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return "bytes:" + _blob(data)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def _same_code(path: str, rev: str, tree: str) -> bool:
    """Whether ``jkofast/<path>`` runs the same code in ``tree`` and in commit ``rev`` (both exist)."""
    with open(os.path.join(tree, "jkofast", path), "rb") as fh:
        here = fh.read()
    there = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:jkofast/{path}"], capture_output=True, check=True).stdout
    return _code_digest(here) == _code_digest(there)


def changed_files(rev: str, tree: str = ROOT) -> set[str]:
    """The files under ``jkofast/`` that differ between ``tree`` and commit ``rev``.

    A module counts when its code changed (its syntax tree without docstrings: comments and layout
    are not in it), any other file when its bytes did; a module removed since ``rev`` is listed
    as ``"removed: PATH"``.  Each file is read once; only the modules whose bytes differ are parsed.
    """
    here, there = _tree_files(tree), _rev_files(rev)
    out = set()
    for path in set(here) | set(there):
        a, b = here.get(path), there.get(path)
        if a == b or (path.endswith(".py") and a is not None and b is not None and _same_code(path, rev, tree)):
            continue
        out.add("removed: " + path if a is None and path.endswith(".py") else path)
    return out


def for_families(changed: set[str], imported: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per family, the files of ``changed`` (:func:`changed_files`) its counted run can depend on.

    The counted process is deterministic: with the same interpreter, environment and paths (one
    harness counts both sides, :class:`_SamePaths`) it runs the same code on the same data, and the
    same commit counts the same to within the heap-layout spread (``docs/instruction_counts.md``).
    What can differ between two trees is only their ``jkofast/``, and of it a family's count
    depends only on the modules it imports (``imported``: ``{family: files}``, from the tree's
    native run, each family in a fresh fork) -- its kernels' callees are imported with them -- and
    on the package's data files.  A module removed since the base changes every family (the base
    may have imported it where the tree falls back).  An empty list: that family's count cannot
    have moved."""
    removed = sorted(p for p in changed if p.startswith("removed: "))
    if removed:
        return {family: removed for family in imported}
    data = {p for p in changed if not p.endswith(".py")}
    return {family: sorted((set(files) & changed) | data) for family, files in imported.items()}


def _some(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (" ..." if len(paths) > 5 else "")


def _unchanged(why: str, args) -> int:
    """Say why no count can have moved since ``args.base`` (nothing counted); exit status 0."""
    print(
        json.dumps({"unchanged": True, "reason": why})
        if args.json
        else f"instructions: {why} since {args.base}: every count is the same (not counted)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print {family: instructions} (with --base: the table's rows)")
    ap.add_argument("--base", metavar="REV", help="also count REV (its jkofast/ exported) and compare")
    ap.add_argument(
        "--always-count",
        action="store_true",
        help="with --base: count both sides even when no file the workloads use changed",
    )
    ap.add_argument("--threshold", type=float, default=THRESHOLD, help="allowed growth (default 0.02 = 2 %%)")
    ap.add_argument("--accepted", default=ACCEPTED, help="accepted regressions, 'FAMILY reason' lines")
    ap.add_argument("--families", help="comma-separated subset (default: all)")
    ap.add_argument("--repeat", type=int, default=1, help="count the tree N times; print each family's spread")
    ap.add_argument("--threads", type=int, default=1, help="NUMBA_NUM_THREADS of the counted child (default 1)")
    ap.add_argument("--cache-sim", action="store_true", help="callgrind --cache-sim=yes: print cache misses too")
    ap.add_argument("--time", action="store_true", help="also print each family's native median seconds")
    ap.add_argument(
        "--cache-dir",
        default=None,
        help="the harness's compile cache (default $JKOFAST_INSTRUCTIONS_CACHE or ~/.cache/jkofast/instructions)",
    )
    args = ap.parse_args(argv)
    names = args.families.split(",") if args.families else families()
    unknown = [n for n in names if n not in families(examples=True)]
    if unknown:
        ap.error(f"--families: unknown {', '.join(unknown)} (one of {', '.join(families(examples=True))})")
    if args.base and (args.cache_sim or args.time or args.threads != 1 or args.repeat != 1):
        ap.error("--base compares plain counts: --cache-sim, --time, --threads and --repeat go without it")
    try:
        accepted = read_accepted(args.accepted)
        if args.cache_sim or args.time or args.threads != 1:
            timed = {} if args.time else None
            got = count(ROOT, names, args.cache_dir, threads=args.threads, cache_sim=args.cache_sim, timed=timed)
            rows = {
                n: {**(got[n] if args.cache_sim else {"Ir": got[n]}), **({"seconds": timed[n]} if timed else {})}
                for n in names
            }
            print(json.dumps(rows, indent=1))
            return 0
        if args.base is None:
            runs = [count(ROOT, names, args.cache_dir) for _ in range(args.repeat)]
            if args.repeat > 1:
                for n in names:
                    vals = [r[n] for r in runs]
                    spread = (max(vals) - min(vals)) / min(vals)
                    sys.stderr.write(f"{n:<16} {min(vals):>15,} spread {spread:.5%} over {len(vals)} counts\n")
            print(json.dumps(runs[0], indent=1) if args.json else "\n".join(f"{n} {c}" for n, c in runs[0].items()))
            return 0
        sha = _commit(args.base)
        same = []
        if not args.always_count:
            # no module of the package changed in code: nothing to run (every module as if imported)
            differs = changed_files(sha)
            if not differs:
                return _unchanged("no module and no data file under jkofast/ changed in code", args)
            # what each family imports, run natively with this process's settings (its kernels load)
            imported = list_imports(ROOT, names)
            changed = for_families(differs, imported)
            same = [n for n in names if not changed[n]]
            names = [n for n in names if changed[n]]
            if not names:
                n_files = len(set().union(*imported.values()))
                return _unchanged(
                    f"no file the workloads use ({n_files} modules imported, the data files) changed in code", args
                )
            for n in names:
                sys.stderr.write(f"instructions: {n}: {len(changed[n])} of its files changed ({_some(changed[n])})\n")
            if same:
                sys.stderr.write(f"instructions: {', '.join(same)}: no file they use changed in code (not counted)\n")
        with tempfile.TemporaryDirectory(prefix="jkofast-base-") as tmp:
            base_tree = _export(sha, tmp)
            # both sides at once (two processes; a count does not depend on the load)
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                base_f = pool.submit(count, base_tree, names, args.cache_dir)
                tree_f = pool.submit(count, ROOT, names, args.cache_dir)
                base, tree = base_f.result(), tree_f.result()
    except (RuntimeError, ValueError) as exc:
        sys.stderr.write(f"instructions: {exc}\n")
        return 2
    rows = compare(tree, base, args.threshold, accepted)
    rows += [{"family": n, "base": None, "tree": None, "ratio": None, "verdict": "unchanged"} for n in same]
    order = {n: i for i, n in enumerate(families(examples=True))}
    rows.sort(key=lambda r: order.get(r["family"], len(order)))
    print(json.dumps(rows, indent=1) if args.json else table(rows, accepted))
    bad = [r["family"] for r in rows if r["verdict"] == "regression"]
    if bad:
        sys.stderr.write(
            f"instructions: {', '.join(bad)} grew by more than {args.threshold:.1%} against {args.base} "
            f"(an accepted regression: a line 'FAMILY reason' in {os.path.relpath(args.accepted, ROOT)})\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
