"""Bit-identity of two SGR index folders (e.g. the streaming build of two releases on one corpus).

Usage:
    python benchmarks/tools/sgr_build_identity.py INDEX_A INDEX_B [--json F]

Compares the file lists of the two folders and every file byte for byte (``meta.json`` included:
parameters, vocabulary, ids, array shapes and dtypes, the per-file CRC32), in 64 MiB pieces, so
that an 8.84 M-passage index (2.4 GB) is checked in bounded memory.  Exit status 0 = identical,
1 = a difference (each one printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

PIECE = 64 << 20


def same_file(a: str, b: str) -> bool:
    """Return whether files ``a`` and ``b`` hold the same bytes."""
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(PIECE), fb.read(PIECE)
            if x != y:
                return False
            if not x:
                return True


def compare(a: str, b: str) -> dict:
    """Return ``{"identical", "files", "differences"}`` for index folders ``a`` and ``b``."""
    fa = sorted(f for f in os.listdir(a) if os.path.isfile(os.path.join(a, f)))
    fb = sorted(f for f in os.listdir(b) if os.path.isfile(os.path.join(b, f)))
    diffs = [f"only in {a}: {f}" for f in fa if f not in fb] + [f"only in {b}: {f}" for f in fb if f not in fa]
    common = [f for f in fa if f in fb]
    for f in common:
        if not same_file(os.path.join(a, f), os.path.join(b, f)):
            diffs.append(f"differs: {f}")
    return {"identical": not diffs, "files": len(common), "differences": diffs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    res = compare(args.a, args.b)
    for d in res["differences"]:
        print(d)
    print(f"{res['files']} files compared: {'identical' if res['identical'] else 'DIFFERENT'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0 if res["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
