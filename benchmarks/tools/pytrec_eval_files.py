"""The peer of ``jkofast evaluate --qrels QRELS --run RUN --n-boot 0`` as a whole process: pytrec_eval.

    python benchmarks/tools/pytrec_eval_files.py RUN QRELS

Parses both files the documented way (``pytrec_eval.parse_run`` / ``parse_qrel``) and evaluates the same five
metrics (nDCG@10, recall@10, P@10, reciprocal rank, MAP); prints their means.
"""

import sys

import pytrec_eval

MEASURES = {"ndcg_cut.10", "recall.10", "P.10", "recip_rank", "map"}
KEYS = ("ndcg_cut_10", "recall_10", "P_10", "recip_rank", "map")


def main(run_path: str, qrels_path: str) -> int:
    with open(qrels_path) as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(run_path) as f:
        run = pytrec_eval.parse_run(f)
    res = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    for k in KEYS:
        print(f"{k:<12} {sum(r[k] for r in res.values()) / max(len(res), 1):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
