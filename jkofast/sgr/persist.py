"""Persistence of a SparseGeometricRetriever index: a folder of ``.npy`` arrays and ``meta.json`` (format 2).

:func:`save_index` writes every array through :mod:`jkofast._io` (temporary name, rename) and
``meta.json`` last, so a folder whose writing was interrupted has no ``meta.json`` and
:func:`load_index` refuses it.  Anything read from a file is untrusted: the loader checks dtypes,
shapes, pointer ends and the O(V) tables always, and (unless memory-mapped without ``verify``)
every id and value the query kernels index with (:func:`check_structure`, :func:`_check_full`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from jkofast._io import atomic_save_npy, atomic_write_json
from jkofast._validation import read_json_file
from jkofast.sgr import layout
from jkofast.sgr.config import SGRConfig
from jkofast.sgr.layout import FORMAT

__all__ = [
    "INDEX_ARRAYS",
    "POSTING_ARRAYS",
    "array_names",
    "check_meta_lists",
    "check_structure",
    "load_index",
    "save_index",
]

# the saved arrays of every index; the postings are saved when ``postings`` is set
INDEX_ARRAYS = (
    "idf",
    "bm25_idf",
    "dl",
    "s_indptr",
    "s_idx",
    "b_indptr",
    "mem_doc",
    "mem_m",
    "code_term",
    "code_sign",
    "c_indptr",
    "c_terms",
    "c_vals",
    "c_norm",
    "c_w",
    "r_indptr",
    "r_terms",
    "r_w",
    "r_nj",
    "r_scale",
    "gvar",
    "a_indptr",
    "a_idx",
    "a_val",
    "g_indptr",
    "g_idx",
    "g_val",
    "t_indptr",
)
POSTING_ARRAYS = ("t_docs", "t_tf")


def array_names(cfg: SGRConfig) -> list:
    """Names of the arrays an index built with ``cfg`` holds (and saves)."""
    return list(INDEX_ARRAYS) + (list(POSTING_ARRAYS) if cfg.postings else [])


def _mapped_from(a: np.ndarray, target: str) -> np.memmap | None:
    """Return the memory map of file ``target`` that ``a`` views, or ``None``."""
    base = a
    while base is not None and not isinstance(base, np.memmap):
        base = base.base if isinstance(base, np.ndarray) else None
    if isinstance(base, np.memmap) and base.filename and os.path.samefile(base.filename, target):
        return base
    return None


def save_index(path, ix: dict, cfg: SGRConfig, *, terms, ids, n_docs: int, n_calibration: int, scripts: bool) -> None:
    """Write the index arrays ``ix`` to folder ``path`` (format 2: one ``.npy`` per array + ``meta.json``).

    Each array is written under a temporary name and renamed; ``meta.json`` (format version,
    parameters, vocabulary, the list of arrays with dtypes and shapes) is written last, and an
    existing one is removed before anything else is written.  Document ids go to
    ``ids_utf8.npy`` / ``ids_off.npy`` (UTF-8 bytes and offsets).  Arrays already memory-mapped
    from this folder (``assemble(out=path)``) are flushed, not rewritten.
    """
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"path {path!r} exists and is not a directory")
    os.makedirs(path, exist_ok=True)
    mpath = os.path.join(path, "meta.json")
    if os.path.exists(mpath):
        os.remove(mpath)
    listing = {}
    for k in array_names(cfg):
        a = ix[k]
        listing[k] = [a.dtype.str, list(a.shape)]
        target = os.path.join(path, k + ".npy")
        mapped = _mapped_from(a, target)
        if mapped is not None:
            if mapped.mode != "c":
                mapped.flush()
            continue
        atomic_save_npy(target, a, fsync=False)
    ids_file = None
    if ids is not None:
        enc = [x.encode("utf-8") for x in ids]
        off = np.zeros(len(enc) + 1, np.int64)
        np.cumsum([len(b) for b in enc], out=off[1:])
        atomic_save_npy(os.path.join(path, "ids_utf8.npy"), np.frombuffer(b"".join(enc), np.uint8), fsync=False)
        atomic_save_npy(os.path.join(path, "ids_off.npy"), off, fsync=False)
        ids_file = "ids_utf8.npy"
    meta = {
        "format": FORMAT,
        "params": cfg.to_dict(),
        "terms": terms,
        "ids": ids_file,
        "n_docs": int(n_docs),
        "n_calibration": int(n_calibration),
        "scripts": bool(scripts),
        "arrays": listing,
    }
    atomic_write_json(mpath, meta)


def load_index(path, mmap: bool = False, verify: bool = False) -> dict:
    """Read and check an index folder written by :func:`save_index`.

    Returns ``{"config", "index", "terms", "ids", "scripts", "n_calibration"}``; see
    :meth:`jkofast.sgr.retriever.SparseGeometricRetriever.load` for ``mmap``, ``verify`` and
    the errors.
    """
    path = os.fspath(path)
    mpath = os.path.join(path, "meta.json")
    meta = read_json_file(
        mpath,
        missing=f"{path}: not a SparseGeometricRetriever index (meta.json missing: not an index, "
        "or its writing did not finish)",
        invalid=f"{mpath}: not a readable index description",
    )
    _check_meta(meta, mpath)
    try:
        cfg = SGRConfig.from_dict(meta["params"])
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{mpath}: params: {exc}") from None
    ix = _load_arrays(path, meta, cfg, mmap)
    check_structure(ix, meta, cfg, path)
    if verify or not mmap:
        _check_full(ix, cfg, path)
    terms = meta["terms"]
    return {
        "config": cfg,
        "index": ix,
        "terms": None if terms is None else list(terms),
        "ids": _load_ids(path, meta, mmap, verify or not mmap),
        "scripts": meta.get("scripts", False) is True,
        "n_calibration": int(meta.get("n_calibration", meta["n_docs"])),
    }


class _StrSeq(Sequence):
    """Read-only sequence of the strings stored as UTF-8 bytes + offsets (decoded on access)."""

    def __init__(self, data: np.ndarray, off: np.ndarray):
        self._data, self._off = data, off

    def __len__(self) -> int:
        return int(self._off.shape[0] - 1)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("index out of range")
        return bytes(self._data[self._off[i] : self._off[i + 1]]).decode("utf-8")

    def __eq__(self, other):
        return isinstance(other, Sequence) and len(other) == len(self) and all(a == b for a, b in zip(self, other))

    __hash__ = None


def _load_ids(path: str, meta: dict, lazy: bool, check: bool):
    if meta["ids"] is None:
        return None
    try:
        data = np.load(os.path.join(path, "ids_utf8.npy"), mmap_mode="r" if lazy else None, allow_pickle=False)
        off = np.load(os.path.join(path, "ids_off.npy"), allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: ids unreadable ({type(exc).__name__}: {exc})") from None
    n = int(meta["n_docs"])
    if (
        data.dtype != np.uint8
        or off.dtype != np.int64
        or off.shape != (n + 1,)
        or off[0] != 0
        or off[-1] != data.shape[0]
        or np.any(np.diff(off) < 0)
    ):
        raise ValueError(f"{path}: ids_off.npy / ids_utf8.npy do not describe {n} ids")
    seq = _StrSeq(data, off)
    if lazy and not check:
        return seq
    try:
        ids = list(seq)
    except UnicodeDecodeError:
        raise ValueError(f"{path}: ids_utf8.npy is not UTF-8") from None
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: ids holds duplicates")
    return ids


def _load_arrays(path: str, meta: dict, cfg: SGRConfig, mmap: bool) -> dict:
    listing = meta.get("arrays")
    if not isinstance(listing, dict):
        raise ValueError(f"{os.path.join(path, 'meta.json')}: arrays must be an object")
    need = array_names(cfg)
    missing = [k for k in need if k not in listing]
    if missing:
        raise ValueError(f"{os.path.join(path, 'meta.json')}: missing array(s) {missing}")
    ix = {}
    for k in need:
        f = os.path.join(path, k + ".npy")
        if not os.path.isfile(f):
            raise ValueError(f"{path}: {k}.npy missing")
        try:
            a = np.load(f, mmap_mode="c" if mmap else None, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{f}: unreadable ({type(exc).__name__}: {exc})") from None
        try:
            want = (np.dtype(listing[k][0]), tuple(int(x) for x in listing[k][1]))
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"{os.path.join(path, 'meta.json')}: arrays.{k} must be [dtype, shape]") from None
        if (a.dtype, a.shape) != want:
            raise ValueError(f"{f}: holds {a.dtype} {a.shape}, meta.json lists {want[0]} {want[1]}")
        ix[k] = np.asarray(a) if mmap else a  # a plain ndarray view on the map (one Numba type)
    return ix


def _check_meta(meta, mpath: str) -> None:
    """Check the ``meta.json`` object of :func:`save_index` (format 2)."""
    if not isinstance(meta, dict):
        raise ValueError(f"{mpath}: expected a JSON object, got {type(meta).__name__}")
    fmt = meta.get("format")
    if fmt == 1:
        raise ValueError(
            f"{mpath}: index format 1 (index.npz) is not supported; rebuild the index with this version of jkofast"
        )
    if fmt != FORMAT:
        raise ValueError(
            f"{mpath}: index format {fmt!r} is not supported (this version of jkofast reads format {FORMAT}; "
            "an index written by a newer jkofast needs that version)"
        )
    missing = [k for k in ("params", "terms", "ids", "n_docs") if k not in meta]
    if missing:
        raise ValueError(f"{mpath}: missing key(s) {missing}")
    if not isinstance(meta["params"], dict):
        raise ValueError(f"{mpath}: params must be an object")
    n = meta["n_docs"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{mpath}: n_docs must be a positive integer, got {n!r}")
    if meta["ids"] not in (None, "ids_utf8.npy"):
        raise ValueError(f"{mpath}: ids must be null or 'ids_utf8.npy'")
    check_meta_lists({**meta, "ids": None}, mpath)


def check_meta_lists(meta, where: str) -> None:
    """Check ``terms`` and ``ids`` of ``meta``: lists of unique strings (``ids``: ``n_docs`` of them) or null."""
    n = meta["n_docs"]
    for key, size in (("terms", None), ("ids", n)):
        v = meta[key]
        if v is None:
            continue
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ValueError(f"{where}: {key} must be a list of strings or null")
        if size is not None and len(v) != size:
            raise ValueError(f"{where}: {key} has {len(v)} entries for n_docs = {size}")
        if len(set(v)) != len(v):
            raise ValueError(f"{where}: {key} holds duplicates")


def _bad(zpath, name, what):
    return ValueError(f"{zpath}: {name} {what}")


def _ids_in(ix, k, hi, zpath, arr=None):
    a = ix[k] if arr is None else arr
    if a.dtype.kind == "f":
        raise _bad(zpath, k, f"must hold integer ids, got dtype {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) >= hi):
        raise _bad(zpath, k, f"holds ids outside [0, {hi})")


_DTYPES = {
    "idf": "f8",
    "bm25_idf": "f8",
    "b_indptr": "i8",
    "mem_doc": "i4",
    "mem_m": "f4",
    "code_sign": "u2",
    "c_indptr": "i8",
    "c_vals": "f4",
    "c_norm": "f8",
    "r_indptr": "i8",
    "r_nj": "f8",
    "r_scale": "f8",
    "gvar": "f8",
    "a_indptr": "i8",
    "a_idx": "i4",
    "a_val": "f4",
    "g_indptr": "i8",
    "g_val": "f4",
    "t_indptr": "i8",
    "t_docs": "i4",
    "t_tf": "f4",
}


def check_structure(ix: dict, meta: dict, cfg: SGRConfig, where: str) -> None:
    """Cheap checks (O(V) and array headers): dtypes, shapes, pointer ends, the V-sized tables in full.

    The N- and M-sized arrays (memberships, codes, support, postings) get dtype and shape
    checks and their pointers' first and last entries; :func:`_check_full` reads them.
    """
    V = ix["idf"].shape[0] if ix["idf"].ndim == 1 else -1
    N = int(meta["n_docs"])
    if V < 1:
        raise _bad(where, "idf", f"must be a non-empty 1-D array, got shape {ix['idf'].shape}")
    tdt = layout.term_dtype(V)
    for k, dt in _DTYPES.items():
        if k in ix and ix[k].dtype != np.dtype(dt):
            raise _bad(where, k, f"has dtype {ix[k].dtype}, expected {np.dtype(dt)}")
    for k in ("s_idx", "code_term", "c_terms", "r_terms", "g_idx"):
        if ix[k].dtype != tdt:
            raise _bad(where, k, f"has dtype {ix[k].dtype}, expected {tdt} for V = {V}")
    if ix["s_indptr"].dtype != layout.support_pointer_dtype(int(ix["s_idx"].shape[0])):
        raise _bad(where, "s_indptr", f"has dtype {ix['s_indptr'].dtype}, expected uint32 (int64 from 2**32 entries)")
    if ix["dl"].dtype not in (np.uint16, np.float64) or ix["dl"].shape != (N,):
        raise _bad(where, "dl", f"must be uint16 or float64 of shape ({N},), got {ix['dl'].dtype} {ix['dl'].shape}")
    if meta["terms"] is not None and len(meta["terms"]) != V:
        raise ValueError(f"{where}: {len(meta['terms'])} terms for {V} idf entries")
    for k in ("bm25_idf", "c_norm", "r_nj", "r_scale", "gvar"):
        if ix[k].shape != (V,):
            raise _bad(where, k, f"has shape {ix[k].shape}, expected ({V},)")
    _check_pointers(ix, cfg, V, N, where)


def _check_pointers(ix: dict, cfg: SGRConfig, V: int, N: int, where: str) -> None:
    """Membership and code shapes, CSR pointer ends and aligned values, and the O(V) tables in full."""
    M = ix["mem_doc"].shape[0] if ix["mem_doc"].ndim == 1 else -1
    S = cfg.code_size
    for k, shape in (("mem_m", (M,)), ("code_term", (M, S)), ("code_sign", (M, (S + 15) // 16))):
        if ix[k].shape != shape:
            raise _bad(where, k, f"has shape {ix[k].shape}, expected {shape}")
    ptrs = [
        ("s_indptr", N, "s_idx", ()),
        ("b_indptr", V, "mem_doc", ()),
        ("c_indptr", V, "c_terms", ("c_vals",)),
        ("r_indptr", V, "r_terms", ("r_w",)),
        ("a_indptr", V, "a_idx", ("a_val",)),
        ("g_indptr", V, "g_idx", ("g_val",)),
    ]
    if cfg.postings:
        ptrs.append(("t_indptr", V, "t_docs", ("t_tf",)))
    elif ix["t_indptr"].shape != (V + 1,) or ix["t_indptr"][0] != 0 or ix["t_indptr"][-1] != ix["s_idx"].shape[0]:
        raise _bad(where, "t_indptr", f"must be a ({V + 1},) pointer from 0 to len(s_idx)")
    want_cw = np.uint16 if cfg.reliability_float16 else np.float32
    if ix["c_w"].dtype != want_cw or ix["c_w"].shape != ix["c_terms"].shape:
        raise _bad(where, "c_w", f"must be {np.dtype(want_cw)} of shape {ix['c_terms'].shape} like c_terms")
    if ix["r_w"].dtype != want_cw:
        raise _bad(where, "r_w", f"must be {np.dtype(want_cw)}")
    for ptr, rows, idx, vals in ptrs:
        pa = ix[ptr]
        n_ent = ix[idx].shape[0] if ix[idx].ndim == 1 else -1
        if pa.shape != (rows + 1,) or pa[0] != 0 or pa[-1] != n_ent:
            raise _bad(where, ptr, f"must be an integer ({rows + 1},) pointer from 0 to len({idx}) = {n_ent}")
        for v in vals:
            if ix[v].shape != (n_ent,):
                raise _bad(where, v, f"has shape {ix[v].shape}, expected ({n_ent},) like {idx}")
    _check_v_tables(ix, V, where)


def _check_v_tables(ix: dict, V: int, where: str) -> None:
    """Check the O(V) tables in full (cheap; the kernels index with them unchecked)."""
    for ptr in ("b_indptr", "c_indptr", "r_indptr", "a_indptr", "g_indptr", "t_indptr"):
        if np.any(np.diff(ix[ptr]) < 0):
            raise _bad(where, ptr, "must be non-decreasing")
    for k, hi in (("c_terms", V), ("r_terms", V), ("a_idx", V), ("g_idx", V)):
        _ids_in(ix, k, hi, where)
    for k in ("idf", "bm25_idf", "c_vals", "c_norm", "r_w", "r_nj", "r_scale", "gvar", "a_val", "g_val"):
        if ix[k].size and not np.isfinite(ix[k]).all():
            raise _bad(where, k, "contains NaN or inf")


def _check_full(ix: dict, cfg: SGRConfig, where: str) -> None:
    """Read every N- and M-sized array: pointers monotone, ids in range, values finite."""
    V = ix["idf"].shape[0]
    N = ix["dl"].shape[0]
    s = ix["s_indptr"]
    if np.any(s[1:] < s[:-1]):  # (not np.diff: it wraps around on uint32)
        raise _bad(where, "s_indptr", "must be non-decreasing")
    _ids_in(ix, "s_idx", V, where)
    _ids_in(ix, "mem_doc", N, where)
    if cfg.postings:
        _ids_in(ix, "t_docs", N, where)
    for k in ("dl", "mem_m", "t_tf"):
        if k in ix and ix[k].dtype.kind == "f" and ix[k].size and not np.isfinite(ix[k]).all():
            raise _bad(where, k, "contains NaN or inf")
    if ix["dl"].size and ix["dl"].min() < 0:
        raise _bad(where, "dl", "holds negative lengths")
    ct = ix["code_term"]
    valid = ct < V
    # a code is its ascending term ids then sentinels only
    if ct.shape[1] > 1 and np.any(valid[:, 1:] & ~valid[:, :-1]):
        raise _bad(where, "code_term", "holds a term id after the sentinel")
    if np.any(ct[valid] >= V):
        raise _bad(where, "code_term", f"holds ids outside [0, {V})")
    per_doc = np.bincount(ix["mem_doc"].astype(np.int64), minlength=N)
    if per_doc.size and per_doc.max() > cfg.n_memberships:
        raise _bad(
            where,
            "mem_doc",
            f"gives a document {int(per_doc.max())} memberships, but params n_memberships = {cfg.n_memberships}",
        )
