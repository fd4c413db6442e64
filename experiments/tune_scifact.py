"""Train-split tuning of JKO-RAG on SciFact with the published protocol (SPEC A.7.9), then test.

25 configurations from ``random.Random(42)`` over the published lists x 80 train queries
(``random.Random(0)`` shuffle of the train qrels keys), MiniLM geometry, hybrid pools
(BM25 okapi + MiniLM, RRF -> 200), rerank term = BM25 pool score (no cross-encoder).
Score = mean nDCG@10 with each configuration's own (alpha, gamma).  The best configuration
is then run on the 300 test queries with (a) its own (alpha, gamma) and (b) the main
table's hard-coded (0.4, 0.6).

Usage: python experiments/tune_scifact.py [--grad implicit|unrolled] [--out results.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np


def scifact_pools(ds, qids, n_threads=None):
    from jkofast.pools.candidates import build_pools, dense_scores
    from jkofast.sparse.index import BM25Index

    qt = ds.queries
    queries = [qt[q] for q in qids]
    bm = BM25Index("okapi").fit(ds.doc_texts(". "))
    S = bm.score_all(queries, n_threads=n_threads)
    demb, qemb = ds.embeddings()
    row = {q: i for i, q in enumerate(ds.query_ids)}
    D = dense_scores(demb, qemb[[row[q] for q in qids]])
    P = build_pools(S, D, query_ids=qids, n_threads=n_threads)
    Z = np.ascontiguousarray(demb[P.doc_idx], dtype=np.float32)
    return P, Z


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--grad", default="implicit")
    ap.add_argument("--n-configs", type=int, default=25)
    ap.add_argument("--n-train", type=int, default=80)
    ap.add_argument("--out", default=None)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)

    from jkofast.datasets.beir import load_dataset
    from jkofast.eval.metrics import bootstrap_ci
    from jkofast.jko.energy import energy_and_p0
    from jkofast.jko.solver import operating_point, rerank_batch
    from jkofast.studies.main_job import evaluate_topk, readout_topk
    from jkofast.studies.tuning import SEARCH_SPACE, sample_configs, train_queries, tune

    ds = load_dataset("scifact")
    tq = train_queries(ds.qrels("train"), ds.query_ids, n=a.n_train, seed=0)
    t0 = time.perf_counter()
    P, Z = scifact_pools(ds, tq, a.threads)
    keys = [k for k, _ in SEARCH_SPACE]

    def prog(ci, c, s, dt):
        print(
            f"config {ci + 1:2d} {tuple(c[k] for k in keys)}  train nDCG@10 {s:.4f}  {dt:.1f}s",
            file=sys.stderr,
            flush=True,
        )

    res = tune(
        P,
        P.sparse,
        ds.qrels("train"),
        ds.doc_ids,
        embeddings=Z,
        configs=sample_configs(a.n_configs),
        grad=a.grad,
        n_threads=a.threads,
        progress=prog,
    )
    t_tune = time.perf_counter() - t0
    best = res["best_config"]
    print(
        f"best: config {res['best'] + 1} {tuple(best[k] for k in keys)} train {res['scores'][res['best']]:.4f} "
        f"({t_tune:.1f}s)",
        file=sys.stderr,
    )

    qids = ds.split_query_ids("test")
    Pt, Zt = scifact_pools(ds, qids, a.threads)
    base = operating_point("tuned")
    cfg = dataclasses.replace(
        base,
        **{k: best[k] for k in ("h", "lam", "rho", "sinkhorn_eps", "T", "inner_steps", "tau0")},
        mode="wasserstein",
        grad=a.grad,
    )
    test = {}
    for label, (al, ga) in (("own_alpha_gamma", (best["alpha"], best["gamma"])), ("blend_0.4_0.6", (0.4, 0.6))):
        for mode in ("wasserstein", "kl"):
            E, p0 = energy_and_p0(Pt.offsets, dense=Pt.dense, rerank=Pt.sparse, alpha=al, gamma=ga, tau0=cfg.tau0)
            t1 = time.perf_counter()
            r = rerank_batch(
                E, p0, Pt.offsets, embeddings=Zt, config=dataclasses.replace(cfg, mode=mode), n_threads=a.threads
            )
            dt = time.perf_counter() - t1
            m = evaluate_topk(readout_topk(r.p, Pt), qids, ds.qrels("test"), ds.doc_ids)
            mean, lo, hi = bootstrap_ci(m["ndcg"])
            test[f"{mode}_{label}"] = {
                "alpha": al,
                "gamma": ga,
                "ndcg@10": mean,
                "ci": [lo, hi],
                "recall@10": float(np.mean(m["recall"])),
                "ms_per_query": 1000 * dt / len(qids),
            }
            print(
                f"test {mode:11s} {label:16s} nDCG@10 {mean:.4f} [{lo:.3f}, {hi:.3f}] R@10 {np.mean(m['recall']):.3f}",
                file=sys.stderr,
                flush=True,
            )
    out = {
        "grad": a.grad,
        "train_queries": len(tq),
        "tuning": {k: res[k] for k in ("scores", "recall", "seconds")},
        "configs": res["configs"],
        "best_index": res["best"],
        "best_config": best,
        "tuning_seconds": t_tune,
        "test": test,
    }
    txt = json.dumps(out, indent=1, default=float)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(txt)
    print(txt)


if __name__ == "__main__":
    main()
