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

import functools
import os
import re

import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads, resolve_threads
from jkofast._validation import as_csr, check_bool, check_int
from jkofast.kernels.sgr import query as _q
from jkofast.kernels.text import tokenize as _tok
from jkofast.sgr import _persist, _tfidf
from jkofast.sgr import layout as _layout
from jkofast.sgr._engine import COMPONENTS, SERIAL_BELOW, QueryPath, SGRPool
from jkofast.sgr.config import BUILD_PARAMS, PRESETS, SGRConfig, default_params
from jkofast.sparse.report import NO_KNOWN_TERM, NO_ROUTED_DOC, OK, SearchReport
from jkofast.text.analyzer import Analyzer
from jkofast.text.patterns import SKLEARN as TOKEN_PATTERN
from jkofast.text.scripts import fold_script, script_tokenizer, script_word_table

__all__ = [
    "COMPONENTS",
    "PRESETS",
    "TOKEN_PATTERN",
    "SGRConfig",
    "SGRPool",
    "SparseGeometricRetriever",
    "default_params",
]

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


# a padded (nq, k) output wider than the corpus is refused beyond this many slots (1 GiB of int64)
_MAX_PADDED_SLOTS = 2**27
# batches of this many queries and more are analysed by the parallel analysis kernel
PARALLEL_ANALYSIS = 64


class SparseGeometricRetriever:
    """SparseGeometricRAG first-stage retriever (SPEC Part B).

    Parameters
    ----------
    config : SGRConfig, optional
        The parameters (default: ``SGRConfig()``, the published values of SPEC B.1); see
        :class:`jkofast.sgr.config.SGRConfig` for each one.
    **params
        Parameters by name (an :class:`SGRConfig` field each), applied over ``config``.

    Attributes
    ----------
    config : SGRConfig
        The parameters; ``params`` is the same as a dict.

    Examples
    --------
    >>> r = SparseGeometricRetriever(pool_size=10).fit(
    ...     ["solar panels convert sunlight", "wind turbines make power", "sunlight and wind"])
    >>> idx, scores = r.search(["sunlight power"], k=2)
    >>> idx.shape
    (1, 2)
    """

    def __init__(self, config: SGRConfig | None = None, **params):
        if config is None:
            config = SGRConfig.from_dict(params)
        elif not isinstance(config, SGRConfig):
            raise TypeError(f"config must be an SGRConfig, got {type(config).__name__}")
        elif params:
            config = config.replace(**params)
        self._query: QueryPath | None = None  # the query path of the index, made when one is adopted
        self.config = config
        self._fitted = False
        self._qtable = None

    @property
    def config(self) -> SGRConfig:
        """The parameters (:class:`SGRConfig`); setting them hands the query parameters to the query path."""
        return self._config

    @config.setter
    def config(self, config: SGRConfig) -> None:
        self._config = config
        if self._query is not None:
            self._query.set_config(config)

    # ------------------------------------------------------------------ params
    @property
    def params(self) -> dict:
        """The parameters as a fresh ``{name: value}`` dict (``config.to_dict()``)."""
        return self.config.to_dict()

    def set_params(self, **params) -> SparseGeometricRetriever:
        """Change query-path parameters without rebuilding (build parameters need fit)."""
        cfg = self.config
        bad = [k for k in params if k in BUILD_PARAMS and params[k] != getattr(cfg, k)]
        if bad and self._fitted:
            raise ValueError(f"parameter(s) {bad} change the index; call fit again")
        self.config = cfg.replace(**params)  # the query path keeps its semantic lists unless they change
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
        # TOKEN_PATTERN on lowercased text; non-ASCII text folded first (jkofast.text.scripts): ASCII
        # texts and every SciFact text give the same tokens as CountVectorizer(token_pattern=TOKEN_PATTERN)
        self.scripts_ = True
        try:
            indptr, indices, counts, dl, terms, order = _tfidf.count_matrix(
                texts, Analyzer(TOKEN_PATTERN), self.config.max_features
            )
        except ValueError as exc:  # empty vocabulary
            raise ValueError(f"texts: no token matches {TOKEN_PATTERN!r} in the corpus") from exc
        V = len(terms)
        data, idf = _tfidf.tfidf_f32(indptr, indices, counts, V, order, n_threads)
        X = sp.csr_matrix((data, indices, indptr), shape=(len(texts), V))
        C = sp.csr_matrix((counts, indices.copy(), indptr.copy()), shape=(len(texts), V))
        X.has_sorted_indices = C.has_sorted_indices = True
        self.vocabulary_ = {t: i for i, t in enumerate(terms)}
        self.terms_ = list(terms)
        self.ids_ = ids
        self._build(X, C, dl.astype(np.float64), idf, n_threads)
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
        import scipy.sparse as sp

        ip_, ix_, dt_, shape = as_csr(counts, "texts", dtype=np.float32)
        if dt_.size and (dt_.min() < 0):
            raise ValueError("texts: term counts must be non-negative")

        C = sp.csr_matrix((dt_, ix_, ip_), shape=shape)
        C.eliminate_zeros()
        if C.nnz == 0:
            raise ValueError("texts: the count matrix has no non-zero entry")
        self.ids_ = self._check_ids(ids, shape[0])
        ip_, ix_, dt_ = C.indptr.astype(np.int64), C.indices.astype(np.int64), C.data
        data, idf = _tfidf.tfidf_f32(ip_, ix_, dt_, shape[1], np.arange(dt_.shape[0], dtype=np.int64), n_threads)
        X = sp.csr_matrix((data, C.indices.copy(), C.indptr.copy()), shape=shape)
        X.has_sorted_indices = True
        dl = np.asarray(C.sum(axis=1), np.float64).ravel()
        self.vocabulary_ = None
        self.terms_ = None
        self._build(X, C, dl, idf, n_threads)
        return self

    def search_counts(self, q_counts, k: int = 10, n_threads: int | None = None, return_report: bool = False):
        """:meth:`search` for queries given as a sparse (nq, V) raw term-count matrix."""
        self._check_fitted()
        k = check_int(k, "k", min_value=1)
        return_report = check_bool(return_report, "return_report")
        ip_, ix_, dt_, shape = as_csr(q_counts, "q_counts", dtype=np.float32)
        if shape[1] != self.n_terms_:
            raise ValueError(f"q_counts must have {self.n_terms_} columns, got {shape[1]}")
        if dt_.size and dt_.min() < 0:  # ``keep`` below would drop them silently (fit refuses them)
            raise ValueError("q_counts: term counts must be non-negative")
        resolve_threads(n_threads)
        self._check_width(k, shape[0], "k")
        with np.errstate(over="ignore"):
            v = dt_ * self._idf32[ix_]
        if not np.isfinite(v).all():  # tf x idf overflows float32: NaN weights would reach the kernel
            raise ValueError("q_counts: counts too large for float32 tf-idf weights (overflow); rescale the rows")
        rows = np.repeat(np.arange(shape[0]), np.diff(ip_))
        nrm = np.sqrt(np.bincount(rows, weights=v.astype(np.float64) ** 2, minlength=shape[0]))
        keep = v > 0
        v = (v / np.where(nrm[rows] > 0, nrm[rows], 1).astype(np.float32)).astype(np.float32)
        cnt = np.bincount(rows[keep], minlength=shape[0])
        qi = np.zeros(shape[0] + 1, np.int64)
        np.cumsum(cnt, out=qi[1:])
        return self._search_arrays(qi, ix_[keep].astype(np.int32), v[keep], shape[0], k, n_threads, return_report)

    def _build(self, X, counts, dl, idf, n_threads) -> None:
        """Calibrate on the whole corpus, encode it as one shard, assemble (``jkofast.sgr.layout``)."""
        geometry, shard = _layout.calibrate_and_encode(X, self.config, n_threads, counts=counts)
        ix = _layout.assemble(geometry, [shard], idf, dl, self.config, n_threads)
        self._set_index(ix, geometry.n_calibration)

    def _set_index(self, ix: dict, n_calibration: int) -> None:
        """Adopt the index arrays ``ix`` (compact layout) and derive the query-path tables."""
        self._ix = ix
        self.n_calibration_ = int(n_calibration)
        self._idf32 = np.asarray(ix["idf"]).astype(np.float32)
        self.n_docs_ = int(ix["dl"].shape[0])
        self.n_terms_ = int(ix["idf"].shape[0])
        self._query = QueryPath(ix, self.config)
        self._make_vocab_table()
        self._fitted = True

    @classmethod
    def from_parts(
        cls,
        index: dict,
        params: dict | SGRConfig | None = None,
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
        params : dict or SGRConfig, optional
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
        self = cls(params) if isinstance(params, SGRConfig) else cls(**(params or {}))
        if not isinstance(index, dict):
            raise TypeError(f"index must be a dict of arrays, got {type(index).__name__}")
        need = _persist.array_names(self.config)
        missing = [k for k in need if k not in index]
        if missing:
            raise ValueError(f"index: missing array(s) {missing}")
        ix = {k: index[k] for k in need}
        meta = {
            "n_docs": int(ix["dl"].shape[0]),
            "terms": None if terms is None else [str(t) for t in terms],
            "ids": None if ids is None else [str(x) for x in ids],
        }
        _persist.check_meta_lists(meta, "from_parts")
        _persist.check_structure(ix, meta, self.config, "index")
        terms = meta["terms"]
        self.terms_ = terms
        self.vocabulary_ = None if terms is None else {t: i for i, t in enumerate(terms)}
        self.ids_ = meta["ids"]
        self.scripts_ = bool(scripts)
        self._set_index(ix, meta["n_docs"] if n_calibration is None else n_calibration)
        return self

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
        beyond the corpus are padding, and ``k = 10**12`` would ask for 7 TiB.
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
        if nq < PARALLEL_ANALYSIS or n_threads == 1:
            return _tok.analyse_rows(cp, q_off, wtab, table, voc_off, voc_cp, self._idf32)
        with numba_threads(n_threads) as nt:
            return _tok.analyse_batch(cp, q_off, wtab, table, voc_off, voc_cp, self._idf32, max(1, min(nq, nt)))

    def search(
        self, query_texts, k: int = 10, n_threads: int | None = None, return_report: bool = False
    ) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, SearchReport]:
        """Top-``k`` documents per query (text in, ranked corpus rows out).

        Parameters
        ----------
        query_texts : list of str
        k : int
            Results per query; at most ``pool_size`` are non-padding.
        n_threads : int, optional
            Numba threads (prange over query chunks); results do not depend on it.
        return_report : bool, default False
            Also return a :class:`jkofast.sparse.report.SearchReport` naming the queries the
            method could not answer: no known term (``NO_KNOWN_TERM``), or known terms but no
            routed document (``NO_ROUTED_DOC``, answered by the lexical fallback unless
            ``empty_fallback="none"``; its ``fallback`` flags say which rows came from it).

        Returns
        -------
        indices : int64 ndarray (nq, k)
            Corpus row positions in rank order, padded with -1 (empty query, no routed
            document under ``empty_fallback="none"``, or fewer than k in the pool).
        scores : float32 ndarray (nq, k)
            The relevance (SPEC B.9) of each returned document, padded with -inf, capped
            to be strictly decreasing in rank: ranks 2-10 follow the diversity order, and
            the cap keeps that order for tools that re-sort by score.  The raw relevance
            is in :meth:`pool`.  Rows of the lexical fallback hold its BM25 scores (capped
            the same way).
        report : SearchReport
            Only with ``return_report=True``.
        """
        k = check_int(k, "k", min_value=1)
        return_report = check_bool(return_report, "return_report")
        resolve_threads(n_threads)
        qi, qt, qv = self.transform_queries(query_texts, n_threads)
        self._check_width(k, len(query_texts), "k")
        return self._search_arrays(qi, qt, qv, len(query_texts), k, n_threads, return_report)

    def _search_arrays(self, qi, qt, qv, nq, k, n_threads, return_report=False):
        P = self.config.pool_size
        kk = min(k, P)
        # only the first k ranks leave the kernel (diversity reorders ranks 2..10 only)
        out_doc, out_comp, _, _, st = self._query.run(qi, qt, qv, P, n_threads, n_out=kk)
        idx = np.full((nq, k), -1, np.int64)
        sc = np.full((nq, k), -np.inf, np.float32)
        idx[:, :kk] = out_doc
        # make scores non-increasing in rank so tools that re-sort by score (trec_eval,
        # pytrec_eval) keep the diversified order: cap each at just below its predecessor
        _q.cap_scores_desc(out_doc, out_comp, sc)
        fb = self._query.apply_fallback(qi, qt, st, idx, sc, kk)
        if not return_report:
            return idx, sc
        no_term = np.diff(qi) == 0
        status = np.where(st == _q.STATUS_OK, OK, np.where(no_term, NO_KNOWN_TERM, NO_ROUTED_DOC))
        return idx, sc, SearchReport.from_outputs(idx, status, fallback=fb)

    def pool(self, query_texts, P: int | None = None, n_threads: int | None = None) -> SGRPool:
        """Top-``P`` pool per query with its component scores (candidate generator / energy).

        Returns an :class:`SGRPool`; rows are in final rank order (diversity on ranks 2-10).
        """
        P = self.config.pool_size if P is None else check_int(P, "P", min_value=1)
        resolve_threads(n_threads)
        qi, qt, qv = self.transform_queries(query_texts, n_threads)
        self._check_width(P, len(query_texts), "P")
        out_doc, out_comp, out_n, info, st = self._query.run(qi, qt, qv, P, n_threads)
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
        fit and load, not saved) and the per-slot code values of a small index (``code_values``,
        derived likewise; see ``jkofast.sgr._engine.EXPAND_CODES_MAX_BYTES``).  The Python
        ``vocabulary_`` dict and ``ids_`` are not counted.

        Parameters
        ----------
        query_path_only : bool, default True
        breakdown : bool, default False
            Return a dict ``structure -> bytes`` (``memberships``, ``codes``, ``support``,
            ``lengths``, ``idf``, ``centres``, ``reliability``, ``graph_g``, ``semantic``,
            ``postings``, ``bitsets``, ``code_values``, ``vocab_table``, ``graph_a`` unless
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
            "postings": ("t_indptr", "t_off", "t_code", "t_tfq", "t_xpos", "t_xval"),
            "bitsets": ("tb_row", "tb_bits"),
            "code_values": ("x_cval", "x_w"),
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
        """Write the index to folder ``path`` (format 3: one ``.npy`` per array + ``meta.json``).

        Every file goes through :mod:`jkofast._io` (a temporary name, then a rename);
        ``meta.json`` (format version, parameters, vocabulary, the list of arrays with dtypes
        and shapes) is written last, so a folder whose writing was interrupted (a full disk, a
        kill) has no ``meta.json`` and :meth:`load` refuses it.  An existing ``meta.json`` is
        removed before anything else is written.  Document ids go to ``ids_utf8.npy`` /
        ``ids_off.npy`` (UTF-8 bytes and offsets).  Arrays already memory-mapped from this
        folder (``assemble(out=path)``) are not rewritten.  See :mod:`jkofast.sgr._persist`.
        """
        self._check_fitted()
        _persist.save_index(
            path,
            self._ix,
            self.config,
            terms=self.terms_,
            ids=self.ids_,
            n_docs=self.n_docs_,
            n_calibration=int(getattr(self, "n_calibration_", self.n_docs_)),
            scripts=bool(getattr(self, "scripts_", False)),
        )

    @classmethod
    def load(cls, path: str, mmap: bool = False, verify: bool = False) -> SparseGeometricRetriever:
        """Read an index written by :meth:`save` (format 3, or format 2: its postings compressed on load).

        Parameters
        ----------
        path : str
            The index folder.
        mmap : bool, default False
            Memory-map the arrays (``numpy.load(mmap_mode="c")``: pages are read when a
            query touches them; nothing is written back).  Opening then costs the O(V)
            tables (semantic lists, vocabulary), the checksums of the small files, and
            vectorised passes over every id, pointer and sentinel array the query kernels
            index with (so no damaged file can crash a query; docs/integrity.md).
        verify : bool, default False
            With ``mmap``, also check the CRC32 of every file against ``meta.json`` and the
            rest of the format (values finite, rows ascending), as an in-memory load always
            does.

        Raises
        ------
        ValueError
            ``path`` is not such an index (no ``meta.json``: e.g. a ``jkofast.sparse.index``
            folder, or an index whose writing did not finish), a format this version does not
            read (the message names it; format 1, ``index.npz``, is not read: rebuild such an
            index), or files that are corrupted or inconsistent (unreadable JSON/npy, missing
            arrays, ids out of range, lengths that disagree): the query kernels trust these
            arrays, so a bad one is refused here, naming the file and the array.
        """
        got = _persist.load_index(path, mmap=mmap, verify=verify)
        self = cls(got["config"])
        self.terms_ = got["terms"]
        self.vocabulary_ = None if self.terms_ is None else {t: i for i, t in enumerate(self.terms_)}
        self.ids_ = got["ids"]
        self.scripts_ = got["scripts"]
        self._set_index(got["index"], got["n_calibration"])
        return self


# the warm-up's retriever: settings that take every stage of the query path, on three documents
_WARM_PARAMS = {
    "pool_size": 3,
    "bm25_candidates": 2,
    "bm25_weight": 0.5,
    "bm25_rescue_weight": 0.5,
    "tail_gate": True,
    "gate_min": 1,
}
_WARM_DOCS = ("alpha beta gamma", "beta gamma delta", "gamma delta alpha")
# that retriever's index as fit builds it (the arrays save() writes, and the terms), stored with the package
_WARMUP_INDEX = os.path.join(os.path.dirname(__file__), "data", "warmup_index.npz")


def _warm_search(r: SparseGeometricRetriever) -> None:
    # a batch search's kernels: the parallel analysis kernel (PARALLEL_ANALYSIS queries and more)
    # and the parallel batch kernel (SERIAL_BELOW queries and more, on one core too); the serial
    # twins of a few queries are the "sgr.one_query" entry's
    r.search(["alpha gamma", "zzz"] * (max(PARALLEL_ANALYSIS, SERIAL_BELOW) // 2), k=2)


def _warmup_index_arrays() -> dict:
    """Fit the warm-up's retriever and return what :data:`_WARMUP_INDEX` stores: its index arrays and ``terms``."""
    r = SparseGeometricRetriever(**_WARM_PARAMS).fit(list(_WARM_DOCS))
    arrays = {k: np.asarray(r._ix[k]) for k in _persist.array_names(r.config)}
    return {**arrays, "terms": np.array(r.terms_)}


def _write_warmup_index(path: str = _WARMUP_INDEX) -> None:
    """Write :data:`_WARMUP_INDEX` (after a change to what fit builds; ``tests/sgr/test_warmup_index.py`` says when)."""
    with open(path, "wb") as f:
        np.savez_compressed(f, **_warmup_index_arrays())


@register_warmup("sgr")
def _warmup() -> None:
    # what a batch search compiles (jkofast run's SGR row): fit, then search
    _warm_search(SparseGeometricRetriever(**_WARM_PARAMS).fit(list(_WARM_DOCS)))


@register_warmup("sgr.search")
def _warmup_search() -> None:
    # the search kernels alone (the main job's compile-ahead child compiles them while the job's
    # own process compiles the fit's): the same retriever, its index read from _WARMUP_INDEX
    with np.load(_WARMUP_INDEX) as z:
        arrays = {k: z[k] for k in z.files}
    terms = [str(t) for t in arrays.pop("terms")]
    _warm_search(SparseGeometricRetriever.from_parts(arrays, _WARM_PARAMS, terms=terms))


@register_warmup("sgr.one_query")
def _warmup_one_query() -> None:
    # the serial twin: a few queries on one chunk (one-query search calls)
    SparseGeometricRetriever(pool_size=3).fit(["aa bb", "bb cc", "cc aa"]).search(["aa"], k=2)
