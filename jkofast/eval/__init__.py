"""The yardstick: ranking metrics, bootstrap CIs, TREC run / qrels / score-file IO.

Also a fast run reader, selective coverage and calibration, and the stability metrics
(W_C, Leakage@10).

The ``__all__`` of each module below is re-exported lazily (PEP 562): importing this package
imports none of them.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__, ["metrics", "trec", "runio", "fastread", "_npfiles", "selective", "stability"]
)
