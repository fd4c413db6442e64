"""The retriever registry: every first-stage method by name, above the ``sparse`` and ``sgr`` wings.

``get_retriever(method, **params)`` builds an unfitted retriever, ``load_retriever(method, path)``
opens a saved one, ``param_types`` / ``presets`` describe what a method accepts (the CLI's
``--param`` / ``--preset``).  Methods: ``bm25``, ``bm25-lucene``, ``tfidf``
(:class:`jkofast.sparse.retriever.SparseRetriever`) and ``sgr``
(:class:`jkofast.sgr.retriever.SparseGeometricRetriever`); see :mod:`jkofast.sparse.retriever`
for what each one is.
"""

from __future__ import annotations

from jkofast.sgr.config import PRESETS, SGRConfig
from jkofast.sgr.retriever import SparseGeometricRetriever
from jkofast.sparse.index import BM25Index, TfidfIndex
from jkofast.sparse.retriever import DOC_SEP as _SPARSE_DOC_SEP
from jkofast.sparse.retriever import SparseRetriever
from jkofast.text.analyzer import Analyzer
from jkofast.text.language import detect_language, language_analyser
from jkofast.text.patterns import SKLEARN, WORD

__all__ = ["DOC_SEP", "METHODS", "get_retriever", "language_params", "load_retriever", "param_types", "presets"]

METHODS = ("bm25", "bm25-lucene", "tfidf", "sgr")
DOC_SEP = {**_SPARSE_DOC_SEP, "sgr": SparseGeometricRetriever.doc_sep}


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


def _analyzer(params: dict, default_pattern: str, default_stop):
    """Pop the analyser settings (or a ready ``analyzer``) from ``params`` and build the Analyzer."""
    if "analyzer" in params:
        an = params.pop("analyzer")
        if not isinstance(an, Analyzer):
            raise TypeError(f"analyzer must be a jkofast.text.Analyzer, got {type(an).__name__} {an!r}")
        return an
    return Analyzer(
        params.pop("token_pattern", default_pattern),
        params.pop("lowercase", True),
        params.pop("stopwords", default_stop),
        params.pop("stemmer", None),
        params.pop("compounds", False),
        params.pop("scripts", True),
    )


# the analyser's parameters (jkofast.text.Analyzer) and their types; None-valued settings
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

    SGR: every :class:`jkofast.sgr.config.SGRConfig` field with its type (``bool``, ``int``,
    ``float`` or ``str``).

    Raises
    ------
    ValueError
        Unknown method.
    """
    _check_method(method)
    if method == "sgr":
        return SGRConfig.field_types()
    return dict(_SPARSE_TYPES[method])


def presets(method: str) -> dict:
    """Return the named parameter sets of ``method`` (SGR: ``"published"``; the others: none)."""
    if method == "sgr":
        return {k: dict(v) for k, v in PRESETS.items()}
    return {}


def language_params(texts, method: str = "bm25") -> tuple[dict, str]:
    """Return ``(params, why)``: the analyser for the dominant language of ``texts`` as ``get_retriever`` params.

    ``bm25`` / ``bm25-lucene`` / ``tfidf``: ``{"analyzer": ...}`` from
    :func:`jkofast.text.language.language_analyser` (Snowball stemmer of the language, no stop
    words; English keeps the published analyser, so ``{}``); ``sgr``: ``{}`` (its own analyser).
    ``why`` names the language found and the choice, for printing.

    Examples
    --------
    >>> language_params(["The cat is on the table and the dog is in the garden."])[0]
    {}
    """
    _check_method(method)
    guess = detect_language(texts)
    if method == "sgr" or guess.language in (None, "english"):
        return {}, f"corpus language: {guess.describe()}; {method}: its published analyser"
    an, why = language_analyser(guess.language)
    if method != "bm25":
        an = Analyzer(an.token_pattern, stemmer=an.stemmer)
    return {"analyzer": an}, f"corpus language: {guess.describe()}; {method} analyser: {why}"


def get_retriever(method: str, **params):
    """Build an (unfitted) retriever by name.

    Parameters
    ----------
    method : {"bm25", "bm25-lucene", "tfidf", "sgr"}
    **params
        ``bm25``/``bm25-lucene``: ``k1``, ``b``, ``epsilon`` (okapi), ``token_pattern``,
        ``lowercase``, ``stopwords`` (``None``, ``"english"`` = ``"sklearn"``, ``"lucene"``,
        ``"bm25s"`` or a list), ``stemmer`` (``None``, ``"porter"`` or ``"snowball-<language>"``,
        PyStemmer), ``compounds``, ``scripts`` (:class:`jkofast.text.Analyzer`),
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
    _check_method(method)
    params = dict(params)
    if method == "sgr":
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


def load_retriever(method: str, path: str, *, mmap: bool = True, name: str | None = None):
    """Open the retriever of ``method`` saved in folder ``path``.

    Parameters
    ----------
    method : {"bm25", "bm25-lucene", "tfidf", "sgr"}
        The method the folder must hold.
    path : str
        A folder written by the retriever's ``save``.
    mmap : bool
        Memory-map the saved arrays (opens in seconds; pages are read on demand).
    name : str, optional
        How messages name the folder (for example ``"--index"``); by default its path.

    Returns
    -------
    SparseRetriever or SparseGeometricRetriever

    Raises
    ------
    ValueError
        Unknown method, or the folder holds another method's index.
    """
    _check_method(method)
    if method == "sgr":
        return SparseGeometricRetriever.load(path, mmap=mmap)
    retr = SparseRetriever.load(path, mmap=mmap)
    if retr.method != method:
        raise ValueError(f"{name or repr(path)} holds a {retr.method} index, not {method}")
    return retr
