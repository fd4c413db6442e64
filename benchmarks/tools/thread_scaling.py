"""Thread scaling of jkofast's batch kernels (1/2/4/8/16 threads, one process).

Usage: NUMBA_NUM_THREADS=16 python benchmarks/tools/thread_scaling.py [--out scaling.json] [--scale 0.5]

Workloads (seeded, synthetic unless noted; warm-up before timing, best of ``--repeat``):
  jko_unrolled   rerank_batch, contrib config, unrolled gradient, M=200 dense pools
  jko_implicit   rerank_batch, tuned config, implicit gradient, M=200 dense pools
  jko_tfidf      rerank_batch, contrib/implicit, TF-IDF (CSR) geometry
  bm25_top10     BM25 okapi batched top-10 kernel over a synthetic Zipf corpus (queries pre-analysed)
  sgr_top10      SparseGeometricRAG end-to-end search on bundled SciFact (1109 queries x reps),
                 with bm25s_top10 (bm25s numba backend, same texts, tokenisation included) beside it
  metrics        nDCG@10/recall@10/MAP over 10k queries x 100 results
  mmr / dpp      pool baselines over 2000 pools
Prints a table (throughput and speed-up vs 1 thread) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from jkofast._threads import max_threads, numba_threads


def _pools(nq, M, d, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, d))
    lab = rng.integers(0, 20, nq * M)
    Z = centres[lab] + 1.5 * rng.normal(size=(nq * M, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    E = -rng.random(nq * M)
    off = np.arange(nq + 1, dtype=np.int64) * M
    return E, Z.astype(np.float32), off


def workloads(s: float, only=()):
    """name -> (n, unit, fn(n_threads)); only the names in ``only`` are built (all if empty)."""
    out = {}
    for name, build in _BUILDERS.items():
        if only and name not in only:
            continue
        try:
            out.update(build(s))
        except Exception:  # pragma: no cover
            traceback.print_exc()
    return out


def _jko(s):
    from jkofast.jko.solver import operating_point, rerank_batch

    out = {}
    n_u = max(16, int(64 * s))
    E, Z, off = _pools(n_u, 200, 384)
    cfg_u = operating_point("contrib")
    out["jko_unrolled"] = (
        n_u,
        "queries",
        lambda nt: rerank_batch(E, None, off, embeddings=Z, config=cfg_u, n_threads=nt),
    )
    n_i = max(32, int(512 * s))
    E2, Z2, off2 = _pools(n_i, 200, 384, seed=1)
    cfg_i = operating_point("tuned", grad="implicit")
    out["jko_implicit"] = (
        n_i,
        "queries",
        lambda nt: rerank_batch(E2, None, off2, embeddings=Z2, config=cfg_i, n_threads=nt),
    )
    return out


def _jko_tfidf(s):
    import scipy.sparse as sp

    from jkofast.jko.solver import operating_point, rerank_batch

    cfg_i = operating_point("tuned", grad="implicit")
    rng = np.random.default_rng(2)
    n_t = max(32, int(512 * s))
    X = sp.random(n_t * 200, 5000, density=0.01, format="csr", random_state=3, dtype=np.float64)
    X.data = np.abs(X.data) + 0.1
    E3 = -rng.random(n_t * 200)
    off3 = np.arange(n_t + 1, dtype=np.int64) * 200
    return {"jko_tfidf": (n_t, "queries", lambda nt: rerank_batch(E3, None, off3, csr=X, config=cfg_i, n_threads=nt))}


def _bm25(s):
    from jkofast.sparse.index import BM25Index

    rng = np.random.default_rng(4)
    n_docs = int(200_000 * s)
    V = 50_000
    lens = rng.integers(20, 120, n_docs)
    zipf = 1.0 / np.arange(1, V + 1) ** 1.1
    zipf /= zipf.sum()
    toks = rng.choice(V, lens.sum(), p=zipf)
    cut = np.cumsum(lens)[:-1]
    docs = np.split(toks, cut)
    idx = BM25Index().fit_token_ids(docs, n_terms=V)
    nq = int(20_000 * s)
    qs = [rng.choice(V, rng.integers(3, 12), p=zipf) for _ in range(nq)]
    qcsr = idx._token_query_csr(qs)  # analysed once: time the batched scoring + top-k kernel
    return {"bm25_top10": (nq, "queries", lambda nt: idx._topk(*qcsr, 10, nt))}


def _sgr(s):
    from jkofast.datasets.beir import load_dataset
    from jkofast.pools.retrievers import get_retriever

    ds = load_dataset("scifact")
    sgr = get_retriever("sgr").fit(ds.doc_texts(" "))
    qtexts = list(ds.query_texts) if not isinstance(ds.query_texts, dict) else list(ds.query_texts.values())
    reps = max(1, int(8 * s))
    qbatch = qtexts * reps
    out = {"sgr_top10": (len(qbatch), "queries", lambda nt: sgr.search(qbatch, 10, n_threads=nt))}
    try:  # the throughput peer, same texts in -> top-10 out, tokenisation included
        import bm25s
    except ImportError:
        return out
    bm = bm25s.BM25(backend="numba")
    bm.index(bm25s.tokenize(ds.doc_texts(" "), stopwords=None, show_progress=False), show_progress=False)

    def run_bm25s(nt):
        with numba_threads(nt):
            bm.retrieve(
                bm25s.tokenize(qbatch, stopwords=None, show_progress=False), k=10, n_threads=nt, show_progress=False
            )

    out["bm25s_top10"] = (len(qbatch), "queries", run_bm25s)
    return out


def _metrics(s):
    from jkofast.eval.metrics import evaluate_codes

    rng = np.random.default_rng(5)
    nq = 10_000
    roff = np.arange(nq + 1, dtype=np.int64) * 100
    rcodes = rng.integers(0, 5000, nq * 100).astype(np.int64)
    rscores = rng.random(nq * 100)
    qoff = np.arange(nq + 1, dtype=np.int64) * 3
    qcodes = rng.integers(0, 5000, nq * 3).astype(np.int64)
    qlab = np.ones(nq * 3, np.int64)
    metrics = ("ndcg@10", "recall@10", "map")
    return {
        "metrics": (
            nq,
            "queries",
            lambda nt: evaluate_codes(roff, rcodes, rscores, qoff, qcodes, qlab, metrics=metrics, n_threads=nt),
        )
    }


def _pool_baselines(s):
    from jkofast.pools.baselines import dpp_map, mmr

    nb = int(2000 * s)
    E4, Z4, off4 = _pools(nb, 200, 384, seed=6)
    rel = -E4
    return {
        "mmr": (nb, "pools", lambda nt: mmr(rel, Z4, off4, 20, n_threads=nt)),
        "dpp": (nb, "pools", lambda nt: dpp_map(rel, Z4, off4, 20, n_threads=nt)),
    }


# builders keyed by the names they produce (a builder may produce several workloads)
_BUILDERS = {
    "jko_unrolled": _jko,
    "jko_tfidf": _jko_tfidf,
    "bm25_top10": _bm25,
    "sgr_top10": _sgr,
    "metrics": _metrics,
    "mmr": _pool_baselines,
}
_PRODUCES = {
    "jko_unrolled": ("jko_unrolled", "jko_implicit"),
    "mmr": ("mmr", "dpp"),
    "sgr_top10": ("sgr_top10", "bm25s_top10"),
}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="scaling.json")
    ap.add_argument("--scale", type=float, default=1.0, help="workload size factor (0.25 = quick)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", default="")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    print(f"NUMBA_NUM_THREADS={max_threads()}; cpus={os.cpu_count()}", flush=True)
    threads = [t for t in (1, 2, 4, 8, 16) if t <= max_threads()]
    res = {"threads": threads, "cpus": os.cpu_count(), "results": {}}
    only = [x for x in a.only.split(",") if x]
    builders = {b for b in _BUILDERS if any(x in _PRODUCES.get(b, (b,)) for x in only)} if only else ()
    for name, (n, unit, fn) in workloads(a.scale, builders).items():
        if only and name not in only:
            continue
        try:
            tw = time.perf_counter()
            with numba_threads(1):
                fn(1)  # warm (compile / load cache) outside the timer
            print(f"  [{name}: first call {time.perf_counter() - tw:.1f}s]", flush=True)
            row = {}
            for nt in threads:
                best = float("inf")
                for _ in range(a.repeat):
                    t = time.perf_counter()
                    fn(nt)
                    best = min(best, time.perf_counter() - t)
                row[nt] = best
            thr = {nt: n / row[nt] for nt in threads}
            res["results"][name] = {
                "n": n,
                "unit": unit,
                "seconds": row,
                "throughput": thr,
                "speedup": {nt: row[threads[0]] / row[nt] for nt in threads},
            }
            print(
                f"{name:14s} n={n:6d} {unit:7s} "
                + "  ".join(f"{nt}t:{thr[nt]:10.1f}/s (x{row[threads[0]] / row[nt]:4.2f})" for nt in threads),
                flush=True,
            )
        except Exception:
            traceback.print_exc()
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)
    print(f"total {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
