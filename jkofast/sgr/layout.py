"""SparseGeometricRAG index in phases: calibrate, encode (in shards), assemble (SPEC B.3-B.5, B.11).

``SparseGeometricRetriever.fit`` is ``calibrate`` + ``encode`` (one shard) + ``assemble``; a
streaming build (``jkofast.sgr.streaming``) calls the same four steps with a geometry
calibrated on a subset and the corpus encoded in shards written to disk.

* ``calibrate(X, params)`` -> :class:`Geometry`: branch centres (B.3), the reliability
  statistics (B.4) from the codes of the calibration memberships, the PPMI graph A and the
  second-order graph G (B.5).
* ``encode(X, geometry, params, counts=C, first_doc=f)`` -> :class:`Shard`: the memberships,
  packed residual sign codes, binary support and raw term counts of a block of passages.
* ``write_shard(folder, shard)`` / ``read_shard(folder)``: one ``.npy`` per array, each
  written under a temporary name and renamed; ``shard.json`` (written last) marks the
  folder complete.
* ``assemble(geometry, shards, idf, dl, params, out=None)`` -> the index arrays (a dict)
  in the compact query layout, in memory or written into folder ``out`` with bounded
  memory.

Compact layout (format 3; V terms, N passages, M memberships, S = ``code_size``,
W = ceil(S / 16); "term" = uint16 when V <= 65,535 (65,535 = the sentinel), else uint32
(4,294,967,295 = the sentinel)):

=============  ===================  ===============================================================
array          dtype                meaning
=============  ===================  ===============================================================
idf            float64 V            smooth idf of the full corpus (B.2)
bm25_idf       float64 V            Lucene BM25 idf from the document frequencies (extension)
dl             uint16 N             document length in analyser tokens (float64 when a length is
                                    not an integer in [0, 65535])
s_indptr       uint32 N+1           binary support of each passage (B.3; int64 from 2**32 entries) ...
s_idx          term                 ... its term ids, ascending
b_indptr       int64 V+1            memberships of branch j = rows ``b_indptr[j]:b_indptr[j+1]``,
                                    ascending passage id (branch-major: no separate posting list)
mem_doc        int32 M              passage of each membership
mem_m          float32 M            membership weight ``m_dj`` (B.3)
code_term      term (M,S)           code term ids, ascending, then sentinels (B.4)
code_sign      uint16 M,W           signs: bit ``r & 15`` of word ``r >> 4`` set = +1
c_indptr       int64 V+1            branch centres, ``centre_size`` largest coordinates (B.3) ...
c_terms        term                 ... their term ids, ascending ...
c_vals         float32              ... and values
c_norm         float64 V            centre norms
c_w            uint16 | float32     reliability weight of each centre entry (j, t): float16 bits
                                    (``reliability_float16``, the default) or float32
r_indptr       int64 V+1            reliability entries (j, t) seen at least twice among the
r_terms        term                 calibration codes of branch j, ascending t ...
r_w            uint16 | float32     ... and their weights (float16 bits by default, like c_w)
r_nj           float64 V            calibration memberships per branch (n_j)
r_scale        float64 V            per-branch rescaling to mean 1
gvar           float64 V            global sign variance of each term
a_indptr ...   int64/int32/float32  PPMI graph A (B.5)
g_indptr ...   int64/term/float32   second-order graph G (B.5)
t_indptr       int64 V+1            term document frequencies as a pointer (always) ...
t_off, t_code  int64 V+1, uint8     ... and the inverted postings (``postings=True`` only): the
                                    documents of term t as variable-byte gaps in
                                    ``t_code[t_off[t]:t_off[t+1]]`` ...
t_tfq          uint8 (nnz)          ... the term frequency of posting p when an integer in [1, 255],
                                    else 0 ...
t_xpos/t_xval  int64, float32       ... and the other frequencies (ascending positions p, values)
=============  ===================  ===============================================================

The postings code is ``jkofast.kernels.sgr.postings`` (gap ``d - d_prev - 1`` in seven-bit
groups, least significant first, high bit = more bytes follow).  Format 2 stored the postings as
``t_docs`` int32 and ``t_tf`` float32 (8 bytes per posting); everything else is the same.

Reliability (B.4): the weight of code term t in branch j is ``r_w`` when (j, t) is stored;
an entry seen once among the calibration codes (Σz = ±1, the great majority: 99 % on the
synthetic corpus) is not stored, its weight follows from ``r_nj[j]``, ``gvar[t]`` and
``r_scale[j]`` (``jkofast.kernels.sgr.build.reliability_value``, the same function the build
uses, so the bits agree); a pair the calibration never saw (a geometry calibrated on a subset)
gets that one-occurrence weight too, and a branch without calibration memberships weight 1.0.
The centre value ``c_j[t]`` of a code coordinate is looked up in the centre at query time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from jkofast._io import atomic_save_npy, atomic_write_json
from jkofast._threads import over_ranges, resolve_threads
from jkofast._validation import check_int, read_json_file
from jkofast.kernels.sgr import build as _b
from jkofast.kernels.sgr import postings as _kp
from jkofast.sgr.config import as_config

__all__ = [
    "FORMAT",
    "Geometry",
    "Shard",
    "assemble",
    "calibrate",
    "calibrate_and_encode",
    "compress_postings",
    "encode",
    "read_shard",
    "term_dtype",
    "write_shard",
]

FORMAT = 3  # the on-disk index format written by SparseGeometricRetriever.save
POSTING_ARRAYS = ("t_off", "t_code", "t_tfq", "t_xpos", "t_xval")  # the compressed postings (postings=True)
_SHARD_MANIFEST = "shard.json"


class Geometry(NamedTuple):
    """The calibrated geometry (SPEC B.3-B.5), shared by every shard.

    ``c_indptr`` int64 (V+1), ``c_terms`` int32, ``c_vals`` float32, ``c_norm`` float64 (V):
    branch centres; ``r_indptr`` int64 (V+1), ``r_terms`` int32, ``r_w`` float32,
    ``r_nj`` float64 (V), ``r_scale`` float64 (V), ``gvar`` float64 (V): reliability (see the
    module docstring); ``a_indptr``/``a_idx``/``a_val`` (int64, int32, float32): PPMI graph A;
    ``g_indptr``/``g_idx``/``g_val``: graph G; ``n_calibration``: passages calibrated on.
    """

    c_indptr: np.ndarray
    c_terms: np.ndarray
    c_vals: np.ndarray
    c_norm: np.ndarray
    r_indptr: np.ndarray
    r_terms: np.ndarray
    r_w: np.ndarray
    r_nj: np.ndarray
    r_scale: np.ndarray
    gvar: np.ndarray
    a_indptr: np.ndarray
    a_idx: np.ndarray
    a_val: np.ndarray
    g_indptr: np.ndarray
    g_idx: np.ndarray
    g_val: np.ndarray
    n_calibration: int

    @property
    def n_terms(self) -> int:
        """V, the vocabulary size."""
        return int(self.c_indptr.shape[0] - 1)


class Shard(NamedTuple):
    """Encoded passages with global ids ``first_doc`` to ``first_doc + n_docs - 1``.

    ``mem_doc`` int32 (M,) global passage id of each membership (doc-major, ascending);
    ``mem_branch`` term (M,); ``mem_m`` float32 (M,); ``code_term`` term (M, S) ascending
    then sentinels; ``code_sign`` uint16 (M, W) sign bitmask; ``s_indptr`` int64 (n+1) and
    ``s_idx`` term: binary support (rows local to the shard); ``s_tf`` float32: raw term
    count of each support entry.  "term" = :func:`term_dtype` of ``n_terms``.
    """

    first_doc: int
    n_terms: int
    mem_doc: np.ndarray
    mem_branch: np.ndarray
    mem_m: np.ndarray
    code_term: np.ndarray
    code_sign: np.ndarray
    s_indptr: np.ndarray
    s_idx: np.ndarray
    s_tf: np.ndarray

    @property
    def n_docs(self) -> int:
        """Passages in the shard."""
        return int(self.s_indptr.shape[0] - 1)


_SHARD_ARRAYS = ("mem_doc", "mem_branch", "mem_m", "code_term", "code_sign", "s_indptr", "s_idx", "s_tf")


def term_dtype(n_terms: int) -> np.dtype:
    """Dtype of stored term ids: uint16 when ``n_terms <= 65535`` (65535 free as sentinel), else uint32."""
    return np.dtype(np.uint16) if n_terms <= 65_535 else np.dtype(np.uint32)


def _full_params(params) -> dict:
    """Return every parameter of ``params`` (an SGRConfig, or a dict completed with the defaults), checked."""
    return as_config(params).to_dict()


def _check_X(X, name: str = "X"):
    """CSR float32 with sorted indices -> (indptr int64, indices int32, data float32, shape)."""
    import scipy.sparse as sp

    if not sp.issparse(X):
        raise TypeError(f"{name} must be a scipy sparse CSR matrix, got {type(X).__name__}")
    X = X.tocsr()
    if X.dtype != np.float32:
        raise TypeError(f"{name} must hold float32 values, got {X.dtype}")
    if not X.has_sorted_indices:
        X = X.sorted_indices()
    data = np.asarray(X.data, np.float32)
    if data.size and not np.isfinite(data).all():
        raise ValueError(f"{name} holds NaN or inf")
    return X.indptr.astype(np.int64), X.indices.astype(np.int32), data, X.shape


def _memberships(x_indptr, x_idx, x_data, F, nt):
    """Top-F memberships (SPEC B.3), doc-major: (mem_doc int32, mem_branch int32, mem_m float32)."""
    N = x_indptr.shape[0] - 1
    tf_terms = np.full((N, F), -1, np.int32)
    tf_vals = np.zeros((N, F), np.float32)
    tf_cnt = np.zeros(N, np.int64)
    over_ranges(_b.top_terms_per_row, N, nt, x_indptr, x_idx, x_data, F, tf_terms, tf_vals, tf_cnt)
    valid = np.arange(F)[None, :] < tf_cnt[:, None]
    tot = np.where(valid, tf_vals.astype(np.float64), 0.0).sum(axis=1)
    mvals = np.where(valid, tf_vals / np.where(tot > 0, tot, 1.0)[:, None], 0.0)
    mem_doc = np.repeat(np.arange(N, dtype=np.int32), tf_cnt)
    return mem_doc, tf_terms[valid].astype(np.int32), mvals[valid].astype(np.float32)


def _codes(mem_doc, mem_branch, x_indptr, x_idx, x_data, geometry_c, S, V, nt):
    c_indptr, c_terms, c_vals = geometry_c
    M = mem_doc.shape[0]
    code_term = np.empty((M, S), term_dtype(V))
    code_sign = np.empty((M, (S + 15) // 16), np.uint16)
    args = (mem_doc, mem_branch, x_indptr, x_idx, x_data, c_indptr, c_terms, c_vals, code_term, code_sign)
    over_ranges(_b.encode_codes, M, nt, *args)
    return code_term, code_sign


def _compact(nbr, val, cnt):
    """Fixed-width (rows, K) tables + counts -> CSR (int64 indptr, int32 ids, values)."""
    rows = nbr.shape[0]
    indptr = np.zeros(rows + 1, np.int64)
    np.cumsum(cnt, out=indptr[1:])
    mask = np.arange(nbr.shape[1])[None, :] < cnt[:, None]
    return indptr, nbr[mask].astype(np.int32), val[mask]


def calibrate(X, params, n_threads: int | None = None) -> Geometry:
    """Calibrate the geometry on the TF-IDF rows ``X`` (SPEC B.3-B.5).

    Parameters
    ----------
    X : scipy.sparse CSR matrix, float32 (n, V)
        L2-normalised TF-IDF rows of the calibration passages (idf from the full corpus),
        indices sorted within rows.
    params : dict or SGRConfig
        ``SparseGeometricRetriever`` parameters (missing ones take the defaults); the build
        parameters (``n_memberships``, ``centre_size``, ``code_size``, ``tau``, ``beta``,
        ``reliability_mean``, ``reliability_float16``, ``cooc_top``, ``ppmi_damping``,
        ``assoc_k``, ``route_k``, ``ppmi_include_self``) are used.
    n_threads : int, optional
        Numba threads; the result does not depend on it.

    Returns
    -------
    Geometry
        Centres, reliability statistics from the codes of the calibration memberships
        (SPEC B.4), graphs A and G, ``n_calibration = n``.

    Raises
    ------
    TypeError
        ``X`` is not a float32 sparse matrix, ``params`` not a dict or has unknown names.
    ValueError
        ``X`` has no row or holds NaN/inf.
    """
    return _calibrate(X, params, n_threads)[0]


def _calibrate(X, params, n_threads, keep_codes: bool = False):
    """Return ``(geometry, codes)``.

    ``codes`` = (mem_doc, mem_branch, mem_m, code_term, code_sign) of the calibration rows
    when ``keep_codes`` (what ``encode`` of the same rows computes), else None.
    """
    p = _full_params(params)
    x_indptr, x_idx, x_data, (N, V) = _check_X(X)
    if N < 1 or V < 1:
        raise ValueError(f"X must have at least one row and one column, got shape {(N, V)}")
    F, B, S = p["n_memberships"], p["centre_size"], p["code_size"]
    nt = resolve_threads(n_threads)
    n_chunks = max(1, 4 * nt)
    mem_doc, mem_branch, mem_m = _memberships(x_indptr, x_idx, x_data, F, nt)
    b_mem = np.argsort(mem_branch, kind="stable").astype(np.int64)
    b_indptr = np.zeros(V + 1, np.int64)
    np.cumsum(np.bincount(mem_branch, minlength=V), out=b_indptr[1:])
    ct = np.zeros((V, B), np.int32)
    cvv = np.zeros((V, B), np.float32)
    cc = np.zeros(V, np.int64)
    args = (b_indptr, b_mem, mem_doc, mem_m, x_indptr, x_idx, x_data, V, B, n_chunks, ct, cvv, cc)
    over_ranges(_b.branch_centres, n_chunks, nt, *args)
    c_indptr, c_terms, c_vals = _compact(ct, cvv, cc)
    c_vals = c_vals.astype(np.float32)
    crow = np.repeat(np.arange(V), np.diff(c_indptr))
    c_norm = np.sqrt(np.bincount(crow, weights=c_vals.astype(np.float64) ** 2, minlength=V))
    geometry_c = (c_indptr, c_terms, c_vals)
    code_term, code_sign = _codes(mem_doc, mem_branch, x_indptr, x_idx, x_data, geometry_c, S, V, nt)
    rel = _reliability(b_indptr, b_mem, code_term, code_sign, p, V, n_chunks, nt)
    codes = (mem_doc, mem_branch, mem_m, code_term, code_sign) if keep_codes else None
    del code_term, code_sign
    graphs = _graphs(x_indptr, x_idx, x_data, p, N, V, n_chunks, nt)
    return Geometry(c_indptr, c_terms, c_vals, c_norm, *rel, *graphs, n_calibration=int(N)), codes


def calibrate_and_encode(X, params, n_threads: int | None = None, *, counts) -> tuple[Geometry, Shard]:
    """``calibrate(X)`` and ``encode(X, ..., first_doc=0)`` in one pass (the codes are computed once).

    What ``SparseGeometricRetriever.fit`` does: the same geometry and shard as the two calls.
    """
    geometry, codes = _calibrate(X, params, n_threads, keep_codes=True)
    return geometry, encode(X, geometry, params, n_threads, counts=counts, _codes_of=codes)


def _reliability(b_indptr, b_mem, code_term, code_sign, p, V, n_chunks, nt):
    gvar = np.zeros(V, np.float64)
    _b.global_sign_variance(code_term, code_sign, V, gvar)
    tau_beta = (float(p["tau"]), float(p["beta"]))
    args = (tau_beta, p["reliability_mean"] == "occurrence", p["reliability_float16"], n_chunks)
    r_indptr = np.full(V + 1, -1, np.int64)
    r_scale = np.ones(V, np.float64)
    head = (b_indptr, b_mem, code_term, code_sign, gvar, *args)
    over_ranges(
        _b.reliability_rows, n_chunks, nt, *head, r_indptr, np.empty(0, np.int32), np.empty(0, np.float32), r_scale
    )
    r_indptr[0] = 0
    np.cumsum(r_indptr[1:], out=r_indptr[1:])
    r_terms = np.empty(int(r_indptr[-1]), np.int32)
    r_w = np.empty(int(r_indptr[-1]), np.float32)
    over_ranges(_b.reliability_rows, n_chunks, nt, *head, r_indptr, r_terms, r_w, r_scale)
    r_nj = np.diff(b_indptr).astype(np.float64)
    return r_indptr, r_terms, r_w, r_nj, r_scale, gvar


def _graphs(x_indptr, x_idx, x_data, p, N, V, n_chunks, nt):
    """PPMI graph A and second-order graph G (SPEC B.5) as CSR (int64, int32, float32)."""
    import scipy.sparse as sp

    L = p["cooc_top"]
    tm_terms = np.full((N, L), -1, np.int32)
    tm_vals = np.zeros((N, L), np.float32)
    tm_cnt = np.zeros(N, np.int64)
    over_ranges(_b.top_terms_per_row, N, nt, x_indptr, x_idx, x_data, L, tm_terms, tm_vals, tm_cnt)
    tvalid = np.arange(L)[None, :] < tm_cnt[:, None]
    flat_t = tm_terms[tvalid]
    tt_docs = np.repeat(np.arange(N, dtype=np.int64), tm_cnt)[np.argsort(flat_t, kind="stable")]
    tt_indptr = np.zeros(V + 1, np.int64)
    np.cumsum(np.bincount(flat_t, minlength=V), out=tt_indptr[1:])
    K = p["assoc_k"]
    an = np.zeros((V, K), np.int32)
    av = np.zeros((V, K), np.float64)
    ac = np.zeros(V, np.int64)
    over_ranges(
        _b.ppmi_graph,
        n_chunks,
        nt,
        tt_indptr,
        tt_docs,
        tm_terms,
        tm_cnt,
        float(N),
        V,
        K,
        p["ppmi_damping"],
        p["ppmi_include_self"],
        n_chunks,
        an,
        av,
        ac,
    )
    del tm_terms, tm_vals, tt_docs
    a_indptr, a_idx, a_val64 = _compact(an, av, ac)
    A = sp.csr_matrix((a_val64, a_idx, a_indptr), shape=(V, V))
    norms = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel())
    An = sp.csr_matrix(sp.diags(np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1), 0.0)) @ A)
    An.sort_indices()
    AnT = An.T.tocsr()
    AnT.sort_indices()
    KG = p["route_k"]
    gn = np.zeros((V, KG), np.int32)
    gv = np.zeros((V, KG), np.float64)
    gc = np.zeros(V, np.int64)
    over_ranges(
        _b.second_order_graph,
        n_chunks,
        nt,
        An.indptr.astype(np.int64),
        An.indices.astype(np.int32),
        An.data.astype(np.float64),
        AnT.indptr.astype(np.int64),
        AnT.indices.astype(np.int32),
        AnT.data.astype(np.float64),
        V,
        KG,
        n_chunks,
        gn,
        gv,
        gc,
    )
    g_indptr, g_idx, g_val = _compact(gn, gv, gc)
    return a_indptr, a_idx, a_val64.astype(np.float32), g_indptr, g_idx, g_val.astype(np.float32)


def encode(
    X, geometry: Geometry, params, n_threads: int | None = None, first_doc: int = 0, *, counts, _codes_of=None
) -> Shard:
    """Encode a contiguous block of passages against ``geometry`` (SPEC B.3-B.4).

    Parameters
    ----------
    X : scipy.sparse CSR matrix, float32 (n, V)
        L2-normalised TF-IDF rows (idf from the full corpus), indices sorted.
    geometry : Geometry
        From :func:`calibrate` (same V).
    params : dict or SGRConfig
        As for :func:`calibrate` (``n_memberships`` and ``code_size`` are used).
    n_threads : int, optional
        Numba threads; the result does not depend on it.
    first_doc : int, default 0
        Global id of row 0 (the shard holds passages ``first_doc .. first_doc + n - 1``).
    counts : scipy.sparse matrix (n, V), keyword-only, required
        Raw term counts of the same passages (the non-zeros of ``X``): ``s_tf``, the tf of
        the BM25 extension.

    Returns
    -------
    Shard

    Raises
    ------
    TypeError, ValueError
        Bad ``X``/``counts`` (dtype, shape, a support that differs from ``X``), a
        ``geometry`` of another vocabulary size, ``first_doc`` < 0 or past int32 ids.
    """
    import scipy.sparse as sp

    p = _full_params(params)
    if not isinstance(geometry, Geometry):
        raise TypeError(f"geometry must be a Geometry, got {type(geometry).__name__}")
    first_doc = check_int(first_doc, "first_doc", min_value=0)
    x_indptr, x_idx, x_data, (N, V) = _check_X(X)
    if V != geometry.n_terms:
        raise ValueError(f"X has {V} columns but the geometry has {geometry.n_terms} terms")
    if first_doc + N > np.iinfo(np.int32).max:
        raise ValueError(f"first_doc + n = {first_doc + N} exceeds int32 passage ids")
    if not sp.issparse(counts):
        raise TypeError(f"counts must be a scipy sparse matrix, got {type(counts).__name__}")
    C = counts.tocsr()
    if C.shape != (N, V):
        raise ValueError(f"counts has shape {C.shape}, X has {(N, V)}")
    if not C.has_sorted_indices:
        C = C.sorted_indices()
    if not (np.array_equal(C.indptr, x_indptr) and np.array_equal(C.indices, x_idx)):
        C = C.copy()
        C.eliminate_zeros()
        C.sort_indices()
        if not (np.array_equal(C.indptr, x_indptr) and np.array_equal(C.indices, x_idx)):
            raise ValueError("counts: its non-zeros must be those of X (the same passages, the same terms)")
    tdt = term_dtype(V)
    if _codes_of is not None:  # calibrate_and_encode: the calibration's own memberships and codes
        mem_doc, mem_branch, mem_m, code_term, code_sign = _codes_of
    else:
        nt = resolve_threads(n_threads)
        mem_doc, mem_branch, mem_m = _memberships(x_indptr, x_idx, x_data, p["n_memberships"], nt)
        g = geometry
        geometry_c = (g.c_indptr, g.c_terms, g.c_vals)
        code_term, code_sign = _codes(mem_doc, mem_branch, x_indptr, x_idx, x_data, geometry_c, p["code_size"], V, nt)
    return Shard(
        first_doc=int(first_doc),
        n_terms=int(V),
        mem_doc=(mem_doc + np.int32(first_doc)).astype(np.int32),
        mem_branch=mem_branch.astype(tdt),
        mem_m=mem_m,
        code_term=code_term,
        code_sign=code_sign,
        s_indptr=x_indptr,
        s_idx=x_idx.astype(tdt),
        s_tf=np.asarray(C.data, np.float32),
    )


# ----------------------------------------------------------------------------- shard files
def write_shard(folder: str, shard: Shard) -> None:
    """Write ``shard`` into ``folder``: one ``.npy`` per array, then ``shard.json``.

    Each array goes to a temporary name and is renamed; ``shard.json`` (the manifest:
    ``first_doc``, ``n_docs``, ``n_terms``, ``n_memberships``) is written last, so a folder
    without it is incomplete (:func:`read_shard` refuses it).  An existing manifest is
    removed first, so an interrupted rewrite never looks complete.
    """
    if not isinstance(shard, Shard):
        raise TypeError(f"shard must be a Shard, got {type(shard).__name__}")
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    man = os.path.join(folder, _SHARD_MANIFEST)
    if os.path.exists(man):
        os.remove(man)
    for name in _SHARD_ARRAYS:
        atomic_save_npy(os.path.join(folder, name + ".npy"), getattr(shard, name), fsync=False)
    meta = {
        "first_doc": shard.first_doc,
        "n_docs": shard.n_docs,
        "n_terms": shard.n_terms,
        "n_memberships": int(shard.mem_doc.shape[0]),
        "code_size": int(shard.code_term.shape[1]),
    }
    atomic_write_json(man, meta)


def read_shard(folder: str, mmap: bool = True) -> Shard:
    """Read a shard written by :func:`write_shard` (memory-mapped, copy-on-write, by default).

    Raises
    ------
    ValueError
        No ``shard.json`` (an incomplete shard), a missing or unreadable array, or arrays
        whose lengths disagree with the manifest.
    """
    folder = os.fspath(folder)
    man = os.path.join(folder, _SHARD_MANIFEST)
    meta = read_json_file(
        man, missing=f"{folder}: incomplete shard (no {_SHARD_MANIFEST})", invalid=f"{man}: not a shard manifest"
    )
    arrs = {}
    for name in _SHARD_ARRAYS:
        path = os.path.join(folder, name + ".npy")
        try:
            arrs[name] = np.load(path, mmap_mode="c" if mmap else None, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    try:
        n, M, V = int(meta["n_docs"]), int(meta["n_memberships"]), int(meta["n_terms"])
        first = int(meta["first_doc"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{man}: missing or bad first_doc / n_docs / n_terms / n_memberships") from None
    sh = Shard(first_doc=first, n_terms=V, **arrs)
    _check_shard(sh, n, M, folder)
    return sh


def _check_shard(sh: Shard, n: int, M: int, where: str) -> None:
    tdt = term_dtype(sh.n_terms)
    if sh.s_indptr.shape != (n + 1,) or sh.s_indptr.dtype != np.int64:
        raise ValueError(f"{where}: s_indptr must be int64 of length n_docs + 1 = {n + 1}")
    nnz = int(sh.s_indptr[-1]) if n >= 0 else 0
    for name, shape, dt in (
        ("mem_doc", (M,), np.int32),
        ("mem_branch", (M,), tdt),
        ("mem_m", (M,), np.float32),
        ("s_idx", (nnz,), tdt),
        ("s_tf", (nnz,), np.float32),
    ):
        a = getattr(sh, name)
        if a.shape != shape or a.dtype != dt:
            raise ValueError(f"{where}: {name} must be {np.dtype(dt)} of shape {shape}, got {a.dtype} {a.shape}")
    if sh.code_term.ndim != 2 or sh.code_term.shape[0] != M or sh.code_term.dtype != tdt:
        raise ValueError(f"{where}: code_term must be {tdt} of shape ({M}, S)")
    S = sh.code_term.shape[1]
    if sh.code_sign.shape != (M, (S + 15) // 16) or sh.code_sign.dtype != np.uint16:
        raise ValueError(f"{where}: code_sign must be uint16 of shape ({M}, {(S + 15) // 16})")


# ----------------------------------------------------------------------------- assemble
class _Sink:
    """Allocates the output arrays in memory or as ``.npy`` files in a folder."""

    def __init__(self, out):
        self.out = None if out is None else os.fspath(out)
        if self.out is not None:
            os.makedirs(self.out, exist_ok=True)
        self.arrays: dict = {}

    def new(self, name, shape, dtype):
        if self.out is None:
            a = np.empty(shape, dtype)
        else:
            a = np.lib.format.open_memmap(os.path.join(self.out, name + ".npy"), mode="w+", dtype=dtype, shape=shape)
        self.arrays[name] = a
        return a

    def put(self, name, value):
        value = np.ascontiguousarray(value)
        a = self.new(name, value.shape, value.dtype)
        a[...] = value
        return a

    def drop(self, name):
        """Forget array ``name`` (and remove its file)."""
        a = self.arrays.pop(name)
        if self.out is not None:
            del a
            os.remove(os.path.join(self.out, name + ".npy"))

    def finish(self) -> dict:
        if self.out is None:
            return self.arrays
        for a in self.arrays.values():
            a.flush()
        names = list(self.arrays)
        self.arrays.clear()
        # plain ndarray views on copy-on-write maps: one Numba type, whatever the source
        return {k: np.asarray(np.load(os.path.join(self.out, k + ".npy"), mmap_mode="c")) for k in names}


def support_pointer_dtype(nnz: int) -> np.dtype:
    """Dtype of the support pointer ``s_indptr``: uint32 below 2**32 support entries, else int64."""
    return np.dtype(np.uint32) if nnz < 2**32 else np.dtype(np.int64)


def _narrow_dl(dl: np.ndarray) -> np.ndarray:
    """uint16 when every length is an integer in [0, 65535] (exact), else float64."""
    if dl.size == 0 or (dl.min() >= 0 and dl.max() <= 65_535 and np.array_equal(dl, np.floor(dl))):
        return dl.astype(np.uint16)
    return dl.astype(np.float64)


def assemble(
    geometry: Geometry,
    shards: Sequence,
    idf,
    dl,
    params,
    n_threads: int | None = None,
    out: str | None = None,
) -> dict:
    """Merge encoded shards into the compact query layout (module docstring).

    Parameters
    ----------
    geometry : Geometry
    shards : sequence of Shard or shard folders
        Contiguous, in passage order (shard k starts where shard k-1 ended; the first at 0).
        Folders are read with :func:`read_shard` (memory-mapped) one at a time.
    idf : float64 (V,)
        Smooth idf of the full corpus.
    dl : array (N,)
        Document lengths in analyser tokens.
    params : dict or SGRConfig
        ``SparseGeometricRetriever`` parameters; ``postings`` decides whether the inverted
        lexical postings ``t_docs``/``t_tf`` are written.
    n_threads : int, optional
        Unused (the merge is NumPy); accepted for symmetry.
    out : str, optional
        Write every array as ``<out>/<name>.npy`` (``np.lib.format.open_memmap``) and return
        them memory-mapped; memory stays bounded by one shard plus O(V) tables (the merged
        arrays are filled shard by shard through the page cache).  ``None``: in memory.

    Returns
    -------
    dict
        name -> array of the compact layout (``n_calibration`` is not an array: it stays in
        ``geometry``).

    Raises
    ------
    ValueError
        Shards out of order, of another vocabulary size or code size, lengths that disagree.
    """
    del n_threads
    p = _full_params(params)
    if not isinstance(geometry, Geometry):
        raise TypeError(f"geometry must be a Geometry, got {type(geometry).__name__}")
    V = geometry.n_terms
    shards = list(shards)
    if not shards:
        raise ValueError("shards must not be empty")
    metas = _shard_meta(shards, V, p)
    N = metas[-1][0] + metas[-1][1]
    idf = np.asarray(idf, np.float64)
    dl = np.asarray(dl, np.float64)
    if idf.shape != (V,):
        raise ValueError(f"idf must have shape ({V},), got {idf.shape}")
    if dl.shape != (N,):
        raise ValueError(f"dl must have shape ({N},) (the shards hold {N} passages), got {dl.shape}")
    if not np.isfinite(idf).all() or not np.isfinite(dl).all() or (dl.size and dl.min() < 0):
        raise ValueError("idf and dl must be finite, dl non-negative")
    tdt = term_dtype(V)
    sink = _Sink(out)
    M = sum(m[2] for m in metas)
    nnz = sum(m[3] for m in metas)
    S = p["code_size"]
    W = (S + 15) // 16
    # pass 1: per-branch and per-term counts
    bcount = np.zeros(V, np.int64)
    df = np.zeros(V, np.int64)
    for k in range(len(shards)):
        sh = _get(shards, k)
        bcount += np.bincount(sh.mem_branch, minlength=V)
        df += np.bincount(sh.s_idx, minlength=V)
    b_indptr = np.zeros(V + 1, np.int64)
    np.cumsum(bcount, out=b_indptr[1:])
    t_indptr = np.zeros(V + 1, np.int64)
    np.cumsum(df, out=t_indptr[1:])
    sink.put("idf", idf)
    sink.put("bm25_idf", np.log1p((N - df + 0.5) / (df + 0.5)))
    sink.put("dl", _narrow_dl(dl))
    sink.put("b_indptr", b_indptr)
    sink.put("t_indptr", t_indptr)
    _put_geometry(sink, geometry, tdt, p)
    arrs = {
        "mem_doc": sink.new("mem_doc", (M,), np.int32),
        "mem_m": sink.new("mem_m", (M,), np.float32),
        "code_term": sink.new("code_term", (M, S), tdt),
        "code_sign": sink.new("code_sign", (M, W), np.uint16),
        "s_indptr": sink.new("s_indptr", (N + 1,), support_pointer_dtype(nnz)),
        "s_idx": sink.new("s_idx", (nnz,), tdt),
    }
    if p["postings"]:
        arrs["t_docs"] = sink.new("t_docs", (nnz,), np.int32)
        arrs["t_tf"] = sink.new("t_tf", (nnz,), np.float32)
    _scatter(shards, arrs, b_indptr, t_indptr, V, p["postings"])
    if p["postings"]:
        _compress_into(sink, t_indptr, arrs.pop("t_docs"), arrs.pop("t_tf"))
        sink.drop("t_docs")
        sink.drop("t_tf")
    return sink.finish()


_TF_BLOCK = 1 << 22  # postings per block of the term-frequency split (bounded temporaries)


def _compress_into(sink, t_indptr, t_docs, t_tf) -> None:
    """Write the compressed postings of (``t_indptr``, ``t_docs``, ``t_tf``) into ``sink`` (module docstring)."""
    V = t_indptr.shape[0] - 1
    nb = np.zeros(V, np.int64)
    _kp.posting_bytes(t_indptr, t_docs, nb)
    t_off = np.zeros(V + 1, np.int64)
    np.cumsum(nb, out=t_off[1:])
    sink.put("t_off", t_off)
    _kp.encode_postings(t_indptr, t_docs, t_off, sink.new("t_code", (int(t_off[-1]),), np.uint8))
    nnz = t_tf.shape[0]
    tfq = sink.new("t_tfq", (nnz,), np.uint8)
    xpos, xval = [], []
    for lo in range(0, nnz, _TF_BLOCK):
        v = np.asarray(t_tf[lo : lo + _TF_BLOCK])
        small = (v >= 1) & (v <= 255) & (v == np.floor(v))
        tfq[lo : lo + v.shape[0]] = np.where(small, v, 0).astype(np.uint8)
        other = np.flatnonzero(~small)
        xpos.append(other + lo)
        xval.append(v[other].astype(np.float32))
    sink.put("t_xpos", np.concatenate(xpos).astype(np.int64) if xpos else np.zeros(0, np.int64))
    sink.put("t_xval", np.concatenate(xval) if xval else np.zeros(0, np.float32))


def compress_postings(t_indptr, t_docs, t_tf) -> dict:
    """Return the compressed postings (``t_off``, ``t_code``, ``t_tfq``, ``t_xpos``, ``t_xval``) in memory.

    Parameters
    ----------
    t_indptr : int64 (V+1,)
        Postings pointer (non-decreasing, from 0).
    t_docs : integer (nnz,)
        Documents of each term, strictly ascending within a term, non-negative.
    t_tf : float32 (nnz,)
        Term frequency of each posting.
    """
    sink = _Sink(None)
    _compress_into(sink, np.asarray(t_indptr, np.int64), np.asarray(t_docs, np.int32), np.asarray(t_tf, np.float32))
    return sink.finish()


def _get(shards, k) -> Shard:
    s = shards[k]
    return s if isinstance(s, Shard) else read_shard(s, mmap=True)


def _shard_meta(shards, V, p):
    """(first_doc, n_docs, n_memberships, nnz) per shard, after checking order and sizes."""
    metas = []
    expect = 0
    for k in range(len(shards)):
        sh = _get(shards, k)
        if not isinstance(sh, Shard):
            raise TypeError(f"shards[{k}] must be a Shard or a shard folder")
        if sh.n_terms != V:
            raise ValueError(f"shards[{k}] has {sh.n_terms} terms, the geometry {V}")
        if sh.code_term.ndim != 2 or sh.code_term.shape[1] != p["code_size"]:
            raise ValueError(
                f"shards[{k}] has codes of size {sh.code_term.shape[1:]}, params code_size = {p['code_size']}"
            )
        if sh.first_doc != expect:
            raise ValueError(f"shards[{k}] starts at passage {sh.first_doc}, expected {expect} (contiguous, in order)")
        _check_shard(sh, sh.n_docs, sh.mem_doc.shape[0], f"shards[{k}]")
        metas.append((sh.first_doc, sh.n_docs, int(sh.mem_doc.shape[0]), int(sh.s_indptr[-1])))
        expect += sh.n_docs
    return metas


def half_bits(w) -> np.ndarray:
    """float16 bits (uint16) of weights already rounded through float16 (exact)."""
    return np.asarray(w).astype(np.float16).view(np.uint16)


def centre_weight_array(c_indptr, c_terms, rel, p) -> np.ndarray:
    """``c_w``: the reliability weight of each centre entry, as float16 bits (uint16) or float32.

    ``rel`` = (r_indptr, r_terms, r_w, r_nj, r_scale, gvar); ``p`` the parameters (``tau``,
    ``beta``, ``reliability_float16``).  The float16-rounded weights are exact in float16.
    """
    w = np.empty(c_terms.shape[0], np.float64)
    f16 = bool(p["reliability_float16"])
    _b.centre_weights(c_indptr, c_terms, *rel, float(p["tau"]), float(p["beta"]), f16, w)
    return half_bits(w) if f16 else w.astype(np.float32)


def _put_geometry(sink, g: Geometry, tdt, p) -> None:
    rel = (g.r_indptr, g.r_terms, g.r_w, g.r_nj, g.r_scale, g.gvar)
    sink.put("c_w", centre_weight_array(g.c_indptr, g.c_terms, rel, p))
    for name in ("c_indptr", "c_vals", "c_norm", "r_indptr", "r_nj", "r_scale", "gvar"):
        sink.put(name, getattr(g, name))
    sink.put("r_w", half_bits(g.r_w) if p["reliability_float16"] else g.r_w.astype(np.float32))
    sink.put("c_terms", g.c_terms.astype(tdt))
    sink.put("r_terms", g.r_terms.astype(tdt))
    sink.put("g_idx", g.g_idx.astype(tdt))
    for name in ("a_indptr", "a_idx", "a_val", "g_indptr", "g_val"):
        sink.put(name, getattr(g, name))


def _group_positions(keys, cursor):
    """Stable counting-sort positions of ``keys`` after ``cursor[key]`` (cursor advanced)."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    n = sk.shape[0]
    if n == 0:
        return order, np.empty(0, np.int64)
    first = np.ones(n, bool)
    first[1:] = sk[1:] != sk[:-1]
    starts = np.flatnonzero(first)
    rank = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    pos = cursor[sk] + rank
    np.add.at(cursor, sk[starts], np.diff(np.append(starts, n)))
    return order, pos


def _scatter(shards, arrs, b_indptr, t_indptr, V, postings) -> None:
    """Fill the merged arrays shard by shard (branch-major memberships, transposed postings)."""
    bcur = b_indptr[:-1].copy()
    tcur = t_indptr[:-1].copy()
    s_off = 0
    s_indptr = arrs["s_indptr"]
    s_indptr[0] = 0
    for k in range(len(shards)):
        sh = _get(shards, k)
        order, pos = _group_positions(np.asarray(sh.mem_branch).astype(np.int64), bcur)
        for name in ("mem_doc", "mem_m", "code_term", "code_sign"):
            arrs[name][pos] = np.asarray(getattr(sh, name))[order]
        n, nnz = sh.n_docs, int(sh.s_indptr[-1])
        s_indptr[sh.first_doc + 1 : sh.first_doc + n + 1] = np.asarray(sh.s_indptr[1:]) + s_off
        arrs["s_idx"][s_off : s_off + nnz] = sh.s_idx
        if postings:
            order, pos = _group_positions(np.asarray(sh.s_idx).astype(np.int64), tcur)
            docs = np.repeat(np.arange(sh.first_doc, sh.first_doc + n, dtype=np.int32), np.diff(sh.s_indptr))
            arrs["t_docs"][pos] = docs[order]
            arrs["t_tf"][pos] = np.asarray(sh.s_tf)[order]
        s_off += nnz
