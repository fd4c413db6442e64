"""jkofast: compiled (Numba, CPU) kernels for distributional retrieval.

Importing compiles nothing; call ``jkofast.warmup()`` to compile/load every kernel.
The main entry points are re-exported lazily (PEP 562): importing ``jkofast`` imports none of
its subpackages.

Subpackages: :mod:`jkofast.ot` (Sinkhorn, entropic OT), :mod:`jkofast.jko` (JKO-RAG reranking),
:mod:`jkofast.text` (the analyser: token patterns, Unicode folding, stop words, stemmers),
:mod:`jkofast.sparse` (vocabulary, CSR TF-IDF / BM25 indexes), :mod:`jkofast.sgr`
(SparseGeometricRAG), :mod:`jkofast.pools` (candidate pools, pool baselines, the retriever registry),
:mod:`jkofast.eval` (metrics, TREC IO), :mod:`jkofast.datasets` (BEIR loading),
:mod:`jkofast.studies` (end-to-end jobs), :mod:`jkofast.commands` (the CLI);
every kernel lives in :mod:`jkofast.kernels`, whose sub-packages mirror these.
"""

from __future__ import annotations

from jkofast._lazy import lazy_exports

__version__ = "0.2.0"

__getattr__, __dir__, _names = lazy_exports(
    __name__,
    {
        "warmup": "jkofast.warmups",
        "numba_threads": "jkofast._threads",
        "ConvergenceWarning": "jkofast._status",
        "topk": "jkofast.selection",
        "sinkhorn_log": "jkofast.ot.sinkhorn",
        "SinkhornResult": "jkofast.ot.sinkhorn",
        "JKOConfig": "jkofast.jko.solver",
        "run_jko": "jkofast.jko.solver",
        "run_jko_with_duals": "jkofast.jko.solver",
        "rerank_batch": "jkofast.jko.solver",
        "operating_point": "jkofast.jko.solver",
        "pool_geometry": "jkofast.jko.solver",
        "SparseGeometricRetriever": "jkofast.sgr.retriever",
        "get_retriever": "jkofast.pools.retrievers",
        "evaluate": "jkofast.eval.metrics",
    },
)
__all__ = sorted([*_names, "__version__"])
