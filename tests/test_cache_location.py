"""Compiled kernels are cached outside the installed package (jkofast's cache folder, or NUMBA_CACHE_DIR)."""

import os
import pathlib
import subprocess
import sys

PKG = pathlib.Path(__file__).resolve().parents[1] / "jkofast"
CODE = "import numpy as np\nfrom jkofast.jko.energy import minmax\nminmax(np.array([1.0, 2.0, 4.0]))\n"


def _run(env_extra: dict) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "JKOFAST_CACHE_DIR")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr


def _package_cache_files() -> set:
    return {str(p) for p in PKG.rglob("*.nbi")} | {str(p) for p in PKG.rglob("*.nbc")}


def test_default_cache_is_jkofast_cache_dir_not_the_package(tmp_path):
    before = _package_cache_files()
    _run({"JKOFAST_CACHE_DIR": str(tmp_path / "jk")})
    files = list((tmp_path / "jk").rglob("*minmax_segments*.nbi"))
    assert files, "the kernel was not cached in JKOFAST_CACHE_DIR"
    assert _package_cache_files() <= before  # nothing new inside jkofast/


def test_numba_cache_dir_wins(tmp_path):
    _run({"JKOFAST_CACHE_DIR": str(tmp_path / "jk"), "NUMBA_CACHE_DIR": str(tmp_path / "nb")})
    assert list((tmp_path / "nb").rglob("*minmax_segments*.nbi"))
    assert not (tmp_path / "jk").exists()


def test_xdg_cache_home_is_the_default_root(tmp_path):
    _run({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert list((tmp_path / "xdg" / "jkofast" / "numba").rglob("*.nbi"))
