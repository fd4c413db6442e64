"""The yardstick: ranking metrics, bootstrap confidence intervals, TREC run / qrels / score-file IO.

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "BadQueryError": "jkofast.eval.metrics",
        "BadQueryWarning": "jkofast.eval.metrics",
        "BootstrapCI": "jkofast.eval.metrics",
        "EvalResult": "jkofast.eval.metrics",
        "QrelsArrays": "jkofast.eval.trec",
        "RunArrays": "jkofast.eval.trec",
        "ScoreStream": "jkofast.eval.runio",
        "atomic_open": "jkofast.eval.runio",
        "bootstrap_ci": "jkofast.eval.metrics",
        "evaluate": "jkofast.eval.metrics",
        "evaluate_codes": "jkofast.eval.metrics",
        "format_run": "jkofast.eval.runio",
        "iter_chunks": "jkofast.eval.runio",
        "iter_score_blocks": "jkofast.eval.runio",
        "paired_bootstrap_diff": "jkofast.eval.metrics",
        "parse_metric": "jkofast.eval.metrics",
        "read_qrels": "jkofast.eval.trec",
        "read_qrels_arrays": "jkofast.eval.trec",
        "read_run": "jkofast.eval.trec",
        "read_run_arrays": "jkofast.eval.trec",
        "read_scores": "jkofast.eval.runio",
        "topk_to_ragged": "jkofast.eval.runio",
        "write_run": "jkofast.eval.trec",
    },
)
