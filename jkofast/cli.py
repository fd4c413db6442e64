"""``jkofast`` command line: parse -> load -> warm up -> wrappers -> write. No math here.

Each sub-command lives in ``jkofast/commands/<name>.py`` and defines
``add_parser(subparsers)`` (which sets ``func`` via ``set_defaults``).

A process imports the module of the one sub-command it runs: the others are registered from
:data:`COMMANDS` (name and help line only), so ``jkofast --help`` imports no wing (no NumPy, no
Numba) and ``jkofast evaluate`` loads the evaluation wing alone.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from typing import NoReturn

import jkofast

__all__ = ["COMMANDS", "OUTPUTS", "build_parser", "main"]

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
    for name, (_, help_) in COMMANDS.items():  # `jkofast CMD --help` opens with the line `jkofast --help` shows
        if name in sub.choices and not sub.choices[name].description:
            sub.choices[name].description = help_[0].upper() + help_[1:] + "."
    return parser


def _suggest(sub_parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """``"; did you mean --k?"`` for the first unknown option close to one of ``sub_parser``'s options."""
    options = [o for o in sub_parser._option_string_actions if o.startswith("--")]
    for word in unknown:
        if word.startswith("-"):
            close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


def _missing_file_message(sub_parser, args, exc: FileNotFoundError) -> str:
    """``--qrels q.tsv: no such file`` (or ``--dataset D: no such file: D/corpus.jsonl``): the option named."""
    what = (exc.strerror or "No such file or directory").lower()
    if not exc.filename or sub_parser is None:
        return _os_error(exc) if exc.strerror else str(exc)
    target = os.path.abspath(os.fspath(exc.filename))
    for action in sub_parser._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or not isinstance(value, str) or not value:
            continue
        v = os.path.abspath(value)
        if target == v:
            return f"{action.option_strings[-1]} {value}: {what}"
        if target.startswith(v.rstrip(os.sep) + os.sep):
            return f"{action.option_strings[-1]} {value}: {what}: {exc.filename}"
    return _os_error(exc)  # a path no option names (a temporary file, a file inside a folder it read)


def _command(argv: list[str]) -> str:
    """Return the sub-command named in ``argv`` ('' when none): the first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), "")


# sub-command -> the options naming what it writes: each is held under an exclusive lock
# (jkofast._lock) while the command runs, so a second writer to the same output exits 2 at once
# (``embed`` locks its folder itself, once the model names it)
OUTPUTS: dict[str, tuple[str, ...]] = {
    "index": ("out",),
    "rerank": ("out",),
    "run": ("runs", "per_query"),
    "demo": ("runs", "per_query"),
    "search": ("out",),
    "study": ("out",),
    "tune": ("out", "runs", "per_query"),
}

# what an interrupted command leaves: the resumable ones keep their finished parts
_INTERRUPTED = {
    "embed": "the finished parts are kept; rerun the same command to resume",
    "index": "an SGR build keeps its finished shards (rerun the same command to resume); nothing else was written",
    "rerank": "the finished chunks are kept; rerun the same command to resume",
}


def _one_line(message, category, filename, lineno, line=None, command: str = "") -> str:
    """Format a warning as one line ``jkofast CMD: warning: ...`` (no library path, line or source)."""
    text = " ".join(str(message).split())
    return f"jkofast {command}: warning: {text}\n"


def _lock_outputs(stack, args) -> None:
    """Hold the write lock of every output the command names (see :data:`OUTPUTS`)."""
    import os

    from jkofast._lock import output_lock

    for opt in OUTPUTS.get(args.command, ()):
        out = getattr(args, opt, None)
        if not isinstance(out, str) or not out or out == "-":
            continue
        parent = os.path.dirname(os.path.abspath(out))
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError:
            continue  # the command's own check names the option that cannot be written (likewise below)
        stack.enter_context(output_lock(out, f"jkofast {args.command}", required=False))


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
        ``OSError`` raised by the command (printed as ``jkofast COMMAND: error: ...``; with
        ``--json`` also as ``{"error": ...}`` on stdout), 2 when another process writes the same
        output, 130 on an interrupt (Ctrl-C).  Warnings print as one line each,
        ``jkofast COMMAND: warning: ...``.
    """
    import contextlib
    import functools
    import json
    import warnings

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv))
    args, unknown = parser.parse_known_args(argv)
    sub_parser = parser._subparsers._group_actions[0].choices.get(args.command) if args.command else None
    if unknown:
        if sub_parser is None:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        # the sub-command's own parser reports it (its usage line, `jkofast CMD: error: ...`)
        sub_parser.error(f"unrecognized arguments: {' '.join(unknown)}{_suggest(sub_parser, unknown)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    saved_format = warnings.formatwarning
    warnings.formatwarning = functools.partial(_one_line, command=args.command)
    as_json = bool(getattr(args, "json", False))
    out = _WatchedStream(sys.stdout) if as_json else None
    try:
        with contextlib.ExitStack() as stack:
            if out is not None:  # a JSON error goes to stdout only while the result has not
                stack.enter_context(contextlib.redirect_stdout(out))
            _lock_outputs(stack, args)
            rc = args.func(args)
    except (ValueError, TypeError, OSError) as exc:  # OSError: also a folder given as a file, no permission
        if isinstance(exc, FileNotFoundError):  # name the option that gave the missing path
            msg = _missing_file_message(sub_parser, args, exc)
        elif not isinstance(exc, OSError) or exc.strerror is None:
            msg = " ".join(str(exc).split())
        else:
            msg = _os_error(exc)
        if as_json and not out.wrote:  # one JSON document on stdout: the result or the error
            print(json.dumps({"command": args.command, "error": msg, "exit": 2}))
        print(f"jkofast {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        what = _INTERRUPTED.get(args.command, "no output was written")
        print(f"jkofast {args.command}: interrupted: {what}", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = saved_format
    return int(rc or 0)


def program(argv: list[str] | None = None) -> NoReturn:
    """Run :func:`main` as the process's program (the ``jkofast`` command), then end the process.

    The status is :func:`main`'s.  Before the interpreter shuts down, every object left is set
    aside from the cyclic garbage collector (``gc.freeze``): its last full walks of the heap, which
    after a command that compiled kernels hold Numba's hundreds of thousands of objects (0.4 s
    after a warm ``jkofast run``, about 1 s after a cold one), would only free memory the process
    is about to give back.  The command's outputs are closed by then; the standard streams are
    flushed and the exit functions run as always.  For the command line only: :func:`main` (what
    a program calling jkofast's command line in-process runs) leaves the collector alone.
    """
    import gc

    try:
        status = main(argv)
    finally:  # also after argparse's own exits (--help, --version, a usage error)
        gc.freeze()
    sys.exit(status)


class _WatchedStream:
    """A text stream that passes everything to ``stream`` and records whether anything was written."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.wrote = False

    def write(self, s: str) -> int:
        if s:
            self.wrote = True
        return self._stream.write(s)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _os_error(exc: OSError) -> str:
    """Return an ``OSError`` without its ``[Errno N]`` prefix: what failed and on which file."""
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    return f"{exc.strerror}: " + " -> ".join(map(str, names)) if names else str(exc.strerror)
