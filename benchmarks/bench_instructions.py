"""asv suite: instructions per kernel family under callgrind (unit: instructions).

Counts that shared, loaded machines and CI runners cannot blur (a warm run of one small workload
per family; ``benchmarks/instr_workloads.py`` says what runs and how the region is marked,
``benchmarks/tools/instructions.py`` how the process is pinned).  They sit beside the wall-clock
suites in ``asv compare`` and the HTML report; the wall-clock suites stay for what counts miss
(memory traffic, SIMD width, threads: docs/instruction_counts.md).  Where no count can be taken
(no valgrind, not Linux on x86-64 or arm64) every benchmark skips with the reason.  The fast profile (CI's
smoke run) counts only the cheapest family, ``sinkhorn_log`` (about 12 s with its kernels compiled, against 17 s
for ``metrics``), the one ``tests/test_instructions.py`` counts: their kernels compile once into the harness cache.
"""

from __future__ import annotations

import importlib.util
import os

from benchmarks.common import PROFILE

_TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools", "instructions.py")


def _tool():
    spec = importlib.util.spec_from_file_location("jkofast_instructions_tool", _TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class InstructionCounts:
    """Instructions of one warm run of each family's workload (1 thread, fixed inputs).

    All families are counted once per commit, in one process (``setup_cache``: one interpreter
    start under valgrind instead of one per family), in the order the CI gate counts them, so
    asv records the numbers ``instructions.py --json`` prints."""

    params = (["sinkhorn_log"] if PROFILE == "fast" else _tool().families(),)
    param_names = ["family"]
    timeout = 1800
    number = 1
    repeat = 1

    def setup_cache(self):
        if _tool().unavailable():
            return None
        # the installed jkofast of asv's environment (the commit under test), not a source tree
        return _tool().count(None, list(self.params[0]))

    setup_cache.timeout = 3600

    def setup(self, counts, family):
        why = _tool().unavailable()
        if why:
            raise NotImplementedError(why)

    def track_instructions(self, counts, family):
        return counts[family]

    track_instructions.unit = "instructions"
