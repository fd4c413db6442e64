r"""Sparse first-stage retrievers (BM25, TF-IDF) with the interface every retriever shares.

Every retriever has

* ``fit(texts: list[str]) -> self`` -- one text per document (corpus row order);
* ``search(query_texts, k, n_threads=None) -> (indices int64 (nq, k), scores float32 (nq, k))``
  -- corpus row positions, best first, ties -> lowest row, padded with ``-1`` / ``-inf``;
  ``return_report=True`` adds a :class:`jkofast.sparse.report.SearchReport` (the queries the
  method could not answer, by reason);
* ``score_all(query_texts, n_threads=None) -> float32 (nq, n_docs)`` -- full score vectors
  (sparse retrievers);
* ``save(dir)`` / ``load(dir)``;
* ``doc_sep`` -- the title/text separator the method was published with, for
  ``BeirDataset.doc_texts(sep)``.

The registry over these and SparseGeometricRAG (``get_retriever(method, **params)``,
``load_retriever(method, path)``) is :mod:`jkofast.pools.retrievers`, above both wings.  Methods:

=============== ========================================================================= ========
method          what                                                                      doc_sep
=============== ========================================================================= ========
``bm25``        Okapi BM25 = rank_bm25 ``BM25Okapi`` (k1 1.5, b 0.75, epsilon 0.25),      ``". "``
                ``\w+`` tokens, no stop-words (JKO-RAG first stage, SPEC A.2.3)
``bm25-lucene`` bm25s default scoring (k1 1.5, b 0.75), ``\b\w\w+\b`` tokens,             ``" "``
                English stop-words (``stopwords=None`` to keep them; ``stemmer="porter"``
                for Porter stems, test nDCG@10 0.6685 -> 0.6885 on SciFact)
``tfidf``       TF-IDF cosine = scikit-learn ``TfidfVectorizer`` (SPEC B.2 basis)         ``" "``
``sgr``         ``jkofast.sgr.retriever.SparseGeometricRetriever`` (imported lazily)      ``" "``
=============== ========================================================================= ========
"""

from __future__ import annotations

import numpy as np

from jkofast.sparse.index import SparseIndex, TfidfIndex, load_index

__all__ = ["DOC_SEP", "SparseRetriever"]

# the title/text separator each sparse method was published with (BeirDataset.doc_texts(sep))
DOC_SEP = {"bm25": ". ", "bm25-lucene": " ", "tfidf": " "}


class SparseRetriever:
    """A retriever over a ``jkofast.sparse.index`` index (BM25 or TF-IDF).

    Parameters
    ----------
    index : SparseIndex
        An unfitted (or fitted/loaded) index.
    method : str
        Registry name, kept for ``save``/reports.
    """

    def __init__(self, index: SparseIndex, method: str = "bm25"):
        self.index = index
        self.method = method
        self.doc_sep = DOC_SEP.get(method, " ")

    def fit(self, texts) -> SparseRetriever:
        """Index one text per document."""
        self.index.fit(texts)
        return self

    @property
    def n_docs(self) -> int:
        """Number of indexed documents."""
        return self.index.n_docs

    def search(self, query_texts, k: int = 10, n_threads: int | None = None, return_report: bool = False):
        """Top-``k`` corpus rows per query: ``(indices int64 (nq, k), scores float32 (nq, k))``.

        With ``return_report=True`` also a :class:`jkofast.sparse.report.SearchReport` (the
        queries with no known term; see :meth:`jkofast.sparse.index.SparseIndex.search`).
        """
        return self.index.search(query_texts, k, n_threads=n_threads, return_report=return_report)

    def score_all(self, query_texts, n_threads: int | None = None) -> np.ndarray:
        """Full score vectors ``(nq, n_docs)`` float32."""
        return self.index.score_all(query_texts, n_threads=n_threads)

    def save(self, path: str) -> str:
        """Write the index to folder ``path`` (see :func:`jkofast.sparse.index.load_index`); returns ``path``."""
        return self.index.save(path)

    @classmethod
    def load(cls, path: str, method: str | None = None, mmap: bool = True, verify: bool = False) -> SparseRetriever:
        """Load a saved index (``method`` inferred from it when omitted; ``verify``: see ``load_index``)."""
        idx = load_index(path, mmap=mmap, verify=verify)
        if method is None:
            if isinstance(idx, TfidfIndex):
                method = "tfidf"
            else:
                method = "bm25" if idx.variant == "okapi" else "bm25-lucene"
        return cls(idx, method)
