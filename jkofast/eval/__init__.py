"""The yardstick: ranking metrics, bootstrap CIs, TREC run / qrels / score-file IO.

Also a fast run reader, selective coverage and calibration, and the stability metrics
(W_C, Leakage@10).

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "evaluate": "jkofast.eval.metrics",
        "EvalResult": "jkofast.eval.metrics",
        "BadQueryError": "jkofast.eval.metrics",
        "BadQueryWarning": "jkofast.eval.metrics",
        "ScoreRangeWarning": "jkofast.eval._conventions",
        "bootstrap_ci": "jkofast.eval.metrics",
        "BootstrapCI": "jkofast.eval.metrics",
        "paired_bootstrap_diff": "jkofast.eval.metrics",
        "read_run": "jkofast.eval.trec",
        "read_qrels": "jkofast.eval.trec",
        "read_run_arrays": "jkofast.eval.fastread",
        "RunArrays": "jkofast.eval.trec",
        "write_run": "jkofast.eval.trec",
        "evaluate_files": "jkofast.eval.fastread",
        "evaluate_files_numpy": "jkofast.eval._npfiles",
        "selective_coverage": "jkofast.eval.selective",
        "wc_batch": "jkofast.eval.stability",
    },
    deprecated_from=[
        "metrics",
        "trec",
        "runio",
        "fastread",
        "_npfiles",
        "selective",
        "stability",
    ],  # the names it re-exported before 0.3 (one release)
)
