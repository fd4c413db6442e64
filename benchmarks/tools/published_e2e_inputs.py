"""Inputs for the published NM-JKO end-to-end script (JKO-RAG ``src/nm_jko_end2end.py``) from the bundled SciFact data.

    python benchmarks/tools/published_e2e_inputs.py ROOT [--data DIR] [--m 200]

``ROOT`` is a copy of the JKO-RAG repository (the script reads ``ROOT/data/scifact`` and
``ROOT/indices/scifact``). What the published pipeline builds with models that are not available
offline is replaced by the bundled all-MiniLM-L6-v2 embeddings (``embeddings/minilm-l6-v2``): the doc
and train-query embeddings, candidate pools = the top-``m`` docs by cosine for each train query, and
the cosine as both the dense score and the rerank score (no cross-encoder; BM25 scores are zeros, the
script does not read them). No InfoNCE-trained W is written, so the script starts from its random W.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="copy of the JKO-RAG repository")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))
    ap.add_argument("--m", type=int, default=200, help="pool size")
    args = ap.parse_args(argv)
    src = os.path.join(args.data, "scifact")
    d = os.path.join(args.root, "data", "scifact", "scifact")
    os.makedirs(os.path.join(d, "qrels"), exist_ok=True)
    corpus = os.path.join(d, "corpus.jsonl")
    with gzip.open(os.path.join(src, "corpus.jsonl.gz"), "rb") as fin, open(corpus, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    shutil.copy(os.path.join(src, "queries.jsonl"), d)
    shutil.copy(os.path.join(src, "qrels", "train.tsv"), os.path.join(d, "qrels"))
    ix = os.path.join(args.root, "indices", "scifact")
    os.makedirs(ix, exist_ok=True)
    emb = os.path.join(src, "embeddings", "minilm-l6-v2")
    with open(os.path.join(emb, "docs_ids.txt")) as f:
        doc_ids = f.read().split()
    with open(os.path.join(emb, "query_ids.txt")) as f:
        q_ids = f.read().split()
    D = np.load(os.path.join(emb, "docs.npy")).astype(np.float32)
    Q = np.load(os.path.join(emb, "queries.npy")).astype(np.float32)
    with open(os.path.join(ix, "doc_ids.json"), "w") as f:
        json.dump(doc_ids, f)
    np.save(os.path.join(ix, "embeddings.npy"), D)
    with open(os.path.join(src, "qrels", "train.tsv")) as f:
        train = sorted({line.split("\t")[0] for line in f.read().splitlines()[1:]})
    row = {q: i for i, q in enumerate(q_ids)}
    Qt = Q[[row[q] for q in train]]
    np.save(os.path.join(ix, "q_embeddings_train.npy"), Qt)
    with open(os.path.join(ix, "q_ids_train.json"), "w") as f:
        json.dump(train, f)
    S = Qt @ D.T
    cand = np.argsort(-S, axis=1, kind="stable")[:, : args.m]
    dense = np.take_along_axis(S, cand, 1)
    np.savez(
        os.path.join(ix, "candidates_train.npz"),
        cand_idx=cand,
        rerank=dense,
        dense_pool=dense,
        bm25_pool=np.zeros_like(dense),
        q_ids=np.array(train),
    )
    print(f"{len(train)} train queries, pools {cand.shape}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
