"""Ranking metrics (batched Numba kernels) and bootstrap confidence intervals.

Two conventions (``tie_break``):

``"trec_eval"`` (default) — identical to trec_eval / pytrec_eval / BEIR:
    each query's run is sorted by score descending (scores rounded to float32, as
    trec_eval stores them), ties broken by doc id **descending** in string order; a doc
    repeated in a query keeps its last score (a dict-based run cannot hold duplicates);
    negative labels have gain 0.
``"given"`` — the published JKO-RAG evaluator (SPEC A.7.1):
    the list order as given, duplicates counted each time, literal gains.

Gains (``gain``): ``"linear"`` = label (trec_eval/BEIR default), ``"exponential"`` =
2^label − 1 (the published JKO-RAG tables).  They agree on binary labels.

Queries: the per-query arrays follow the run's query order; queries of the run that are
absent from the qrels are skipped (as pytrec_eval and BEIR); queries of the qrels that are
absent from the run are skipped too (``missing="skip"``, pytrec_eval's behaviour) or scored
0 on every metric (``missing="zero"``, trec_eval ``-c``), appended in qrels order.  A
qrels query with no judgments at all counts as absent (as in pytrec_eval).
"Relevant" means label > 0.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple

import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads
from jkofast._validation import (
    PartialBatchError,
    PartialBatchWarning,
    as_float_array,
    check_int,
    check_offsets,
    check_positive,
    check_same_length,
    keep_segments,
    segment_any,
    summarise_errors,
)
from jkofast.eval import _conventions as _c
from jkofast.eval._conventions import (
    _EXP_LABEL_MAX,
    DEFAULT_METRICS,
    DIVERSITY,
    ScoreRangeWarning,
    parse_metric,
    warn_float32_range,
)
from jkofast.eval._diversity import check_diversity, diversity
from jkofast.eval.trec import QrelsArrays, RunArrays
from jkofast.kernels.eval import bootstrap as _kb
from jkofast.kernels.eval import metrics as _k

__all__ = [
    "DEFAULT_METRICS",
    "MAX_ID_ROWS_BYTES",
    "BadQueryError",
    "BadQueryWarning",
    "BootstrapCI",
    "EvalResult",
    "ScoreRangeWarning",
    "bootstrap_ci",
    "evaluate",
    "evaluate_codes",
    "paired_bootstrap_diff",
    "parse_metric",
    "warn_float32_range",
]


def _check_labels(labels: np.ndarray, gain: str, name: str) -> None:
    """Raise ``ValueError`` for labels whose exponential gain would overflow float64."""
    if gain == "exponential" and labels.size and labels.max() > _EXP_LABEL_MAX:
        raise ValueError(
            f"{name}: label {int(labels.max())} overflows the exponential gain 2**label - 1 "
            f"(labels must be <= {_EXP_LABEL_MAX}; use gain='linear')"
        )


class BootstrapCI(NamedTuple):
    """Point estimate (sample mean) and percentile-bootstrap interval."""

    mean: float
    lo: float
    hi: float


def bootstrap_ci(x, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0) -> BootstrapCI:
    """Percentile bootstrap CI of the mean (SPEC A.7.2).

    A fresh ``numpy.random.default_rng(seed)`` is created at every call; replicate ``b``
    draws ``rng.integers(0, n, n)`` and takes the mean of the resample; the interval is
    the ``alpha/2`` and ``1 - alpha/2`` quantiles of the ``n_boot`` means (NumPy's default
    linear interpolation); the point estimate is the plain sample mean.  The replicates
    are drawn in blocks (one ``integers`` call per block), which yields exactly the
    numbers of the one-replicate-at-a-time loop.

    Parameters
    ----------
    x : array_like of float, shape (n,)
        Per-query values (finite, n >= 1).
    n_boot : int
        Number of bootstrap replicates.
    alpha : float
        1 − confidence level (0 < alpha < 1).
    seed : int
        Seed of the generator.

    Returns
    -------
    BootstrapCI
        ``(mean, lo, hi)``.

    Raises
    ------
    ValueError
        Empty or non-finite ``x``, ``n_boot < 1`` or ``alpha`` outside (0, 1).

    Examples
    --------
    >>> m, lo, hi = bootstrap_ci([0.0, 1.0, 1.0, 0.0])
    >>> m
    0.5
    >>> 0.0 <= lo <= m <= hi <= 1.0
    True
    """
    x = as_float_array(x, "x", dtype=np.float64, ndim=1)
    n_boot = check_int(n_boot, "n_boot", min_value=1)
    alpha = check_positive(alpha, "alpha")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"seed must be a non-negative integer (or None), got {seed!r}: {exc}") from None
    return _bootstrap_rows(x[None, :], n_boot, alpha, rng)[0]


def _bootstrap_rows(X: np.ndarray, n_boot: int, alpha: float, rng) -> list[BootstrapCI]:
    """:func:`bootstrap_ci` of every row of ``X`` (k, n) with the same replicate indices (drawn once).

    Each row's interval is exactly ``bootstrap_ci(row)``'s: the generator draws the same
    blocks of indices, and each resample mean is NumPy's ``x[idx].mean(axis=1)`` bit for bit
    (:func:`jkofast.kernels.eval.bootstrap.resample_means`: the same pairwise summation), so
    sharing the draws changes no number.
    """
    k, n = X.shape
    scale = np.zeros(k, np.int64)
    X = X.copy()
    with np.errstate(over="ignore"):
        for r in range(k):
            if not np.isfinite(X[r].sum()):
                # the sum of the values overflows: resample x / 2**e ~ x / max|x| (exact), scale back
                scale[r] = int(np.frexp(np.abs(X[r]).max())[1])
                X[r] = np.ldexp(X[r], -scale[r])
    means = np.empty((k, n_boot), dtype=np.float64)
    block = max(1, min(n_boot, (1 << 22) // n))  # <= ~32 MB of indices per block
    b = 0
    with numba_threads(None):
        while b < n_boot:
            m = min(block, n_boot - b)
            idx = rng.integers(0, n, (m, n))
            for r in range(k):  # = X[r][idx].mean(axis=1), bit for bit, without the gathered copy
                _kb.resample_means(X[r], idx, means[r, b : b + m])
            b += m
    out = []
    for r in range(k):
        lo, hi = np.quantile(means[r], [alpha / 2.0, 1.0 - alpha / 2.0])
        out.append(BootstrapCI(*(float(np.ldexp(v, scale[r])) for v in (X[r].mean(), lo, hi))))
    return out


def paired_bootstrap_diff(a, b, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0) -> BootstrapCI:
    """Percentile bootstrap CI of the paired difference ``mean(a - b)``: ``bootstrap_ci(a - b)``.

    Significant at level ``alpha`` when the interval excludes 0.  ``a`` and ``b`` must be
    aligned on the same queries (same length).

    Raises
    ------
    ValueError
        Different lengths, a difference beyond the float64 range, or as :func:`bootstrap_ci`.

    Examples
    --------
    >>> d = paired_bootstrap_diff([1.0, 1.0, 0.5], [0.5, 0.5, 0.0])
    >>> round(d.mean, 6), round(d.lo, 6), round(d.hi, 6)
    (0.5, 0.5, 0.5)
    """
    a = as_float_array(a, "a", dtype=np.float64, ndim=1)
    b = as_float_array(b, "b", dtype=np.float64, ndim=1)
    check_same_length("a", a, "b", b)
    with np.errstate(over="ignore"):
        d = a - b
    if not np.all(np.isfinite(d)):
        raise ValueError("a - b overflows (values beyond the float64 range)")
    return bootstrap_ci(d, n_boot=n_boot, alpha=alpha, seed=seed)


@dataclass
class EvalResult:
    """Per-query metric values.

    Attributes
    ----------
    query_ids : list of str
        Evaluated queries, in the order of the per-query arrays.
    per_query : dict of str to ndarray of float64
        Canonical metric name -> values aligned with ``query_ids``.
    n_ret : ndarray of int64
        Number of ranked documents used per query (after de-duplication).
    gain, tie_break : str
        The conventions used.
    """

    query_ids: list
    per_query: dict
    n_ret: np.ndarray
    gain: str = "linear"
    tie_break: str = "trec_eval"

    @property
    def metrics(self) -> tuple[str, ...]:
        """Canonical metric names, in the order asked."""
        return tuple(self.per_query)

    @property
    def means(self) -> dict[str, float]:
        """Mean over the evaluated queries (0.0 when there are none)."""
        return {m: float(v.mean()) if v.size else 0.0 for m, v in self.per_query.items()}

    def __getitem__(self, metric: str) -> np.ndarray:
        """Per-query values of ``metric`` (any accepted spelling, see :func:`parse_metric`)."""
        canon = parse_metric(metric)[0]
        return self.per_query[canon]

    def summary(
        self, ci: bool = True, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
    ) -> dict[str, dict[str, float]]:
        """``{metric: {"mean", "lo", "hi"}}`` with percentile-bootstrap CIs (SPEC A.7.2).

        With ``ci=False`` only the means.  No queries -> mean 0 and no interval.  The
        replicate indices are drawn once for all metrics; each interval equals
        :func:`bootstrap_ci` of that metric's values.
        """
        names = list(self.per_query)
        if not ci or not names or not self.per_query[names[0]].size:
            return {m: {"mean": float(v.mean()) if v.size else 0.0} for m, v in self.per_query.items()}
        # one set of replicate draws for every metric (the same seed draws the same indices):
        # each interval equals bootstrap_ci(values, n_boot, alpha, seed)
        X = np.array([as_float_array(v, m, dtype=np.float64, ndim=1) for m, v in self.per_query.items()])
        n_boot = check_int(n_boot, "n_boot", min_value=1)
        if not 0.0 < check_positive(alpha, "alpha") < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        rng = np.random.default_rng(seed)
        cis = _bootstrap_rows(X, n_boot, alpha, rng)
        return {m: {"mean": r.mean, "lo": r.lo, "hi": r.hi} for m, r in zip(names, cis, strict=True)}


_check_mode = _c.check_mode
_parse_metrics = _c.parse_metrics


def evaluate_codes(
    run_offsets,
    run_codes,
    run_scores,
    qrels_offsets,
    qrels_codes,
    qrels_labels,
    metrics=DEFAULT_METRICS,
    *,
    gain: str = "linear",
    tie_break: str = "trec_eval",
    dedupe: bool = True,
    n_threads: int | None = None,
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Metrics from integer-coded, query-aligned ragged arrays (the kernel's interface).

    Row ``q`` of the run (``run_codes[run_offsets[q]:run_offsets[q+1]]`` with scores) is
    evaluated against row ``q`` of the qrels.  With ``tie_break="trec_eval"`` equal
    (float32) scores are ordered by code *descending*, which is trec_eval's order when the
    codes are the lexicographic ranks of the doc id strings.  Qrels codes must be unique
    within a query.

    Returns
    -------
    names : list of str
        Canonical metric names.
    values : ndarray of float64, shape (n_metrics, n_queries)
    n_ret : ndarray of int64, shape (n_queries,)

    Raises
    ------
    TypeError
        Non-integer codes or labels.
    ValueError
        Bad offsets, mismatched lengths, a NaN score, a qrels code repeated within a query.

    Examples
    --------
    >>> names, values, n_ret = evaluate_codes([0, 2], [7, 3], [2.0, 1.0], [0, 1], [3], [1], ["mrr@10"])
    >>> names, values.tolist(), n_ret.tolist()
    (['mrr@10'], [[0.5]], [2])
    """
    gain_mode, tie_mode = _check_mode(gain, tie_break, "skip")
    names, kinds, ks = _parse_metrics(metrics)
    run_codes = _as_int64(run_codes, "run_codes")
    qrels_codes = _as_int64(qrels_codes, "qrels_codes")
    qrels_labels = _as_int64(qrels_labels, "qrels_labels")
    if qrels_labels.shape != qrels_codes.shape:
        raise ValueError("qrels_codes and qrels_labels must have the same length")
    _check_labels(qrels_labels, gain, "qrels_labels")
    roff = check_offsets(run_offsets, run_codes.shape[0], "run_offsets")
    qoff = check_offsets(qrels_offsets, qrels_codes.shape[0], "qrels_offsets")
    if qrels_codes.size:
        # a code repeated within a query would count twice in the ideal DCG and the recall denominator
        qrow = np.repeat(np.arange(qoff.shape[0] - 1), np.diff(qoff))
        order = np.lexsort((qrels_codes, qrow))
        dup = (np.diff(qrow[order]) == 0) & (np.diff(qrels_codes[order]) == 0)
        if dup.any():
            i = order[int(np.flatnonzero(dup)[0]) + 1]
            raise ValueError(
                f"qrels_codes must be unique within a query: code {int(qrels_codes[i])} "
                f"repeated in query {int(qrow[i])}"
            )
    if roff.shape != qoff.shape:
        raise ValueError(
            f"run_offsets and qrels_offsets must describe the same number of queries, got "
            f"{roff.shape[0] - 1} and {qoff.shape[0] - 1}"
        )
    scores = as_float_array(run_scores, "run_scores", dtype=np.float64, ndim=1, allow_empty=True, finite=False)
    if scores.shape != run_codes.shape:
        raise ValueError("run_scores and run_codes must have the same length")
    if np.isnan(scores).any():
        raise ValueError("run_scores contains NaN")
    # one-word id rows; flipping the sign bit keeps the signed order in uint64
    rrows = (run_codes.view(np.uint64) ^ np.uint64(1 << 63)).reshape(-1, 1)
    qrows = (qrels_codes.view(np.uint64) ^ np.uint64(1 << 63)).reshape(-1, 1)
    return names, *_run_kernel(
        roff, rrows, scores, qoff, qrows, qrels_labels, kinds, ks, gain_mode, tie_mode, dedupe, n_threads
    )


def _run_kernel(roff, rrows, scores, qoff, qrows, labels, kinds, ks, gain_mode, tie_mode, dedupe, n_threads):
    """Call the metrics kernel of ``tie_mode``; return ``values`` (n_metrics, nq) and ``n_ret`` (nq,)."""
    nq = roff.shape[0] - 1
    out = np.zeros((nq, kinds.shape[0]), np.float64)
    n_ret = np.zeros(nq, np.int64)
    # trec_eval keeps scores as C floats: ties are decided at float32 precision (values beyond its
    # range become +-inf: the callers warn once, naming the run line, see warn_float32_range)
    with numba_threads(n_threads), np.errstate(over="ignore"):
        run = (roff, np.ascontiguousarray(rrows), scores.astype(np.float32), qoff, np.ascontiguousarray(qrows), labels)
        if tie_mode == _k.TIE_TREC_EVAL:
            _k.evaluate_batch_chars_trec(*run, kinds, ks, gain_mode, bool(dedupe), out, n_ret)
        else:
            _k.evaluate_batch_chars(*run, kinds, ks, gain_mode, out, n_ret)
    return np.ascontiguousarray(out.T), n_ret


def _as_int64(x, name: str) -> np.ndarray:
    """Return a 1-D integer array as contiguous int64 (``TypeError`` / ``ValueError`` otherwise)."""
    a = np.asarray(x)
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.int64)


def _as_run_arrays(run) -> RunArrays | None:
    """Return a ragged-array run as :class:`RunArrays`; ``None`` for a ``{qid: {doc: score}}`` dict."""
    if isinstance(run, RunArrays):
        return run
    if isinstance(run, tuple) and len(run) == 4:
        qids, off, ids, sc = run
        return RunArrays(list(qids), np.asarray(off), np.asarray(ids), np.asarray(sc))
    if isinstance(run, dict) and run and all(isinstance(v, list | tuple | np.ndarray) for v in run.values()):
        # {qid: [doc ids in ranked order]}: scores n, n-1, ..., 1 keep the list order
        lens = [len(v) for v in run.values()]
        off = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=off[1:])
        ids = [str(d) for v in run.values() for d in v]
        sc = np.concatenate([np.arange(n, 0, -1, dtype=np.float64) for n in lens] or [np.zeros(0)])
        ids_arr = np.asarray(ids, dtype=str) if ids else np.zeros(0, "<U1")
        return RunArrays(list(run), off, ids_arr, sc)
    return None


def _flatten_dict(d: dict, qids: list, value_dtype, name: str = "run") -> tuple[np.ndarray, list, np.ndarray]:
    """Rows ``d[q]`` for ``q`` in ``qids`` (missing -> empty) as offsets, ids, values."""
    empty: dict = {}
    rows = [d.get(q, empty) for q in qids]
    for q, r in zip(qids, rows, strict=True):
        if not isinstance(r, Mapping):
            raise TypeError(f"{name}[{q!r}] must be a dict of doc id -> value, got {type(r).__name__}")
    off = np.zeros(len(rows) + 1, np.int64)
    if rows:
        np.cumsum([len(r) for r in rows], out=off[1:])
    ids = list(chain.from_iterable(rows))
    try:
        vals = np.fromiter(chain.from_iterable(r.values() for r in rows), value_dtype, count=int(off[-1]))
    except (TypeError, ValueError):
        for q, r in zip(qids, rows, strict=True):
            for doc, v in r.items():
                try:
                    float(v)
                except (TypeError, ValueError):
                    raise TypeError(f"{name}[{q!r}][{doc!r}] must be a number, got {v!r}") from None
        raise
    return off, ids, vals


def _codes(run_ids: list, qrels_ids: list, lexicographic: bool):
    """Integer codes shared by run and qrels doc ids (lexicographic ranks if asked)."""
    lookup = dict.fromkeys(qrels_ids)
    lookup.update(dict.fromkeys(run_ids))
    uniq = list(lookup)
    if lexicographic and uniq:
        # numpy orders str by code point = byte order of UTF-8 = trec_eval's strcmp
        order = np.argsort(np.asarray(uniq, dtype=str), kind="stable")
        rank = np.empty(len(uniq), np.int64)
        rank[order] = np.arange(len(uniq), dtype=np.int64)
        lookup = dict(zip(uniq, rank.tolist()))
    else:
        lookup = dict(zip(uniq, range(len(uniq))))
    get = lookup.__getitem__
    rc = np.fromiter(map(get, run_ids), np.int64, len(run_ids))
    qc = np.fromiter(map(get, qrels_ids), np.int64, len(qrels_ids))
    return rc, qc


MAX_ID_ROWS_BYTES = 1 << 30


def _words(n_rows: int, max_bytes: int):
    """Return zeroed uint64 word rows wide enough for ``max_bytes``, or ``None`` beyond ``MAX_ID_ROWS_BYTES``."""
    n_words = max(1, -(-int(max_bytes) // 8))
    if n_rows * n_words * 8 > MAX_ID_ROWS_BYTES:
        return None
    return np.zeros((n_rows, n_words), np.uint64)


def _rows_from_strings(ids) -> np.ndarray | None:
    """Word rows for a sequence (or iterable) of str: one join, one encode, one kernel."""
    if not isinstance(ids, list | tuple):
        ids = list(ids)
    n = len(ids)
    if n == 0:
        return np.zeros((0, 1), np.uint64)
    try:
        joined = "\x00".join(ids)
    except TypeError:
        joined = "\x00".join(map(str, ids))
    buf = np.frombuffer(joined.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    starts = np.empty(n, np.int64)
    lengths = np.empty(n, np.int64)
    if _k.split_lengths(buf, 0, starts, lengths) != n:
        raise ValueError("document ids must not contain NUL characters")
    out = _words(n, lengths.max())
    if out is not None:
        _k.pack_id_bytes(buf, starts, lengths, out)
    return out


def _rows_from_array(ids: np.ndarray) -> np.ndarray | None:
    """Word rows for a numpy ``U``/``S`` array, without creating Python strings."""
    n = ids.shape[0]
    if n == 0:
        return np.zeros((0, 1), np.uint64)
    ids = np.ascontiguousarray(ids)
    if ids.dtype.kind == "U":
        w = ids.itemsize // 4
        cps = ids.view(np.uint32).reshape(n, w)
        lens = np.empty(n, np.int64)
        _k.ucs4_rows_utf8_length(cps, lens)
        out = _words(n, lens.max())
        if out is not None:
            _k.pack_ucs4_rows(cps, out)
        return out
    # bytes (S): pack the raw bytes; trailing NULs are padding
    w = ids.itemsize
    raw = ids.view(np.uint8).reshape(n, w)
    out = _words(n, w)
    if out is not None:
        lengths = np.full(n, w, np.int64)
        starts = np.arange(n, dtype=np.int64) * w
        _k.pack_id_bytes(raw.ravel(), starts, lengths, out)
    return out


def _id_rows(run_ids, qrels_ids):
    """Return run and qrels doc ids as zero-padded rows of big-endian uint64 words (UTF-8 bytes).

    One width for run and qrels, so that comparing rows word by word is C ``strcmp`` order —
    trec_eval's.  ``None`` when they would exceed ``MAX_ID_ROWS_BYTES``.
    """
    if isinstance(run_ids, np.ndarray) and run_ids.dtype.kind in "US":
        a = _rows_from_array(run_ids)
    else:
        a = _rows_from_strings(run_ids)
    b = _rows_from_strings(qrels_ids)
    if a is None or b is None:
        return None
    w = max(a.shape[1], b.shape[1])
    if a.shape[1] < w:
        a = np.pad(a, ((0, 0), (0, w - a.shape[1])))
    if b.shape[1] < w:
        b = np.pad(b, ((0, 0), (0, w - b.shape[1])))
    return a, b


def _select_run_rows(ra: RunArrays, qrels: dict, missing: str):
    """Validate a ragged run and keep the queries judged in ``qrels`` (plus, with ``missing="zero"``, empty rows).

    Returns ``(query_ids, offsets, doc_ids, scores)``: run order, then the qrels-only queries
    in qrels order.
    """
    ids = np.asarray(ra.doc_ids)
    off = check_offsets(ra.offsets, ids.shape[0], "run offsets")
    if len(ra.query_ids) != off.shape[0] - 1:
        raise ValueError("run: len(query_ids) must equal len(offsets) - 1")
    try:
        sc_all = np.asarray(ra.scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("run: scores must be numbers") from None
    if sc_all.shape != ids.shape:
        raise ValueError("run: doc_ids and scores must have the same length")
    qlist = [str(q) for q in ra.query_ids]
    if len(set(qlist)) != len(qlist):
        raise ValueError("run: query ids must be unique (one row per query)")
    keep = [i for i, q in enumerate(qlist) if q in qrels]
    present = {qlist[i] for i in keep}
    extra = [q for q in qrels if q not in present] if missing == "zero" else []
    all_q = [qlist[i] for i in keep] + extra
    lens = np.array([off[i + 1] - off[i] for i in keep] + [0] * len(extra), np.int64)
    roff = np.zeros(len(all_q) + 1, np.int64)
    np.cumsum(lens, out=roff[1:])
    if keep and len(keep) < len(qlist):
        sel = np.concatenate([np.arange(off[i], off[i + 1]) for i in keep])
        return all_q, roff, ids[sel], sc_all[sel]
    if keep:
        return all_q, roff, ids, sc_all
    return all_q, roff, ids[:0], sc_all[:0]


def evaluate(
    run,
    qrels,
    metrics=DEFAULT_METRICS,
    gain: str = "linear",
    tie_break: str = "trec_eval",
    *,
    missing: str = "skip",
    errors: str = "raise",
    n_threads: int | None = None,
    embeddings=None,
) -> EvalResult:
    """Evaluate a run against qrels: per-query nDCG / recall / precision / MRR / MAP / Hit / Diversity.

    Parameters
    ----------
    run : dict, RunArrays or tuple
        ``{qid: {docid: score}}``, ``{qid: [docid, ...]}`` (ranked lists, best first;
        duplicates allowed), a :class:`jkofast.eval.trec.RunArrays`, or a tuple
        ``(query_ids, offsets, doc_ids, scores)`` (ragged arrays; duplicates allowed).
    qrels : dict or QrelsArrays
        ``{qid: {docid: label}}`` with integer labels (label 0 and negative kept), or
        :class:`jkofast.eval.trec.QrelsArrays` (a repeated doc keeps its last label).
    metrics : sequence of str or str
        Names such as ``"ndcg@10"``, ``"recall@100"``, ``"p@10"``, ``"mrr@10"``, ``"map"``,
        ``"map@100"``, ``"ndcg"`` (see :func:`parse_metric`); a comma-separated string is
        accepted.  Cutoff ``k``: nDCG@k = DCG@k / IDCG@k (0 when IDCG = 0); recall@k =
        relevant in top k / relevant in qrels (0 when none); P@k = relevant in top k / k;
        MRR@k = 1 / rank of the first relevant doc within k; MAP@k = Σ_{relevant rank
        r ≤ k} P@r / relevant in qrels (trec_eval ``map_cut``); hit@k = 1 when a relevant
        doc is in the top k (trec_eval ``success_k``); diversity@k = mean over pairs i < j
        of the top k of ``1 − z_iᵀz_j`` (SPEC A.7.1; 0 with fewer than two docs; needs
        ``embeddings``).
    gain : {"linear", "exponential"}
        nDCG gain: ``label`` or ``2**label - 1``.
    tie_break : {"trec_eval", "given"}
        ``"trec_eval"``: sort by float32 score desc, ties by doc id desc, duplicates
        removed (last wins), negative labels gain 0 — equal to pytrec_eval.
        ``"given"``: list order as given, duplicates counted, literal gains (published
        JKO-RAG evaluator; scores unused).
    missing : {"skip", "zero"}
        Queries in qrels but not in the run: skipped (pytrec_eval/BEIR) or scored 0.
    errors : {"raise", "skip"}
        A query whose run scores contain NaN (``tie_break="trec_eval"`` sorts by score, so
        its order is undefined): ``"raise"`` raises :class:`BadQueryError` (a ``ValueError``
        naming the queries; ``.result`` = the :class:`EvalResult` of the others,
        ``.errors`` = query id -> reason), ``"skip"`` leaves those queries out of the
        result with a :class:`BadQueryWarning`.  The other queries are evaluated either way.
    n_threads : int, optional
        Numba threads (queries are evaluated in parallel; results do not depend on it).
    embeddings : (doc_ids, matrix) or dict, optional
        Document embeddings for ``diversity@k`` (L2-normalised rows, e.g. MiniLM): a pair of
        a doc id sequence and an ``(n_docs, d)`` array, or ``{doc_id: vector}``.

    Returns
    -------
    EvalResult
        ``per_query[metric]`` aligned with ``query_ids`` (run order, then — with
        ``missing="zero"`` — the missing qrels queries in qrels order).

    Raises
    ------
    ValueError
        Unknown metric, gain or tie_break; malformed arrays; :class:`BadQueryError` for
        NaN scores (``errors="raise"``); ``diversity@k`` without ``embeddings`` or with a
        ranked doc that has none.
    TypeError
        Unsupported run / qrels types or non-integer labels.

    Examples
    --------
    >>> run = {"q1": {"d1": 2.0, "d2": 1.0}}
    >>> qrels = {"q1": {"d2": 1}}
    >>> r = evaluate(run, qrels, ["mrr@10", "p@1"])
    >>> r.means
    {'mrr@10': 0.5, 'p@1': 0.0}
    """
    gain_mode, tie_mode = _check_mode(gain, tie_break, missing)
    if errors not in ("raise", "skip"):
        raise ValueError(f"errors must be 'raise' or 'skip', got {errors!r}")
    names, kinds, ks = _parse_metrics(metrics)
    is_div = kinds == DIVERSITY
    emb_lookup = check_diversity(is_div.any(), embeddings)
    qrels = _judged_qrels(qrels)
    all_q, roff, run_ids, scores, dedupe = _run_rows(run, qrels, missing)
    qoff, qrels_ids, labels = _qrels_rows(qrels, all_q, gain)
    bad: dict = {}
    if tie_mode == _k.TIE_TREC_EVAL and np.isnan(scores).any():  # "given" order never reads scores
        nan_q = segment_any(np.isnan(scores), roff)
        bad = {all_q[i]: f"run scores of query {all_q[i]!r} contain NaN" for i in np.flatnonzero(nan_q).tolist()}
        keep_q = ~nan_q
        roff, (run_ids, scores) = keep_segments(roff, keep_q, run_ids, scores)
        qoff, (qrels_ids, labels) = keep_segments(qoff, keep_q, qrels_ids, labels)
        all_q = [q for q, k in zip(all_q, keep_q) if k]
    lab_kinds, lab_ks = kinds[~is_div], ks[~is_div]
    if not lab_kinds.size:  # only diversity asked: the kernel still gives n_ret
        lab_kinds, lab_ks = np.array([_k.HIT], np.int64), np.array([1], np.int64)
    if tie_mode == _k.TIE_TREC_EVAL:
        warn_float32_range(scores, lambda i: _describe_row(all_q, roff, run_ids, i))
    rows = _label_rows(run_ids, qrels_ids, tie_mode)
    values, n_ret = _run_kernel(
        roff, rows[0], scores, qoff, rows[1], labels, lab_kinds, lab_ks, gain_mode, tie_mode, dedupe, n_threads
    )
    per_query = _per_query(
        names, kinds, ks, values, lambda k: diversity(roff, run_ids, scores, k, tie_mode, emb_lookup)
    )
    res = EvalResult(all_q, per_query, n_ret, gain=gain, tie_break=tie_break)
    if bad:
        msg = summarise_errors(bad, len(all_q) + len(bad), "queries")
        if errors == "raise":
            raise BadQueryError(msg + "; the other queries' metrics are in this error's .result", res, bad)
        warnings.warn(msg + "; left out of the result", BadQueryWarning, stacklevel=2)
    return res


def _describe_row(query_ids, offsets, doc_ids, i: int) -> str:
    q = int(np.searchsorted(offsets, i, side="right")) - 1
    return f"query {query_ids[q]!r}, document {str(doc_ids[i])!r}"


def _judged_qrels(qrels) -> dict:
    """Return ``qrels`` as ``{qid: {docid: label}}`` without the queries that have no judgement (pytrec_eval)."""
    if isinstance(qrels, QrelsArrays):
        qrels = qrels.to_dict()
    if not isinstance(qrels, dict):
        raise TypeError(f"qrels must be a dict or QrelsArrays, got {type(qrels).__name__}")
    if not all(qrels.values()):
        qrels = {q: d for q, d in qrels.items() if d}
    return qrels


def _run_rows(run, qrels: dict, missing: str):
    """Flatten the run's judged queries (with ``missing="zero"`` also the judged queries absent from the run).

    Returns ``(query_ids, offsets, doc_ids, scores, dedupe)``; ``dedupe``: the run may repeat a
    document within a query (ragged arrays; a dict cannot).
    """
    ra = _as_run_arrays(run)
    if ra is not None:
        return (*_select_run_rows(ra, qrels, missing), True)
    if not isinstance(run, dict):
        raise TypeError(
            f"run must be a dict, RunArrays or (query_ids, offsets, doc_ids, scores), got {type(run).__name__}"
        )
    all_q = [q for q in run if q in qrels]
    if missing == "zero":
        all_q += [q for q in qrels if q not in run]
    roff, run_ids, scores = _flatten_dict(run, all_q, np.float64)
    return all_q, roff, run_ids, scores, False


def _qrels_rows(qrels: dict, query_ids: list, gain: str):
    """Flatten the qrels of ``query_ids`` -> ``(offsets, doc_ids, int64 labels)`` (integer labels checked)."""
    qoff, qrels_ids, labels = _flatten_dict(qrels, query_ids, np.float64, "qrels")
    if not np.all(np.floor(labels) == labels):
        raise ValueError("qrels labels must be integers")
    _check_labels(labels, gain, "qrels")
    return qoff, qrels_ids, labels.astype(np.int64)


def _label_rows(run_ids, qrels_ids, tie_mode: int):
    """Return the (run, qrels) document id rows the label kernel compares (integer codes for very long ids)."""
    rows = _id_rows(run_ids, qrels_ids)
    if rows is None:  # very long ids: one-word rows of integer codes instead
        rc, qc = _codes(list(run_ids), qrels_ids, tie_mode == _k.TIE_TREC_EVAL)
        rows = (rc.astype(np.uint64).reshape(-1, 1), qc.astype(np.uint64).reshape(-1, 1))
    return rows


def _per_query(names, kinds, ks, values, diversity) -> dict:
    """Name -> per-query values: the label kernel's ``values`` rows in order, diversity metrics computed."""
    out = {}
    j = 0
    for i, n in enumerate(names):
        if kinds[i] == DIVERSITY:
            out[n] = diversity(int(ks[i]))
        else:
            out[n] = values[j]
            j += 1
    return out


class BadQueryError(PartialBatchError):
    """Some queries of :func:`evaluate` had invalid input (a ``ValueError``).

    ``.result`` is the :class:`EvalResult` of the others, ``.errors`` maps query id -> reason.
    """


class BadQueryWarning(PartialBatchWarning):
    """``errors="skip"``: some queries were left out of the result; the message lists them."""


@register_warmup("evaluation")
def _warmup() -> None:
    """Compile what the main job runs: ranking order as given, both gains, str ids; bootstrap CIs."""
    run = {"a": {"x": 1.0, "y": 1.0, "z": 0.5}}
    qrels = {"a": {"x": 1, "z": 2, "w": 0}}
    for g in ("linear", "exponential"):
        evaluate(run, qrels, DEFAULT_METRICS, gain=g, tie_break="given", missing="zero")
    _id_rows(np.array(["é", "x"]), ["x"])  # UCS-4 rows (the corpus ids)
    bootstrap_ci(np.array([0.5, 1.0, 0.25]), n_boot=3)


@register_warmup("evaluation.all")
def _warmup_all() -> None:
    """Compile the metric kernels for both conventions, both gains and every id-row layout."""
    run = {"a": {"x": 1.0, "y": 1.0, "z": 0.5}}
    qrels = {"a": {"x": 1, "z": 2, "w": 0}}
    for tie in ("trec_eval", "given"):
        for g in ("linear", "exponential"):
            evaluate(run, qrels, DEFAULT_METRICS, gain=g, tie_break=tie)
    ra = RunArrays(["a"], np.array([0, 3]), np.array(["x", "y", "x"]), np.array([1.0, 1.0, 2.0]))
    evaluate(ra, qrels, DEFAULT_METRICS)
    evaluate({"a": {"é": 1.0, "x": 1.0}}, qrels, DEFAULT_METRICS)
    _id_rows(np.array(["é", "x"]), ["x"])  # UCS-4 rows
    _id_rows(np.array([b"y", b"x"]), ["x"])  # byte rows
    evaluate_codes([0, 2], [1, 0], [1.0, 1.0], [0, 1], [0], [1], DEFAULT_METRICS)
    bootstrap_ci([0.5, 1.0, 0.25], n_boot=3)
