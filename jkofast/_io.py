"""Crash-safe file writing: every file jkofast writes goes through :func:`atomic_open`.

A write goes to a temporary file in the target's folder, is flushed (and fsynced unless the
caller opts out), then renamed over the target with ``os.replace``.  An interrupted write
therefore leaves either the old file or the new one, never a partial file; a failed block
removes its temporary file.  The helpers below wrap the common payloads (``.npy`` arrays,
``.npz`` archives, text and JSON) on top of it.

:func:`check_writable` checks an output path before any computation, so a long job never
computes a result it cannot save.

Index folders record what they hold so that damage is found, not trusted (as Lucene's
CheckIndex does): :func:`file_record` gives a file's size and CRC32 (:func:`crc32_file`, read
in blocks), :func:`atomic_write_manifest` writes a JSON manifest whose last field is the CRC32
of every byte before it, and :func:`read_manifest` reads one back, refusing a manifest whose
bytes changed since it was written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import uuid
import zlib

import numpy as np

__all__ = [
    "MANIFEST_CHECKSUM_KEY",
    "IndexDamage",
    "atomic_open",
    "atomic_save_npy",
    "atomic_save_npz",
    "atomic_write_json",
    "atomic_write_manifest",
    "atomic_write_text",
    "check_file_record",
    "check_file_records",
    "check_writable",
    "check_writable_dir",
    "crc32_file",
    "file_record",
    "file_report",
    "file_sha256",
    "load_array",
    "read_manifest",
]

# the last field of a manifest written by atomic_write_manifest: the CRC32 of every byte before it
MANIFEST_CHECKSUM_KEY = "manifest_crc32"
_MARK = b', "' + MANIFEST_CHECKSUM_KEY.encode() + b'": "'
_BLOCK = 1 << 22  # bytes read per step of crc32_file


@contextlib.contextmanager
def atomic_open(path, *, fsync: bool = True):
    r"""Write ``path`` atomically: yield a binary handle on a temporary file beside it.

    The temporary file (an exclusive create, so it gets the umask's mode, not mkstemp's 0600)
    is flushed, optionally fsynced and renamed over ``path`` (``os.replace``) when the block
    succeeds, and removed when it raises; ``path`` is then untouched.  The bytes are written
    as given (no compression by suffix: callers wrap the handle, as :func:`jkofast.eval.trec.write_run`
    does for ``.gz``).

    Parameters
    ----------
    path : str or os.PathLike
        The target file; its folder must exist.
    fsync : bool
        Flush the data to disk before the rename (a resumable job relies on it).

    Examples
    --------
    >>> import tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "x.txt")
    >>> with atomic_open(p) as fh:
    ...     _ = fh.write(b"done\n")
    >>> open(p).read()
    'done\n'
    """
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, f".tmp-{os.getpid()}-{uuid.uuid4().hex}-{os.path.basename(path)}")
    try:
        with open(tmp, "xb") as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_save_npy(path, arr, *, fsync: bool = True) -> None:
    """Save one array as ``.npy`` at exactly ``path`` (no suffix added), atomically."""
    with atomic_open(path, fsync=fsync) as fh:
        np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)


def atomic_save_npz(path, *, compressed: bool = False, fsync: bool = True, **arrays) -> None:
    """Save named arrays as an ``.npz`` archive at exactly ``path``, atomically."""
    with atomic_open(path, fsync=fsync) as fh:
        (np.savez_compressed if compressed else np.savez)(fh, **arrays)


def atomic_write_text(path, text: str, *, fsync: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path, fsync=fsync) as fh:
        fh.write(text.encode("utf-8"))


def atomic_write_json(path, obj, *, fsync: bool = True, **dump_kw) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (``dump_kw`` go to :func:`json.dumps`)."""
    atomic_write_text(path, json.dumps(obj, **dump_kw), fsync=fsync)


def load_array(path, *, mmap: bool = False, kinds: str = "biuf", ndim: int | None = None, what: str | None = None):
    """Read one ``.npy`` file as untrusted input; any failure is a ``ValueError`` naming the file.

    numpy's own errors for a damaged file (a zeroed or truncated header, data shorter than the
    header says, an object array) say neither which file nor what to do; this reads the header,
    checks the dtype kind (``kinds``: numpy kind letters, default bool/int/uint/float) and the
    number of dimensions, then the data (memory-mapped with ``mmap``).

    Parameters
    ----------
    path : str or os.PathLike
    mmap : bool
        Map the data read-only instead of reading it.
    kinds : str
        Accepted ``dtype.kind`` letters.
    ndim : int, optional
        Required number of dimensions.
    what : str, optional
        How messages name the file (default: its path).
    """
    p = os.fspath(path)
    name = what or p
    if not os.path.isfile(p):
        raise ValueError(f"{name}: missing ({p!r} is not a file)")
    try:
        with open(p, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(fh)
            offset = fh.tell()
    except Exception as exc:  # numpy raises ValueError, EOFError, SyntaxError or UnicodeDecodeError here
        raise ValueError(f"{name}: not a readable .npy file (damaged header: {exc})") from None
    if dtype.hasobject or dtype.kind not in kinds:
        raise ValueError(f"{name}: unexpected dtype {dtype} (kind {dtype.kind!r} not in {kinds!r})")
    if ndim is not None and len(shape) != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {shape}")
    need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = os.path.getsize(p)
    if size < need:
        raise ValueError(f"{name}: truncated ({size} bytes, its header needs {need})")
    try:
        return np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
    except Exception as exc:  # anything numpy raises on a file that passed the checks above
        raise ValueError(f"{name}: not a readable .npy file ({exc})") from None


def check_writable(path, name: str) -> str:
    """Check before any work that ``path`` can be created or replaced; return it as ``str``.

    The folder must exist and accept a new file (probed by creating and removing a temporary
    file there), and ``path`` must not be a folder.  Raises ``ValueError`` naming ``name``.
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        raise ValueError(f"{name}: {p!r} is a folder, not a file")
    d = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(d):
        raise ValueError(f"{name}: folder {d!r} does not exist")
    _probe_folder(d, name)
    return p


def check_writable_dir(path, name: str, *, create: bool = True) -> str:
    """Check before any work that folder ``path`` exists (or can be created) and accepts new files.

    ``create`` makes the folder (and its parents) now, so a path that cannot be made fails before
    the computation rather than after it.  Raises ``ValueError`` naming ``name``; returns ``path``.
    """
    p = os.fspath(path)
    if os.path.exists(p) and not os.path.isdir(p):
        raise ValueError(f"{name}: {p!r} exists and is not a folder")
    if create:
        try:
            os.makedirs(p, exist_ok=True)
        except OSError as e:
            raise ValueError(f"{name}: cannot create folder {p!r} ({e.strerror or e})") from None
    elif not os.path.isdir(p):
        raise ValueError(f"{name}: folder {p!r} does not exist")
    _probe_folder(p, name)
    return p


def _probe_folder(d: str, name: str) -> None:
    """Create and remove a temporary file in folder ``d``; a ``ValueError`` naming ``name`` when it fails."""
    probe = os.path.join(d, f".probe-{os.getpid()}-{uuid.uuid4().hex}")
    try:
        with open(probe, "xb"):
            pass
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"{name}: cannot write in {d!r} ({e.strerror or e})") from None


def file_sha256(path, block: int = 1 << 20) -> str:
    """SHA-256 (hex) of a file's bytes, read in blocks: what a resumable job keys its saved parts by."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(block)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


class IndexDamage(ValueError):
    """A damaged or inconsistent file of an index folder.

    ``file`` names it (the file name inside the folder; ``None`` when no one file is to blame)
    and ``what`` says what is wrong with it (the message without the path).
    """

    def __init__(self, message: str, file: str | None = None, what: str | None = None):
        super().__init__(message)
        self.file = file
        self.what = what


def check_file_record(folder, name: str, rec: dict, *, checksum: bool) -> None:
    """Check file ``name`` of ``folder`` against its manifest record ``{"bytes", "crc32"}``.

    Raises :class:`IndexDamage` naming the file when it is missing, of another size, or (when
    ``checksum``) of another CRC32 than recorded.
    """
    f = os.path.join(os.fspath(folder), name)
    if not os.path.isfile(f):
        raise IndexDamage(f"{f}: missing (the manifest records it)", name, "missing (the manifest records it)")
    size = os.path.getsize(f)
    if size != rec["bytes"]:
        what = f"has {size} bytes, the manifest records {rec['bytes']} (truncated, extended or replaced)"
        raise IndexDamage(f"{f}: {what}", name, what)
    if checksum:
        got = f"{crc32_file(f):08x}"
        if got != rec["crc32"]:
            what = f"checksum mismatch (CRC32 {got}, the manifest records {rec['crc32']}): changed after it was written"
            raise IndexDamage(f"{f}: {what}", name, what)


# The verification stamp of an index folder (``verified.json``): for each large file whose CRC32 was
# verified, the file's size, modification and change times (ns), inode and device, and that CRC32.
# An open with ``mmap`` trusts a large file whose stamp matches its stat and its manifest record and
# verifies (then stamps) any other -- so an edited or replaced file is checked once before it is used,
# and an untouched index opens without reading its large files.
STAMP_FILE = "verified.json"
# a file changed within this long of its verification is not stamped: a write in the same clock tick
# as the verification could leave the stat unchanged (git's "racily clean" rule); it is verified again
RACY_NS = 2_000_000_000


def _stat_key(st) -> list:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _read_stamps(folder: str) -> dict:
    try:
        with open(os.path.join(folder, STAMP_FILE), encoding="utf-8") as fh:
            stamps = json.load(fh)
    except (OSError, ValueError):
        return {}
    return stamps if isinstance(stamps, dict) else {}


def verify_file_records(folder, files: dict, *, checksums: bool, full: bool, small: int) -> None:
    """Check each file of ``folder`` against its manifest record, by the verification stamp.

    Every file: present, of the recorded size.  CRC32 (when ``checksums``): every file when ``full``;
    else the files up to ``small`` bytes, and each larger one whose stamp (:data:`STAMP_FILE`) does not
    match its stat and record.  The large files verified now are stamped (best effort: a read-only
    folder is verified again at the next open).

    Raises
    ------
    IndexDamage
        As :func:`check_file_record`, naming the first bad file.
    """
    folder = os.fspath(folder)
    stamps = _read_stamps(folder)
    t0 = time.time_ns()
    keep, fresh = {}, {}
    for name, rec in files.items():
        try:
            st = os.stat(os.path.join(folder, name))
        except OSError:
            st = None
        stamp = stamps.get(name)
        trusted = st is not None and stamp == [*_stat_key(st), rec["crc32"]]
        verify = checksums and (full or rec["bytes"] <= small or not trusted)
        check_file_record(folder, name, rec, checksum=verify)
        if rec["bytes"] <= small or not checksums:
            continue
        if not verify:
            keep[name] = stamp
            continue
        after = os.stat(os.path.join(folder, name))
        if _stat_key(after) == _stat_key(st) and max(after.st_mtime_ns, after.st_ctime_ns) < t0 - RACY_NS:
            fresh[name] = [*_stat_key(after), rec["crc32"]]
    if fresh and os.access(folder, os.W_OK):
        with contextlib.suppress(OSError):
            atomic_write_json(os.path.join(folder, STAMP_FILE), {**keep, **fresh}, fsync=False)


def check_file_records(files, where: str) -> None:
    """Check that ``files`` is a manifest's ``{name: {"bytes": int, "crc32": str}}`` of plain file names."""
    if not isinstance(files, dict):
        raise ValueError(f"{where}: files must be an object (the recorded size and CRC32 of each file)")
    for name, rec in files.items():
        if (
            not isinstance(rec, dict)
            or isinstance(rec.get("bytes"), bool)
            or not isinstance(rec.get("bytes"), int)
            or not isinstance(rec.get("crc32"), str)
            or os.path.basename(name) != name
            or name in ("", ".", "..")
        ):
            raise ValueError(f"{where}: files.{name} must be {{'bytes': int, 'crc32': str}} of a file in the folder")


def crc32_file(path, *, block_size: int = _BLOCK) -> int:
    """Return the CRC32 (``zlib.crc32``) of the whole file ``path``, read in blocks of ``block_size`` bytes."""
    crc = 0
    with open(os.fspath(path), "rb", buffering=0) as fh:
        buf = bytearray(block_size)
        view = memoryview(buf)
        while True:
            n = fh.readinto(buf)
            if not n:
                return crc
            crc = zlib.crc32(view[:n], crc)


def file_record(path) -> dict:
    """Return ``{"bytes": size, "crc32": "8 hex digits"}`` of file ``path`` (what an index manifest records)."""
    p = os.fspath(path)
    return {"bytes": int(os.path.getsize(p)), "crc32": f"{crc32_file(p):08x}"}


def atomic_write_manifest(path, obj: dict, *, fsync: bool = True, **dump_kw) -> None:
    """Write the JSON object ``obj`` atomically, its last field the CRC32 of every byte before that field.

    The text is ``json.dumps(obj, **dump_kw)`` without its closing brace, then
    ``, "manifest_crc32": "<8 hex digits>"}`` and a newline; :func:`read_manifest` checks it.
    ``obj`` must be a non-empty dict without that key.
    """
    if not isinstance(obj, dict) or not obj or MANIFEST_CHECKSUM_KEY in obj:
        raise ValueError(f"a manifest must be a non-empty dict without {MANIFEST_CHECKSUM_KEY!r}")
    body = json.dumps(obj, **dump_kw).encode("utf-8")
    prefix = body[: body.rindex(b"}")].rstrip()
    text = prefix + _MARK + f"{zlib.crc32(prefix):08x}".encode() + b'"}\n'
    with atomic_open(path, fsync=fsync) as fh:
        fh.write(text)


def read_manifest(path, *, missing: str, invalid: str, precheck=None) -> tuple[dict, bool]:
    """Read a JSON manifest and check its own checksum; return ``(object, checksummed)``.

    ``checksummed`` is False for a manifest written without one (an index of an earlier
    version).  Raises ``ValueError``: ``missing`` when ``path`` is not a file, ``invalid`` (with
    the parser's message) when it is not a UTF-8 JSON object, and a message naming ``path`` when
    its bytes differ from those written (the recorded CRC32 does not match).  ``precheck(obj)``,
    when given, runs on the parsed object before the checksum is compared (a format check, so
    that a manifest of another format is named as such).
    """
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise ValueError(missing)
    with open(p, "rb") as fh:
        raw = fh.read()
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{invalid} ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{invalid} (expected a JSON object, got {type(obj).__name__})")
    if precheck is not None:
        precheck(obj)
    if MANIFEST_CHECKSUM_KEY not in obj:
        return obj, False
    at = raw.rfind(_MARK)
    got = obj[MANIFEST_CHECKSUM_KEY]
    if at < 0 or not isinstance(got, str) or got != f"{zlib.crc32(raw[:at]):08x}":
        raise ValueError(
            f"{p}: checksum mismatch (its bytes changed after it was written: the recorded "
            f"{MANIFEST_CHECKSUM_KEY} does not match; restore or rebuild the index)"
        )
    del obj[MANIFEST_CHECKSUM_KEY]
    return obj, True


def file_report(rep: dict, path: str, records: dict | None, names, open_full) -> dict:
    """Fill the per-file part of an index check report (``jkofast index --check``) and return ``rep``.

    With checksums (``records``: file name -> size and CRC32 record) every file is checked and every
    problem listed; without, the files ``names`` are listed as present or missing.  Then, when no file
    failed, ``open_full()`` opens the index with every structural check: its first violation is the
    report's ``error`` and ``bad_file``.  ``rep["ok"]`` is True when nothing failed.
    """
    first = None
    if records is not None:
        for name, rec in records.items():
            row = {"file": name, "bytes": rec["bytes"], "status": "ok"}
            try:
                check_file_record(path, name, rec, checksum=True)
            except IndexDamage as exc:
                row["status"] = exc.what
                first = first or exc
            rep["files"].append(row)
    else:
        for name in names:
            f = os.path.join(path, name)
            exists = os.path.isfile(f)
            rep["files"].append(
                {"file": name, "bytes": os.path.getsize(f) if exists else None,
                 "status": "no checksum recorded" if exists else "missing"}
            )  # fmt: skip
    if first is None:
        try:
            open_full()
        except IndexDamage as exc:
            first = exc
        except ValueError as exc:
            first = IndexDamage(str(exc))
        if first is not None:
            for row in rep["files"]:
                if row["file"] == first.file and row["status"] in ("ok", "no checksum recorded"):
                    row["status"] = first.what or str(first)
    if first is not None:
        rep.update(error=str(first), bad_file=first.file)
    else:
        rep["ok"] = True
    return rep
