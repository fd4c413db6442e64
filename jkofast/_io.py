"""Crash-safe file writing: every file jkofast writes goes through :func:`atomic_open`.

A write goes to a temporary file in the target's folder, is flushed (and fsynced unless the
caller opts out), then renamed over the target with ``os.replace``.  An interrupted write
therefore leaves either the old file or the new one, never a partial file; a failed block
removes its temporary file.  The helpers below wrap the common payloads (``.npy`` arrays,
``.npz`` archives, text and JSON) on top of it.

:func:`check_writable` checks an output path before any computation, so a long job never
computes a result it cannot save.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid

import numpy as np

__all__ = [
    "atomic_open",
    "atomic_save_npy",
    "atomic_save_npz",
    "atomic_write_json",
    "atomic_write_text",
    "check_writable",
    "check_writable_dir",
    "file_sha256",
    "load_array",
]


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
    probe = os.path.join(d, f".probe-{os.getpid()}-{uuid.uuid4().hex}")
    try:
        with open(probe, "xb"):
            pass
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"{name}: cannot write in {d!r} ({e.strerror or e})") from None
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
    probe = os.path.join(p, f".probe-{os.getpid()}-{uuid.uuid4().hex}")
    try:
        with open(probe, "xb"):
            pass
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"{name}: cannot write in {p!r} ({e.strerror or e})") from None
    return p


def file_sha256(path, block: int = 1 << 20) -> str:
    """SHA-256 (hex) of a file's bytes, read in blocks: what a resumable job keys its saved parts by."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(block)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()
