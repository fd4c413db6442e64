"""Bit-identity check of the SGR query path against pickled reference outputs.

Usage:
    python benchmarks/tools/sgr_identity.py --write-reference   # once, on the tree to compare with
    python benchmarks/tools/sgr_identity.py                     # after every change: compare

Compared, bit for bit (``np.array_equal`` with NaN == NaN): ``search`` ids and scores
(k = 10, at 1 and 2 threads) and every ``pool()`` field (doc, n, tail, lexadj, sem, rare,
relevance, lex1, bm25, n_routed_docs, n_routed_terms, status; at 1 and 2 threads) on all
1,109 SciFact queries plus an empty, an unknown-term and a stop-word-only query, for the
configurations in ``CONFIGS``: the defaults, the published row, the train-selected
fusion, the tail gate, and each ``rescue_mode`` (``"auto"`` is the default).  Fitted indexes are cached (``save`` /
``load``) under the temp directory, keyed by the build sources, so a check takes
seconds; the query kernels (``jkofast/kernels/sgr/query.py``) are not part of that key.
``--synthetic N`` checks the same way on the asv synthetic corpus of N documents
(``benchmarks.bench_sgr.synthetic_texts``, 300 queries + the extra three) with the
configurations of ``SYN_CONFIGS`` (query parameters on one fitted index: the defaults, the
tail gate at its defaults and one small enough to drop documents, each ``rescue_mode``, the
BM25 fusion with a BM25 rescue term, a larger pool with the published neighbours); it keeps
its own reference file.  Exit status 0 = identical, 1 = a difference (printed), 2 = no
reference yet.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from sgr_eval import SELECTED, load_scifact  # noqa: E402

PUBLISHED = dict(semantic_neighbours="lowest_term_id", ppmi_include_self=True)
CONFIGS = {
    "defaults": {},
    "published": PUBLISHED,
    "selected_fusion": SELECTED,
    "tail_gate": dict(tail_gate=True),
    "rescue_scan": dict(PUBLISHED, rescue_mode="scan"),
    "rescue_postings": dict(PUBLISHED, rescue_mode="postings"),
}
SYN_CONFIGS = {
    "defaults": {},
    "tail_gate": dict(tail_gate=True),
    "tail_gate_small": dict(tail_gate=True, gate_min=50, gate_mult=1),
    "rescue_scan": dict(rescue_mode="scan"),
    "rescue_postings": dict(rescue_mode="postings"),
    "fusion": dict(pool_size=500, w_lex=8.0, bm25_candidates=100, bm25_weight=32.0, bm25_rescue_weight=0.5),
    "lowest_P200": dict(semantic_neighbours="lowest_term_id", pool_size=200),
}
EXTRA_QUERIES = ["", "zzqxjvk qqqzzzx", "the of and a"]
POOL_FIELDS = (
    "doc",
    "n",
    "tail",
    "lexadj",
    "sem",
    "rare",
    "relevance",
    "lex1",
    "bm25",
    "n_routed_docs",
    "n_routed_terms",
    "status",
)
CACHE = os.path.join(tempfile.gettempdir(), "jkofast_sgr_identity")
REF = os.path.join(CACHE, "reference.pkl")


_BUILD_SOURCES = (
    "jkofast/sgr/retriever.py",
    "jkofast/sgr/config.py",
    "jkofast/sgr/layout.py",
    "jkofast/kernels/sgr/build.py",
)


def _build_key() -> str:
    """Hash of the sources that define the fitted index (not the query kernels; a missing file counts as empty)."""
    root = os.path.abspath(os.path.join(HERE, "..", ".."))
    h = hashlib.sha256()
    for rel in _BUILD_SOURCES:
        f = os.path.join(root, rel)
        if os.path.exists(f):
            with open(f, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()[:16]


def _retriever(name, texts):
    from jkofast.sgr.retriever import SparseGeometricRetriever

    d = os.path.join(CACHE, f"index_{_build_key()}_{name}")
    if os.path.exists(os.path.join(d, "meta.json")):
        return SparseGeometricRetriever.load(d)
    r = SparseGeometricRetriever(**CONFIGS[name]).fit(texts)
    r.save(d)
    return SparseGeometricRetriever.load(d)  # the same path as every later run


def outputs(names=None) -> dict:
    """{config: {key: array}} for the configurations ``names`` (default: all)."""
    _, texts, queries, _ = load_scifact()
    qs = list(queries.values()) + EXTRA_QUERIES
    res = {}
    for name in names or CONFIGS:
        res[name] = _collect(_retriever(name, texts), qs)
        print(f"  {name}: {len(qs)} queries", flush=True)
    return res


def _collect(r, qs) -> dict:
    o = {}
    for nt in (1, 2):
        idx, sc = r.search(qs, k=10, n_threads=nt)
        o[f"search_ids_{nt}t"] = idx
        o[f"search_scores_{nt}t"] = sc
        p = r.pool(qs, n_threads=nt)
        for f in POOL_FIELDS:
            o[f"pool_{f}_{nt}t"] = getattr(p, f)
    return o


def synthetic_outputs(n_docs: int, names=None) -> dict:
    """The same arrays on the synthetic corpus, one index, ``SYN_CONFIGS`` as query params."""
    sys.path.insert(0, os.path.join(HERE, "..", ".."))
    from benchmarks.bench_sgr import synthetic_texts
    from jkofast.sgr.retriever import SparseGeometricRetriever

    docs, qs = synthetic_texts(n_docs, 300)
    qs = qs + EXTRA_QUERIES
    r = SparseGeometricRetriever().fit(docs, n_threads=2)
    base = dict(r.params)
    res = {}
    for name in names or SYN_CONFIGS:
        r.set_params(**{**base, **SYN_CONFIGS[name]})
        res[name] = _collect(r, qs)
        print(f"  synthetic {n_docs}, {name}: {len(qs)} queries", flush=True)
    return res


def compare(ref, new) -> list[str]:
    bad = []
    for name, o in ref.items():
        for k, a in o.items():
            b = new[name][k]
            if a.dtype != b.dtype or a.shape != b.shape:
                bad.append(f"{name}/{k}: dtype/shape {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
            elif not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                if a.dtype.kind == "f":
                    same = (a == b) | (np.isnan(a) & np.isnan(b))
                else:
                    same = a == b
                rows = np.unique(np.nonzero(~same)[0])
                bad.append(f"{name}/{k}: {rows.size} rows differ (first {rows[:5].tolist()})")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write-reference", action="store_true", help="pickle this tree's outputs as the reference")
    ap.add_argument("--only", nargs="*", default=None, help="compare these configurations only")
    ap.add_argument(
        "--synthetic",
        type=int,
        default=None,
        metavar="N",
        help="check on the synthetic corpus of N documents instead of SciFact",
    )
    args = ap.parse_args(argv)
    os.makedirs(CACHE, exist_ok=True)
    if args.synthetic is not None:
        ref_path = os.path.join(CACHE, f"reference_synthetic_{args.synthetic}.pkl")
        run = lambda names=None: synthetic_outputs(args.synthetic, names)  # noqa: E731
    else:
        ref_path = REF
        run = outputs
    if args.write_reference:
        res = run()
        with open(ref_path, "wb") as f:
            pickle.dump(res, f)
        print(f"reference written: {ref_path}")
        return 0
    if not os.path.exists(ref_path):
        print(f"no reference at {ref_path}: run with --write-reference on the reference tree")
        return 2
    with open(ref_path, "rb") as f:
        ref = pickle.load(f)
    if args.only:
        ref = {k: v for k, v in ref.items() if k in args.only}
    bad = compare(ref, run(list(ref)))
    n = sum(len(v) for v in ref.values())
    if bad:
        print("DIFFERENT:\n  " + "\n  ".join(bad))
        return 1
    print(f"bit-identical: {n} arrays over {len(ref)} configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
