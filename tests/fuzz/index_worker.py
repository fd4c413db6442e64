"""Subprocess of tests/fuzz/test_fuzz_index.py: damage an index folder case by case, open and search it.

``python index_worker.py CASES.json`` reads ``{"kind", "golden", "work", "queries", "cases"}``; for
each case it copies the golden folder, applies the damage, then for each opening mode (memory-mapped
and in memory; the per-open checksum threshold as shipped and at 0, as on a large index) opens the
index and searches the queries, and runs ``check_index``.  One JSON line per case goes to stdout
(flushed) before the next case starts, so a crash is seen by the parent as the first case
without its line.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np


def _damage(folder: str, case: dict) -> bool:
    """Apply ``case`` to ``folder``; return whether any byte changed."""
    f = os.path.join(folder, case["file"])
    before = open(f, "rb").read()
    op = case["op"]
    if op == "flip":
        data = bytearray(before)
        i = case["at"] % len(data)
        data[i] ^= case["mask"]
        open(f, "wb").write(bytes(data))
    elif op == "truncate":
        open(f, "wb").write(before[: case["at"] % len(before)])
    elif op == "zero_header":
        open(f, "wb").write(b"\0" * min(len(before), 128) + before[128:])
    elif op == "swap":
        g = os.path.join(folder, case["other"])
        other = open(g, "rb").read()
        open(f, "wb").write(other)
        open(g, "wb").write(before)
        return other != before
    elif op == "dtype":
        a = np.load(f, allow_pickle=False)
        with open(f, "wb") as fh:
            np.save(fh, a.astype(case["dtype"]), allow_pickle=False)
    elif op == "ids":
        a = np.load(f, allow_pickle=False)
        flat = a.reshape(-1)
        if flat.size:
            bad = {"big": np.iinfo(a.dtype).max if a.dtype.kind in "iu" else 1e30, "neg": -1, "edge": case["edge"]}
            v = bad[case["value"]]
            if a.dtype.kind == "u" and v < 0:
                v = np.iinfo(a.dtype).max
            for k in range(case["count"]):
                flat[(case["at"] + 7 * k) % flat.size] = v
        with open(f, "wb") as fh:
            np.save(fh, a, allow_pickle=False)
    return open(f, "rb").read() != before


def _open_and_search(kind: str, folder: str, queries, mmap: bool):
    if kind == "sgr":
        from jkofast.sgr.retriever import SparseGeometricRetriever

        r = SparseGeometricRetriever.load(folder, mmap=mmap)
        idx, sc = r.search(queries, k=5)
        return idx.tolist(), sc.tolist()
    from jkofast.sparse.index import load_index

    ix = load_index(folder, mmap=mmap)
    idx, sc = ix.search(queries, k=5)
    dense = ix.score_all(queries)
    return idx.tolist(), sc.tolist(), dense.tolist()


def main(spec_path: str) -> None:
    from jkofast.sgr import _persist as persist
    from jkofast.sparse import index as sparse_index

    spec = json.load(open(spec_path))
    kind, golden, work, queries = spec["kind"], spec["golden"], spec["work"], spec["queries"]
    mod = persist if kind == "sgr" else sparse_index
    check = mod.check_index
    shipped = mod.OPEN_CHECKSUM_BYTES
    ref = {m: _open_and_search(kind, golden, queries, m) for m in (True, False)}
    for n, case in enumerate(spec["cases"]):
        folder = os.path.join(work, f"case{n}")
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(golden, folder)
        out = {"case": n, "changed": _damage(folder, case), "opens": []}
        for threshold in (shipped, 0):
            mod.OPEN_CHECKSUM_BYTES = threshold
            for mmap in (True, False):
                row = {"mmap": mmap, "threshold": threshold}
                try:
                    got = _open_and_search(kind, folder, queries, mmap)
                    row["same"] = json.dumps(got) == json.dumps(ref[mmap])
                except (ValueError, TypeError) as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"
                out["opens"].append(row)
        mod.OPEN_CHECKSUM_BYTES = shipped
        rep = check(folder)
        out["check_ok"], out["check_error"] = rep["ok"], rep["error"]
        shutil.rmtree(folder, ignore_errors=True)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
