r"""The sparse-only JKO-RAG recipe (``jko_sparse``): no transformer, no dense vector anywhere.

One point, every choice selected on the 809 SciFact TRAIN queries by the searches recorded in
``experiments/`` (experiments/sparse_only.md; test 0.6942, ``experiments/results/sparse_only_v3.json``):

* first stage: BM25 lucene (k1 1.2, b 0.75) over ``title x 4 + abstract``, analysed with ``\w+``
  tokens, lowercase, scikit-learn's English stop-words, then the Porter stemmer;
* pool: the top-200 of that BM25 (sparse-only pools, SPEC A.2.6);
* energy: ``E = -r`` with ``r = minmax(BM25)`` over the pool (no expansion, second signal or score
  propagation passed the train gate), ``p0 = softmax_{τ0}(r)``;
* geometry: PPMI-smoothed stemmed TF-IDF rows, ``x + ½ · normalise(top_12(x) · Â)`` with ``x`` the
  document's TF-IDF row, ``top_12`` its 12 largest entries and ``Â`` the row-normalised PPMI term
  graph of SparseGeometricRAG fitted on the same stemmed counts;
* JKO-RAG (Wasserstein) at h 8, λ 0.1, ρ 0.05, ε 0.2, T 1, 15 inner steps, τ0 1.

:func:`sparse_only_inputs` builds the pools, ``r`` and the geometry rows; the main job solves them
with :func:`jkofast.studies.readout.rerank_blocks`.  :func:`sparse_recipe_search` is the whole
recipe as one call on any dataset (``jkofast run --dataset FOLDER --methods jko_sparse``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from jkofast._threads import resolve_threads
from jkofast._validation import check_int
from jkofast.jko.energy import minmax, softmax_tau
from jkofast.jko.solver import JKOConfig
from jkofast.pools.candidates import Pools, build_pools
from jkofast.sgr.retriever import SparseGeometricRetriever
from jkofast.sparse.index import BM25Index, TfidfIndex
from jkofast.sparse.vocabulary import Vocabulary
from jkofast.studies.readout import readout_topk, rerank_blocks
from jkofast.text.analyzer import Analyzer

__all__ = [
    "SPARSE_RECIPE",
    "SparseRecipe",
    "SparseRecipeCorpus",
    "canonical_f32",
    "pool_scores",
    "sparse_analyzer",
    "sparse_only_inputs",
    "sparse_recipe_search",
    "title_texts",
    "top_terms",
]


@dataclasses.dataclass(frozen=True)
class SparseRecipe:
    r"""The train-selected sparse-only JKO-RAG recipe (see the module docstring).

    Attributes
    ----------
    title_repeats : int
        The title is repeated this many times before the abstract (a one-field BM25F).
    token_pattern : str
        Token pattern of :class:`jkofast.text.Analyzer` (``"word"`` = ``\w+``).
    stopwords : str or None
        Stop list of the analyser (``"english"``: scikit-learn's 318 words).
    pool_size : int
        Pool size M (top-M of the BM25 scores).
    ppmi_terms : int
        Largest TF-IDF entries of a document spread through the PPMI graph.
    ppmi_weight : float
        Weight of the spread row added to the TF-IDF row.
    h, lam, rho, sinkhorn_eps, T, inner_steps, tau0 :
        The JKO operating point (SPEC A.4.1 names).
    """

    title_repeats: int = 4
    token_pattern: str = "word"
    stopwords: str | None = "english"
    pool_size: int = 200
    ppmi_terms: int = 12
    ppmi_weight: float = 0.5
    h: float = 8.0
    lam: float = 0.1
    rho: float = 0.05
    sinkhorn_eps: float = 0.2
    T: int = 1
    inner_steps: int = 15
    tau0: float = 1.0

    def jko_params(self) -> dict:
        """Return the JKO fields of the recipe as a dict (``JKOConfig(**recipe.jko_params())``)."""
        return {k: getattr(self, k) for k in ("h", "lam", "rho", "sinkhorn_eps", "T", "inner_steps", "tau0")}

    def jko_config(self, grad: str = "implicit"):
        """Return the recipe's :class:`jkofast.jko.solver.JKOConfig` (Wasserstein mode) for gradient path ``grad``."""
        return JKOConfig(**self.jko_params(), grad=grad).validate()

    def describe(self) -> str:
        """One line naming every choice of the recipe (the main job's note)."""
        stop = "no" if self.stopwords is None else self.stopwords
        return (
            f"BM25 lucene + Porter (tokens {self.token_pattern}, stop-words {stop}) over title x{self.title_repeats} "
            f"+ text, top-{self.pool_size} pool, r = minmax(BM25), PPMI-smoothed TF-IDF geometry "
            f"(top {self.ppmi_terms} terms, weight {self.ppmi_weight:g}), JKO point {self.jko_params()}"
        )


SPARSE_RECIPE = SparseRecipe()


def sparse_analyzer(recipe: SparseRecipe = SPARSE_RECIPE):
    """Return the first-stage analyser of ``recipe``: its tokens and stop list, lowercase, Porter stemmer.

    Parameters
    ----------
    recipe : SparseRecipe

    Returns
    -------
    jkofast.text.Analyzer
    """
    return Analyzer(recipe.token_pattern, stopwords=recipe.stopwords, stemmer="porter")


def title_texts(ds, t: int) -> list[str]:
    """``title x t + text`` of every document of ``ds`` (the text alone when the title is empty)."""
    return [" ".join([ti] * t + [tx]) if ti else tx for ti, tx in zip(ds.titles, ds.texts, strict=True)]


class SparseRecipeCorpus:
    """The sparse indexes of the recipe over one corpus, built once and shared.

    BM25 lucene and TF-IDF over ``title x title_repeats + text`` from one analysis of the texts
    (same sorted vocabulary), the document term counts, and SparseGeometricRAG fitted on those
    counts (its PPMI graph smooths the geometry); the SGR fit and the geometry are built on first
    use.

    Parameters
    ----------
    ds : jkofast.datasets.beir.BeirDataset
    title_repeats : int
    analyzer : jkofast.text.Analyzer
    n_threads : int or None
    """

    def __init__(self, ds, title_repeats: int, analyzer, n_threads: int | None = None):
        # a whole number of repeats, and an Analyzer (a str would fail deep in the index)
        title_repeats = check_int(title_repeats, "title_repeats", min_value=0)
        if not isinstance(analyzer, Analyzer):
            raise TypeError(f"analyzer must be a jkofast.text.Analyzer, got {type(analyzer).__name__}")
        resolve_threads(n_threads)
        self.n_threads = n_threads
        self.analyzer = analyzer
        self.title_repeats = title_repeats
        self.texts = title_texts(ds, title_repeats)
        # one analysis of the texts serves BM25, TF-IDF and the count matrix (same vocabulary)
        vocab = Vocabulary(analyzer)
        counts = vocab.fit_transform(self.texts)
        self.bm25 = BM25Index("lucene", analyzer=analyzer)._fit_counts(vocab, counts)
        self.V = self.bm25.n_terms
        self.tfidf = TfidfIndex(analyzer)._fit_counts(Vocabulary(analyzer, terms=vocab.terms), counts)
        ptr, terms, cnt, _ = counts
        self._doc_tf = sp.csr_matrix((cnt.copy(), terms.copy(), ptr.copy()), shape=(len(self.texts), self.V))
        self._sgr = None
        self._geometry = {}

    @classmethod
    def for_recipe(cls, ds, recipe: SparseRecipe = SPARSE_RECIPE, n_threads: int | None = None):
        """Build the corpus of ``recipe`` (its title repeats and analyser)."""
        return cls(ds, recipe.title_repeats, sparse_analyzer(recipe), n_threads)

    def matches(self, recipe: SparseRecipe) -> bool:
        """Whether this corpus was built with ``recipe``'s title repeats and analyser."""
        return self.title_repeats == recipe.title_repeats and self.analyzer == sparse_analyzer(recipe)

    def bm25_scores(self, queries) -> np.ndarray:
        """Full-corpus BM25 scores, float32 (nq, n_docs)."""
        return self.bm25.score_all(queries, n_threads=self.n_threads)

    @property
    def doc_tf(self) -> sp.csr_matrix:
        """Document term counts (n_docs, V) CSR over the BM25 vocabulary."""
        return self._doc_tf

    @property
    def sgr(self):
        """SparseGeometricRetriever fitted on the stemmed count matrix (columns = BM25 term ids)."""
        if self._sgr is None:
            self._sgr = SparseGeometricRetriever().fit(self.doc_tf, n_threads=self.n_threads)
        return self._sgr

    def ppmi_graph(self) -> sp.csr_matrix:
        """Return the PPMI term graph A of the fitted SGR index as (V, V) float64 CSR."""
        indptr, idx, val = self.sgr.ppmi_graph()
        return sp.csr_matrix((val.astype(np.float64), idx, indptr), shape=(self.V, self.V))

    def ppmi_geometry(self, n_terms: int = 12, weight: float = 0.5) -> sp.csr_matrix:
        """PPMI-smoothed TF-IDF rows (n_docs, V), float32 canonical CSR (cached per argument pair).

        Row ``d``: ``x_d + weight · s_d / |s_d|`` with ``x_d`` the TF-IDF row and
        ``s_d = top_n(x_d) · Â`` (``top_n`` keeps the ``n_terms`` largest entries, ties -> lowest
        term id; ``Â`` = the PPMI graph A with unit-norm rows).
        """
        key = (n_terms, weight)
        if key not in self._geometry:
            X = self.tfidf.doc_matrix().astype(np.float64)
            A = self.ppmi_graph()
            nrm = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel())
            An = sp.diags(np.where(nrm > 0, 1.0 / np.where(nrm > 0, nrm, 1.0), 0.0)) @ A
            S = (top_terms(X, n_terms) @ An).tocsr()
            sn = np.sqrt(np.asarray(S.multiply(S).sum(axis=1)).ravel())
            S = sp.diags(np.where(sn > 0, 1.0 / np.where(sn > 0, sn, 1.0), 0.0)) @ S
            self._geometry[key] = canonical_f32(X + weight * S)
        return self._geometry[key]


def canonical_f32(Y) -> sp.csr_matrix:
    """``Y`` as float32 CSR with summed duplicates and sorted indices (the solver's geometry layout)."""
    Y = sp.csr_matrix(Y.tocsr(), dtype=np.float32)
    Y.sum_duplicates()
    Y.sort_indices()
    return Y


def top_terms(X, n: int) -> sp.csr_matrix:
    """Keep the ``n`` largest entries of every CSR row (ties -> lowest column)."""
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


def pool_scores(S, pools: Pools) -> np.ndarray:
    """``minmax`` per pool of the full-corpus scores ``S`` (nq, n_docs) at the pool documents (float64, flat)."""
    rows = np.repeat(np.arange(pools.n_queries), np.diff(pools.offsets))
    return minmax(S[rows, pools.doc_idx].astype(np.float64), pools.offsets)


def sparse_only_inputs(
    ds,
    queries,
    query_ids,
    recipe: SparseRecipe = SPARSE_RECIPE,
    n_threads: int | None = None,
    corpus: SparseRecipeCorpus | None = None,
):
    """Pools, energy and geometry of the sparse-only JKO-RAG recipe.

    Parameters
    ----------
    ds : jkofast.datasets.beir.BeirDataset
    queries, query_ids : list of str
    recipe : SparseRecipe
        Default :data:`SPARSE_RECIPE`.
    n_threads : int or None
    corpus : SparseRecipeCorpus, optional
        Reuse already-built indexes (must match the recipe's title repeats and analyser; checked).

    Returns
    -------
    pools : Pools
        Top-``pool_size`` of BM25 over ``title x t + text``.
    r : float64 ndarray
        ``minmax(BM25)`` per pool (flat, aligned with ``pools.doc_idx``); the energy is ``-r``.
    X : scipy.sparse.csr_matrix
        Geometry rows of the pool documents (``rerank_batch(csr=X)``).

    Raises
    ------
    TypeError
        ``recipe`` is not a :class:`SparseRecipe`.
    ValueError
        ``corpus`` was built for another title weight or analyser.
    """
    P, r, G = _sparse_parts(ds, queries, query_ids, recipe, n_threads, corpus)
    return P, r, G[P.doc_idx]


def _sparse_parts(ds, queries, query_ids, recipe, n_threads, corpus):
    """``(pools, r, G)`` of :func:`sparse_only_inputs`, ``G`` the geometry of every corpus row."""
    if not isinstance(recipe, SparseRecipe):
        raise TypeError(f"recipe must be a SparseRecipe, got {type(recipe).__name__}")
    if corpus is not None and not corpus.matches(recipe):
        raise ValueError(
            f"corpus was built with title_repeats {corpus.title_repeats} and {corpus.analyzer}; "
            f"the recipe asks for {recipe.title_repeats} and {sparse_analyzer(recipe)}"
        )
    sc = SparseRecipeCorpus.for_recipe(ds, recipe, n_threads) if corpus is None else corpus
    S = sc.bm25_scores(queries)
    P = build_pools(S, None, query_ids=query_ids, M=recipe.pool_size, n_threads=n_threads)
    return P, pool_scores(S, P), sc.ppmi_geometry(recipe.ppmi_terms, recipe.ppmi_weight)


def sparse_recipe_search(
    ds,
    queries=None,
    query_ids=None,
    k: int = 10,
    *,
    recipe: SparseRecipe = SPARSE_RECIPE,
    grad: str = "implicit",
    n_threads: int | None = None,
    corpus: SparseRecipeCorpus | None = None,
    return_result: bool = False,
):
    """Rank the corpus of ``ds`` for ``queries`` with the sparse-only JKO-RAG recipe (no dense vector anywhere).

    Parameters
    ----------
    ds : jkofast.datasets.beir.BeirDataset
        Any BEIR dataset (:func:`jkofast.datasets.beir.load_dataset`).
    queries : list of str, optional
        Query texts (default: every query of ``ds``).
    query_ids : list of str, optional
        One id per query (default: ``ds.query_ids`` when ``queries`` is omitted, else ``"0"``, ``"1"``, ...).
    k : int
        Documents per query (at most the pool size).
    recipe : SparseRecipe
    grad : {"implicit", "unrolled"}
        Gradient path of the Wasserstein term.
    n_threads : int or None
    corpus : SparseRecipeCorpus, optional
        Indexes already built for ``ds`` (reused across calls).
    return_result : bool
        Also return the solver's :class:`jkofast.jko.solver.RerankResult`.

    Returns
    -------
    top : int64 ndarray (nq, k)
        Corpus rows (positions in ``ds.doc_ids``) by decreasing JKO mass; ``-1`` pads pools
        smaller than ``k``.
    result : RerankResult
        Only with ``return_result``.

    Raises
    ------
    TypeError, ValueError
        ``queries`` a str or its length different from ``query_ids``; ``k < 1``.

    Examples
    --------
    >>> from jkofast.datasets.beir import load_dataset
    >>> ds = load_dataset("scifact")
    >>> top = sparse_recipe_search(ds, ["coffee and heart disease"], k=5)  # doctest: +SKIP
    """
    k = check_int(k, "k", min_value=1)
    if queries is None:
        queries, query_ids = list(ds.query_texts), list(ds.query_ids) if query_ids is None else query_ids
    if isinstance(queries, str):
        raise TypeError("queries must be a list of str, not a str (use [query])")
    queries = list(queries)
    query_ids = [str(i) for i in range(len(queries))] if query_ids is None else list(query_ids)
    if len(query_ids) != len(queries):
        raise ValueError(f"{len(query_ids)} query_ids for {len(queries)} queries")
    cs = recipe.jko_config(grad=grad)
    P, r, G = _sparse_parts(ds, queries, query_ids, recipe, n_threads, corpus)
    # query blocks, each gathering its own pool rows of the corpus geometry: the solver's copies
    # of the (wide, PPMI-smoothed) rows stay bounded by the block; per-query results are identical
    res = rerank_blocks(-r, softmax_tau(r, P.offsets, cs.tau0), P.offsets, G, cs, n_threads, rows=P.doc_idx)
    top = readout_topk(res.p, P, k)
    return (top, res) if return_result else top
