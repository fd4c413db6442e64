r"""First-stage retrievers with one interface, and a registry.

Every retriever has

* ``fit(texts: list[str]) -> self`` -- one text per document (corpus row order);
* ``search(query_texts, k, n_threads=None) -> (indices int64 (nq, k), scores float32 (nq, k))``
  -- corpus row positions, best first, ties -> lowest row, padded with ``-1`` / ``-inf``;
* ``score_all(query_texts, n_threads=None) -> float32 (nq, n_docs)`` -- full score vectors
  (sparse retrievers);
* ``save(dir)`` / ``load(dir)``;
* ``doc_sep`` -- the title/text separator the method was published with, for
  ``BeirDataset.doc_texts(sep)``.

Methods (``get_retriever(method, **params)``):

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

from jkofast.sparse.index import BM25Index, SparseIndex, TfidfIndex, load_index
from jkofast.sparse.text import SKLEARN, WORD, Analyzer

__all__ = ["METHODS", "SparseRetriever", "get_retriever", "param_types", "presets"]

METHODS = ("bm25", "bm25-lucene", "tfidf", "sgr")
DOC_SEP = {"bm25": ". ", "bm25-lucene": " ", "tfidf": " ", "sgr": " "}


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

    def search(self, query_texts, k: int = 10, n_threads: int | None = None):
        """Top-``k`` corpus rows per query: ``(indices int64 (nq, k), scores float32 (nq, k))``."""
        return self.index.search(query_texts, k, n_threads=n_threads)

    def score_all(self, query_texts, n_threads: int | None = None) -> np.ndarray:
        """Full score vectors ``(nq, n_docs)`` float32."""
        return self.index.score_all(query_texts, n_threads=n_threads)

    def save(self, path: str) -> str:
        """Write the index to folder ``path`` (see :func:`jkofast.sparse.index.load_index`); returns ``path``."""
        return self.index.save(path)

    @classmethod
    def load(cls, path: str, method: str | None = None, mmap: bool = True) -> SparseRetriever:
        """Load a saved index (``method`` inferred from it when omitted)."""
        idx = load_index(path, mmap=mmap)
        if method is None:
            if isinstance(idx, TfidfIndex):
                method = "tfidf"
            else:
                method = "bm25" if idx.variant == "okapi" else "bm25-lucene"
        return cls(idx, method)


def _analyzer(params: dict, default_pattern: str, default_stop):
    """Pop the analyser settings (or a ready ``analyzer``) from ``params`` and build the Analyzer."""
    if "analyzer" in params:
        an = params.pop("analyzer")
        if not isinstance(an, Analyzer):  # a str failed later with an AttributeError
            raise TypeError(f"analyzer must be a jkofast.sparse.text.Analyzer, got {type(an).__name__} {an!r}")
        return an
    return Analyzer(
        params.pop("token_pattern", default_pattern),
        params.pop("lowercase", True),
        params.pop("stopwords", default_stop),
        params.pop("stemmer", None),
        params.pop("compounds", False),
        params.pop("scripts", True),
    )


# the analyser's parameters (jkofast.sparse.text.Analyzer) and their types; None-valued settings
# (stopwords, stemmer, max_features) are given as these types, "none" meaning None
_ANALYSER_TYPES = {
    "token_pattern": str,
    "lowercase": bool,
    "stopwords": str,
    "stemmer": str,
    "compounds": bool,
    "scripts": bool,
    "max_features": int,
}
_SPARSE_TYPES = {
    "bm25": {"k1": float, "b": float, "epsilon": float, **_ANALYSER_TYPES},
    "bm25-lucene": {"k1": float, "b": float, **_ANALYSER_TYPES},
    "tfidf": dict(_ANALYSER_TYPES),
}


def param_types(method: str) -> dict:
    """Return ``{parameter: type}`` of what ``get_retriever(method, **params)`` accepts (the CLI's ``--param``).

    SGR: every :class:`jkofast.sgr.retriever.SparseGeometricRetriever` parameter, typed by its
    default (``bool``, ``int``, ``float`` or ``str``).

    Raises
    ------
    ValueError
        Unknown method.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    if method == "sgr":
        from jkofast.sgr.retriever import default_params

        return {k: type(v) for k, v in default_params().items()}
    return dict(_SPARSE_TYPES[method])


def presets(method: str) -> dict:
    """Return the named parameter sets of ``method`` (SGR: ``"published"``; the others: none)."""
    if method == "sgr":
        from jkofast.sgr.retriever import PRESETS

        return {k: dict(v) for k, v in PRESETS.items()}
    return {}


def get_retriever(method: str, **params):
    """Build an (unfitted) retriever by name.

    Parameters
    ----------
    method : {"bm25", "bm25-lucene", "tfidf", "sgr"}
    **params
        ``bm25``/``bm25-lucene``: ``k1``, ``b``, ``epsilon`` (okapi), ``token_pattern``,
        ``lowercase``, ``stopwords`` (``None``, ``"english"`` = ``"sklearn"``, ``"lucene"``,
        ``"bm25s"`` or a list), ``stemmer`` (``None``, ``"porter"`` or ``"snowball-<language>"``,
        PyStemmer), ``compounds``, ``scripts`` (:class:`jkofast.sparse.text.Analyzer`),
        ``max_features`` or a full ``analyzer``.
        ``tfidf``: ``token_pattern``, ``lowercase``, ``stopwords``, ``stemmer``, ``compounds``,
        ``scripts``, ``max_features``.
        ``sgr``: passed to ``jkofast.sgr.retriever.SparseGeometricRetriever``.

    Returns
    -------
    SparseRetriever or SparseGeometricRetriever

    Raises
    ------
    ValueError
        Unknown method or parameter.

    Examples
    --------
    >>> r = get_retriever("bm25").fit(["the cat sat", "a dog", "cat and dog"])
    >>> r.search(["dog"], k=2)[0].tolist()
    [[1, 2]]
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    params = dict(params)
    if method == "sgr":
        from jkofast.sgr.retriever import SparseGeometricRetriever

        return SparseGeometricRetriever(**params)
    if method in ("bm25", "bm25-lucene"):
        okapi = method == "bm25"
        an = _analyzer(params, WORD if okapi else SKLEARN, None if okapi else "english")
        kw = {k: params.pop(k) for k in ("k1", "b", "epsilon", "max_features") if k in params}
        if params:
            raise ValueError(f"unknown parameter(s) for {method}: {', '.join(sorted(params))}")
        return SparseRetriever(BM25Index("okapi" if okapi else "lucene", analyzer=an, **kw), method)
    an = _analyzer(params, SKLEARN, None)
    kw = {k: params.pop(k) for k in ("max_features",) if k in params}
    if params:
        raise ValueError(f"unknown parameter(s) for {method}: {', '.join(sorted(params))}")
    return SparseRetriever(TfidfIndex(analyzer=an, **kw), method)
