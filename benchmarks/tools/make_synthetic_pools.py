"""Generate a synthetic TREC pool file for ``jkofast rerank`` throughput / memory checks.

Writes ``OUT/run.trec`` (``qid Q0 docid rank score tag``, queries contiguous, M lines each),
``OUT/E.npy`` (float32 (n_docs, dim), L2-normalised, clustered) and ``OUT/ids.txt``.

With ``--scores``, also ``OUT/scores.tsv``: a rerank score per (query, doc) line,
``qid<TAB>docid<TAB>score`` in the run's order (for ``jkofast rerank --scores``).

Usage: python benchmarks/tools/make_synthetic_pools.py OUT [--queries 100000] [--pool 200]
       [--docs 50000] [--dim 384] [--seed 0] [--scores]
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--pool", type=int, default=200)
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--clusters", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scores", action="store_true", help="also write OUT/scores.tsv (rerank scores)")
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
    sfh = open(os.path.join(a.out, "scores.tsv"), "w") if a.scores else None
    srng = np.random.default_rng(a.seed + 1)
    with open(os.path.join(a.out, "run.trec"), "w") as fh:
        for q0 in range(0, a.queries, 1000):
            q1 = min(q0 + 1000, a.queries)
            nb = q1 - q0
            # distinct docs per query without an O(n_docs) draw: an arithmetic progression
            # s + j*step (mod n_docs) with step*pool < n_docs, then a random within-pool order
            start = rng.integers(0, a.docs, nb)[:, None]
            step = rng.integers(1, max(2, a.docs // a.pool), nb)[:, None]
            docs = (start + step * np.arange(a.pool)[None, :]) % a.docs
            docs = np.take_along_axis(docs, rng.random((nb, a.pool)).argsort(axis=1), axis=1)
            sc = -np.sort(-rng.gamma(2.0, 2.0, (nb, a.pool)), axis=1)
            buf = []
            for i in range(nb):
                q = q0 + i
                buf.extend(
                    f"q{q} Q0 doc{d} {r} {s:.4f} synth\n"
                    for d, r, s in zip(docs[i].tolist(), ranks.tolist(), sc[i].tolist(), strict=True)
                )
            fh.write("".join(buf))
            if sfh is not None:
                rs = srng.normal(size=(nb, a.pool))  # own stream: run.trec is the same with or without
                sfh.write(
                    "".join(
                        f"q{q0 + i}\tdoc{d}\t{x:.5f}\n"
                        for i in range(nb)
                        for d, x in zip(docs[i].tolist(), rs[i].tolist(), strict=True)
                    )
                )
    if sfh is not None:
        sfh.close()


if __name__ == "__main__":
    main()
