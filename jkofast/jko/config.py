"""JKO-RAG configuration: ``JKOConfig``, the named operating points and the gradient path each entry runs.

Two defaults for the transport term's gradient (``grad``), by design:

* the drop-in entries -- :func:`~jkofast.jko.solver.run_jko`, ``run_jko_with_duals``, ``jko_step``
  and everything in :mod:`jkofast.compat` -- keep the published solver's ``grad="unrolled"``
  (``JKOConfig``'s default): they promise parity with the reference implementation;
* the batch entries -- :func:`~jkofast.jko.solver.rerank_batch`, :func:`~jkofast.jko.stream.rerank_stream`,
  ``jkofast rerank`` (with or without ``--dask``) and :mod:`jkofast.distributed` -- run an
  operating point given by name on ``grad="implicit"`` (:data:`BATCH_GRAD`): the exact gradient at
  a converged, warm-started plan, several times faster on large batches.

A ``JKOConfig`` passed to a batch entry keeps its own ``grad``, and an explicit ``grad`` always
wins (:func:`batch_config`); ``grad="unrolled"`` gives a batch the published path, byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
from dataclasses import dataclass

import numpy as np

from jkofast._validation import check_int, check_positive
from jkofast.kernels.jko import solver as _k

__all__ = [
    "BATCH_GRAD",
    "DTYPES",
    "FLOW_FIELDS",
    "GRADS",
    "MODES",
    "OBJECTIVES",
    "POINT_FORMAT",
    "JKOConfig",
    "batch_config",
    "gradient_path",
    "operating_point",
    "point_file_config",
    "published_point",
    "read_point_file",
    "resolve_config",
]

MODES = {"wasserstein": _k.MODE_W, "kl": _k.MODE_KL, "noproximal": _k.MODE_NOPROX, "bregman": _k.MODE_BREGMAN}
GRADS = {"unrolled": _k.GRAD_UNROLLED, "implicit": _k.GRAD_IMPLICIT}
OBJECTIVES = {"transport": _k.OBJ_TRANSPORT, "entropic": _k.OBJ_ENTROPIC}
DTYPES = ("float64", "float32")


@dataclass
class JKOConfig:
    """Parameters of the JKO flow (names as the published ``JKOConfig``; SPEC A.4.1).

    Attributes
    ----------
    h, lam, rho, sinkhorn_eps : float
        Step size h, entropy weight λ, redundancy weight ρ, Sinkhorn ε.
    sinkhorn_iter, sinkhorn_iter_grad : int
        Update pairs per Sinkhorn call and how many of the last ones are differentiated
        (``grad="unrolled"``; also the iteration count of the dual read-out).
    inner_steps, inner_lr, T : int, float, int
        Adam steps per outer step, Adam learning rate, number of outer steps.
    mode : {"wasserstein", "kl", "noproximal", "bregman"}
    alpha_prox : float
        Weight of the transport part in ``bregman`` (clamped to [0, 1]).
    objective : {"transport", "entropic"}
    grad : {"unrolled", "implicit"}
    tol : float or None
        Row-marginal L1 tolerance of the converged Sinkhorn solves (``implicit`` /
        ``entropic``); None means 1e-5 for ``implicit`` (plus ``tol_step``) and 1e-6 for
        ``entropic`` (the gradient uses the plan's own marginals, so a loose tolerance
        shifts it by O(tol) only). ``implicit`` with tol and cg_tol >= 1e-5 stores the
        Gibbs kernels in float32 (float32 sums, half the bytes per matvec) when
        max/min Kg <= e^60; tighter tolerances use float64.
    tau0 : float
        Temperature τ0 of the default initial distribution ``p0 = softmax(-E/τ0)``.
    sinkhorn_max_iter, cg_tol, cg_max_iter
        Limits of the converged solves (pairs per solve, CG tolerance relative to the
        row costs of Π ⊙ C, CG steps).
    tol_step : float
        ``grad="implicit"`` with ``tol=None``: each inner step's Sinkhorn tolerance is
        ``max(1e-5, tol_step * |p - p_prev|_1)`` (warm-started duals only need to be
        accurate relative to how far p moved; 0 = fixed tolerance). Ignored when ``tol``
        is given.
    newton_every : int
        ``grad="implicit"``: a Newton step on the duals after every this many Sinkhorn pairs
        that did not reach ``tol`` (0 = plain Sinkhorn).
    dtype : {"float64", "float32"}
        Precision of the unrolled path's Gibbs operators. ``"float32"``: ``Kg``, ``Kg ⊙ C``
        and their transposes stored in float32 and every Sinkhorn / adjoint matvec summed in
        float32 (as the published solver computes), the scalings, the loss and the adjoint
        accumulations in float64 — about twice as fast, within the parity bar of the
        published solver (``tests/jko/test_float32.py``). A pool whose Gibbs kernel leaves
        the float32 range (``(max C - min C)/ε > 60``) and any inner step whose float32
        scalings underflow run in float64. No effect on ``grad="implicit"`` (float32
        operators there follow ``tol``) or ``objective="entropic"``. Numpy dtypes are
        accepted (``np.float32``).
    """

    h: float = 0.5
    lam: float = 0.05
    rho: float = 0.05
    sinkhorn_eps: float = 0.1
    sinkhorn_iter: int = 60
    sinkhorn_iter_grad: int = 8
    inner_steps: int = 25
    inner_lr: float = 0.1
    T: int = 3
    mode: str = "wasserstein"
    alpha_prox: float = 0.5
    objective: str = "transport"
    grad: str = "unrolled"
    tol: float | None = None
    tau0: float = 0.1
    sinkhorn_max_iter: int = 1000
    cg_tol: float = 1e-3
    tol_step: float = 0.1
    cg_max_iter: int = 200
    newton_every: int = 8
    dtype: str = "float64"

    def validate(self) -> JKOConfig:
        """Raise ValueError/TypeError naming the offending field; return self (``dtype`` normalised to its name)."""
        check_positive(self.h, "h")
        check_positive(self.lam, "lam", strict=False)
        check_positive(self.rho, "rho", strict=False)
        check_positive(self.sinkhorn_eps, "sinkhorn_eps")
        check_int(self.sinkhorn_iter, "sinkhorn_iter", min_value=1)
        check_int(self.sinkhorn_iter_grad, "sinkhorn_iter_grad", min_value=0)
        check_int(self.inner_steps, "inner_steps", min_value=0)
        check_positive(self.inner_lr, "inner_lr")
        check_int(self.T, "T", min_value=0)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}, got {self.mode!r}")
        if self.grad not in GRADS:
            raise ValueError(f"grad must be one of {sorted(GRADS)}, got {self.grad!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {sorted(OBJECTIVES)}, got {self.objective!r}")
        a = self.alpha_prox
        if isinstance(a, bool) or not isinstance(a, numbers.Real):
            raise TypeError(f"alpha_prox must be a real number, got {type(a).__name__}")
        if not np.isfinite(float(a)):
            raise ValueError(f"alpha_prox must be a finite number, got {a!r}")
        if self.tol is not None:
            check_positive(self.tol, "tol")
        check_positive(self.tau0, "tau0")
        check_int(self.sinkhorn_max_iter, "sinkhorn_max_iter", min_value=1)
        check_positive(self.cg_tol, "cg_tol")
        check_positive(self.tol_step, "tol_step", strict=False)
        check_int(self.cg_max_iter, "cg_max_iter", min_value=0)
        check_int(self.newton_every, "newton_every", min_value=0)
        self.dtype = _dtype_name(self.dtype)
        return self

    def resolved_tol(self) -> float:
        """``tol``, or its default: 1e-5 for ``grad="implicit"``, 1e-6 for ``objective="entropic"``."""
        if self.tol is not None:
            return float(self.tol)
        return 1e-6 if self.objective == "entropic" else 1e-5

    def replace(self, **changes) -> JKOConfig:
        """Return a copy with fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def _params(self, with_duals: bool = False) -> _k.JKOParams:
        """Pack the kernels' ``JKOParams`` (Python floats and ints: one compiled signature)."""
        return _k.JKOParams(
            h=float(self.h),
            lam=float(self.lam),
            rho=float(self.rho),
            eps=float(self.sinkhorn_eps),
            alpha=float(self.alpha_prox),
            lr=float(self.inner_lr),
            tol=self.resolved_tol(),
            cg_tol=float(self.cg_tol),
            tol_step=float(self.tol_step) if self.tol is None else 0.0,
            T=int(self.T),
            inner=int(self.inner_steps),
            n_iter=int(self.sinkhorn_iter),
            n_grad=int(self.sinkhorn_iter_grad),
            mode=MODES[self.mode],
            grad=GRADS[self.grad],
            objective=OBJECTIVES[self.objective],
            duals=int(with_duals),
            max_iter=int(self.sinkhorn_max_iter),
            cg_max=int(self.cg_max_iter),
            newton_every=int(self.newton_every),
        )


def _dtype_name(dtype) -> str:
    """``"float64"`` / ``"float32"`` from a name or NumPy dtype; anything else raises naming ``dtype``."""
    if isinstance(dtype, str):
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"dtype must be 'float64' or 'float32', got {dtype!r}") from None
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {list(DTYPES)}, got {dtype!r}")
    return name


def _read_points() -> dict:
    """Return the operating points spelled once, in ``operating_points.json`` beside this module."""
    with open(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "operating_points.json"), encoding="utf-8"
    ) as fh:
        return json.load(fh)


_POINTS_FILE = _read_points()
_POINTS = _POINTS_FILE["points"]


POINT_FORMAT = "jkofast-point/1"  # the point files ``jkofast tune --out`` writes
FLOW_FIELDS = ("h", "lam", "rho", "sinkhorn_eps", "T", "inner_steps", "tau0")  # the flow part of a point


def operating_point(name: str, **overrides) -> JKOConfig:
    """Named operating point of SPEC A.8 (``base``, ``tuned``, ``contrib``, ``fast``), or a point file.

    ``name`` may also be the path of a point file written by ``jkofast tune --out`` (JSON): its
    selected flow (``h``, ``lam``, ``rho``, ``sinkhorn_eps``, ``T``, ``inner_steps``, ``tau0``, and
    the gradient path it was tuned on) over the ``tuned`` point; a selected corner without a flow
    (``dense``, ``bm25`` or ``bm25-lucene`` alone) gives ``T = 0``.  The energy weights and the analyser of the file
    are read by :func:`jkofast.studies.tune.load_point`.  Keyword overrides change fields (e.g.
    ``grad="implicit"``, ``mode="kl"``).
    """
    if name in _POINTS:
        return JKOConfig(**{**_POINTS[name], **overrides}).validate()
    if isinstance(name, str | os.PathLike) and (os.fspath(name).endswith(".json") or os.path.isfile(name)):
        return dataclasses.replace(point_file_config(name), **overrides).validate()
    raise ValueError(f"unknown operating point {name!r}; choose from {sorted(_POINTS)} or give a point file")


def published_point() -> dict:
    """Return the published SciFact point as a ``jkofast tune`` grid point.

    ``kind`` ``"jko"``, the energy weights ``alpha``, ``beta``, ``gamma``, the flow fields of its named
    operating point (``tuned``) and the pool size, as ``operating_points.json`` spells them.
    """
    pub = dict(_POINTS_FILE["published"])
    flow = _POINTS[pub.pop("point")]
    return {"kind": "jko", **{k: pub[k] for k in ("alpha", "beta", "gamma")}, **flow, "pool": pub["pool"]}


def read_point_file(path) -> dict:
    """Read a ``jkofast tune`` point file: the JSON document, its format and selected kind checked.

    The one reader of point files: :func:`point_file_config` takes its flow and
    :func:`jkofast.studies.tune.load_point` its energy weights and analyser.

    Raises
    ------
    ValueError
        Not a point file (invalid JSON, another format) or no selected point, naming the file.
    FileNotFoundError
        No such file.
    """
    path = os.fspath(path)
    with open(path, encoding="utf-8") as fh:
        try:
            doc = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a point file (invalid JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != POINT_FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else None
        raise ValueError(f"{path}: not a point file (format {got!r}, expected {POINT_FORMAT!r})")
    sel = doc.get("selected")
    if not isinstance(sel, dict) or sel.get("kind") not in ("jko", "dense", "bm25", "bm25-lucene"):
        raise ValueError(f"{path}: 'selected' must name a point (kind jko, dense, bm25 or bm25-lucene)")
    return doc


def point_file_config(path, doc: dict | None = None) -> JKOConfig:
    """Return the :class:`JKOConfig` of a ``jkofast tune`` point file (see :func:`operating_point`).

    ``doc`` is the file's document when the caller has read it already (:func:`read_point_file`).

    Raises
    ------
    ValueError
        Not a point file (invalid JSON, another format) or an invalid selected value, naming the file.
    FileNotFoundError
        No such file.
    """
    doc = read_point_file(path) if doc is None else doc
    sel, grad = doc["selected"], doc.get("grad")
    extra = {"grad": grad} if grad else {}
    try:
        if sel["kind"] != "jko":
            return operating_point("tuned", T=0, **extra)
        fields = {k: sel[k] for k in FLOW_FIELDS}
        fields["T"] = check_int(fields["T"], "T", min_value=0)
        fields["inner_steps"] = check_int(fields["inner_steps"], "inner_steps", min_value=1)
        return operating_point("tuned", mode="wasserstein", **fields, **extra)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{os.fspath(path)}: invalid selected point ({type(exc).__name__}: {exc})") from None


def resolve_config(cfg) -> JKOConfig:
    """Return a validated config.

    From a ``JKOConfig``, an operating-point name, None (the defaults) or a duck-typed published
    config object (attributes with the same names).
    """
    if cfg is None:
        return JKOConfig().validate()
    if isinstance(cfg, str):
        return operating_point(cfg)
    if isinstance(cfg, JKOConfig):
        return cfg.validate()
    # duck-typed published config objects (attributes with the same names)
    names = [f.name for f in dataclasses.fields(JKOConfig)]
    if any(hasattr(cfg, n) for n in names):
        return JKOConfig(**{n: getattr(cfg, n) for n in names if hasattr(cfg, n)}).validate()
    raise TypeError(f"cfg must be a JKOConfig, an operating-point name or None, got {type(cfg).__name__}")


BATCH_GRAD = "implicit"  # the gradient path of an operating point named in a batch entry


def batch_config(config, grad: str | None = None) -> JKOConfig:
    """Return the config a batch entry runs.

    Parameters
    ----------
    config : str, JKOConfig or published config object
        An operating-point name runs on :data:`BATCH_GRAD` (``"implicit"``); a config object
        keeps its own ``grad``.
    grad : {"unrolled", "implicit"}, optional
        Overrides both (``"unrolled"``: the published path).

    Examples
    --------
    >>> batch_config("tuned").grad, batch_config("tuned", grad="unrolled").grad
    ('implicit', 'unrolled')
    >>> batch_config(operating_point("tuned")).grad
    'unrolled'
    """
    cfg = resolve_config(config)
    if grad is not None:
        return cfg.replace(grad=grad).validate()
    if isinstance(config, str):
        return cfg.replace(grad=BATCH_GRAD)
    return cfg


def gradient_path(cfg: JKOConfig) -> str:
    """Name the path that computes the transport term of ``cfg``.

    ``"unrolled"`` or ``"implicit"`` (``grad``), ``"entropic"`` (``objective="entropic"``), or
    ``"none"`` for a mode without a transport term (``kl``, ``noproximal``, ``bregman`` at
    ``alpha_prox`` 0), where ``grad`` changes nothing.
    """
    al = min(max(float(cfg.alpha_prox), 0.0), 1.0)
    if not (cfg.mode == "wasserstein" or (cfg.mode == "bregman" and al > 0.0)):
        return "none"
    if cfg.objective == "entropic":
        return "entropic"
    return cfg.grad
