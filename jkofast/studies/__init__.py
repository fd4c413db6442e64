"""End-to-end jobs: the SciFact main job and the published hyper-parameter search.

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "MainJobResult": "jkofast.studies.main_job",
        "SEARCH_SPACE": "jkofast.studies.tuning",
        "SPARSE_RECIPE": "jkofast.studies.main_job",
        "SparseCorpus": "jkofast.studies.main_job",
        "evaluate_topk": "jkofast.studies.main_job",
        "readout_topk": "jkofast.studies.main_job",
        "rerank_blocks": "jkofast.studies.main_job",
        "run_main_job": "jkofast.studies.main_job",
        "sample_configs": "jkofast.studies.tuning",
        "select_best": "jkofast.studies.tuning",
        "sparse_analyzer": "jkofast.studies.main_job",
        "sparse_only_inputs": "jkofast.studies.main_job",
        "train_queries": "jkofast.studies.tuning",
        "tune": "jkofast.studies.tuning",
    },
)
