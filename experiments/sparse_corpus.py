"""The search space of the sparse-only JKO-RAG searches (experiments/sparse_only_v2.py, sparse_only_v3.py).

The product keeps one point of it (:data:`jkofast.studies.sparse_recipe.SPARSE_RECIPE`); this module
holds everything the searches chose among, as recipe dicts:

* ``title_repeats``; ``token_pattern`` / ``stopwords`` / ``compounds`` (the analyser,
  :func:`sparse_analyzer`; missing keys = the first two attempts' ``sklearn`` / ``english`` / False);
* ``query``: the query model of :meth:`SparseCorpus.first_stage` -- ``{"kind": "bm25"}``,
  ``{"kind": "rm3", "fb_docs", "n_terms", "weight"}`` (RM3 over the base BM25's top ``fb_docs``,
  scored with BM25), ``{"kind": "ppmi" | "ppmi2", "n_terms", "weight"}`` (expansion through
  SparseGeometricRAG's PPMI graph A / second-order graph G fitted on the same stemmed counts);
  see experiments/expansion.py;
* ``pool``: ``"own"`` (top-200 of the query model) or ``"base"`` (top-200 of the base BM25);
* ``weights`` over :data:`SPARSE_SIGNALS`: ``base`` (BM25), ``first`` (the query model's scores),
  ``tfs`` (stemmed TF-IDF cosine), ``qlMU`` (Dirichlet query likelihood, μ = MU);
* ``propagation``: ``{"k", "beta"}`` or None (:func:`expansion.propagate_scores` over stemmed
  TF-IDF rows);
* ``geometry``, one of :data:`SPARSE_GEOMETRIES`: ``tfidf`` (stemmed TF-IDF), ``bm25`` (BM25
  weights), ``ppmi`` (the product's PPMI-smoothed TF-IDF rows), ``sgr_centres``
  (membership-weighted SGR branch centres);
* ``jko``: the JKO point (dict of JKOConfig fields).

:data:`SPARSE_RECIPE` here is the product's recipe written as such a dict;
experiments/tests/test_sparse_corpus.py checks that both give the same pools, energy and geometry.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from jkofast.pools.candidates import build_pools, top_lists
from jkofast.studies import sparse_recipe as _product
from jkofast.studies.sparse_recipe import SparseRecipeCorpus, canonical_f32, pool_scores, title_texts

__all__ = [
    "SPARSE_GEOMETRIES",
    "SPARSE_RECIPE",
    "SPARSE_SIGNALS",
    "SparseCorpus",
    "check_recipe",
    "sparse_analyzer",
    "sparse_only_inputs",
    "title_texts",
]

SPARSE_SIGNALS = ("base", "first", "tfs", "ql500", "ql1000", "ql2000")
SPARSE_GEOMETRIES = ("tfidf", "bm25", "ppmi", "sgr_centres")
_P = _product.SPARSE_RECIPE
# the product's recipe as a search-space point (experiments/sparse_only_v3.py selected it on train)
SPARSE_RECIPE = {
    "title_repeats": _P.title_repeats,
    "token_pattern": _P.token_pattern,
    "stopwords": _P.stopwords,
    "compounds": False,
    "query": {"kind": "bm25"},
    "pool": "base",
    "weights": {"first": 1.0},
    "propagation": None,
    "geometry": "ppmi",
    "jko": _P.jko_params(),
}


def sparse_analyzer(recipe: dict | None = None):
    r"""The first-stage analyser of a recipe dict: Porter stemmer always, lowercase, the recipe's
    ``token_pattern`` (default ``"sklearn"``, ``\b\w\w+\b``; ``"word"`` keeps 1-character tokens),
    ``stopwords`` (default ``"english"``; ``"lucene"`` or None) and ``compounds`` (default False;
    hyphen-free compounds added, :class:`jkofast.text.Analyzer`).  Missing keys give the
    analyser of the first two attempts."""
    from jkofast.text import Analyzer

    recipe = {} if recipe is None else recipe
    return Analyzer(
        recipe.get("token_pattern", "sklearn"),
        stopwords=recipe.get("stopwords", "english"),
        stemmer="porter",
        compounds=bool(recipe.get("compounds", False)),
    )


class SparseCorpus(SparseRecipeCorpus):
    """The sparse building blocks of the searches over one corpus (see the module docstring).

    The product's :class:`~jkofast.studies.sparse_recipe.SparseRecipeCorpus` (BM25 lucene + TF-IDF
    over ``title x t + abstract``, stemmed counts, SGR fit, PPMI geometry) plus the rejected query
    models, signals and geometries.  Default analyser: the first two attempts'
    (:func:`sparse_analyzer` of an empty recipe).
    """

    def __init__(self, ds, title_repeats: int = 3, n_threads: int | None = None, analyzer=None):
        super().__init__(ds, title_repeats, sparse_analyzer() if analyzer is None else analyzer, n_threads)
        self._cache = {}

    def query_counts(self, queries) -> sp.csr_matrix:
        """Analysed query term counts (nq, V) over the BM25 vocabulary."""
        q_ptr, q_terms, q_w = self.bm25.query_csr(queries)
        return sp.csr_matrix((q_w, q_terms, q_ptr), shape=(q_ptr.size - 1, self.V))

    def graph(self, which: str = "ppmi") -> sp.csr_matrix:
        """SGR's term graph as a (V, V) CSR matrix: ``ppmi`` = A, ``ppmi2`` = G (second order)."""
        if which not in ("ppmi", "ppmi2"):  # anything else returned G silently
            raise ValueError(f"which must be 'ppmi' or 'ppmi2', got {which!r}")
        if which == "ppmi":
            return self.ppmi_graph()
        ix = self.sgr._ix
        return sp.csr_matrix((ix["g_val"].astype(np.float64), ix["g_idx"], ix["g_indptr"]), shape=(self.V, self.V))

    def signal(self, name: str, queries) -> np.ndarray:
        """Full-corpus scores (nq, n_docs) of one of :data:`SPARSE_SIGNALS` (``first`` excepted)."""
        from expansion import dirichlet_ql

        if name == "base":
            return self.bm25_scores(queries)
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
        """Full-corpus scores of the query model ``query`` (``base``: the BM25 scores, if already computed)."""
        from expansion import graph_queries, rm3_queries, score_weighted

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

    def geometry(self, kind: str = "tfidf") -> sp.csr_matrix:
        """(n_docs, V') CSR rows of the ground geometry ``kind`` (see the module docstring)."""
        if kind == "ppmi":  # the product's geometry
            return self.ppmi_geometry(_P.ppmi_terms, _P.ppmi_weight)
        if kind in self._cache:
            return self._cache[kind]
        if kind == "tfidf":
            Y = self.tfidf.doc_matrix()
        elif kind == "bm25":
            Y = self.bm25.postings_matrix().tocsr()
        elif kind == "sgr_centres":
            ix = self.sgr._ix
            N = len(self.texts)
            Mm = sp.csr_matrix((ix["mem_m"].astype(np.float64), (ix["mem_doc"], ix["mem_branch"])), shape=(N, self.V))
            Cc = sp.csr_matrix((ix["c_vals"].astype(np.float64), ix["c_terms"], ix["c_indptr"]), shape=(self.V, self.V))
            Y = (Mm @ Cc).tocsr()
        else:
            raise ValueError(f"unknown sparse geometry {kind!r}; known: {', '.join(SPARSE_GEOMETRIES)}")
        self._cache[kind] = canonical_f32(Y)
        return self._cache[kind]


def sparse_only_inputs(
    ds, queries, query_ids, recipe: dict | None = None, n_threads: int | None = None, corpus: SparseCorpus | None = None
):
    """Pools, energy and geometry of a recipe dict of the search space.

    Parameters
    ----------
    ds : BeirDataset
    queries, query_ids : list of str
    recipe : dict, optional
        Default :data:`SPARSE_RECIPE` (keys: see the module docstring).
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
    check_recipe(recipe)
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
    r = np.zeros(P.offsets[-1], np.float64)
    for k, wt in recipe["weights"].items():
        r += wt * pool_scores(sig[k] if k in sig else sc.signal(k, queries), P)
    prop = recipe.get("propagation")
    if prop:
        from expansion import propagate_scores

        r = propagate_scores(
            r,
            P.offsets,
            sc.geometry("tfidf")[P.doc_idx],
            k=int(prop["k"]),
            beta=float(prop["beta"]),
            n_threads=n_threads,
        )
    return P, r, sc.geometry(geo)[P.doc_idx]


def check_recipe(recipe) -> None:
    """A recipe dict: known keys only (a typo such as ``geomtry`` fell back to the default
    silently), ``title_repeats`` and ``weights`` present (were bare KeyErrors), finite weights
    (NaN made every energy NaN), ``pool`` in {"own", "base"} (anything else meant ``base``)."""
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
