"""SGRConfig: every SparseGeometricRetriever parameter with its default, type and stage, checked in one place.

A field's ``metadata["stage"]`` says whether it shapes the index (``"build"``: changing it needs a new
``fit``) or only the query path (``"query"``: :meth:`SparseGeometricRetriever.set_params` changes it on a
fitted index).  The defaults are the published values (SPEC B.1); see
:class:`jkofast.sgr.retriever.SparseGeometricRetriever` for what each parameter does.
"""

import dataclasses

import numpy as np

from jkofast._validation import check_bool, check_int, check_positive

__all__ = ["BUILD_PARAMS", "PRESETS", "SGRConfig", "as_config", "default_params"]


def _build(default):
    return dataclasses.field(default=default, metadata={"stage": "build"})


def _query(default):
    return dataclasses.field(default=default, metadata={"stage": "query"})


# counts >= 1, counts >= 0, non-negative reals, any finite real (checked in this order)
_COUNTS = (
    "max_features",
    "n_memberships",
    "centre_size",
    "code_size",
    "cooc_top",
    "assoc_k",
    "route_k",
    "route_budget",
    "pool_size",
    "n_rare",
    "n_eligible",
    "top_h",
    "n_diverse",
)
_COUNTS0 = ("semantic_k", "gate_min", "gate_mult", "bm25_candidates")
_NON_NEGATIVE = (
    "tau",
    "ppmi_damping",
    "bm25_k1",
    "alpha",
    "lam_m",
    "eta",
    "w_tail",
    "w_lex",
    "w_sem",
    "w_rare",
    "lam_d",
    "gamma",
    "coord_exp",
    "b_rescue",
    "b_final",
    "bm25_b",
)
_REALS = ("beta", "bm25_weight", "bm25_rescue_weight")
_CHOICES = {
    "semantic_neighbours": ("strongest", "lowest_term_id"),
    "rescue_mode": ("auto", "scan", "postings"),
    "reliability_mean": ("distinct", "occurrence"),
    "empty_fallback": ("lexical", "none"),
}
_FLAGS = ("reliability_float16", "ppmi_include_self", "tail_gate", "postings")
_UNIT = ("b_rescue", "b_final", "bm25_b")


def _real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise TypeError(f"{name} must be a real number")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite")
    return float(value)


def _quoted(options) -> str:
    q = [repr(o) for o in options]
    return " or ".join(q) if len(q) == 2 else ", ".join(q[:-1]) + " or " + q[-1]


@dataclasses.dataclass(frozen=True)
class SGRConfig:
    """The parameters of :class:`jkofast.sgr.retriever.SparseGeometricRetriever` (published defaults).

    Frozen; values are checked and coerced (counts to ``int``, reals to ``float``) on construction,
    and a bad value raises ``TypeError`` or ``ValueError`` naming the parameter.  Change one with
    :meth:`replace` (or ``dataclasses.replace``), which checks again.

    Parameters
    ----------
    max_features : int, default 50000
        Vocabulary cap V (most frequent terms by corpus term frequency).
    n_memberships : int, default 4
        F: top TF-IDF terms per document = its branch memberships.
    centre_size : int, default 64
        B: coordinates kept per branch centre.
    code_size : int, default 16
        S: residual sign-code coordinates per membership.
    tau, beta : float, default 20.0, -0.2
        Reliability shrinkage strength τ and exponent β.
    reliability_mean : {"distinct", "occurrence"}, default "distinct"
        Rescale weights to mean 1 over the branch's distinct (j, t) entries or over its
        code occurrences (SPEC C.4).
    reliability_float16 : bool, default True
        Round reliability weights through float16 as the published package stores them.
    cooc_top : int, default 12
        L: top terms per document used for co-occurrence.
    ppmi_damping : float, default 10.0
        Significance damping ``n_ij/(n_ij + 10)``.
    assoc_k, route_k : int, default 64, 32
        Neighbours kept per term in graph A (PPMI) and G (second order).
    ppmi_include_self : bool, default False
        Keep the diagonal of the co-occurrence matrix in A.
    alpha : float, default 0.10
        Routing expansion weight α.
    route_budget : int, default 32
        Routed terms per query (literal terms always kept).
    gamma : float, default 0.25
        Exponent γ on the query mass ``Q_dj`` of a code.
    lam_m : float, default 0.125
        Consensus weight λ_M.
    b_rescue, eta : float, default 0.2, 1.0
        Length pivot of lex1 and its weight η in the shortlist score.
    pool_size : int, default 100
        P, the shortlist size.
    b_final, coord_exp : float, default 0.1, 0.25
        Length pivot of lex2 and the coordination exponent.
    semantic_k : int, default 16
        Neighbours per query term in the semantic-presence feature.
    semantic_neighbours : {"strongest", "lowest_term_id"}, default "strongest"
        Which A-neighbours: the strongest (intended) or the first ``semantic_k`` of the CSR
        row, i.e. the lowest term ids (reproduces the published numbers; SPEC B.9).
    n_rare : int, default 3
        Highest-IDF query terms used by the rare-coverage feature.
    w_tail, w_lex, w_sem, w_rare : float, default 1.0, 4.0, 0.3, 1.0
        Weights of the pool z-scores in the relevance.
    n_eligible, top_h, n_diverse, lam_d : default 10, 3, 10, 0.1
        Diversity step: eligible branches, top-E count for ``H_j``, ranks diversified
        (1 disables), bonus weight λ_D.
    tail_gate : bool, default False
        Keep only the top ``min(|U|, max(gate_min, gate_mult·P))`` routed documents by tail
        before the rescue (the later optimised variant; an approximation).
    bm25_weight, bm25_rescue_weight : float, default 0.0
        Extensions (not published): weight of ``z(BM25)`` in the relevance / in the
        shortlist score.
    bm25_candidates : int, default 0
        Extension: add the BM25 top-n documents of the full corpus to the routed set.
    bm25_k1, bm25_b : float, default 1.2, 0.75
        BM25 (Lucene idf) parameters of the extension.
    rescue_mode : {"auto", "scan", "postings"}, default "auto"
        How lex1 and the pool features are gathered: scanning every routed document's
        binary support (the frozen method), streaming the postings of the query and
        semantic terms, or (auto) per query term the cheaper of its postings and its
        document bitset, with the semantic presence computed for the pool only.  Results
        are bit-identical.  Without ``postings`` every mode scans the support.
    postings : bool, default True
        Keep the inverted lexical postings, compressed (variable-byte document gaps and one
        byte of term frequency per support entry; ``jkofast.sgr.layout``):
        the fast rescue modes and the BM25 extension read them.  ``False`` gives the compact
        index of SPEC B.11 (the frozen rescue scans the routed documents' support; the same
        scores, bit for bit); the BM25 extension then raises.
    empty_fallback : {"lexical", "none"}, default "lexical"
        What :meth:`~jkofast.sgr.retriever.SparseGeometricRetriever.search` returns for a
        query with known terms but no routed document (no branch of a routed term holds a
        document): ``"lexical"`` ranks the documents holding its known terms by BM25 over the
        postings (``bm25_k1``, ``bm25_b``, Lucene idf; binary tf over the support when the
        index has no postings), at most ``pool_size`` of them; ``"none"`` returns an empty row,
        as the published method does.  Either way ``search(..., return_report=True)`` names the
        query.  Queries answered by the method itself are identical under both settings.
        ``None`` reads as ``"none"``.

    Examples
    --------
    >>> cfg = SGRConfig(pool_size=10)
    >>> cfg.replace(w_lex=2).w_lex
    2.0
    >>> SGRConfig.preset("published").semantic_neighbours
    'lowest_term_id'
    """

    max_features: int = _build(50_000)
    n_memberships: int = _build(4)
    centre_size: int = _build(64)
    code_size: int = _build(16)
    tau: float = _build(20.0)
    beta: float = _build(-0.2)
    reliability_mean: str = _build("distinct")
    reliability_float16: bool = _build(True)
    cooc_top: int = _build(12)
    ppmi_damping: float = _build(10.0)
    assoc_k: int = _build(64)
    route_k: int = _build(32)
    ppmi_include_self: bool = _build(False)
    alpha: float = _query(0.10)
    route_budget: int = _query(32)
    gamma: float = _query(0.25)
    lam_m: float = _query(0.125)
    b_rescue: float = _query(0.2)
    eta: float = _query(1.0)
    pool_size: int = _query(100)
    b_final: float = _query(0.1)
    coord_exp: float = _query(0.25)
    semantic_k: int = _query(16)
    semantic_neighbours: str = _query("strongest")
    n_rare: int = _query(3)
    w_tail: float = _query(1.0)
    w_lex: float = _query(4.0)
    w_sem: float = _query(0.3)
    w_rare: float = _query(1.0)
    n_eligible: int = _query(10)
    top_h: int = _query(3)
    n_diverse: int = _query(10)
    lam_d: float = _query(0.1)
    tail_gate: bool = _query(False)
    gate_min: int = _query(10_000)
    gate_mult: int = _query(40)
    bm25_weight: float = _query(0.0)
    bm25_rescue_weight: float = _query(0.0)
    bm25_candidates: int = _query(0)
    bm25_k1: float = _query(1.2)
    bm25_b: float = _query(0.75)
    rescue_mode: str = _query("auto")
    empty_fallback: str = _query("lexical")
    postings: bool = _build(True)

    def __post_init__(self) -> None:
        put = object.__setattr__
        if self.empty_fallback is None:  # ``--param empty_fallback=none`` parses to None
            put(self, "empty_fallback", "none")
        for name in _COUNTS:
            put(self, name, check_int(getattr(self, name), name, min_value=1))
        for name in _COUNTS0:
            put(self, name, check_int(getattr(self, name), name, min_value=0))
        for name in _NON_NEGATIVE:
            put(self, name, check_positive(getattr(self, name), name, strict=False))
        for name in _REALS:
            put(self, name, _real(getattr(self, name), name))
        for name, options in _CHOICES.items():
            if getattr(self, name) not in options:
                raise ValueError(f"{name} must be {_quoted(options)}, got {getattr(self, name)!r}")
        for name in _FLAGS:
            put(self, name, check_bool(getattr(self, name), name))
        if self.tail_gate and self.gate_min == 0 and self.gate_mult == 0:
            raise ValueError(
                "tail_gate with gate_min = 0 and gate_mult = 0 keeps no routed document "
                "(every query would return nothing); raise gate_min or gate_mult"
            )
        for name in _UNIT:
            if getattr(self, name) > 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")

    @classmethod
    def from_dict(cls, params) -> "SGRConfig":
        """Build from a ``{name: value}`` mapping (missing names take their defaults).

        Raises
        ------
        TypeError
            ``params`` is not a dict, or names an unknown parameter.
        ValueError
            A value out of range.
        """
        if not isinstance(params, dict):
            raise TypeError(f"params must be a dict, got {type(params).__name__}")
        unknown = set(params) - set(FIELDS)
        if unknown:
            raise TypeError(f"unknown SparseGeometricRetriever parameter(s): {sorted(unknown)}")
        return cls(**params)

    @classmethod
    def preset(cls, name: str, **overrides) -> "SGRConfig":
        """Return the named parameter set ``name`` of :data:`PRESETS`, with ``overrides`` applied."""
        if name not in PRESETS:
            raise ValueError(f"unknown SGR preset {name!r}; choose from {', '.join(PRESETS)}")
        return cls.from_dict({**PRESETS[name], **overrides})

    def replace(self, **changes) -> "SGRConfig":
        """Return a copy with ``changes`` applied and checked (unknown names raise ``TypeError``)."""
        return SGRConfig.from_dict({**self.to_dict(), **changes})

    def to_dict(self) -> dict:
        """Return ``{name: value}`` of every parameter (a fresh dict, in field order)."""
        return {name: getattr(self, name) for name in FIELDS}

    def build_changes(self, other: "SGRConfig") -> list:
        """Names of the build parameters whose values differ between ``self`` and ``other``."""
        return [k for k in BUILD_PARAMS if getattr(self, k) != getattr(other, k)]

    @staticmethod
    def field_types() -> dict:
        """Return ``{name: type}`` (``int``, ``float``, ``str`` or ``bool``) of every parameter."""
        return {f.name: f.type for f in dataclasses.fields(SGRConfig)}


FIELDS = tuple(f.name for f in dataclasses.fields(SGRConfig))
# the parameters that change the index; the others only change the query path
BUILD_PARAMS = tuple(f.name for f in dataclasses.fields(SGRConfig) if f.metadata["stage"] == "build")

# named parameter sets (``jkofast index/search --method sgr --preset NAME``): "published" reproduces
# the published SciFact row (test nDCG@10 0.5680 vs the paper's 0.5685; SPEC B.9)
PRESETS = {"published": {"semantic_neighbours": "lowest_term_id", "ppmi_include_self": True}}


def as_config(params) -> SGRConfig:
    """Return ``params`` as an :class:`SGRConfig` (an SGRConfig as is, a dict through :meth:`SGRConfig.from_dict`)."""
    if isinstance(params, SGRConfig):
        return params
    return SGRConfig.from_dict(params)


def default_params() -> dict:
    """Return the default parameters of :class:`SparseGeometricRetriever` (a fresh dict)."""
    return SGRConfig().to_dict()
