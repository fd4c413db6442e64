"""End-to-end jobs: the SciFact main job, the sparse-only recipe and the published hyper-parameter search.

Public names are re-exported lazily: importing this package imports none of its modules.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "MainJobResult": "jkofast.studies.main_job",
        "SEARCH_SPACE": "jkofast.studies.tuning",
        "SPARSE_RECIPE": "jkofast.studies.sparse_recipe",
        "SparseRecipe": "jkofast.studies.sparse_recipe",
        "SparseRecipeCorpus": "jkofast.studies.sparse_recipe",
        "evaluate_topk": "jkofast.studies.main_job",
        "readout_topk": "jkofast.studies.main_job",
        "rerank_blocks": "jkofast.studies.main_job",
        "run_main_job": "jkofast.studies.main_job",
        "sample_configs": "jkofast.studies.tuning",
        "select_best": "jkofast.studies.tuning",
        "sparse_analyzer": "jkofast.studies.sparse_recipe",
        "sparse_only_inputs": "jkofast.studies.sparse_recipe",
        "title_texts": "jkofast.studies.sparse_recipe",
        "train_queries": "jkofast.studies.tuning",
        "tune": "jkofast.studies.tuning",
    },
)
