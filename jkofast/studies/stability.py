"""``jkofast study stability``: paraphrase stability, W_C as published and debiased (SPEC A.7.5, A.9.4).

Protocol (SPEC A.7.5): 60 test queries (``--n``), ``default_rng(0).choice`` of the (numerically sorted)
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

The operating point is ``base`` unless ``--config`` names another (:data:`CONFIGS`); ``p0`` uses
its τ0.  **Extension-stability protocol** (SPEC A.7.5 end, A.9.4 second table):
``--config fast`` samples 50 queries and runs :data:`EXTENSION_METHODS` by default — ``kl_rerank``,
BW-JKO at α 0.25 / 0.5 / 0.75, ``jko_rerank``, NM-JKO and NM-JKO with the Bregman proximal term
at α 0.5 (``nm-bw:0.5:…``), the learned metric trained on the dataset's train split in the run
(``train``, :func:`jkofast.studies.nm_jko.train_split_metric`) and used for the original and the
perturbed pools; the published extension table is printed beside it, and ``--plot`` draws
W_C against α with the published points.

The extensions (``--methods``, :func:`parse_methods`): ``bw:ALPHA`` is BW-JKO (mode ``bregman``,
``alpha_prox = ALPHA`` in [0, 1]: 0 is the KL flow, 1 the Wasserstein one), ``nm:W.npz`` NM-JKO
(the Wasserstein flow with the cost of a learned metric, :func:`jkofast.jko.metric.load_metric`)
and ``nm-bw:ALPHA:W.npz`` the two together (the learned cost in the transport part of the
Bregman–Wasserstein proximal term); ``train`` in place of the file trains the metric in the run.
All with the same energy, p0 and operating point as ``jko_rerank``; W_C is measured in the same
MiniLM cosine geometry for every method.  :func:`bw_rows` / :func:`bw_block` give the
``bw-stability`` row set (W_C against α, between ``kl_rerank`` and ``jko_rerank``).
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from jkofast._validation import check_int
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
from jkofast.studies.common import StudyOptions, StudyResult, method_row, require_matplotlib, save_figure
from jkofast.studies.published import published
from jkofast.studies.readout import evaluate_topk, readout_topk

__all__ = [
    "BW_ALPHAS",
    "CONFIGS",
    "EXTENSION_METHODS",
    "EXTENSION_N",
    "METHODS",
    "N_QUERIES",
    "QUICK_QUERIES",
    "bw_block",
    "bw_rows",
    "parse_methods",
    "plot",
    "plot_alpha",
    "protocol",
    "sample_queries",
    "study",
]

METHODS = ("jko_rerank", "kl_rerank", "noprox", "rerank_topk", "dense_topk")
# the bw-stability row set of the report: its ends are kl_rerank (alpha 0) and jko_rerank (alpha 1),
# which BW-JKO reproduces bit for bit (jkofast study bw-sweep checks it)
BW_ALPHAS = (0.25, 0.5, 0.75)
N_QUERIES = 60
QUICK_QUERIES = 10
# the extension-stability protocol (--config fast): 50 queries, these methods, "train" = a metric
# learned on the train split in the run; the published names of the methods are in _PUBLISHED_NAME
EXTENSION_N = 50
EXTENSION_METHODS = ("kl_rerank", "bw:0.25", "bw:0.5", "bw:0.75", "jko_rerank", "nm:train", "nm-bw:0.5:train")
CONFIGS = ("base", "tuned", "contrib", "fast")
TRAIN = "train"
_MODES = {"jko_rerank": "wasserstein", "kl_rerank": "kl", "noprox": "noproximal"}
_BM25_NOTE = "rerank term = BM25 pool score: no cross-encoder is loaded (the published runs use ms-marco-MiniLM-L-6-v2)"


def _alpha(m: str, text: str, form: str) -> str:
    """``f"{ALPHA:g}"`` of the ALPHA of method ``m`` (a number in [0, 1]), or a ValueError naming ``m``."""
    try:
        a = float(text)
    except ValueError:
        raise ValueError(f"--methods {m!r}: expected {form} with ALPHA a number in [0, 1]") from None
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"--methods {m!r}: ALPHA must be in [0, 1] (0 = KL flow, 1 = Wasserstein flow)")
    return f"{a:g}"


def _metric_source(m: str, path: str) -> None:
    """Check the metric of an ``nm:`` / ``nm-bw:`` method: ``train`` or a readable metric file."""
    if not path:
        raise ValueError(f"--methods {m!r} needs a metric file (jkofast study nm-jko --out) or 'train'")
    if path != TRAIN:
        load_metric(path)  # a missing or malformed file fails here, before any work


def parse_methods(methods, config: str = "base") -> tuple:
    """Return the checked methods of a stability run (names, ``bw:ALPHA``, ``nm:W.npz``, ``nm-bw:ALPHA:W.npz``).

    ``bw:ALPHA``: ALPHA a number in [0, 1], named ``bw:{ALPHA:g}``; ``nm:PATH``: an NM-JKO metric
    file (checked readable now; its width is checked against the embeddings when the study runs),
    or ``nm:train`` (a metric trained on the dataset's train split in the run); ``nm-bw:ALPHA:PATH``
    NM-JKO with the Bregman proximal term.  None gives the protocol's methods: :data:`METHODS`,
    :data:`EXTENSION_METHODS` with ``config="fast"``.

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
        return EXTENSION_METHODS if config == "fast" else METHODS
    if isinstance(methods, str):
        raise TypeError(f"methods must be a sequence of method names, not a str (use ({methods!r},))")
    out: list = []
    for m in methods:
        if not isinstance(m, str):
            raise TypeError(f"a method must be a str, got {type(m).__name__}")
        if m.startswith("bw:"):
            m = f"bw:{_alpha(m, m[3:], 'bw:ALPHA')}"
        elif m.startswith("nm:"):
            _metric_source(m, m[3:])
        elif m.startswith("nm-bw:"):
            a, sep, path = m[6:].partition(":")
            if not sep:
                raise ValueError(f"--methods {m!r}: expected nm-bw:ALPHA:W.npz (or nm-bw:ALPHA:train)")
            _metric_source(m, path)
            m = f"nm-bw:{_alpha(m, a, 'nm-bw:ALPHA:W.npz')}:{path}"
        elif m not in METHODS:
            raise ValueError(
                f"unknown stability method {m!r}; choose from {', '.join(METHODS)}, bw:ALPHA, nm:W.npz, "
                "nm-bw:ALPHA:W.npz (W.npz or 'train')"
            )
        if m in out:
            raise ValueError(f"--methods: {m!r} is given twice")
        out.append(m)
    if not out:
        raise ValueError("--methods needs at least one method")
    return tuple(out)


def _metric_of(name: str) -> str | None:
    """Return the metric source (a file or ``train``) of an ``nm:`` / ``nm-bw:`` method, else None."""
    if name.startswith("nm:"):
        return name[3:]
    if name.startswith("nm-bw:"):
        return name[6:].partition(":")[2]
    return None


def _flow(name: str, cfg0, metrics: dict) -> tuple:
    """Return ``(config, projection or None)`` of a JKO method (None for a one-shot baseline).

    ``metrics``: metric source -> W (the loaded or trained projections of the run).
    """
    if name in _MODES:
        return dataclasses.replace(cfg0, mode=_MODES[name]), None
    if name.startswith("bw:"):
        return dataclasses.replace(cfg0, mode="bregman", alpha_prox=float(name[3:])), None
    if name.startswith("nm:"):
        return dataclasses.replace(cfg0, mode="wasserstein"), metrics[name[3:]]
    if name.startswith("nm-bw:"):
        alpha, _, src = name[6:].partition(":")
        return dataclasses.replace(cfg0, mode="bregman", alpha_prox=float(alpha)), metrics[src]
    return None, None


def _published_name(name: str) -> str:
    """Return the name of a method in the published tables (``bw:0.25`` -> ``bw_jko_a25``, ``nm:…`` -> ``nm_jko``)."""
    if name.startswith("bw:"):
        return f"bw_jko_a{round(100 * float(name[3:])):02d}"
    if name.startswith("nm:"):
        return "nm_jko"
    if name.startswith("nm-bw:"):
        return f"nm_bw_a{round(100 * float(name[6:].partition(':')[0])):02d}"
    return name


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


def _run_methods(pp: _Pools, cfg0, opts, methods=METHODS, metrics=None) -> tuple[dict, dict]:
    """Distributions of every method on every pool (flat), and ms per pool of the JKO methods.

    ``p0 = softmax(minmax(rerank)/τ0)`` with the operating point's τ0; ``metrics``: metric source -> W.
    """
    off = pp.pools.offsets
    r = minmax(pp.rerank, off)
    p0 = softmax_tau(r, off, cfg0.tau0)
    out, ms = {}, {}
    for name in methods:
        cfg, W = _flow(name, cfg0, metrics or {})
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
            f"queries.npy); the stability study needs them; make them with: jkofast embed --dataset {opts.dataset}"
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


def _notes(pp: _Pools, cfg, opts: StudyOptions, why, proto: dict) -> list:
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
        f"{proto['config']} operating point (h {cfg.h}, lam {cfg.lam}, rho {cfg.rho}, eps {cfg.sinkhorn_eps}, "
        f"T {cfg.T}, inner {cfg.inner_steps}), rerank-only energy, p0 = softmax(minmax(rerank)/{cfg.tau0:g}); "
        "W_C: union lifting, "
        "+1e-8 floor, eps 0.1, 80 Sinkhorn pairs, zero init (float64 arithmetic; float32 as published differs ~1e-6)"
    )
    notes.append("nDCG@10 columns: original queries (linear gain); the baselines are ranked by their score")
    if opts.quick:
        notes.append(f"--quick: first {QUICK_QUERIES} queries of the {proto['n']}-query sample")
    notes.extend(proto["notes"])
    notes.append("stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in pp.times.items()))
    return notes


def _gap_line(gap: dict, pub: dict) -> str:
    """Return the line of 1 - W/KL (biased, debiased, self floor) with the published biased gap."""
    return (
        "1 - W/KL (jko_rerank vs kl_rerank): biased "
        f"{100 * gap['wc_mean']:.1f} %, debiased {100 * gap['wc_debiased_mean']:.1f} %, self floor "
        f"{100 * gap['self_floor_mean']:.1f} %"
        + (
            f" (published biased {100 * (1 - pub['jko_rerank'] / pub['kl_rerank']):.1f} %)"
            if "jko_rerank" in pub and "kl_rerank" in pub
            else ""
        )
    )


def protocol(opts: StudyOptions, dataset: str) -> dict:
    """Return the protocol of a run: operating point, query count, methods, the published tables to print.

    ``config`` (``opts.config``, default ``base``; SciFact's base run used inner 40 as published),
    ``n`` (``opts.n_queries``, default 50 with ``fast`` — the extension protocol — else 60),
    ``methods`` (:func:`parse_methods`), ``published`` (our method name -> published mean W_C:
    the paraphrase table at ``base``, the extension table at ``fast``, none at other points),
    ``published_n`` (n per perturbation), ``source``.
    """
    config = opts.config or "base"
    over = {"inner_steps": 40} if config == "base" and dataset == "scifact" else {}
    cfg = operating_point(config, **over)
    n = N_QUERIES if opts.n_queries is None else check_int(opts.n_queries, "n_queries", min_value=1)
    if opts.n_queries is None and config == "fast":
        n = EXTENSION_N
    methods = parse_methods(opts.methods, config)
    tables = published("stability")
    key, source = {"base": ("", "SPEC A.9.4"), "fast": ("extension_", "SPEC A.9.4, extension stability")}.get(
        config, (None, None)
    )
    pub, pub_n = {}, None
    if key is not None:
        table = tables[f"{key}wc_mean"].get(dataset, {})
        pub = {m: table[_published_name(m)] for m in methods if _published_name(m) in table}
        pub_n = tables[f"{key}n_per_perturbation"].get(dataset)
    return {
        "config": config,
        "cfg": cfg,
        "n": n,
        "methods": methods,
        "published": pub,
        "published_n": pub_n,
        "source": source,
        "notes": [],
    }


def _metrics(methods, opts: StudyOptions, d: int, proto: dict, log) -> dict:
    """Load or train the learned metric of every ``nm:`` / ``nm-bw:`` source; source -> W (None = vanilla)."""
    out: dict = {}
    for src in dict.fromkeys(filter(None, map(_metric_of, methods))):
        if src != TRAIN:
            out[src] = load_metric(src, d=d).W
            continue
        from jkofast.studies import nm_jko

        n_tuning = nm_jko.QUICK_TUNING if opts.quick else nm_jko.N_TUNING
        epochs = nm_jko.QUICK_EPOCHS if opts.quick else nm_jko.EPOCHS
        metric, sel, _ = nm_jko.train_split_metric(opts, n_tuning, epochs, log=log)
        if metric is None:  # SPEC A.6.2: no train split, NM-JKO falls back to the raw cosine cost
            proto["notes"].append("no train split: the nm methods fall back to the raw cosine cost (vanilla)")
            out[src] = None
        else:
            out[src] = metric.W
            proto["notes"].append(
                f"nm metric trained in this run on {sel.n_train} train queries, {epochs} epochs "
                f"(InfoNCE {metric.loss_history[0]:.4f} -> {metric.final_loss:.4f}; SPEC A.6.2)"
            )
    return out


def study(opts: StudyOptions) -> StudyResult:
    """Run the paraphrase-stability protocol (module docstring) and return its rows.

    Rows per method: nDCG@10 of the original queries (``method_row``), ``wc_mean``,
    ``wc_debiased_mean``, ``self_floor_mean``, ``per_perturbation`` (mean/std/n/quartiles of
    each quantity) and the published ``wc_mean`` of SPEC A.9.4 beside them (the extension
    table with ``config="fast"``).
    """
    t_all = time.perf_counter()
    name = _name(opts.dataset)
    proto = protocol(opts, name)
    methods, cfg = proto["methods"], proto["cfg"]
    ds, (doc_emb, q_all) = _load(opts)
    qids = sample_queries(ds.split_query_ids("test"), proto["n"])
    if opts.quick:
        qids = qids[:QUICK_QUERIES]
    qrow = {q: i for i, q in enumerate(ds.query_ids)}
    q_emb = np.ascontiguousarray(q_all[[qrow[q] for q in qids]], dtype=np.float32)
    log = lambda m: opts.log("stability", m)  # noqa: E731
    metrics = _metrics(methods, opts, doc_emb.shape[1], proto, log)
    log(f"{len(qids)} queries, building original + perturbed pools ...")
    pp = _build_pools(ds, doc_emb, q_emb, qids, opts, log)
    log(f"{len(pp.cases)} perturbed queries; pools {'hybrid' if pp.hybrid else 'BM25-only'}")
    t0 = time.perf_counter()
    dists, ms = _run_methods(pp, cfg, opts, methods, metrics)
    pp.times["solve_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    wc = _wc_all(pp, dists, doc_emb, {q: i for i, q in enumerate(qids)}, opts)
    pp.times["wc_s"] = time.perf_counter() - t0
    log(f"W_C of {len(pp.cases) * len(dists)} pairs ({pp.times['wc_s']:.1f} s)")
    kinds = np.array([c[1] for c in pp.cases])
    summ = _summaries(wc, kinds)
    n_per = {k: int(np.count_nonzero(kinds == k)) for k in PERTURBATIONS}
    pub, pub_n = proto["published"], proto["published_n"]
    rows = _method_rows(pp, dists, ms, summ, pub, qids, ds.qrels("test"), ds.doc_ids)
    pp.times["total_s"] = time.perf_counter() - t_all
    why = pp.times.pop("why_no_encoder")
    notes = _notes(pp, cfg, opts, why, proto)
    extra = {
        "published_source": proto["source"],
        "n_per_perturbation": n_per,
        "published_n_per_perturbation": dict(zip(PERTURBATIONS, pub_n or (), strict=False)),
        "relative_gap_w_vs_kl": _gaps(summ),
        "pools": "hybrid" if pp.hybrid else "bm25-only",
        "config": {"operating_point": proto["config"], "inner_steps": cfg.inner_steps, "tau0": cfg.tau0},
        "protocol": "extension" if proto["config"] == "fast" else "paraphrase",
        "sample_size": proto["n"],
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
    """Write ``stability_wc.png`` and, with BW-JKO rows, ``stability_alpha.png`` (:func:`plot_alpha`).

    ``stability_wc.png``: per method, the published W_C beside ours split into floor + debiased part.
    """
    plt = require_matplotlib()
    rows = result.rows
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    pub = [(r.get("published") or {}).get("wc_mean") or 0.0 for r in rows]
    floor = [r["self_floor_mean"] for r in rows]
    deb = [r["wc_debiased_mean"] for r in rows]
    ax.bar(x - 0.2, pub, 0.38, color="0.75", label="published W_C")
    ax.bar(x + 0.2, floor, 0.38, color="#9ecae1", label="ours: self floor ½(W(p,p)+W(q,q))")
    ax.bar(x + 0.2, deb, 0.38, bottom=floor, color="#3182bd", label="ours: debiased part")
    ax.set_xticks(x, [_published_name(r["method"]) for r in rows], rotation=20, fontsize=8)
    ax.set_ylabel("W_C (lower = more stable)")
    ax.set_title(f"Paraphrase stability, {result.dataset} ({result.n_queries} queries)")
    return [_save(plt, fig, ax, out_dir, "stability_wc.png"), *plot_alpha(result, out_dir)]


def _save(plt, fig, ax, out_dir: str, name: str) -> str:
    """Add the legend, write ``out_dir/name`` (PNG, 120 dpi), close the figure; return ``name``."""
    ax.legend(fontsize=8)
    return save_figure(fig, out_dir, name)[0]


def plot_alpha(result: StudyResult, out_dir: str) -> list[str]:
    """Write ``stability_alpha.png``: W_C against the transport weight α (the published figure's line).

    Ours: the biased W_C (solid) and its debiased part (dashed) of the BW-JKO row set (α 0 =
    ``kl_rerank``, α 1 = ``jko_rerank``); the published points of the same methods as markers;
    NM-JKO rows (``nm:`` at α 1, ``nm-bw:ALPHA:`` at ALPHA) as separate markers, ours and published.
    No file (empty list) without a BW-JKO row.
    """
    line = bw_rows(result.rows)
    if not line:
        return []
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    a = [_bw_alpha(r["method"]) for r in line]
    ax.plot(a, [r["wc_mean"] for r in line], "o-", color="#3182bd", label="ours: W_C")
    ax.plot(a, [r["wc_debiased_mean"] for r in line], "o--", color="#9ecae1", label="ours: debiased W_C")
    pts = [(x, r["published"]["wc_mean"]) for x, r in zip(a, line, strict=True) if r.get("published")]
    if pts:
        ax.plot(*zip(*pts, strict=True), "s", color="0.3", mfc="none", ms=8, label="published W_C")
    for r in result.rows:
        m = r["method"]
        if m.startswith("nm:") or m.startswith("nm-bw:"):
            x = 1.0 if m.startswith("nm:") else float(m[6:].partition(":")[0])
            ax.plot([x], [r["wc_mean"]], "^", color="#e6550d", label=f"ours: {_published_name(m)}")
            if r.get("published"):  # the published point: the same marker, hollow
                pub = dict(color="#e6550d", mfc="none", ms=9, label=f"published: {_published_name(m)}")
                ax.plot([x], [r["published"]["wc_mean"]], "^", **pub)
    ax.set_xlabel("transport weight α of the proximal term (0 = KL, 1 = Wasserstein)")
    ax.set_ylabel("W_C (lower = more stable)")
    ax.set_title(f"BW-JKO stability against α, {result.dataset} ({result.n_queries} queries)")
    return [_save(plt, fig, ax, out_dir, "stability_alpha.png")]
