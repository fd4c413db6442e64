"""Stretch experiment: a sparse-only (no transformer, no dense vectors) JKO-RAG pipeline on SciFact.

Everything is selected on TRAIN queries (qrels train split) by a procedure fixed in advance,
then reported on the 300 TEST queries:

1. stemmer: BM25 lucene (``\\b\\w\\w+\\b``, English stop-words) without / with the Porter stemmer;
2. title weight: the title repeated t in {1, 2, 3} times before the abstract (a one-field BM25F);
3. energy: greedy forward selection over full-corpus sparse signals added to the base BM25
   (``r = (1 - sum w) minmax(base) + sum w_i minmax(signal_i)`` over the pool); each round takes
   the (signal, weight in {0.1, 0.2, 0.3}) with the best train nDCG@10 of the read-out and adds
   it if ``--gate ci`` (default): the paired 95 % bootstrap CI of its per-query gain on train is
   above 0; ``--gate min-gain``: the mean gain is >= 0.001; at most 3 rounds;
4. JKO operating point: the named points and the 25 published configurations (JKO parameters
   only), Wasserstein mode, ``grad="implicit"``, on the published 80 train queries.

Pool: top-200 of the base BM25 (the sparse-only pool of SPEC A.2.6).  Geometry: TF-IDF rows
(same analyser, stemmed, title-weighted texts), sparse cosine.  Signals (all on the full corpus):

  base   BM25 lucene, stemmed, title x t          lu    BM25 lucene, no stemming
  ok     BM25 okapi ``\\w+`` (published)            oks   BM25 okapi ``\\w+``, stemmed
  tfs    TF-IDF cosine, stemmed + stop-words      tf    TF-IDF cosine (sklearn)
  bis    BM25 over stemmed word bigrams           tis   BM25 over titles only, stemmed
  sgr_*  SparseGeometricRAG components of its top-200 (tail, lexadj, sem = PPMI expansion,
         rare, relevance, lex1); documents outside get the row minimum

Usage: python experiments/sparse_only_search.py [--gate ci|min-gain] [--out experiments/results/sparse_only_search.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
import time

import numpy as np

GAIN_MIN = 0.001
WEIGHTS = (0.1, 0.2, 0.3)
TITLE_REPEATS = (1, 2, 3)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def title_texts(ds, t: int) -> list[str]:
    return [" ".join([ti] * t + [tx]) if ti else tx for ti, tx in zip(ds.titles, ds.texts, strict=True)]


def bigram_texts(texts, analyzer):
    an = analyzer.build()
    out = []
    for t in texts:
        toks = an(t)
        out.append(" ".join(a + "_" + b for a, b in itertools.pairwise(toks)))
    return out


def signals(ds, queries, t: int, with_sgr: bool = True) -> dict:
    from jkofast.sparse.index import BM25Index, TfidfIndex
    from jkofast.text import Analyzer
    from jkofast.text.patterns import SKLEARN, WORD

    st = Analyzer(SKLEARN, stopwords="english", stemmer="porter")
    texts = title_texts(ds, t)
    out = {
        "base": BM25Index("lucene", analyzer=st).fit(texts).score_all(queries),
        "lu": BM25Index("lucene").fit(ds.doc_texts(" ")).score_all(queries),
        "ok": BM25Index("okapi").fit(ds.doc_texts(". ")).score_all(queries),
        "oks": BM25Index("okapi", analyzer=Analyzer(WORD, stemmer="porter")).fit(ds.doc_texts(". ")).score_all(queries),
        "tfs": TfidfIndex(st).fit(texts).score_all(queries),
        "tf": TfidfIndex().fit(ds.doc_texts(" ")).score_all(queries),
    }
    raw = Analyzer(r"\S+", lowercase=False)
    out["bis"] = (
        BM25Index("lucene", analyzer=raw).fit(bigram_texts(ds.doc_texts(" "), st)).score_all(bigram_texts(queries, st))
    )
    out["tis"] = BM25Index("lucene", analyzer=st).fit([x if x.strip() else "-" for x in ds.titles]).score_all(queries)
    if with_sgr:
        from jkofast.sgr.retriever import SparseGeometricRetriever

        P = SparseGeometricRetriever().fit(ds.doc_texts(" ")).pool(queries, 200)
        for c in ("tail", "lexadj", "sem", "rare", "relevance", "lex1"):
            v = getattr(P, c)
            M = np.zeros((len(queries), ds.n_docs), np.float32)
            for i in range(len(queries)):
                ok = P.doc[i] >= 0
                vals = v[i][ok]
                fin = np.isfinite(vals)
                mn = vals[fin].min() if fin.any() else 0.0
                M[i] = mn
                M[i, P.doc[i][ok]] = np.where(fin, vals, mn)
            out["sgr_" + c] = M
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-sgr", action="store_true")
    ap.add_argument(
        "--gate",
        choices=("ci", "min-gain"),
        default="ci",
        help="when greedy selection adds an energy ingredient (see the module docstring)",
    )
    a = ap.parse_args(argv)

    from jkofast.datasets.beir import load_dataset
    from jkofast.eval.metrics import bootstrap_ci
    from jkofast.jko.energy import minmax, softmax_tau
    from jkofast.jko.solver import JKOConfig, operating_point, rerank_batch
    from jkofast.pools.baselines import positions_to_docs, topk_by_score
    from jkofast.pools.candidates import build_pools
    from jkofast.sparse.index import BM25Index, TfidfIndex
    from jkofast.studies.main_job import evaluate_topk, readout_topk
    from jkofast.studies.tuning import sample_configs, train_queries
    from jkofast.text import Analyzer
    from jkofast.text.patterns import SKLEARN

    t_start = time.perf_counter()
    ds = load_dataset("scifact")
    qids = list(ds.query_ids)
    queries = [ds.queries[q] for q in qids]
    row = {q: i for i, q in enumerate(qids)}
    split_q = {s: ds.split_query_ids(s) for s in ("train", "test")}
    split_q["train80"] = train_queries(ds.qrels("train"), qids, n=80, seed=0)
    qrels = {"train": ds.qrels("train"), "test": ds.qrels("test")}
    qrels["train80"] = qrels["train"]
    rows_of = {s: np.array([row[q] for q in qq]) for s, qq in split_q.items()}

    def ndcg_full(S, s):
        top = np.argsort(-S[rows_of[s]], axis=1, kind="stable")[:, :10]
        return float(np.mean(evaluate_topk(top, split_q[s], qrels[s], ds.doc_ids)["ndcg"]))

    out = {"procedure": __doc__.split("Usage")[0].strip(), "gate": a.gate}
    # 1-2. stemmer and title weight, BM25 alone
    stage = {}
    for name, an in (
        ("bm25_lucene", Analyzer(SKLEARN, stopwords="english")),
        ("bm25_lucene_porter", Analyzer(SKLEARN, stopwords="english", stemmer="porter")),
    ):
        for t in TITLE_REPEATS if name.endswith("porter") else (1,):
            S = BM25Index("lucene", analyzer=an).fit(title_texts(ds, t)).score_all(queries)
            key = f"{name}_title{t}"
            stage[key] = {s: ndcg_full(S, s) for s in ("train", "test")}
            log(f"{key:<28} train {stage[key]['train']:.4f}  test {stage[key]['test']:.4f}")
    out["bm25"] = stage
    t_best = max(TITLE_REPEATS, key=lambda t: stage[f"bm25_lucene_porter_title{t}"]["train"])
    out["title_repeats"] = t_best
    log(f"title repeats selected on train: {t_best}")

    # 3. energy: greedy forward selection on train read-outs over the base pool
    t0 = time.perf_counter()
    sig = signals(ds, queries, t_best, with_sgr=not a.no_sgr)
    log(f"signals in {time.perf_counter() - t0:.1f}s")
    pools, cache = {}, {}
    for s in ("train", "test", "train80"):
        P = build_pools(sig["base"][rows_of[s]], None, query_ids=split_q[s], M=200)
        r = np.repeat(np.arange(P.n_queries), np.diff(P.offsets))
        pools[s] = P
        for k, M in sig.items():
            cache[s, k] = minmax(M[rows_of[s]][r, P.doc_idx].astype(np.float64), P.offsets)

    def energy(w, s):
        return (1.0 - sum(w.values())) * cache[s, "base"] + sum(wt * cache[s, k] for k, wt in w.items())

    def readout(w, s):
        P = pools[s]
        top = positions_to_docs(topk_by_score(energy(w, s), P.offsets, 20), P.offsets, P.doc_idx)
        return evaluate_topk(top, split_q[s], qrels[s], ds.doc_ids)

    w = {}
    cur_q = np.asarray(readout(w, "train")["ndcg"])
    cur = float(np.mean(cur_q))
    greedy = [{"add": None, "train": cur}]
    for _ in range(3):
        cands = []
        for k in sig:
            if k == "base" or k in w:
                continue
            for wt in WEIGHTS:
                if sum(w.values()) + wt >= 0.7:
                    continue
                cands.append((float(np.mean(readout({**w, k: wt}, "train")["ndcg"])), k, wt))
        best = max(cands)
        best_q = np.asarray(readout({**w, best[1]: best[2]}, "train")["ndcg"])
        _, lo, hi = bootstrap_ci(best_q - cur_q)
        log(
            f"greedy: best addition {best[1]} {best[2]} -> train {best[0]:.4f} (from {cur:.4f}; "
            f"paired gain CI [{lo:+.4f}, {hi:+.4f}])"
        )
        greedy.append({"candidate": [best[1], best[2]], "train": best[0], "gain_ci": [lo, hi]})
        if (lo <= 0.0) if a.gate == "ci" else (best[0] - cur < GAIN_MIN):
            greedy[-1]["added"] = False
            break
        greedy[-1]["added"] = True
        w[best[1]] = best[2]
        cur, cur_q = best[0], best_q
    out["greedy"] = greedy
    out["energy_weights"] = {"base": round(1.0 - sum(w.values()), 3), **w}
    log(f"energy selected on train: {out['energy_weights']}")

    # 4. JKO operating point on the published 80 train queries
    X = TfidfIndex(Analyzer(SKLEARN, stopwords="english", stemmer="porter")).fit(title_texts(ds, t_best)).doc_matrix()

    def jko(wts, s, cfg):
        P = pools[s]
        r = energy(wts, s)
        t0 = time.perf_counter()
        res = rerank_batch(-r, softmax_tau(r, P.offsets, cfg.tau0), P.offsets, csr=X[P.doc_idx], config=cfg)
        dt = time.perf_counter() - t0
        m = evaluate_topk(readout_topk(res.p, P), split_q[s], qrels[s], ds.doc_ids)
        return m, 1000 * dt / len(split_q[s])

    cands = {name: operating_point(name, grad="implicit") for name in ("base", "tuned", "contrib", "fast")}
    jk = ("h", "lam", "rho", "sinkhorn_eps", "T", "inner_steps", "tau0")
    for i, c in enumerate(sample_configs(25)):
        cands[f"published#{i + 1}"] = JKOConfig(**{k: c[k] for k in jk}, grad="implicit").validate()
    op_scores = {}
    for name, cfg in cands.items():
        op_scores[name] = float(np.mean(jko(w, "train80", cfg)[0]["ndcg"]))
        log(f"JKO {name:<14} train80 {op_scores[name]:.4f}")
    op = max(cands, key=lambda n: op_scores[n])  # first strictly highest (dict order)
    cfg = cands[op]
    out["jko_train80"] = op_scores
    out["jko_readout_train80"] = float(np.mean(readout(w, "train80")["ndcg"]))
    out["operating_point"] = {"name": op, **{k: getattr(cfg, k) for k in jk}, "grad": cfg.grad}
    log(f"operating point selected on train80: {op} {out['operating_point']}")

    # ablation on TEST (each row selected on train; ingredients added cumulatively)
    abl = {}

    def put(name, m, ms=None):
        mean, lo, hi = bootstrap_ci(m["ndcg"])
        abl[name] = {"ndcg@10": mean, "ci": [lo, hi], "recall@10": float(np.mean(m["recall"]))}
        if ms is not None:
            abl[name]["ms_per_query"] = ms
        log(f"  {name:<44} test {mean:.4f} [{lo:.3f}, {hi:.3f}]")

    for key in ("bm25_lucene_title1", "bm25_lucene_porter_title1", f"bm25_lucene_porter_title{t_best}"):
        abl[key] = {"ndcg@10": stage[key]["test"]}
        log(f"  {key:<44} test {stage[key]['test']:.4f}")
    put("energy readout (selected weights)", readout(w, "test"))
    tuned = operating_point("tuned", grad="implicit")
    put("JKO-RAG tuned point, base energy only", *jko({}, "test", tuned))
    put("JKO-RAG tuned point, selected energy", *jko(w, "test", tuned))
    put(f"JKO-RAG {op}, selected energy (the recipe)", *jko(w, "test", cfg))
    for k in w:  # leave-one-out of each energy ingredient, recipe otherwise unchanged
        put(f"  recipe without {k}", *jko({j: v for j, v in w.items() if j != k}, "test", cfg))
    # TF-IDF geometry vs none: the no-proximal mode at the same point (no geometry at all)
    put(f"no-prox {op}, selected energy (no geometry)", *jko(w, "test", dataclasses.replace(cfg, mode="noproximal")))
    out["test_ablation"] = abl
    out["wall_s"] = time.perf_counter() - t_start
    txt = json.dumps(out, indent=1, default=float)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(txt + "\n")
    print(txt)


if __name__ == "__main__":
    main()
