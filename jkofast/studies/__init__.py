"""End-to-end jobs: the SciFact main job, its read-out, the sparse-only recipe and the published hyper-parameter search.

The names below are this package's public API, imported lazily (PEP 562): importing this package
imports none of its modules.  Everything else is machinery: a ``_`` module, or a name that
stays in its own module.
"""

from jkofast._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "run_main_job": "jkofast.studies.main_job",
        "MainJobOptions": "jkofast.studies.main_job",
        "MainJobResult": "jkofast.studies.main_job",
        "STUDIES": "jkofast.studies._registry",
        "run_study": "jkofast.studies.common",
        "StudyOptions": "jkofast.studies.common",
        "StudyResult": "jkofast.studies.common",
        "SPARSE_RECIPE": "jkofast.studies.sparse_recipe",
        "SparseRecipe": "jkofast.studies.sparse_recipe",
        "readout_topk": "jkofast.studies.readout",
        "evaluate_topk": "jkofast.studies.readout",
    },
    deprecated_from=[
        "common",
        "readout",
        "main_job",
        "sparse_recipe",
        "tuning",
    ],  # the names it re-exported before 0.3 (one release)
)
