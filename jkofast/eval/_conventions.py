"""Metric names, evaluation conventions and the float32 score-range warning, with NumPy only.

Shared by the Numba engine (:mod:`jkofast.eval.metrics`, which re-exports the public names)
and the NumPy-only file engine (:mod:`jkofast.eval._npfiles`), so that a process that evaluates
files without Numba parses metric names and conventions with the same code and the same
messages.  The kind, gain and tie codes equal those of :mod:`jkofast.kernels.eval.metrics`
(``tests/eval/test_npfiles.py`` checks it): this module cannot import the kernels, which
import Numba.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

import numpy as np

__all__ = [
    "DEFAULT_METRICS",
    "ScoreRangeWarning",
    "check_mode",
    "file_setup",
    "parse_metric",
    "parse_metrics",
    "warn_float32_range",
]

NDCG = 0
RECALL = 1
PRECISION = 2
RR = 3
AP = 4
HIT = 5
DIVERSITY = -1  # computed from document embeddings (not a label metric): mean pairwise 1 - z_i·z_j

GAIN_LINEAR = 0
GAIN_EXPONENTIAL = 1

TIE_TREC_EVAL = 0
TIE_GIVEN = 1

DEFAULT_METRICS = ("ndcg@10", "recall@10", "p@10", "mrr@10", "map")

KIND_NAMES = {
    NDCG: "ndcg",
    RECALL: "recall",
    PRECISION: "p",
    RR: "mrr",
    AP: "map",
    HIT: "hit",
    DIVERSITY: "diversity",
}
_ALIASES = {
    "ndcg": NDCG,
    "ndcg_cut": NDCG,
    "recall": RECALL,
    "r": RECALL,
    "p": PRECISION,
    "precision": PRECISION,
    "mrr": RR,
    "rr": RR,
    "recip_rank": RR,
    "map": AP,
    "ap": AP,
    "map_cut": AP,
    "hit": HIT,
    "hits": HIT,
    "success": HIT,
    "diversity": DIVERSITY,
    "div": DIVERSITY,
}
_METRIC_RE = re.compile(r"^([a-z_]+?)(?:(?:@|_|\.)(\d+))?$")

_K_MAX = int(np.iinfo(np.int64).max)
# largest label with an exponential gain 2**label - 1 whose sums stay finite in float64
_EXP_LABEL_MAX = 1000


def parse_metric(name: str) -> tuple[str, int, int]:
    """Parse a metric name into ``(canonical name, kind, k)`` (``k = 0``: no cutoff).

    Accepted: ``ndcg@10``, ``ndcg_cut_10``, ``ndcg_cut.10``, ``ndcg``; ``recall@k``,
    ``recall_k``; ``p@k``, ``precision@k``, ``P_10``; ``mrr@k``, ``rr@k``, ``mrr``,
    ``recip_rank``; ``map``, ``map@k``, ``map_cut_k``; ``hit@k`` (``success_k``);
    ``diversity@k`` (``div@k``; needs document embeddings).  Case-insensitive.

    Raises
    ------
    TypeError
        ``name`` is not a str.
    ValueError
        Unknown metric, a cutoff < 1 or beyond int64, recall / precision without a cutoff.

    Examples
    --------
    >>> parse_metric("NDCG_cut_10")
    ('ndcg@10', 0, 10)
    """
    if not isinstance(name, str):
        raise TypeError(f"metric names must be strings, got {type(name).__name__}")
    m = _METRIC_RE.match(name.strip().lower())
    if not m or m.group(1) not in _ALIASES:
        raise ValueError(f"unknown metric {name!r}; use ndcg@k, recall@k, p@k, mrr@k, map, map@k, hit@k or diversity@k")
    kind = _ALIASES[m.group(1)]
    k = int(m.group(2)) if m.group(2) else 0
    if m.group(2) and k < 1:
        raise ValueError(f"metric {name!r}: the cutoff must be >= 1")
    if kind in (RECALL, PRECISION, HIT, DIVERSITY) and k == 0:
        raise ValueError(f"metric {name!r} needs a cutoff, e.g. {m.group(1)}@10")
    if k > _K_MAX:
        raise ValueError(f"metric {name!r}: the cutoff must be <= {_K_MAX}")
    canon = KIND_NAMES[kind] + (f"@{k}" if k else "")
    return canon, kind, k


def parse_metrics(metrics) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Return the distinct canonical names of ``metrics`` (names or a comma-separated str) and their kinds / cutoffs.

    Kinds and cutoffs are int64 arrays aligned with the names.

    Raises
    ------
    TypeError
        ``metrics`` is neither a str nor an iterable of names.
    ValueError
        An unknown metric name, or no metric at all.
    """
    if isinstance(metrics, str):
        metrics = [m for m in metrics.split(",") if m.strip()]
    elif not isinstance(metrics, Iterable):
        raise TypeError(f"metrics must be a metric name or a sequence of names, got {type(metrics).__name__}")
    names, kinds, ks = [], [], []
    for m in metrics:
        c, kind, k = parse_metric(m)
        if c not in names:
            names.append(c)
            kinds.append(kind)
            ks.append(k)
    if not names:
        raise ValueError("metrics must name at least one metric")
    return names, np.asarray(kinds, np.int64), np.asarray(ks, np.int64)


def check_mode(gain: str, tie_break: str, missing: str) -> tuple[int, int]:
    """Return the gain and tie codes after validating the three convention names.

    Raises
    ------
    ValueError
        A gain other than ``"linear"`` / ``"exponential"``, a tie_break other than
        ``"trec_eval"`` / ``"given"``, a missing other than ``"skip"`` / ``"zero"``.
    """
    gains = {"linear": GAIN_LINEAR, "exponential": GAIN_EXPONENTIAL}
    ties = {"trec_eval": TIE_TREC_EVAL, "given": TIE_GIVEN}
    if gain not in gains:
        raise ValueError(f"gain must be 'linear' or 'exponential', got {gain!r}")
    if tie_break not in ties:
        raise ValueError(f"tie_break must be 'trec_eval' or 'given', got {tie_break!r}")
    if missing not in ("skip", "zero"):
        raise ValueError(f"missing must be 'skip' or 'zero', got {missing!r}")
    return gains[gain], ties[tie_break]


def file_setup(metrics, gain: str, tie_break: str, missing: str):
    """Return ``(gain code, tie code, names, kinds, ks)`` for an evaluation from files.

    ``metrics`` None: :data:`DEFAULT_METRICS`.  The conventions as :func:`check_mode`, the
    names as :func:`parse_metrics`; ``diversity@k`` is refused (it needs document embeddings,
    which files do not hold).
    """
    gain_mode, tie_mode = check_mode(gain, tie_break, missing)
    names, kinds, ks = parse_metrics(DEFAULT_METRICS if metrics is None else metrics)
    if (kinds == DIVERSITY).any():
        raise ValueError("evaluate_files: diversity@k needs embeddings; use jkofast.eval.metrics.evaluate")
    return gain_mode, tie_mode, names, kinds, ks


class ScoreRangeWarning(UserWarning):
    """Run scores beyond the float32 range: trec_eval compares scores as C floats, so they tie as +-inf."""


_F32_MAX = float(np.finfo(np.float32).max)


def warn_float32_range(scores: np.ndarray, describe, *, stacklevel: int = 3) -> None:
    """Warn once when finite ``scores`` lie beyond the float32 range the ranking compares them in.

    ``describe(i)`` names run row ``i`` (query and document) for the message.  Such scores become
    +-inf at float32 precision and tie with one another, as in trec_eval.
    """
    scores = np.asarray(scores)
    if not scores.size or (scores.max() <= _F32_MAX and scores.min() >= -_F32_MAX):
        return  # NaN compares False: a NaN score goes on to the full check
    big = np.isfinite(scores) & (np.abs(scores) > _F32_MAX)
    if big.any():
        i = int(np.argmax(big))
        warnings.warn(
            f"run: {int(big.sum())} score(s) beyond the float32 range "
            f"(first: {describe(i)}, score {float(scores[i])!r}); "
            "ranked as +-inf, tied with one another, as trec_eval's float scores are",
            ScoreRangeWarning,
            stacklevel=stacklevel,
        )
