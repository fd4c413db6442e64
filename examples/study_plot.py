"""Run one of the bundled studies from Python and plot it.

What it shows: :func:`jkofast.studies.common.run_study` with :class:`StudyOptions` (the library
call behind ``jkofast study``), the rows of its :class:`StudyResult`, the ``.json`` / ``.md``
files it writes, and its figure (PNG, matplotlib: ``pip install "jkofast[plot]"``; without it
the plot is skipped with a message).  The default study is ``linear-response`` (the implicit
Jacobian-vector product of a JKO step against finite differences) in its ``--quick`` size.

Run it::

    python examples/study_plot.py                     # linear-response, quick size
    python examples/study_plot.py --tiny              # the same (the quick size is already seconds)
    python examples/study_plot.py --study distractors --full --out study-out/
"""

import argparse
import tempfile

from jkofast.studies.common import STUDIES, StudyOptions, run_study


def has_matplotlib() -> bool:
    """Say whether matplotlib can be imported (the ``plot`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    """Run the study, print its rows and where its files went."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", default="linear-response", choices=sorted(STUDIES), help="which study")
    ap.add_argument("--full", action="store_true", help="the full size instead of --quick")
    ap.add_argument("--out", default=None, help="folder for the results and figures (default: a temporary one)")
    ap.add_argument("--tiny", action="store_true", help="the quick size (the default)")
    args = ap.parse_args()

    out = args.out or tempfile.mkdtemp(prefix="jkofast-study-")
    plot = has_matplotlib()
    if not plot:
        print('matplotlib is not installed (pip install "jkofast[plot]"): the plot is skipped')
    opts = StudyOptions(quick=not args.full or args.tiny, out=out, plot=plot, progress=False)
    res = run_study(args.study, opts)

    print(f"study {res.study} on {res.dataset}: {res.n_queries} queries, {len(res.rows)} rows, {res.wall_s:.1f} s")
    for row in res.rows[:10]:  # the scalar columns of each row; res.summary() holds everything
        scalars = {k: v for k, v in row.items() if isinstance(v, (str, int, float))}
        cells = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in scalars.items()]
        print("  " + ", ".join(cells))
    if res.figures:
        print(f"figures in {out}: {', '.join(res.figures)}")
    elif plot:
        print(f"study {res.study} draws no figure")
    print(f"results in {out}: {res.study}.json, {res.study}.md")


if __name__ == "__main__":
    main()
