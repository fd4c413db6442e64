"""The run-file readers of ``jkofast.eval``, side by side in one process, plus the two file engines cold.

    python benchmarks/tools/eval_readers.py                      # 10,000 queries x 100 results (1 M lines)
    python benchmarks/tools/eval_readers.py --queries 1000 --repeat 5 --json

Writes the seeded run and qrels of ``benchmarks/tools/compare_evaluate_files.py`` (the files of
``make_eval_runs.py``) to a temporary folder and times, interleaved round by round after one
warm-up round (so every Numba kernel is compiled or loaded before the clock starts):

* **reading a run**: ``trec.read_run`` (strict, line by line, dict), the line-by-line reader of
  ``read_run_arrays`` (``fastread._read_run_arrays_lines``: every line; the engine of
  ``read_run_arrays`` before it moved to the Numba parse), ``runio.iter_chunks`` (the
  streaming pool reader of ``rerank``: NumPy block path), ``read_run_arrays`` and
  ``read_run_arrays_fast`` (bytes parsed by Numba kernels);
* **evaluating two files** (in process, warm, 1 thread): ``evaluate`` on the line-by-line
  arrays and on ``read_run_arrays``, ``fastread.evaluate_files`` (Numba) and
  ``_npfiles.evaluate_files_numpy`` (NumPy only);
* **cold** (``--cold``): each file engine, and each ``read_run_arrays`` engine, in a fresh
  ``python -c`` (imports and kernel loading included), which is what ``jkofast evaluate
  --n-boot 0`` or a first call in a new process pays.

Prints the median and best seconds of ``--repeat`` rounds per variant, and checks that every
evaluation gives the same per-query values bit for bit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.tools.compare_evaluate_files import interleaved, write_files
from benchmarks.tools.compare_metrics import METRICS

_COLD = {
    "cold evaluate_files (Numba)": "from jkofast.eval.fastread import evaluate_files as f",
    "cold evaluate_files_numpy (NumPy)": "from jkofast.eval._npfiles import evaluate_files_numpy as f",
    "cold read_run_arrays (Numba)": "from jkofast.eval.fastread import read_run_arrays as g",
    "cold read_run_arrays, line by line": "from jkofast.eval.fastread import _read_run_arrays_lines as g",
}
_COLD_TAIL = "import sys\nf(sys.argv[1], sys.argv[2], {metrics!r})\n"
_COLD_READ = "import sys\ng(sys.argv[1])\n"


def _drain(path: str) -> int:
    """Read the whole pool file through the streaming reader; return the lines read."""
    from jkofast.eval.runio import iter_chunks

    return sum(int(c.off[-1]) for c in iter_chunks(path, 1024, lambda *a: None))


def main(argv=None) -> int:
    """Time the readers and engines; print the table (exit status)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="also time each file engine in a fresh process")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from jkofast.eval._npfiles import evaluate_files_numpy
    from jkofast.eval.fastread import _read_run_arrays_lines, evaluate_files, read_run_arrays, read_run_arrays_fast
    from jkofast.eval.metrics import evaluate
    from jkofast.eval.trec import read_qrels, read_run

    out: dict = {"queries": args.queries, "depth": args.depth}
    with tempfile.TemporaryDirectory() as tmp:
        rp, qp = write_files(tmp, args.queries, args.depth)
        out["run_mb"] = round(os.path.getsize(rp) / 1e6, 1)
        read = {
            "read_run (dict, line by line)": lambda: read_run(rp),
            "read_run_arrays, line by line": lambda: _read_run_arrays_lines(rp),
            "runio.iter_chunks (streaming pools)": lambda: _drain(rp),
            "read_run_arrays (Numba)": lambda: read_run_arrays(rp),
            "read_run_arrays_fast (Numba, 1 thread)": lambda: read_run_arrays_fast(rp, n_threads=1),
        }
        best_r, med_r, _ = interleaved(read, args.repeat)
        qrels = read_qrels(qp)
        ev = {
            "evaluate(line-by-line arrays)": lambda: evaluate(_read_run_arrays_lines(rp), qrels, METRICS, n_threads=1),
            "evaluate(read_run_arrays)": lambda: evaluate(read_run_arrays(rp), qrels, METRICS, n_threads=1),
            "evaluate_files (Numba, 1 thread)": lambda: evaluate_files(rp, qp, METRICS, n_threads=1),
            "evaluate_files_numpy (NumPy)": lambda: evaluate_files_numpy(rp, qp, METRICS),
        }
        best_e, med_e, res = interleaved(ev, args.repeat)
        ref = res["evaluate_files (Numba, 1 thread)"]
        for name, r in res.items():
            values = r.per_query  # an EvalResult or a FileScores: both carry per_query
            if list(r.query_ids) != list(ref.query_ids) or any(
                not np.array_equal(values[m], ref.per_query[m]) for m in ref.per_query
            ):
                raise SystemExit(f"{name}: per-query values differ from evaluate_files")
        best, med = {**best_r, **best_e}, {**med_r, **med_e}
        if args.cold:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
            fns = {
                k: (
                    lambda imp=imp: subprocess.run(
                        [
                            sys.executable,
                            "-c",
                            imp + "\n" + (_COLD_READ if " as g" in imp else _COLD_TAIL.format(metrics=list(METRICS))),
                            rp,
                            qp,
                        ],
                        check=True,
                        env=env,
                    )
                )
                for k, imp in _COLD.items()
            }
            b, m, _ = interleaved(fns, args.repeat)
            best.update(b)
            med.update(m)
    out["median_seconds"], out["best_seconds"] = med, best
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{args.queries} queries x {args.depth} ({out['run_mb']} MB), median / best of {args.repeat} rounds")
    for k in med:
        print(f"  {k:44s} {med[k]:8.3f} s  {best[k]:8.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
