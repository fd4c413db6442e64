"""``jkofast parity``: rerank the 30 bundled SciFact parity pools at every stored config.

Compares jkofast (``grad="unrolled"``, and the ``implicit`` fast path) with the published
torch solver's outputs stored in the fixture, and prints agreement and ms/query.
"""

from __future__ import annotations

import json
import os

from jkofast.datasets.beir import parity_fixture_path

_FIXTURE = parity_fixture_path()


def add_parser(sub) -> None:
    """Register ``jkofast parity`` on the sub-command parser ``sub``."""
    p = sub.add_parser("parity", help="rerank the 30 parity pools and compare with the published solver")
    p.add_argument("--fixture", default=_FIXTURE, help="path of jko_reference_scifact30.npz")
    p.add_argument("--queries", type=int, default=30, help="number of pools to use (<= 30)")
    p.add_argument("--configs", default="all", help="comma-separated config keys, or 'all'")
    p.add_argument("--no-implicit", action="store_true", help="skip the implicit fast path")
    p.add_argument(
        "--dtype",
        choices=("float64", "float32"),
        default="float64",
        help="operators of the unrolled runs (float32: the float32 parity path; default float64)",
    )
    p.add_argument("--threads", type=int, default=1, help="Numba threads (default 1)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    """Rerank the fixture's pools at the chosen configs and print the agreement (exit status)."""
    from jkofast._progress import ProgressLine
    from jkofast._threads import numba_threads, resolve_threads
    from jkofast.commands._common import emit
    from jkofast.jko.parity import parity_report
    from jkofast.warmups import warmup

    if not os.path.exists(args.fixture):
        print(f"fixture not found: {args.fixture}")
        return 2
    resolve_threads(args.threads)
    warmup()
    prog = ProgressLine("parity", enabled=not args.json)

    def tick(total: int) -> None:
        prog.set_total(total)
        prog.update()

    with numba_threads(args.threads):
        out, ref_ms = parity_report(
            args.fixture, args.queries, args.configs, not args.no_implicit, tick=tick, dtype=args.dtype
        )
    prog.close()
    try:  # stored as a JSON string: --json printed it as a string holding JSON, not an object
        ref_obj = json.loads(ref_ms)
    except ValueError:
        ref_obj = ref_ms
    lines = [f"{'config':34s} {'max|dp|':>9s} {'max L1':>9s} {'top10':>7s} {'ms/query':>9s}"]
    for k, v in out.items():
        lines.append(
            f"{k:34s} {v['max_abs_dp']:9.2e} {v['max_l1']:9.2e} {v['top10_identical']:>3d}/{v['pools']:<3d} "
            f"{v['ms_per_query_median']:9.1f}"
        )
    lines.append(f"published torch solver (fixture README, ms/query, 1 thread): {ref_ms}")
    emit(
        {"results": out, "reference_ms_per_query_1thread": ref_obj, "threads": args.threads},
        args.json,
        "\n".join(lines),
    )
    return 0
