"""Memory-mapped open of a saved SGR index: the usual open and the first open after files changed.

A mapped open trusts each large file whose verification stamp (``verified.json``) matches its ``stat``
and checksums any other (docs/integrity.md, "The verification stamp"). This script opens ``FOLDER`` with
``SparseGeometricRetriever.load(FOLDER, mmap=True)`` and reports, in wall milliseconds:

* the usual open (every stamp matches; median of ``--repeat``),
* the first open after the largest ``.npy`` file's times changed (``os.utime``: its stamp no longer
  matches, so it is checksummed once), and the open after it,
* the first open after every ``.npy`` file's times changed, and the open after it.

The files stay in the page cache between opens (no disk reads are timed). It changes the files' times,
never their bytes. Usage::

    python benchmarks/tools/sgr_scale.py --generate corpus.jsonl --passages 1000000
    jkofast index --method sgr --corpus corpus.jsonl --out idx --preset published --param postings=false
    python benchmarks/tools/stamp_open.py idx [--repeat 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from jkofast.sgr import SparseGeometricRetriever

RACY_S = 2.2  # a file changed within 2 s of its verification is not stamped: wait past it


def _open_ms(folder: str) -> float:
    t = time.perf_counter()
    r = SparseGeometricRetriever.load(folder, mmap=True)
    dt = time.perf_counter() - t
    del r
    return dt * 1e3


def _touch_and_open(folder: str, names: list[str]) -> tuple[float, float]:
    for name in names:
        os.utime(os.path.join(folder, name))
    time.sleep(RACY_S)
    return _open_ms(folder), _open_ms(folder)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="a saved SGR index folder")
    ap.add_argument("--repeat", type=int, default=5, help="usual opens timed (median; default 5)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    files = sorted(
        (os.path.getsize(os.path.join(args.folder, f)), f) for f in os.listdir(args.folder) if f.endswith(".npy")
    )
    if not files:
        ap.error(f"{args.folder}: no .npy files (not an SGR index folder)")
    _open_ms(args.folder)  # the first open verifies and stamps what it can
    time.sleep(RACY_S)
    _open_ms(args.folder)
    usual = statistics.median(_open_ms(args.folder) for _ in range(args.repeat))
    size, largest = files[-1]
    one, one_next = _touch_and_open(args.folder, [largest])
    every, every_next = _touch_and_open(args.folder, [f for _, f in files])
    out = {
        "folder": args.folder,
        "npy_files": len(files),
        "npy_mb": sum(s for s, _ in files) / 1e6,
        "largest": largest,
        "largest_mb": size / 1e6,
        "usual_ms": usual,
        "largest_changed_ms": one,
        "largest_changed_next_ms": one_next,
        "all_changed_ms": every,
        "all_changed_next_ms": every_next,
    }
    mb = f"{out['npy_mb']:.1f} MB; largest {largest} {out['largest_mb']:.1f} MB"
    print(f"{args.folder}: {len(files)} .npy files, {mb}")
    print(f"usual mapped open (median of {args.repeat}): {usual:.1f} ms")
    print(f"first open after {largest} changed: {one:.1f} ms; the next: {one_next:.1f} ms")
    print(f"first open after every file changed: {every:.1f} ms; the next: {every_next:.1f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
