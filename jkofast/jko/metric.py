"""NM-JKO: a learned low-rank ground metric for JKO reranking (SPEC A.6.2).

A projection ``W`` (r x d, r = 64, d = 384) is trained with a multi-positive InfoNCE loss over
each training query's whole candidate pool,

    s_j = -||W (z_q - z_j)||²,    L(W) = -mean_{g ∈ gold ∩ pool} log softmax_j(s)_g,

(no temperature), one AdamW step per query (lr 5e-3, weight decay 1e-4, betas (0.9, 0.999),
eps 1e-8, ``torch.optim.AdamW`` semantics), 150 epochs, the training list reshuffled every epoch.
The learned cost ``C^W_ij = (1 - clip(cos(W z_i, W z_j), -1, 1))²`` then replaces C in the JKO
flow (K, the energy and p0 stay on the raw embeddings): pass ``W`` to
``jkofast.jko.solver.rerank_batch(..., projection=W)``.

The gradient in W is written by hand (``jkofast.kernels.jko.metric``: ``∂L/∂W = -2 Σ_j c_j
W d_j d_jᵀ`` with ``c_j = softmax(s)_j - [j gold]/n_gold``) and checked against central finite
differences in the tests; a one-off run against ``torch`` 2.13 (float64 autograd +
``torch.optim.AdamW``, same init, same order) agreed to 6e-16 in W after 7 epochs. Arithmetic is
float64 (the reference trains in float32). Training is serial (one step per query, each needing
the previous W; see the kernel module for the measured reason not to split a step across
threads), so it takes no thread count, and is deterministic.

Sensitivity. 150 epochs of constant-lr Adam on 79 queries drive the training loss to its floor,
where Adam's steps occasionally spike the loss (on SciFact: 0.07 -> 0.93 for one epoch, then
back). Rounding-level changes (another summation order, float32 instead of float64) move the
timing of those spikes, so W itself is reproducible only to about 1 % across implementations
(two summation orders of the same products: max ``|ΔW|`` 0.033 against
max ``|W|`` 2.8), while the final
loss agreed to 4e-5. Compare NM-JKO runs by their loss and ranking metrics, not by W.

Random streams. The reference draws the init noise of ``W = [I_r | 0] + 0.01·N(0, 1)`` from
torch's generator (seed 0), which cannot be reproduced without torch: here it comes from
``numpy.random.default_rng(seed).standard_normal((r, d))`` — **the one deviation** from the
published procedure. The query selection and the per-epoch shuffles use one
``numpy.random.default_rng(0)`` generator as the SPEC says: :func:`select_training_queries`
shuffles with it and :func:`train_metric` (``order_rng=``) keeps drawing from it, one in-place
``shuffle`` of the training list per epoch.
"""

from __future__ import annotations

import dataclasses
import os
import time
import zipfile
import zlib

import numpy as np

from jkofast import _codes, _status
from jkofast._io import atomic_save_npz
from jkofast._numba import register_warmup
from jkofast._validation import as_float_array, check_int, check_offsets, check_positive
from jkofast.kernels.jko import metric as _k

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "LearnedMetric",
    "TrainingSelection",
    "infonce_loss",
    "init_projection",
    "load_metric",
    "save_metric",
    "select_training_queries",
    "train_metric",
]

FORMAT = "jkofast-nm-jko-metric"
FORMAT_VERSION = 1

BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


@dataclasses.dataclass
class LearnedMetric:
    """A trained NM-JKO projection and its training record.

    Attributes
    ----------
    W : ndarray float64 (r, d)
        The projection ``z -> W z``.
    loss_history : ndarray float64 (epochs,)
        Mean InfoNCE loss of each epoch's steps (each evaluated just before its update).
    final_loss : float
        Mean InfoNCE loss of the training queries at the final ``W`` (NaN when unknown).
    n_train : int
        Training queries.
    epochs : int
    lr, weight_decay : float
    seed : int
        Seed of the init noise.
    train_seconds : float
        Wall time of the training loop (NaN when unknown, e.g. loaded without it).
    train_cpu_seconds : float
        CPU time of the training loop (the loop is serial: independent of other load on the machine).
    """

    W: np.ndarray
    loss_history: np.ndarray
    final_loss: float = float("nan")
    n_train: int = 0
    epochs: int = 0
    lr: float = 5e-3
    weight_decay: float = 1e-4
    seed: int = 0
    train_seconds: float = float("nan")
    train_cpu_seconds: float = float("nan")

    @property
    def rank(self) -> int:
        """``r``, the number of rows of W."""
        return int(self.W.shape[0])

    @property
    def dim(self) -> int:
        """``d``, the embedding dimension."""
        return int(self.W.shape[1])

    def project(self, Z) -> np.ndarray:
        """Return ``Z Wᵀ`` (rows projected; float64)."""
        Z = as_float_array(Z, "Z", dtype=np.float64, ndim=2)
        if Z.shape[1] != self.dim:
            raise ValueError(f"Z must have {self.dim} columns (the metric's d), got {Z.shape[1]}")
        return Z @ self.W.T


@dataclasses.dataclass
class TrainingSelection:
    """The NM-JKO training queries picked from a batch of pools (:func:`select_training_queries`).

    Attributes
    ----------
    index : ndarray int64 (n_train,)
        Positions in the input batch, in the shuffled order (the first ``n_train`` eligible).
    query_ids : list of str
        Their ids.
    gold_mask : ndarray bool (n_total,)
        Flat over the *input* pools: the pool doc is listed in the query's qrels (any label).
    n_candidates : int
        Input queries.
    n_eligible : int
        Input queries with at least one gold doc in their pool.
    """

    index: np.ndarray
    query_ids: list
    gold_mask: np.ndarray
    n_candidates: int
    n_eligible: int

    @property
    def n_train(self) -> int:
        """Number of selected queries."""
        return int(self.index.shape[0])


def select_training_queries(
    query_ids, qrels: dict, pool_offsets, pool_doc_ids, *, n_train: int = 80, rng=None
) -> TrainingSelection:
    """Pick the NM-JKO training queries of a batch of (train-split) pools, SPEC A.6.2.

    Gold = every doc id listed in ``qrels[q]`` (the label is not checked). Queries with at least
    one gold doc in their pool are kept (input order), shuffled in place with ``rng``
    (default ``numpy.random.default_rng(0)``), and the first ``n_train`` are returned. On
    SciFact the 80 tuning train queries (SPEC A.7.9, ``jkofast.studies.tuning.train_queries``)
    give 79.

    Parameters
    ----------
    query_ids : sequence of str (n_queries,)
    qrels : dict
        ``qid -> {doc_id: label}`` (the train split).
    pool_offsets : array_like int (n_queries + 1,)
    pool_doc_ids : sequence of str (n_total,)
        Doc id of every flat pool entry.
    n_train : int
        How many to keep (80 on SciFact, 60 on NFCorpus / FiQA).
    rng : numpy.random.Generator, optional
        The shuffle generator; pass the same one to :func:`train_metric` (``order_rng``) to
        continue the SPEC's single stream.

    Returns
    -------
    TrainingSelection

    Raises
    ------
    ValueError
        Lengths that do not match the offsets; no query with a gold doc in its pool.
    """
    qids = [str(q) for q in query_ids]
    docs = list(pool_doc_ids)
    off = check_offsets(pool_offsets, len(docs), "pool_offsets")
    if off.shape[0] - 1 != len(qids):
        raise ValueError(f"pool_offsets describes {off.shape[0] - 1} pools but query_ids has {len(qids)} queries")
    n_train = check_int(n_train, "n_train", min_value=1)
    gold = np.zeros(len(docs), bool)
    for q, qid in enumerate(qids):
        judged = qrels.get(qid, {})
        for i in range(off[q], off[q + 1]):
            gold[i] = str(docs[i]) in judged
    has_gold = np.array([gold[off[q] : off[q + 1]].any() for q in range(len(qids))], bool)
    eligible = [int(q) for q in np.flatnonzero(has_gold)]
    if not eligible:
        raise ValueError(
            f"no eligible training query: none of the {len(qids)} queries has a qrels doc in its pool (qrels, pools)"
        )
    rng = np.random.default_rng(0) if rng is None else rng
    rng.shuffle(eligible)
    index = np.asarray(eligible[:n_train], np.int64)
    return TrainingSelection(index, [qids[i] for i in index], gold, len(qids), len(eligible))


def init_projection(r: int, d: int, seed: int = 0) -> np.ndarray:
    """Return ``W = [I_r | 0] + 0.01·N(0, 1)`` (r x d, float64), noise from ``default_rng(seed)``.

    The reference draws the noise with torch (seed 0); numpy's stream stands in for it.

    Raises
    ------
    ValueError
        ``r > d`` (``[I_r | 0]`` needs r <= d) or a size < 1.
    """
    r = check_int(r, "r", min_value=1)
    d = check_int(d, "d", min_value=1)
    if r > d:
        raise ValueError(f"r must be <= d (the identity block [I_r | 0]), got r={r}, d={d}")
    seed = check_int(seed, "seed", min_value=0)
    W = np.zeros((r, d))
    W[:, :r] = np.eye(r)
    W += 0.01 * np.random.default_rng(seed).standard_normal((r, d))
    return W


def _check_batch(query_emb, pool_offsets, pool_emb, gold_mask):
    """Coerce and check the training batch; return ``Q, off, Z, gold`` (float64 / int64 / bool)."""
    Q = as_float_array(query_emb, "query_emb", dtype=np.float64, ndim=2)
    Z = as_float_array(pool_emb, "pool_emb", dtype=np.float64, ndim=2)
    if Z.shape[1] != Q.shape[1]:
        raise ValueError(f"pool_emb must have d = {Q.shape[1]} columns like query_emb, got {Z.shape[1]}")
    off = check_offsets(pool_offsets, Z.shape[0], "pool_offsets")
    if off.shape[0] - 1 != Q.shape[0]:
        raise ValueError(f"pool_offsets describes {off.shape[0] - 1} pools but query_emb has {Q.shape[0]} rows")
    g = np.asarray(gold_mask)
    if g.dtype != np.bool_:
        if g.dtype.kind not in "iu" or not np.isin(g, (0, 1)).all():
            raise TypeError(f"gold_mask must be a bool array (or integers 0/1), got dtype {g.dtype}")
        g = g.astype(bool)
    if g.ndim != 1 or g.shape[0] != Z.shape[0]:
        raise ValueError(f"gold_mask must be 1-D with one entry per pool row ({Z.shape[0]}), got shape {g.shape}")
    return Q, off, Z, np.ascontiguousarray(g)


def _eligible(off: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Boolean per query: a non-empty pool with at least one gold row."""
    n = off.shape[0] - 1
    counts = np.add.reduceat(gold.astype(np.int64), off[:-1]) if gold.size else np.zeros(n, np.int64)
    return (np.diff(off) > 0) & (counts > 0)


def _check_queries(queries, off: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Return the training list (int64 positions), all eligible (default: every eligible query)."""
    ok = _eligible(off, gold)
    n = ok.shape[0]
    if queries is None:
        idx = np.flatnonzero(ok).astype(np.int64)
        if idx.size == 0:
            raise ValueError(f"no eligible training query: none of the {n} pools has a gold row (gold_mask)")
        return idx
    q = np.asarray(queries)
    if q.dtype.kind not in "iu" or q.ndim != 1:
        raise TypeError(f"queries must be a 1-D integer array of query positions, got dtype {q.dtype}, ndim {q.ndim}")
    if q.size == 0:
        raise ValueError("no eligible training query: queries is empty")
    if q.min() < 0 or q.max() >= n:
        raise ValueError(f"queries must be positions in [0, {n}), got {q.min()}..{q.max()}")
    bad = q[~ok[q]]
    if bad.size:
        raise ValueError(f"queries: query {int(bad[0])} has an empty pool or no gold row (gold_mask); not trainable")
    return np.ascontiguousarray(q, dtype=np.int64)


def _hyper(lr, weight_decay) -> np.ndarray:
    lr = check_positive(lr, "lr")
    wd = check_positive(weight_decay, "weight_decay", strict=False)
    return np.array([lr, wd, BETAS[0], BETAS[1], ADAM_EPS])


def train_metric(
    query_emb,
    pool_offsets,
    pool_emb,
    gold_mask,
    *,
    queries=None,
    r: int = 64,
    epochs: int = 150,
    lr: float = 5e-3,
    weight_decay: float = 1e-4,
    seed: int = 0,
    order_rng=None,
) -> LearnedMetric:
    """Train the NM-JKO projection W by InfoNCE + AdamW, one step per query (SPEC A.6.2).

    Parameters
    ----------
    query_emb : array_like float (n_queries, d)
        Query embeddings (L2-normalised MiniLM in the reference).
    pool_offsets : array_like int (n_queries + 1,)
        Query q's pool is ``pool_emb[pool_offsets[q]:pool_offsets[q+1]]``.
    pool_emb : array_like float (n_total, d)
        Pool document embeddings, flat.
    gold_mask : array_like bool (n_total,)
        Gold pool rows (e.g. :attr:`TrainingSelection.gold_mask`).
    queries : array_like int, optional
        The training list (positions, in order; e.g. :attr:`TrainingSelection.index`).
        Default: every query with a gold row, in input order.
    r : int
        Rank of W (64); ``r <= d``.
    epochs : int
        Passes over the training list (150 in the published run); 0 returns the init.
    lr, weight_decay : float
        AdamW learning rate and decoupled weight decay (torch semantics; betas (0.9, 0.999), eps 1e-8).
    seed : int
        Seed of the init noise (``numpy.random.default_rng(seed)``; the reference uses torch's generator).
    order_rng : numpy.random.Generator, optional
        Generator of the per-epoch in-place shuffles of the training list; default a fresh
        ``default_rng(0)``. Pass the one :func:`select_training_queries` used to continue the SPEC's stream.

    Returns
    -------
    LearnedMetric

    Raises
    ------
    ValueError
        Shapes that disagree (the argument is named), NaN/inf embeddings, no eligible training
        query, a listed query without a gold row, ``r > d``.
    TypeError
        A non-boolean ``gold_mask``, non-integer ``queries`` / ``r`` / ``epochs``.
    FloatingPointError
        The loss became non-finite during training (names the epoch and step).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> Q = rng.standard_normal((2, 4)); Z = rng.standard_normal((6, 4))
    >>> gold = np.array([1, 0, 0, 0, 1, 0], bool)
    >>> m = train_metric(Q, [0, 3, 6], Z, gold, r=2, epochs=3)
    >>> m.W.shape, m.loss_history.shape
    ((2, 4), (3,))
    """
    Q, off, Z, gold = _check_batch(query_emb, pool_offsets, pool_emb, gold_mask)
    train = _check_queries(queries, off, gold).copy()
    epochs = check_int(epochs, "epochs", min_value=0)
    hp = _hyper(lr, weight_decay)
    W = init_projection(r, Q.shape[1], seed)
    rng = np.random.default_rng(0) if order_rng is None else order_rng
    m1 = np.zeros_like(W)
    m2 = np.zeros_like(W)
    hist = np.zeros(epochs)
    steps = np.zeros(train.shape[0])
    t0, c0 = time.perf_counter(), time.process_time()
    for e in range(epochs):
        rng.shuffle(train)
        done, status = _k.train_epoch(W, m1, m2, e * train.shape[0], Q, Z, off, gold, train, hp, steps)
        if status != _codes.OK:
            raise FloatingPointError(
                f"train_metric: {_status.MESSAGES.get(int(status), status)} at epoch {e}, step {done} "
                f"(query {int(train[done])}); lower lr?"
            )
        hist[e] = steps.mean()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    final = _losses(W, Q, Z, off, gold, train)
    return LearnedMetric(
        W=W,
        loss_history=hist,
        final_loss=float(final.mean()),
        n_train=int(train.shape[0]),
        epochs=epochs,
        lr=float(hp[0]),
        weight_decay=float(hp[1]),
        seed=int(seed),
        train_seconds=seconds,
        train_cpu_seconds=cpu,
    )


def _losses(W, Q, Z, off, gold, queries) -> np.ndarray:
    out = np.empty(queries.shape[0])
    _k.infonce_losses(W, Q, Z, off, gold, queries, out)
    return out


def infonce_loss(W, query_emb, pool_offsets, pool_emb, gold_mask, *, queries=None) -> np.ndarray:
    """Per-query InfoNCE loss at ``W`` (no training): ``LSE_j(s_j) - mean_{gold} s_g``, ``s_j = -||W(z_q - z_j)||²``.

    Parameters and checks as :func:`train_metric`; ``W`` (r, d). Returns float64 ``(len(queries),)``.
    """
    Q, off, Z, gold = _check_batch(query_emb, pool_offsets, pool_emb, gold_mask)
    Wc = _check_W(W, Q.shape[1], "W")
    qs = _check_queries(queries, off, gold)
    return _losses(Wc, Q, Z, off, gold, qs)


def _check_W(W, d: int | None, name: str) -> np.ndarray:
    Wc = as_float_array(W, name, dtype=np.float64, ndim=2, copy=True)
    if d is not None and Wc.shape[1] != d:
        raise ValueError(f"{name} must have d = {d} columns, got shape {Wc.shape}")
    return Wc


def save_metric(metric, path) -> str:
    """Write a learned metric (``LearnedMetric`` or a bare W array) to ``path`` (``.npz``); return the path.

    The file holds ``format``, ``version``, ``W`` and the training record (``loss_history``,
    ``final_loss``, ``n_train``, ``epochs``, ``lr``, ``weight_decay``, ``seed``, ``train_seconds``,
    ``train_cpu_seconds``).
    Written to a temporary name and renamed, so a crash never leaves half a file.

    Raises
    ------
    ValueError
        A W that is not 2-D or not finite; ``path`` is a folder.
    """
    if not isinstance(metric, LearnedMetric):
        metric = LearnedMetric(W=_check_W(metric, None, "metric"), loss_history=np.zeros(0))
    W = _check_W(metric.W, None, "metric.W")
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"path {path!r} is a folder; give a file name such as nm_jko_W.npz")
    if not path.endswith(".npz"):
        path += ".npz"
    atomic_save_npz(
        path,
        format=np.array(FORMAT),
        version=np.array(FORMAT_VERSION),
        W=W,
        loss_history=np.asarray(metric.loss_history, np.float64),
        final_loss=np.array(float(metric.final_loss)),
        n_train=np.array(int(metric.n_train)),
        epochs=np.array(int(metric.epochs)),
        lr=np.array(float(metric.lr)),
        weight_decay=np.array(float(metric.weight_decay)),
        seed=np.array(int(metric.seed)),
        train_seconds=np.array(float(metric.train_seconds)),
        train_cpu_seconds=np.array(float(metric.train_cpu_seconds)),
    )
    return path


def load_metric(path, *, d: int | None = None) -> LearnedMetric:
    """Read a metric written by :func:`save_metric` (validated).

    Parameters
    ----------
    path : str or path-like
    d : int, optional
        Expected embedding dimension (W's columns).

    Returns
    -------
    LearnedMetric

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not an NM-JKO metric file (missing ``format``/``version``/``W``), an unsupported version,
        a W that is not 2-D, empty, not finite, or not ``d`` columns wide.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"metric file {path!r} not found")
    try:
        return _read_metric(path, d)
    # NotImplementedError: zipfile's answer to a header naming a zip version or compression it lacks
    except (OSError, ValueError, EOFError, KeyError, NotImplementedError, zipfile.BadZipFile, zlib.error) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith(repr(path)):
            raise
        raise ValueError(f"{path!r} is not a readable .npz metric file ({type(exc).__name__}: {exc})") from None


def _read_metric(path: str, d) -> LearnedMetric:
    """Read and check the arrays of a metric file (any damage raises; :func:`load_metric` names the file)."""
    f = np.load(path, allow_pickle=False)
    with f:
        keys = set(f.files)
        if not {"format", "version", "W"} <= keys or str(f["format"]) != FORMAT:
            raise ValueError(f"{path!r} is not an NM-JKO metric file (format {FORMAT!r} with version and W expected)")
        version = int(f["version"])
        if version != FORMAT_VERSION:
            raise ValueError(
                f"{path!r}: unsupported metric file version {version} (this jkofast reads {FORMAT_VERSION})"
            )
        W = np.asarray(f["W"])
        if W.ndim != 2 or W.size == 0:
            raise ValueError(f"{path!r}: W must be a non-empty 2-D array, got shape {W.shape}")
        W = _check_W(W, d, f"{path!r}: W")

        def num(key, default, cast):
            return cast(f[key]) if key in keys else default

        return LearnedMetric(
            W=W,
            loss_history=np.asarray(f["loss_history"], np.float64) if "loss_history" in keys else np.zeros(0),
            final_loss=num("final_loss", float("nan"), float),
            n_train=num("n_train", 0, int),
            epochs=num("epochs", 0, int),
            lr=num("lr", 5e-3, float),
            weight_decay=num("weight_decay", 1e-4, float),
            seed=num("seed", 0, int),
            train_seconds=num("train_seconds", float("nan"), float),
            train_cpu_seconds=num("train_cpu_seconds", float("nan"), float),
        )


@register_warmup("nm_jko")
def _warmup() -> None:
    Q = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    Z = np.array([[0.9, 0.1, 0.0], [0.0, 0.2, 0.9], [0.1, 0.9, 0.0], [0.5, 0.5, 0.5], [0.0, 0.0, 1.0]])
    gold = np.array([True, False, True, False, False])
    m = train_metric(Q, np.array([0, 2, 5]), Z, gold, r=2, epochs=1)
    infonce_loss(m.W, Q, np.array([0, 2, 5]), Z, gold)
