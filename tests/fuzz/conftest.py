"""Fuzz-suite setup: the folders Hypothesis examples create live under one session folder, removed at the end."""

from __future__ import annotations

import shutil
import tempfile

import pytest


@pytest.fixture(scope="session", autouse=True)
def _fuzz_scratch(tmp_path_factory):
    """Point ``tempfile`` at a session folder while the fuzz tests run, then delete it.

    The examples call ``tempfile.mkdtemp`` (a function-scoped ``tmp_path`` cannot serve many
    examples of one test); without this, thousands of folders would stay behind in the system's
    temporary folder after every run.
    """
    root = tmp_path_factory.mktemp("fuzz")
    before = tempfile.tempdir
    tempfile.tempdir = str(root)
    try:
        yield root
    finally:
        tempfile.tempdir = before
        shutil.rmtree(root, ignore_errors=True)
