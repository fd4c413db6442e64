"""``jkofast study report --out DIR``: every registered study, one Markdown report with all tables and figures.

Each study runs with the same options (``--quick``, ``--scores``, ``--threads``); its own
``<study>.json`` / ``<study>.md`` and figures land in ``DIR`` as with ``jkofast study NAME --out DIR``,
and ``DIR/report.md`` gathers their tables (published numbers beside ours), figures and notes. A study
that fails is reported (its error in the report and in the summary) and the others still run.

The stability study runs its default methods plus BW-JKO at ``alpha`` in
:data:`jkofast.studies.stability.BW_ALPHAS`; its ``bw-stability`` row set (W_C against alpha, from
``kl_rerank`` at 0 to ``jko_rerank`` at 1) is a section of its own.
"""

from __future__ import annotations

import dataclasses
import os
import time
import traceback

from jkofast.studies.common import STUDIES, StudyOptions, StudyResult, run_study
from jkofast.studies.stability import BW_ALPHAS, METHODS, bw_block, bw_rows

__all__ = ["study"]


def _plot_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _with_bw(opts: StudyOptions) -> StudyOptions:
    """Return the stability options of the report: the given methods, else the defaults + BW-JKO at ``BW_ALPHAS``."""
    if opts.methods is not None:
        return opts
    return dataclasses.replace(opts, methods=(*METHODS, *(f"bw:{a:g}" for a in BW_ALPHAS)))


def study(opts: StudyOptions) -> StudyResult:
    """Run every study of :data:`jkofast.studies.common.STUDIES` (but this one) and write ``report.md``.

    Figures are drawn when matplotlib is installed (the ``plot`` extra); without it the report
    says so. Raises ``ValueError`` before any work when ``opts.out`` is not given.
    """
    if not opts.out:
        raise ValueError("the report needs --out DIR (it writes DIR/report.md and every study's files)")
    os.makedirs(opts.out, exist_ok=True)
    plot = opts.plot or _plot_available()
    sub = dataclasses.replace(opts, plot=plot, progress=opts.progress)
    sections, status, notes = [], [], []
    if not plot:
        notes.append('figures skipped: matplotlib is not installed (pip install "jkofast[plot]")')
    for name in STUDIES:
        if name == "report":
            continue
        opts.log("report", f"[{name}] ...")
        t0 = time.perf_counter()
        try:
            res = run_study(name, _with_bw(sub) if name == "stability" else sub)
        except Exception as exc:  # a failing study is reported; the others still run
            status.append({"study": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
            sections.append(
                f"## {name}\n\n**failed**: `{type(exc).__name__}: {exc}`\n\n```\n{traceback.format_exc()}```\n"
            )
            opts.log("report", f"[{name}] failed: {exc}")
            continue
        wall = time.perf_counter() - t0
        status.append({"study": name, "ok": True, "wall_s": wall, "n_queries": res.n_queries})
        figs = "".join(f"\n![{name}: {f}]({f})\n" for f in res.figures)
        sections.append(f"## {name}\n\n{STUDIES[name][1]}\n\n```\n{res.table()}\n```\n{figs}")
        if name == "stability" and bw_rows(res.rows):
            sections.append(
                f"## bw-stability\n\nBW-JKO under paraphrase (from the stability run)\n\n```\n"
                f"{bw_block(res.rows)}\n```\n"
            )
        opts.log("report", f"[{name}] {wall:.1f} s")
    head = [
        f"# jkofast study report: {opts.dataset}{' (--quick)' if opts.quick else ''}",
        "",
        "| study | status | wall s |",
        "|---|---|---|",
    ]
    for s in status:
        head.append(f"| {s['study']} | {'ok' if s['ok'] else 'failed'} | {s.get('wall_s', 0.0):.1f} |")
    markdown = "\n".join(head) + "\n\n" + "\n".join(notes) + "\n\n" + "\n".join(sections)
    failed = [s["study"] for s in status if not s["ok"]]
    if failed:
        notes.append(f"failed studies: {', '.join(failed)} (see report.md)")
    block = "\n".join(f"{s['study']:<16} {'ok' if s['ok'] else 'FAILED: ' + s['error']}" for s in status)
    return StudyResult(
        "report",
        opts.dataset,
        0,
        [],
        extra={"studies": status, "report": os.path.join(opts.out, "report.md")},
        blocks=[block],
        notes=notes,
        markdown=markdown,
    )
