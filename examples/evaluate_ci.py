"""Evaluate runs with bootstrap confidence intervals, and compare two runs with paired differences.

What it shows: :func:`jkofast.eval.metrics.evaluate` (per-query values) with percentile-bootstrap
CIs of each mean (``EvalResult.summary``), and :func:`jkofast.eval.metrics.paired_bootstrap_diff`
for the difference between two runs on the same queries (significant when the interval
excludes 0).  By default the two runs are BM25 and a dense (MiniLM cosine) search over the
bundled SciFact corpus; pass your own TREC files to evaluate those.

Run it::

    python examples/evaluate_ci.py                      # 100 SciFact test queries
    python examples/evaluate_ci.py --tiny               # 10 queries
    python examples/evaluate_ci.py --run-a a.run --run-b b.run --qrels qrels.txt
"""

import argparse
import os

from jkofast.eval.metrics import evaluate, paired_bootstrap_diff
from jkofast.eval.trec import read_qrels, read_run

METRICS = ["ndcg@10", "recall@100", "mrr@10"]


def scifact_runs(n_queries: int):
    """Two runs over the bundled SciFact test queries: BM25 and dense cosine search (``{qid: {docid: score}}``)."""
    from jkofast import topk
    from jkofast.datasets.beir import load_dataset
    from jkofast.pools.retrievers import DOC_SEP, get_retriever

    ds = load_dataset("scifact")
    qids = ds.split_query_ids("test")[:n_queries]
    texts = [ds.queries[q] for q in qids]
    idx, sc = get_retriever("bm25").fit(ds.doc_texts(sep=DOC_SEP["bm25"])).search(texts, k=100)
    bm25 = {q: {ds.doc_ids[i]: float(s) for i, s in zip(r, srow) if i >= 0} for q, r, srow in zip(qids, idx, sc)}
    doc_emb, query_emb = ds.embeddings("minilm-l6-v2")
    rows = [ds.query_ids.index(q) for q in qids]
    idx, sc = topk(query_emb[rows] @ doc_emb.T, 100)
    dense = {q: {ds.doc_ids[i]: float(s) for i, s in zip(r, srow)} for q, r, srow in zip(qids, idx, sc)}
    return ("bm25", bm25), ("dense", dense), ds.qrels("test")


def main() -> None:
    """Evaluate two runs with CIs and their paired differences."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-a", help="first TREC run file")
    ap.add_argument("--run-b", help="second TREC run file")
    ap.add_argument("--qrels", help="qrels file (TREC 4-column or qid docid rel)")
    ap.add_argument("--queries", type=int, default=100, help="SciFact test queries (default runs only)")
    ap.add_argument("--n-boot", type=int, default=2000, help="bootstrap replicates")
    ap.add_argument("--tiny", action="store_true", help="10 SciFact queries")
    args = ap.parse_args()
    if args.tiny:
        args.queries = 10

    if args.run_a and args.run_b and args.qrels:
        (name_a, run_a), (name_b, run_b) = [(os.path.basename(p), read_run(p)) for p in (args.run_a, args.run_b)]
        qrels = read_qrels(args.qrels)
    elif args.run_a or args.run_b or args.qrels:
        ap.error("--run-a, --run-b and --qrels go together")
    else:
        (name_a, run_a), (name_b, run_b), qrels = scifact_runs(args.queries)

    res_a = evaluate(run_a, qrels, METRICS)
    res_b = evaluate(run_b, qrels, METRICS)
    print(f"{len(res_a.query_ids)} queries, 95% percentile-bootstrap intervals ({args.n_boot} replicates)")
    for name, res in ((name_a, res_a), (name_b, res_b)):
        for m, s in res.summary(n_boot=args.n_boot).items():
            print(f"{name:>10} {m:<11} {s['mean']:.4f} [{s['lo']:.4f}, {s['hi']:.4f}]")

    # the paired difference needs the same queries in the same order in both results
    if res_a.query_ids != res_b.query_ids:
        raise SystemExit("the two runs answer different queries; paired differences need the same ones")
    for m in res_a.metrics:
        d = paired_bootstrap_diff(res_a[m], res_b[m], n_boot=args.n_boot)
        verdict = "significant" if d.lo > 0 or d.hi < 0 else "not significant"
        print(f"{name_a} - {name_b} {m:<11} {d.mean:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}] {verdict}")


if __name__ == "__main__":
    main()
