"""Test helper: open indexes as if every large file's verification stamp matched (jkofast._io.STAMP_FILE)."""

from __future__ import annotations

import jkofast._io as _io


def trust_stamps(monkeypatch, mod) -> None:
    """Make ``mod`` (``jkofast.sgr._persist`` or ``jkofast.sparse.index``) trust every large file at a mapped
    open, as when its stamp matches: only the range checks stand between a changed file and a kernel.

    A changed file always changes its stat, so this is the only way to exercise those checks alone.
    """
    real = _io.verify_file_records

    def trusted(folder, files, *, checksums, full, small):
        small_files = {n: r for n, r in files.items() if r["bytes"] <= small}
        real(folder, files, checksums=False, full=full, small=small)  # presence and sizes
        real(folder, small_files, checksums=checksums, full=full, small=small)
        if full:
            real(folder, files, checksums=checksums, full=True, small=small)

    monkeypatch.setattr(mod, "verify_file_records", trusted)
