r"""Dual-Rank: OT dual potentials as a per-query confidence (SPEC A.6.4).

After the JKO flow, the dual read-out of SPEC A.4.5 (``rerank_batch(..., return_duals=True)``
or ``run_jko_with_duals``: one cold 60-pair Sinkhorn from ``log max(p_T, 1e-30)`` to the
**uniform** target, mode ``wasserstein``) gives a potential ``f`` per candidate.  Per query:

* ``conf_dual = f[top1] − median_i f_i`` with ``top1 = argmax p_T`` (first index on ties) and the
  median over the pool (mean of the two middle values for an even pool size);
* ``top1_f = f[top1]`` (raw, the input of the rank-based ECE of
  :func:`jkofast.eval.selective.ece_rank`);
* the competing signals ``conf_softmax = max_i softmax(logits)_i`` (τ = 1, the raw rerank
  logits) and ``conf_margin = p_(1) − p_(2)`` (the two largest entries of ``p_T``).

Since ``f_i = ε (log p_i − LSE_j((g_j − C_ij)/ε))``, a high ``f`` is tied to a high ``p_T``.

Pools of size 1 are defined by the same formulas: ``conf_dual = 0`` (``f[0]`` is its own
median), ``conf_softmax = 1`` and ``conf_margin = p_(1) − 0`` (the missing second entry counts
as probability 0; ``rerank_batch`` gives ``p = [1]``, so 1).

:func:`write_confidence_lines` writes the three signals, one line per query, for a batch user
who routes or abstains on low-confidence queries (``jkofast rerank --confidence FILE``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from jkofast import _status
from jkofast._io import atomic_open
from jkofast._numba import register_warmup
from jkofast._threads import numba_threads
from jkofast._validation import QueryRejects, as_float_array, check_offsets, segment_any
from jkofast.kernels.jko import confidence as _k

__all__ = [
    "CONFIDENCE_COLUMNS",
    "ConfidenceSignals",
    "confidence_signals",
    "dual_confidence",
    "format_confidence_lines",
    "write_confidence_file",
    "write_confidence_lines",
]

CONFIDENCE_COLUMNS = ("conf_dual", "conf_softmax", "conf_margin")


@dataclass
class ConfidenceSignals:
    """Per-query Dual-Rank signals (output of :func:`confidence_signals`).

    Attributes
    ----------
    conf_dual : ndarray float64 (n_queries,)
        ``f[top1] − median f``.
    top1_f : ndarray float64 (n_queries,)
        ``f[top1]`` (raw).
    conf_softmax : ndarray float64 (n_queries,)
        ``max softmax(logits)`` (NaN for every query when no logits were given).
    conf_margin : ndarray float64 (n_queries,)
        ``p_(1) − p_(2)``.
    top1 : ndarray int64 (n_queries,)
        Position of ``argmax p`` within its pool (first on ties).
    status : ndarray int32 (n_queries,)
        0 = ok; see ``jkofast._status``.  A query with a non-zero status has NaN signals and
        ``top1 = -1``.
    errors : dict[int, str]
        Query index -> reason, for the queries with a non-zero status.
    """

    conf_dual: np.ndarray
    top1_f: np.ndarray
    conf_softmax: np.ndarray
    conf_margin: np.ndarray
    top1: np.ndarray
    status: np.ndarray
    errors: dict = field(default_factory=dict)

    def __len__(self) -> int:
        """Return the number of queries."""
        return int(self.status.shape[0])

    def signal(self, name: str) -> np.ndarray:
        """Return the per-query array of a signal: ``"dual"``, ``"softmax"`` or ``"margin"`` (or a column name)."""
        key = name if name.startswith("conf_") else f"conf_{name}"
        if key not in CONFIDENCE_COLUMNS:
            raise ValueError(f"name must be one of dual, softmax, margin, got {name!r}")
        return getattr(self, key)


def _flat_input(x, name: str, n: int | None = None) -> np.ndarray:
    a = as_float_array(x, name, dtype=np.float64, ndim=1, allow_empty=True, finite=False)
    if not a.flags.writeable:  # a read-only array is another Numba type: one more compilation
        a = a.copy()
    if n is not None and a.shape[0] != n:
        raise ValueError(f"{name} must have one entry per candidate ({n}, from offsets), got {a.shape[0]}")
    return a


def confidence_signals(p, f, logits, offsets, *, status=None, n_threads: int | None = None) -> ConfidenceSignals:
    r"""Dual-Rank confidence signals of a ragged batch of pools (SPEC A.6.4).

    Parameters
    ----------
    p : array_like, float (n_total,)
        Final JKO distributions ``p_T``, pool ``q`` in ``p[offsets[q]:offsets[q+1]]``.
    f : array_like, float (n_total,)
        Dual potentials of the uniform-target read-out (SPEC A.4.5), aligned with ``p``.
    logits : array_like, float (n_total,) or None
        Raw rerank logits (τ = 1); ``-inf`` entries count as probability 0.  ``None``: no
        softmax signal (``conf_softmax`` is NaN).
    offsets : array_like, int (n_queries + 1,)
    status : array_like, int (n_queries,), optional
        Per-query status of the run that produced ``p, f`` (``RerankResult.status``): queries
        with a non-zero status are skipped and keep it.
    n_threads : int, optional
        Numba threads.

    Returns
    -------
    ConfidenceSignals
        A bad pool (empty; NaN/inf in ``p`` or ``f``; negative ``p``; NaN or ``+inf`` logits, or
        all logits ``-inf``) gets a non-zero ``status``, NaN signals, ``top1 = -1`` and an
        ``errors`` entry naming the array; the other pools return.

    Raises
    ------
    TypeError
        Non-numeric arrays, non-integer offsets.
    ValueError
        Bad offsets, arrays whose length is not ``offsets[-1]``, a ``status`` of the wrong length.

    Examples
    --------
    >>> s = confidence_signals([0.7, 0.2, 0.1], [0.5, 0.1, -0.2], [2.0, 0.0, 0.0], [0, 3])
    >>> round(float(s.conf_dual[0]), 6), round(float(s.conf_margin[0]), 6), int(s.top1[0])
    (0.4, 0.5, 0)
    """
    pa = _flat_input(p, "p")
    n = pa.shape[0]
    off = check_offsets(offsets, n)
    nq = off.shape[0] - 1
    fa = _flat_input(f, "f", n)
    has_logits = logits is not None
    la = _flat_input(logits, "logits", n) if has_logits else np.zeros(1)
    rj = QueryRejects(nq)
    st, errors, reject = rj.status, rj.errors, rj.reject
    if status is not None:
        s_in = np.asarray(status)
        if s_in.dtype.kind not in "iu" or s_in.shape != (nq,):
            raise ValueError(f"status must be an integer array with one entry per query ({nq}), got {s_in.shape}")
        st[:] = s_in
        for q in np.flatnonzero(st):
            errors[int(q)] = f"status {int(st[q])} on input: {_status.MESSAGES.get(int(st[q]), 'failed')}"

    reject(np.diff(off) == 0, _status.EMPTY, "empty pool")
    # fast path: one vectorised pass per array; the per-pool reductions only when something is off
    if not (np.isfinite(pa).all() and (pa >= 0).all()):
        reject(segment_any(~np.isfinite(pa), off), _status.BAD_INPUT, "p contains NaN or inf")
        reject(segment_any(pa < 0, off), _status.BAD_INPUT, "p has negative entries")
    if not np.isfinite(fa).all():
        reject(segment_any(~np.isfinite(fa), off), _status.BAD_INPUT, "f contains NaN or inf")
    if has_logits and not np.isfinite(la).all():
        reject(segment_any(np.isnan(la) | (la == np.inf), off), _status.BAD_INPUT, "logits contain NaN or +inf")
        finite_any = segment_any(np.isfinite(la), off)
        reject(~finite_any & (np.diff(off) > 0), _status.BAD_INPUT, "logits are all -inf")
    top1 = np.full(nq, -1, np.int64)
    out = [np.full(nq, np.nan) for _ in range(4)]
    with numba_threads(n_threads):
        _k.confidence_pools(pa, fa, la, has_logits, off, st, top1, *out)
    top1_f, conf_dual, conf_softmax, conf_margin = out
    return ConfidenceSignals(conf_dual, top1_f, conf_softmax, conf_margin, top1, st, errors)


def dual_confidence(result, logits, *, n_threads: int | None = None) -> ConfidenceSignals:
    """Dual-Rank signals of a :class:`~jkofast.jko.solver.RerankResult` run with ``return_duals=True``.

    Parameters
    ----------
    result : RerankResult
        Output of ``rerank_batch(..., return_duals=True)`` (mode ``wasserstein`` or ``bregman``:
        other modes have ``f = 0`` and ``conf_dual = 0``).  Failed queries keep their status.
    logits : array_like (n_total,) or None
        Raw rerank logits aligned with the flat candidates.
    n_threads : int, optional

    Returns
    -------
    ConfidenceSignals

    Raises
    ------
    ValueError
        ``result`` carries no duals (run with ``return_duals=False``).
    """
    if getattr(result, "f", None) is None:
        raise ValueError("result has no duals: run rerank_batch(..., return_duals=True)")
    return confidence_signals(result.p, result.f, logits, result.offsets, status=result.status, n_threads=n_threads)


def _columns(conf) -> list[np.ndarray]:
    if isinstance(conf, ConfidenceSignals):
        return [np.asarray(getattr(conf, c), np.float64) for c in CONFIDENCE_COLUMNS]
    if isinstance(conf, Mapping):
        missing = [c for c in CONFIDENCE_COLUMNS if c not in conf]
        if missing:
            raise ValueError(f"conf is missing the columns {missing}")
        return [np.asarray(conf[c], np.float64).reshape(-1) for c in CONFIDENCE_COLUMNS]
    raise TypeError(f"conf must be a ConfidenceSignals or a mapping of {CONFIDENCE_COLUMNS}, got {type(conf).__name__}")


def format_confidence_lines(query_ids, conf, *, header: bool = True) -> str:
    r"""Format one line per query: ``qid\tconf_dual\tconf_softmax\tconf_margin``.

    Floats are written as ``repr`` (full precision, round-trips through ``float``; ``nan`` for
    a failed query or a missing softmax signal).  With ``header`` the text starts with
    ``# query_id\tconf_dual\tconf_softmax\tconf_margin``.

    Parameters
    ----------
    query_ids : sequence of str
        One id per query, without tabs or line breaks.
    conf : ConfidenceSignals or mapping
        The signals (a mapping needs the keys ``conf_dual``, ``conf_softmax``, ``conf_margin``).
    header : bool

    Raises
    ------
    ValueError
        A length mismatch, an empty id or an id holding whitespace that would break the columns.
    TypeError
        ``conf`` of another type.
    """
    cols = _columns(conf)
    qids = [str(q) for q in query_ids]
    for c, name in zip(cols, CONFIDENCE_COLUMNS, strict=True):
        if c.shape[0] != len(qids):
            raise ValueError(f"query_ids has {len(qids)} entries but {name} has {c.shape[0]}")
    for q in qids:
        if not q or any(ch in q for ch in "\t\n\r"):
            raise ValueError(f"query_ids: {q!r} is empty or holds a tab or line break")
    lines = ["# query_id\t" + "\t".join(CONFIDENCE_COLUMNS)] if header else []
    d, s, m = (c.tolist() for c in cols)
    lines += [f"{q}\t{a!r}\t{b!r}\t{c!r}" for q, a, b, c in zip(qids, d, s, m, strict=True)]
    return "".join(x + "\n" for x in lines)


def write_confidence_lines(fh, query_ids, conf, *, header: bool = True) -> int:
    r"""Write the confidence lines of :func:`format_confidence_lines` to an open file.

    Parameters
    ----------
    fh : file object
        Text (``str`` written) or binary (UTF-8 bytes written) handle, e.g. from
        :func:`jkofast.eval.runio.atomic_open`.
    query_ids : sequence of str
    conf : ConfidenceSignals or mapping
    header : bool
        Start with the ``#`` header line (False for the chunks after the first).

    Returns
    -------
    int
        The number of query lines written.

    Examples
    --------
    >>> buf = io.StringIO()
    >>> write_confidence_lines(buf, ["q1"], {"conf_dual": [0.5], "conf_softmax": [0.25], "conf_margin": [0.1]})
    1
    >>> buf.getvalue().splitlines()[1]
    'q1\t0.5\t0.25\t0.1'
    """
    text = format_confidence_lines(query_ids, conf, header=header)
    if isinstance(fh, io.TextIOBase):
        fh.write(text)
    else:
        fh.write(text.encode("utf-8"))
    return len(query_ids)


def write_confidence_file(path, query_ids, conf) -> str:
    """Write the confidence lines (with header) to ``path`` atomically; return the path.

    Raises
    ------
    ValueError
        ``path`` is a folder, or its parent folder does not exist.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"confidence file path {path!r} is a folder; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ValueError(f"confidence file path {path!r}: folder {parent!r} does not exist")
    text = format_confidence_lines(query_ids, conf)
    with atomic_open(path) as fh:
        fh.write(text.encode("utf-8"))
    return path


@register_warmup("jko.confidence")
def _warmup() -> None:
    p = np.array([0.5, 0.3, 0.2])
    confidence_signals(p, np.array([0.1, 0.0, -0.1]), np.array([1.0, 0.0, -1.0]), np.array([0, 3]), n_threads=1)
    confidence_signals(p, np.zeros(3), None, np.array([0, 3]), n_threads=1)
