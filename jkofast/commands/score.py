"""``jkofast score --cross-encoder DIR --pools RUN --dataset FOLDER --out SCORES``: cross-encoder scores without torch.

Every (query, document) pair of the pool file is scored by a BERT cross-encoder
(:mod:`jkofast.encode.cross`); the output is the ``query-id doc-id score`` file that
``jkofast run --scores``, ``rerank --scores`` and ``tune --scores`` read.  Query text: the
dataset's query; document text: ``title + " " + text`` as ``jkofast embed`` builds it.
"""

from __future__ import annotations

HELP = "score a run's (query, document) pairs with a torch-free BERT cross-encoder ('query-id doc-id score' file)"


def add_parser(sub) -> None:
    """Register ``jkofast score`` on the sub-command parser ``sub``."""
    p = sub.add_parser("score", help=HELP)
    p.add_argument(
        "--cross-encoder",
        required=True,
        metavar="DIR",
        help="cross-encoder folder or zip (config.json, model.safetensors, tokenizer.json), e.g. "
        "cross-encoder/ms-marco-MiniLM-L-6-v2 downloaded from the Hugging Face hub",
    )
    p.add_argument("--pools", required=True, help="the pairs to score: a TREC run or 'qid docid score' lines (.gz ok)")
    p.add_argument("--dataset", required=True, help="bundled name or BEIR folder holding the pools' queries and docs")
    p.add_argument("--out", required=True, help="scores file to write ('query-id doc-id score' per line)")
    p.add_argument("--depth", type=int, default=0, help="score only the first N documents of each query (0 = all)")
    p.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="tokens per pair, special tokens included (default: the model's model_max_length, capped at its "
        "position embeddings; pairs are truncated longest_first)",
    )
    p.add_argument(
        "--label", type=int, default=None, help="multi-label heads: the label whose log-odds is the score (2 labels: 1)"
    )
    p.add_argument("--batch-size", type=int, default=64, help="pairs per forward pass (default 64)")
    p.add_argument("--chunk-size", type=int, default=4096, help="pairs per saved part, the unit of resuming")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (BLAS one per thread; default all)")
    p.add_argument("--force", action="store_true", help="score again when --out exists")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def _pairs(pools: str, ds, depth: int):
    """``(pairs, skipped)``: the pool file's pairs in file order; ``skipped`` those naming an unknown query or doc."""
    from jkofast.eval.runio import read_scores

    queries, docs = ds.queries, ds.doc_index
    pairs, skipped = [], []
    for qid, blk in read_scores(pools).items():
        for i, did in enumerate(blk):
            if depth and i >= depth:
                break
            (pairs if qid in queries and did in docs else skipped).append((qid, did))
    return pairs, skipped


def run(args) -> int:
    """Score the pool file's pairs (exit status)."""
    import os
    import sys

    from jkofast._io import check_writable
    from jkofast._progress import ProgressLine
    from jkofast._threads import resolve_threads
    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.cross import load_cross_encoder
    from jkofast.encode.score import score_pairs

    resolve_threads(args.threads)
    for opt, v in (("--batch-size", args.batch_size), ("--chunk-size", args.chunk_size)):
        if v < 1:
            raise ValueError(f"{opt} must be >= 1, got {v}")
    if args.depth < 0:
        raise ValueError(f"--depth must be >= 0, got {args.depth}")
    if not os.path.isfile(args.pools):
        raise FileNotFoundError(f"--pools {args.pools!r} not found")
    check_writable(args.out, "--out")
    if os.path.isfile(args.out) and not args.force:
        print(f"{args.out} exists (pass --force to score again)")
        return 0
    try:
        model = load_cross_encoder(args.cross_encoder, max_length=args.max_length)
    except ImportError as e:  # the optional extra: the message names the pip command
        raise ValueError(str(e)) from None
    label = model.resolve_label(args.label)  # a bad --label fails before the dataset is read
    ds = load_dataset(args.dataset)
    pairs, skipped = _pairs(args.pools, ds, args.depth)
    if skipped:
        ex = ", ".join(f"{q}/{d}" for q, d in skipped[:3])
        print(f"jkofast score: warning: {len(skipped)} pairs of {args.pools} name a query or document absent from "
              f"{ds.name} and are not scored (e.g. {ex})", file=sys.stderr)  # fmt: skip
    if not pairs:
        raise ValueError(f"--pools {args.pools}: no pair names a query and a document of {ds.name}")
    docs = dict(zip(ds.doc_ids, ds.doc_texts(" "), strict=True))
    bar = ProgressLine(f"jkofast score: {model.name}", len(pairs), enabled=not args.quiet)
    info = score_pairs(model, pairs, ds.queries, docs, args.out, label=label, batch_size=args.batch_size,
                       chunk_size=args.chunk_size, n_threads=args.threads, progress=bar.update)  # fmt: skip
    bar.close()
    n_q = len({q for q, _ in pairs})
    head = "logit" if label is None else f"log-odds of label {label} ({model.labels[label]})"
    fresh = info["n_pairs"] - info["reused"]
    rate = f"{fresh / info['seconds']:,.0f} pairs/s" if fresh and info["seconds"] > 0 else "all reused"
    print(f"wrote {args.out}: {info['n_pairs']} pairs, {n_q} queries, score = {head}, max_length "
          f"{model.max_length}; {info['reused']} pairs from earlier parts; {rate} (compile time included)")  # fmt: skip
    return 0
