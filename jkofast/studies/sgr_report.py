"""``jkofast study sgr-report``: the SparseGeometricRAG reporting rows (SPEC B.12-B.13, C.3).

On a BEIR split (SciFact test by default; no embeddings needed) the study prints:

* the **frozen row** -- the published 100->10 configuration (:data:`jkofast.sgr.config.PRESETS`
  ``"published"``, P = 100) with the full metric set of the published table: nDCG@10, MRR@10,
  P@10, R@10 and Hit@10 (linear gain, ranking order as returned), the published figures beside;
* the **defaults** (strongest semantic neighbours, A without its diagonal) with the same metrics;
* the **component ablation** -- the frozen row with one score term zeroed at a time
  (:data:`ABLATIONS`: the four final weights, the shortlist rescue η, the consensus λ_M, the
  diversity bonus λ_D), each with its paired difference to the frozen row;
* the two **reference rows** -- every routed document scored (P = the largest routed set, no
  shortlist pruning) and exact TF-IDF cosine over the whole corpus (the SGR vocabulary);
* **route recall** (:func:`route_recall`) -- the share of the relevant documents that reach the
  routed candidate set U of SPEC B.6, which caps every SGR row: macro (mean over queries with
  a relevant document) and micro, with the routed-set sizes and the pool recall at P.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

import numpy as np

from jkofast._validation import check_int
from jkofast.datasets.beir import load_dataset
from jkofast.eval.metrics import evaluate
from jkofast.pools.retrievers import get_retriever
from jkofast.sgr.config import SGRConfig
from jkofast.sgr.retriever import SparseGeometricRetriever
from jkofast.studies.common import StudyOptions, StudyResult, method_row
from jkofast.studies.published import published

__all__ = ["ABLATIONS", "METRICS", "RouteRecall", "ranking_metrics", "route_recall", "study"]

K = 10
METRICS = ("ndcg@10", "mrr@10", "p@10", "recall@10", "hit@10")
# row name -> the query parameters that zero one term of the score (SPEC B.7-B.10)
ABLATIONS = {
    "zero w_tail": {"w_tail": 0.0},  # geometric tail z(tail) in the relevance
    "zero w_lex": {"w_lex": 0.0},  # IDF² lexical evidence with coordination
    "zero w_sem": {"w_sem": 0.0},  # semantic presence
    "zero w_rare": {"w_rare": 0.0},  # rarest-3 coverage
    "zero eta": {"eta": 0.0},  # lex1 in the shortlist score (the shortlist by tail alone)
    "zero lam_m": {"lam_m": 0.0},  # consensus Σ m·ρ in the tail
    "zero lam_d": {"lam_d": 0.0},  # diversity bonus on ranks 2-10
}
_ROUTE_OFF = {"bm25_candidates": 0, "tail_gate": False}  # U is the routed set: no BM25 additions, no gate
_MAX_SLOTS = 1 << 24  # pool slots (queries x P) per call of route_recall


@dataclasses.dataclass
class RouteRecall:
    """Route recall of a split (:func:`route_recall`).

    Attributes
    ----------
    per_query : float64 (nq,)
        Relevant documents in U / relevant documents in the corpus; NaN for a query without one.
    macro : float
        Mean of ``per_query`` over the queries with a relevant document (NaN if none has).
    micro : float
        All relevant documents in U / all relevant documents.
    n_routed : int64 (nq,)
        ``|U|`` per query.
    pool_recall : float or None
        Macro recall of the top-P pool (the shortlist), when ``P`` was given.
    """

    per_query: np.ndarray
    macro: float
    micro: float
    n_routed: np.ndarray
    pool_recall: float | None = None

    def to_dict(self) -> dict:
        """Return the JSON-able summary (``macro``, ``micro``, routed-set median / mean / max, ``pool_recall``)."""
        n = self.n_routed
        return {
            "macro": self.macro,
            "micro": self.micro,
            "n_queries_judged": int(np.isfinite(self.per_query).sum()),
            "routed_docs_median": float(np.median(n)) if n.size else 0.0,
            "routed_docs_mean": float(np.mean(n)) if n.size else 0.0,
            "routed_docs_max": int(n.max()) if n.size else 0,
            "pool_recall": self.pool_recall,
        }


@contextlib.contextmanager
def _query_params(retriever: SparseGeometricRetriever, **changes):
    """Set query parameters of a fitted retriever for the block, then restore the previous ones."""
    old = {k: getattr(retriever.config, k) for k in changes}
    retriever.set_params(**changes)
    try:
        yield retriever
    finally:
        retriever.set_params(**old)


def _relevant_rows(query_ids, qrels: dict, doc_ids) -> list:
    """Corpus rows of each query's relevant documents (label > 0; documents absent from the corpus dropped)."""
    row = {d: i for i, d in enumerate(doc_ids)}
    return [{row[d] for d, lab in qrels.get(q, {}).items() if lab > 0 and d in row} for q in query_ids]


def route_recall(
    retriever: SparseGeometricRetriever, query_texts, query_ids, qrels: dict, doc_ids, *, P=None, n_threads=None
) -> RouteRecall:
    """Share of the relevant documents that reach the routed candidate set U (SPEC B.6).

    U is every document holding a routed term among its top-F branches; every SGR score is
    computed on U only, so route recall caps the recall of any SGR ranking.  The retriever's
    own query parameters are used (routing: ``alpha``, ``route_budget``), with the BM25
    additions and the tail gate off while U is read (restored afterwards).

    Parameters
    ----------
    retriever : SparseGeometricRetriever
        Fitted on the corpus of ``doc_ids`` (from texts).
    query_texts, query_ids : list of str
    qrels : dict
        ``qid -> {doc_id: label}``; label > 0 is relevant.
    doc_ids : list of str
        Corpus ids by row.
    P : int, optional
        Also report the recall of the top-P pool (the shortlist).
    n_threads : int, optional

    Returns
    -------
    RouteRecall

    Raises
    ------
    ValueError
        ``query_texts`` and ``query_ids`` of different lengths, ``doc_ids`` of another length
        than the index.
    """
    query_texts, query_ids = list(query_texts), list(query_ids)
    if len(query_texts) != len(query_ids):
        raise ValueError(f"{len(query_texts)} query_texts for {len(query_ids)} query_ids")
    if len(doc_ids) != retriever.n_docs:
        raise ValueError(f"doc_ids holds {len(doc_ids)} ids for an index of {retriever.n_docs} documents")
    rel = _relevant_rows(query_ids, qrels, doc_ids)
    nq = len(query_ids)
    n_routed = np.zeros(nq, np.int64)
    hits = np.zeros(nq, np.int64)
    pool_hits = np.zeros(nq, np.int64)
    with _query_params(retriever, **_ROUTE_OFF):
        if nq:
            n_routed[:] = retriever.pool(query_texts, P=1, n_threads=n_threads).n_routed_docs
        width = max(1, int(n_routed.max()) if nq else 1)
        step = max(1, _MAX_SLOTS // width)
        for a in range(0, nq, step):  # P = the largest |U|: the pool is all of U
            pool = retriever.pool(query_texts[a : a + step], P=width, n_threads=n_threads)
            for i in range(pool.doc.shape[0]):
                routed = pool.doc[i, : pool.n[i]]
                hits[a + i] = len(rel[a + i].intersection(routed.tolist()))
        if P is not None:  # the shortlist: the top-P pool by the shortlist score (SPEC B.8)
            P = check_int(P, "P", min_value=1)
            step = max(1, _MAX_SLOTS // P)
            for a in range(0, nq, step):
                pool = retriever.pool(query_texts[a : a + step], P=P, n_threads=n_threads)
                for i in range(pool.doc.shape[0]):
                    pool_hits[a + i] = len(rel[a + i].intersection(pool.doc[i, : pool.n[i]].tolist()))
    n_rel = np.array([len(r) for r in rel], np.int64)
    judged = n_rel > 0
    per_query = np.full(nq, np.nan)
    per_query[judged] = hits[judged] / n_rel[judged]
    macro = float(per_query[judged].mean()) if judged.any() else float("nan")
    micro = float(hits.sum() / n_rel.sum()) if n_rel.sum() else float("nan")
    pool_recall = None
    if P is not None and judged.any():
        pool_recall = float((pool_hits[judged] / n_rel[judged]).mean())
    return RouteRecall(per_query, macro, micro, n_routed, pool_recall)


def ranking_metrics(top_rows, query_ids, qrels: dict, doc_ids) -> dict:
    """Per-query nDCG@10, MRR@10, P@10, R@10 and Hit@10 of ranked corpus rows (linear gain, order as given).

    A query without judgements scores 0; ``-1`` padding is skipped.  Returns ``{metric: float64 (nq,)}``
    keyed by :data:`METRICS`.
    """
    run = {q: [doc_ids[int(i)] for i in row if i >= 0] for q, row in zip(query_ids, np.asarray(top_rows), strict=True)}
    sub = {q: qrels.get(q, {}) for q in query_ids}
    res = evaluate(run, sub, metrics=METRICS, gain="linear", tie_break="given", missing="zero")
    pos = {q: i for i, q in enumerate(res.query_ids)}
    out = {}
    for m in METRICS:
        v = np.asarray(res.per_query[m], np.float64)
        out[m] = np.array([v[pos[q]] if q in pos else 0.0 for q in query_ids])
    return out


def _row(name, top, ms, inputs, base=None, pub=None) -> dict:
    """One study row: the full metric set of ``top`` (means), its paired difference to ``base``."""
    qids, qrels, doc_ids = inputs
    m = ranking_metrics(top, qids, qrels, doc_ids)
    extra = {"mrr10": float(m["mrr@10"].mean()), "p10": float(m["p@10"].mean()), "hit10": float(m["hit@10"].mean())}
    metrics = {"ndcg": m["ndcg@10"], "recall": m["recall@10"]}
    return method_row(name, metrics, ms, baseline=base, published=pub, **extra), m["ndcg@10"]


def _search(retr, texts, n_threads):
    """``(rows (nq, K), ms/query)`` of one search."""
    t = time.perf_counter()
    top = retr.search(texts, K, n_threads=n_threads)[0]
    return top, 1000 * (time.perf_counter() - t) / max(len(texts), 1)


def study(opts: StudyOptions) -> StudyResult:
    """Run the SGR reporting rows on the test split of ``opts.dataset`` (module docstring)."""
    t0 = time.perf_counter()
    say = lambda m: opts.log("sgr-report", m)  # noqa: E731
    ds = load_dataset(opts.dataset)
    qids = ds.split_query_ids("test")
    if opts.quick:
        qids = qids[:20]
    if not qids:
        raise ValueError(f"dataset {opts.dataset!r} has no judged test queries")
    qrels, texts, nt = ds.qrels("test"), [ds.queries[q] for q in qids], opts.n_threads
    inputs = (qids, qrels, ds.doc_ids)
    # SciFact test (SPEC B.13, B.12, C.3): the frozen row, diversity off, the reference rows, route recall
    pub = published("sgr_report") if ds.name == "scifact" and not opts.quick else {}
    pub_rows = pub.get("rows", {})
    docs = ds.doc_texts(" ")  # title + " " + text (SPEC B.2)
    say("frozen index (published settings) ...")
    frozen = SparseGeometricRetriever(SGRConfig.preset("published")).fit(docs, ids=ds.doc_ids, n_threads=nt)
    say("default index ...")
    default = SparseGeometricRetriever().fit(docs, ids=ds.doc_ids, n_threads=nt)

    frozen.search(texts[:1], K, n_threads=nt)  # compile (or load) the query kernels before any timing
    tfidf = get_retriever("tfidf", max_features=frozen.config.max_features).fit(docs)
    tfidf.search(texts[:1], K, n_threads=nt)
    top, ms = _search(frozen, texts, nt)
    frozen_row, base = _row("frozen", top, ms, inputs, pub=pub_rows.get("frozen"))
    rows = [frozen_row]
    top, ms = _search(default, texts, nt)
    rows.append(_row("defaults", top, ms, inputs, ("frozen", base))[0])
    for name, change in ABLATIONS.items():
        with _query_params(frozen, **change):
            top, ms = _search(frozen, texts, nt)
        rows.append(_row(name, top, ms, inputs, ("frozen", base), pub_rows.get(name))[0])

    say("route recall ...")
    P = frozen.config.pool_size
    rr = {
        "frozen": route_recall(frozen, texts, qids, qrels, ds.doc_ids, P=P, n_threads=nt),
        "defaults": route_recall(default, texts, qids, qrels, ds.doc_ids, P=P, n_threads=nt),
    }
    width = max(1, int(rr["frozen"].n_routed.max()))
    with _query_params(frozen, pool_size=width):  # every routed document reaches the final score
        top, ms = _search(frozen, texts, nt)
    rows.append(_row("all routed", top, ms, inputs, ("frozen", base), pub_rows.get("all routed"))[0])
    top, ms = _search(tfidf, texts, nt)
    rows.append(_row("tfidf cosine", top, ms, inputs, ("frozen", base), pub_rows.get("tfidf cosine"))[0])

    route = {k: v.to_dict() for k, v in rr.items()}
    if "route_recall" in pub:
        route["published"] = pub["route_recall"]
    return StudyResult(
        study="sgr-report",
        dataset=ds.name,
        n_queries=len(qids),
        rows=rows,
        extra={"route_recall": route, "pool_size": P, "all_routed_pool": width},
        blocks=[_metrics_block(rows), _route_block(route, P)],
        notes=[
            "linear gain; ranks as returned (diversified ranks 2-10); a query without a relevant document scores 0",
            f"frozen = the published preset ({SGRConfig.preset('published').semantic_neighbours} semantic "
            "neighbours, A with its diagonal), P = 100; ablations zero one term of the frozen row",
            f"all routed = the frozen row with P = {width} (the largest routed set): no shortlist pruning",
            "tfidf cosine = full-corpus TF-IDF cosine on the same vocabulary (sklearn TfidfVectorizer semantics)",
            "ms/q = one search call over all queries (kernels compiled before), index build excluded",
        ],
        wall_s=time.perf_counter() - t0,
    )


def _metrics_block(rows) -> str:
    """Return the full metric set of every row, the published figures under the frozen one."""
    head = f"{'row':<14} {'nDCG@10':>8} {'MRR@10':>8} {'P@10':>8} {'R@10':>8} {'Hit@10':>8}"
    lines = ["full metric set (means)", head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['method']:<14} {r['ndcg10']:>8.4f} {r['mrr10']:>8.4f} {r['p10']:>8.4f} {r['recall10']:>8.4f} "
            f"{r['hit10']:>8.4f}"
        )
        p = r.get("published") or {}
        if "mrr10" in p:
            lines.append(
                f"{'  published':<14} {p['ndcg10']:>8.4f} {p['mrr10']:>8.4f} {p['p10']:>8.4f} {p['recall10']:>8.4f} "
                f"{p['hit10']:>8.4f}"
            )
    return "\n".join(lines)


def _route_block(route: dict, P: int) -> str:
    """Return route recall of both indexes, the routed-set sizes and the pool recall."""
    head = f"{'index':<10} {'route recall (macro)':>20} {'micro':>7} {'|U| median':>10} {'mean':>7} {f'pool@{P}':>9}"
    lines = ["route recall: relevant documents that reach the routed candidate set U", head, "-" * len(head)]
    for name in ("frozen", "defaults"):
        r = route[name]
        pr = r["pool_recall"]
        lines.append(
            f"{name:<10} {r['macro']:>20.4f} {r['micro']:>7.4f} {r['routed_docs_median']:>10.1f} "
            f"{r['routed_docs_mean']:>7.1f} {(f'{pr:9.4f}' if pr is not None else '       --')}"
        )
    if "published" in route:
        lines.append(f"published (SciFact): {route['published']:.2f}")
    return "\n".join(lines)
