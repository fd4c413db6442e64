"""``jkofast study distractors``: distractor injection, Leakage@10 and nDCG@10 (SPEC A.7.6, A.9.5).

Protocol (SPEC A.7.6):

* queries: test queries with >= 1 document of label > 0 (split order); when more than 150
  (SciFact; 100 elsewhere), ``default_rng(0).choice(len, n, replace=False)``, sorted
  (``--quick``: the first 15 of those, N in {0, 10});
* distractors: ``known_relevant`` = every doc with label > 0 for *any* test query; for each gold
  doc of the query (label > 0, qrels order) the whole corpus sorted by cosine to the gold
  embedding (descending), skipping the gold itself, already chosen and known-relevant ids, up to
  ``k_max = max(N)`` per gold, the list truncated to ``k_max`` — so all of them are nearest
  neighbours of the *first* gold doc; not checked against the pool (an id can appear twice);
* injection of the first N: appended to the pool with the fresh BM25 score, dense = corpus
  embedding · query embedding, rerank = midpoint ``(min + max)/2`` of the original pool's
  rerank scores;
* methods: ``rerank`` top-10 and ``noprox_blend`` / ``kl_blend`` / ``jko_blend`` with
  (α, γ) = (0.4, 0.6), base config, N in {0, 10, 30} (SCIDOCS: fast config, N in
  {0, 5, 10, 20, 40}); all pools of all N go through one ``rerank_batch`` call per method;
* metrics: Leakage@10 (:func:`jkofast.eval.stability.leakage_at_k`: an original-pool copy of an
  injected id counts too), nDCG@10 (exponential gain, list order, duplicates counted — the
  published evaluator) and Recall@10; paired jko − kl differences with bootstrap CIs.
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from jkofast.datasets.beir import load_dataset
from jkofast.eval.metrics import bootstrap_ci, evaluate
from jkofast.eval.stability import leakage_at_k
from jkofast.jko.energy import blend, softmax_tau
from jkofast.jko.solver import operating_point, rerank_batch
from jkofast.pools.baselines import positions_to_docs, topk_by_score
from jkofast.pools.retrievers import get_retriever
from jkofast.studies.common import StudyOptions, StudyResult, method_row, require_matplotlib, save_figure, study_inputs
from jkofast.studies.published import published

__all__ = ["METHODS", "QUICK_QUERIES", "find_distractors", "inject", "plot", "select_queries", "study"]

METHODS = ("rerank", "noprox_blend", "kl_blend", "jko_blend")
QUICK_QUERIES = 15
_MODES = {"noprox_blend": "noproximal", "kl_blend": "kl", "jko_blend": "wasserstein"}


def select_queries(query_ids, qrels: dict, n: int) -> list[str]:
    """Return the queries with >= 1 doc of label > 0; ``default_rng(0).choice`` of n, sorted (SPEC A.7.6).

    Raises
    ------
    ValueError
        No eligible query.

    Examples
    --------
    >>> select_queries(["1", "2", "3"], {"1": {"a": 1}, "2": {"b": 0}, "3": {"c": 2}}, 5)
    ['1', '3']
    """
    elig = [q for q in query_ids if any(v > 0 for v in qrels.get(q, {}).values())]
    if not elig:
        raise ValueError("the query sample is empty: no test query has a document with label > 0")
    if len(elig) > n:
        pick = np.sort(np.random.default_rng(0).choice(len(elig), n, replace=False))
        elig = [elig[int(i)] for i in pick]
    return elig


def find_distractors(gold_rows, doc_emb, skip, k_max: int) -> np.ndarray:
    """Distractor corpus rows of one query (SPEC A.7.6): nearest neighbours of the gold docs.

    Parameters
    ----------
    gold_rows : sequence of int
        Corpus rows of the query's gold docs (label > 0), qrels order.
    doc_emb : ndarray (n_docs, d)
        L2-normalised corpus embeddings.
    skip : set of int
        Known-relevant rows (label > 0 for any test query).
    k_max : int

    Returns
    -------
    int64 ndarray (<= k_max,)
        Per gold, the corpus by descending cosine (stable sort) skipping the gold itself,
        already chosen and ``skip`` rows, up to ``k_max`` each; the list truncated to ``k_max``.

    Examples
    --------
    >>> Z = np.array([[1, 0], [0.8, 0.6], [0.6, 0.8], [0, 1]], np.float32)
    >>> find_distractors([0], Z, {1}, 2).tolist()
    [2, 3]
    """
    chosen: list[int] = []
    seen: set[int] = set()
    for gold in gold_rows:
        if len(chosen) >= k_max:  # later golds only append beyond k_max, which the truncation drops
            break
        sims = doc_emb @ doc_emb[gold]
        taken = 0
        for j in np.argsort(-sims, kind="stable"):
            j = int(j)
            if j == gold or j in seen or j in skip:
                continue
            chosen.append(j)
            seen.add(j)
            taken += 1
            if taken >= k_max:
                break
    return np.asarray(chosen[:k_max], np.int64)


@dataclasses.dataclass
class _Injected:
    """Extended pools of one N (flat, aligned): corpus rows, dense, rerank, injected rows per query."""

    offsets: np.ndarray
    doc_idx: np.ndarray
    dense: np.ndarray
    sparse: np.ndarray
    rerank: np.ndarray
    injected: list


def inject(inp, distractors: list, n: int, bm25_all, doc_emb) -> _Injected:
    """Append the first ``n`` distractors of every query to its pool (SPEC A.7.6 scores).

    ``bm25_all`` (n_queries, n_docs): full-corpus BM25 scores (the fresh sparse score);
    dense = ``doc_emb[d] · query_emb``; rerank = midpoint of the original pool's rerank scores.
    """
    off = inp.offsets
    parts = {"doc_idx": [], "dense": [], "sparse": [], "rerank": []}
    sizes = []
    injected = []
    for q in range(inp.n_queries):
        a, b = off[q], off[q + 1]
        d = distractors[q][:n]
        rr = inp.rerank[a:b]
        mid = 0.5 * (rr.min() + rr.max()) if b > a else 0.0
        parts["doc_idx"] += [inp.pools.doc_idx[a:b], d]
        parts["dense"] += [inp.pools.dense[a:b], (doc_emb[d] @ inp.query_emb[q]).astype(np.float32)]
        parts["sparse"] += [inp.pools.sparse[a:b], np.asarray(bm25_all[q, d], np.float32)]
        parts["rerank"] += [rr, np.full(d.size, mid)]
        sizes.append(b - a + d.size)
        injected.append(d)
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    return _Injected(
        offsets,
        cat["doc_idx"].astype(np.int64),
        cat["dense"],
        cat["sparse"],
        cat["rerank"].astype(np.float64),
        injected,
    )


def _setting(dataset: str, quick: bool):
    """Return the dataset's name, operating point, distractor counts N and query sample size."""
    name = os.path.basename(os.path.normpath(dataset)).lower()
    if name == "scidocs":
        cfg, ns = operating_point("fast"), (0, 5, 10, 20, 40)
    else:
        cfg, ns = operating_point("base"), (0, 10, 30)
    if quick:
        ns = (0, 10)
    return name, cfg, ns, 150 if name == "scifact" else 100


def _eval(top_rows, qids, qrels, doc_ids) -> dict:
    """nDCG@10 (exponential gain) and Recall@10 of ranked lists that may repeat ids (published evaluator)."""
    run = {q: [doc_ids[int(i)] for i in top_rows[k] if i >= 0] for k, q in enumerate(qids)}
    res = evaluate(
        run, {q: qrels.get(q, {}) for q in qids}, ["ndcg@10", "recall@10"], gain="exponential",
        tie_break="given", missing="zero",
    )  # fmt: skip
    pos = {q: i for i, q in enumerate(res.query_ids)}
    out = {}
    for key, metric in (("ndcg", "ndcg@10"), ("recall", "recall@10")):
        v = np.asarray(res.per_query[metric], np.float64)
        out[key] = np.array([v[pos[q]] if q in pos else 0.0 for q in qids])
    return out


def _run_all(inp, ext: dict, cfg, opts) -> tuple[dict, dict]:
    """Top-20 corpus rows of every (method, N); one rerank_batch call per JKO method over all N."""
    ns = list(ext)
    offs = [ext[n].offsets for n in ns]
    base = np.concatenate([[0], np.cumsum([o[-1] for o in offs])])
    off = np.concatenate([offs[0]] + [o[1:] + base[i] for i, o in enumerate(offs) if i > 0])
    doc_idx = np.concatenate([ext[n].doc_idx for n in ns])
    dense = np.concatenate([ext[n].dense for n in ns])
    rer = np.concatenate([ext[n].rerank for n in ns])
    Z = np.ascontiguousarray(inp.doc_emb[doc_idx], dtype=np.float32)
    r = blend(off, dense=dense, rerank=rer, alpha=0.4, gamma=0.6)
    p0 = softmax_tau(r, off, cfg.tau0)
    tops = {"rerank": positions_to_docs(topk_by_score(rer, off, 20), off, doc_idx)}
    ms = {"rerank": None}
    for name, mode in _MODES.items():
        t0 = time.perf_counter()
        res = rerank_batch(
            -r, p0, off, embeddings=Z, config=dataclasses.replace(cfg, mode=mode), n_threads=opts.n_threads
        )
        ms[name] = 1000 * (time.perf_counter() - t0) / (off.shape[0] - 1)
        bad = int(np.count_nonzero(res.status))
        if bad:
            raise RuntimeError(f"{name}: {bad} pools failed: {sorted(res.errors.items())[:3]}")
        tops[name] = positions_to_docs(topk_by_score(res.p, off, 20), off, doc_idx)
        opts.log("distractors", f"{name:<13} {ms[name]:.1f} ms/pool ({off.shape[0] - 1} pools)")
    nq = inp.n_queries
    split = {m: {n: t[i * nq : (i + 1) * nq] for i, n in enumerate(ns)} for m, t in tops.items()}
    return split, ms


def _ci(x) -> list:
    """``[mean, lo, hi]`` of the 95 % percentile bootstrap (2000 resamples, seed 0) as floats."""
    m, lo, hi = bootstrap_ci(np.asarray(x, np.float64))
    return [float(m), float(lo), float(hi)]


def _rows(inp, ext, tops, ms, pub, pub_pair) -> list:
    """One row per (N, method): nDCG@10 / Recall@10 / Leakage@10, the published pair beside them."""
    rows = []
    for n in ext:
        per = {}
        for m in METHODS:
            met = _eval(tops[m][n], inp.query_ids, inp.qrels, inp.doc_ids)
            met["leak"] = leakage_at_k(tops[m][n], ext[n].injected, 10)
            per[m] = met
        for m in METHODS:
            met = per[m]
            p = (pub.get(n) or {}).get(m)
            extra = {}
            if m == "jko_blend":
                extra["leak_diff_vs_kl_blend"] = _ci(met["leak"] - per["kl_blend"]["leak"])
                if n in pub_pair:
                    extra["published_leak_diff_vs_kl_blend"] = list(pub_pair[n])
            rows.append(
                method_row(
                    f"{m} N={n}",
                    met,
                    ms[m],
                    baseline=("kl_blend", per["kl_blend"]["ndcg"]) if m == "jko_blend" else None,
                    published={"leakage10": p[0], "ndcg10": p[1]} if p else None,
                    base_method=m,
                    n_inject=n,
                    leakage10=float(met["leak"].mean()),
                    leakage10_ci=_ci(met["leak"])[1:],
                    **extra,
                )
            )
    return rows


def _block(rows, ns) -> str:
    head = f"{'N':>3} " + " ".join(f"{m + ' leak/nDCG (pub)':>30}" for m in METHODS) + f"  {'leak jko-kl [95% CI]':>28}"
    lines = ["Leakage@10 / nDCG@10 (exponential gain); published SPEC A.9.5 in brackets", head, "-" * len(head)]
    by = {(r["base_method"], r["n_inject"]): r for r in rows}
    for n in ns:
        cells = []
        for m in METHODS:
            r = by[(m, n)]
            p = r.get("published")
            pub = f" ({p['leakage10']:.3f}/{p['ndcg10']:.3f})" if p else ""
            cells.append(f"{r['leakage10']:.3f}/{r['ndcg10']:.3f}{pub}")
        d = by[("jko_blend", n)]["leak_diff_vs_kl_blend"]
        sig = "*" if d[1] > 0 or d[2] < 0 else " "
        lines.append(
            f"{n:>3} " + " ".join(f"{c:>30}" for c in cells) + f"  {d[0]:+.4f} [{d[1]:+.4f}, {d[2]:+.4f}]{sig}"
        )
    lines.append("-" * len(head))
    return "\n".join(lines)


def _in_pool(inp, dis, n: int) -> int:
    """How many of the first n distractors of every query are already in its original pool."""
    off = inp.offsets
    return sum(int(np.isin(d[:n], inp.pools.doc_idx[off[q] : off[q + 1]]).sum()) for q, d in enumerate(dis))


def study(opts: StudyOptions) -> StudyResult:
    """Run the distractor-injection protocol (module docstring) and return one row per (method, N).

    Rows: ``leakage10`` (+ CI), ``ndcg10`` (exponential gain, + CI), ``recall10``, ``n_inject``,
    on ``jko_blend`` the paired ``leak_diff_vs_kl_blend`` and ``diff_vs_kl_blend`` (nDCG), and the
    published SPEC A.9.5 values beside them.
    """
    name, cfg, ns, n_sel = _setting(opts.dataset, opts.quick)
    ds = load_dataset(opts.dataset)
    qrels = ds.qrels("test")
    qids = select_queries(ds.split_query_ids("test"), qrels, n_sel)
    if opts.quick:
        qids = qids[:QUICK_QUERIES]
    times = {}
    t0 = time.perf_counter()
    inp = study_inputs(opts, "test", study="distractors", query_ids=qids)
    times["inputs_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pos = ds.doc_index
    known = {pos[d] for q in qrels.values() for d, v in q.items() if v > 0 and d in pos}
    k_max = max(ns)
    dis = [
        find_distractors([pos[d] for d, v in qrels[q].items() if v > 0 and d in pos], inp.doc_emb, known, k_max)
        for q in qids
    ]
    times["search_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    bm25 = get_retriever("bm25").fit(ds.doc_texts(". "))
    S = bm25.score_all([ds.queries[q] for q in qids], n_threads=opts.n_threads)
    ext = {n: inject(inp, dis, n, S, inp.doc_emb) for n in ns}
    times["inject_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tops, ms = _run_all(inp, ext, cfg, opts)
    times["solve_s"] = time.perf_counter() - t0
    pub = published("distractors")  # SPEC A.9.5: (leakage10, ndcg10) per N and method; paired leak jko - kl
    rows = _rows(inp, ext, tops, ms, pub["leakage_ndcg"].get(name, {}), pub["paired_leakage"].get(name, {}))
    notes = [
        *inp.notes,
        f"{'fast' if name == 'scidocs' else 'base'} operating point (h {cfg.h}, lam {cfg.lam}, rho {cfg.rho}, "
        f"eps {cfg.sinkhorn_eps}, T {cfg.T}, inner {cfg.inner_steps}, tau0 {cfg.tau0}); energy (0.4, 0.6)",
        "distractors: nearest neighbours of the gold docs (bundled MiniLM corpus embeddings), known-relevant "
        "skipped; injected rerank = midpoint of the pool's rerank scores (with the BM25 stand-in: of its BM25 scores)",
        "nDCG@10 exponential gain over the read-out list as is (a distractor already in the pool can appear twice)",
        f"{_in_pool(inp, dis, max(ns))} of the {len(qids) * max(ns)} injected distractors at N={max(ns)} were "
        "already in their query's pool (leakage counts both copies)",
        "stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()),
    ]
    if opts.quick:
        notes.append(f"--quick: first {QUICK_QUERIES} queries of the sample, N in {ns}")
    extra = {"published_source": "SPEC A.9.5", "n_inject": list(ns), "timings_s": times}
    return StudyResult("distractors", ds.name, len(qids), rows, extra=extra, blocks=[_block(rows, ns)], notes=notes)


def plot(result: StudyResult, out_dir: str) -> list[str]:
    """Write ``distractors_leakage.png``: Leakage@10 and nDCG@10 against N per method (published dashed)."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for m in METHODS:
        rs = sorted((r for r in result.rows if r["base_method"] == m), key=lambda r: r["n_inject"])
        ns = [r["n_inject"] for r in rs]
        for ax, key in zip(axes, ("leakage10", "ndcg10"), strict=True):
            line = ax.plot(ns, [r[key] for r in rs], marker="o", label=m)[0]
            pub = [(r.get("published") or {}).get(key) for r in rs]
            if all(v is not None for v in pub):
                ax.plot(ns, pub, ls="--", color=line.get_color(), alpha=0.6)
    axes[0].set_ylabel("Leakage@10")
    axes[1].set_ylabel("nDCG@10")
    for ax in axes:
        ax.set_xlabel("injected distractors N")
    axes[0].legend(fontsize=8)
    return save_figure(
        fig,
        out_dir,
        "distractors_leakage.png",
        f"Distractor injection, {result.dataset} ({result.n_queries} queries); dashed = published",
    )
