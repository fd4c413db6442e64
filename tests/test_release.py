"""The release artefacts: the wheel and sdist build, pass ``twine check``, and the wheel holds exactly the package.

Built without build isolation from a copy of the tracked files (so nothing is written into the checkout).
"""

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import jkofast

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tracked_copy(dst):
    if shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout: the tracked files are unknown")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):
            os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dst, rel))
    return dst


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    pytest.importorskip("build", reason='the release check needs pip install "jkofast[docs]" (build, twine)')
    src = _tracked_copy(str(tmp_path_factory.mktemp("src")))
    out = str(tmp_path_factory.mktemp("dist"))
    r = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    names = sorted(os.listdir(out))
    assert len(names) == 2, names
    return src, out, names


def test_twine_check_passes(dist):
    pytest.importorskip("twine", reason='the release check needs pip install "jkofast[docs]" (build, twine)')
    _, out, names = dist
    r = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *(os.path.join(out, n) for n in names)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_wheel_holds_the_package_its_data_and_licences_only(dist):
    src, out, names = dist
    whl = next(n for n in names if n.endswith(".whl"))
    assert whl == f"jkofast-{jkofast.__version__}-py3-none-any.whl"
    info = f"jkofast-{jkofast.__version__}.dist-info"
    got = set(zipfile.ZipFile(os.path.join(out, whl)).namelist())
    # nothing outside the package and its metadata: no tests, benchmarks, build folders
    assert {n.split("/")[0] for n in got} == {"jkofast", info}
    assert not [n for n in got if "__pycache__" in n or n.endswith((".pyc", ".nbi", ".nbc")) or "/.tmp-" in n]
    # every tracked file of the package is in it, data included
    tracked = set()
    for d, _, files in os.walk(os.path.join(src, "jkofast")):
        for f in files:
            tracked.add(os.path.relpath(os.path.join(d, f), src).replace(os.sep, "/"))
    assert tracked - got == set()
    assert got - tracked - {n for n in got if n.startswith(info + "/")} == set()
    for must in (
        "jkofast/py.typed",
        "jkofast/datasets/NOTICE.md",
        "jkofast/datasets/scifact/corpus.jsonl.gz",
        "jkofast/datasets/scifact/README.md",
        "jkofast/datasets/reference/jko_reference_scifact30.npz",
        f"{info}/licenses/LICENSE",
        f"{info}/licenses/jkofast/datasets/NOTICE.md",
    ):
        assert must in got, must
    meta = zipfile.ZipFile(os.path.join(out, whl)).read(f"{info}/METADATA").decode()
    assert f"Version: {jkofast.__version__}" in meta
    assert "License-Expression: MIT" in meta


def test_sdist_builds_the_same_version(dist):
    _, out, names = dist
    sdist = next(n for n in names if n.endswith(".tar.gz"))
    assert sdist == f"jkofast-{jkofast.__version__}.tar.gz"
    with tarfile.open(os.path.join(out, sdist)) as tf:
        members = tf.getnames()
    top = f"jkofast-{jkofast.__version__}"
    for must in ("LICENSE", "README.md", "pyproject.toml", "jkofast/datasets/NOTICE.md", "jkofast/__init__.py"):
        assert f"{top}/{must}" in members, must
