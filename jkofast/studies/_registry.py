"""The registry of ``jkofast study`` names: what each study is called, where it lives, what it does.

Plain data and no imports, so that the command line lists the studies (``jkofast study --help``,
the argument choices) without importing any of them; :func:`jkofast.studies.common.run_study`
imports a study's module only when it runs.
"""

from __future__ import annotations

__all__ = ["STUDIES"]

# name -> ("module:function", one-line description)
STUDIES: dict[str, tuple[str, str]] = {
    "dual-rank": ("jkofast.studies.dual_rank:study", "Dual-Rank: OT duals as confidence, selective coverage, ECE"),
    "mr-jko": ("jkofast.studies.multires:study", "MR-JKO / SAM-JKO multi-resolution vs vanilla (speed, nDCG)"),
    "nm-jko": ("jkofast.studies.nm_jko:study", "NM-JKO: learned low-rank ground metric (InfoNCE) vs vanilla"),
    "bw-sweep": ("jkofast.studies.bw_sweep:study", "BW-JKO: Bregman-Wasserstein proximal, alpha sweep 0..1"),
    "stability": ("jkofast.studies.stability:study", "paraphrase stability: W_C (biased, as published) and debiased"),
    "distractors": ("jkofast.studies.distractors:study", "distractor injection: Leakage@10 and nDCG@10"),
    "theory": ("jkofast.studies.theory:study", "theory E1-E4: descent, band responses, h-sweep, certified radius"),
    "linear-response": (
        "jkofast.studies.linear_response:study",
        "linear response: implicit JVP of a JKO step vs finite differences",
    ),
    "ablations": ("jkofast.studies.ablations:study", "ablations of the JKO-RAG energy, proximal term and geometry"),
    "sgr-report": (
        "jkofast.studies.sgr_report:study",
        "SparseGeometricRAG rows: frozen row (all metrics), ablation, route recall, reference rows",
    ),
    "report": ("jkofast.studies._report:study", "every study above, one Markdown report with tables and figures"),
}
