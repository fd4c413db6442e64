"""Rerank a TREC run with dense embeddings, and evaluate it before and after.

What it shows: a first-stage pool file (here BM25 over the bundled SciFact corpus, written as a
TREC run), reranked by JKO-RAG through the library's streaming reranker
(:func:`jkofast.jko.stream.rerank_stream`) on the bundled MiniLM document embeddings, then both
runs evaluated against the qrels with :func:`jkofast.eval.fastread.evaluate_files`.

Run it::

    python examples/rerank_trec_run.py                 # 50 test queries, pools of depth 100
    python examples/rerank_trec_run.py --tiny          # 5 queries, depth 20 (seconds)
    python examples/rerank_trec_run.py --queries 300 --out-dir runs/

With your own data, replace the pool file by your run (``qid Q0 docid rank score tag``) and point
``embeddings`` / ``ids`` at an ``(n_docs, d)`` ``.npy`` of L2-normalised rows and its doc-id list.
"""

import argparse
import os
import tempfile

from jkofast.datasets.beir import load_dataset
from jkofast.eval.fastread import evaluate_files
from jkofast.eval.trec import write_run
from jkofast.jko.stream import RerankOptions, rerank_stream
from jkofast.pools.retrievers import DOC_SEP, get_retriever

METRICS = ["ndcg@10", "recall@10", "mrr@10"]


def main() -> None:
    """Write the BM25 pool file, rerank it, evaluate both runs."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="scifact", help="bundled name or a BEIR folder with saved embeddings")
    ap.add_argument("--queries", type=int, default=50, help="test queries to rerank")
    ap.add_argument("--depth", type=int, default=100, help="pool depth (documents per query)")
    ap.add_argument("--out-dir", default=None, help="where the runs go (default: a temporary folder)")
    ap.add_argument("--tiny", action="store_true", help="5 queries, depth 20")
    args = ap.parse_args()
    if args.tiny:
        args.queries, args.depth = 5, 20

    ds = load_dataset(args.dataset)
    qids = ds.split_query_ids("test")[: args.queries]
    queries = ds.queries
    emb_dir = os.path.join(ds.path, "embeddings", "minilm-l6-v2")
    qrels = os.path.join(ds.path, "qrels", "test.tsv")

    out_dir = args.out_dir or tempfile.mkdtemp(prefix="jkofast-example-")
    os.makedirs(out_dir, exist_ok=True)
    pools = os.path.join(out_dir, "bm25.run")
    reranked = os.path.join(out_dir, "jko.run")

    # 1. the first stage: BM25 over the corpus, written as a TREC run (the pool file)
    bm25 = get_retriever("bm25").fit(ds.doc_texts(sep=DOC_SEP["bm25"]))
    idx, scores = bm25.search([queries[q] for q in qids], k=args.depth)
    write_run(pools, (idx, scores), tag="bm25", query_ids=qids, doc_ids=ds.doc_ids)

    # 2. JKO-RAG rerank of every pool on the dense geometry (streamed, written atomically)
    opts = RerankOptions(
        pools=pools,
        out=reranked,
        embeddings=os.path.join(emb_dir, "docs.npy"),
        ids=os.path.join(emb_dir, "docs_ids.txt"),
        config="tuned",
    )
    summary = rerank_stream(opts)
    print(f"reranked {summary.reranked_now} queries ({summary.grad_path} gradient) in {summary.wall_s:.1f} s")

    # 3. evaluate both runs on the same queries
    for name, path in (("bm25", pools), ("bm25 + jko", reranked)):
        means = evaluate_files(path, qrels, metrics=METRICS).means
        print(f"{name:>12}: " + "  ".join(f"{m} {v:.4f}" for m, v in means.items()))
    print(f"runs written to {out_dir}")


if __name__ == "__main__":
    main()
