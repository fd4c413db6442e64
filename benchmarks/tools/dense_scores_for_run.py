"""Write 'query-id doc-id score' MiniLM cosine scores for every pair of a run (for ``--scores``).

Usage: python benchmarks/tools/dense_scores_for_run.py RUN(.gz) OUT.tsv [--dataset scifact]
"""

from __future__ import annotations

import argparse


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--dataset", default="scifact")
    a = ap.parse_args(argv)
    from jkofast.datasets.beir import load_dataset
    from jkofast.eval.runio import iter_queries

    ds = load_dataset(a.dataset)
    demb, qemb = ds.embeddings()
    drow, qrow = ds.doc_index, {q: i for i, q in enumerate(ds.query_ids)}
    with open(a.out, "w") as fh:
        for qid, docs, _s, _v in iter_queries(a.run, lambda ln, msg: None):
            sc = demb[[drow[d] for d in docs]] @ qemb[qrow[qid]]
            fh.writelines(f"{qid}\t{d}\t{float(x):.6f}\n" for d, x in zip(docs, sc, strict=True))


if __name__ == "__main__":
    main()
