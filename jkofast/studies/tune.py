r"""``jkofast tune``: the operating point of JKO-RAG selected on a user's corpus, by cross-validation.

Inputs computed once and reused by every point of the grid (:func:`prepare`): the lexical index
of the chosen analyser, the full-corpus BM25 and dense scores, the hybrid pools (BM25 top-500 +
dense top-500, global RRF, first 200), the pool geometry (MiniLM rows) and the rerank term (the
BM25 pool score, or the user's scores).  Each grid point is then one energy, one flow (or none)
and one read-out; its per-query nDCG@10 fills one row of a score matrix (points x queries).

The grid (:func:`grid`) always holds the corners, first (so that a tie goes to the simpler point):

* ``dense`` -- the full-corpus dense ranking alone;
* ``bm25``  -- the full-corpus BM25 ranking with the corpus's analyser alone;
* every energy ``r = α minmax(dense) + β minmax(lexical) + γ minmax(rerank)`` of the grid read
  out without the flow (``T = 0``);

then the JKO points (``T >= 1``): ``published`` = the 25 configurations of the published search
(:func:`jkofast.studies.tuning.sample_configs`; the SciFact point is its #12); ``wide`` = those
plus a finer weight grid read out and flowed at the ``tuned`` and ``fast`` operating points.

Selection (:func:`select_point`, :func:`cross_validate`): by default the one-standard-error
rule -- among the points whose mean on the selection queries is within one standard error of the
best mean (the standard error of the paired per-query difference to the best point), the simplest
(:func:`complexity`: corners, then read-outs of one, two, three weights, then flows), and within
the simplest level the highest mean; ``rule="best"`` takes the highest mean.  With a
train split the selected point is reported on the test queries.  Without one, K folds over the
judged queries (seeded permutation, fold ``i % K``); the point of fold ``f`` is selected on the
other folds, and every query of fold ``f`` is scored by it: the *out-of-fold* nDCG@10, which no
query helped to select.  Ties go to the first point (corners first).  The lexical corners are
BM25 okapi and Lucene-style BM25 with each analyser searched, and for English also with the
Lucene stop-word list.

The point file (:func:`save_point` / :func:`load_point`) is JSON holding every selected value,
the analyser, the grid with its mean scores, the folds' choices and the out-of-fold scores.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from typing import NamedTuple

import numpy as np

from jkofast._io import atomic_write_json, atomic_write_text, check_writable_dir
from jkofast._validation import check_int
from jkofast.datasets.beir import load_dataset
from jkofast.eval.metrics import bootstrap_ci, paired_bootstrap_diff
from jkofast.eval.runio import strictly_decreasing
from jkofast.eval.trec import write_run
from jkofast.jko.config import FLOW_FIELDS, POINT_FORMAT, point_file_config, published_point, read_point_file
from jkofast.jko.energy import align_scores, blend, read_score_file, softmax_tau
from jkofast.jko.solver import JKOConfig, operating_point, rerank_batch
from jkofast.pools.baselines import inpool_rrf, positions_to_docs, topk_by_score
from jkofast.pools.candidates import Pools, build_pools, dense_scores, top_lists
from jkofast.pools.retrievers import get_retriever
from jkofast.studies._select import RULES, complexity, cross_validate, kfold, select_point
from jkofast.studies.readout import K_EVAL, K_READ, evaluate_topk
from jkofast.studies.tuning import sample_configs
from jkofast.text.analyzer import Analyzer
from jkofast.text.language import detect_language, language_analyser

__all__ = [
    "CORNER_KINDS",
    "GRIDS",
    "POINT_FORMAT",
    "RULES",
    "OperatingPoint",
    "TuneData",
    "complexity",
    "cross_validate",
    "encoder_note",
    "grid",
    "kfold",
    "lexical_top",
    "load_point",
    "pool_topk",
    "prepare",
    "run_point",
    "save_point",
    "score_grid",
    "select_point",
    "tune_dataset",
    "write_per_query",
    "write_runs",
]

GRIDS = ("published", "wide")
# the single-input corners: the full-corpus dense ranking, BM25 okapi, Lucene-style BM25 (bm25s / Lucene idf)
CORNER_KINDS = ("dense", "bm25", "bm25-lucene")
LEXICAL_KINDS = ("bm25", "bm25-lucene")
DEFAULT_EMBEDDINGS = "minilm-l6-v2"
POOL = 200  # pool size M of the hybrid pools (SPEC A.2.6); the wide grid also tries WIDE_POOL
WIDE_POOL = 100
ENGLISH_ENCODERS = ("minilm",)


# ---------------------------------------------------------------------------------------------
# the grid
# ---------------------------------------------------------------------------------------------
def _flow(cfg: JKOConfig) -> dict:
    return {k: getattr(cfg, k) for k in FLOW_FIELDS}


def _readout(alpha, beta, gamma, pool=POOL) -> dict:
    return {
        "kind": "jko",
        "alpha": float(alpha),
        "beta": float(beta),
        "gamma": float(gamma),
        **_flow(operating_point("tuned")),
        "T": 0,
        "pool": int(pool),
    }


def grid(name: str = "published", *, lexical_rerank: bool = True) -> list[dict]:
    """Return the grid points of ``name`` (``"published"`` or ``"wide"``), corners first.

    Each point is a dict: ``kind`` (a corner of :data:`CORNER_KINDS` or ``"jko"``) and, for ``"jko"``,
    the energy weights ``alpha`` (dense), ``beta`` (lexical), ``gamma`` (rerank) and the flow
    fields ``h, lam, rho, sinkhorn_eps, T, inner_steps, tau0`` (``T = 0``: no flow, ``r`` read out).

    Parameters
    ----------
    lexical_rerank : bool
        The rerank term is the lexical pool score (no cross-encoder scores given): the β term
        would repeat γ, so β stays 0.  With user rerank scores the wide grid also varies β.

    Raises
    ------
    ValueError
        Unknown grid name.
    """
    if name not in GRIDS:
        raise ValueError(f"grid must be one of {', '.join(GRIDS)}, got {name!r}")
    flows = []
    for c in sample_configs(25):
        if c["alpha"] == 0 and c["gamma"] == 0:
            continue  # no energy at all: the published search scores it 0 without running
        flows.append(
            {
                "kind": "jko",
                "alpha": c["alpha"],
                "beta": 0.0,
                "gamma": c["gamma"],
                **{k: c[k] for k in FLOW_FIELDS},
                "pool": POOL,
            }
        )
    weights = sorted({(p["alpha"], p["beta"], p["gamma"], POOL) for p in flows})
    if name == "wide":
        steps = [round(0.1 * i, 1) for i in range(11)]
        betas = (0.0,) if lexical_rerank else (0.0, 0.3)
        fine = [(a, b, g, m) for a in steps for b in betas for g in steps for m in (POOL, WIDE_POOL) if a + b + g > 0]
        weights = sorted(set(weights) | set(fine))
        for point, m in (("tuned", POOL), ("fast", POOL), ("tuned", WIDE_POOL)):
            fl = _flow(operating_point(point))
            for a in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
                flows.append({"kind": "jko", "alpha": a, "beta": 0.0, "gamma": round(1.0 - a, 1), **fl, "pool": m})
    corners = [{"kind": k} for k in CORNER_KINDS]
    return corners + [_readout(*w) for w in weights] + flows


def describe_point(p: dict, analysers=None) -> str:
    """One line naming a grid point (``analysers``: the tune's list, to name a lexical corner's analyser)."""
    if p["kind"] != "jko":
        an = p.get("analyser")
        if analysers is not None and p["kind"] in LEXICAL_KINDS and an is not None and an < len(analysers):
            return f"{p['kind']} only ({analysers[an]['why']})"
        return f"{p['kind']} only"
    w = f"alpha {p['alpha']:g}, beta {p['beta']:g}, gamma {p['gamma']:g}"
    if p.get("pool", POOL) != POOL:
        w += f"; pool {p['pool']}"
    if p["T"] == 0:
        return f"readout ({w}; no flow)"
    f = ", ".join(f"{k} {p[k]:g}" for k in FLOW_FIELDS)
    return f"jko ({w}; {f})"


# ---------------------------------------------------------------------------------------------
# inputs computed once
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class TuneData:
    """The inputs every grid point reuses (one analyser): pools, geometry, full-corpus rankings."""

    query_ids: list
    qrels: dict
    doc_ids: list
    analyser: Analyzer
    pools: object
    rerank: np.ndarray
    Z: np.ndarray
    dense_top: tuple  # (rows, scores) (nq, K_READ)
    bm25_top: tuple
    seconds: dict
    lexical_tops: dict = dataclasses.field(default_factory=dict)  # kind -> (rows, scores): bm25, bm25-lucene


def lexical_top(ds, query_ids, analyser: Analyzer, kind: str = "bm25-lucene", n_threads=None):
    """Full-corpus ranking ``(rows, scores)`` (nq, K_READ) of the lexical corner ``kind`` with ``analyser``."""
    if kind not in LEXICAL_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LEXICAL_KINDS)}, got {kind!r}")
    retr = get_retriever(kind, analyzer=analyser).fit(ds.doc_texts(". "))
    queries = ds.queries
    S = retr.score_all([queries[q] for q in query_ids], n_threads=n_threads)
    return top_lists(S, K_READ, n_threads)


def prepare(
    ds, query_ids, qrels, embeddings, analyser: Analyzer, *, scores_file=None, n_threads=None, log=None
) -> TuneData:
    """Compute the shared inputs of the grid for ``query_ids`` of dataset ``ds``.

    ``embeddings`` = ``(doc_emb, query_emb)`` with query rows aligned to ``query_ids``.
    """
    log = log or (lambda m: None)
    secs = {}
    t = time.perf_counter()
    retr = get_retriever("bm25", analyzer=analyser).fit(ds.doc_texts(". "))
    queries = ds.queries
    S = retr.score_all([queries[q] for q in query_ids], n_threads=n_threads)
    bm25_top = top_lists(S, K_READ, n_threads)
    secs["bm25"] = time.perf_counter() - t
    t = time.perf_counter()
    doc_emb, q_emb = embeddings
    D = dense_scores(doc_emb, q_emb)
    dense_top = top_lists(D, K_READ, n_threads)
    P = build_pools(S, D, query_ids=list(query_ids), each_n=500, M=200, n_threads=n_threads)
    del S, D
    if scores_file:
        user = read_score_file(scores_file)
        rer, missing = align_scores(user, list(query_ids), P.offsets, [ds.doc_ids[i] for i in P.doc_idx])
        log(f"rerank term = {scores_file} ({missing} pool pairs missing)")
    else:
        rer = P.sparse
    Z = np.ascontiguousarray(doc_emb[P.doc_idx], dtype=np.float32)
    secs["dense_pools"] = time.perf_counter() - t
    t = time.perf_counter()
    lucene_top = lexical_top(ds, query_ids, analyser, "bm25-lucene", n_threads)
    secs["bm25-lucene"] = time.perf_counter() - t
    lex = {"bm25": bm25_top, "bm25-lucene": lucene_top}
    return TuneData(list(query_ids), qrels, ds.doc_ids, analyser, P, rer, Z, dense_top, bm25_top, secs, lex)


def pool_topk(values, P, k=K_READ):
    """Return the top-k corpus rows of every pool by flat ``values`` and their values (padding -1 / -inf)."""
    pos = topk_by_score(np.asarray(values, np.float64), P.offsets, k)
    rows = positions_to_docs(pos, P.offsets, P.doc_idx)
    vals = np.full(pos.shape, -np.inf)
    ok = pos >= 0
    flat = (P.offsets[:-1, None] + np.maximum(pos, 0))[ok]
    vals[ok] = np.asarray(values, np.float64)[flat]
    return rows, vals


def run_point(data: TuneData, p: dict, *, grad="implicit", n_threads=None, cache=None):
    """Ranked rows and scores ``(rows, values)`` (nq, K_READ) of one grid point on ``data``."""
    if p["kind"] == "dense":
        return data.dense_top
    if p["kind"] == "bm25":
        return data.bm25_top
    if p["kind"] in LEXICAL_KINDS:
        if p["kind"] not in data.lexical_tops:
            raise ValueError(f"no {p['kind']} ranking in these inputs (prepare() computes it)")
        return data.lexical_tops[p["kind"]]
    m = int(p.get("pool", POOL))
    P, rerank, Z = _pool_inputs(data, m, cache)
    key = (p["alpha"], p["beta"], p["gamma"], m)
    r = None if cache is None else cache.get(key)
    if r is None:
        r = blend(P.offsets, dense=P.dense, sparse=P.sparse, rerank=rerank, alpha=p["alpha"], beta=p["beta"],
                  gamma=p["gamma"], n_threads=n_threads).astype(np.float64)  # fmt: skip
        if cache is not None:
            cache[key] = r
    if p["T"] == 0:
        return pool_topk(r, P)
    cfg = _config(p, grad)
    p0 = softmax_tau(r, P.offsets, cfg.tau0, n_threads=n_threads)
    res = rerank_batch(-r, p0, P.offsets, embeddings=Z, config=cfg, n_threads=n_threads, warn_unconverged=False)
    return pool_topk(res.p, P)


def _pool_inputs(data, m: int, cache=None):
    """Return ``(pools, rerank, Z)`` cut to the first ``m`` entries of every pool (fused-rank order)."""
    full = data.pools
    sizes = np.diff(full.offsets)
    if not sizes.size or m >= sizes.max():
        return full, data.rerank, data.Z
    if cache is not None and ("pool", m) in cache:
        return cache["pool", m]
    new = np.minimum(sizes, m)
    keep = np.concatenate([np.arange(a, a + n) for a, n in zip(full.offsets[:-1], new)]).astype(np.int64)
    off = np.zeros_like(full.offsets)
    np.cumsum(new, out=off[1:])
    cut = lambda x: None if x is None else x[keep]  # noqa: E731
    P = Pools(full.query_ids, off, full.doc_idx[keep], full.sparse[keep], cut(full.dense), cut(full.fused))
    out = (P, data.rerank[keep], np.ascontiguousarray(data.Z[keep]))
    if cache is not None:
        cache["pool", m] = out
    return out


def _config(p: dict, grad=None) -> JKOConfig:
    fields = {k: p[k] for k in FLOW_FIELDS}
    fields["T"] = int(fields["T"])
    fields["inner_steps"] = int(fields["inner_steps"])
    if grad is not None:
        fields["grad"] = grad
    return operating_point("tuned", mode="wasserstein", **fields)


def score_grid(data: TuneData, points, *, grad="implicit", n_threads=None, progress=None):
    """Per-query nDCG@10 of every point: ``(scores (n_points, nq), tops list of (rows, values))``."""
    scores = np.empty((len(points), len(data.query_ids)))
    tops, cache = [], {}
    for i, p in enumerate(points):
        t = time.perf_counter()
        top = run_point(data, p, grad=grad, n_threads=n_threads, cache=cache)
        m = evaluate_topk(top[0], data.query_ids, data.qrels, data.doc_ids, K_EVAL)
        scores[i] = m["ndcg"]
        tops.append((top[0].astype(np.int32), top[1]))
        if progress is not None:
            progress(i, p, float(scores[i].mean()), time.perf_counter() - t)
    return scores, tops


# ---------------------------------------------------------------------------------------------
# language and encoder
# ---------------------------------------------------------------------------------------------
def encoder_note(language: str | None, embeddings_name: str) -> str | None:
    """Return the warning for an English-only dense encoder on a corpus in another language (or None)."""
    if language in (None, "english") or not any(e in embeddings_name.lower() for e in ENGLISH_ENCODERS):
        return None
    return (
        f"the dense encoder ({embeddings_name}, all-MiniLM-L6-v2) is English-only and the corpus is {language}: "
        "the dense, hybrid and JKO rows measure an English encoder on "
        f"{language} text (expect them near the floor); the lexical rows are the meaningful ones"
    )


# ---------------------------------------------------------------------------------------------
# the whole tune
# ---------------------------------------------------------------------------------------------
def _analysers(language, grid_name):
    """Return the analysers searched: the corpus language's first; ``wide`` adds the published one when different."""
    an, why = language_analyser(language, published_english=False)
    out = [(an, why)]
    plain, pwhy = language_analyser(None)
    if grid_name == "wide" and plain != an:
        out.append((plain, pwhy))
    return out


def _corner_analysers(language, analysers) -> list:
    """Return the analysers tried by the lexical corners only: for English, each searched one with Lucene's stop words.

    Stop-word lists exist for English only (:mod:`jkofast.text.stopwords`); other languages get none.
    """
    if language != "english":
        return []
    out = []
    for an, why in analysers:
        if an.stopwords is None:
            why = why.replace("no stop words", "Lucene stop words") + " (lexical corners only)"
            out.append((dataclasses.replace(an, stopwords="lucene"), why))
    return out


def tune_dataset(
    dataset: str,
    *,
    split: str | None = None,
    eval_split: str = "test",
    folds: int = 5,
    grid_name: str = "published",
    seed: int = 0,
    embeddings: str | None = None,
    scores_file: str | None = None,
    grad: str = "implicit",
    n_threads: int | None = None,
    progress: bool = True,
    rule: str = "1se",
) -> dict:
    """Select an operating point on ``dataset`` and report it (the ``jkofast tune`` work).

    Parameters
    ----------
    dataset : str
        ``"scifact"`` or a BEIR folder with saved embeddings (``embeddings/minilm-l6-v2``).
    split : str or None
        A train split: select on it, report on ``eval_split``.  None: ``folds``-fold
        cross-validation over the judged queries of ``eval_split`` (out-of-fold scores).
    folds : int
        K of the cross-validation (>= 2).
    grid_name : {"published", "wide"}
    seed : int
        Seed of the fold permutation.
    embeddings, scores_file, grad, n_threads, progress
        As ``jkofast run``.
    rule : {"1se", "best"}
        Selection rule (:func:`select_point`): the one-standard-error rule, or the highest mean.

    Returns
    -------
    dict
        The point file's content (:func:`save_point`), plus ``tops`` (the out-of-fold and baseline
        rankings, not saved) for ``--runs`` / ``--per-query``.

    Raises
    ------
    ValueError
        No saved embeddings, a split without judged queries, bad ``folds`` / ``grid_name``.
    """
    t0 = time.perf_counter()

    def log(msg):
        if progress:
            print(f"jkofast tune: {msg}", file=sys.stderr, flush=True)

    if grid_name not in GRIDS:
        raise ValueError(f"grid must be one of {', '.join(GRIDS)}, got {grid_name!r}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    folds = check_int(folds, "folds", min_value=2)
    ds = load_dataset(dataset)
    emb_name = embeddings or DEFAULT_EMBEDDINGS
    emb, qids, n_sel, qrels, q_emb = _inputs(ds, emb_name, split, eval_split, folds)

    guess = detect_language(ds.doc_texts(" "))
    log(f"corpus language: {guess.describe()}")
    notes = []
    enc = encoder_note(guess.language, emb_name)
    if enc:
        notes.append(enc)
        log(f"warning: {enc}")
    points = grid(grid_name, lexical_rerank=scores_file is None)
    inputs = (ds, qids, qrels, (emb[0], q_emb))
    tried = _analysers(guess.language, grid_name)
    all_points, S, all_tops, analysers, secs, first = _score_analysers(
        inputs, points, tried, scores_file, grad, n_threads, log, _corner_analysers(guess.language, tried)
    )
    levels = [complexity(p) for p in all_points]
    sel_cols, ev_cols, fold_of, choices, oof, chosen, final = _select(S, n_sel, folds, seed, levels, rule)
    ev_ids = [qids[i] for i in ev_cols]
    base_rows, extra = _baseline_rows(inputs, first, S, all_points, chosen, ev_cols, grad, n_threads)
    baselines = {}
    for name, v in base_rows.items():
        m, lo, hi = bootstrap_ci(v)
        d = paired_bootstrap_diff(oof, v)
        baselines[name] = {"ndcg10": m, "ci": [lo, hi], "oof_minus": [d.mean, d.lo, d.hi]}
    m, lo, hi = bootstrap_ci(oof)
    sel_means = S[:, sel_cols].mean(axis=1)
    out = {
        "format": POINT_FORMAT,
        "dataset": dataset,
        "protocol": "train-test" if split else f"{folds}-fold",
        "selection_split": split or eval_split,
        "eval_split": eval_split,
        "n_selection_queries": len(sel_cols),
        "n_eval_queries": len(ev_cols),
        "seed": seed,
        "grid_name": grid_name,
        "language": {"script": guess.script, "language": guess.language, "share": guess.share},
        "analysers": analysers,
        "embeddings": emb_name,
        "rerank": scores_file or "bm25 pool score",
        "grad": grad,
        "selected": _public(all_points[final]),
        "selected_index": int(final),
        "selected_description": describe_point(all_points[final], analysers),
        "analyser": analysers[all_points[final]["analyser"]]["analyser"],
        "grid": [_public(p) | {"analyser": p["analyser"]} for p in all_points],
        "grid_ndcg10": [float(x) for x in sel_means],
        "folds": [
            {
                "fold": f,
                "index": int(c),
                "description": describe_point(all_points[c], analysers),
                "queries": [qids[j] for j in ev_cols if fold_of is None or fold_of[j] == f],
            }
            for f, c in enumerate(choices)
        ],
        "oof_ndcg10": m,
        "oof_ci": [lo, hi],
        "oof_per_query": dict(zip(ev_ids, (float(x) for x in oof), strict=True)),
        "baselines": baselines,
        "selection": _selection_report(S, all_points, analysers, levels, oof, (n_sel, folds, seed), rule, ev_cols),
        "notes": notes,
        "seconds": {**secs, "total": time.perf_counter() - t0},
    }
    tops = _oof_tops(all_tops, all_points, chosen, ev_cols, extra)
    per_query = {"tune_oof": oof, **base_rows}
    return {**out, "_tops": tops, "_per_query": per_query, "_query_ids": ev_ids, "_doc_ids": ds.doc_ids}


def _score_analysers(inputs, points, analysers_to_try, scores_file, grad, n_threads, log, corner_only=()):
    """Score every grid point under each analyser: ``(points, scores (n, nq), tops, analysers, seconds, first data)``.

    The pools, geometry and embeddings of an analyser are prepared once and reused by all its points;
    the analysers of ``corner_only`` add the lexical corners alone.
    """
    ds, qids, qrels, rows = inputs
    all_points, all_scores, all_tops, analysers, secs, first = [], [], [], [], {}, None
    for an, why in analysers_to_try:
        log(f"analyser: {why}")
        analysers.append({"analyser": an.to_dict(), "why": why})
        t = time.perf_counter()
        data = prepare(ds, qids, qrels, rows, an, scores_file=scores_file, n_threads=n_threads, log=log)
        secs[f"prepare[{len(analysers) - 1}]"] = time.perf_counter() - t
        t = time.perf_counter()
        S, tops = score_grid(data, points, grad=grad, n_threads=n_threads, progress=_grid_log(log, len(points)))
        secs[f"grid[{len(analysers) - 1}]"] = time.perf_counter() - t
        all_points.extend({**p, "analyser": len(analysers) - 1} for p in points)
        all_scores.append(S)
        all_tops.extend(tops)
        first = data if first is None else first
    for an, why in corner_only:  # lexical corners only: no pools, no grid
        log(f"analyser: {why}")
        analysers.append({"analyser": an.to_dict(), "why": why})
        t = time.perf_counter()
        for kind in LEXICAL_KINDS:
            top = lexical_top(ds, qids, an, kind, n_threads)
            nd = evaluate_topk(top[0], qids, qrels, ds.doc_ids, K_EVAL)["ndcg"]
            all_points.append({"kind": kind, "analyser": len(analysers) - 1})
            all_scores.append(nd[None, :])
            all_tops.append((top[0].astype(np.int32), top[1]))
            log(f"  {kind} ({why}): nDCG@10 {nd.mean():.4f}")
        secs[f"corners[{len(analysers) - 1}]"] = time.perf_counter() - t
    return all_points, np.vstack(all_scores), all_tops, analysers, secs, first


def _baseline_rows(inputs, first, S, all_points, chosen, ev_cols, grad, n_threads):
    """Per-query nDCG@10 of the baselines on the evaluated queries, and what their runs need.

    ``dense`` and ``bm25`` (the grid's corners), ``hybrid_rrf`` (in-pool RRF), ``readout`` (the chosen
    energy read out without the flow) and ``published`` (the published SciFact point).
    """
    ds, qids, qrels, _ = inputs
    P = first.pools
    hy_pos = inpool_rrf(P.sparse, P.dense, P.offsets, K_READ, n_threads=n_threads)
    hy_rows = positions_to_docs(hy_pos, P.offsets, P.doc_idx)
    hy = evaluate_topk(hy_rows, qids, qrels, ds.doc_ids, K_EVAL)["ndcg"]
    pub_top = run_point(first, published_point(), grad=grad, n_threads=n_threads)
    pub = evaluate_topk(pub_top[0], qids, qrels, ds.doc_ids, K_EVAL)["ndcg"]
    twin = _readout_twins(all_points)
    base_rows = {
        "dense": S[_index(all_points, "dense", 0), ev_cols],
        "bm25": S[_index(all_points, "bm25", 0), ev_cols],
        "hybrid_rrf": hy[ev_cols],
        "readout": np.array([S[twin[c], j] for c, j in zip(chosen, ev_cols)]),
        "published": pub[ev_cols],
    }
    return base_rows, {"hy_rows": hy_rows, "pub_top": pub_top, "twin": twin}


def _oof_tops(all_tops, all_points, chosen, ev_cols, extra) -> dict:
    """Return the rankings behind every reported row on the evaluated queries (``--runs``): out-of-fold, baselines."""
    hy_rows, twin = extra["hy_rows"], extra["twin"]
    return {
        "tune_oof": (
            np.stack([all_tops[c][0][j] for c, j in zip(chosen, ev_cols)]),
            np.stack([all_tops[c][1][j] for c, j in zip(chosen, ev_cols)]),
        ),
        "dense": _cols(all_tops[_index(all_points, "dense", 0)], ev_cols),
        "bm25": _cols(all_tops[_index(all_points, "bm25", 0)], ev_cols),
        "hybrid_rrf": (
            hy_rows[ev_cols],
            np.where(hy_rows[ev_cols] >= 0, -np.arange(K_READ, dtype=np.float64), -np.inf),
        ),
        "readout": (
            np.stack([all_tops[twin[c]][0][j] for c, j in zip(chosen, ev_cols)]),
            np.stack([all_tops[twin[c]][1][j] for c, j in zip(chosen, ev_cols)]),
        ),
        "published": _cols(extra["pub_top"], ev_cols),
    }


def _inputs(ds, emb_name, split, eval_split, folds):
    """Embeddings, the queries (selection ones first), their count, the qrels and the query rows."""
    emb = ds.embeddings(emb_name)
    if emb is None:
        raise ValueError(
            f"no saved embeddings in {os.path.join(ds.path, 'embeddings', emb_name)}: the grid needs the dense "
            f"rows; make them with: jkofast embed --dataset {ds.path}"
        )
    eval_q = ds.split_query_ids(eval_split)
    sel_q = ds.split_query_ids(split) if split else []
    if not eval_q:
        raise ValueError(f"split {eval_split!r} has no judged queries")
    if split and not sel_q:
        raise ValueError(f"split {split!r} has no judged queries")
    if not split and len(eval_q) < folds:
        raise ValueError(f"{folds} folds need at least {folds} judged queries, {eval_split!r} has {len(eval_q)}")
    seen = set(sel_q)
    qids = sel_q + [q for q in eval_q if q not in seen]
    qrels = {**ds.qrels(eval_split), **(ds.qrels(split) if split else {})}
    qrow = {q: i for i, q in enumerate(ds.query_ids)}
    return emb, qids, len(sel_q), qrels, emb[1][[qrow[q] for q in qids]]


def _select(S, n_sel: int, folds: int, seed: int, levels=None, rule: str = "best"):
    """``(sel_cols, ev_cols, fold_of, choices, oof, chosen, final)``: train/test when ``n_sel``, else K-fold."""
    nq = S.shape[1]
    if n_sel:
        sel_cols, ev_cols = np.arange(n_sel), np.arange(n_sel, nq)
        choice = select_point(S[:, sel_cols], levels, rule)[0]
        return sel_cols, ev_cols, None, [choice], S[choice, ev_cols], np.full(len(ev_cols), choice), choice
    fold_of = kfold(nq, folds, seed)
    choices, oof, chosen = cross_validate(S, fold_of, levels, rule)
    cols = np.arange(nq)
    return cols, cols, fold_of, choices, oof, chosen, select_point(S, levels, rule)[0]


def _selection_report(S, points, analysers, levels, oof, protocol, rule, ev_cols) -> dict:
    """Return what the selection cost: the out-of-fold score against the best single input and the other rule.

    ``best_corner`` is the corner with the highest mean on the reported queries, chosen after the
    fact (an oracle no fold could know); ``cost`` = out-of-fold mean − its mean (negative: the
    selection lost that much to its best input).  ``other_rule``: the out-of-fold mean the other
    rule of :data:`RULES` gives on the same folds.  ``folds``: per fold, the best point on its
    selection queries, that mean's standard error and the chosen point.
    """
    n_sel, k, seed = protocol
    corners = [i for i, lv in enumerate(levels) if lv == 0]
    cmeans = {i: float(S[i, ev_cols].mean()) for i in corners}
    bc = max(corners, key=lambda i: (cmeans[i], -i))
    other = RULES[1] if rule == RULES[0] else RULES[0]
    nq = S.shape[1]
    if n_sel:
        per_fold = [(np.arange(n_sel), None)]
        other_oof = S[select_point(S[:, :n_sel], levels, other)[0], ev_cols]
    else:
        fold_of = kfold(nq, k, seed)
        per_fold = [(np.flatnonzero(fold_of != f), f) for f in range(k)]
        other_oof = cross_validate(S, fold_of, levels, other)[1]
    folds = []
    for cols, f in per_fold:
        c, info = select_point(S[:, cols], levels, rule)
        folds.append({"fold": f, "chosen": int(c), **info})
    return {
        "rule": rule,
        "folds": folds,
        "corners": {describe_point(points[i], analysers): cmeans[i] for i in corners},
        "best_corner": {"index": int(bc), "description": describe_point(points[bc], analysers), "ndcg10": cmeans[bc]},
        "oof_ndcg10": float(np.mean(oof)),
        "cost": float(np.mean(oof) - cmeans[bc]),
        "other_rule": {"rule": other, "oof_ndcg10": float(np.mean(other_oof))},
    }


def _grid_log(log, n):
    """Return the grid's progress callback: one line per corner and flow (read-outs are instant)."""

    def prog(i, p, s, dt):
        if p["kind"] != "jko" or p["T"] > 0:
            log(f"  [{i + 1}/{n}] {describe_point(p)}: nDCG@10 {s:.4f} ({dt:.1f} s)")

    return prog


def _cols(top, cols):
    return top[0][cols], top[1][cols]


def _index(points, kind, analyser):
    return next(i for i, p in enumerate(points) if p["kind"] == kind and p["analyser"] == analyser)


def _readout_twins(points) -> list[int]:
    """For each point, the index of the same energy read out without the flow (corners: themselves)."""
    at = {}
    for i, p in enumerate(points):
        if p["kind"] == "jko" and p["T"] == 0:
            at.setdefault((p["alpha"], p["beta"], p["gamma"], p.get("pool", POOL), p["analyser"]), i)
    out = []
    for i, p in enumerate(points):
        if p["kind"] != "jko":
            out.append(i)
        else:
            out.append(at[p["alpha"], p["beta"], p["gamma"], p.get("pool", POOL), p["analyser"]])
    return out


def _public(p: dict) -> dict:
    q = {k: v for k, v in p.items() if k != "analyser"}
    for k, v in q.items():
        if isinstance(v, np.generic):
            q[k] = v.item()
    return q


# ---------------------------------------------------------------------------------------------
# the point file
# ---------------------------------------------------------------------------------------------
class OperatingPoint(NamedTuple):
    """A loaded point file: the JKO configuration, the energy weights and the lexical analyser.

    ``weights``: ``kind`` (``"jko"``, ``"dense"``, ``"bm25"`` or ``"bm25-lucene"``), ``alpha`` (dense), ``beta``
    (lexical), ``gamma`` (rerank), ``pool`` (the first ``pool`` entries of each hybrid pool);
    ``config.T == 0`` means the energy is read out without the flow.
    The corners load as their pool read-outs (``dense``: α = 1; ``bm25``: β = 1; ``T = 0``).
    """

    config: JKOConfig
    weights: dict
    analyser: Analyzer


def save_point(result: dict, path) -> None:
    """Write the point file (``result`` from :func:`tune_dataset`; private ``_`` keys are left out)."""
    atomic_write_json(path, {k: v for k, v in result.items() if not k.startswith("_")})


def load_point(path) -> OperatingPoint:
    """Read a point file written by ``jkofast tune --out``.

    Raises
    ------
    ValueError
        Not JSON, another format, a missing or invalid selected value.
    FileNotFoundError
        No such file.
    """
    d = read_point_file(path)
    sel, an = d["selected"], d.get("analyser")
    if not isinstance(an, dict):
        raise ValueError(f"{path}: 'selected' and 'analyser' must name a point (kind jko, {', '.join(CORNER_KINDS)})")
    try:
        analyser = Analyzer.from_dict(an)
        kind = sel["kind"]
        if kind == "jko":
            w = {"kind": kind, **{k: float(sel[k]) for k in ("alpha", "beta", "gamma")}}
            w["pool"] = check_int(sel.get("pool", POOL), "pool", min_value=1)
            for k, v in w.items():
                if k != "kind" and (not math.isfinite(v) or v < 0):
                    raise ValueError(f"weight {k} = {v}")
        else:
            w = {
                "kind": kind,
                "alpha": float(kind == "dense"),
                "beta": float(kind in LEXICAL_KINDS),
                "gamma": 0.0,
                "pool": POOL,
            }
        cfg = point_file_config(path, d)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: invalid selected point ({type(exc).__name__}: {exc})") from None
    return OperatingPoint(cfg, w, analyser)


# ---------------------------------------------------------------------------------------------
# checkable outputs: TREC runs and per-query values
# ---------------------------------------------------------------------------------------------
def write_runs(folder, tops: dict, query_ids, doc_ids) -> list[str]:
    """Write one TREC run per method, ``folder/<method>.run``; return the paths.

    ``tops``: ``method -> (rows, scores)`` (nq, k) corpus rows and their scores (padding -1 / -inf).
    Scores are written at full precision (the shortest decimal reading back to the same float).
    A score tied at float32 with the one ranked above it is lowered to the next float32 below that
    one, so that trec_eval (float32 scores, ties by document id) reads each ranking in jkofast's order.
    """
    folder = check_writable_dir(folder, "--runs")
    paths = []
    for name, (rows, vals) in tops.items():
        path = os.path.join(folder, f"{name}.run")
        rows = np.asarray(rows, np.int64)
        vals = strictly_decreasing(np.where(rows >= 0, np.asarray(vals, np.float64), -np.inf))
        write_run(path, (rows, vals), tag=name, query_ids=list(query_ids), doc_ids=list(doc_ids))
        paths.append(path)
    return paths


def write_per_query(path, query_ids, values: dict) -> None:
    """Write the per-query metrics as TSV: ``query_id  method  <metric>...`` (header line first).

    ``values``: ``method -> {metric: array (nq,)}``; every method must carry the same metrics.
    """
    methods = list(values)
    if not methods:
        raise ValueError("no methods to write")
    metrics = list(values[methods[0]])
    lines = ["\t".join(("query_id", "method", *metrics))]
    for m in methods:
        cols = [np.asarray(values[m][k], np.float64) for k in metrics]
        for i, q in enumerate(query_ids):
            lines.append("\t".join((q, m, *(repr(float(c[i])) for c in cols))))
    atomic_write_text(path, "\n".join(lines) + "\n", fsync=False)
