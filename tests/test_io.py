"""jkofast._io: every write is atomic (old file or new file, never a partial one), outputs are checked before work."""

import hashlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from jkofast._io import (
    atomic_open,
    atomic_save_npy,
    atomic_write_json,
    check_writable,
    check_writable_dir,
    file_sha256,
    load_array,
)

OLD, NEW = b"old contents\n" * 1000, b"new contents, longer\n" * 200_000


@pytest.mark.parametrize("fail_after", [0, 1, 100, 10_000])
def test_an_exception_at_any_point_leaves_the_old_file(tmp_path, fail_after):
    p = tmp_path / "f.bin"
    p.write_bytes(OLD)
    with pytest.raises(RuntimeError), atomic_open(p) as fh:
        fh.write(NEW[:fail_after])
        raise RuntimeError("interrupted")
    assert p.read_bytes() == OLD
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]  # the temporary file is removed


_WRITER = """
import sys
from jkofast._io import atomic_open
new = b"new contents, longer\\n" * 200_000
with atomic_open(sys.argv[1]) as fh:
    for i in range(0, len(new), 4096):
        fh.write(new[i : i + 4096])
        fh.flush()
"""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.4])
def test_a_killed_writer_leaves_the_old_file_or_the_new_one(tmp_path, delay):
    """kill -9 at some point of the write: the target holds exactly the old or exactly the new bytes."""
    p = tmp_path / "f.bin"
    p.write_bytes(OLD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(p)], env=env)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert p.read_bytes() in (OLD, NEW)


def test_helpers_write_readable_files(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    atomic_save_npy(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(load_array(tmp_path / "a.npy", ndim=2), a)
    atomic_write_json(tmp_path / "m.json", {"x": 1})
    assert (tmp_path / "m.json").read_text() == '{"x": 1}'
    assert file_sha256(tmp_path / "m.json") == hashlib.sha256((tmp_path / "m.json").read_bytes()).hexdigest()


def test_outputs_are_checked_before_work(tmp_path):
    assert check_writable(tmp_path / "out.txt", "--out") == str(tmp_path / "out.txt")
    with pytest.raises(ValueError, match=r"--out: .* is a folder"):
        check_writable(tmp_path, "--out")
    with pytest.raises(ValueError, match=r"--out: folder .* does not exist"):
        check_writable(tmp_path / "no" / "out.txt", "--out")
    d = check_writable_dir(tmp_path / "new" / "dir", "--runs")
    assert os.path.isdir(d) and os.listdir(d) == []  # created, the probe removed
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"--runs: .* exists and is not a folder"):
        check_writable_dir(tmp_path / "file", "--runs")
    with pytest.raises(ValueError, match="--runs: cannot create folder"):
        check_writable_dir("/proc/no/such/folder", "--runs")
