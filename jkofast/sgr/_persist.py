"""Persistence of a SparseGeometricRetriever index: a folder of ``.npy`` arrays and ``meta.json`` (format 3).

:func:`save_index` writes every array through :mod:`jkofast._io` (temporary name, rename) and
``meta.json`` last, so a folder whose writing was interrupted has no ``meta.json`` and
:func:`load_index` refuses it.  ``meta.json`` records every file's size and CRC32 and every
array's dtype and shape, and ends with its own CRC32 (:func:`jkofast._io.atomic_write_manifest`).

Anything read from a file is untrusted (docs/integrity.md).  Every open checks the manifest's
checksum, each file's size and header against the record, the checksum of every file of at most
:data:`OPEN_CHECKSUM_BYTES`, the O(V) tables in full and, with vectorised min/max passes, every
id, pointer and sentinel the query kernels index with (:func:`check_structure`,
:func:`check_ranges`), so no damaged file reaches a kernel.  ``verify`` (and an in-memory load)
adds the checksum of every file and the remaining invariants (:func:`_check_full`);
:func:`check_index` is the report of ``jkofast index --check``.  An index written before the
checksums were recorded (jkofast 0.1.0) still opens; its report says "no checksums recorded".

Format 3 stores the inverted postings compressed (``jkofast.sgr.layout``, ``POSTING_ARRAYS``);
a format-2 index without postings (``postings=False``, the compact index of a streaming build)
holds the same files and opens as it is.  A format-2 index with postings (``t_docs`` int32,
``t_tf`` float32: 8 bytes per posting) opens too: its postings are range-checked (pointer,
documents in ``[0, N)`` ascending within each term, finite frequencies), then compressed in
memory by :func:`jkofast.sgr.layout.compress_postings` on every load (the other arrays may stay
mapped); saving the loaded retriever writes format 3.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from jkofast._io import (
    IndexDamage,
    atomic_save_npy,
    atomic_write_manifest,
    check_file_record,
    check_file_records,
    file_record,
    file_report,
    read_manifest,
    verify_file_records,
)
from jkofast.kernels.sgr import postings as _kp
from jkofast.sgr import layout
from jkofast.sgr.config import SGRConfig
from jkofast.sgr.layout import FORMAT, POSTING_ARRAYS

__all__ = [
    "INDEX_ARRAYS",
    "OPEN_CHECKSUM_BYTES",
    "POSTING_ARRAYS",
    "IndexDamage",
    "array_names",
    "check_index",
    "check_meta_lists",
    "check_ranges",
    "check_structure",
    "load_index",
    "save_index",
]

# files up to this size have their checksum verified at every open (the O(V) tables, small indexes);
# larger ones get size, header and range checks at open and their checksum with ``verify``
OPEN_CHECKSUM_BYTES = 1 << 22
_ROWS = 1 << 18  # rows per block of the blocked checks (bounded temporaries on a large index)


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
READS = (2, FORMAT)  # formats this version opens (format 2: postings compressed on load)
LEGACY_POSTINGS = ("t_docs", "t_tf")  # format 2's uncompressed postings


def array_names(cfg: SGRConfig) -> list:
    """Names of the arrays an index built with ``cfg`` holds (and saves)."""
    return list(INDEX_ARRAYS) + (list(POSTING_ARRAYS) if cfg.postings else [])


def _mapped_from(a: np.ndarray, target: str) -> np.memmap | None:
    """Return the memory map of file ``target`` that ``a`` views, or ``None``."""
    base = a
    while base is not None and not isinstance(base, np.memmap):
        base = base.base if isinstance(base, np.ndarray) else None
    if not (isinstance(base, np.memmap) and base.filename):
        return None
    try:
        return base if os.path.samefile(base.filename, target) else None
    except OSError:  # no file at target yet (a new folder), or the mapped file is gone: not the same file
        return None


def save_index(path, ix: dict, cfg: SGRConfig, *, terms, ids, n_docs: int, n_calibration: int, scripts: bool) -> None:
    """Write the index arrays ``ix`` to folder ``path`` (format 3: one ``.npy`` per array + ``meta.json``).

    Each array is written under a temporary name and renamed; ``meta.json`` (format version,
    parameters, vocabulary, the list of arrays with dtypes and shapes, every file's size and
    CRC32, then its own CRC32) is written last, and an existing one is removed before anything
    else is written.  Document ids go to
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
        data = np.frombuffer(b"".join(enc), np.uint8)
        atomic_save_npy(os.path.join(path, "ids_utf8.npy"), data, fsync=False)
        atomic_save_npy(os.path.join(path, "ids_off.npy"), off, fsync=False)
        listing["ids_utf8"] = [data.dtype.str, list(data.shape)]
        listing["ids_off"] = [off.dtype.str, list(off.shape)]
        ids_file = "ids_utf8.npy"
    files = {k + ".npy": file_record(os.path.join(path, k + ".npy")) for k in listing}
    meta = {
        "format": FORMAT,
        "params": cfg.to_dict(),
        "terms": terms,
        "ids": ids_file,
        "n_docs": int(n_docs),
        "n_calibration": int(n_calibration),
        "scripts": bool(scripts),
        "arrays": listing,
        "checksum": "crc32",
        "files": files,
    }
    atomic_write_manifest(mpath, meta)


def load_index(path, mmap: bool = False, verify: bool = False) -> dict:
    """Read and check an index folder written by :func:`save_index`.

    Returns ``{"config", "index", "terms", "ids", "scripts", "n_calibration"}``; see
    :meth:`jkofast.sgr.retriever.SparseGeometricRetriever.load` for ``mmap``, ``verify`` and
    the errors (:class:`IndexDamage`, a ``ValueError`` naming the file).
    """
    return _open(os.fspath(path), mmap, verify or not mmap, checksums=True)


def _read_meta(path: str) -> tuple[dict, bool]:
    """Return ``(meta, checksummed)`` of the folder's ``meta.json`` after its own checks."""
    mpath = os.path.join(path, "meta.json")
    try:
        meta, summed = read_manifest(
            mpath,
            missing=f"{path}: not a SparseGeometricRetriever index (meta.json missing: not an index, "
            "or its writing did not finish)",
            invalid=f"{mpath}: not a readable index description",
            precheck=lambda m: _check_format(m, mpath),
        )
    except IndexDamage:
        raise
    except ValueError as exc:
        raise IndexDamage(str(exc), "meta.json" if os.path.isfile(mpath) else None) from None
    try:
        _check_meta(meta, mpath, summed)
    except ValueError as exc:
        raise IndexDamage(str(exc), "meta.json") from None
    return meta, summed


def _open(path: str, mmap: bool, full: bool, checksums: bool) -> dict:
    meta, summed = _read_meta(path)
    mpath = os.path.join(path, "meta.json")
    try:
        cfg = SGRConfig.from_dict(meta["params"])
    except (TypeError, ValueError) as exc:
        raise IndexDamage(f"{mpath}: params: {exc}", "meta.json") from None
    if summed:  # large files: CRC32 when their verification stamp does not match (jkofast._io.STAMP_FILE)
        verify_file_records(path, meta["files"], checksums=checksums, full=full, small=OPEN_CHECKSUM_BYTES)
    ix = _load_arrays(path, meta, cfg, mmap)
    try:
        check_structure(ix, meta, cfg, path)
        check_ranges(ix, cfg, path)
        if full:
            _check_full(ix, cfg, path)
    except IndexDamage as exc:
        if exc.file is None or exc.what is None:
            raise
        raise IndexDamage(f"{os.path.join(path, exc.file)}: {exc.what}", exc.file, exc.what) from None
    terms = meta["terms"]
    return {
        "config": cfg,
        "index": ix,
        "terms": None if terms is None else list(terms),
        "ids": _load_ids(path, meta, mmap, full),
        "scripts": meta.get("scripts", False) is True,
        "n_calibration": int(meta.get("n_calibration", meta["n_docs"])),
    }


def _check_file(path: str, name: str, rec: dict, checksum: bool) -> None:
    check_file_record(path, name, rec, checksum=checksum)


def check_index(path) -> dict:
    """Check every file and every invariant of an SGR index folder; the report of ``jkofast index --check``.

    Like Lucene's CheckIndex: the manifest's own checksum, then each recorded file (present,
    its size, its CRC32: all of them, every problem listed), then the arrays' headers and the
    structural invariants of :func:`check_structure`, :func:`check_ranges` and the full check
    (the first violation, naming its file).

    Returns
    -------
    dict
        ``{"path", "kind": "sgr", "format", "checksums": "crc32" | "none recorded", "files":
        [{"file", "bytes", "status"}], "ok", "error", "bad_file"}``; ``error`` is the first
        problem's message (``None`` when ``ok``) and ``bad_file`` its file.
    """
    path = os.fspath(path)
    rep = {"path": path, "kind": "sgr", "format": None, "checksums": None, "files": [], "ok": False}
    rep.update(error=None, bad_file=None)
    try:
        meta, summed = _read_meta(path)
    except IndexDamage as exc:
        rep.update(error=str(exc), bad_file=exc.file)
        return rep
    rep["format"] = meta["format"]
    rep["checksums"] = "crc32" if summed else "none recorded"
    names = sorted(k + ".npy" for k in meta.get("arrays", {}) if isinstance(k, str))
    return file_report(
        rep, path, meta["files"] if summed else None, names, lambda: _open(path, mmap=True, full=True, checksums=False)
    )


class _StrSeq(Sequence):
    """Read-only sequence of the strings stored as UTF-8 bytes + offsets (decoded on access)."""

    def __init__(self, data: np.ndarray, off: np.ndarray, where: str = "ids_utf8.npy"):
        self._data, self._off, self._where = data, off, where

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
        try:
            return bytes(self._data[self._off[i] : self._off[i + 1]]).decode("utf-8")
        except UnicodeDecodeError as exc:
            what = f"id {i} is not UTF-8 ({exc.reason})"
            raise IndexDamage(f"{self._where}: {what}", "ids_utf8.npy", what) from None

    def __eq__(self, other):
        return isinstance(other, Sequence) and len(other) == len(self) and all(a == b for a, b in zip(self, other))

    __hash__ = None


def _load_ids(path: str, meta: dict, lazy: bool, check: bool):
    if meta["ids"] is None:
        return None
    n = int(meta["n_docs"])
    data = _read_npy(path, "ids_utf8", mmap=lazy)
    off = _read_npy(path, "ids_off", mmap=False)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise _where(path, "ids_utf8", f"must be a 1-D uint8 array, got {data.dtype} {data.shape}")
    if off.dtype != np.int64 or off.shape != (n + 1,):
        raise _where(path, "ids_off", f"must be int64 of shape ({n + 1},), got {off.dtype} {off.shape}")
    if off[0] != 0 or off[-1] != data.shape[0] or np.any(off[1:] < off[:-1]):
        raise _where(path, "ids_off", f"does not describe {n} ids in ids_utf8.npy ({data.shape[0]} bytes)")
    seq = _StrSeq(data, off, os.path.join(path, "ids_utf8.npy"))
    if lazy and not check:
        return seq
    ids = list(seq)
    if len(set(ids)) != len(ids):
        raise _where(path, "ids_utf8", "holds duplicate ids")
    return ids


def _where(path: str, name: str, what: str) -> IndexDamage:
    """``IndexDamage`` naming ``<path>/<name>.npy``."""
    return IndexDamage(f"{os.path.join(path, name + '.npy')}: {what}", name + ".npy", what)


def _read_npy(path: str, name: str, mmap: bool) -> np.ndarray:
    f = os.path.join(path, name + ".npy")
    if not os.path.isfile(f):
        raise _where(path, name, "missing")
    try:
        return np.load(f, mmap_mode="c" if mmap else None, allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError, OSError, EOFError, SyntaxError, ... on a damaged file
        raise _where(path, name, f"unreadable ({type(exc).__name__}: {exc})") from None


def _load_arrays(path: str, meta: dict, cfg: SGRConfig, mmap: bool) -> dict:
    listing = meta["arrays"]
    mpath = os.path.join(path, "meta.json")
    legacy = meta["format"] == 2 and cfg.postings
    need = list(INDEX_ARRAYS) + list(LEGACY_POSTINGS) if legacy else array_names(cfg)
    missing = [k for k in need if k not in listing]
    if missing:
        raise IndexDamage(f"{mpath}: missing array(s) {missing}", "meta.json")
    ix = {}
    for k in need:
        a = _read_npy(path, k, mmap)
        try:
            want = (np.dtype(listing[k][0]), tuple(int(x) for x in listing[k][1]))
        except (TypeError, ValueError, IndexError):
            raise IndexDamage(f"{mpath}: arrays.{k} must be [dtype, shape]", "meta.json") from None
        if (a.dtype, a.shape) != want:
            raise _where(path, k, f"holds {a.dtype} {a.shape}, meta.json lists {want[0]} {want[1]}")
        ix[k] = np.asarray(a) if mmap else a  # a plain ndarray view on the map (one Numba type)
    if legacy:
        _compress_legacy_postings(ix, path, int(meta["n_docs"]))
    return ix


def _compress_legacy_postings(ix: dict, path: str, N: int) -> None:
    """Replace format 2's ``t_docs``/``t_tf`` in ``ix`` by the compressed postings of format 3.

    The encoder trusts its input, so everything it reads is checked first, naming the file: the
    pointer ``t_indptr`` (int64, non-decreasing from 0 to ``len(t_docs)``), ``t_docs`` (int32
    documents in ``[0, N)``, strictly ascending within each term), ``t_tf`` (float32, finite, one
    per posting).  The decoded result then passes format 3's own checks like any other index.
    """
    docs, tf, ptr = ix.pop("t_docs"), ix.pop("t_tf"), ix["t_indptr"]
    if docs.dtype != np.int32 or docs.ndim != 1:
        raise _where(path, "t_docs", f"must be a 1-D int32 array, got {docs.dtype} {docs.shape}")
    if tf.dtype != np.float32 or tf.shape != docs.shape:
        raise _where(path, "t_tf", f"must be float32 of shape {docs.shape} like t_docs, got {tf.dtype} {tf.shape}")
    n = docs.shape[0]
    if (
        ptr.dtype != np.int64
        or ptr.ndim != 1
        or ptr.shape[0] < 2
        or ptr[0] != 0
        or ptr[-1] != n
        or np.any(ptr[1:] < ptr[:-1])
    ):
        raise _where(path, "t_indptr", f"must be a non-decreasing int64 pointer from 0 to len(t_docs) = {n}")
    step = _ROWS * 16
    starts = ptr[1:-1]  # where a term's postings begin: that posting may follow any document
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        blk = docs[lo:hi]
        if int(blk.min()) < 0 or int(blk.max()) >= N:
            raise _where(path, "t_docs", f"holds documents outside [0, {N})")
        if not np.isfinite(tf[lo:hi]).all():
            raise _where(path, "t_tf", "holds NaN or inf")
        top = min(hi, n - 1)
        rises = docs[lo + 1 : top + 1] > docs[lo:top]  # docs[i] < docs[i + 1], i in [lo, top)
        new_term = starts[np.searchsorted(starts, lo + 1) : np.searchsorted(starts, top, side="right")]
        rises[new_term - 1 - lo] = True
        if not rises.all():
            raise _where(path, "t_docs", "must hold strictly ascending documents within each term (t_indptr.npy)")
    ix.update(layout.compress_postings(ptr, docs, tf))


def _check_meta(meta, mpath: str, summed: bool = False) -> None:
    """Check the ``meta.json`` object of :func:`save_index` (format 3)."""
    if not isinstance(meta, dict):
        raise ValueError(f"{mpath}: expected a JSON object, got {type(meta).__name__}")
    _check_format(meta, mpath)
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
    if not isinstance(meta.get("arrays"), dict):
        raise ValueError(f"{mpath}: arrays must be an object")
    _check_file_records(meta, mpath, summed)


def _check_format(meta, mpath: str) -> None:
    """Refuse a manifest that is no JSON object or of another format (before its checksum is compared)."""
    if not isinstance(meta, dict):
        raise ValueError(f"{mpath}: expected a JSON object, got {type(meta).__name__}")
    fmt = meta.get("format")
    if fmt == 1:
        raise ValueError(
            f"{mpath}: index format 1 (index.npz) is not supported; rebuild the index with this version of jkofast"
        )
    if isinstance(fmt, bool) or fmt not in READS:
        raise ValueError(
            f"{mpath}: index format {fmt!r} is not supported (this version of jkofast reads formats 2 and "
            f"{FORMAT}; "
            "an index written by a newer jkofast needs that version)"
        )


def _check_file_records(meta: dict, mpath: str, summed: bool) -> None:
    """Check the ``files`` record: present exactly when the manifest is checksummed; one entry per array file."""
    files = meta.get("files")
    if not summed:
        if files is not None:
            raise ValueError(f"{mpath}: records file checksums but not its own (its checksum field is damaged)")
        return
    check_file_records(files, mpath)
    want = {k + ".npy" for k in meta["arrays"]}
    if meta["ids"] is not None:
        want |= {"ids_utf8.npy", "ids_off.npy"}
    lost = sorted(want - set(files))
    if lost:
        raise ValueError(f"{mpath}: files records no checksum for {lost}")


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
    return IndexDamage(f"{zpath}: {name} {what}", name + ".npy", f"{name} {what}")


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
    "t_off": "i8",
    "t_code": "u1",
    "t_tfq": "u1",
    "t_xpos": "i8",
    "t_xval": "f4",
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
        raise _bad(where, "idf", f"has {V} entries for the {len(meta['terms'])} terms of meta.json")
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
        ptrs.append(("t_indptr", V, "t_tfq", ()))
        ptrs.append(("t_off", V, "t_code", ()))
        if ix["t_xval"].shape != ix["t_xpos"].shape or ix["t_xpos"].ndim != 1:
            raise _bad(where, "t_xval", f"has shape {ix['t_xval'].shape}, expected {ix['t_xpos'].shape} like t_xpos")
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
    for ptr in ("b_indptr", "c_indptr", "r_indptr", "a_indptr", "g_indptr", "t_indptr", "t_off"):
        if ptr in ix and np.any(np.diff(ix[ptr]) < 0):
            raise _bad(where, ptr, "must be non-decreasing")
    for k, hi in (("c_terms", V), ("r_terms", V), ("a_idx", V), ("g_idx", V)):
        _ids_in(ix, k, hi, where)
    for k in ("idf", "bm25_idf", "c_vals", "c_norm", "c_w", "r_w", "r_nj", "r_scale", "gvar", "a_val", "g_val"):
        a = ix[k].view(np.float16) if ix[k].dtype == np.uint16 else ix[k]  # float16 bits (reliability_float16)
        if a.size and not np.isfinite(a).all():
            raise _bad(where, k, "contains NaN or inf")


def _term_after_sentinel(ct: np.ndarray, V: int) -> bool:
    """Whether a row of ``ct`` holds a slot >= V (a sentinel) before a slot < V (a term).

    One pass per block: the flags ``slot >= V`` are bytes (0/1), eight to a uint64 word in slot
    order, so "flag r set and flag r + 1 clear" is a shift and a mask per word (and across
    neighbouring words) instead of three boolean temporaries per slot.
    """
    M, S = ct.shape
    if S < 2:
        return False
    low7 = np.uint64(0x00FFFFFFFFFFFFFF)
    for lo in range(0, M, _ROWS):
        big = ct[lo : lo + _ROWS] >= V
        if S % 8:
            if np.any(big[:, :-1] & ~big[:, 1:]):
                return True
            continue
        w = big.view(np.uint64)
        if np.any(w & ~(w >> np.uint64(8)) & low7):
            return True
        if w.shape[1] > 1 and np.any((w[:, :-1] >> np.uint64(56)) & ~w[:, 1:] & np.uint64(1)):
            return True
    return False


def check_ranges(ix: dict, cfg: SGRConfig, where: str) -> None:
    """Check, at every open, each id, pointer and sentinel the query kernels index with (vectorised passes).

    After :func:`check_structure` (dtypes, shapes, pointer ends, the O(V) tables): the support
    pointer is monotone and its term ids below V; memberships and postings name documents in
    [0, N); each code is its term ids then sentinels only (a code whose last slot holds a term
    holds no sentinel before it: the kernel's unrolled path relies on it); no document has more than ``n_memberships``
    memberships (the query scratch holds that many per document); lengths are finite and
    non-negative.  Blocked, so the temporaries stay bounded on a large index.
    """
    V = ix["idf"].shape[0]
    N = ix["dl"].shape[0]
    s = ix["s_indptr"]
    if np.any(s[1:] < s[:-1]):  # (not np.diff: it wraps around on uint32)
        raise _bad(where, "s_indptr", "must be non-decreasing")
    if ix["s_idx"].size and int(ix["s_idx"].max()) >= V:
        raise _bad(where, "s_idx", f"holds ids outside [0, {V})")
    _ids_in(ix, "mem_doc", N, where)
    if cfg.postings:
        _check_postings(ix, N, where)
    dl = ix["dl"]
    if dl.dtype.kind == "f" and dl.size:
        if not np.isfinite(dl).all():
            raise _bad(where, "dl", "contains NaN or inf")
        if dl.min() < 0:
            raise _bad(where, "dl", "holds negative lengths")
    if _term_after_sentinel(ix["code_term"], V):
        raise _bad(where, "code_term", "holds a term id after a sentinel (a code is its terms, then sentinels)")
    md = ix["mem_doc"]
    per_doc = np.zeros(N, np.int64)
    for lo in range(0, md.shape[0], _ROWS * 16):
        per_doc += np.bincount(md[lo : lo + _ROWS * 16], minlength=N)
    if per_doc.size and per_doc.max() > cfg.n_memberships:
        raise _bad(
            where,
            "mem_doc",
            f"gives a document {int(per_doc.max())} memberships, but params n_memberships = {cfg.n_memberships}",
        )


def _check_postings(ix: dict, N: int, where: str) -> None:
    """Check the compressed postings: every term decodes to its ``df`` ascending documents in [0, N); frequencies.

    After :func:`check_structure` (pointers from 0 to the lengths, non-decreasing).  A zero
    ``t_tfq`` entry is a frequency kept in ``t_xval``: ``t_xpos`` must list exactly those
    positions, ascending, so the kernels' look-up always finds its entry.
    """
    t_indptr = np.ascontiguousarray(ix["t_indptr"], np.int64)
    bad = int(_kp.check_postings(t_indptr, np.ascontiguousarray(ix["t_off"], np.int64), ix["t_code"], N))
    if bad >= 0:
        df = int(t_indptr[bad + 1] - t_indptr[bad])
        what = f"does not decode to the {df} ascending documents in [0, {N}) of term {bad}"
        # the damage may sit in any of the three: name the pointers too
        raise _bad(where, "t_code", f"{what} (its bytes as t_off.npy delimits them, its count from t_indptr.npy)")
    xpos, tfq = ix["t_xpos"], ix["t_tfq"]
    nnz = tfq.shape[0]
    n_zero = 0
    for lo in range(0, nnz, _ROWS * 16):
        n_zero += int(np.count_nonzero(tfq[lo : lo + _ROWS * 16] == 0))
    if xpos.size and (int(xpos[0]) < 0 or int(xpos[-1]) >= nnz or np.any(xpos[1:] <= xpos[:-1])):
        raise _bad(where, "t_xpos", f"must hold ascending posting positions in [0, {nnz})")
    if n_zero != xpos.shape[0] or (xpos.size and np.any(tfq[xpos] != 0)):
        raise _bad(where, "t_xpos", "must list exactly the postings whose t_tfq entry (t_tfq.npy) is 0")


def _check_full(ix: dict, cfg: SGRConfig, where: str) -> None:
    """Check the rest of the format, after :func:`check_ranges` (``verify``, in-memory loads, ``--check``).

    Values finite; code slots hold term ids or the sentinel (the dtype's largest value); the
    document frequencies ``t_indptr`` equal those of the support (``s_idx``).  (The order of
    entries within a row is not checked: the query kernels' safety does not depend on it.)
    """
    V = ix["idf"].shape[0]
    for k in ("mem_m", "t_xval"):
        if k in ix and ix[k].size and not np.isfinite(ix[k]).all():
            raise _bad(where, k, "contains NaN or inf")
    ct = ix["code_term"]
    top = np.iinfo(ct.dtype).max
    for lo in range(0, ct.shape[0], _ROWS):
        blk = ct[lo : lo + _ROWS]
        if np.any((blk >= V) & (blk != top)):
            raise _bad(where, "code_term", f"holds ids outside [0, {V}) other than the sentinel {top}")
    df = np.zeros(V, np.int64)
    si = ix["s_idx"]
    for lo in range(0, si.shape[0], _ROWS * 16):
        df += np.bincount(si[lo : lo + _ROWS * 16], minlength=V)
    if not np.array_equal(df, np.diff(ix["t_indptr"])):
        raise _bad(where, "t_indptr", "does not hold the document frequencies of the support (s_idx)")
