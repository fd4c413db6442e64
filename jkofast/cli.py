"""``jkofast`` command line: parse -> load -> warm up -> wrappers -> write. No math here.

Each sub-command lives in ``jkofast/commands/<name>.py`` and defines
``add_parser(subparsers)`` (which sets ``func`` via ``set_defaults``).

A process imports the module of the one sub-command it runs: the others are registered from
:data:`COMMANDS` (name and help line only), so ``jkofast --help`` imports no wing (no NumPy, no
Numba) and ``jkofast evaluate`` loads the evaluation wing alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import jkofast

__all__ = ["COMMANDS", "build_parser", "main"]

# sub-command -> (module of jkofast.commands, help line), in the order of ``jkofast --help``;
# tests/test_cli_start.py checks that it matches what the modules register
COMMANDS: dict[str, tuple[str, str]] = {
    "embed": (
        "embed",
        "write FOLDER/embeddings/<model>/ (docs.npy, queries.npy, id lists, meta.json; float16) "
        "with a torch-free sentence encoder",
    ),
    "evaluate": ("evaluate", "score a TREC run (nDCG/recall/P/MRR/MAP) with bootstrap CIs"),
    "index": ("index", "build and save a sparse index (BM25 / TF-IDF / SGR)"),
    "parity": ("parity", "rerank the 30 parity pools and compare with the published solver"),
    "rerank": ("rerank", "batch JKO-RAG reranking of a TREC run (streaming, resumable)"),
    "run": ("run", "run the end-to-end job (pools, baselines, JKO-RAG) on SciFact or any BEIR folder"),
    "demo": ("run", "alias of 'run --dataset scifact'"),
    "score": (
        "score",
        "score a run's (query, document) pairs with a torch-free BERT cross-encoder ('query-id doc-id score' file)",
    ),
    "search": ("search", "first-stage retrieval for a split; writes a TREC run"),
    "study": ("study", "run a published experiment (extensions, evaluators) and print its table"),
    "tune": ("tune", "select the operating point on a corpus by cross-validation (point file)"),
    "warmup": ("warmup", "compile / load the main job's Numba kernels (--all: every kernel)"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Return the ``jkofast`` parser with one sub-parser per sub-command.

    Parameters
    ----------
    command : str, optional
        Import only the module of this sub-command and register its full parser; every other
        sub-command gets a placeholder with its help line (a name that is no sub-command: only
        placeholders). None (default): import every command module.

    Returns
    -------
    argparse.ArgumentParser
        The parser.
    """
    parser = argparse.ArgumentParser(
        prog="jkofast",
        description="jkofast: JKO-RAG reranking, SparseGeometricRAG, BM25/TF-IDF retrieval and IR metrics "
        "(Numba kernels)",
    )
    parser.add_argument("--version", action="version", version=f"jkofast {jkofast.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = None if command is None else COMMANDS.get(command, ("", ""))[0]
    loaded: set[str] = set()
    for name, (module, help_) in COMMANDS.items():
        if wanted is None or module == wanted:
            if module not in loaded:  # a module may register several names (run, demo)
                loaded.add(module)
                importlib.import_module(f"jkofast.commands.{module}").add_parser(sub)
        else:
            sub.add_parser(name, help=help_)
    return parser


def _command(argv: list[str]) -> str:
    """Return the sub-command named in ``argv`` ('' when none): the first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), "")


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
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv))
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
