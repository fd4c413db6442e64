"""Prune the kernel cache: remove the folders of other kernel sources that no install has used for a while.

The cache folder (``JKOFAST_CACHE_DIR``, ``~/.cache/jkofast/numba`` by default) holds one folder per
version of the kernel sources and of Numba and llvmlite (``jkofast._numba.cache_tag``:
``<16 hex digits>-numba<version>-llvmlite<version>``). Each upgrade or edited checkout adds one
(~12 MB for the main job); nothing removed the old ones but ``jkofast warmup --clear``.

The rule:

* a process that uses the cache (its first kernel, compiled or loaded) refreshes the time stamp of
  its own folder (the file ``last-used`` in it) when that stamp is more than a day old — at most
  one small write per folder and day;
* when it refreshes the stamp, it removes every *other* folder whose name has the cache folder's
  form, that holds only cache files, and whose last use is more than ``JKOFAST_CACHE_KEEP_DAYS``
  days ago (default 30; ``0`` never prunes). A folder's last use is its stamp's time, or, for a
  folder without one (written by an older jkofast), the newest time of any file in it.

So an install that is used at least once a month keeps its compiled kernels, whatever other
installs do; a folder that no install has touched for a month goes. Folders of another form
(``NUMBA_CACHE_DIR`` layouts, a user's files) are never touched.

This module is imported by name (``importlib``) from ``jkofast._numba``, not with an import line,
so it stays out of the kernel-sources digest: editing it recompiles nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import time

__all__ = ["KEEP_DAYS", "STAMP", "TAG_RE", "keep_days", "last_use", "mark_used", "only_cache_files", "prune"]

STAMP = "last-used"  # the time stamp file in each cache folder
KEEP_DAYS = 30.0  # default of JKOFAST_CACHE_KEEP_DAYS
TAG_RE = re.compile(r"^[0-9a-f]{16}-numba[^/\\]+-llvmlite[^/\\]+$")
_DAY = 86400.0
_CACHE_SUFFIXES = (".nbi", ".nbc", ".lock")


def keep_days() -> float:
    """Return ``JKOFAST_CACHE_KEEP_DAYS`` (days an unused folder is kept; 0 = never prune); default 30."""
    raw = os.environ.get("JKOFAST_CACHE_KEEP_DAYS", "").strip()
    try:
        days = float(raw) if raw else KEEP_DAYS
    except ValueError:
        return KEEP_DAYS
    return max(days, 0.0)


def only_cache_files(folder: str) -> bool:
    """Whether every file under ``folder`` is a Numba index / data file, a lock, a temporary of one or the stamp."""
    return all(
        f.endswith(_CACHE_SUFFIXES) or ".nbi.tmp." in f or ".nbc.tmp." in f or f == STAMP
        for _, _, files in os.walk(folder)
        for f in files
    )


def last_use(folder: str) -> float:
    """Return the time ``folder`` was last used: its stamp's mtime, else the newest mtime inside it (or its own)."""
    try:
        return os.stat(os.path.join(folder, STAMP)).st_mtime
    except OSError:
        pass
    newest = 0.0
    for base, _, files in os.walk(folder):
        for f in (base, *(os.path.join(base, f) for f in files)):
            try:
                newest = max(newest, os.stat(f).st_mtime)
            except OSError:  # removed meanwhile
                pass
    return newest


def prune(root: str, keep: str, days: float, now: float | None = None) -> list[str]:
    """Remove the cache folders under ``root`` other than ``keep`` unused for more than ``days`` days.

    Only sub-folders whose name has the cache folder's form (:data:`TAG_RE`) and that hold only
    cache files are candidates; ``days`` <= 0 removes nothing. Returns the names removed.
    """
    if days <= 0 or not os.path.isdir(root):
        return []
    now = time.time() if now is None else now
    removed = []
    for entry in os.scandir(root):
        if entry.name == keep or not TAG_RE.match(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        if now - last_use(entry.path) > days * _DAY and only_cache_files(entry.path):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
    return sorted(removed)


def mark_used(root: str, tag: str, now: float | None = None) -> list[str]:
    """Refresh ``root/tag``'s stamp if it is more than a day old, and then prune the others (:func:`prune`).

    Returns the folders removed. Never raises for a file-system error (a read-only cache, a race
    with another process): pruning is housekeeping, never a reason for a command to fail.
    """
    now = time.time() if now is None else now
    stamp = os.path.join(root, tag, STAMP)
    try:
        if now - os.stat(stamp).st_mtime < _DAY:
            return []
    except OSError:
        pass
    try:
        os.makedirs(os.path.dirname(stamp), exist_ok=True)
        with open(stamp, "a"):
            pass
        os.utime(stamp, (now, now))
        return prune(root, tag, keep_days(), now)
    except OSError:
        return []
