"""CSR TF-IDF and BM25 indexes: build, batched top-k search, full scores, persistence.

An index holds the per-(term, doc) weights in a term-major postings layout built once:
``term_ptr`` (n_terms + 1), ``post_docs`` (nnz), ``post_w`` float32 (nnz).  Scoring a query
is a column sum over its terms (``jkofast.kernels.sparse.scoring``), in float64, output
float32.

Scoring variants (SPEC A.2.3, B.2):

* ``BM25Index(variant="okapi")`` -- rank_bm25 ``BM25Okapi``: ``idf = ln(N - n + 0.5) -
  ln(n + 0.5)``, negative idfs floored to ``epsilon * mean(idf)`` (mean over the whole
  vocabulary, before flooring), ``w = idf tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))``;
  query tokens count with repetition.
* ``BM25Index(variant="lucene")`` -- bm25s default: ``idf = ln(1 + (N - n + 0.5)/(n + 0.5))``,
  ``w = idf tf / (tf + k1 (1 - b + b dl / avgdl))``.
* ``TfidfIndex`` -- scikit-learn ``TfidfVectorizer`` (smooth idf ``ln((1+N)/(1+n)) + 1``, raw
  tf, L2 rows); score = cosine between the L2-normalised query and document vectors.

Persistence: ``index.save(dir)`` writes ``vocab.txt`` and one ``.npy`` per array, then
``manifest.json`` (format name + version, class, parameters, analyser, array shapes/dtypes,
every file's size and CRC32, and its own CRC32 as its last field); ``load_index(dir, mmap=True)``
memory-maps the arrays and raises ``ValueError`` naming the file for another format version, a
missing, truncated, changed or mismatched file, or postings a kernel cannot trust
(docs/integrity.md); ``check_index(dir)`` is the report of ``jkofast index --check``.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from jkofast._io import (
    IndexDamage,
    atomic_save_npy,
    atomic_write_manifest,
    atomic_write_text,
    check_file_records,
    file_record,
    file_report,
    read_manifest,
    verify_file_records,
)
from jkofast._numba import register_warmup
from jkofast._threads import numba_threads
from jkofast._validation import (
    check_bool,
    check_csr,
    check_int,
    check_positive,
)
from jkofast.kernels.sparse import scoring as _ks
from jkofast.kernels.sparse import weights as _kw
from jkofast.sparse._cosine import cosine_cross, cosine_pools, cosine_rows
from jkofast.sparse.report import NO_KNOWN_TERM, OK, SearchReport
from jkofast.sparse.vocabulary import Vocabulary, counts_from_token_ids
from jkofast.sparse.vocabulary import _warmup as _vocabulary_warmup
from jkofast.text.analyzer import Analyzer
from jkofast.text.patterns import SKLEARN, WORD

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "BM25Index",
    "SparseIndex",
    "TfidfIndex",
    "check_index",
    "load_index",
    "prepare",
]

FORMAT_NAME = "jkofast-sparse-index"
FORMAT_VERSION = 1
# files up to this size have their checksum verified at every open; larger ones get size, header
# and range checks at open and their checksum with ``verify``
OPEN_CHECKSUM_BYTES = 1 << 22
# top-k (k <= 16) of a positive-weight query scans a dense accumulator instead of listing
# the touched documents when n_docs <= _DENSE_RATIO * (postings of the query): a vectorised
# blocked scan of n_docs scores beats touched-list upkeep (~4x costlier per posting than per
# scanned score).  Both paths give identical results; this only picks the faster one.
_DENSE_RATIO = 8.0


def _transpose(indptr, indices, data, n_cols):
    """Return the transpose of CSR ``(indptr, indices, data)`` (n_rows x n_cols) as canonical CSR arrays."""
    nnz = indices.shape[0]
    out_ptr = np.empty(n_cols + 1, np.int64)
    out_idx = np.empty(nnz, np.int64)
    out_data = np.empty(nnz, data.dtype)
    _kw.csr_transpose(indptr, indices, data, n_cols, out_ptr, out_idx, out_data)
    return out_ptr, out_idx, out_data


class SparseIndex:
    """Common machinery of the sparse indexes: analyser/vocabulary, postings, search, score_all, save/load.

    Subclasses (:class:`BM25Index`, :class:`TfidfIndex`) define the weights (``_build``) and the
    query weights (``_query_weights``).  After ``fit`` the postings are term-major:
    ``term_ptr`` int64 (n_terms + 1,), ``post_docs`` int64 (nnz,), ``post_w`` float32 (nnz,);
    ``doc_len`` int64 (n_docs,) counts analyser tokens.
    """

    kind = "base"
    _arrays = ("term_ptr", "post_docs", "post_w", "doc_len", "idf")

    def __init__(self, analyzer: Analyzer | None = None, max_features: int | None = None):
        self.vocab = Vocabulary(analyzer if analyzer is not None else Analyzer(), max_features)
        self.term_ptr = self.post_docs = self.post_w = self.doc_len = None
        self.n_docs = 0

    # ---- build -----------------------------------------------------------------------
    def _params(self) -> dict:
        """Return the scoring parameters saved in the manifest."""
        return {}

    def fit(self, texts) -> SparseIndex:
        """Analyse ``texts`` (one per document) and build the postings."""
        return self._fit_counts(self.vocab, self.vocab.fit_transform(texts))

    def _fit_counts(self, vocab: Vocabulary, counts) -> SparseIndex:
        """Build the postings from a fitted ``vocab`` and its ``fit_transform`` output ``counts``.

        Two indexes over one corpus and one analyser share its analysis this way instead of each
        analysing the texts again (the arrays are read, never written).
        """
        indptr, indices, cnt, doc_len = counts
        self.vocab = vocab
        self._build(indptr, indices, cnt, doc_len, vocab.n_terms)
        return self

    def fit_token_ids(self, token_ids, n_terms: int | None = None) -> SparseIndex:
        """Build from pre-tokenised integer documents (list of int arrays or ``(flat, offsets)``).

        Query with ``search_token_ids``; no text vocabulary is kept.
        """
        indptr, indices, counts, doc_len, n_terms = counts_from_token_ids(token_ids, n_terms)
        self.vocab.terms = None
        self._build(indptr, indices, counts, doc_len, n_terms)
        return self

    @property
    def n_terms(self) -> int:
        """Number of terms (columns of the postings)."""
        return self.term_ptr.shape[0] - 1

    def _check_fitted(self):
        """Raise ``RuntimeError`` before ``fit`` / ``load_index``."""
        if self.term_ptr is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() or load_index()")

    # ---- queries ---------------------------------------------------------------------
    def _query_weights(self, q_ptr, q_terms, q_counts) -> np.ndarray:
        """Return the float64 query-term weights (BM25: the counts, repetition kept)."""
        return q_counts

    def query_csr(self, query_texts):
        """Query term ids and float64 weights as CSR ``(q_ptr, q_terms, q_w)``."""
        self._check_fitted()
        if self.vocab.terms is None:
            raise RuntimeError("index was built from token ids; use search_token_ids")
        q_ptr, q_terms, q_counts = self.vocab.transform(query_texts)
        return q_ptr, q_terms, self._query_weights(q_ptr, q_terms, q_counts)

    def _token_query_csr(self, token_ids):
        """Return integer token-id queries as weighted CSR; ids >= n_terms are dropped."""
        q_ptr, q_terms, q_counts, _, _ = counts_from_token_ids(token_ids, None)
        keep = q_terms < self.n_terms  # unknown ids contribute 0
        if not keep.all():
            rows = np.repeat(np.arange(q_ptr.size - 1), np.diff(q_ptr))[keep]
            q_terms, q_counts = q_terms[keep], q_counts[keep]
            q_ptr = np.zeros_like(q_ptr)
            np.cumsum(np.bincount(rows, minlength=q_ptr.size - 1), out=q_ptr[1:])
        return q_ptr, q_terms, self._query_weights(q_ptr, q_terms, q_counts)

    def _positive_weights(self) -> bool:
        """All postings weights > 0 (cached): enables the touched-list scoring path."""
        pos = getattr(self, "_pos_cache", None)
        if pos is None or pos[0] is not self.post_w:
            pos = (self.post_w, bool(self.post_w.size == 0 or float(np.min(self.post_w)) > 0.0))
            self._pos_cache = pos
        return pos[1]

    def search_csr(self, q_ptr, q_terms, q_w, k: int = 10, n_threads: int | None = None):
        """Run ``search`` for queries already in CSR form; skips the analyser.

        ``(q_ptr, q_terms, q_w)`` is ``query_csr``'s output: canonical CSR of term ids over this
        index's vocabulary with float64 weights (``ValueError`` otherwise).
        """
        self._check_fitted()
        q_ptr, q_terms, q_w = check_csr(q_ptr, q_terms, q_w, self.n_terms, "queries", data_dtype=np.float64)
        return self._topk(q_ptr, q_terms, q_w, k, n_threads)

    def _topk(self, q_ptr, q_terms, q_w, k, n_threads):
        """Score validated CSR queries and keep the top ``k`` (the kernel call of every search)."""
        self._check_fitted()
        k = check_int(k, "k", min_value=1)
        nq = q_ptr.shape[0] - 1
        out_idx = np.empty((nq, k), np.int64)
        out_val = np.empty((nq, k), np.float32)
        if nq == 0:
            return out_idx, out_val
        with numba_threads(n_threads) as nt:
            # chunking only balances work; every query's result is independent of it
            chunk = max(1, min(32, -(-nq // (4 * nt))))
            _ks.score_topk_batch(
                self.term_ptr,
                self.post_docs,
                self.post_w,
                self.n_docs,
                q_ptr,
                q_terms,
                q_w,
                k,
                self._positive_weights() and bool(np.all(q_w > 0)),
                _DENSE_RATIO,
                chunk,
                out_idx,
                out_val,
            )
        return out_idx, out_val

    def search(self, query_texts, k: int = 10, n_threads: int | None = None, return_report: bool = False):
        """Top-``k`` documents per query.

        Parameters
        ----------
        query_texts : list of str
        k : int
            Results per query (>= 1).
        n_threads : int, optional
            Numba threads for this call (restored afterwards); results do not depend on it.
        return_report : bool, default False
            Also return a :class:`jkofast.sparse.report.SearchReport`: the queries with no
            term in the vocabulary (status ``NO_KNOWN_TERM``), whose rows are score-0 filler.

        Returns
        -------
        indices : int64 ndarray (n_queries, k)
            Corpus row positions, best first; ties -> lowest row; padded with -1 when
            ``k > n_docs``.  A query with no known term scores every document 0: its row
            holds the first documents in corpus order (the report marks it).
        scores : float32 ndarray (n_queries, k)
            ``score(d) = sum_t q_w[t] W[t, d]`` over the query's terms (float64 sums, then
            float32); padded with ``-inf``.
        report : SearchReport
            Only with ``return_report=True``.

        Raises
        ------
        RuntimeError
            The index is not fitted, or was built from token ids (use ``search_token_ids``).
        TypeError
            ``k`` is not an integer, ``return_report`` not a bool, or ``query_texts`` is one
            str / holds a non-str.
        ValueError
            ``k < 1``.
        """
        return_report = check_bool(return_report, "return_report")
        q_ptr, q_terms, q_w = self.query_csr(query_texts)
        idx, val = self._topk(q_ptr, q_terms, q_w, k, n_threads)
        if not return_report:
            return idx, val
        no_term = np.diff(q_ptr) == 0
        status = np.where(no_term, NO_KNOWN_TERM, OK)
        return idx, val, SearchReport.from_outputs(idx, status, filler=no_term & (idx[:, 0] >= 0))

    def search_token_ids(self, token_ids, k: int = 10, n_threads: int | None = None):
        """``search`` for pre-tokenised integer queries (ids >= n_terms are ignored)."""
        return self._topk(*self._token_query_csr(token_ids), k, n_threads)

    def score_all(self, query_texts, n_threads: int | None = None, dtype=np.float32) -> np.ndarray:
        """Return every document's score for every query.

        Parameters
        ----------
        query_texts : list of str
        n_threads : int, optional
            Numba threads for this call; results do not depend on it.
        dtype : float32 or float64
            Output dtype (the sums are float64 either way).

        Returns
        -------
        ndarray (n_queries, n_docs)
            ``score[q, d] = sum_t q_w[q, t] W[t, d]``; 0 for documents sharing no term.
        """
        self._check_fitted()
        q_ptr, q_terms, q_w = self.query_csr(query_texts)
        nq = q_ptr.shape[0] - 1
        out = np.empty((nq, self.n_docs), dtype)
        if nq:
            with numba_threads(n_threads):
                chunk = max(1, min(32, -(-nq // 8)))
                _ks.score_dense_batch(
                    self.term_ptr, self.post_docs, self.post_w, self.n_docs, q_ptr, q_terms, q_w, chunk, out
                )
        return out

    def postings_matrix(self) -> sp.csc_matrix:
        """Return the weights as a scipy ``(n_docs, n_terms)`` CSC matrix (views of the postings)."""
        self._check_fitted()
        return sp.csc_matrix((self.post_w, self.post_docs, self.term_ptr), shape=(self.n_docs, self.n_terms))

    # ---- persistence -----------------------------------------------------------------
    def save(self, path: str) -> str:
        """Write the index to folder ``path`` (created); returns ``path``.

        Every file is written atomically (:mod:`jkofast._io`), the manifest last, with every
        file's size and CRC32.
        """
        self._check_fitted()
        os.makedirs(path, exist_ok=True)
        arrays = {}
        for name in self._arrays:
            a = np.ascontiguousarray(getattr(self, name))
            atomic_save_npy(os.path.join(path, f"{name}.npy"), a)
            arrays[name] = {"dtype": a.dtype.str, "shape": list(a.shape)}
        has_vocab = self.vocab.terms is not None
        if has_vocab:
            atomic_write_text(os.path.join(path, "vocab.txt"), "\n".join(self.vocab.terms) + "\n")
        names = [f"{name}.npy" for name in arrays] + (["vocab.txt"] if has_vocab else [])
        manifest = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "class": type(self).__name__,
            "params": self._params(),
            "analyzer": self.vocab.analyzer.to_dict(),
            "max_features": self.vocab.max_features,
            "n_docs": int(self.n_docs),
            "n_terms": int(self.n_terms),
            "vocab": "vocab.txt" if has_vocab else None,
            "arrays": arrays,
            "checksum": "crc32",
            "files": {f: file_record(os.path.join(path, f)) for f in names},
        }
        # last: it names the files above
        atomic_write_manifest(os.path.join(path, "manifest.json"), manifest, indent=2)
        return path


class BM25Index(SparseIndex):
    r"""BM25 over CSR postings, ``okapi`` (rank_bm25) or ``lucene`` (bm25s) variant.

    Parameters
    ----------
    variant : {"okapi", "lucene"}
    k1, b : float
        1.5 and 0.75 by default.
    epsilon : float
        Okapi idf floor factor (0.25); ignored by lucene.
    analyzer : Analyzer, optional
        Default: lowercase, ``\w+`` for okapi (JKO-RAG), ``\b\w\w+\b`` + English stop-words
        for lucene (bm25s's BEIR setting).
    max_features : int, optional

    Examples
    --------
    >>> idx = BM25Index("okapi").fit(["the cat sat", "a dog", "cat and dog"])
    >>> ids, scores = idx.search(["cat"], k=2)
    >>> ids.tolist()
    [[0, 2]]
    """

    kind = "bm25"

    def __init__(
        self,
        variant: str = "okapi",
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        analyzer: Analyzer | None = None,
        max_features: int | None = None,
    ):
        if variant not in ("okapi", "lucene"):
            raise ValueError(f"variant must be 'okapi' or 'lucene', got {variant!r}")
        if analyzer is None:
            analyzer = Analyzer(WORD) if variant == "okapi" else Analyzer(SKLEARN, stopwords="english")
        super().__init__(analyzer, max_features)
        self.variant = variant
        self.k1 = check_positive(k1, "k1", strict=False)
        b = check_positive(b, "b", strict=False)
        if b > 1:
            raise ValueError(f"b must be in [0, 1], got {b}")
        self.b = b
        self.epsilon = check_positive(epsilon, "epsilon", strict=False)
        self.idf = None
        self.avgdl = None

    def _params(self) -> dict:
        """Return variant, k1, b, epsilon and avgdl for the manifest."""
        return {"variant": self.variant, "k1": self.k1, "b": self.b, "epsilon": self.epsilon, "avgdl": self.avgdl}

    def _idf(self, df: np.ndarray, n: int) -> np.ndarray:
        """Return the variant's float64 idf from document frequencies ``df`` over ``n`` documents."""
        df = df.astype(np.float64)
        if self.variant == "lucene":
            return np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        idf = np.log(n - df + 0.5) - np.log(df + 0.5)
        if idf.size:
            eps = self.epsilon * (float(np.sum(idf)) / idf.size)
            idf = np.where(idf < 0, eps, idf)
        return idf

    def _build(self, indptr, indices, counts, doc_len, n_terms):
        """Compute idf, avgdl and the BM25 weights; transpose them into float32 postings."""
        n = indptr.shape[0] - 1
        df = np.bincount(indices, minlength=n_terms)
        self.idf = self._idf(df, n)
        total = float(doc_len.sum())
        self.avgdl = total / n if total > 0 else 1.0
        w = np.empty(indices.shape[0], np.float64)
        _kw.bm25_weights_rows(
            indptr,
            indices,
            counts,
            doc_len.astype(np.float64),
            self.idf,
            self.k1,
            self.b,
            self.avgdl,
            self.variant == "okapi",
            w,
        )
        self.term_ptr, self.post_docs, pw = _transpose(indptr, indices, w, n_terms)
        self.post_w = pw.astype(np.float32)
        self.doc_len = np.asarray(doc_len, np.int64)
        self.n_docs = n


class TfidfIndex(SparseIndex):
    r"""TF-IDF cosine index, values identical to scikit-learn's ``TfidfVectorizer``.

    Keeps the document-major CSR rows (``doc_matrix()``) for TF-IDF geometry (pool cosines)
    next to the term-major postings used for search.

    Parameters
    ----------
    analyzer : Analyzer, optional
        Default ``Analyzer("sklearn")`` (``\b\w\w+\b``, lowercase, no stop-words; SPEC B.2).
    max_features : int, optional
        E.g. 50000 for SparseGeometricRAG.

    Examples
    --------
    >>> idx = TfidfIndex().fit(["the cat sat", "a dog barked", "cat and dog"])
    >>> ids, scores = idx.search(["dog"], k=2)
    >>> ids.tolist(), idx.doc_matrix().shape
    ([[1, 2]], (3, 6))
    """

    kind = "tfidf"
    _arrays = (*SparseIndex._arrays, "idf", "doc_ptr", "doc_terms", "doc_w")

    def __init__(self, analyzer: Analyzer | None = None, max_features: int | None = None):
        super().__init__(analyzer if analyzer is not None else Analyzer(SKLEARN), max_features)
        self.idf = self.doc_ptr = self.doc_terms = self.doc_w = None

    def _build(self, indptr, indices, counts, doc_len, n_terms):
        """Compute the smooth idf and the L2-normalised rows; keep them and their float32 postings."""
        n = indptr.shape[0] - 1
        df = np.bincount(indices, minlength=n_terms).astype(np.float64)
        self.idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
        w = np.empty(indices.shape[0], np.float64)
        _kw.tfidf_weights_rows(indptr, indices, counts, self.idf, w)
        self.doc_ptr, self.doc_terms, self.doc_w = indptr, indices, w.astype(np.float32)
        self.term_ptr, self.post_docs, self.post_w = _transpose(indptr, indices, self.doc_w, n_terms)
        self.doc_len = np.asarray(doc_len, np.int64)
        self.n_docs = n

    def _query_weights(self, q_ptr, q_terms, q_counts):
        """Return the L2-normalised tf-idf weights of the queries (float64)."""
        w = np.empty(q_counts.shape[0], np.float64)
        _kw.tfidf_weights_rows(q_ptr, q_terms, q_counts, self.idf, w)
        return w

    def doc_matrix(self) -> sp.csr_matrix:
        """L2-normalised TF-IDF rows ``(n_docs, n_terms)`` float32 CSR (canonical)."""
        self._check_fitted()
        return sp.csr_matrix((self.doc_w, self.doc_terms, self.doc_ptr), shape=(self.n_docs, self.n_terms))

    def transform(self, texts) -> sp.csr_matrix:
        """L2-normalised TF-IDF rows of new texts, float32 CSR over this vocabulary."""
        q_ptr, q_terms, q_w = self.query_csr(texts)
        return sp.csr_matrix((q_w.astype(np.float32), q_terms, q_ptr), shape=(q_ptr.size - 1, self.n_terms))


# ---- loading ------------------------------------------------------------------------
def load_index(path: str, mmap: bool | str = True, verify: bool = False) -> SparseIndex:
    """Load an index written by ``save``.

    Parameters
    ----------
    path : str
        The folder.
    mmap : bool or {"r", "c"}
        Memory-map the arrays instead of reading them.  ``True`` = ``"c"`` (copy-on-write:
        pages are read lazily from disk and the file is never written; the arrays are
        typed as writable, so the kernels warmed up by ``jkofast.warmup()`` are reused).
        ``"r"`` maps them read-only, which Numba types differently (one extra compilation
        per kernel on first use).  ``False`` reads them into memory.
    verify : bool
        Also check the CRC32 of every file and the invariants that cannot crash a kernel (finite
        weights, non-negative lengths), as an in-memory load (``mmap=False``) always does.  Every
        open checks the manifest's own checksum, each file's size, the checksum of files up to
        ``OPEN_CHECKSUM_BYTES``, and every pointer and id a kernel indexes with.

    Raises
    ------
    ValueError
        Missing/invalid manifest, another format version, a missing, truncated, changed or
        mismatched array file, postings that point outside the document range; the message
        names the file (``IndexDamage``, whose ``file`` attribute holds its name).
    """
    if mmap not in (True, False, "r", "c"):
        raise ValueError(f"mmap must be True, False, 'r' or 'c', got {mmap!r}")
    return _open(os.fspath(path), mmap, bool(verify) or mmap is False, checksums=True)


def _open(path: str, mmap, full: bool, checksums: bool) -> SparseIndex:
    man, summed = _read_manifest(path)
    mode = "c" if mmap is True else (mmap or None)
    mpath = os.path.join(path, "manifest.json")
    if summed:  # large files: CRC32 when their verification stamp does not match (jkofast._io.STAMP_FILE)
        verify_file_records(path, man["files"], checksums=checksums, full=full, small=OPEN_CHECKSUM_BYTES)
    try:
        idx = _empty_index(man, mpath)
    except (KeyError, TypeError, ValueError) as exc:
        what = f"bad class, analyzer or params ({type(exc).__name__}: {exc})"
        raise IndexDamage(f"{mpath}: {what}", "manifest.json", what) from None
    for name, meta in man["arrays"].items():
        setattr(idx, name, _load_array(path, name, meta, mode))
    if getattr(idx, "idf", None) is None:
        raise IndexDamage(f"{path}: idf.npy missing", "idf.npy", "missing")
    idx.n_docs = int(man["n_docs"])
    _check_postings(idx, path, man["n_terms"], full)
    if man.get("vocab"):
        vf = os.path.join(path, man["vocab"])
        if not os.path.isfile(vf):
            raise IndexDamage(f"{vf}: vocabulary file missing", man["vocab"], "missing")
        try:
            with open(vf, encoding="utf-8") as fh:
                terms = fh.read().split("\n")[:-1]
        except UnicodeDecodeError as exc:
            what = f"not UTF-8 ({exc.reason} at byte {exc.start})"
            raise IndexDamage(f"{vf}: {what}", man["vocab"], what) from None
        if len(terms) != man["n_terms"]:
            what = f"{len(terms)} terms, the manifest says {man['n_terms']} (truncated?)"
            raise IndexDamage(f"{vf}: {what}", man["vocab"], what)
        if len(set(terms)) != len(terms):
            raise IndexDamage(f"{vf}: holds duplicate terms", man["vocab"], "holds duplicate terms")
        idx.vocab._set_terms(terms)
    return idx


def check_index(path) -> dict:
    """Check every file and every invariant of a BM25 / TF-IDF index folder (``jkofast index --check``).

    The manifest's own checksum, then every recorded file (present, size, CRC32; every problem
    listed), then the arrays and the invariants ``load_index(verify=True)`` checks (the first
    violation, naming its file).

    Returns
    -------
    dict
        ``{"path", "kind": "sparse", "format", "checksums": "crc32" | "none recorded", "files":
        [{"file", "bytes", "status"}], "ok", "error", "bad_file"}``.
    """
    path = os.fspath(path)
    rep = {"path": path, "kind": "sparse", "format": None, "checksums": None, "files": [], "ok": False}
    rep.update(error=None, bad_file=None)
    try:
        man, summed = _read_manifest(path)
    except IndexDamage as exc:
        rep.update(error=str(exc), bad_file=exc.file)
        return rep
    rep["format"] = f"{FORMAT_NAME} {FORMAT_VERSION}"
    rep["checksums"] = "crc32" if summed else "none recorded"
    names = [f"{k}.npy" for k in man["arrays"]] + ([man["vocab"]] if man.get("vocab") else [])
    return file_report(
        rep, path, man["files"] if summed else None, names, lambda: _open(path, True, True, checksums=False)
    )


def _read_manifest(path: str) -> tuple[dict, bool]:
    """Return ``(manifest, checksummed)`` of ``path`` after checking its checksum, format name and version."""
    mpath = os.path.join(path, "manifest.json")
    try:
        man, summed = read_manifest(
            mpath,
            missing=f"{path}: not a jkofast index (manifest.json missing)",
            invalid=f"{mpath}: invalid manifest",
            precheck=lambda m: _check_format(m, mpath),
        )
        _check_manifest(man, mpath, summed)
    except IndexDamage:
        raise
    except ValueError as exc:
        raise IndexDamage(str(exc), "manifest.json" if os.path.isfile(mpath) else None) from None
    return man, summed


def _check_format(man: dict, mpath: str) -> None:
    """Refuse another format or version (before the manifest's checksum is compared)."""
    if man.get("format") != FORMAT_NAME:
        raise ValueError(f"{mpath}: not a jkofast sparse index (format={man.get('format')!r})")
    if man.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{mpath}: index format version {man.get('format_version')!r} is not supported "
            f"(this jkofast reads version {FORMAT_VERSION}); rebuild the index"
        )


def _check_manifest(man: dict, mpath: str, summed: bool) -> None:
    _check_format(man, mpath)
    for key in ("n_docs", "n_terms"):
        v = man.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{mpath}: {key} must be a non-negative integer, got {v!r}")
    arrays = man.get("arrays")
    if not isinstance(arrays, dict) or not all(
        isinstance(m, dict) and isinstance(m.get("dtype"), str) and isinstance(m.get("shape"), list)
        for m in arrays.values()
    ):
        raise ValueError(f"{mpath}: arrays must map names to {{'dtype', 'shape'}}")
    known = set(TfidfIndex._arrays)
    if not set(arrays) <= known:
        raise ValueError(f"{mpath}: unknown array(s) {sorted(set(arrays) - known)}")
    if man.get("vocab") not in (None, "vocab.txt"):
        raise ValueError(f"{mpath}: vocab must be null or 'vocab.txt'")
    files = man.get("files")
    if not summed:
        if files is not None:
            raise ValueError(f"{mpath}: records file checksums but not its own (its checksum field is damaged)")
        return
    check_file_records(files, mpath)
    want = {f"{k}.npy" for k in arrays} | ({"vocab.txt"} if man.get("vocab") else set())
    lost = sorted(want - set(files))
    if lost:
        raise ValueError(f"{mpath}: files records no checksum for {lost}")


def _empty_index(man: dict, mpath: str) -> SparseIndex:
    """Return an unfitted index of the manifest's class, analyser and parameters."""
    cls = {"BM25Index": BM25Index, "TfidfIndex": TfidfIndex}.get(man.get("class"))
    if cls is None:
        raise ValueError(f"{mpath}: unknown index class {man.get('class')!r}")
    analyzer = Analyzer.from_dict(man["analyzer"])
    p = man.get("params", {})
    if cls is BM25Index:
        idx = BM25Index(p["variant"], p["k1"], p["b"], p["epsilon"], analyzer, man.get("max_features"))
        avgdl = p["avgdl"]
        if isinstance(avgdl, bool) or not isinstance(avgdl, (int, float)) or not np.isfinite(avgdl) or avgdl <= 0:
            raise ValueError(f"avgdl must be a positive number, got {avgdl!r}")
        idx.avgdl = avgdl
        return idx
    return TfidfIndex(analyzer, man.get("max_features"))


def _load_array(path: str, name: str, meta: dict, mode) -> np.ndarray:
    """Load ``path/name.npy`` (memory-mapped with ``mode``) and check its dtype and shape against ``meta``."""
    f = os.path.join(path, f"{name}.npy")
    fn = f"{name}.npy"
    if not os.path.isfile(f):
        raise IndexDamage(f"{f}: array file missing", fn, "missing")
    try:
        a = np.load(f, mmap_mode=mode, allow_pickle=False)
    except Exception as e:  # numpy raises ValueError, OSError, EOFError, SyntaxError, ... on a damaged file
        what = f"cannot read array (truncated or corrupt file: {type(e).__name__}: {e})"
        raise IndexDamage(f"{f}: {what}", fn, what) from None
    if a.dtype.str != meta["dtype"] or list(a.shape) != meta["shape"]:
        what = f"expected {meta['dtype']} {meta['shape']}, found {a.dtype.str} {list(a.shape)}"
        raise IndexDamage(f"{f}: {what}", fn, what)
    return a


def _damaged(path: str, name: str, what: str) -> IndexDamage:
    return IndexDamage(f"{os.path.join(path, name)}: {what}", name, what)


def _check_postings(idx: SparseIndex, path: str, n_terms: int, full: bool = False) -> None:
    """Check the loaded arrays against the manifest and the invariants the kernels trust.

    The scoring kernels index their per-document buffers with ``post_docs`` and read
    ``post_w``, ``idf`` and the query weights by term; the TF-IDF cosine kernels read the
    document rows: every pointer, id and length is checked at open (vectorised passes) instead
    of risking an out-of-bounds access on a corrupt file.  ``full`` adds finite weights
    and non-negative lengths.
    """
    n_docs = idx.n_docs
    tp, pd, pw = idx.term_ptr, idx.post_docs, idx.post_w
    if tp.dtype.kind not in "iu" or tp.shape != (n_terms + 1,):
        raise _damaged(path, "term_ptr.npy", f"must be an integer ({n_terms + 1},) pointer (n_terms = {n_terms})")
    if pd.dtype.kind not in "iu" or pd.ndim != 1 or int(tp[-1]) != pd.shape[0]:
        raise _damaged(path, "term_ptr.npy", f"must end at len(post_docs) = {pd.shape[0]}")
    if int(tp[0]) != 0 or np.any(tp[1:] < tp[:-1]):
        raise _damaged(path, "term_ptr.npy", "is not a valid pointer array (starts at 0, non-decreasing)")
    if pd.size and (int(pd.min()) < 0 or int(pd.max()) >= n_docs):
        raise _damaged(path, "post_docs.npy", f"holds document ids outside [0, {n_docs})")
    if pw.dtype != np.float32 or pw.shape != pd.shape:
        raise _damaged(path, "post_w.npy", f"must be float32 of shape {pd.shape} like post_docs")
    if idx.doc_len is None or idx.doc_len.dtype.kind not in "iu" or idx.doc_len.shape != (n_docs,):
        raise _damaged(path, "doc_len.npy", f"must be an integer array of {n_docs} entries (n_docs)")
    if idx.idf.dtype != np.float64 or idx.idf.shape != (n_terms,):
        raise _damaged(path, "idf.npy", f"must be float64 of shape ({n_terms},)")
    if isinstance(idx, TfidfIndex):
        _check_doc_rows(idx, path, n_terms, n_docs)
    if not full:
        return
    for name in ("post_w", "idf") + (("doc_w",) if isinstance(idx, TfidfIndex) else ()):
        a = getattr(idx, name)
        if a.size and not np.isfinite(a).all():
            raise _damaged(path, f"{name}.npy", "contains NaN or inf")
    if idx.doc_len.size and idx.doc_len.min() < 0:
        raise _damaged(path, "doc_len.npy", "holds negative lengths")


def _check_doc_rows(idx, path: str, n_terms: int, n_docs: int) -> None:
    """Check the TF-IDF document rows (CSR over the terms) that the cosine kernels read."""
    dp, dt, dw = idx.doc_ptr, idx.doc_terms, idx.doc_w
    if dp is None or dt is None or dw is None:
        raise _damaged(path, "doc_ptr.npy", "missing (a TF-IDF index holds doc_ptr, doc_terms, doc_w)")
    if dp.dtype.kind not in "iu" or dp.shape != (n_docs + 1,) or dt.dtype.kind not in "iu" or dt.ndim != 1:
        raise _damaged(path, "doc_ptr.npy", f"must be an integer ({n_docs + 1},) pointer over doc_terms")
    if int(dp[0]) != 0 or int(dp[-1]) != dt.shape[0] or np.any(dp[1:] < dp[:-1]):
        raise _damaged(path, "doc_ptr.npy", f"must rise from 0 to len(doc_terms) = {dt.shape[0]}")
    if dt.size and (int(dt.min()) < 0 or int(dt.max()) >= n_terms):
        raise _damaged(path, "doc_terms.npy", f"holds term ids outside [0, {n_terms})")
    if dw.dtype != np.float32 or dw.shape != dt.shape:
        raise _damaged(path, "doc_w.npy", f"must be float32 of shape {dt.shape} like doc_terms")


def prepare() -> None:
    """Compile (or load from the cache) the sparse-retrieval kernels only.

    ``jkofast.warmup(features=["text", "index", "index.variants"])`` does the same.
    """
    _vocabulary_warmup()
    _warmup()
    _warmup_variants()


@register_warmup("index")
def _warmup() -> None:
    """Compile what the main job runs: BM25 (okapi, lucene) and TF-IDF fits, full-corpus float32 scores."""
    texts = ["a b b", "b c", "c a d"]
    for idx in (BM25Index("okapi"), BM25Index("lucene", analyzer=Analyzer(WORD)), TfidfIndex(Analyzer(WORD))):
        idx.fit(texts)
        idx.score_all(["a b"])


@register_warmup("index.variants")
def _warmup_variants() -> None:
    """Compile the rest on 3-document inputs: top-k search, both float dtypes, the cosine kernels."""
    texts = ["a b b", "b c", "c a d"]
    for idx in (BM25Index("okapi"), BM25Index("lucene", analyzer=Analyzer(WORD)), TfidfIndex(Analyzer(WORD))):
        idx.fit(texts)
        idx.search(["a b"], k=2)
        idx.search(["a b"], k=5)
        idx.score_all(["a b"])
    for dt in (np.float32, np.float64):
        X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dt))
        for out_dt in (np.float32, np.float64):
            cosine_rows(X, np.array([0, 2]), dtype=out_dt)
            cosine_pools(X, np.array([0, 2, 3]), dtype=out_dt)
            cosine_cross(X, X, dtype=out_dt)
        d = np.zeros((1, 3), dt)
        _ks.score_dense_batch(
            np.array([0, 1], np.int64),
            np.array([0], np.int64),
            np.array([1.0], dt),
            3,
            np.array([0, 1], np.int64),
            np.array([0], np.int64),
            np.array([1.0]),
            1,
            d,
        )
    # the signed-weight path (okapi with negative idf floors)
    for k in (2, 70):
        BM25Index("okapi").fit(["a b", "a b c", "a b", "a c", "b c"]).search(["a"], k=k)
