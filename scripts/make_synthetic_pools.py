"""Generate a synthetic TREC pool file for ``jkofast rerank`` throughput / memory checks.

Writes ``OUT/run.trec`` (``qid Q0 docid rank score tag``, queries contiguous, M lines each),
``OUT/E.npy`` (float32 (n_docs, dim), L2-normalised, clustered) and ``OUT/ids.txt``.

Usage: python scripts/make_synthetic_pools.py OUT [--queries 100000] [--pool 200]
       [--docs 50000] [--dim 384] [--seed 0]
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--pool", type=int, default=200)
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--clusters", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    centres = rng.normal(size=(a.clusters, a.dim)).astype(np.float32)
    lab = rng.integers(0, a.clusters, a.docs)
    E = centres[lab] + 0.8 * rng.normal(size=(a.docs, a.dim)).astype(np.float32)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    np.save(os.path.join(a.out, "E.npy"), E.astype(np.float32))
    with open(os.path.join(a.out, "ids.txt"), "w") as fh:
        fh.write("".join(f"doc{i}\n" for i in range(a.docs)))
    ranks = np.arange(1, a.pool + 1)
    with open(os.path.join(a.out, "run.trec"), "w") as fh:
        for q0 in range(0, a.queries, 1000):
            buf = []
            for q in range(q0, min(q0 + 1000, a.queries)):
                docs = rng.choice(a.docs, a.pool, replace=False)
                sc = np.sort(rng.gamma(2.0, 2.0, a.pool))[::-1]
                buf.extend(f"q{q} Q0 doc{d} {r} {s:.4f} synth\n" for d, r, s in zip(docs, ranks, sc, strict=True))
            fh.write("".join(buf))


if __name__ == "__main__":
    main()
