"""``jkofast study stability``: paraphrase stability, W_C as published and debiased (SPEC A.7.5, A.9.4).

Protocol (SPEC A.7.5): 60 test queries, ``default_rng(0).choice`` of the (numerically sorted)
test-qrels keys (``--quick``: the first 10 of that sample); the three perturbations of
:mod:`jkofast.studies._perturb` (seed-0 draws, unchanged queries skipped).  Every perturbed query
is recomputed end to end: BM25 over the corpus, the dense scores with the torch-free MiniLM
encoder (:mod:`jkofast.encode`) when it and its weights are installed, the hybrid pool (BM25
top-500 + dense top-500, RRF 60, first 200), the rerank term.  Without the encoder the study runs
on BM25-only pools for the original *and* the perturbed queries (dense weight 0; ``dense_topk``
dropped) and says so.

Methods, on the original and the perturbed pool: ``jko_rerank`` / ``kl_rerank`` / ``noprox``
(rerank-only energy ``E = −minmax(rerank)``, ``p0 = softmax(minmax(rerank)/0.1)``, base config,
inner 40 on SciFact as published, 25 elsewhere) and the one-shot ``rerank_topk`` /
``dense_topk`` (p = 1/10 on the top-10 pool entries by score).  Metric per (query, perturbation,
method): the published biased ``W_C(p, q)`` (:func:`jkofast.eval.stability.wc_batch`), and beside
it the self floor ``½(W_C(p, p) + W_C(q, q))`` and the debiased divergence ``W_C − floor``.
Headline per method: the mean over the three perturbation means (published: SPEC A.9.4).

The extensions (``--methods``, :func:`parse_methods`): ``bw:ALPHA`` is BW-JKO (mode ``bregman``,
``alpha_prox = ALPHA`` in [0, 1]: 0 is the KL flow, 1 the Wasserstein one) and ``nm:W.npz`` NM-JKO
(the Wasserstein flow with the cost of a learned metric, :func:`jkofast.jko.metric.load_metric`),
both with the same energy, p0 and operating point as ``jko_rerank``; W_C is measured in the same
MiniLM cosine geometry for every method.  :func:`bw_rows` / :func:`bw_block` give the
``bw-stability`` row set (W_C against α, between ``kl_rerank`` and ``jko_rerank``).
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from jkofast.datasets.beir import load_dataset
from jkofast.encode.bert import encode
from jkofast.encode.model import encoder_available, load_model
from jkofast.eval.stability import wc_batch
from jkofast.jko.energy import minmax, softmax_tau
from jkofast.jko.metric import load_metric
from jkofast.jko.solver import operating_point, rerank_batch
from jkofast.pools.baselines import topk_by_score
from jkofast.pools.candidates import build_pools, dense_scores
from jkofast.pools.retrievers import get_retriever
from jkofast.studies._perturb import PERTURBATIONS, perturb_queries
from jkofast.studies.common import StudyOptions, StudyResult, method_row, require_matplotlib
from jkofast.studies.published import published
from jkofast.studies.readout import evaluate_topk, readout_topk

__all__ = [
    "BW_ALPHAS",
    "METHODS",
    "N_QUERIES",
    "QUICK_QUERIES",
    "bw_block",
    "bw_rows",
    "parse_methods",
    "plot",
    "sample_queries",
    "study",
]

METHODS = ("jko_rerank", "kl_rerank", "noprox", "rerank_topk", "dense_topk")
# the bw-stability row set of the report: its ends are kl_rerank (alpha 0) and jko_rerank (alpha 1),
# which BW-JKO reproduces bit for bit (jkofast study bw-sweep checks it)
BW_ALPHAS = (0.25, 0.5, 0.75)
N_QUERIES = 60
QUICK_QUERIES = 10
_MODES = {"jko_rerank": "wasserstein", "kl_rerank": "kl", "noprox": "noproximal"}
_BM25_NOTE = "rerank term = BM25 pool score: no cross-encoder is loaded (the published runs use ms-marco-MiniLM-L-6-v2)"


def parse_methods(methods) -> tuple:
    """Return the checked methods of a stability run: names of :data:`METHODS`, ``bw:ALPHA``, ``nm:W.npz``.

    ``bw:ALPHA``: ALPHA a number in [0, 1], named ``bw:{ALPHA:g}``; ``nm:PATH``: an NM-JKO metric
    file (checked readable now; its width is checked against the embeddings when the study runs).
    None gives :data:`METHODS`.

    Raises
    ------
    TypeError
        ``methods`` a str (one method is ``("name",)``), or not strings.
    ValueError
        An unknown name, a bad ``bw:`` weight, a repeated method, an empty list, an unreadable
        metric file.

    Examples
    --------
    >>> parse_methods(["jko_rerank", "bw:0.50", "bw:1"])
    ('jko_rerank', 'bw:0.5', 'bw:1')
    """
    if methods is None:
        return METHODS
    if isinstance(methods, str):
        raise TypeError(f"methods must be a sequence of method names, not a str (use ({methods!r},))")
    out: list = []
    for m in methods:
        if not isinstance(m, str):
            raise TypeError(f"a method must be a str, got {type(m).__name__}")
        if m.startswith("bw:"):
            try:
                a = float(m[3:])
            except ValueError:
                raise ValueError(f"--methods {m!r}: expected bw:ALPHA with ALPHA a number in [0, 1]") from None
            if not 0.0 <= a <= 1.0:
                raise ValueError(f"--methods {m!r}: ALPHA must be in [0, 1] (0 = KL flow, 1 = Wasserstein flow)")
            m = f"bw:{a:g}"
        elif m.startswith("nm:"):
            path = m[3:]
            if not path:
                raise ValueError("--methods nm: needs a metric file, nm:W.npz (jkofast study nm-jko --out)")
            load_metric(path)  # a missing or malformed file fails here, before any work
        elif m not in METHODS:
            raise ValueError(f"unknown stability method {m!r}; choose from {', '.join(METHODS)}, bw:ALPHA, nm:W.npz")
        if m in out:
            raise ValueError(f"--methods: {m!r} is given twice")
        out.append(m)
    if not out:
        raise ValueError("--methods needs at least one method")
    return tuple(out)


def _flow(name: str, cfg0, d: int) -> tuple:
    """Return ``(config, projection or None)`` of a JKO method (None for a one-shot baseline)."""
    if name in _MODES:
        return dataclasses.replace(cfg0, mode=_MODES[name]), None
    if name.startswith("bw:"):
        return dataclasses.replace(cfg0, mode="bregman", alpha_prox=float(name[3:])), None
    if name.startswith("nm:"):
        return dataclasses.replace(cfg0, mode="wasserstein"), load_metric(name[3:], d=d).W
    return None, None


def _name(dataset: str) -> str:
    return os.path.basename(os.path.normpath(dataset)).lower()


def sample_queries(query_ids, n: int = N_QUERIES) -> list[str]:
    """``default_rng(0).choice(query_ids, min(n, len), replace=False)`` in draw order (SPEC A.7.5).

    Raises
    ------
    ValueError
        No query ids.

    Examples
    --------
    >>> sample_queries(["1", "2", "3"], 2)
    ['2', '3']
    """
    ids = list(query_ids)
    if not ids:
        raise ValueError("the query sample is empty: the split has no judged queries")
    pick = np.random.default_rng(0).choice(len(ids), size=min(n, len(ids)), replace=False)
    return [ids[int(i)] for i in pick]


def _query_encoder(log):
    """``(encode(texts, n_threads) -> float32 rows, None)`` or ``(None, why not)``."""
    why = encoder_available()
    if why:
        return None, why
    model = load_model()
    if model.name != "minilm-l6-v2":
        return None, f"the installed encoder is {model.name!r}, not the all-MiniLM-L6-v2 of the bundled embeddings"
    log(f"query encoder: {model.name} ({model.path})")
    return (lambda texts, nt: encode(model, texts, batch_size=64, n_threads=nt)), None


@dataclasses.dataclass
class _Pools:
    """Original pools (first ``n_orig``) and perturbed pools (then one per case), with timings."""

    pools: object
    rerank: np.ndarray
    Z: np.ndarray
    n_orig: int
    cases: list
    hybrid: bool
    times: dict


def _build_pools(ds, doc_emb, q_emb, qids, opts, log) -> _Pools:
    """Build the original and perturbed pools (hybrid with the query encoder, else BM25-only), timed."""
    times = {}
    texts = [ds.queries[q] for q in qids]
    cases = perturb_queries(qids, texts)
    t0 = time.perf_counter()
    bm25 = get_retriever("bm25").fit(ds.doc_texts(". "))
    S = bm25.score_all(texts + [c[2] for c in cases], n_threads=opts.n_threads)
    times["bm25_s"] = time.perf_counter() - t0
    enc, why = _query_encoder(log)
    D = None
    times["encode_s"] = 0.0
    if enc is not None:
        t0 = time.perf_counter()
        qp = enc([c[2] for c in cases], opts.n_threads) if cases else np.zeros((0, doc_emb.shape[1]), np.float32)
        times["encode_s"] = time.perf_counter() - t0
        D = dense_scores(doc_emb, np.vstack([q_emb, qp]))
    t0 = time.perf_counter()
    labels = list(qids) + [f"{c[0]}:{c[1]}" for c in cases]
    P = build_pools(S, D, query_ids=labels, each_n=500, M=200, n_threads=opts.n_threads)
    times["pools_s"] = time.perf_counter() - t0
    Z = np.ascontiguousarray(doc_emb[P.doc_idx], dtype=np.float32)
    out = _Pools(P, np.asarray(P.sparse, np.float64), Z, len(qids), cases, enc is not None, times)
    out.times["why_no_encoder"] = why
    return out


def _run_methods(pp: _Pools, cfg0, opts, methods=METHODS) -> tuple[dict, dict]:
    """Distributions of every method on every pool (flat), and ms per pool of the JKO methods."""
    off = pp.pools.offsets
    r = minmax(pp.rerank, off)
    p0 = softmax_tau(r, off, 0.1)
    out, ms = {}, {}
    for name in methods:
        cfg, W = _flow(name, cfg0, pp.Z.shape[1])
        if cfg is None:
            continue
        t0 = time.perf_counter()
        res = rerank_batch(-r, p0, off, embeddings=pp.Z, projection=W, config=cfg, n_threads=opts.n_threads)
        ms[name] = 1000 * (time.perf_counter() - t0) / (off.shape[0] - 1)
        bad = int(np.count_nonzero(res.status))
        if bad:
            raise RuntimeError(f"{name}: {bad} pools failed: {sorted(res.errors.items())[:3]}")
        out[name] = res.p
        opts.log("stability", f"{name:<11} {ms[name]:.1f} ms/pool")
    scores = {"rerank_topk": pp.rerank}
    if pp.hybrid:
        scores["dense_topk"] = np.asarray(pp.pools.dense, np.float64)
    for name, s in scores.items():
        if name not in methods:
            continue
        top = topk_by_score(s, off, 10)
        p = np.zeros(s.shape[0])
        for qi in range(top.shape[0]):
            pos = top[qi][top[qi] >= 0]
            p[off[qi] + pos] = 1.0 / pos.size
        out[name] = p
        ms[name] = None
    return out, ms


def _segments(off, pools_idx):
    """Flat indices and offsets of the pools ``pools_idx`` (in that order)."""
    sizes = off[np.asarray(pools_idx) + 1] - off[np.asarray(pools_idx)]
    new = np.zeros(len(pools_idx) + 1, np.int64)
    np.cumsum(sizes, out=new[1:])
    idx = np.concatenate([np.arange(off[i], off[i + 1]) for i in pools_idx]) if len(pools_idx) else np.zeros(0, int)
    return idx, new


def _wc_all(pp: _Pools, dists: dict, doc_emb, qpos: dict, opts) -> dict:
    """W_C, self floors and debiased values of every (case, method), one wc_batch call."""
    off = pp.pools.offsets
    methods = list(dists)
    orig = [qpos[c[0]] for c in pp.cases for _ in methods]
    pert = [pp.n_orig + i for i in range(len(pp.cases)) for _ in methods]
    mlist = np.tile(np.arange(len(methods)), len(pp.cases))  # method of every pair
    ia, oa = _segments(off, orig)
    ib, ob = _segments(off, pert)
    stacked = np.stack([dists[m] for m in methods])
    pv = stacked[np.repeat(mlist, np.diff(oa)), ia]
    qv = stacked[np.repeat(mlist, np.diff(ob)), ib]
    doc_idx = pp.pools.doc_idx
    res = wc_batch(pv, oa, doc_idx[ia], qv, ob, doc_idx[ib], doc_emb, n_threads=opts.n_threads)
    out = {}
    for k, m in enumerate(methods):
        sel = mlist == k
        floor = 0.5 * (res.self_p[sel] + res.self_q[sel])
        out[m] = {"wc": res.wc[sel], "debiased": res.debiased[sel], "floor": floor, "self_p": res.self_p[sel]}
    return out


def _stats(x) -> dict:
    x = np.asarray(x, np.float64)
    if not x.size:
        return {"mean": None, "std": None, "n": 0, "q25": None, "median": None, "q75": None}
    q = np.percentile(x, [25, 50, 75])
    return {
        "mean": float(x.mean()),
        "std": float(x.std()),
        "n": int(x.size),
        "q25": float(q[0]),
        "median": float(q[1]),
        "q75": float(q[2]),
    }


def _summaries(wc: dict, kinds) -> dict:
    """Per method: per perturbation stats of wc / debiased / floor, and the headline means."""
    out = {}
    for m, vals in wc.items():
        per = {}
        for kind in PERTURBATIONS:
            sel = kinds == kind
            per[kind] = {key: _stats(vals[key][sel]) for key in ("wc", "debiased", "floor", "self_p")}
        have = [k for k in PERTURBATIONS if per[k]["wc"]["n"]]

        def head(key, per=per, have=have):
            return float(np.mean([per[k][key]["mean"] for k in have])) if have else None

        out[m] = {
            "wc_mean": head("wc"),
            "wc_debiased_mean": head("debiased"),
            "self_floor_mean": head("floor"),
            "self_floor_orig_mean": head("self_p"),
            "per_perturbation": per,
        }
    return out


def _block(summ: dict, pub: dict, pub_n, n_per: dict) -> str:
    w = max(12, *(len(m) for m in summ))  # an nm:PATH method is as wide as its path
    head = f"{'method':<{w}} {'W_C (published)':>15} {'W_C':>8} {'floor':>8} {'debiased':>9}   " + "  ".join(
        f"{k + ' W_C/deb':>21}" for k in PERTURBATIONS
    )
    lines = ["W_C: mean over the three perturbation means (lower = more stable)", head, "-" * len(head)]
    for m, s in summ.items():
        p = pub.get(m)
        cells = []
        for k in PERTURBATIONS:
            c = s["per_perturbation"][k]
            cells.append(
                f"{c['wc']['mean']:.4f}/{c['debiased']['mean']:.4f} n{c['wc']['n']:<3}"
                if c["wc"]["n"]
                else f"{'--':>21}"
            )
        lines.append(
            f"{m:<{w}} {(f'{p:.4f}' if p is not None else '--'):>15} {s['wc_mean']:>8.4f} {s['self_floor_mean']:>8.4f} "
            f"{s['wc_debiased_mean']:>9.4f}   " + "  ".join(f"{c:>21}" for c in cells)
        )
    lines.append("-" * len(head))
    lines.append(
        "n per (drop_stop, hedge, lower_nop): ours "
        + ", ".join(str(n_per[k]) for k in PERTURBATIONS)
        + (f"; published {', '.join(map(str, pub_n))}" if pub_n else "")
    )
    lines.append("floor = mean of (W_C(p,p) + W_C(q,q))/2 on the pair's union; debiased = W_C - floor")
    return "\n".join(lines)


def _gaps(summ: dict) -> dict:
    """1 − W/KL of jko_rerank vs kl_rerank, biased and debiased (the paper's "38 % lower")."""
    if "jko_rerank" not in summ or "kl_rerank" not in summ:
        return {}
    j, k = summ["jko_rerank"], summ["kl_rerank"]
    out = {}
    for key in ("wc_mean", "wc_debiased_mean", "self_floor_mean"):
        out[key] = 1.0 - j[key] / k[key] if k[key] else None
    return out


def _load(opts: StudyOptions):
    """Return the dataset and its saved MiniLM embeddings (which the study needs)."""
    ds = load_dataset(opts.dataset)
    emb = ds.embeddings()
    if emb is None:
        raise ValueError(
            f"dataset {opts.dataset!r} has no saved MiniLM embeddings (embeddings/minilm-l6-v2/docs.npy, "
            "queries.npy); the stability study needs them (jkofast encode makes them)"
        )
    return ds, emb


def _method_rows(pp: _Pools, dists: dict, ms: dict, summ: dict, pub: dict, qids, qrels, doc_ids) -> list:
    """One row per method: nDCG@10 of the original queries, the W_C summaries, the published W_C."""
    P0 = pp.pools.subset(np.arange(pp.n_orig))
    n0 = int(P0.offsets[-1])
    rows = []
    for m in dists:
        p = dists[m][:n0]
        if m == "rerank_topk":
            p = pp.rerank[:n0]  # rank the one-shot baselines by their score (p is flat on the top 10)
        elif m == "dense_topk":
            p = np.asarray(pp.pools.dense[:n0], np.float64)
        met = evaluate_topk(readout_topk(p, P0, 20), qids, qrels, doc_ids, 10)
        s = summ[m]
        rows.append(
            method_row(
                m,
                met,
                ms[m],
                published={"wc_mean": pub[m]} if m in pub else None,
                **{k: s[k] for k in ("wc_mean", "wc_debiased_mean", "self_floor_mean", "self_floor_orig_mean")},
                per_perturbation=s["per_perturbation"],
            )
        )
    return rows


def _notes(pp: _Pools, cfg, opts: StudyOptions, why) -> list:
    """Return the notes: the rerank stand-in, the pools and encoder, the operating point, the stage times."""
    notes = [_BM25_NOTE + " (also for every perturbed query)"]
    if opts.scores_file:
        notes.append("--scores is not used here: the perturbed queries have no user scores, so both sides use BM25")
    if pp.hybrid:
        notes.append(
            "perturbed queries encoded with jkofast.encode (torch-free all-MiniLM-L6-v2); original queries use "
            "the bundled query embeddings (cached pools, as published); hybrid pools on both sides"
        )
    else:
        notes.append(
            f"no query encoder ({why}): BM25-only pools (dense weight 0) for the original and the perturbed "
            "queries; dense_topk is not computed"
        )
    notes.append(
        f"base operating point (h {cfg.h}, lam {cfg.lam}, rho {cfg.rho}, eps {cfg.sinkhorn_eps}, T {cfg.T}, "
        f"inner {cfg.inner_steps}), rerank-only energy, p0 = softmax(minmax(rerank)/0.1); W_C: union lifting, "
        "+1e-8 floor, eps 0.1, 80 Sinkhorn pairs, zero init (float64 arithmetic; float32 as published differs ~1e-6)"
    )
    notes.append("nDCG@10 columns: original queries (linear gain); the baselines are ranked by their score")
    if opts.quick:
        notes.append(f"--quick: first {QUICK_QUERIES} queries of the 60-query sample")
    notes.append("stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in pp.times.items()))
    return notes


def _gap_line(gap: dict, pub: dict) -> str:
    """Return the line of 1 - W/KL (biased, debiased, self floor) with the published biased gap."""
    return (
        "1 - W/KL (jko_rerank vs kl_rerank): biased "
        f"{100 * gap['wc_mean']:.1f} %, debiased {100 * gap['wc_debiased_mean']:.1f} %, self floor "
        f"{100 * gap['self_floor_mean']:.1f} %"
        + (f" (published biased {100 * (1 - pub['jko_rerank'] / pub['kl_rerank']):.1f} %)" if pub else "")
    )


def study(opts: StudyOptions) -> StudyResult:
    """Run the paraphrase-stability protocol (module docstring) and return its rows.

    Rows per method: nDCG@10 of the original queries (``method_row``), ``wc_mean``,
    ``wc_debiased_mean``, ``self_floor_mean``, ``per_perturbation`` (mean/std/n/quartiles of
    each quantity) and the published ``wc_mean`` of SPEC A.9.4 beside them.
    """
    t_all = time.perf_counter()
    methods = parse_methods(opts.methods)
    ds, (doc_emb, q_all) = _load(opts)
    name = _name(opts.dataset)
    qids = sample_queries(ds.split_query_ids("test"))
    if opts.quick:
        qids = qids[:QUICK_QUERIES]
    qrow = {q: i for i, q in enumerate(ds.query_ids)}
    q_emb = np.ascontiguousarray(q_all[[qrow[q] for q in qids]], dtype=np.float32)
    log = lambda m: opts.log("stability", m)  # noqa: E731
    log(f"{len(qids)} queries, building original + perturbed pools ...")
    pp = _build_pools(ds, doc_emb, q_emb, qids, opts, log)
    log(f"{len(pp.cases)} perturbed queries; pools {'hybrid' if pp.hybrid else 'BM25-only'}")
    cfg = operating_point("base", inner_steps=40 if name == "scifact" else 25)
    t0 = time.perf_counter()
    dists, ms = _run_methods(pp, cfg, opts, methods)
    pp.times["solve_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    wc = _wc_all(pp, dists, doc_emb, {q: i for i, q in enumerate(qids)}, opts)
    pp.times["wc_s"] = time.perf_counter() - t0
    log(f"W_C of {len(pp.cases) * len(dists)} pairs ({pp.times['wc_s']:.1f} s)")
    kinds = np.array([c[1] for c in pp.cases])
    summ = _summaries(wc, kinds)
    n_per = {k: int(np.count_nonzero(kinds == k)) for k in PERTURBATIONS}
    tables = published("stability")  # SPEC A.9.4: mean W_C per dataset and method; n per perturbation
    pub, pub_n = tables["wc_mean"].get(name, {}), tables["n_per_perturbation"].get(name)
    rows = _method_rows(pp, dists, ms, summ, pub, qids, ds.qrels("test"), ds.doc_ids)
    pp.times["total_s"] = time.perf_counter() - t_all
    why = pp.times.pop("why_no_encoder")
    notes = _notes(pp, cfg, opts, why)
    extra = {
        "published_source": "SPEC A.9.4",
        "n_per_perturbation": n_per,
        "published_n_per_perturbation": dict(zip(PERTURBATIONS, pub_n or (), strict=False)),
        "relative_gap_w_vs_kl": _gaps(summ),
        "pools": "hybrid" if pp.hybrid else "bm25-only",
        "config": {"operating_point": "base", "inner_steps": cfg.inner_steps},
        "timings_s": dict(pp.times),
    }
    extra["methods"] = list(dists)
    blocks = [_block(summ, pub, pub_n, n_per)]
    if extra["relative_gap_w_vs_kl"]:
        blocks.append(_gap_line(extra["relative_gap_w_vs_kl"], pub))
    if bw_rows(rows):
        blocks.append(bw_block(rows))
    return StudyResult("stability", ds.name, len(qids), rows, extra=extra, blocks=blocks, notes=notes)


def _bw_alpha(method: str) -> float | None:
    """α of a method on the BW-JKO line: ``bw:ALPHA``, 0 for ``kl_rerank``, 1 for ``jko_rerank``; else None."""
    if method.startswith("bw:"):
        return float(method[3:])
    return {"kl_rerank": 0.0, "jko_rerank": 1.0}.get(method)


def bw_rows(rows) -> list:
    """Return the ``bw-stability`` row set of a stability result's rows (empty without a ``bw:`` row).

    The ``bw:ALPHA`` rows by α, with the ``kl_rerank`` (α = 0) and ``jko_rerank`` (α = 1) rows as its ends.
    """
    if not any(r["method"].startswith("bw:") for r in rows):
        return []
    keep = [r for r in rows if _bw_alpha(r["method"]) is not None]
    return sorted(keep, key=lambda r: (_bw_alpha(r["method"]), not r["method"].startswith("bw:")))


def bw_block(rows) -> str:
    """Return the ``bw-stability`` table: α, W_C (biased, self floor, debiased) and nDCG@10 per BW-JKO row."""
    head = f"{'bw-stability':<14} {'alpha':>6} {'W_C':>8} {'floor':>8} {'debiased':>9} {'nDCG@10':>8}"
    lines = ["BW-JKO under paraphrase: W_C against the transport weight alpha (0 = KL, 1 = Wasserstein)", head]
    lines.append("-" * len(head))
    for r in bw_rows(rows):
        nd = r.get("ndcg10")
        lines.append(
            f"{r['method']:<14} {_bw_alpha(r['method']):>6.2f} {r['wc_mean']:>8.4f} {r['self_floor_mean']:>8.4f} "
            f"{r['wc_debiased_mean']:>9.4f} {(f'{nd:.4f}' if nd is not None else '--'):>8}"
        )
    return "\n".join(lines)


def plot(result: StudyResult, out_dir: str) -> list[str]:
    """Write ``stability_wc.png``: per method, published W_C beside ours split into floor + debiased part."""
    plt = require_matplotlib()
    rows = result.rows
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    pub = [(r.get("published") or {}).get("wc_mean") or 0.0 for r in rows]
    floor = [r["self_floor_mean"] for r in rows]
    deb = [r["wc_debiased_mean"] for r in rows]
    ax.bar(x - 0.2, pub, 0.38, color="0.75", label="published W_C (A.9.4)")
    ax.bar(x + 0.2, floor, 0.38, color="#9ecae1", label="ours: self floor ½(W(p,p)+W(q,q))")
    ax.bar(x + 0.2, deb, 0.38, bottom=floor, color="#3182bd", label="ours: debiased part")
    ax.set_xticks(x, [r["method"] for r in rows])
    ax.set_ylabel("W_C (lower = more stable)")
    ax.set_title(f"Paraphrase stability, {result.dataset} ({result.n_queries} queries)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = "stability_wc.png"
    fig.savefig(os.path.join(out_dir, name), dpi=120)
    plt.close(fig)
    return [name]
