"""Sparse-only JKO-RAG, second attempt (issue #5 stretch target): richer sparse energies and geometries.

No transformer and no dense vector from a neural model anywhere.  Fixed from the first search
(experiments/sparse_only_search.py, selected on train there): BM25 lucene + Porter stemmer + English
stop-words over ``title x 3 + abstract``; pools of 200.  Every choice below is made on ALL 809
SciFact TRAIN queries by a procedure fixed before any number was seen; TEST (300 queries) is
evaluated once at the end, for the selected recipe and the cumulative ablation rows.

Stages (each keeps its best candidate by train nDCG@10 if the paired 95 % bootstrap CI of its
per-query gain over the current stage holder is above 0, ``--gate ci``; ``--gate max`` keeps the
best mean whenever it is higher):

E1 query model / first stage (full-corpus scores, experiments/expansion.py), each evaluated as the pool
   builder (``own``: its top-200 pool, read-out = its full-corpus top-10) and as a re-scoring of
   the base BM25 pool (``base``):
   RM3: feedback docs k in {3, 5, 10} x terms {10, 20} x weight {0.3, 0.5}  (12)
   PPMI expansion through SGR's graph A (``ppmi``) and second-order graph G (``ppmi2``), fitted
   on the same stemmed counts: terms {10, 20} x weight {0.1, 0.2, 0.3}       (12)
E2 a second sparse signal mixed into the E1 energy over its pool,
   ``r = (1 - w) minmax(first) + w minmax(signal)``, signal in {Dirichlet QL mu 500 / 1000 / 2000,
   stemmed TF-IDF cosine, base BM25 (when E1 is not BM25)}, w in {0.1, 0.2, 0.3}
E3 score propagation in the pool (cluster hypothesis, stemmed TF-IDF cosine neighbours):
   k in {5, 10, 20} x beta in {0.1, 0.2, 0.3}
G  geometry of the W step: tfidf, bm25, ppmi, sgr_centres (experiments/sparse_corpus.py), at
   JKO points published#3 and fast (W mode, grad="implicit"); the geometry with the best train
   figure at either point is kept.  Extra row, not selectable: LSA (truncated SVD, 128 dims, of
   the stemmed TF-IDF; "dense vectors derived from TF-IDF").  No-prox and KL-Prox alongside.
J  JKO operating point with that geometry: the 4 named points, the 25 published configurations
   (JKO parameters only) and 6 milder points (MILD), W mode, grad="implicit"; best train mean.

Usage: python experiments/sparse_only_v2.py [--gate ci|max] [--out experiments/results/sparse_only_v2.json]

(``main(argv, base=...)`` reruns the same stages on another first-stage analyser / title weight:
experiments/sparse_only_v3.py.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np

RM3_GRID = [dict(kind="rm3", fb_docs=k, n_terms=n, weight=w) for k in (3, 5, 10) for n in (10, 20) for w in (0.3, 0.5)]
GRAPH_GRID = [dict(kind=g, n_terms=n, weight=w) for g in ("ppmi", "ppmi2") for n in (10, 20) for w in (0.1, 0.2, 0.3)]
E2_SIGNALS = ("ql500", "ql1000", "ql2000", "tfs", "base")
E2_WEIGHTS = (0.1, 0.2, 0.3)
E3_GRID = [dict(k=k, beta=b) for k in (5, 10, 20) for b in (0.1, 0.2, 0.3)]
GEOMETRIES = ("tfidf", "bm25", "ppmi", "sgr_centres")
GEO_POINTS = ("published#3", "fast")
MILD = {  # milder JKO points (fewer steps, weaker redundancy, stronger/weaker proximal term)
    "mild_fast_T1": dict(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=1, inner_steps=15, tau0=1.0),
    "mild_fast_h8_T1": dict(h=8.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=1, inner_steps=15, tau0=1.0),
    "mild_fast_h0.5": dict(h=0.5, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=2, inner_steps=15, tau0=1.0),
    "mild_p3_T1": dict(h=2.0, lam=0.01, rho=0.2, sinkhorn_eps=0.1, T=1, inner_steps=25, tau0=0.3),
    "mild_p3_rho0.05": dict(h=2.0, lam=0.01, rho=0.05, sinkhorn_eps=0.1, T=2, inner_steps=25, tau0=0.3),
    "mild_p3_h0.5_rho0.05": dict(h=0.5, lam=0.01, rho=0.05, sinkhorn_eps=0.1, T=2, inner_steps=25, tau0=0.3),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def key_of(d: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in d.items())


# the first stage of the first two attempts (the keys of sparse_corpus.sparse_analyzer + title repeats)
BASE = {"title_repeats": 3, "token_pattern": "sklearn", "stopwords": "english", "compounds": False}


def main(argv=None, base: dict | None = None):
    """Run the stages on ``base`` (default :data:`BASE`); returns the JSON-able result dict."""
    base = {**BASE, **(base or {})}
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="experiments/results/sparse_only_v2.json")
    ap.add_argument("--gate", choices=("ci", "max"), default="ci")
    ap.add_argument(
        "--cache",
        default=None,
        help="JSON of already computed JKO train figures (resume)",
    )
    ap.add_argument(
        "--n-train",
        type=int,
        default=None,
        help="smoke test: first n train queries only",
    )
    a = ap.parse_args(argv)

    from expansion import propagate_scores
    from sparse_corpus import SparseCorpus, sparse_analyzer, sparse_only_inputs

    from jkofast.datasets.beir import load_dataset
    from jkofast.eval.metrics import bootstrap_ci
    from jkofast.jko.energy import minmax, softmax_tau
    from jkofast.jko.solver import JKOConfig, operating_point, rerank_batch
    from jkofast.pools.baselines import positions_to_docs, topk_by_score
    from jkofast.pools.candidates import build_pools
    from jkofast.studies.main_job import evaluate_topk, readout_topk
    from jkofast.studies.tuning import sample_configs

    t_start = time.perf_counter()
    timings = {}
    ds = load_dataset("scifact")
    split_q = {s: ds.split_query_ids(s) for s in ("train", "test")}
    if a.n_train:
        split_q["train"] = split_q["train"][: a.n_train]
    qrels = {s: ds.qrels(s) for s in ("train", "test")}
    queries = {s: [ds.queries[q] for q in split_q[s]] for s in ("train", "test")}

    t0 = time.perf_counter()
    sc = SparseCorpus(ds, base["title_repeats"], analyzer=sparse_analyzer(base))
    S_base = {s: sc.signal("base", queries[s]) for s in ("train", "test")}
    timings["indexes_s"] = time.perf_counter() - t0
    out = {
        "procedure": __doc__.split("Usage")[0].strip(),
        "gate": a.gate,
        "base": base,
        "n_train": len(split_q["train"]),
        "n_test": len(split_q["test"]),
    }

    def m_full(S, s):
        top = np.argsort(-S, axis=1, kind="stable")[:, :10]
        return np.asarray(evaluate_topk(top, split_q[s], qrels[s], ds.doc_ids)["ndcg"])

    def pools_of(S, s):
        return build_pools(S, None, query_ids=split_q[s], M=200)

    def gather(S, P):
        r = np.repeat(np.arange(P.n_queries), np.diff(P.offsets))
        return minmax(S[r, P.doc_idx].astype(np.float64), P.offsets)

    def m_pool(r, P, s):
        top = positions_to_docs(topk_by_score(r, P.offsets, 20), P.offsets, P.doc_idx)
        return np.asarray(evaluate_topk(top, split_q[s], qrels[s], ds.doc_ids)["ndcg"])

    def gate(best_q, cur_q):
        d, lo, hi = bootstrap_ci(best_q - cur_q)
        keep = (lo > 0.0) if a.gate == "ci" else (d > 0.0)
        return keep, [d, lo, hi]

    # ---------------- E1: query model / first stage --------------------------------------------
    t0 = time.perf_counter()
    P_base = pools_of(S_base["train"], "train")
    r_base = gather(S_base["train"], P_base)
    cur_q = m_pool(r_base, P_base, "train")
    e1 = {"bm25": {"train": float(cur_q.mean())}}
    log(f"E1 bm25 (base)  train {cur_q.mean():.4f}")
    best = ("bm25", "base", float(cur_q.mean()))
    for q in RM3_GRID + GRAPH_GRID:
        S = sc.first_stage(q, queries["train"], base=S_base["train"])
        own = m_full(S, "train")
        resc = m_pool(gather(S, P_base), P_base, "train")
        k = key_of(q)
        e1[k] = {
            "train_own_pool": float(own.mean()),
            "train_base_pool": float(resc.mean()),
        }
        log(f"E1 {k:<40} own {own.mean():.4f}  base-pool {resc.mean():.4f}")
        for pool, v in (("own", own), ("base", resc)):
            if v.mean() > best[2]:
                best = (k, pool, float(v.mean()))
    recipe = {
        **base,
        "query": {"kind": "bm25"},
        "pool": "base",
        "weights": {"first": 1.0},
        "propagation": None,
        "geometry": "tfidf",
    }
    if best[0] != "bm25":
        qcfg = next(q for q in RM3_GRID + GRAPH_GRID if key_of(q) == best[0])
        S = sc.first_stage(qcfg, queries["train"], base=S_base["train"])
        P = pools_of(S, "train") if best[1] == "own" else P_base
        best_q = m_pool(gather(S, P), P, "train")
        keep, ci = gate(best_q, cur_q)
        e1["_selected"] = {
            "candidate": best[0],
            "pool": best[1],
            "train": best[2],
            "gain_ci": ci,
            "kept": keep,
        }
        log(f"E1 best {best[0]} pool={best[1]} {best[2]:.4f} gain CI {ci} kept={keep}")
        if keep:
            recipe["query"], recipe["pool"] = qcfg, best[1]
            cur_q = best_q
    out["E1"] = e1
    timings["E1_s"] = time.perf_counter() - t0

    # current pools / signals (train)
    def state(s, rec):
        S1 = sc.first_stage(rec["query"], queries[s], base=S_base[s])
        P = pools_of(S1, s) if rec["pool"] == "own" else (P_base if s == "train" else pools_of(S_base[s], s))
        return S1, P

    S1, P1 = state("train", recipe)
    first = gather(S1, P1)

    # ---------------- E2: second sparse signal ---------------------------------------------------
    t0 = time.perf_counter()
    e2 = {"none": float(cur_q.mean())}
    best = (None, None, float(cur_q.mean()))
    sig_cache = {}
    for name in E2_SIGNALS:
        if name == "base" and recipe["query"]["kind"] == "bm25":
            continue
        sig_cache[name] = gather(sc.signal(name, queries["train"]), P1)
        for w in E2_WEIGHTS:
            v = m_pool((1 - w) * first + w * sig_cache[name], P1, "train")
            e2[f"{name}@{w}"] = float(v.mean())
            log(f"E2 {name}@{w:<5} train {v.mean():.4f}")
            if v.mean() > best[2]:
                best = (name, w, float(v.mean()))
    r_cur = first
    if best[0] is not None:
        best_q = m_pool((1 - best[1]) * first + best[1] * sig_cache[best[0]], P1, "train")
        keep, ci = gate(best_q, cur_q)
        e2["_selected"] = {
            "candidate": f"{best[0]}@{best[1]}",
            "train": best[2],
            "gain_ci": ci,
            "kept": keep,
        }
        log(f"E2 best {best[0]}@{best[1]} {best[2]:.4f} gain CI {ci} kept={keep}")
        if keep:
            recipe["weights"] = {"first": round(1 - best[1], 3), best[0]: best[1]}
            r_cur = (1 - best[1]) * first + best[1] * sig_cache[best[0]]
            cur_q = best_q
    out["E2"] = e2
    timings["E2_s"] = time.perf_counter() - t0

    # ---------------- E3: score propagation ------------------------------------------------------
    t0 = time.perf_counter()
    Xp = sc.geometry("tfidf")[P1.doc_idx]
    e3 = {"none": float(cur_q.mean())}
    best = (None, float(cur_q.mean()))
    for c in E3_GRID:
        v = m_pool(propagate_scores(r_cur, P1.offsets, Xp, **c), P1, "train")
        e3[key_of(c)] = float(v.mean())
        log(f"E3 {key_of(c):<16} train {v.mean():.4f}")
        if v.mean() > best[1]:
            best = (c, float(v.mean()))
    if best[0] is not None:
        r_new = propagate_scores(r_cur, P1.offsets, Xp, **best[0])
        best_q = m_pool(r_new, P1, "train")
        keep, ci = gate(best_q, cur_q)
        e3["_selected"] = {
            "candidate": key_of(best[0]),
            "train": best[1],
            "gain_ci": ci,
            "kept": keep,
        }
        log(f"E3 best {key_of(best[0])} {best[1]:.4f} gain CI {ci} kept={keep}")
        if keep:
            recipe["propagation"] = best[0]
            r_cur, cur_q = r_new, best_q
    out["E3"] = e3
    out["readout_train"] = float(cur_q.mean())
    timings["E3_s"] = time.perf_counter() - t0

    # consistency: the library recipe reproduces the selected read-out on train
    Pc, rc, _ = sparse_only_inputs(ds, queries["train"], split_q["train"], recipe={**recipe, "jko": {}}, corpus=sc)
    chk = float(m_pool(rc, Pc, "train").mean())
    out["readout_train_via_sparse_only_inputs"] = chk
    log(f"read-out selected on train {cur_q.mean():.4f} (sparse_only_inputs: {chk:.4f})")

    # ---------------- G / J: geometry and JKO point ----------------------------------------------
    jk = ("h", "lam", "rho", "sinkhorn_eps", "T", "inner_steps", "tau0")
    cands = {name: operating_point(name, grad="implicit") for name in ("base", "tuned", "contrib", "fast")}
    for i, c in enumerate(sample_configs(25)):
        cands[f"published#{i + 1}"] = JKOConfig(**{k: c[k] for k in jk}, grad="implicit").validate()
    for name, c in MILD.items():
        cands[name] = JKOConfig(**c, grad="implicit").validate()
    cache = {}
    if a.cache and os.path.exists(a.cache):
        with open(a.cache) as fh:
            cache = json.load(fh)
    lsa_Z = {}

    def geo_rows(geo, P):
        if geo == "lsa128":
            if "Z" not in lsa_Z:
                from sklearn.decomposition import TruncatedSVD

                lsa_Z["Z"] = TruncatedSVD(128, random_state=0).fit_transform(sc.geometry("tfidf")).astype(np.float32)
            return {"embeddings": lsa_Z["Z"][P.doc_idx]}
        return {"csr": sc.geometry(geo)[P.doc_idx]}

    def jko(r, P, s, geo, cfg):
        t1 = time.perf_counter()
        res = rerank_batch(
            -r,
            softmax_tau(r, P.offsets, cfg.tau0),
            P.offsets,
            config=cfg,
            **geo_rows(geo, P),
        )
        dt = time.perf_counter() - t1
        top = readout_topk(res.p, P)
        m = evaluate_topk(top, split_q[s], qrels[s], ds.doc_ids)
        return (
            np.asarray(m["ndcg"]),
            1000 * dt / len(split_q[s]),
            int(np.count_nonzero(res.status)),
            top,
        )

    def train_jko(geo, name, mode="wasserstein"):
        bk = "" if base == BASE else key_of(base) + "|"  # v2's own cache keys unchanged
        ck = (
            f"{bk}{key_of(recipe['query'])}|{recipe['pool']}|{key_of(recipe['weights'])}|{recipe['propagation']}|"
            f"{geo}|{name}|{mode}|n{len(split_q['train'])}"
        )
        if ck not in cache:
            cfg = dataclasses.replace(cands[name], mode=mode)
            v, ms, bad, _ = jko(r_cur, P1, "train", geo, cfg)
            cache[ck] = {"train": float(v.mean()), "ms_per_query": ms, "bad": bad}
            if a.cache:
                with open(a.cache, "w") as fh:
                    json.dump(cache, fh)
        e = cache[ck]
        log(f"JKO {geo:<12} {name:<22} {mode:<11} train {e['train']:.4f}  {e['ms_per_query']:.1f} ms/q")
        return e

    t0 = time.perf_counter()
    g = {}
    for geo in (*GEOMETRIES, "lsa128"):
        for name in GEO_POINTS:
            g[f"{geo}|{name}"] = train_jko(geo, name)
    for name in GEO_POINTS:
        for mode in ("noproximal", "kl"):
            g[f"{mode}|{name}"] = train_jko("tfidf", name, mode)
    geo_sel = max(GEOMETRIES, key=lambda geo: max(g[f"{geo}|{n}"]["train"] for n in GEO_POINTS))
    out["G"] = g
    out["geometry"] = geo_sel
    recipe["geometry"] = geo_sel
    timings["G_s"] = time.perf_counter() - t0
    log(f"geometry selected on train: {geo_sel}")

    t0 = time.perf_counter()
    jres = {name: train_jko(geo_sel, name) for name in cands}
    op = max(cands, key=lambda n: jres[n]["train"])  # first strictly highest (dict order)
    cfg = cands[op]
    out["J"] = jres
    out["operating_point"] = {
        "name": op,
        **{k: getattr(cfg, k) for k in jk},
        "grad": cfg.grad,
    }
    recipe["jko"] = {k: getattr(cfg, k) for k in jk}
    out["recipe"] = recipe
    out["jko_train"] = jres[op]["train"]
    timings["J_s"] = time.perf_counter() - t0
    log(
        f"operating point selected on train: {op} {out['operating_point']} train {jres[op]['train']:.4f} "
        f"(read-out {cur_q.mean():.4f})"
    )

    # ---------------- TEST: the recipe and the cumulative ablation ------------------------------
    t0 = time.perf_counter()
    abl = {}

    def put(name, v, ms=None):
        mean, lo, hi = bootstrap_ci(v)
        abl[name] = {"ndcg@10": mean, "ci": [lo, hi]}
        if ms is not None:
            abl[name]["ms_per_query"] = ms
        log(f"  {name:<60} test {mean:.4f} [{lo:.3f}, {hi:.3f}]")

    Pb = pools_of(S_base["test"], "test")
    bdesc = (
        ""
        if base == BASE
        else (
            f" ({base['token_pattern']}{' + compounds' if base['compounds'] else ''} tokens, "
            f"{base['stopwords']} stop-words)"
        )
    )
    put(
        f"BM25 lucene + Porter{bdesc}, title x{base['title_repeats']} (read-out)",
        m_pool(gather(S_base["test"], Pb), Pb, "test"),
    )
    steps = [
        ("+ E1 query model", {"query": recipe["query"], "pool": recipe["pool"]}),
        ("+ E2 second signal", {"weights": recipe["weights"]}),
        ("+ E3 propagation", {"propagation": recipe["propagation"]}),
    ]
    rec = {
        **base,
        "query": {"kind": "bm25"},
        "pool": "base",
        "weights": {"first": 1.0},
        "propagation": None,
        "geometry": geo_sel,
        "jko": recipe["jko"],
    }
    for name, ch in steps:
        if all(rec.get(k) == v for k, v in ch.items()):
            continue
        rec = {**rec, **ch}
        Pt, rt, _ = sparse_only_inputs(ds, queries["test"], split_q["test"], recipe=rec, corpus=sc)
        put(f"{name} (read-out)", m_pool(rt, Pt, "test"))
    Pt, rt, _ = sparse_only_inputs(ds, queries["test"], split_q["test"], recipe=recipe, corpus=sc)
    v, ms, _, top = jko(rt, Pt, "test", geo_sel, cfg)
    put(f"+ JKO-RAG W, {geo_sel} geometry, {op} (THE RECIPE)", v, ms)
    out["test_recipe"] = abl[f"+ JKO-RAG W, {geo_sel} geometry, {op} (THE RECIPE)"]
    # how much the JKO step moves the read-out (same pools and energy), and the paired gain
    top_ro = positions_to_docs(topk_by_score(rt, Pt.offsets, 20), Pt.offsets, Pt.doc_idx)
    v_ro = m_pool(rt, Pt, "test")
    d, lo, hi = bootstrap_ci(v - v_ro)
    out["test_recipe_vs_readout"] = {
        "paired_diff_ci": [d, lo, hi],
        "queries_top10_order_changed": float(np.mean(np.any(top[:, :10] != top_ro[:, :10], axis=1))),
        "queries_top10_set_changed": float(
            np.mean([set(a[:10]) != set(b[:10]) for a, b in zip(top, top_ro, strict=True)])
        ),
    }
    log(f"  recipe vs its read-out on test: {out['test_recipe_vs_readout']}")
    if op != "published#3" or geo_sel != "tfidf":
        put(
            "  previous SPARSE_RECIPE point (published#3, tfidf geometry), same energy",
            *jko(rt, Pt, "test", "tfidf", cands["published#3"])[:2],
        )
    if geo_sel != "tfidf":
        put(f"  same, tfidf geometry, {op}", *jko(rt, Pt, "test", "tfidf", cfg)[:2])
    put(
        f"  same, LSA-128 geometry (dense vectors derived from TF-IDF), {op}",
        *jko(rt, Pt, "test", "lsa128", cfg)[:2],
    )
    for mode in ("kl", "noproximal"):
        put(
            f"  same energy and point, {mode} mode",
            *jko(rt, Pt, "test", geo_sel, dataclasses.replace(cfg, mode=mode))[:2],
        )
    put(
        f"  same energy, bregman (alpha 0.5), {op}",
        *jko(
            rt,
            Pt,
            "test",
            geo_sel,
            dataclasses.replace(cfg, mode="bregman", alpha_prox=0.5),
        )[:2],
    )
    out["test_ablation"] = abl
    timings["test_s"] = time.perf_counter() - t0
    timings["wall_s"] = time.perf_counter() - t_start
    out["timings"] = timings
    txt = json.dumps(out, indent=1, default=float)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(txt + "\n")
    print(txt)
    return out


if __name__ == "__main__":
    main()
