"""``jkofast index``: build a sparse index over a BEIR corpus and save it to a folder.

``--method sgr`` builds with the streaming, bounded-memory build (``jkofast.sgr.streaming``):
from ``--corpus FILE`` (``corpus.jsonl`` / ``.jsonl.gz``) or the corpus of ``--dataset``, in shards
of ``--shard-size`` passages, the geometry calibrated on ``--calibrate N`` passages (the first N,
or a seeded uniform N with ``--calibrate-mode uniform``; default: the whole corpus, the index of
``SparseGeometricRetriever.fit`` bit for bit), resumable after an interruption (rerun the same
command; ``--no-resume`` starts over).  The other methods build in memory from ``--dataset``.

``jkofast index --check DIR`` checks a saved index folder (SGR or BM25 / TF-IDF) as Lucene's
CheckIndex does: the manifest's own checksum, every file's size and CRC32, then every structural
invariant the query kernels rely on; it names the first bad file and what is wrong with it and
exits 0 when the index is clean, 2 when not (``--json``: the per-file report).  An index written
before checksums were recorded is checked structurally and reported as "no checksums recorded".
"""

from __future__ import annotations

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Register ``jkofast index``."""
    from jkofast.commands._common import add_method_args

    p = sub.add_parser("index", help="build and save a sparse index (BM25 / TF-IDF / SGR)")
    add_method_args(p)
    p.add_argument("--out", default=None, help="output folder (required unless --check)")
    p.add_argument(
        "--check",
        default=None,
        metavar="DIR",
        help="check the saved index in DIR (checksums and structure) instead of building; exit 0 clean, 2 damaged",
    )
    g = p.add_argument_group("streaming SGR build (--method sgr)")
    g.add_argument("--corpus", default=None, help="corpus.jsonl(.gz) to index (instead of --dataset's corpus)")
    g.add_argument(
        "--calibrate",
        type=int,
        default=None,
        metavar="N",
        help="calibrate the geometry on N passages (SPEC B.11; default: the whole corpus; "
        "N above the corpus size is clamped to it with a warning)",
    )
    g.add_argument(
        "--calibrate-mode",
        choices=("first", "uniform"),
        default=None,
        help="the first N passages (default) or a uniform sample drawn with --seed",
    )
    g.add_argument("--seed", type=int, default=None, help="seed of --calibrate-mode uniform (default 0)")
    g.add_argument("--shard-size", type=int, default=None, help="passages per shard (default 250000)")
    g.add_argument("--no-resume", action="store_true", help="start over instead of resuming an interrupted build")
    g.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.set_defaults(func=run)


def _sgr_corpus(args) -> str:
    """Return the corpus of a streaming SGR build: ``--corpus`` or ``--dataset`` (bundled name or folder)."""
    import os

    if args.corpus is not None:
        return args.corpus
    from jkofast.datasets.beir import BUNDLED, bundled_path

    if args.dataset in BUNDLED and not os.path.isdir(args.dataset):
        return bundled_path(args.dataset)
    return args.dataset


def _run_sgr(args) -> int:
    import time

    from jkofast.commands._common import emit, method_params
    from jkofast.sgr.streaming import build_index

    t0 = time.perf_counter()
    r = build_index(
        _sgr_corpus(args),
        args.out,
        calibrate=args.calibrate,
        calibrate_mode=args.calibrate_mode,
        seed=args.seed,
        shard_size=args.shard_size,
        params=method_params(args),
        n_threads=args.threads,
        progress=not (args.quiet or args.json),
        resume=not args.no_resume,
    )
    secs = time.perf_counter() - t0
    info = {"method": "sgr", "n_docs": r.n_docs_, "build_seconds": secs, "out": args.out}
    info.update({k: v for k, v in r.build_info_.items() if k not in ("seconds", "n_docs")})
    info["bytes_per_passage"] = r.index_nbytes() / max(r.n_docs_, 1)
    emit(info, args.json, f"indexed {r.n_docs_} passages with sgr in {secs:.2f}s -> {args.out}")
    return 0


def _check(args) -> int:
    import json
    import os

    d = args.check
    if os.path.isfile(os.path.join(d, "meta.json")):
        from jkofast.sgr import check_index
    elif os.path.isfile(os.path.join(d, "manifest.json")):
        from jkofast.sparse.index import check_index
    else:
        raise ValueError(f"--check {d!r}: not an index folder (no meta.json or manifest.json)")
    rep = check_index(d)
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        for row in rep["files"]:
            print(f"  {row['file']:<16} {row['bytes'] if row['bytes'] is not None else '-':>12}  {row['status']}")
        kind = {"sgr": "SGR index", "sparse": "sparse index"}[rep["kind"]]
        if rep["checksums"] == "none recorded":
            sums = "no checksums recorded (written before jkofast recorded them): structure checked only"
        else:
            sums = "CRC32 of every file checked"
        print(f"{kind} {d}: {len(rep['files'])} files; {sums}")
        print("OK: no problem found" if rep["ok"] else f"DAMAGED: {rep['error']}")
    if not rep["ok"]:
        if not args.json:
            import sys

            print(f"jkofast index: error: {rep['error']}", file=sys.stderr)
        return 2
    return 0


# the options of the streaming SGR build (option, argparse dest): refused with another --method
_SGR_ONLY = (
    ("--corpus", "corpus"),
    ("--calibrate", "calibrate"),
    ("--calibrate-mode", "calibrate_mode"),
    ("--seed", "seed"),
    ("--shard-size", "shard_size"),
    ("--no-resume", "no_resume"),
    ("--quiet", "quiet"),
)


def run(args) -> int:
    """Build the index and save it (or, with ``--check``, check a saved one)."""
    import os

    from jkofast._io import check_writable_dir
    from jkofast._threads import resolve_threads
    from jkofast.commands._common import build_retriever, emit, method_params

    if args.check is not None:
        if args.out is not None:
            raise ValueError("--check DIR checks a saved index; it takes no --out")
        return _check(args)
    if args.out is None:
        raise ValueError("--out is required (the index folder to write), unless --check DIR")
    # every argument is checked before the build, the output folder included (it must be writable)
    resolve_threads(args.threads)
    method_params(args)
    if os.path.isdir(args.out):
        check_writable_dir(args.out, "--out", create=False)
    else:
        check_writable_dir(os.path.dirname(os.path.abspath(args.out)), "--out")
        if os.path.exists(args.out):
            raise ValueError(f"--out {args.out!r} exists and is not a folder")
    if args.method == "sgr":
        # the streaming build's own options, at their defaults when not given
        args.calibrate_mode = args.calibrate_mode or "first"
        args.seed = 0 if args.seed is None else args.seed
        args.shard_size = 250_000 if args.shard_size is None else args.shard_size
        if args.calibrate is not None and args.calibrate <= 0:
            raise ValueError(f"--calibrate must be >= 1 (passages), got {args.calibrate}")
        if args.shard_size < 1:
            raise ValueError(f"--shard-size must be >= 1, got {args.shard_size}")
        return _run_sgr(args)
    given = [o for o, v in _SGR_ONLY if getattr(args, v) not in (None, False)]
    if given:
        raise ValueError(f"{', '.join(given)} apply to --method sgr only")
    ds, retr, secs = build_retriever(args)
    retr.save(args.out)
    info = {"dataset": ds.name, "method": args.method, "n_docs": ds.n_docs, "build_seconds": secs, "out": args.out}
    emit(info, args.json, f"indexed {ds.n_docs} docs of {ds.name} with {args.method} in {secs:.2f}s -> {args.out}")
    return 0
