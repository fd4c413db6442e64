"""Compile-time tracking: the main entry points' first call in a fresh process, cold and cached.

Each ``track_`` value is the wall time (seconds) of a new interpreter that imports jkofast and
makes one call of the entry point (the drop-in ``compat.run_jko`` compiles only its gradient
path's kernels; ``warmup`` is ``jkofast.warmup()``'s default set): ``cold`` with an empty Numba cache folder
(``NUMBA_CACHE_DIR`` = a new temporary folder: every kernel the call needs is compiled) and
``cached`` with the folder the cold run filled (kernels loaded from disk). ``track_import``
is the bare ``import jkofast``. The regular profile tracks every entry point; the fast profile
(CI) only the smallest, so a broken suite still fails quickly.

``CompileCost`` tracks, per entry point on an empty cache, the seconds of compilation (each
signature's own, as ``jkofast warmup --report`` counts them) and the number of compiled signatures.

``CliStart`` tracks whole CLI processes with a filled cache (medians of 5 runs): ``jkofast --help``,
``jkofast evaluate --n-boot 0`` on seeded runs (1,000 and 10,000 queries x 100; 100 x 100 in the fast
profile, ``benchmarks/tools/make_eval_runs.py``'s data), where pytrec_eval is installed its ratio to a
process that parses and scores the same files with pytrec_eval (``benchmarks/tools/pytrec_eval_files.py``),
and the number of Numba modules that process imports (0).  ``SearchStart`` tracks a whole
``jkofast search`` process on SciFact (regular profile).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.common import PROFILE
from benchmarks.tools.compare_evaluate_files import write_files

POOL = (
    "import numpy as np\nrng = np.random.default_rng(0)\nZ = rng.normal(size=(200, 384))\n"
    "Z /= np.linalg.norm(Z, axis=1, keepdims=True)\nE = -rng.random(200)\n"
)
ENTRY = {
    # the drop-in: published signature, tuned point, float32 pool (what a torch user calls)
    "compat_run_jko": POOL
    + "import jkofast.compat as c\nS = np.clip(Z @ Z.T, -1, 1)\n"
    + "c.run_jko(np.exp(-E) / np.exp(-E).sum(), E, (1 - S) ** 2, np.maximum(S, 0), "
    + "c.JKOConfig(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=5, inner_steps=40))\n",
    # the float32 parity path (dtype="float32": float32 Gibbs operators on the unrolled path)
    "compat_run_jko_float32": POOL
    + "import jkofast.compat as c\nS = np.clip(Z @ Z.T, -1, 1)\n"
    + "c.run_jko(np.exp(-E) / np.exp(-E).sum(), E, (1 - S) ** 2, np.maximum(S, 0), "
    + "c.JKOConfig(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=5, inner_steps=40, dtype='float32'))\n",
    # jkofast warmup: the main job's kernels (the default set; per-feature kernels compile on first use)
    "warmup": "import jkofast\njkofast.warmup()\n",
    "rerank_batch_implicit": POOL
    + "from jkofast.jko.solver import rerank_batch\n"
    + "rerank_batch(E, None, np.array([0, 200]), embeddings=Z.astype(np.float32), config='tuned', n_threads=1)\n",
    "evaluate": "from jkofast.eval.metrics import evaluate\n"
    + "evaluate({'q': {'a': 1.0, 'b': 0.5}}, {'q': {'a': 1}}, ['ndcg@10', 'map'])\n",
    "bm25_search": "from jkofast.pools.retrievers import get_retriever\n"
    + "get_retriever('bm25').fit(['a b c', 'b c d', 'c d e']).search(['b d'], 2)\n",
    "minmax": "import numpy as np\nfrom jkofast.jko.energy import minmax\nminmax(np.array([1.0, 2.0, 3.0]))\n",
}
NAMES = ["minmax"] if PROFILE == "fast" else list(ENTRY)


def _fresh_process(code: str, cache_dir: str) -> float:
    env = {k: v for k, v in os.environ.items() if k != "JKOFAST_CACHE_DIR"}
    env.update(NUMBA_CACHE_DIR=cache_dir, NUMBA_NUM_THREADS=env.get("NUMBA_NUM_THREADS", "1"))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    return time.perf_counter() - t0


class ColdStart:
    """Fresh-process wall time of one call per entry point (seconds), empty and filled cache."""

    params = (NAMES,)
    param_names = ["entry"]
    timeout = 900
    number = 1
    repeat = 1

    def setup(self, entry):
        self.cache = tempfile.mkdtemp(prefix="jkofast-coldstart-")

    def teardown(self, entry):
        shutil.rmtree(self.cache, ignore_errors=True)

    def track_cold_seconds(self, entry):
        """Import + first call with an empty Numba cache (compilation included)."""
        return _fresh_process(ENTRY[entry], self.cache)

    track_cold_seconds.unit = "s"

    def track_cached_seconds(self, entry):
        """Import + first call with the cache the cold run filled."""
        _fresh_process(ENTRY[entry], self.cache)
        return _fresh_process(ENTRY[entry], self.cache)

    track_cached_seconds.unit = "s"


# runs one entry point in a fresh process under jkofast's compile recorder; prints own compile seconds and signatures
RECORDED = (
    "import json, sys\nfrom jkofast.warmups import CompileRecorder\nwith CompileRecorder() as rec:\n"
    "    exec(compile(sys.argv[1], '<entry>', 'exec'), {})\n"
    "print(json.dumps([sum(r[2] for r in rec.rows()), len(rec.rows())]))\n"
)


class CompileCost:
    """What one call per entry point compiles on an empty cache: compile seconds and compiled signatures.

    ``jkofast warmup --report`` lists them kernel by kernel. The seconds are each signature's own
    (callees apart), summed; the signature count does not depend on the machine's load, so an
    accidental specialisation (a second dtype, layout or literal variant) shows as a step.
    """

    params = (NAMES,)
    param_names = ["entry"]
    timeout = 900
    number = 1
    repeat = 1

    def setup(self, entry):
        cache = tempfile.mkdtemp(prefix="jkofast-compilecost-")
        env = {k: v for k, v in os.environ.items() if k != "JKOFAST_CACHE_DIR"}
        env.update(NUMBA_CACHE_DIR=cache, NUMBA_NUM_THREADS=env.get("NUMBA_NUM_THREADS", "1"))
        try:
            out = subprocess.run([sys.executable, "-c", RECORDED, ENTRY[entry]], check=True, env=env,
                                 capture_output=True, text=True)  # fmt: skip
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        self.seconds, self.signatures = json.loads(out.stdout.strip().splitlines()[-1])

    def track_compile_seconds(self, entry):
        """Seconds of Numba compilation of the call on an empty cache (each signature's own, summed)."""
        return self.seconds

    track_compile_seconds.unit = "s"

    def track_compiled_signatures(self, entry):
        """Kernel signatures the call compiles on an empty cache."""
        return self.signatures

    track_compiled_signatures.unit = "signatures"


class ImportTime:
    """``import jkofast`` in a fresh interpreter (seconds; nothing compiles at import)."""

    number = 1
    repeat = 1

    def track_import(self):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import jkofast, jkofast.cli"], check=True)
        return time.perf_counter() - t0

    track_import.unit = "s"


TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools")
# the `jkofast` program; a version without `program` ran `main` as its command
CLI = (
    "import sys\nimport jkofast.cli as c\n"
    "getattr(c, 'program', None) and c.program(sys.argv[1:])\nsys.exit(c.main(sys.argv[1:]))\n"
)


def _process_seconds(*argvs: list[str], runs: int = 5) -> list[list[float]]:
    """Wall times of ``runs`` processes of each ``argv``, run in turn (A B A B ...) after one untimed round."""
    times: list[list[float]] = [[] for _ in argvs]
    for i in range(runs + 1):
        for argv, out in zip(argvs, times):
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            if i:
                out.append(time.perf_counter() - t0)
    return times


EVAL_QUERIES = [100] if PROFILE == "fast" else [1000, 10000]
NUMBA_PROBE = (
    "import sys\nfrom jkofast.cli import main\nmain(sys.argv[1:])\n"
    "print(sum(m.split('.')[0] == 'numba' for m in sys.modules))\n"
)


class CliStart:
    """Whole ``jkofast`` processes with a filled kernel cache (seconds, medians of 5; a ratio; a module count)."""

    params = (EVAL_QUERIES,)
    param_names = ["queries"]
    number = 1
    repeat = 1
    timeout = 900

    def setup(self, queries):
        self.tmp = tempfile.mkdtemp(prefix="jkofast-clistart-")
        self.run, self.qrels = write_files(self.tmp, queries, 100)
        self.args = ["evaluate", "--run", self.run, "--qrels", self.qrels, "--n-boot", "0"]
        self.evaluate = [sys.executable, "-c", CLI, *self.args]

    def teardown(self, queries):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def track_help_seconds(self, queries):
        """``jkofast --help`` (imports no NumPy, no Numba)."""
        return statistics.median(_process_seconds([sys.executable, "-c", CLI, "--help"])[0])

    track_help_seconds.unit = "s"

    def track_evaluate_seconds(self, queries):
        """``jkofast evaluate --n-boot 0`` from the files (the NumPy engine: no kernel to load)."""
        return statistics.median(_process_seconds(self.evaluate)[0])

    track_evaluate_seconds.unit = "s"

    def track_evaluate_over_pytrec_eval(self, queries):
        """Median over pairs of the same process's time / a pytrec_eval process's on the same files (lower: better)."""
        if importlib.util.find_spec("pytrec_eval") is None:
            raise NotImplementedError("pytrec_eval is not installed")
        peer = [sys.executable, os.path.join(TOOLS, "pytrec_eval_files.py"), self.run, self.qrels]
        ours, theirs = _process_seconds(self.evaluate, peer)
        return statistics.median(a / b for a, b in zip(ours, theirs))

    track_evaluate_over_pytrec_eval.unit = "ratio"

    def track_evaluate_numba_modules(self, queries):
        """Numba modules a ``jkofast evaluate --n-boot 0`` process imports (0: the NumPy engine read the files)."""
        out = subprocess.run(
            [sys.executable, "-c", NUMBA_PROBE, *self.args], check=True, capture_output=True, text=True
        )
        return int(out.stdout.strip().splitlines()[-1])

    track_evaluate_numba_modules.unit = "modules"


class SearchStart:
    """``jkofast search --dataset scifact --method bm25`` as a whole process, filled kernel cache (median of 5).

    The command loads the kernels its retriever calls, on first use (no warm-up of the whole sparse wing).
    """

    number = 1
    repeat = 1
    timeout = 900

    def setup(self):
        if PROFILE == "fast":
            raise NotImplementedError("regular profile only (indexes SciFact)")
        from jkofast.datasets.beir import bundled_path

        if not os.path.isdir(bundled_path("scifact")):
            raise NotImplementedError("bundled SciFact is absent")
        self.tmp = tempfile.mkdtemp(prefix="jkofast-searchstart-")
        out = os.path.join(self.tmp, "run.trec")
        self.argv = [sys.executable, "-c", CLI, "search", "--dataset", "scifact", "--method", "bm25", "--out", out]

    def teardown(self):
        if getattr(self, "tmp", None):  # setup skipped (fast profile) made no folder
            shutil.rmtree(self.tmp, ignore_errors=True)

    def track_search_seconds(self):
        """The whole search process: index SciFact, search its test queries, write the run."""
        return statistics.median(_process_seconds(self.argv)[0])

    track_search_seconds.unit = "s"
