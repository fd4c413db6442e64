"""``jkofast`` command line: parse -> load -> warm up -> wrappers -> write. No math here.

Each sub-command lives in ``jkofast/commands/<name>.py`` and defines
``add_parser(subparsers)`` (which sets ``func`` via ``set_defaults``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import jkofast

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the ``jkofast`` parser with one sub-parser per module of :mod:`jkofast.commands`."""
    import jkofast.commands as commands

    parser = argparse.ArgumentParser(
        prog="jkofast",
        description="jkofast: JKO-RAG reranking, SparseGeometricRAG, BM25/TF-IDF retrieval and IR metrics "
        "(Numba kernels)",
    )
    parser.add_argument("--version", action="version", version=f"jkofast {jkofast.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        importlib.import_module(f"jkofast.commands.{mod.name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: the command's, 2 for a usage error or a ``ValueError`` / ``TypeError`` /
        ``OSError`` raised by the command (printed as ``jkofast COMMAND: error: ...``).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        rc = args.func(args)
    except (ValueError, TypeError, OSError) as exc:  # OSError: also a folder given as a file, no permission
        print(f"jkofast {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)
