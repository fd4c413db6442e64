"""Pruning of old kernel-cache folders (jkofast._cache_prune): the rule, its limits, and its hook in a real process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from jkofast import _cache_prune as cp

DAY = 86400.0
NOW = 2_000_000_000.0
TAG_NEW = "0123456789abcdef-numba0.68.1-llvmlite0.50.0"
TAG_OLD = "fedcba9876543210-numba0.68.1-llvmlite0.50.0"
TAG_OTHER = "00000000aaaaaaaa-numba0.67.0-llvmlite0.49.0"


def _folder(root, tag, age_days, stamp=True, extra=None, now=NOW):
    """A cache folder ``root/tag`` with one index and data file, last used ``age_days`` before ``now``."""
    d = root / tag / "kernels" / "ot"
    d.mkdir(parents=True)
    t = now - age_days * DAY
    for name in ("f-1.py312.nbi", "f-1.py312.abc.nbc"):
        (d / name).write_bytes(b"x")
        os.utime(d / name, (t, t))
    if stamp:
        (root / tag / cp.STAMP).touch()
        os.utime(root / tag / cp.STAMP, (t, t))
    if extra:
        (d / extra).write_text("mine")
    return root / tag


def test_prune_removes_only_old_cache_folders_of_other_sources(tmp_path):
    _folder(tmp_path, TAG_NEW, 100)  # the current folder: kept whatever its age
    _folder(tmp_path, TAG_OLD, 31)  # unused for 31 days: removed
    _folder(tmp_path, TAG_OTHER, 29)  # used 29 days ago: kept
    old_nostamp = _folder(tmp_path, "1111111111111111-numba0.60.0-llvmlite0.43.0", 40, stamp=False)
    user = _folder(tmp_path, "2222222222222222-numba0.60.0-llvmlite0.43.0", 40, extra="notes.txt")
    (tmp_path / "not-a-tag").mkdir()  # another form: never touched
    os.utime(tmp_path / "not-a-tag", (0, 0))
    removed = cp.prune(str(tmp_path), TAG_NEW, 30, now=NOW)
    assert removed == sorted([TAG_OLD, old_nostamp.name])
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([TAG_NEW, TAG_OTHER, user.name, "not-a-tag"])


def test_last_use_without_stamp_is_the_newest_file(tmp_path):
    f = _folder(tmp_path, TAG_OLD, 40, stamp=False)
    newest = f / "kernels" / "ot" / "g-2.py312.nbi"
    newest.write_bytes(b"x")
    os.utime(newest, (NOW - 2 * DAY, NOW - 2 * DAY))
    for d in (f, f / "kernels", f / "kernels" / "ot"):
        os.utime(d, (NOW - 50 * DAY, NOW - 50 * DAY))
    assert cp.last_use(str(f)) == pytest.approx(NOW - 2 * DAY)
    assert cp.prune(str(tmp_path), TAG_NEW, 30, now=NOW) == []


def test_keep_days_zero_never_prunes(tmp_path, monkeypatch):
    _folder(tmp_path, TAG_OLD, 1000)
    assert cp.prune(str(tmp_path), TAG_NEW, 0, now=NOW) == []
    monkeypatch.setenv("JKOFAST_CACHE_KEEP_DAYS", "0")
    assert cp.keep_days() == 0
    assert cp.mark_used(str(tmp_path), TAG_NEW, now=NOW) == []
    assert (tmp_path / TAG_OLD).is_dir()
    for raw, want in (("", 30.0), ("7", 7.0), ("-3", 0.0), ("soon", 30.0)):
        monkeypatch.setenv("JKOFAST_CACHE_KEEP_DAYS", raw)
        assert cp.keep_days() == want


def test_mark_used_stamps_at_most_daily_and_prunes_when_it_does(tmp_path, monkeypatch):
    monkeypatch.delenv("JKOFAST_CACHE_KEEP_DAYS", raising=False)
    _folder(tmp_path, TAG_OLD, 31)
    assert cp.mark_used(str(tmp_path), TAG_NEW, now=NOW) == [TAG_OLD]
    stamp = tmp_path / TAG_NEW / cp.STAMP
    assert stamp.stat().st_mtime == NOW
    _folder(tmp_path, TAG_OTHER, 31)
    # within a day of the last stamp: no write, no pruning
    assert cp.mark_used(str(tmp_path), TAG_NEW, now=NOW + 0.5 * DAY) == []
    assert stamp.stat().st_mtime == NOW and (tmp_path / TAG_OTHER).is_dir()
    assert cp.mark_used(str(tmp_path), TAG_NEW, now=NOW + 1.5 * DAY) == [TAG_OTHER]
    assert stamp.stat().st_mtime == NOW + 1.5 * DAY


def test_mark_used_never_raises_on_a_read_only_cache(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache folder should be")
    assert cp.mark_used(str(blocker), TAG_NEW) == []


def test_clear_still_removes_a_stamped_folder(tmp_path, monkeypatch):
    from jkofast import _config
    from jkofast.warmups import clear_cache

    _folder(tmp_path, TAG_OLD, 0)
    monkeypatch.setattr(_config, "CACHE_DIR", str(tmp_path))
    root, n = clear_cache()
    assert root == str(tmp_path) and n == 3 and not (tmp_path / TAG_OLD).exists()


def test_a_process_using_the_cache_stamps_its_folder_and_prunes_an_old_one(tmp_path):
    """A real process importing kernels writes its stamp and removes a 31-day-old folder of other sources."""
    _folder(tmp_path, TAG_OLD, 31, now=time.time())
    env = dict(os.environ, JKOFAST_CACHE_DIR=str(tmp_path), JKOFAST_NUMBA_CACHE="1")
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("JKOFAST_CACHE_KEEP_DAYS", None)
    code = "import jkofast.kernels.topk, jkofast._numba as n; print(n.cache_tag())"
    tag = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    tag = tag.stdout.strip()
    assert (tmp_path / tag / cp.STAMP).is_file()
    assert not (tmp_path / TAG_OLD).exists()
