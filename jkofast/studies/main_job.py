"""The SciFact end-to-end main job (``jkofast run --dataset scifact``) and its building blocks.

From the bundled data (corpus, queries, qrels, MiniLM document + query embeddings) the job
runs, on the 300 test queries:

* ``bm25``       full-corpus BM25 okapi (``\\w+``, no stemming; SPEC A.2.3), top-20;
* ``dense``      full-corpus MiniLM cosine, top-20;
* hybrid pools   BM25 top-500 + dense top-500, global RRF (60), first 200 (SPEC A.2.6);
* ``hybrid_rrf`` in-pool RRF of the pool ranks (SPEC A.5);
* ``mmr``        MMR λ = 0.5 on ``minmax(rerank)``, MiniLM cosine;
* ``dpp_map``    greedy DPP MAP (δ = 1e-3) on ``minmax(0.4 minmax(dense) + 0.6 minmax(rerank))``;
* ``blend``      top-20 of ``r = 0.4 minmax(dense) + 0.6 minmax(rerank)`` read out directly;
* ``sgr``        SparseGeometricRAG (when ``jkofast.sgr.retriever`` is available);
* ``kl_blend``   KL-Prox, ``jko_blend`` JKO-RAG (Wasserstein), MiniLM geometry, energy
  ``E = -r``, ``p0 = softmax_{τ0}(r)``, at the chosen operating point;
* ``jko_tuned``  JKO-RAG with the energy weights selected on train queries (published search:
  config #12, (α, γ) = (0.4, 0.3));
* ``jko_sparse`` sparse-only JKO-RAG (no transformer, no dense vectors at all), the recipe
  selected on train queries by ``experiments/sparse_only_search.py``, ``experiments/sparse_only_v2.py``
  and ``experiments/sparse_only_v3.py`` (:data:`SPARSE_RECIPE`, docs/sparse_only.md): BM25 lucene
  with the Porter stemmer (``\\w+`` tokens, English stop-words) over ``title x t + abstract``,
  its top-200 pool, the energy of the selected sparse signals, the selected sparse geometry
  (PPMI-smoothed stemmed TF-IDF rows), JKO at the train-selected operating point
  (see :func:`sparse_only_inputs`).

No cross-encoder is loaded: the "rerank" term is the BM25 pool score (as in the parity
fixtures) unless the user passes ``scores_file`` (``query-id doc-id score``).

Metrics: nDCG@10 with linear gain (BEIR / trec_eval) and exponential gain (the published
tables; identical on SciFact's binary labels), Recall@10, 95 % bootstrap CIs
(2000 resamples, ``default_rng(0)``), paired differences vs ``hybrid_rrf``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import numpy as np

from jkofast.jko.energy import align_scores, blend, energy_and_p0, minmax, read_score_file
from jkofast.pools.baselines import dpp_map, inpool_rrf, mmr, positions_to_docs, topk_by_score
from jkofast.pools.candidates import Pools, build_pools, dense_scores, top_lists

__all__ = [
    "SPARSE_RECIPE",
    "MainJobResult",
    "SparseCorpus",
    "evaluate_topk",
    "readout_topk",
    "rerank_blocks",
    "run_main_job",
    "sparse_analyzer",
    "sparse_only_inputs",
]

K_READ = 20
K_EVAL = 10
# (alpha, gamma) of the configuration selected on SciFact TRAIN queries by the published search
# (experiments/tune_scifact.py; config #12 = the "tuned" operating point, whose own weights are (0.4, 0.3))
TUNED_AG = (0.4, 0.3)
DEFAULT_METHODS = ("hybrid_rrf", "mmr", "dpp_map", "blend", "sgr", "kl_blend", "jko_blend", "jko_tuned", "jko_sparse")
ALL_METHODS = (*DEFAULT_METHODS, "noprox_blend", "bw_jko_a50")
# the sparse-only JKO-RAG recipe, every choice selected on SciFact TRAIN queries (all 809): the analyser
# and title repeats (Porter BM25 lucene; token pattern x stop list x title repeats, 27 candidates) by
# experiments/sparse_only_v3.py (train 0.7034 vs 0.7012 for the first attempts' sklearn/english/x3); then
# the stages of experiments/sparse_only_v2.py on that base: no RM3 / PPMI expansion, second signal or score
# propagation passed the paired-CI gate, so the energy is the base BM25 alone; PPMI-smoothed TF-IDF
# geometry (best of tfidf / bm25 / ppmi / sgr_centres); JKO point mild_fast_h8_T1 (best of 35; train
# 0.7034).  Test 0.6942 (experiments/results/sparse_only_v3.json; docs/sparse_only.md)
SPARSE_RECIPE = {
    "title_repeats": 4,
    "token_pattern": "word",
    "stopwords": "english",
    "compounds": False,
    "query": {"kind": "bm25"},
    "pool": "base",
    "weights": {"first": 1.0},
    "propagation": None,
    "geometry": "ppmi",
    "jko": dict(h=8.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=1, inner_steps=15, tau0=1.0),
}


# ---------------------------------------------------------------------------------------------
# evaluation helpers (jkofast.eval.metrics when present)
# ---------------------------------------------------------------------------------------------
def _ndcg_recall_one(ranked, rel: dict, k: int, gain: str):
    labels = [rel.get(d, 0) for d in ranked[:k]]
    g = (lambda x: 2.0**x - 1.0) if gain == "exponential" else (lambda x: float(x))
    dcg = sum(g(x) / np.log2(i + 2) for i, x in enumerate(labels))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g(x) / np.log2(i + 2) for i, x in enumerate(ideal))
    n_rel = sum(1 for v in rel.values() if v > 0)
    rec = sum(1 for x in labels if x > 0) / n_rel if n_rel else 0.0
    return (dcg / idcg if idcg > 0 else 0.0), rec


def evaluate_topk(top_rows, query_ids, qrels: dict, doc_ids, k: int = K_EVAL) -> dict:
    """Per-query nDCG@k (linear and exponential gain) and Recall@k of ranked corpus rows.

    ``top_rows`` (nq, >= k) corpus rows (``-1`` padding ignored).  Uses
    ``jkofast.eval.metrics.evaluate`` when available, else the SPEC A.7.1 formulas directly.
    Returns ``{"ndcg": lin, "ndcg_exp": exp, "recall": r}`` (float64 arrays, query order).
    """
    top = np.asarray(top_rows)
    if top.ndim != 2 or (top.size and top.dtype.kind not in "iu"):
        raise TypeError(f"top_rows must be a 2-D integer array of corpus rows, got {top.dtype} {top.shape}")
    if top.shape[0] != len(query_ids):  # fewer rows: IndexError; more: the extra rows were ignored
        raise ValueError(f"top_rows has {top.shape[0]} rows for {len(query_ids)} query_ids")
    if len(set(query_ids)) != len(query_ids):  # a repeated id kept only its last ranking (silently)
        raise ValueError("query_ids holds duplicates")
    if top.size and top.max() >= len(doc_ids):
        raise ValueError(f"top_rows holds row {int(top.max())}, beyond the {len(doc_ids)} doc_ids")
    runs = []
    for q in range(len(query_ids)):
        row = [int(i) for i in top[q] if i >= 0]
        if len(set(row)) != len(row):  # nDCG 2.13 / recall 3.0 for a row repeated three times
            raise ValueError(f"top_rows[{q}] (query {query_ids[q]!r}) repeats a corpus row")
        runs.append([doc_ids[i] for i in row])
    try:
        from jkofast.eval.metrics import evaluate
    except ImportError:
        evaluate = None
    if evaluate is not None:
        run = dict(zip(query_ids, runs, strict=True))
        sub = {qid: qrels.get(qid, {}) for qid in query_ids}
        out = {}
        for key, gain, metrics in (
            ("lin", "linear", (f"ndcg@{k}", f"recall@{k}")),
            ("exp", "exponential", (f"ndcg@{k}",)),
        ):
            res = evaluate(run, sub, metrics=metrics, gain=gain, tie_break="given", missing="zero")
            pos = {q: i for i, q in enumerate(res.query_ids)}
            idx = [pos.get(q, -1) for q in query_ids]
            for name, vals in res.per_query.items():
                v = np.asarray(vals, np.float64)
                out[(key, name)] = np.array([v[i] if i >= 0 else 0.0 for i in idx])
        return {
            "ndcg": out[("lin", f"ndcg@{k}")],
            "ndcg_exp": out[("exp", f"ndcg@{k}")],
            "recall": out[("lin", f"recall@{k}")],
        }
    lin = np.empty(len(runs))
    ex = np.empty(len(runs))
    rec = np.empty(len(runs))
    for i, (qid, r) in enumerate(zip(query_ids, runs, strict=True)):
        rel = qrels.get(qid, {})
        lin[i], rec[i] = _ndcg_recall_one(r, rel, k, "linear")
        ex[i], _ = _ndcg_recall_one(r, rel, k, "exponential")
    return {"ndcg": lin, "ndcg_exp": ex, "recall": rec}


def _bootstrap_ci(x, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0):
    try:
        from jkofast.eval.metrics import bootstrap_ci

        m, lo, hi = bootstrap_ci(np.asarray(x, np.float64), n_boot=n_boot, alpha=alpha, seed=seed)
        return float(m), float(lo), float(hi)
    except ImportError:
        x = np.asarray(x, np.float64)
        rng = np.random.default_rng(seed)
        n = x.size
        means = np.array([x[rng.integers(0, n, n)].mean() for _ in range(n_boot)])
        return float(x.mean()), float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def readout_topk(p, pools: Pools, k: int = K_READ) -> np.ndarray:
    """Top-k corpus rows of every pool by the flat distribution ``p`` (ties -> pool order)."""
    pos = topk_by_score(np.asarray(p, np.float64), pools.offsets, k)
    return positions_to_docs(pos, pools.offsets, pools.doc_idx)


# ---------------------------------------------------------------------------------------------
# the main job
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class MainJobResult:
    """Per-method metrics, timings and notes of one main-job run."""

    dataset: str
    n_queries: int
    config: str
    methods: dict  # name -> {"ndcg":..., "ndcg_exp":..., "recall":..., "ms_per_query": float}
    stages: dict  # stage -> ms/query
    notes: list
    pool_recall: float | None = None
    wall_s: float = 0.0

    def summary(self, baseline: str = "hybrid_rrf") -> dict:
        out = {
            "dataset": self.dataset,
            "n_queries": self.n_queries,
            "config": self.config,
            "pool_recall": self.pool_recall,
            "wall_s": self.wall_s,
            "stages_ms_per_query": self.stages,
            "notes": self.notes,
            "methods": {},
        }
        base = self.methods.get(baseline)
        for name, m in self.methods.items():
            mean, lo, hi = _bootstrap_ci(m["ndcg"])
            row = {
                "ndcg@10": mean,
                "ndcg@10_ci": [lo, hi],
                "ndcg@10_exp": float(np.mean(m["ndcg_exp"])),
                "recall@10": float(np.mean(m["recall"])),
                "ms_per_query": m.get("ms_per_query"),
            }
            if base is not None and name != baseline:
                d, dlo, dhi = _bootstrap_ci(np.asarray(m["ndcg"]) - np.asarray(base["ndcg"]))
                row[f"diff_vs_{baseline}"] = [d, dlo, dhi]
            out["methods"][name] = row
        return out

    def table(self, baseline: str = "hybrid_rrf") -> str:
        s = self.summary(baseline)
        lines = [
            f"{self.dataset} test, {self.n_queries} queries; JKO operating point: {self.config}",
            "nDCG@10: linear gain (BEIR/trec_eval) with 95% bootstrap CI; exponential gain alongside "
            "(equal on binary labels)",
            "",
            f"{'method':<14} {'nDCG@10 [95% CI]':<25} {'exp':>6} {'R@10':>6}  "
            f"{'vs ' + baseline + ' [95% CI]':<30} {'ms/q':>8}",
            "-" * 95,
        ]
        for name, r in s["methods"].items():
            ci = f"{r['ndcg@10']:.4f} [{r['ndcg@10_ci'][0]:.3f}, {r['ndcg@10_ci'][1]:.3f}]"
            dk = f"diff_vs_{baseline}"
            if dk in r:
                d, lo, hi = r[dk]
                sig = "*" if lo > 0 or hi < 0 else " "
                diff = f"{d:+.4f} [{lo:+.3f}, {hi:+.3f}]{sig}"
            else:
                diff = "--"
            ms = r["ms_per_query"]
            lines.append(
                f"{name:<14} {ci:<25} {r['ndcg@10_exp']:>6.4f} {r['recall@10']:>6.3f}  {diff:<30} "
                f"{(f'{ms:8.2f}' if ms is not None else '      --')}"
            )
        lines.append("-" * 95)
        lines.append(
            "* = paired-difference CI excludes 0; ms/q = wall clock per query of the method's own step "
            "(includes kernel compilation when the Numba cache is cold)"
        )
        if self.pool_recall is not None:
            lines.append(f"hybrid pool (M=200) micro recall: {self.pool_recall:.4f}")
        lines.append("stages (ms/query): " + ", ".join(f"{k} {v:.2f}" for k, v in self.stages.items()))
        for n in self.notes:
            lines.append(f"note: {n}")
        lines.append(f"wall time: {self.wall_s:.1f} s")
        return "\n".join(lines)


class _Stage:
    def __init__(self, log):
        self.log = log
        self.times = {}

    def __call__(self, name):
        stage = self

        class _Ctx:
            def __enter__(self_):
                stage.log(f"[{name}] ...")
                self_.t0 = time.perf_counter()
                return self_

            def __exit__(self_, *exc):
                dt = time.perf_counter() - self_.t0
                stage.times[name] = dt
                stage.log(f"[{name}] {dt:.2f} s")
                return False

        return _Ctx()


SPARSE_SIGNALS = ("base", "first", "tfs", "ql500", "ql1000", "ql2000")
SPARSE_GEOMETRIES = ("tfidf", "bm25", "ppmi", "sgr_centres")


def sparse_analyzer(recipe: dict | None = None):
    """The first-stage analyser of a sparse-only recipe: Porter stemmer always, lowercase, and the
    recipe's ``token_pattern`` (default ``"sklearn"``, ``\\b\\w\\w+\\b``; ``"word"`` keeps
    1-character tokens), ``stopwords`` (default ``"english"``; ``"lucene"`` or None) and
    ``compounds`` (default False; hyphen-free compounds added, :class:`jkofast.sparse.text.Analyzer`).
    Missing keys give the analyser of the first two attempts."""
    from jkofast.sparse.text import Analyzer

    recipe = {} if recipe is None else recipe
    return Analyzer(
        recipe.get("token_pattern", "sklearn"),
        stopwords=recipe.get("stopwords", "english"),
        stemmer="porter",
        compounds=bool(recipe.get("compounds", False)),
    )


def _title_texts(ds, t: int) -> list[str]:
    return [" ".join([ti] * t + [tx]) if ti else tx for ti, tx in zip(ds.titles, ds.texts, strict=True)]


class SparseCorpus:
    """The sparse-only building blocks over one corpus (BM25 lucene + Porter, English stop-words
    unless ``analyzer`` says otherwise (see :func:`sparse_analyzer`), ``title x t + abstract``),
    built lazily and shared by :func:`sparse_only_inputs` and
    ``experiments/sparse_only_v2.py`` (which selects among them on train queries).

    * ``first_stage(query, queries)``: full-corpus scores of the query model —
      ``{"kind": "bm25"}``, ``{"kind": "rm3", "fb_docs", "n_terms", "weight"}`` (RM3 over the
      base BM25's top ``fb_docs``, scored with BM25), ``{"kind": "ppmi" | "ppmi2", "n_terms",
      "weight"}`` (expansion through SparseGeometricRAG's PPMI graph A / second-order graph G
      fitted on the same stemmed counts); see :mod:`jkofast.sparse.expansion`;
    * ``signal(name, queries)``: ``base`` (BM25), ``tfs`` (stemmed TF-IDF cosine), ``qlMU``
      (Dirichlet query likelihood, μ = MU);
    * ``geometry(kind)``: document rows for the W step — ``tfidf`` (stemmed TF-IDF),
      ``bm25`` (BM25 weights), ``ppmi`` (TF-IDF row + ½ · its top-12 terms through the
      row-normalised PPMI graph), ``sgr_centres`` (membership-weighted SGR branch centres).
    """

    def __init__(self, ds, title_repeats: int = 3, n_threads: int | None = None, analyzer=None):

        from jkofast._threads import resolve_threads
        from jkofast._validation import check_int
        from jkofast.sparse.index import BM25Index, TfidfIndex
        from jkofast.sparse.text import Analyzer

        # int(1.7) / int(-1) were taken silently; a str analyser failed deep in the index
        title_repeats = check_int(title_repeats, "title_repeats", min_value=0)
        if analyzer is not None and not isinstance(analyzer, Analyzer):
            raise TypeError(f"analyzer must be a jkofast.sparse.text.Analyzer, got {type(analyzer).__name__}")
        resolve_threads(n_threads)
        self.n_threads = n_threads
        self.analyzer = sparse_analyzer() if analyzer is None else analyzer
        self.title_repeats = title_repeats
        self.texts = _title_texts(ds, title_repeats)
        self.bm25 = BM25Index("lucene", analyzer=self.analyzer).fit(self.texts)
        self.V = self.bm25.n_terms
        self._doc_tf = None
        self.tfidf = TfidfIndex(self.analyzer).fit(self.texts)
        if self.tfidf.n_terms != self.V:  # same analyser and texts -> same sorted vocabulary
            raise RuntimeError("TF-IDF and BM25 vocabularies differ")
        self._sgr = None
        self._cache = {}

    @property
    def doc_tf(self):
        """Document term counts (n_docs, V) CSR over the BM25 vocabulary (built on first use)."""
        if self._doc_tf is None:
            import scipy.sparse as sp

            ptr, terms, cnt = self.bm25.vocab.transform(self.texts)
            self._doc_tf = sp.csr_matrix((cnt, terms, ptr), shape=(len(self.texts), self.V))
        return self._doc_tf

    def query_counts(self, queries):
        import scipy.sparse as sp

        q_ptr, q_terms, q_w = self.bm25.query_csr(queries)
        return sp.csr_matrix((q_w, q_terms, q_ptr), shape=(q_ptr.size - 1, self.V))

    @property
    def sgr(self):
        """SparseGeometricRetriever fitted on the stemmed count matrix (columns = BM25 term ids)."""
        if self._sgr is None:
            from jkofast.sgr.retriever import SparseGeometricRetriever

            self._sgr = SparseGeometricRetriever().fit(self.doc_tf, n_threads=self.n_threads)
        return self._sgr

    def graph(self, which: str = "ppmi"):
        """SGR's term graph as a (V, V) CSR matrix: ``ppmi`` = A, ``ppmi2`` = G (second order)."""
        import scipy.sparse as sp

        if which not in ("ppmi", "ppmi2"):  # anything else returned G silently
            raise ValueError(f"which must be 'ppmi' or 'ppmi2', got {which!r}")
        ix = self.sgr._ix
        p = "a" if which == "ppmi" else "g"
        return sp.csr_matrix(
            (ix[p + "_val"].astype(np.float64), ix[p + "_idx"], ix[p + "_indptr"]), shape=(self.V, self.V)
        )

    def signal(self, name: str, queries) -> np.ndarray:
        from jkofast.sparse.expansion import dirichlet_ql

        if name == "base":
            return self.bm25.score_all(queries, n_threads=self.n_threads)
        if name == "tfs":
            return self.tfidf.score_all(queries, n_threads=self.n_threads)
        if name.startswith("ql"):
            try:
                mu = float(name[2:])
            except ValueError:  # 'qlx' failed with "could not convert string to float: 'x'"
                raise ValueError(
                    f"unknown sparse-only signal {name!r}; known: {', '.join(SPARSE_SIGNALS)} (qlMU: any mu > 0)"
                ) from None
            return dirichlet_ql(self.doc_tf, self.query_counts(queries), mu).astype(np.float32)
        raise ValueError(f"unknown sparse-only signal {name!r}; known: {', '.join(SPARSE_SIGNALS)}")

    def first_stage(self, query: dict, queries, base: np.ndarray | None = None) -> np.ndarray:
        from jkofast.sparse.expansion import graph_queries, rm3_queries, score_weighted

        kind = query.get("kind", "bm25")
        need = {
            "rm3": ("fb_docs", "n_terms", "weight"),
            "ppmi": ("n_terms", "weight"),
            "ppmi2": ("n_terms", "weight"),
        }.get(kind, ())
        missing = [k for k in need if k not in query]
        if missing:  # was a bare KeyError
            raise ValueError(f"query model {kind!r} needs key(s) {missing}")
        if kind == "bm25":
            return self.signal("base", queries) if base is None else base
        Q = self.query_counts(queries)
        if kind == "rm3":
            S = self.signal("base", queries) if base is None else base
            k = int(query["fb_docs"])
            idx, val = top_lists(S, k, self.n_threads)
            Qe = rm3_queries(
                Q,
                self.doc_tf,
                idx,
                val,
                n_terms=int(query["n_terms"]),
                weight=float(query["weight"]),
                n_threads=self.n_threads,
            )
        elif kind in ("ppmi", "ppmi2"):
            Qe = graph_queries(
                Q,
                self.graph(kind),
                n_terms=int(query["n_terms"]),
                weight=float(query["weight"]),
                n_threads=self.n_threads,
            )
        else:
            raise ValueError(f"unknown query model {kind!r}; known: bm25, rm3, ppmi, ppmi2")
        return score_weighted(self.bm25, Qe, n_threads=self.n_threads)

    def geometry(self, kind: str = "tfidf"):
        """(n_docs, V') CSR rows of the ground geometry ``kind`` (see the class docstring)."""
        import scipy.sparse as sp

        if kind in self._cache:
            return self._cache[kind]
        X = self.tfidf.doc_matrix()
        if kind == "tfidf":
            Y = X
        elif kind == "bm25":
            Y = self.bm25.postings_matrix().tocsr()
        elif kind == "ppmi":
            A = self.graph("ppmi")
            nrm = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel())
            An = sp.diags(np.where(nrm > 0, 1.0 / np.where(nrm > 0, nrm, 1.0), 0.0)) @ A
            Xt = _top_terms(X.astype(np.float64), 12)
            S = (Xt @ An).tocsr()
            sn = np.sqrt(np.asarray(S.multiply(S).sum(axis=1)).ravel())
            S = sp.diags(np.where(sn > 0, 1.0 / np.where(sn > 0, sn, 1.0), 0.0)) @ S
            Y = (X.astype(np.float64) + 0.5 * S).tocsr()
        elif kind == "sgr_centres":
            ix = self.sgr._ix
            N = X.shape[0]
            Mm = sp.csr_matrix((ix["mem_m"].astype(np.float64), (ix["mem_doc"], ix["mem_branch"])), shape=(N, self.V))
            Cc = sp.csr_matrix((ix["c_vals"].astype(np.float64), ix["c_terms"], ix["c_indptr"]), shape=(self.V, self.V))
            Y = (Mm @ Cc).tocsr()
        else:
            raise ValueError(f"unknown sparse geometry {kind!r}; known: {', '.join(SPARSE_GEOMETRIES)}")
        Y = sp.csr_matrix(Y, dtype=np.float32)
        Y.sum_duplicates()
        Y.sort_indices()
        self._cache[kind] = Y
        return Y


def _top_terms(X, n: int):
    """Keep the n largest entries of every CSR row (ties -> lowest column)."""
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    rows, cols, vals = [], [], []
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        v = X.data[a:b]
        keep = np.sort(np.argsort(-v, kind="stable")[:n])
        rows.append(np.full(keep.size, i))
        cols.append(X.indices[a:b][keep])
        vals.append(v[keep])
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=X.shape)


def sparse_only_inputs(
    ds, queries, query_ids, recipe: dict | None = None, n_threads: int | None = None, corpus: SparseCorpus | None = None
):
    """Pools, energy and geometry of the sparse-only JKO-RAG recipe.

    Parameters
    ----------
    ds : BeirDataset
    queries, query_ids : list of str
    recipe : dict, optional
        Default :data:`SPARSE_RECIPE`.  Keys: ``title_repeats``; ``token_pattern`` /
        ``stopwords`` / ``compounds`` (the analyser, :func:`sparse_analyzer`; missing = the
        first attempts' ``sklearn`` / ``english`` / False); ``query`` (query model of
        :meth:`SparseCorpus.first_stage`, default BM25); ``pool`` (``"own"``: top-200 of the
        query model; ``"base"``, the default: top-200 of the base BM25); ``weights`` over
        :data:`SPARSE_SIGNALS` (``first`` = the query model's scores); ``propagation``
        (``{"k", "beta"}`` or None: :func:`jkofast.sparse.expansion.propagate_scores` over stemmed
        TF-IDF rows); ``geometry`` (one of :data:`SPARSE_GEOMETRIES`, default ``tfidf``).
    corpus : SparseCorpus, optional
        Reuse already-built indexes (must match ``title_repeats`` and the analyser; checked).

    Returns
    -------
    pools : Pools
        Top-200 of the pool builder over ``title x t + text``.
    r : float64 ndarray
        ``sum_k w_k minmax(signal_k)`` per pool (flat, aligned with ``pools.doc_idx``), then
        propagated when the recipe says so.
    X : scipy.sparse.csr_matrix
        Geometry rows of the pool documents (``rerank_batch(csr=X)``).
    """
    recipe = SPARSE_RECIPE if recipe is None else recipe
    _check_recipe(recipe)
    t = int(recipe["title_repeats"])
    geo = recipe.get("geometry", "tfidf")
    if geo not in SPARSE_GEOMETRIES:
        raise ValueError(f"unknown sparse geometry {geo!r}; known: {', '.join(SPARSE_GEOMETRIES)}")
    an = sparse_analyzer(recipe)
    if corpus is not None and (corpus.title_repeats != t or corpus.analyzer != an):
        raise ValueError(
            f"corpus was built with title_repeats {corpus.title_repeats} and {corpus.analyzer}; "
            f"the recipe asks for {t} and {an}"
        )
    sc = SparseCorpus(ds, t, n_threads, analyzer=an) if corpus is None else corpus
    query = recipe.get("query", {"kind": "bm25"})
    S_base = sc.signal("base", queries)
    sig = {"base": S_base, "first": sc.first_stage(query, queries, base=S_base)}
    P = build_pools(
        sig["first"] if recipe.get("pool", "base") == "own" else S_base,
        None,
        query_ids=query_ids,
        M=200,
        n_threads=n_threads,
    )
    rows = np.repeat(np.arange(P.n_queries), np.diff(P.offsets))
    r = np.zeros(P.offsets[-1], np.float64)
    for k, wt in recipe["weights"].items():
        S = sig[k] if k in sig else sc.signal(k, queries)
        r += wt * minmax(S[rows, P.doc_idx].astype(np.float64), P.offsets)
    prop = recipe.get("propagation")
    if prop:
        from jkofast.sparse.expansion import propagate_scores

        r = propagate_scores(
            r,
            P.offsets,
            sc.geometry("tfidf")[P.doc_idx],
            k=int(prop["k"]),
            beta=float(prop["beta"]),
            n_threads=n_threads,
        )
    return P, r, sc.geometry(geo)[P.doc_idx]


def _check_recipe(recipe) -> None:
    """A sparse-only recipe: known keys only (a typo such as ``geomtry`` fell back to the default
    silently), ``title_repeats`` and ``weights`` present (were bare KeyErrors), finite weights
    (NaN made every energy NaN), ``pool`` in {"own", "base"} (anything else meant ``base``)."""
    import numbers

    from jkofast._validation import check_int

    if not isinstance(recipe, dict):
        raise TypeError(f"recipe must be a dict, got {type(recipe).__name__}")
    unknown = set(recipe) - set(SPARSE_RECIPE)
    if unknown:
        raise ValueError(f"recipe: unknown key(s) {sorted(unknown)}; known: {', '.join(SPARSE_RECIPE)}")
    missing = [k for k in ("title_repeats", "weights") if k not in recipe]
    if missing:
        raise ValueError(f"recipe: missing key(s) {missing}")
    check_int(recipe["title_repeats"], "recipe['title_repeats']", min_value=0)
    w = recipe["weights"]
    if not isinstance(w, dict) or not w:
        raise ValueError(f"recipe['weights'] must be a non-empty dict signal -> weight, got {w!r}")
    unknown = set(w) - set(SPARSE_SIGNALS)
    if unknown:
        raise ValueError(f"unknown sparse-only signals {sorted(unknown)}; known: {', '.join(SPARSE_SIGNALS)}")
    for k, v in w.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v):
            raise ValueError(f"recipe['weights'][{k!r}] must be a finite number, got {v!r}")
    if recipe.get("pool", "base") not in ("own", "base"):
        raise ValueError(f"recipe['pool'] must be 'own' or 'base', got {recipe['pool']!r}")


def _describe_sparse_recipe(recipe: dict) -> str:
    q = recipe.get("query", {"kind": "bm25"})
    qd = "" if q.get("kind", "bm25") == "bm25" else " + " + ", ".join(f"{k} {v}" for k, v in q.items())
    w = ", ".join(f"{v:g} {k}" for k, v in recipe["weights"].items())
    prop = recipe.get("propagation")
    pd = f", propagation k {prop['k']} beta {prop['beta']}" if prop else ""
    an = sparse_analyzer(recipe)
    ad = (
        ""
        if an == sparse_analyzer()
        else (
            f" (tokens {recipe.get('token_pattern', 'sklearn')}{' + compounds' if an.compounds else ''}, "
            f"stop-words {an.stopwords})"
        )
    )
    return (
        f"BM25 lucene + Porter{ad} over title x{recipe['title_repeats']} + text{qd}, top-200 "
        f"{recipe.get('pool', 'base')} pool, r = {w} (minmax){pd}, {recipe.get('geometry', 'tfidf')} geometry, "
        f"JKO point {recipe['jko']}"
    )


def _resolve_config(config, grad):
    from jkofast.jko.solver import JKOConfig, operating_point

    cfg = config if isinstance(config, JKOConfig) else operating_point(config)
    if grad is not None:
        cfg = dataclasses.replace(cfg, grad=grad).validate()  # a bad grad failed only inside rerank_batch
    return cfg


def run_main_job(
    dataset: str = "scifact",
    *,
    split: str = "test",
    config: str = "tuned",
    grad: str | None = "implicit",
    scores_file: str | None = None,
    n_queries: int | None = None,
    n_threads: int | None = None,
    include_sgr: bool = True,
    progress: bool = True,
    methods: tuple | None = None,
    sparse: str = "bm25",
) -> MainJobResult:
    """Run the end-to-end job (see the module docstring) and return its metrics.

    Parameters
    ----------
    dataset : str
        ``"scifact"`` (bundled) or a BEIR folder with MiniLM embeddings.
    split : str
    config : str
        JKO operating point (``"tuned"``: h 2, λ 0.1, ρ 0.05, ε 0.2, T 5, inner 40, τ0 1).
    grad : {"implicit", "unrolled", None}
        Gradient path of the Wasserstein term (``None`` = the operating point's own).
        ``"implicit"`` is the fast exact path; ``"unrolled"`` the reference-faithful one.
    scores_file : str or None
        User rerank scores (``query-id doc-id score``); default: the BM25 pool score.
    n_queries : int or None
        Use only the first n queries of the split (``--quick``).
    methods : tuple of str or None
        Restrict to these methods (default: all of :data:`DEFAULT_METHODS`; the optional
        ``noprox_blend`` and ``bw_jko_a50`` (bregman, α = 0.5) run only when listed).
    sparse : {"bm25", "bm25-lucene", "tfidf", "sgr"}
        Sparse first stage of the hybrid pool (``bm25`` = okapi ``\\w+``, the published one).
    """
    from jkofast.datasets.beir import load_dataset

    t_start = time.perf_counter()

    def log(msg):
        if progress:
            print(f"jkofast run: {msg}", file=sys.stderr, flush=True)

    stage = _Stage(log)
    notes = []
    if isinstance(methods, str):  # tuple("jko_blend") was a set of letters
        raise TypeError(f"methods must be a tuple of method names, not a str (use ({methods!r},))")
    methods = DEFAULT_METHODS if methods is None else tuple(methods)
    unknown = set(methods) - set(ALL_METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {', '.join(ALL_METHODS)}")
    # checked before the minutes of work (a bad config/grad failed only at the JKO stage,
    # n_queries=-1 dropped the last query, 0 failed as 'scores must not be empty')
    from jkofast._threads import resolve_threads
    from jkofast._validation import check_int
    from jkofast.sparse.retriever import METHODS as _SPARSE_METHODS

    if n_queries is not None:
        n_queries = check_int(n_queries, "n_queries", min_value=1)
    resolve_threads(n_threads)
    if sparse not in _SPARSE_METHODS:
        raise ValueError(f"sparse must be one of {', '.join(_SPARSE_METHODS)}, got {sparse!r}")
    if any(m in methods for m in ("noprox_blend", "kl_blend", "jko_blend", "bw_jko_a50", "jko_tuned", "jko_sparse")):
        _resolve_config(config, grad)
    if scores_file and not os.path.isfile(scores_file):
        raise FileNotFoundError(f"scores_file {scores_file!r} not found")

    def want(m):
        return m in methods

    with stage("load"):
        ds = load_dataset(dataset)
        qids = ds.split_query_ids(split)
        if n_queries is not None:
            qids = qids[:n_queries]
        qrels = ds.qrels(split)
        qtext = ds.queries
        queries = [qtext[q] for q in qids]
        emb = ds.embeddings()
        if emb is None:
            raise ValueError(f"dataset {dataset!r} has no saved MiniLM embeddings")
        doc_emb, q_emb_all = emb
        qrow = {q: i for i, q in enumerate(ds.query_ids)}
        q_emb = q_emb_all[[qrow[q] for q in qids]]
    nq = len(qids)
    methods_out = {}

    def add(name, top, ms):
        m = evaluate_topk(top, qids, qrels, ds.doc_ids, K_EVAL)
        m["ms_per_query"] = ms
        methods_out[name] = m
        log(f"  {name:<12} nDCG@10 {np.mean(m['ndcg']):.4f}  R@10 {np.mean(m['recall']):.3f}")

    from jkofast.sparse.retriever import get_retriever

    with stage("bm25_index"):
        bm25 = get_retriever(sparse).fit(ds.doc_texts(". " if sparse == "bm25" else " "))
    with stage("bm25_search"):
        if hasattr(bm25, "score_all"):
            S = bm25.score_all(queries, n_threads=n_threads)
        else:  # a retriever without full scores (sgr): its top-500 list, others at the list minimum
            s_idx, s_val = bm25.search(queries, 500, n_threads=n_threads)
            S = np.zeros((nq, ds.n_docs), np.float32)
            for i in range(nq):
                ok = (s_idx[i] >= 0) & np.isfinite(s_val[i])
                S[i] = s_val[i][ok].min() if ok.any() else 0.0
                S[i, s_idx[i][ok]] = s_val[i][ok]
        bm25_top, _ = top_lists(S, K_READ, n_threads)
    add(sparse if sparse != "bm25" else "bm25", bm25_top, 1000 * stage.times["bm25_search"] / nq)
    if sparse != "bm25":
        notes.append(f"sparse first stage: {sparse} (pools and the 'rerank' stand-in use its scores)")
    with stage("dense_search"):
        D = dense_scores(doc_emb, q_emb)
        dense_top, _ = top_lists(D, K_READ, n_threads)
    add("dense", dense_top, 1000 * stage.times["dense_search"] / nq)
    with stage("pools"):
        P = build_pools(S, D, query_ids=qids, each_n=500, M=200, n_threads=n_threads)
    pool_recall = P.recall(qrels, ds.doc_ids)
    off = P.offsets
    if scores_file:
        user = read_score_file(scores_file)
        rer, missing = align_scores(user, qids, off, [ds.doc_ids[i] for i in P.doc_idx])
        notes.append(f"rerank term = user scores from {scores_file} ({missing} pool pairs missing)")
    else:
        rer = P.sparse
        notes.append("rerank term = BM25 pool score (no cross-encoder loaded); pass --scores FILE for your own")
    Z = np.ascontiguousarray(doc_emb[P.doc_idx], dtype=np.float32)

    if want("hybrid_rrf"):
        with stage("hybrid_rrf"):
            top = positions_to_docs(inpool_rrf(P.sparse, P.dense, off, K_READ, n_threads=n_threads), off, P.doc_idx)
        add("hybrid_rrf", top, 1000 * stage.times["hybrid_rrf"] / nq)
    if want("mmr"):
        with stage("mmr"):
            rel = minmax(rer, off)
            top = positions_to_docs(mmr(rel, Z, off, K_READ, lam=0.5, n_threads=n_threads), off, P.doc_idx)
        add("mmr", top, 1000 * stage.times["mmr"] / nq)
    r_blend = blend(off, dense=P.dense, rerank=rer, alpha=0.4, gamma=0.6)
    if want("dpp_map"):
        with stage("dpp_map"):
            rel = minmax(r_blend, off)
            top = positions_to_docs(dpp_map(rel, Z, off, K_READ, delta=1e-3, n_threads=n_threads), off, P.doc_idx)
        add("dpp_map", top, 1000 * stage.times["dpp_map"] / nq)
    if want("blend"):
        with stage("blend"):
            top = positions_to_docs(topk_by_score(r_blend, off, K_READ), off, P.doc_idx)
        add("blend", top, 1000 * stage.times["blend"] / nq)

    if include_sgr and want("sgr"):
        try:
            from jkofast.sgr.retriever import SparseGeometricRetriever
        except ImportError:
            SparseGeometricRetriever = None
            notes.append("sgr skipped: jkofast.sgr.retriever not available")
        if SparseGeometricRetriever is not None:
            try:
                with stage("sgr_index"):
                    sgr = SparseGeometricRetriever().fit(ds.doc_texts(" "), n_threads=n_threads)
                with stage("sgr_search"):
                    top, _ = sgr.search(queries, K_READ, n_threads=n_threads)
                add("sgr", top, 1000 * stage.times["sgr_search"] / nq)
            except Exception as exc:  # another area's module: report, never abort the job
                notes.append(f"sgr failed: {type(exc).__name__}: {exc}")

    jko_methods = [
        m for m in ("noprox_blend", "kl_blend", "jko_blend", "bw_jko_a50", "jko_tuned", "jko_sparse") if want(m)
    ]
    if jko_methods:
        try:
            cfg = _resolve_config(config, grad)
            from jkofast.jko.solver import rerank_batch
        except ImportError as exc:
            cfg = None
            notes.append(f"JKO methods skipped: {exc}")
        if cfg is not None:
            notes.append(
                f"JKO config: {config} (h {cfg.h}, lam {cfg.lam}, rho {cfg.rho}, eps {cfg.sinkhorn_eps}, "
                f"T {cfg.T}, inner {cfg.inner_steps}, tau0 {cfg.tau0}), grad={cfg.grad}"
            )
            E, p0 = energy_and_p0(off, dense=P.dense, rerank=rer, alpha=0.4, gamma=0.6, tau0=cfg.tau0)
            for name, mode, ap in (
                ("noprox_blend", "noproximal", 0.5),
                ("kl_blend", "kl", 0.5),
                ("jko_blend", "wasserstein", 0.5),
                ("bw_jko_a50", "bregman", 0.5),
            ):
                if name not in jko_methods:
                    continue
                c = dataclasses.replace(cfg, mode=mode, alpha_prox=ap)
                with stage(name):
                    res = rerank_batch(E, p0, off, embeddings=Z, config=c, n_threads=n_threads, warn_unconverged=False)
                    top = readout_topk(res.p, P, K_READ)
                _report_status(res, name, notes)
                add(name, top, 1000 * stage.times[name] / nq)
            if "jko_tuned" in jko_methods:
                # energy weights selected on TRAIN queries with the published protocol
                # (experiments/tune_scifact.py: 25 configs x 80 train queries -> config #12, (alpha, gamma) = TUNED_AG)
                Et, p0t = energy_and_p0(
                    off, dense=P.dense, rerank=rer, alpha=TUNED_AG[0], gamma=TUNED_AG[1], tau0=cfg.tau0
                )
                with stage("jko_tuned"):
                    res = rerank_batch(
                        Et,
                        p0t,
                        off,
                        embeddings=Z,
                        config=dataclasses.replace(cfg, mode="wasserstein"),
                        n_threads=n_threads,
                        warn_unconverged=False,
                    )
                    top = readout_topk(res.p, P, K_READ)
                _report_status(res, "jko_tuned", notes)
                add("jko_tuned", top, 1000 * stage.times["jko_tuned"] / nq)
                notes.append(
                    f"jko_tuned: JKO-RAG with the train-selected energy (alpha, gamma) = {TUNED_AG} "
                    "(config #12 of the published search, chosen on 80 train queries)"
                )
            if "jko_sparse" in jko_methods:
                from jkofast.jko.energy import softmax_tau
                from jkofast.jko.solver import JKOConfig

                cs = JKOConfig(**SPARSE_RECIPE["jko"], grad=cfg.grad).validate()
                with stage("jko_sparse"):
                    Ps, rs, Xs = sparse_only_inputs(ds, queries, qids, n_threads=n_threads)
                    # query blocks: the solver's copies of the (wide, PPMI-smoothed) geometry rows
                    # stay bounded by the block, not the batch; per-query results are identical
                    res = rerank_blocks(-rs, softmax_tau(rs, Ps.offsets, cs.tau0), Ps.offsets, Xs, cs, n_threads)
                    top = readout_topk(res.p, Ps, K_READ)
                _report_status(res, "jko_sparse", notes)
                add("jko_sparse", top, 1000 * stage.times["jko_sparse"] / nq)
                notes.append(
                    f"jko_sparse: {_describe_sparse_recipe(SPARSE_RECIPE)} (all selected on train); no transformer"
                )
    stages_ms = {k: 1000 * v / nq for k, v in stage.times.items() if k in ("bm25_index", "pools", "sgr_index")}
    return MainJobResult(
        dataset=dataset,
        n_queries=nq,
        config=config,
        methods=methods_out,
        stages=stages_ms,
        notes=notes,
        pool_recall=pool_recall,
        wall_s=time.perf_counter() - t_start,
    )


def rerank_blocks(energy, p0, offsets, csr, config, n_threads=None, block: int = 32):
    """``rerank_batch(energy, p0, offsets, csr=csr, config=config)`` in blocks of ``block``
    queries: the same per-query results (each query is solved independently), with the
    solver's copies of the geometry rows bounded by one block.  Capped inner steps are
    counted in ``.unconverged`` (no warning here; the main job reports them in its notes)."""
    from jkofast._validation import check_int, check_offsets
    from jkofast.jko.solver import RerankResult, rerank_batch

    # block <= 0 returned np.empty garbage as p (no block ran); offsets ending before the
    # energy dropped the last pools silently
    block = check_int(block, "block", min_value=1)
    energy = np.asarray(energy)
    off = check_offsets(offsets, energy.shape[0])
    if p0 is not None:
        p0 = np.asarray(p0)
        if p0.shape != energy.shape:
            raise ValueError(f"p0 and energy must have the same shape, got {p0.shape} and {energy.shape}")
    if getattr(csr, "shape", (None,))[0] != energy.shape[0]:
        raise ValueError(
            f"csr must have one row per pool entry ({energy.shape[0]}), got shape {getattr(csr, 'shape', None)}"
        )
    nq = off.shape[0] - 1
    p = np.empty(int(off[-1]))
    status = np.zeros(nq, np.int32)
    unconv = np.zeros((nq, 2), np.int64)
    errors: dict = {}
    for q0 in range(0, nq, block):
        q1 = min(nq, q0 + block)
        a, b = int(off[q0]), int(off[q1])
        r = rerank_batch(
            energy[a:b],
            None if p0 is None else p0[a:b],
            off[q0 : q1 + 1] - a,
            csr=csr[a:b],
            config=config,
            n_threads=n_threads,
            warn_unconverged=False,
        )
        p[a:b] = r.p
        status[q0:q1] = r.status
        unconv[q0:q1] = r.unconverged
        errors.update({q0 + k: v for k, v in r.errors.items()})
    return RerankResult(p=p, offsets=off, status=status, errors=errors, unconverged=unconv)


def _report_status(res, name, notes):
    status = np.asarray(res.status)
    bad = int(np.count_nonzero(status))
    if bad:
        notes.append(f"{name}: {bad} pools reported a non-zero solver status (read out as solved)")
    un = getattr(res, "unconverged", None)
    if un is not None and un.any():
        from jkofast._status import unconverged_summary

        notes.append(f"{name}: {unconverged_summary(np.count_nonzero(un.any(axis=1)), *un.sum(axis=0))}")
