"""``jkofast rerank``: resumable, streaming batch reranking of a TREC run with JKO-RAG.

Input (``--pools``): a TREC run (``qid Q0 docid rank score tag``) or a 3-column file
(``qid docid score``); each query's lines must be contiguous (their order is the pool order).
The work is :func:`jkofast.jko.stream.rerank_stream`: chunks of ``--chunk-size`` queries,
parsed, solved and written in three overlapping stages, each chunk written atomically to
``OUT.parts/``; a restart skips the finished chunks and the output is byte-identical to an
uninterrupted run.

Energy: ``r = minmax(run score)`` per pool, or with ``--scores`` (user rerank scores,
``query-id doc-id score``, streamed in the pool file's query order, or loaded whole with
``--scores-in-memory``) ``r = alpha*minmax(run score) + gamma*minmax(rerank)``;
``E = -r``, ``p0 = softmax_{tau0}(r)`` with the operating point's ``tau0``.
Geometry: ``--embeddings E.npy --ids ids.txt`` (dense rows, cosine) or
``--tfidf-corpus corpus.jsonl`` (TF-IDF rows, sparse cosine).
Large pools: ``--multires mr|sam [--clusters K] [--refine N] [--beta B]`` reranks each pool with
MR-JKO / SAM-JKO (a coarse flow on K group centroids, a fine flow on the N heaviest groups).

Gradient path: a named operating point runs on ``grad="implicit"`` here (the exact gradient at a
converged, warm-started plan: the batch fast path); ``--grad unrolled`` runs the published
solver's path, byte for byte as before.  The drop-in API (``run_jko``, :mod:`jkofast.compat`)
keeps the published ``unrolled`` default, because it promises parity with the reference.

Malformed input lines are reported on stderr with their line number and skipped.  A query
whose pool cannot be reranked (unknown doc id, a failed solve) is reported on stderr and
written unchanged, in its input order, with its input scores -- never dropped.
"""

from __future__ import annotations

import dataclasses
import resource
import sys

from jkofast._progress import ProgressLine
from jkofast._status import unconverged_summary
from jkofast.commands._common import emit
from jkofast.distributed.cluster import add_dask_args

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Register ``jkofast rerank``."""
    p = sub.add_parser(
        "rerank",
        help="batch JKO-RAG reranking of a TREC run (streaming, resumable)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--pools", required=True, help="input run: TREC 6-column or 'qid docid score' (optional header; .gz ok)"
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--embeddings", help=".npy (n_docs, d) document embeddings (L2-normalised)")
    g.add_argument("--tfidf-corpus", help="BEIR corpus.jsonl(.gz): TF-IDF geometry")
    p.add_argument("--ids", help="text file, one doc id per embeddings row")
    p.add_argument(
        "--min-known-ids",
        type=float,
        default=0.5,
        metavar="SHARE",
        help="refuse the job when less than this share of the first 10,000 pool lines name a document of --ids "
        "(0.5; 0 accepts any ids file: unknown documents' queries are passed through unchanged)",
    )
    p.add_argument(
        "--scores", help="rerank scores 'query-id doc-id score' (TREC-style), streamed in the pool file's query order"
    )
    p.add_argument(
        "--scores-in-memory",
        action="store_true",
        help="load --scores into memory (any query order) instead of streaming it",
    )
    p.add_argument("--alpha", type=float, default=None, help="weight of the run score when --scores (0.4)")
    p.add_argument("--gamma", type=float, default=None, help="weight of the rerank score when --scores (0.6)")
    p.add_argument("--config", default="tuned", help="operating point: base, tuned, contrib, fast (tuned)")
    p.add_argument(
        "--point",
        default=None,
        help="point file of 'jkofast tune': its flow replaces --config; with --scores its weights set "
        "alpha (dense + lexical, the run score's share) and gamma (rerank)",
    )
    p.add_argument(
        "--mode",
        default=None,
        choices=["wasserstein", "kl", "noproximal", "bregman"],
        help="proximal term (default: the operating point's, wasserstein = JKO-RAG; kl = KL-Prox)",
    )
    p.add_argument("--alpha-prox", type=float, default=None, help="transport weight of --mode bregman (BW-JKO)")
    p.add_argument(
        "--grad",
        default=None,
        choices=["unrolled", "implicit"],
        help="Wasserstein gradient path (default implicit: the exact gradient at a converged plan, the batch "
        "fast path; unrolled: the published solver's path, byte-identical to it, the default of run_jko and "
        "jkofast.compat, which promise drop-in parity)",
    )
    p.add_argument("--out", required=True, help="output TREC run")
    p.add_argument("--dist", help="also write the final distributions p_T (.npz)")
    p.add_argument(
        "--confidence",
        help="also write the Dual-Rank confidence per query: 'qid conf_dual conf_softmax conf_margin' "
        "(route or abstain on low-confidence queries; mode wasserstein or bregman)",
    )
    p.add_argument(
        "--projection",
        help="learned metric W.npz (NM-JKO, jkofast study nm-jko --out): cost from the projected rows",
    )
    p.add_argument(
        "--multires",
        default=None,
        choices=["mr", "sam"],
        help="rerank each pool with MR-JKO (mr: k-means groups) or SAM-JKO (sam: groups on [z, beta*r]): a coarse "
        "flow on the group centroids keeps the --refine heaviest groups, a fine flow ranks their members (large "
        "pools; needs --embeddings)",
    )
    p.add_argument("--clusters", type=int, default=None, help="groups per pool with --multires (20)")
    p.add_argument("--refine", type=int, default=None, help="groups kept for the fine flow with --multires (4)")
    p.add_argument("--beta", type=float, default=None, help="relevance weight of the SAM-JKO features (2.0)")
    p.add_argument("--k", type=int, default=0, help="keep the top-k per query (0 = whole pool)")
    p.add_argument("--tag", default="jkofast", help="run tag (6th column)")
    p.add_argument("--chunk-size", type=int, default=1000, help="queries per chunk (1000)")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default: all; per worker with --dask: 1)")
    p.add_argument("--keep-parts", action="store_true", help="keep OUT.parts/ after success")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    add_dask_args(p)  # --dask SCHEDULER, --dask-timeout
    p.set_defaults(func=run)


def _say(msg: str) -> None:
    print(f"jkofast rerank: {msg}", file=sys.stderr, flush=True)


_ID_SAMPLE_LINES = 10_000  # pool lines read to check the ids file against the run


def _check_known_ids(args) -> None:
    """Refuse an ids file that names (almost) none of the run's documents, before any work.

    A wrong ids file (another corpus, another id column) would otherwise pass every query through
    unchanged and exit 0. The first ``_ID_SAMPLE_LINES`` pool lines are read; their doc ids are looked
    up while the ids file streams past (memory: the sample, never the ids file).
    """
    import gzip

    if not 0.0 <= args.min_known_ids <= 1.0:
        raise ValueError(f"--min-known-ids must be a share in [0, 1], got {args.min_known_ids}")
    if args.min_known_ids == 0 or not (args.embeddings and args.ids):
        return
    opener = gzip.open if args.pools.endswith(".gz") else open
    docs = []
    with opener(args.pools, "rt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) in (3, 6):
                docs.append(parts[2] if len(parts) == 6 else parts[1])
            if len(docs) >= _ID_SAMPLE_LINES:
                break
    wanted = set(docs)
    known = set()
    with open(args.ids, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            d = line.strip()
            if d in wanted:
                known.add(d)
                if len(known) == len(wanted):
                    break
    if not docs:
        return  # an empty or header-only run: the stream reports it
    share = sum(d in known for d in docs) / len(docs)
    if share < args.min_known_ids:
        raise ValueError(
            f"--ids {args.ids} names {share:.1%} of the documents on the first {len(docs):,} lines of --pools "
            f"{args.pools} (below --min-known-ids {args.min_known_ids:g}): it must list the run's doc ids, one per "
            f"row of --embeddings; --min-known-ids 0 reranks anyway (queries with unknown documents pass through)"
        )


def _apply_point(args) -> None:
    """Set ``--config`` (and, with ``--scores``, ``--alpha`` / ``--gamma``) from a ``jkofast tune`` point file."""
    from jkofast.studies.tune import load_point

    cfg, w, _ = load_point(args.point)
    if w["kind"] != "jko":
        _say(f"{args.point} selected the {w['kind']} ranking alone: the run is read out by its score (T = 0)")
    args.config = cfg
    if args.scores:
        args.alpha = w["alpha"] + w["beta"]
        args.gamma = w["gamma"]


# option -> (the option it applies under, whether that one is given, the default once allowed)
_DEPENDENT = {
    "clusters": ("--multires", lambda a: a.multires is not None, 20),
    "refine": ("--multires", lambda a: a.multires is not None, 4),
    "beta": ("--multires sam", lambda a: a.multires == "sam", 2.0),
    "alpha": ("--scores", lambda a: a.scores is not None, 0.4),
    "gamma": ("--scores", lambda a: a.scores is not None, 0.6),
    "scores_in_memory": ("--scores", lambda a: a.scores is not None, False),
}


def _check_dependent(args) -> None:
    """Refuse an option given without the option it applies under (it would be silently ignored)."""
    for name, (needs, present, default) in _DEPENDENT.items():
        v = getattr(args, name)
        if v is not None and v is not False and not present(args):
            raise ValueError(f"--{name.replace('_', '-')} applies under {needs} only (given without it)")
        if v is None:
            setattr(args, name, default)


def run(args) -> int:
    """Options from the arguments -> :func:`~jkofast.jko.stream.rerank_stream` -> summary."""
    from jkofast.jko.stream import RerankOptions, rerank_stream  # the library loads when the command runs

    _check_dependent(args)
    if args.point is not None:
        _apply_point(args)
    _check_known_ids(args)
    opts = RerankOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(RerankOptions)})
    if args.dask:
        from jkofast.distributed.rerank import rerank_on_dask

        prog = ProgressLine("rerank", unit="queries", enabled=not (args.quiet or args.json), every_s=1.0, eta=True)
        summ = rerank_on_dask(opts, args.dask, timeout=args.dask_timeout, report=_say, progress=prog)
    else:
        from jkofast._ahead import compile_notice
        from jkofast.warmups import compile_cost

        prog = ProgressLine("rerank", unit="queries", enabled=not (args.quiet or args.json))
        # --multires compiles one of the "multires" entry's three (rows dtype, path) specialisations: about
        # two thirds of the entry's time, as the first one carries every kernel the three share
        about = compile_cost("energy") + (compile_cost("multires") * 2 / 3 if args.multires else compile_cost("jko"))
        with compile_notice(_say, about, enabled=not (args.quiet or args.json)):
            summ = rerank_stream(opts, report=_say, progress=lambda n: prog.update(n) if n else prog.start())
    prog.close()
    if summ.missing_scores:
        _say(
            f"{summ.missing_scores} queries had no rerank scores (their rerank term is 0); if "
            f"{args.scores} is not in the pool file's query order, use --scores-in-memory"
        )
    n_unconv = (summ.unconverged_queries, *summ.unconverged_inner_steps)
    qps = summ.queries_per_s
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out = {
        "queries": summ.queries,
        "reranked_now": summ.reranked_now,
        "skipped_finished": summ.skipped_finished,
        "passed_through": summ.passed_through,
        "malformed_lines": summ.malformed_lines,
        "split_queries": summ.split_queries,
        "chunks": summ.chunks,
        "unconverged_queries": n_unconv[0],
        "unconverged_inner_steps": list(n_unconv[1:]),
        "wall_s": summ.wall_s,
        "compute_s": summ.compute_s,
        "queries_per_s": qps,
        "peak_rss_mb": peak_mb,
        "config": args.config if isinstance(args.config, str) else args.point,
        "grad": summ.grad_path,
        "multires": args.multires,
        "out": args.out,
    }
    if args.dask:
        out["workers"] = summ.workers
    path = summ.grad_path if summ.grad_path != "none" else "none (no transport term)"
    text = (
        f"reranked {summ.reranked_now} queries ({summ.skipped_finished} from finished chunks, "
        f"{summ.passed_through} passed through, {summ.malformed_lines} malformed lines"
        + (f", {summ.split_queries} split queries" if summ.split_queries else "")
        + f") in {summ.wall_s:.1f} s"
        + (f", {qps:.1f} queries/s (kernels compiled before the clock started)" if qps else "")
        + (f"; {args.multires.upper()}-JKO pools" if args.multires else "")
        + f"; gradient path {path}; peak RSS {peak_mb:.0f} MB -> {args.out}"
    )
    if args.dask:
        text += "; per worker: " + ", ".join(
            f"{w} {c['queries']} queries in {c['chunks']} chunks (peak RSS {c['peak_rss_mb']:.0f} MB)"
            for w, c in sorted(summ.workers.items())
        )
    if n_unconv[0]:
        _say(unconverged_summary(*n_unconv, summ.jko_config))
    emit(out, args.json, text)
    return 0
