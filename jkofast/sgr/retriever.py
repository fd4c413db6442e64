"""SparseGeometricRAG (SGR): training-free first-stage retrieval (SPEC Part B).

SparseGeometricRAG (SGR): training-free first-stage retrieval over sparse TF-IDF
geometry (SPEC Part B), as Numba kernels over CSR arrays.

Build (B.2-B.5): TF-IDF (scikit-learn ``TfidfVectorizer`` semantics), top-F branch
memberships, B-term membership-weighted branch centres, S residual sign codes with
shrunk sign-variance reliability weights, the PPMI association graph A and the
second-order routing graph G (blockwise, never a dense V×V matrix).

Query (B.6-B.10): weak second-order routing, branch-local signed scores over the codes,
early lexical rescue and the top-P shortlist, the final z-scored feature mix, and soft
high-quality-branch diversity on ranks 2-10.  Every constant is a constructor parameter
with the published value as default.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import threading
from collections.abc import Sequence

import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads, resolve_threads
from jkofast._validation import check_bool, check_int, check_positive, read_json_file
from jkofast.kernels.sgr import build as _b
from jkofast.kernels.sgr import query as _q
from jkofast.kernels.text import tokenize as _tok
from jkofast.sgr import layout as _layout
from jkofast.text.patterns import SKLEARN as TOKEN_PATTERN
from jkofast.text.scripts import fold_script, script_tokenizer, script_word_table

__all__ = ["COMPONENTS", "PRESETS", "TOKEN_PATTERN", "SGRPool", "SparseGeometricRetriever", "default_params"]

# which code points ``\w`` matches, for the query-analysis kernel: ASCII at import, every
# code point (1.1 MB, from the regex engine itself) on the first non-ASCII batch
_WORD_RE = re.compile(r"(?u)\w")
_WTAB_ASCII = np.array([_WORD_RE.match(chr(c)) is not None for c in range(128)], np.uint8)


@functools.lru_cache(maxsize=1)
def _word_table_all() -> np.ndarray:
    r"""Return the uint8 table over all 0x110000 code points: 1 where ``(?u)\w`` matches."""
    allc = "".join(map(chr, range(0x110000)))
    tab = np.zeros(0x110000, np.uint8)
    tab[[m.start() for m in _WORD_RE.finditer(allc)]] = 1
    return tab


COMPONENTS = ("tail", "lexadj", "sem", "rare", "relevance", "lex1", "bm25")

# a padded (nq, k) output wider than the corpus is refused beyond this many slots (1 GiB of int64)
_MAX_PADDED_SLOTS = 2**27
# a list of names like _BUILD_PARAMS below (same shape, other data): nothing to share
_INDEX_ARRAYS = (
    "idf",
    "bm25_idf",
    "dl",
    "s_indptr",
    "s_idx",
    "b_indptr",
    "mem_doc",
    "mem_m",
    "code_term",
    "code_sign",
    "c_indptr",
    "c_terms",
    "c_vals",
    "c_norm",
    "c_w",
    "r_indptr",
    "r_terms",
    "r_w",
    "r_nj",
    "r_scale",
    "gvar",
    "a_indptr",
    "a_idx",
    "a_val",
    "g_indptr",
    "g_idx",
    "g_val",
    "t_indptr",
)
_POSTING_ARRAYS = ("t_docs", "t_tf")
# derived at fit and load (never saved): semantic lists, frequent-term bitsets
_DERIVED = ("sem_indptr", "sem_idx", "sem_val", "tb_row", "tb_bits", "h2f")
# float16 bits -> float32 (the c_w decode table of the default float16 reliability)
_H2F = np.arange(65_536, dtype=np.uint16).view(np.float16).astype(np.float32)


@dataclasses.dataclass
class SGRPool:
    """Top-P pools with their component scores (one row per query).

    ``doc`` int64 (nq, P): corpus row positions in final rank order, padded with -1;
    ``n`` int64 (nq,): pool size per query; each component (``tail``, ``lexadj``,
    ``sem``, ``rare``, ``relevance``, ``lex1``, ``bm25``) is float64 (nq, P) aligned with
    ``doc`` and NaN-padded; ``n_routed_docs`` |U| and ``n_routed_terms`` per query;
    ``status`` int32 (0 ok, 3 empty query).
    """

    doc: np.ndarray
    n: np.ndarray
    tail: np.ndarray
    lexadj: np.ndarray
    sem: np.ndarray
    rare: np.ndarray
    relevance: np.ndarray
    lex1: np.ndarray
    bm25: np.ndarray
    n_routed_docs: np.ndarray
    n_routed_terms: np.ndarray
    status: np.ndarray


# alike in shape to _BUILD_PARAMS below, which names the subset of these that changes the index
def _defaults() -> dict:
    return dict(
        max_features=50_000,
        n_memberships=4,
        centre_size=64,
        code_size=16,
        tau=20.0,
        beta=-0.2,
        reliability_mean="distinct",
        reliability_float16=True,
        cooc_top=12,
        ppmi_damping=10.0,
        assoc_k=64,
        route_k=32,
        ppmi_include_self=False,
        alpha=0.10,
        route_budget=32,
        gamma=0.25,
        lam_m=0.125,
        b_rescue=0.2,
        eta=1.0,
        pool_size=100,
        b_final=0.1,
        coord_exp=0.25,
        semantic_k=16,
        semantic_neighbours="strongest",
        n_rare=3,
        w_tail=1.0,
        w_lex=4.0,
        w_sem=0.3,
        w_rare=1.0,
        n_eligible=10,
        top_h=3,
        n_diverse=10,
        lam_d=0.1,
        tail_gate=False,
        gate_min=10_000,
        gate_mult=40,
        bm25_weight=0.0,
        bm25_rescue_weight=0.0,
        bm25_candidates=0,
        bm25_k1=1.2,
        bm25_b=0.75,
        rescue_mode="auto",
        postings=True,
    )


def default_params() -> dict:
    """Return the default parameters of :class:`SparseGeometricRetriever` (a fresh dict)."""
    return _defaults()


# named parameter sets (``jkofast index/search --method sgr --preset NAME``): "published" reproduces
# the published SciFact row (test nDCG@10 0.5680 vs the paper's 0.5685; SPEC B.9)
PRESETS = {"published": {"semantic_neighbours": "lowest_term_id", "ppmi_include_self": True}}


# a hand-picked list of _defaults() names (which ones shape the index is a choice, not derivable)
# parameters that change the index (the others only change the query path)
_BUILD_PARAMS = (
    "max_features",
    "n_memberships",
    "centre_size",
    "code_size",
    "tau",
    "beta",
    "reliability_mean",
    "reliability_float16",
    "cooc_top",
    "ppmi_damping",
    "assoc_k",
    "route_k",
    "ppmi_include_self",
    "postings",
)


class SparseGeometricRetriever:
    """SparseGeometricRAG first-stage retriever (SPEC Part B).

    Parameters (published defaults, SPEC B.1)
    -----------------------------------------
    max_features : int, default 50000
        Vocabulary cap V (most frequent terms by corpus term frequency).
    n_memberships : int, default 4
        F: top TF-IDF terms per document = its branch memberships.
    centre_size : int, default 64
        B: coordinates kept per branch centre.
    code_size : int, default 16
        S: residual sign-code coordinates per membership.
    tau, beta : float, default 20.0, -0.2
        Reliability shrinkage strength τ and exponent β.
    reliability_mean : {"distinct", "occurrence"}, default "distinct"
        Rescale weights to mean 1 over the branch's distinct (j, t) entries or over its
        code occurrences (SPEC C.4).
    reliability_float16 : bool, default True
        Round reliability weights through float16 as the published package stores them.
    cooc_top : int, default 12
        L: top terms per document used for co-occurrence.
    ppmi_damping : float, default 10.0
        Significance damping ``n_ij/(n_ij + 10)``.
    assoc_k, route_k : int, default 64, 32
        Neighbours kept per term in graph A (PPMI) and G (second order).
    ppmi_include_self : bool, default False
        Keep the diagonal of the co-occurrence matrix in A.
    alpha : float, default 0.10
        Routing expansion weight α.
    route_budget : int, default 32
        Routed terms per query (literal terms always kept).
    gamma : float, default 0.25
        Exponent γ on the query mass ``Q_dj`` of a code.
    lam_m : float, default 0.125
        Consensus weight λ_M.
    b_rescue, eta : float, default 0.2, 1.0
        Length pivot of lex1 and its weight η in the shortlist score.
    pool_size : int, default 100
        P, the shortlist size.
    b_final, coord_exp : float, default 0.1, 0.25
        Length pivot of lex2 and the coordination exponent.
    semantic_k : int, default 16
        Neighbours per query term in the semantic-presence feature.
    semantic_neighbours : {"strongest", "lowest_term_id"}, default "strongest"
        Which A-neighbours: the strongest (intended) or the first ``semantic_k`` of the CSR
        row, i.e. the lowest term ids (reproduces the published numbers; SPEC B.9).
    n_rare : int, default 3
        Highest-IDF query terms used by the rare-coverage feature.
    w_tail, w_lex, w_sem, w_rare : float, default 1.0, 4.0, 0.3, 1.0
        Weights of the pool z-scores in the relevance.
    n_eligible, top_h, n_diverse, lam_d : default 10, 3, 10, 0.1
        Diversity step: eligible branches, top-E count for ``H_j``, ranks diversified
        (1 disables), bonus weight λ_D.
    tail_gate : bool, default False
        Keep only the top ``min(|U|, max(gate_min, gate_mult·P))`` routed documents by tail
        before the rescue (the later optimised variant; an approximation).
    bm25_weight, bm25_rescue_weight : float, default 0.0
        Extensions (not published): weight of ``z(BM25)`` in the relevance / in the
        shortlist score.
    bm25_candidates : int, default 0
        Extension: add the BM25 top-n documents of the full corpus to the routed set.
    bm25_k1, bm25_b : float, default 1.2, 0.75
        BM25 (Lucene idf) parameters of the extension.
    rescue_mode : {"auto", "scan", "postings"}, default "auto"
        How lex1 and the pool features are gathered: scanning every routed document's
        binary support (the frozen method), streaming the postings of the query and
        semantic terms, or (auto) per query term the cheaper of its postings and its
        document bitset, with the semantic presence computed for the pool only.  Results
        are bit-identical.  Without ``postings`` every mode scans the support.
    postings : bool, default True
        Keep the inverted lexical postings (``t_docs``/``t_tf``, ~8 bytes per support entry):
        the fast rescue modes and the BM25 extension read them.  ``False`` gives the compact
        index of SPEC B.11 (the frozen rescue scans the routed documents' support; the same
        scores, bit for bit); the BM25 extension then raises.

    Examples
    --------
    >>> r = SparseGeometricRetriever(pool_size=10).fit(
    ...     ["solar panels convert sunlight", "wind turbines make power", "sunlight and wind"])
    >>> idx, scores = r.search(["sunlight power"], k=2)
    >>> idx.shape
    (1, 2)
    """

    def __init__(self, **params):
        p = _defaults()
        unknown = set(params) - set(p)
        if unknown:
            raise TypeError(f"unknown SparseGeometricRetriever parameter(s): {sorted(unknown)}")
        p.update(params)
        self.params = self._check_params(p)
        self._fitted = False
        self._lock = threading.Lock()
        self._scratch = None
        self._gen = 0
        self._qtable = None
        self._pa_cache: dict = {}  # kernel parameters (SGRParams); cleared when params or index change
        self._kix = None  # the index arrays as the kernels' SGRIndex (built on first use)
        self._entry: dict = {}  # compiled query kernels by dispatcher, for this SGRIndex

    # ------------------------------------------------------------------ params
    @staticmethod
    def _check_params(p: dict) -> dict:
        for name in (
            "max_features",
            "n_memberships",
            "centre_size",
            "code_size",
            "cooc_top",
            "assoc_k",
            "route_k",
            "route_budget",
            "pool_size",
            "n_rare",
            "n_eligible",
            "top_h",
            "n_diverse",
        ):
            p[name] = check_int(p[name], name, min_value=1)
        for name in ("semantic_k", "gate_min", "gate_mult", "bm25_candidates"):
            p[name] = check_int(p[name], name, min_value=0)
        for name in ("tau", "ppmi_damping", "bm25_k1"):
            p[name] = check_positive(p[name], name, strict=False)
        for name in (
            "alpha",
            "lam_m",
            "eta",
            "w_tail",
            "w_lex",
            "w_sem",
            "w_rare",
            "lam_d",
            "gamma",
            "coord_exp",
            "b_rescue",
            "b_final",
            "bm25_b",
        ):
            p[name] = check_positive(p[name], name, strict=False)
        for name in ("beta", "bm25_weight", "bm25_rescue_weight"):
            v = p[name]
            if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer):
                raise TypeError(f"{name} must be a real number")
            if not np.isfinite(v):
                raise ValueError(f"{name} must be finite")
            p[name] = float(v)
        if p["semantic_neighbours"] not in ("strongest", "lowest_term_id"):
            raise ValueError(
                f"semantic_neighbours must be 'strongest' or 'lowest_term_id', got {p['semantic_neighbours']!r}"
            )
        if p["rescue_mode"] not in ("auto", "scan", "postings"):
            raise ValueError(f"rescue_mode must be 'auto', 'scan' or 'postings', got {p['rescue_mode']!r}")
        if p["reliability_mean"] not in ("distinct", "occurrence"):
            raise ValueError(f"reliability_mean must be 'distinct' or 'occurrence', got {p['reliability_mean']!r}")
        for name in ("reliability_float16", "ppmi_include_self", "tail_gate", "postings"):
            p[name] = check_bool(p[name], name)
        if p["tail_gate"] and p["gate_min"] == 0 and p["gate_mult"] == 0:
            raise ValueError(
                "tail_gate with gate_min = 0 and gate_mult = 0 keeps no routed document "
                "(every query would return nothing); raise gate_min or gate_mult"
            )
        for name in ("b_rescue", "b_final", "bm25_b"):
            if p[name] > 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {p[name]}")
        return p

    def set_params(self, **params) -> SparseGeometricRetriever:
        """Change query-path parameters without rebuilding (build parameters need fit)."""
        bad = [k for k in params if k in _BUILD_PARAMS and params[k] != self.params[k]]
        if bad and self._fitted:
            raise ValueError(f"parameter(s) {bad} change the index; call fit again")
        p = dict(self.params)
        unknown = set(params) - set(p)
        if unknown:
            raise TypeError(f"unknown SparseGeometricRetriever parameter(s): {sorted(unknown)}")
        p.update(params)
        p = self._check_params(p)
        # the semantic neighbour lists depend on these two only: rebuilding them on every
        # call made a query-parameter change cost ~0.5 s on a 20k-document index
        remake = any(p[k] != self.params[k] for k in ("semantic_neighbours", "semantic_k"))
        self.params = p
        self._pa_cache = {}
        if self._fitted and remake:
            self._make_semantic()
        return self

    # ------------------------------------------------------------------ build
    def fit(self, texts, ids=None, n_threads: int | None = None) -> SparseGeometricRetriever:
        """Build the index from document texts (``title + " " + text`` is the caller's join).

        Parameters
        ----------
        texts : list of str or scipy.sparse matrix
            Documents; empty strings are allowed (they are never retrieved).  A sparse
            (N, V) matrix is read as raw term counts (columns = term ids; ``dl`` = row
            sums); such an index is queried with :meth:`search_counts`.
        ids : list of str, optional
            Document ids; duplicates raise ``ValueError`` naming the id.
        n_threads : int, optional
            Numba threads for the build kernels.

        Raises
        ------
        TypeError
            ``texts`` is not a sequence of strings.
        ValueError
            Duplicate ``ids``, length mismatch, or no token in the whole corpus.
        """
        import scipy.sparse as sp
        from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

        if sp.issparse(texts):
            return self._fit_counts(texts, ids, n_threads)
        if isinstance(texts, str) or not hasattr(texts, "__len__"):
            raise TypeError("texts must be a list of strings")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
        if len(texts) == 0:
            raise ValueError("texts must not be empty")
        ids = self._check_ids(ids, len(texts))
        p = self.params
        # TOKEN_PATTERN on lowercased text; non-ASCII text folded first (jkofast.text.scripts): ASCII
        # texts and every SciFact text give the same tokens as CountVectorizer(token_pattern=TOKEN_PATTERN)
        self.scripts_ = True
        cv = CountVectorizer(analyzer=script_tokenizer(TOKEN_PATTERN), max_features=p["max_features"], dtype=np.float32)
        try:
            counts = cv.fit_transform(texts)
        except ValueError as exc:  # empty vocabulary
            raise ValueError(f"texts: no token matches {TOKEN_PATTERN!r} in the corpus ({exc})") from exc
        tr = TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)
        X = tr.fit_transform(counts).tocsr().astype(np.float32)
        X.sort_indices()
        counts = counts.tocsr()
        counts.sort_indices()
        analyzer = cv.build_analyzer()
        dl = np.array([len(analyzer(t)) for t in texts], dtype=np.float64)
        vocab = cv.get_feature_names_out()
        self.vocabulary_ = {t: i for i, t in enumerate(vocab)}
        self.terms_ = list(vocab)
        self.ids_ = ids
        self._build(X, counts, dl, np.asarray(tr.idf_, np.float64), n_threads)
        return self

    def _check_ids(self, ids, n):
        if ids is None:
            return None
        ids = [str(x) for x in ids]
        if len(ids) != n:
            raise ValueError(f"ids and texts must have the same length, got {len(ids)} and {n}")
        seen = set()
        for x in ids:
            if x in seen:
                raise ValueError(f"ids: duplicate document id {x!r}")
            seen.add(x)
        return ids

    def _fit_counts(self, counts, ids, n_threads) -> SparseGeometricRetriever:
        """Build from a raw term-count matrix (smooth idf, raw tf, L2; SPEC B.2)."""
        from sklearn.feature_extraction.text import TfidfTransformer

        from jkofast._validation import as_csr

        ip_, ix_, dt_, shape = as_csr(counts, "texts", dtype=np.float32)
        if dt_.size and (dt_.min() < 0):
            raise ValueError("texts: term counts must be non-negative")
        import scipy.sparse as sp

        C = sp.csr_matrix((dt_, ix_, ip_), shape=shape)
        C.eliminate_zeros()
        if C.nnz == 0:
            raise ValueError("texts: the count matrix has no non-zero entry")
        self.ids_ = self._check_ids(ids, shape[0])
        tr = TfidfTransformer(norm="l2", use_idf=True, smooth_idf=True, sublinear_tf=False)
        X = tr.fit_transform(C).tocsr().astype(np.float32)
        X.sort_indices()
        dl = np.asarray(C.sum(axis=1), np.float64).ravel()
        self.vocabulary_ = None
        self.terms_ = None
        self._build(X, C, dl, np.asarray(tr.idf_, np.float64), n_threads)
        return self

    def search_counts(self, q_counts, k: int = 10, n_threads: int | None = None):
        """:meth:`search` for queries given as a sparse (nq, V) raw term-count matrix."""
        self._check_fitted()
        k = check_int(k, "k", min_value=1)
        from jkofast._validation import as_csr

        ip_, ix_, dt_, shape = as_csr(q_counts, "q_counts", dtype=np.float32)
        if shape[1] != self.n_terms_:
            raise ValueError(f"q_counts must have {self.n_terms_} columns, got {shape[1]}")
        if dt_.size and dt_.min() < 0:  # were dropped silently (fit refuses them)
            raise ValueError("q_counts: term counts must be non-negative")
        resolve_threads(n_threads)
        self._check_width(k, shape[0], "k")
        with np.errstate(over="ignore"):
            v = dt_ * self._idf32[ix_]
        if not np.isfinite(v).all():  # tf x idf overflowed float32: NaN weights reached the kernel
            raise ValueError("q_counts: counts too large for float32 tf-idf weights (overflow); rescale the rows")
        rows = np.repeat(np.arange(shape[0]), np.diff(ip_))
        nrm = np.sqrt(np.bincount(rows, weights=v.astype(np.float64) ** 2, minlength=shape[0]))
        keep = v > 0
        v = (v / np.where(nrm[rows] > 0, nrm[rows], 1).astype(np.float32)).astype(np.float32)
        cnt = np.bincount(rows[keep], minlength=shape[0])
        qi = np.zeros(shape[0] + 1, np.int64)
        np.cumsum(cnt, out=qi[1:])
        return self._search_arrays(qi, ix_[keep].astype(np.int32), v[keep], shape[0], k, n_threads)

    def _build(self, X, counts, dl, idf, n_threads) -> None:
        """Calibrate on the whole corpus, encode it as one shard, assemble (``jkofast.sgr.layout``)."""
        p = self.params
        geometry, shard = _layout.calibrate_and_encode(X, p, n_threads, counts=counts)
        ix = _layout.assemble(geometry, [shard], idf, dl, p, n_threads)
        self._set_index(ix, geometry.n_calibration)

    def _set_index(self, ix: dict, n_calibration: int) -> None:
        """Adopt the index arrays ``ix`` (compact layout) and derive the query-path tables."""
        self._ix = ix
        self.n_calibration_ = int(n_calibration)
        self._scratch = None
        self._idf32 = np.asarray(ix["idf"]).astype(np.float32)
        self.n_docs_ = int(ix["dl"].shape[0])
        self.n_terms_ = int(ix["idf"].shape[0])
        self._make_semantic()
        self._make_query_layout()
        self._fitted = True

    @classmethod
    def from_parts(
        cls,
        index: dict,
        params: dict | None = None,
        terms=None,
        ids=None,
        n_calibration: int | None = None,
        scripts: bool = True,
    ) -> SparseGeometricRetriever:
        """Wrap assembled index arrays (``jkofast.sgr.layout.assemble``) into a retriever.

        Parameters
        ----------
        index : dict
            The arrays returned by ``assemble`` (in memory or memory-mapped).
        params : dict, optional
            The parameters the index was built with (build parameters must match the
            arrays: ``code_size``, ``n_memberships``, ``postings``); query parameters may differ.
        terms : list of str, optional
            Term of each column (the vocabulary, V entries); ``None`` for an index queried
            with :meth:`search_counts` only.
        ids : list of str, optional
            Document ids (N entries, unique).
        n_calibration : int, optional
            Passages the geometry was calibrated on (default: N).
        scripts : bool, default True
            Whether non-Latin scripts were folded as ``fit`` folds them (the tokeniser of
            ``jkofast.text.scripts``).

        Raises
        ------
        TypeError, ValueError
            Bad parameters, missing arrays, or lengths that disagree with ``terms``/``ids``.
        """
        self = cls(**(params or {}))
        if not isinstance(index, dict):
            raise TypeError(f"index must be a dict of arrays, got {type(index).__name__}")
        need = list(_INDEX_ARRAYS) + (list(_POSTING_ARRAYS) if self.params["postings"] else [])
        missing = [k for k in need if k not in index]
        if missing:
            raise ValueError(f"index: missing array(s) {missing}")
        ix = {k: index[k] for k in need}
        meta = {
            "n_docs": int(ix["dl"].shape[0]),
            "terms": None if terms is None else [str(t) for t in terms],
            "ids": None if ids is None else [str(x) for x in ids],
        }
        _check_meta_lists(meta, "from_parts")
        _check_structure(ix, meta, self.params, "index")
        terms = meta["terms"]
        self.terms_ = terms
        self.vocabulary_ = None if terms is None else {t: i for i, t in enumerate(terms)}
        self.ids_ = meta["ids"]
        self.scripts_ = bool(scripts)
        self._set_index(ix, meta["n_docs"] if n_calibration is None else n_calibration)
        return self

    def _make_semantic(self) -> None:
        """Per-term semantic neighbour lists (``semantic_k`` of each A row)."""
        self._kix = None
        ix, p = self._ix, self.params
        indptr, idx, val = ix["a_indptr"], ix["a_idx"], ix["a_val"]
        V = indptr.shape[0] - 1
        rows = np.repeat(np.arange(V), np.diff(indptr))
        if p["semantic_neighbours"] == "lowest_term_id":
            rank = np.arange(idx.shape[0]) - indptr[rows]
            keep = rank < p["semantic_k"]
            sel = np.flatnonzero(keep)
        else:
            order = np.lexsort((idx, -val.astype(np.float64), rows))
            rank = np.arange(order.shape[0]) - indptr[rows[order]]
            sel = np.sort(order[rank < p["semantic_k"]])  # back to (row, term id) order
        cnt = np.bincount(rows[sel], minlength=V)
        sem_indptr = np.zeros(V + 1, np.int64)
        np.cumsum(cnt, out=sem_indptr[1:])
        ix["sem_indptr"] = sem_indptr
        ix["sem_idx"] = idx[sel].astype(_layout.term_dtype(V))
        ix["sem_val"] = val[sel].astype(np.float32)

    def _make_query_layout(self) -> None:
        """Derive the query-path tables at fit and load.

        Document bitsets of the frequent terms (with postings only; not saved): a term gets a
        row of ``ceil(N / 64)`` int64 words when ``32·df >= N``, i.e. when the bitset is no
        larger than its int32 postings, so the extra memory is bounded by the postings.  The
        query path tests a routed or pool document against such a term in O(1) instead of
        streaming its postings (SciFact: 693 of 35,899 terms).  Without postings the rescue
        scans the support and these tables are empty.
        """
        self._pa_cache = {}
        self._kix = None
        ix = self._ix
        N = int(ix["dl"].shape[0])
        V = int(ix["idf"].shape[0])
        if self.params["postings"]:
            t_indptr = ix["t_indptr"]
            df = np.diff(t_indptr)
            freq = (df > 0) & (32 * df >= N)
            tb_row = np.full(V, -1, np.int64)
            tb_row[freq] = np.arange(int(freq.sum()))
            bits = np.zeros((max(int(freq.sum()), 1), (N + 63) // 64), np.int64)
            _b.term_doc_bitsets(t_indptr, ix["t_docs"], tb_row, bits)
        else:  # never read: the rescue scans the support
            tb_row = np.full(1, -1, np.int64)
            bits = np.zeros((1, 1), np.int64)
        ix["tb_row"] = tb_row
        ix["tb_bits"] = bits
        ix["h2f"] = _H2F if ix["c_w"].dtype == np.uint16 else np.zeros(0, np.float32)
        dl = ix["dl"]
        mean = float(np.asarray(dl).astype(np.float64).mean()) if dl.size else 0.0
        self._avgdl = mean if mean > 0 else 1.0
        self._make_vocab_table()

    def _make_vocab_table(self) -> None:
        """Build the query-analysis kernel's vocabulary table.

        The query-analysis kernel's vocabulary: the terms' code points (UTF-32) with
        offsets, and an open-addressing hash table over them (``kernels/text/tokenize.py``).
        ``None`` for an index built from counts (no vocabulary).
        """
        self._qtable = None
        voc = getattr(self, "vocabulary_", None)
        if voc is None:
            return
        V = len(voc)
        terms: list = [None] * V
        for t, i in voc.items():
            if not 0 <= i < V or terms[i] is not None:
                return  # not 0..V-1 (never from fit or a checked load): the regex path
            terms[i] = t
        lens = np.fromiter(map(len, terms), np.int64, V)
        voc_off = np.zeros(V + 1, np.int64)
        np.cumsum(lens, out=voc_off[1:])
        voc_cp = np.frombuffer("".join(terms).encode("utf-32-le", "surrogatepass"), np.uint32).copy()
        table = np.full(1 << max(4, (2 * V).bit_length()), -1, np.int32)
        _tok.build_vocab_table(voc_off, voc_cp, table)
        self._qtable = (table, voc_off, voc_cp)

    # ------------------------------------------------------------------ query
    doc_sep = " "  # the title/text separator of the published method

    @property
    def n_docs(self) -> int:
        """Number of indexed documents (the registry's common attribute)."""
        self._check_fitted()
        return self.n_docs_

    def _check_width(self, width: int, nq: int, name: str) -> None:
        """Refuse a padded output that cannot hold information.

        Refuse a padded output that cannot hold information and cannot be allocated: ranks
        beyond the corpus are padding, and ``k = 10**12`` failed with a 7 TiB MemoryError.
        """
        if width > self.n_docs_ and nq * width > _MAX_PADDED_SLOTS:
            raise ValueError(
                f"{name}={width} exceeds the corpus ({self.n_docs_} documents): the padded "
                f"({nq}, {width}) output would hold {nq * width:,} slots; use {name} <= {self.n_docs_}"
            )

    def _check_fitted(self):
        if not self._fitted:
            raise RuntimeError("SparseGeometricRetriever is not fitted; call fit() or load()")

    def transform_queries(self, query_texts, n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Query TF-IDF rows as CSR arrays ``(indptr int64, terms int32, vals float32)``.

        Raw term counts × idf, L2-normalised; terms sorted and unique per row; unknown
        tokens are dropped (a query without known terms is an empty row).  Tokens are
        those of ``TOKEN_PATTERN`` on ``str.lower()`` of each query.  The analysis runs in a
        parallel kernel (``n_threads``); the per-query regex path gives the same rows.
        """
        self._check_fitted()
        if self.vocabulary_ is None:
            raise ValueError("this index was built from a count matrix; query it with search_counts")
        if isinstance(query_texts, str) or not hasattr(query_texts, "__len__"):
            raise TypeError("query_texts must be a list of strings")
        out = self._analyse_batch(query_texts, n_threads)
        return out if out is not None else self._transform_each(query_texts)

    def _transform_each(self, query_texts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Analyse queries one by one with the regex (the reference path).

        The per-query regex path (reference, and the fallback that names a non-str item).
        """
        idf = self._idf32
        nq = len(query_texts)
        indptr, qt, vals = self._term_counts_each(query_texts)
        # raw tf × idf in float32, L2-normalised per row (sklearn TfidfTransformer order)
        v = np.asarray(vals, np.float32) * idf[qt]
        if v.size:
            rows = np.repeat(np.arange(nq), np.diff(indptr))
            nrm = np.sqrt(np.bincount(rows, weights=v.astype(np.float64) ** 2, minlength=nq))
            v = (v / nrm[rows].astype(np.float32)).astype(np.float32)
        return indptr, qt, v.astype(np.float32)

    def _term_counts_each(self, query_texts):
        """Per-query analysis: ``(indptr, sorted unique term ids int32, counts)``."""
        get = self.vocabulary_.get
        findall = script_tokenizer(TOKEN_PATTERN, True, getattr(self, "scripts_", False))
        nq = len(query_texts)
        indptr = np.zeros(nq + 1, np.int64)
        terms: list[int] = []
        vals: list[int] = []
        for i, q in enumerate(query_texts):
            if not isinstance(q, str):
                raise TypeError(f"query_texts[{i}] must be str, got {type(q).__name__}")
            cnt: dict[int, int] = {}
            for w in findall(q):
                t = get(w)
                if t is not None:
                    cnt[t] = cnt.get(t, 0) + 1
            ts = sorted(cnt)
            terms.extend(ts)
            vals.extend([cnt[t] for t in ts])
            indptr[i + 1] = len(terms)
        return indptr, np.asarray(terms, np.int32), np.asarray(vals, np.int64)

    def _analyse_batch(self, query_texts, n_threads=None):
        """Return the query TF-IDF rows from the analysis kernel, or ``None``.

        Query TF-IDF rows from the analysis kernel (``kernels/text/tokenize.py``), or ``None``
        (no vocabulary table, or a non-str item: the per-query path then names it).

        Each query is lowercased on its own (``str.lower`` of the whole batch when it is
        ASCII, where lowering has no context), the batch is joined with spaces and encoded
        as UTF-32 code points; tokens, lookup, counts and TF-IDF run in a ``prange`` kernel.
        Same rows, bit for bit, as the per-query regex path (tested).
        """
        if self._qtable is None:
            return None
        try:
            joined = " ".join(query_texts)
        except TypeError:
            return None
        nq = len(query_texts)
        if joined.isascii():
            low = joined.lower() + " "
            lens = np.fromiter(map(len, query_texts), np.int64, nq)
            wtab = _WTAB_ASCII
        elif getattr(self, "scripts_", False):  # folded as the documents were (jkofast.text.scripts)
            lows = [fold_script(q).lower() for q in query_texts]
            low = " ".join(lows) + " "
            lens = np.fromiter(map(len, lows), np.int64, nq)
            wtab = script_word_table()
        else:
            lows = [q.lower() for q in query_texts]
            low = " ".join(lows) + " "
            lens = np.fromiter(map(len, lows), np.int64, nq)
            wtab = _word_table_all()
        cp = np.frombuffer(low.encode("utf-32-le", "surrogatepass"), np.uint32)
        q_off = np.zeros(nq + 1, np.int64)
        np.cumsum(lens + 1, out=q_off[1:])
        table, voc_off, voc_cp = self._qtable
        # one thread below ~64 queries: the analysis takes ~1 µs per query, a parallel
        # launch more than that
        if nq < 64 or n_threads == 1:
            return _tok.analyse_rows(cp, q_off, wtab, table, voc_off, voc_cp, self._idf32)
        with numba_threads(n_threads) as nt:
            return _tok.analyse_batch(cp, q_off, wtab, table, voc_off, voc_cp, self._idf32, max(1, min(nq, nt)))

    def _params(self, pool_size: int, q_indptr=None) -> _q.SGRParams:
        """Query parameters of the batch kernel.

        Count parameters are capped where a larger value cannot change a result (a pool holds at most N
        documents, at most V terms are routed, diversity reaches at most the pool): the kernel sizes its
        workspace by them, so an uncapped ``n_eligible = 10**6`` asked for a 10**12-slot buffer inside the
        kernel (SystemError) and ``gate_mult * P`` could overflow int64.  Every field is a Python float / int /
        bool, so the kernel signature never changes with the values.
        """
        p = self.params
        N, V = self.n_docs_, self.n_terms_
        if not p["postings"] and (p["bm25_candidates"] > 0 or p["bm25_weight"] != 0 or p["bm25_rescue_weight"] != 0):
            raise ValueError(
                "the BM25 extension (bm25_candidates, bm25_weight, bm25_rescue_weight) reads the lexical "
                "postings; this index was built with postings=False"
            )
        P = min(int(pool_size), N)
        max_q = int(np.diff(q_indptr).max()) if q_indptr is not None and q_indptr.shape[0] > 1 else V
        budget = min(p["route_budget"], V)
        n_routed = min(V, max_q + budget)  # the routed branches of one query
        key = (P, n_routed)
        hit = self._pa_cache.get(key)
        if hit is not None:
            return hit
        prm = _q.SGRParams(
            alpha=float(p["alpha"]),
            budget=int(budget),
            gamma=float(p["gamma"]),
            lam_m=float(p["lam_m"]),
            avgdl=float(self._avgdl),
            bm25_candidates=int(min(p["bm25_candidates"], N)),
            bm25_k1=float(p["bm25_k1"]),
            bm25_b=float(p["bm25_b"]),
            w_bm25=float(p["bm25_weight"]),
            w_bm25_rescue=float(p["bm25_rescue_weight"]),
            tail_gate=bool(p["tail_gate"]),
            gate_min=int(min(p["gate_min"], N)),
            gate_mult=int(min(p["gate_mult"], N)),
            rescue_mode=_RESCUE_MODES[p["rescue_mode"] if p["postings"] else "scan"],
            b_rescue=float(p["b_rescue"]),
            b_final=float(p["b_final"]),
            coord=float(p["coord_exp"]),
            n_rare=int(min(p["n_rare"], V)),
            pool=int(P),
            eta=float(p["eta"]),
            w_tail=float(p["w_tail"]),
            w_lex=float(p["w_lex"]),
            w_sem=float(p["w_sem"]),
            w_rare=float(p["w_rare"]),
            n_elig=int(min(p["n_eligible"], n_routed)),
            top_h=int(min(p["top_h"], P)),
            n_div=int(min(p["n_diverse"], P)),
            lam_d=float(p["lam_d"]),
            rel_tau=float(p["tau"]),
            rel_beta=float(p["beta"]),
            rel_f16=bool(p["reliability_float16"]),
        )
        if len(self._pa_cache) > 64:
            self._pa_cache.clear()
        self._pa_cache[key] = prm
        return prm

    def _index(self) -> _q.SGRIndex:
        """Return the index arrays as the kernels' ``SGRIndex``.

        The index arrays as the kernels' ``SGRIndex`` (rebuilt after ``_make_semantic`` /
        ``_make_query_layout``, the only places that replace them).
        """
        if self._kix is None:
            ix = dict(self._ix)
            if "t_docs" not in ix:
                ix["t_docs"] = np.zeros(0, np.int32)
                ix["t_tf"] = np.zeros(0, np.float32)
            self._kix = _q.SGRIndex(*(ix[name] for name in _q.SGRIndex._fields))
            self._entry = {}
        return self._kix

    def _call(self, disp, args) -> None:
        """Call a query kernel.

        After the first call (compile or cache load) the compiled overload is called directly: the dispatcher's
        type check of the ``SGRIndex`` (29 arrays) costs ~6 µs per call in Python, about 7 % of a one-query
        search.  Safe while the argument types cannot change: the index bundle is the same object (``_entry`` is
        reset whenever it is rebuilt), the scratch, parameters and outputs are built here with fixed types, and
        the query arrays are checked below.
        """
        q_indptr, q_terms, q_vals = args[:3]
        fixed = (
            q_indptr.dtype == np.int64
            and q_terms.dtype == np.int32
            and q_vals.dtype == np.float32
            and q_indptr.flags.c_contiguous
            and q_terms.flags.c_contiguous
            and q_vals.flags.c_contiguous
            and q_indptr.flags.writeable
            and q_terms.flags.writeable
            and q_vals.flags.writeable
        )
        ep = self._entry.get(disp) if fixed else None
        if ep is not None:
            ep(*args)
            return
        disp(*args)
        if fixed:
            cres = disp.overloads.get(tuple(disp.typeof_pyval(a) for a in args))
            if cres is not None:
                self._entry[disp] = cres.entry_point

    def _run(self, q_indptr, q_terms, q_vals, pool_size, n_threads, n_out=None):
        """Run the batch kernel; outputs hold the first ``n_out`` (default P) ranks."""
        nq = q_indptr.shape[0] - 1
        P = pool_size
        n_out = P if n_out is None else n_out
        prm = self._params(P, q_indptr)
        out = (
            np.full((nq, n_out), -1, np.int64),
            np.full((nq, len(COMPONENTS), n_out), np.nan, np.float64),
            np.zeros(nq, np.int64),
            np.zeros((nq, 3), np.int64),
            np.zeros(nq, np.int32),
        )
        n_chunks = max(1, min(nq, resolve_threads(n_threads)))
        with self._lock:
            sc = self._get_scratch(n_chunks)
            gen_base = self._gen
            self._gen += nq
            args = (q_indptr, q_terms, q_vals, self._index(), prm, sc, n_chunks, gen_base, *out)
            if n_chunks == 1 and nq < _SERIAL_BELOW:
                # a few queries on one chunk: the same code on the calling thread, no parallel
                # launch and no thread-mask change (together ~10 µs per call)
                self._call(_q.sgr_query_serial, args)
            else:
                # (one chunk included: the chunk body compiled inside the parallel kernel runs
                # ~10 % faster per query than the serial twin, which pays off above a few queries)
                with numba_threads(n_threads):
                    self._call(_q.sgr_query_batch, args)
        return out

    def _get_scratch(self, n_chunks: int) -> _q.SGRScratch:
        """Per-chunk query scratch, allocated once and reused across calls (SPEC B.12: no dense per-query zeroing).

        Stamps start at -1; marks must stay all zero.
        """
        sc = getattr(self, "_scratch", None)
        if sc is None or sc.vi.shape[0] < n_chunks:
            import numba

            m = max(n_chunks, int(numba.config.NUMBA_NUM_THREADS))
            sc = _new_scratch(m, self.n_terms_, self.n_docs_, self.params["n_memberships"])
            self._scratch = sc
            self._gen = 0
        return sc

    def search(self, query_texts, k: int = 10, n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents per query (text in, ranked corpus rows out).

        Parameters
        ----------
        query_texts : list of str
        k : int
            Results per query; at most ``pool_size`` are non-padding.
        n_threads : int, optional
            Numba threads (prange over query chunks); results do not depend on it.

        Returns
        -------
        indices : int64 ndarray (nq, k)
            Corpus row positions in rank order, padded with -1 (empty query, no routed
            document, or fewer than k in the pool).
        scores : float32 ndarray (nq, k)
            The relevance (SPEC B.9) of each returned document, padded with -inf, capped
            to be strictly decreasing in rank: ranks 2-10 follow the diversity order, and
            the cap keeps that order for tools that re-sort by score.  The raw relevance
            is in :meth:`pool`.
        """
        k = check_int(k, "k", min_value=1)
        resolve_threads(n_threads)
        qi, qt, qv = self.transform_queries(query_texts, n_threads)
        self._check_width(k, len(query_texts), "k")
        return self._search_arrays(qi, qt, qv, len(query_texts), k, n_threads)

    def _search_arrays(self, qi, qt, qv, nq, k, n_threads):
        P = self.params["pool_size"]
        kk = min(k, P)
        # only the first k ranks leave the kernel (diversity reorders ranks 2..10 only)
        out_doc, out_comp, _, _, _ = self._run(qi, qt, qv, P, n_threads, n_out=kk)
        idx = np.full((nq, k), -1, np.int64)
        sc = np.full((nq, k), -np.inf, np.float32)
        idx[:, :kk] = out_doc
        # make scores non-increasing in rank so tools that re-sort by score (trec_eval,
        # pytrec_eval) keep the diversified order: cap each at just below its predecessor
        _q.cap_scores_desc(out_doc, out_comp, sc)
        return idx, sc

    def pool(self, query_texts, P: int | None = None, n_threads: int | None = None) -> SGRPool:
        """Top-``P`` pool per query with its component scores (candidate generator / energy).

        Returns an :class:`SGRPool`; rows are in final rank order (diversity on ranks 2-10).
        """
        P = self.params["pool_size"] if P is None else check_int(P, "P", min_value=1)
        resolve_threads(n_threads)
        qi, qt, qv = self.transform_queries(query_texts, n_threads)
        self._check_width(P, len(query_texts), "P")
        out_doc, out_comp, out_n, info, st = self._run(qi, qt, qv, P, n_threads)
        comps = {name: out_comp[:, c, :] for c, name in enumerate(COMPONENTS)}
        return SGRPool(
            doc=out_doc, n=out_n, n_routed_docs=info[:, 0].copy(), n_routed_terms=info[:, 1].copy(), status=st, **comps
        )

    def ppmi_graph(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the PPMI term graph A of the index (SPEC B.5) as CSR arrays.

        Returns
        -------
        indptr, indices, data : numpy.ndarray
            The index's own arrays (read-only views: int64 row pointers over the V terms,
            int32 neighbour term ids, float32 weights).

        Raises
        ------
        RuntimeError
            The retriever is not fitted.
        """
        self._check_fitted()
        out = tuple(self._ix[k].view() for k in ("a_indptr", "a_idx", "a_val"))
        for a in out:
            a.flags.writeable = False
        return out

    # ------------------------------------------------------------------ storage
    def index_nbytes(self, query_path_only: bool = True, breakdown: bool = False) -> int | dict:
        """Return the bytes of the index arrays, in total or per structure.

        Bytes of the index arrays (``query_path_only`` excludes the PPMI graph A, which only
        the build and :meth:`ppmi_graph` read; its semantic lists are counted), plus the
        query-analysis vocabulary table (hash slots, term code points and offsets; derived at
        fit and load, not saved).  The Python ``vocabulary_`` dict and ``ids_`` are not counted.

        Parameters
        ----------
        query_path_only : bool, default True
        breakdown : bool, default False
            Return a dict ``structure -> bytes`` (``memberships``, ``codes``, ``support``,
            ``lengths``, ``idf``, ``centres``, ``reliability``, ``graph_g``, ``semantic``,
            ``postings``, ``bitsets``, ``vocab_table``, ``graph_a`` unless
            ``query_path_only``) with a ``total`` entry.
        """
        self._check_fitted()
        groups = {
            "memberships": ("b_indptr", "mem_doc", "mem_m"),
            "codes": ("code_term", "code_sign"),
            "support": ("s_indptr", "s_idx"),
            "lengths": ("dl",),
            "idf": ("idf", "bm25_idf"),
            "centres": ("c_indptr", "c_terms", "c_vals", "c_norm", "c_w"),
            "reliability": ("r_indptr", "r_terms", "r_w", "r_nj", "r_scale", "gvar", "h2f"),
            "graph_g": ("g_indptr", "g_idx", "g_val"),
            "semantic": ("sem_indptr", "sem_idx", "sem_val"),
            "postings": ("t_indptr", "t_docs", "t_tf"),
            "bitsets": ("tb_row", "tb_bits"),
        }
        if not query_path_only:
            groups["graph_a"] = ("a_indptr", "a_idx", "a_val")
        ix = self._ix
        out = {g: int(sum(ix[k].nbytes for k in names if k in ix)) for g, names in groups.items()}
        out["vocab_table"] = int(sum(a.nbytes for a in self._qtable)) if self._qtable is not None else 0
        total = int(sum(out.values()))
        if breakdown:
            out["total"] = total
            return out
        return total

    def save(self, path: str) -> None:
        """Write the index to folder ``path`` (format 2: one ``.npy`` per array + ``meta.json``).

        Each array is written under a temporary name and renamed; ``meta.json`` (format
        version, parameters, vocabulary, the list of arrays with dtypes and shapes) is
        written last, so a folder whose writing was interrupted (a full disk, a kill) has
        no ``meta.json`` and :meth:`load` refuses it.  An existing ``meta.json`` is removed
        before anything else is written.  Document ids go to ``ids_utf8.npy`` /
        ``ids_off.npy`` (UTF-8 bytes and offsets).  Arrays already memory-mapped from this
        folder (``assemble(out=path)``) are not rewritten.
        """
        self._check_fitted()
        path = os.fspath(path)
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(f"path {path!r} exists and is not a directory")
        os.makedirs(path, exist_ok=True)
        mpath = os.path.join(path, "meta.json")
        if os.path.exists(mpath):
            os.remove(mpath)
        names = list(_INDEX_ARRAYS) + (list(_POSTING_ARRAYS) if self.params["postings"] else [])
        listing = {}
        for k in names:
            a = self._ix[k]
            listing[k] = [a.dtype.str, list(a.shape)]
            target = os.path.join(path, k + ".npy")
            base = a
            while base is not None and not isinstance(base, np.memmap):
                base = base.base if isinstance(base, np.ndarray) else None
            if isinstance(base, np.memmap) and base.filename and os.path.samefile(base.filename, target):
                if base.mode != "c":
                    base.flush()
                continue
            _layout._atomic_save(target, a)
        ids = None
        if self.ids_ is not None:
            enc = [x.encode("utf-8") for x in self.ids_]
            off = np.zeros(len(enc) + 1, np.int64)
            np.cumsum([len(b) for b in enc], out=off[1:])
            _layout._atomic_save(os.path.join(path, "ids_utf8.npy"), np.frombuffer(b"".join(enc), np.uint8))
            _layout._atomic_save(os.path.join(path, "ids_off.npy"), off)
            ids = "ids_utf8.npy"
        old = os.path.join(path, "index.npz")  # a format-1 index rewritten in place
        if os.path.exists(old):
            os.remove(old)
        meta = {
            "format": _layout.FORMAT,
            "params": self.params,
            "terms": self.terms_,
            "ids": ids,
            "n_docs": self.n_docs_,
            "n_calibration": int(getattr(self, "n_calibration_", self.n_docs_)),
            "scripts": bool(getattr(self, "scripts_", False)),
            "arrays": listing,
        }
        _layout._atomic_json(mpath, meta)

    @classmethod
    def load(cls, path: str, mmap: bool = False, verify: bool = False) -> SparseGeometricRetriever:
        """Read an index written by :meth:`save` (format 2, or format 1: ``index.npz``).

        Parameters
        ----------
        path : str
            The index folder.
        mmap : bool, default False
            Memory-map the arrays (``numpy.load(mmap_mode="c")``: pages are read when a
            query touches them; nothing is written back).  Opening then costs the O(V)
            tables (semantic lists, vocabulary) plus one pass over ``dl``; the big arrays
            get structural checks only (dtype, shape, pointer ends), unless ``verify``.
            Format 1 is always read into memory.
        verify : bool, default False
            With ``mmap``, also run the full check over every array (ids in range, pointers
            monotone, values finite), as an in-memory load always does.

        Raises
        ------
        ValueError
            ``path`` is not such an index (no ``meta.json``: e.g. a ``jkofast.sparse.index``
            folder, or an index whose writing did not finish), a format this version does not
            read (the message names it), or files that are corrupted or inconsistent
            (unreadable JSON/npy, missing arrays, ids out of range, lengths that disagree): the
            query kernels trust these arrays, so a bad one is refused here, naming the file
            and the array.
        """
        path = os.fspath(path)
        mpath = os.path.join(path, "meta.json")
        meta = read_json_file(
            mpath,
            missing=f"{path}: not a SparseGeometricRetriever index (meta.json missing: not an index, "
            "or its writing did not finish)",
            invalid=f"{mpath}: not a readable index description",
        )
        fmt = _check_meta(meta, mpath)
        try:
            self = cls(**meta["params"])
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{mpath}: params: {exc}") from None
        if fmt == 1:
            self.params["postings"] = True
            ix = _load_format1(path, meta, self.params)
            ids = meta["ids"]
        else:
            ix = _load_arrays(path, meta, self.params, mmap)
            _check_structure(ix, meta, self.params, path)
            if verify or not mmap:
                _check_full(ix, self.params, path)
            ids = _load_ids(path, meta, mmap, verify or not mmap)
        terms = meta["terms"]
        self.terms_ = None if terms is None else list(terms)
        self.vocabulary_ = None if terms is None else {t: i for i, t in enumerate(self.terms_)}
        self.ids_ = ids
        self.scripts_ = meta.get("scripts", False) is True
        self._set_index(ix, int(meta.get("n_calibration", meta["n_docs"])))
        return self


class _StrSeq(Sequence):
    """Read-only sequence of the strings stored as UTF-8 bytes + offsets (decoded on access)."""

    def __init__(self, data: np.ndarray, off: np.ndarray):
        self._data, self._off = data, off

    def __len__(self) -> int:
        return int(self._off.shape[0] - 1)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("index out of range")
        return bytes(self._data[self._off[i] : self._off[i + 1]]).decode("utf-8")

    def __eq__(self, other):
        return isinstance(other, Sequence) and len(other) == len(self) and all(a == b for a, b in zip(self, other))

    __hash__ = None


def _load_ids(path: str, meta: dict, lazy: bool, check: bool):
    if meta["ids"] is None:
        return None
    try:
        data = np.load(os.path.join(path, "ids_utf8.npy"), mmap_mode="r" if lazy else None, allow_pickle=False)
        off = np.load(os.path.join(path, "ids_off.npy"), allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: ids unreadable ({type(exc).__name__}: {exc})") from None
    n = int(meta["n_docs"])
    if (
        data.dtype != np.uint8
        or off.dtype != np.int64
        or off.shape != (n + 1,)
        or off[0] != 0
        or off[-1] != data.shape[0]
        or np.any(np.diff(off) < 0)
    ):
        raise ValueError(f"{path}: ids_off.npy / ids_utf8.npy do not describe {n} ids")
    seq = _StrSeq(data, off)
    if lazy and not check:
        return seq
    try:
        ids = list(seq)
    except UnicodeDecodeError:
        raise ValueError(f"{path}: ids_utf8.npy is not UTF-8") from None
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: ids holds duplicates")
    return ids


def _load_arrays(path: str, meta: dict, params: dict, mmap: bool) -> dict:
    listing = meta.get("arrays")
    if not isinstance(listing, dict):
        raise ValueError(f"{os.path.join(path, 'meta.json')}: arrays must be an object")
    need = list(_INDEX_ARRAYS) + (list(_POSTING_ARRAYS) if params["postings"] else [])
    missing = [k for k in need if k not in listing]
    if missing:
        raise ValueError(f"{os.path.join(path, 'meta.json')}: missing array(s) {missing}")
    ix = {}
    for k in need:
        f = os.path.join(path, k + ".npy")
        if not os.path.isfile(f):
            raise ValueError(f"{path}: {k}.npy missing")
        try:
            a = np.load(f, mmap_mode="c" if mmap else None, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{f}: unreadable ({type(exc).__name__}: {exc})") from None
        try:
            want = (np.dtype(listing[k][0]), tuple(int(x) for x in listing[k][1]))
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"{os.path.join(path, 'meta.json')}: arrays.{k} must be [dtype, shape]") from None
        if (a.dtype, a.shape) != want:
            raise ValueError(f"{f}: holds {a.dtype} {a.shape}, meta.json lists {want[0]} {want[1]}")
        ix[k] = np.asarray(a) if mmap else a  # a plain ndarray view on the map (one Numba type)
    return ix


def _check_meta(meta, mpath: str) -> int:
    """``meta.json`` of :meth:`SparseGeometricRetriever.save`; returns the format (1 or 2)."""
    if not isinstance(meta, dict):
        raise ValueError(f"{mpath}: expected a JSON object, got {type(meta).__name__}")
    fmt = meta.get("format")
    if fmt not in (1, 2):
        raise ValueError(
            f"{mpath}: index format {fmt!r} is not supported (this version of jkofast reads formats 1 and 2; "
            "an index written by a newer jkofast needs that version)"
        )
    missing = [k for k in ("params", "terms", "ids", "n_docs") if k not in meta]
    if missing:
        raise ValueError(f"{mpath}: missing key(s) {missing}")
    if not isinstance(meta["params"], dict):
        raise ValueError(f"{mpath}: params must be an object")
    n = meta["n_docs"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{mpath}: n_docs must be a positive integer, got {n!r}")
    if fmt == 2 and meta["ids"] not in (None, "ids_utf8.npy"):
        raise ValueError(f"{mpath}: ids must be null or 'ids_utf8.npy'")
    _check_meta_lists(meta if fmt == 1 else {**meta, "ids": None}, mpath)
    return fmt


def _check_meta_lists(meta, where: str) -> None:
    n = meta["n_docs"]
    for key, size in (("terms", None), ("ids", n)):
        v = meta[key]
        if v is None:
            continue
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ValueError(f"{where}: {key} must be a list of strings or null")
        if size is not None and len(v) != size:
            raise ValueError(f"{where}: {key} has {len(v)} entries for n_docs = {size}")
        if len(set(v)) != len(v):
            raise ValueError(f"{where}: {key} holds duplicates")


def _bad(zpath, name, what):
    return ValueError(f"{zpath}: {name} {what}")


def _ids_in(ix, k, hi, zpath, arr=None):
    a = ix[k] if arr is None else arr
    if a.dtype.kind == "f":
        raise _bad(zpath, k, f"must hold integer ids, got dtype {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) >= hi):
        raise _bad(zpath, k, f"holds ids outside [0, {hi})")


_DTYPES = {
    "idf": "f8",
    "bm25_idf": "f8",
    "b_indptr": "i8",
    "mem_doc": "i4",
    "mem_m": "f4",
    "code_sign": "u2",
    "c_indptr": "i8",
    "c_vals": "f4",
    "c_norm": "f8",
    "r_indptr": "i8",
    "r_nj": "f8",
    "r_scale": "f8",
    "gvar": "f8",
    "a_indptr": "i8",
    "a_idx": "i4",
    "a_val": "f4",
    "g_indptr": "i8",
    "g_val": "f4",
    "t_indptr": "i8",
    "t_docs": "i4",
    "t_tf": "f4",
}


def _check_structure(ix: dict, meta: dict, params: dict, where: str) -> None:
    """Cheap checks (O(V) and array headers): dtypes, shapes, pointer ends, the V-sized tables in full.

    The N- and M-sized arrays (memberships, codes, support, postings) get dtype and shape
    checks and their pointers' first and last entries; :func:`_check_full` reads them.
    """
    V = ix["idf"].shape[0] if ix["idf"].ndim == 1 else -1
    N = int(meta["n_docs"])
    if V < 1:
        raise _bad(where, "idf", f"must be a non-empty 1-D array, got shape {ix['idf'].shape}")
    tdt = _layout.term_dtype(V)
    for k, dt in _DTYPES.items():
        if k in ix and ix[k].dtype != np.dtype(dt):
            raise _bad(where, k, f"has dtype {ix[k].dtype}, expected {np.dtype(dt)}")
    for k in ("s_idx", "code_term", "c_terms", "r_terms", "g_idx"):
        if ix[k].dtype != tdt:
            raise _bad(where, k, f"has dtype {ix[k].dtype}, expected {tdt} for V = {V}")
    if ix["s_indptr"].dtype != _layout.support_pointer_dtype(int(ix["s_idx"].shape[0])):
        raise _bad(where, "s_indptr", f"has dtype {ix['s_indptr'].dtype}, expected uint32 (int64 from 2**32 entries)")
    if ix["dl"].dtype not in (np.uint16, np.float64) or ix["dl"].shape != (N,):
        raise _bad(where, "dl", f"must be uint16 or float64 of shape ({N},), got {ix['dl'].dtype} {ix['dl'].shape}")
    if meta["terms"] is not None and len(meta["terms"]) != V:
        raise ValueError(f"{where}: {len(meta['terms'])} terms for {V} idf entries")
    for k in ("bm25_idf", "c_norm", "r_nj", "r_scale", "gvar"):
        if ix[k].shape != (V,):
            raise _bad(where, k, f"has shape {ix[k].shape}, expected ({V},)")
    _check_pointers(ix, params, V, N, where)


def _check_pointers(ix: dict, params: dict, V: int, N: int, where: str) -> None:
    """Membership and code shapes, CSR pointer ends and aligned values, and the O(V) tables in full."""
    M = ix["mem_doc"].shape[0] if ix["mem_doc"].ndim == 1 else -1
    S = params["code_size"]
    for k, shape in (("mem_m", (M,)), ("code_term", (M, S)), ("code_sign", (M, (S + 15) // 16))):
        if ix[k].shape != shape:
            raise _bad(where, k, f"has shape {ix[k].shape}, expected {shape}")
    ptrs = [
        ("s_indptr", N, "s_idx", ()),
        ("b_indptr", V, "mem_doc", ()),
        ("c_indptr", V, "c_terms", ("c_vals",)),
        ("r_indptr", V, "r_terms", ("r_w",)),
        ("a_indptr", V, "a_idx", ("a_val",)),
        ("g_indptr", V, "g_idx", ("g_val",)),
    ]
    if params["postings"]:
        ptrs.append(("t_indptr", V, "t_docs", ("t_tf",)))
    elif ix["t_indptr"].shape != (V + 1,) or ix["t_indptr"][0] != 0 or ix["t_indptr"][-1] != ix["s_idx"].shape[0]:
        raise _bad(where, "t_indptr", f"must be a ({V + 1},) pointer from 0 to len(s_idx)")
    want_cw = np.uint16 if params["reliability_float16"] else np.float32
    if ix["c_w"].dtype != want_cw or ix["c_w"].shape != ix["c_terms"].shape:
        raise _bad(where, "c_w", f"must be {np.dtype(want_cw)} of shape {ix['c_terms'].shape} like c_terms")
    if ix["r_w"].dtype != want_cw:
        raise _bad(where, "r_w", f"must be {np.dtype(want_cw)}")
    for ptr, rows, idx, vals in ptrs:
        pa = ix[ptr]
        n_ent = ix[idx].shape[0] if ix[idx].ndim == 1 else -1
        if pa.shape != (rows + 1,) or pa[0] != 0 or pa[-1] != n_ent:
            raise _bad(where, ptr, f"must be an integer ({rows + 1},) pointer from 0 to len({idx}) = {n_ent}")
        for v in vals:
            if ix[v].shape != (n_ent,):
                raise _bad(where, v, f"has shape {ix[v].shape}, expected ({n_ent},) like {idx}")
    _check_v_tables(ix, V, where)


def _check_v_tables(ix: dict, V: int, where: str) -> None:
    """Check the O(V) tables in full (cheap; the kernels index with them unchecked)."""
    for ptr in ("b_indptr", "c_indptr", "r_indptr", "a_indptr", "g_indptr", "t_indptr"):
        if np.any(np.diff(ix[ptr]) < 0):
            raise _bad(where, ptr, "must be non-decreasing")
    for k, hi in (("c_terms", V), ("r_terms", V), ("a_idx", V), ("g_idx", V)):
        _ids_in(ix, k, hi, where)
    for k in ("idf", "bm25_idf", "c_vals", "c_norm", "r_w", "r_nj", "r_scale", "gvar", "a_val", "g_val"):
        if ix[k].size and not np.isfinite(ix[k]).all():
            raise _bad(where, k, "contains NaN or inf")


def _check_full(ix: dict, params: dict, where: str) -> None:
    """Read every N- and M-sized array: pointers monotone, ids in range, values finite."""
    V = ix["idf"].shape[0]
    N = ix["dl"].shape[0]
    s = ix["s_indptr"]
    if np.any(s[1:] < s[:-1]):  # (not np.diff: it wraps around on uint32)
        raise _bad(where, "s_indptr", "must be non-decreasing")
    _ids_in(ix, "s_idx", V, where)
    _ids_in(ix, "mem_doc", N, where)
    if params["postings"]:
        _ids_in(ix, "t_docs", N, where)
    for k in ("dl", "mem_m", "t_tf"):
        if k in ix and ix[k].dtype.kind == "f" and ix[k].size and not np.isfinite(ix[k]).all():
            raise _bad(where, k, "contains NaN or inf")
    if ix["dl"].size and ix["dl"].min() < 0:
        raise _bad(where, "dl", "holds negative lengths")
    ct = ix["code_term"]
    valid = ct < V
    # a code is its ascending term ids then sentinels only
    if ct.shape[1] > 1 and np.any(valid[:, 1:] & ~valid[:, :-1]):
        raise _bad(where, "code_term", "holds a term id after the sentinel")
    if np.any(ct[valid] >= V):
        raise _bad(where, "code_term", f"holds ids outside [0, {V})")
    per_doc = np.bincount(ix["mem_doc"].astype(np.int64), minlength=N)
    if per_doc.size and per_doc.max() > params["n_memberships"]:
        raise _bad(
            where,
            "mem_doc",
            f"gives a document {int(per_doc.max())} memberships, but params n_memberships = {params['n_memberships']}",
        )


def _load_format1(path: str, meta: dict, params: dict) -> dict:
    """Read a format-1 index (``index.npz``, the wide layout) and convert it to the compact layout."""
    zpath = os.path.join(path, "index.npz")
    if not os.path.isfile(zpath):
        raise ValueError(f"{path}: index.npz missing")
    try:
        with np.load(zpath, allow_pickle=False) as z:
            old = {k: z[k] for k in z.files}
    except Exception as exc:  # BadZipFile, truncated member, pickled object arrays
        raise ValueError(f"{zpath}: unreadable ({type(exc).__name__}: {exc})") from None
    _check_index_arrays_v1(old, meta, params, zpath)
    return _v1_to_compact(old, params)


def _v1_to_compact(old: dict, params: dict) -> dict:
    """Convert the wide per-slot layout of format 1 to the compact layout (the same scores, bit for bit).

    Every (branch, term) entry of the old codes is stored with its weight (format 1 kept
    one weight per code slot), so no weight is recomputed; ``r_nj`` = 0 marks that.
    """
    V = old["idf"].shape[0]
    tdt = _layout.term_dtype(V)
    order = old["b_mem"].astype(np.int64)
    cnt = old["code_count"].astype(np.int64)[order]
    M, S = old["code_term"].shape
    valid = np.arange(S)[None, :] < cnt[:, None]
    ct = old["code_term"][order].astype(np.int64)
    code_term = np.where(valid, ct, np.iinfo(tdt).max).astype(tdt)
    pos = old["code_sign"][order] > 0
    sign = np.zeros((M, (S + 15) // 16), np.uint16)
    for r in range(S):
        sign[:, r >> 4] |= np.where(valid[:, r] & pos[:, r], np.uint16(1 << (r & 15)), np.uint16(0))
    branch = old["mem_branch"][order].astype(np.int64)
    key = (np.repeat(branch, S).reshape(M, S) * V + ct)[valid]
    w = old["code_w"][order][valid].astype(np.float32)
    uk, first = np.unique(key, return_index=True)
    r_indptr = np.zeros(V + 1, np.int64)
    np.cumsum(np.bincount(uk // V, minlength=V), out=r_indptr[1:])
    dl = np.asarray(old["dl"], np.float64)
    c_terms = old["c_terms"].astype(tdt)
    rel = (r_indptr, (uk % V).astype(tdt), w[first], np.zeros(V), np.ones(V), np.zeros(V))
    c_w = _layout.centre_weight_array(old["c_indptr"].astype(np.int64), c_terms, rel, params)
    return {
        "idf": old["idf"].astype(np.float64),
        "bm25_idf": old["bm25_idf"].astype(np.float64),
        "dl": _layout._narrow_dl(dl),
        "s_indptr": old["s_indptr"].astype(_layout.support_pointer_dtype(int(old["s_idx"].shape[0]))),
        "s_idx": old["s_idx"].astype(tdt),
        "b_indptr": old["b_indptr"].astype(np.int64),
        "mem_doc": old["mem_doc"][order].astype(np.int32),
        "mem_m": old["mem_m"][order].astype(np.float32),
        "code_term": code_term,
        "code_sign": sign,
        "c_indptr": old["c_indptr"].astype(np.int64),
        "c_terms": c_terms,
        "c_vals": old["c_vals"].astype(np.float32),
        "c_norm": old["c_norm"].astype(np.float64),
        "c_w": c_w,
        "r_indptr": r_indptr,
        "r_terms": rel[1],
        "r_w": _layout.half_bits(rel[2]) if params["reliability_float16"] else rel[2],
        "r_nj": np.zeros(V, np.float64),
        "r_scale": np.ones(V, np.float64),
        "gvar": np.zeros(V, np.float64),
        "a_indptr": old["a_indptr"].astype(np.int64),
        "a_idx": old["a_idx"].astype(np.int32),
        "a_val": old["a_val"].astype(np.float32),
        "g_indptr": old["g_indptr"].astype(np.int64),
        "g_idx": old["g_idx"].astype(tdt),
        "g_val": old["g_val"].astype(np.float32),
        "t_indptr": old["t_indptr"].astype(np.int64),
        "t_docs": old["t_docs"].astype(np.int32),
        "t_tf": old["t_tf"].astype(np.float32),
    }


# format 1 (index.npz, the wide per-slot layout): read, checked, converted
_INDEX_ARRAYS_V1 = (
    "idf",
    "dl",
    "s_indptr",
    "s_idx",
    "mem_doc",
    "mem_branch",
    "mem_m",
    "b_indptr",
    "b_mem",
    "c_indptr",
    "c_terms",
    "c_vals",
    "c_norm",
    "code_term",
    "code_sign",
    "code_cval",
    "code_w",
    "code_count",
    "a_indptr",
    "a_idx",
    "a_val",
    "g_indptr",
    "g_idx",
    "g_val",
    "t_indptr",
    "t_docs",
    "t_tf",
    "bm25_idf",
)


def _check_index_arrays_v1(ix: dict, meta: dict, params: dict, zpath: str) -> None:
    """Check every array of a format-1 index (present, numeric, finite, consistent, ids in range)."""
    need = list(_INDEX_ARRAYS_V1)
    missing = [k for k in need if k not in ix]
    if missing:
        raise ValueError(f"{zpath}: missing array(s) {missing}")
    for k in need:
        a = ix[k]
        if a.dtype.kind not in "iuf":
            raise _bad(zpath, k, f"has dtype {a.dtype}, expected a numeric array")
        if a.dtype.kind == "f" and a.size and not np.isfinite(a).all():
            raise _bad(zpath, k, "contains NaN or inf")
    V, N, M, S = _check_shapes_v1(ix, meta, params, zpath)
    _check_csr_tables_v1(ix, V, N, M, zpath)
    _check_memberships_v1(ix, params, V, N, M, S, zpath)


def _check_shapes_v1(ix, meta, params, zpath):
    """Return ``(V, N, M, S)`` after checking the per-term, per-document and per-membership shapes."""
    V = ix["idf"].shape[0] if ix["idf"].ndim == 1 else -1
    N = int(meta["n_docs"])
    if V < 1:
        raise _bad(zpath, "idf", f"must be a non-empty 1-D array, got shape {ix['idf'].shape}")
    if meta["terms"] is not None and len(meta["terms"]) != V:
        raise ValueError(f"{zpath}: meta.json lists {len(meta['terms'])} terms for {V} idf entries")
    for k, n in (("dl", N), ("bm25_idf", V)):
        if ix[k].shape != (n,):
            raise _bad(zpath, k, f"has shape {ix[k].shape}, expected ({n},)")
    if ix["dl"].min() < 0:
        raise _bad(zpath, "dl", "holds negative lengths")
    M = ix["mem_doc"].shape[0] if ix["mem_doc"].ndim == 1 else -1
    S = ix["code_term"].shape[1] if ix["code_term"].ndim == 2 else -1
    for k in ("mem_doc", "mem_branch", "mem_m", "b_mem", "code_count"):
        if ix[k].shape != (M,):
            raise _bad(zpath, k, f"has shape {ix[k].shape}, expected ({M},) (one entry per membership)")
    if S != params["code_size"]:
        raise _bad(zpath, "code_term", f"has {S} columns, but params code_size = {params['code_size']}")
    for k in ("code_term", "code_sign", "code_cval", "code_w"):
        if ix[k].shape != (M, S):
            raise _bad(zpath, k, f"has shape {ix[k].shape}, expected ({M}, {S})")
    return V, N, M, S


def _check_csr_tables_v1(ix, V, N, M, zpath):
    """Check the CSR tables: (pointer, n_rows, ids, id range, aligned values)."""
    for ptr, rows, idx, hi, vals in (
        ("s_indptr", N, "s_idx", V, ()),
        ("c_indptr", V, "c_terms", V, ("c_vals",)),
        ("a_indptr", V, "a_idx", V, ("a_val",)),
        ("g_indptr", V, "g_idx", V, ("g_val",)),
        ("t_indptr", V, "t_docs", N, ("t_tf",)),
        ("b_indptr", V, "b_mem", M, ()),
    ):
        pa = ix[ptr]
        n_ent = ix[idx].shape[0] if ix[idx].ndim == 1 else -1
        if pa.dtype.kind == "f" or pa.shape != (rows + 1,) or pa[0] != 0 or pa[-1] != n_ent:
            raise _bad(zpath, ptr, f"must be an integer ({rows + 1},) pointer from 0 to len({idx}) = {n_ent}")
        if np.any(np.diff(pa) < 0):
            raise _bad(zpath, ptr, "must be non-decreasing")
        _ids_in(ix, idx, hi, zpath)
        for v in vals:
            if ix[v].shape != (n_ent,):
                raise _bad(zpath, v, f"has shape {ix[v].shape}, expected ({n_ent},) like {idx}")
    if ix["c_norm"].shape != (V,):
        raise _bad(zpath, "c_norm", f"has shape {ix['c_norm'].shape}, expected ({V},)")


def _check_memberships_v1(ix, params, V, N, M, S, zpath):
    """Check the membership ids, code counts and code term ids, and the branch permutation."""
    _ids_in(ix, "mem_doc", N, zpath)
    _ids_in(ix, "mem_branch", V, zpath)
    cc = ix["code_count"]
    if cc.dtype.kind == "f" or (cc.size and (cc.min() < 0 or cc.max() > S)):
        raise _bad(zpath, "code_count", f"must hold integer counts in [0, {S}]")
    _ids_in(ix, "code_term", V, zpath, ix["code_term"][np.arange(S)[None, :] < cc[:, None]])
    if not np.array_equal(np.sort(ix["b_mem"]), np.arange(M)):
        raise _bad(zpath, "b_mem", "must be a permutation of the memberships")
    per_doc = np.bincount(ix["mem_doc"].astype(np.int64), minlength=N)
    if per_doc.size and per_doc.max() > params["n_memberships"]:
        raise _bad(
            zpath,
            "mem_doc",
            f"gives a document {int(per_doc.max())} memberships, but params n_memberships = {params['n_memberships']}",
        )
    if np.any(ix["mem_branch"][ix["b_mem"]][1:] < ix["mem_branch"][ix["b_mem"]][:-1]):
        raise _bad(zpath, "b_mem", "must list the memberships branch by branch")


_SERIAL_BELOW = 16  # batches of fewer queries on one chunk run the serial twin (no parallel launch)
_RESCUE_MODES = {"auto": _q.RESCUE_AUTO, "scan": _q.RESCUE_SCAN, "postings": _q.RESCUE_POSTINGS}


def _new_scratch(n_slabs: int, n_terms: int, n_docs: int, n_memberships: int) -> _q.SGRScratch:
    """Allocate fresh query scratch of ``n_slabs`` chunk slabs.

    Fresh query scratch of ``n_slabs`` chunk slabs (layout: ``jkofast.kernels.sgr.query.SGRScratch``):
    stamps -1, everything else zero.
    """
    m, V, N, F = n_slabs, n_terms, n_docs, n_memberships
    return _q.SGRScratch(
        vi=np.full((m, 2, V), -1, np.int64),
        vf=np.zeros((m, 3, V)),
        mark=np.zeros((m, V), np.uint8),
        dp=np.full((m, N, 2), -1, np.int64),
        ni=np.full((m, 4, N), -1, np.int64),
        nf=np.zeros((m, 11, N)),
        dmr=np.zeros((m, N, F), np.int64),
        dme=np.zeros((m, N, F)),
        slot=np.zeros((m, V), np.uint16),
        bt=np.full((m, V, 3), -1.0),
    )


@register_warmup("sgr")
def _warmup() -> None:
    # what a batch search compiles (jkofast run's SGR row; the compile-ahead child of the main
    # job runs this entry): fit, and the parallel batch kernel -- _SERIAL_BELOW queries take it
    # on one core too
    r = SparseGeometricRetriever(
        pool_size=3, bm25_candidates=2, bm25_weight=0.5, bm25_rescue_weight=0.5, tail_gate=True, gate_min=1
    )
    r.fit(["alpha beta gamma", "beta gamma delta", "gamma delta alpha"])
    r.search(["alpha gamma", "zzz"] * (_SERIAL_BELOW // 2), k=2)
    r.transform_queries(["alpha gamma", "zzz"] * 32)  # the parallel analysis kernel (>= 64 queries)


@register_warmup("sgr.one_query")
def _warmup_one_query() -> None:
    # the serial twin: a few queries on one chunk (one-query search calls)
    SparseGeometricRetriever(pool_size=3).fit(["aa bb", "bb cc", "cc aa"]).search(["aa"], k=2)
