"""Side-by-side timing of the ``jkofast rerank`` input/output path: the previous line-by-line
parser/formatter (copied below, not in the package) against the current block parser and
vectorised formatter, alternating in one process, best of ``--repeats``.

Stages (one core; the JKO kernel is replaced by a stand-in returning ``p0``):
  parse     pool file -> chunks (tokenise, scores, query boundaries, duplicate check)
  process   doc id -> row lookup, energy/p0 (numba), output formatting (the embedding gather
            is excluded: same code in both, memory-bound; timed once as ``gather``)
  --scores  streaming DIR/scores.tsv alongside the chunks and aligning it (when the file exists:
            ``make_synthetic_pools.py --scores``)
  write     atomic write of the chunk text (temp file + fsync + os.replace; same code in both)
Then the whole CLI (real kernel) at each ``--cli-threads`` on the first ``--cli-queries`` queries:
the previous command module (``git show d7d80d4:jkofast/commands/rerank.py``, or ``--old-module``)
and the current one alternating; outputs must be byte-identical.

Usage:
  python benchmarks/tools/make_synthetic_pools.py /tmp/syn --queries 5000 --pool 200 [--scores]
  python benchmarks/tools/bench_rerank_io.py /tmp/syn [--repeats 3] [--cli-queries 500] [--cli-threads 1 2]
         [--config fast] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from jkofast.commands import rerank as R

# ---------------------------------------------------------------------------------------------
# the previous implementation (commit d7d80d4), kept here only for the comparison
# ---------------------------------------------------------------------------------------------
OLD_REF = "d7d80d4"


def _old_open_text(path: str):
    if path.endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def old_iter_queries(path: str, report):
    cur = None
    docs: list = []
    sstr: list = []
    vals: list = []
    seen: set = set()
    with _old_open_text(path) as fh:
        for ln, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                qid, did, s, v = R._parse_line(parts)
            except ValueError as exc:
                if ln == 1 and len(parts) == 3:
                    continue
                report(ln, str(exc))
                continue
            if qid != cur:
                if cur is not None:
                    yield cur, docs, sstr, vals
                cur, docs, sstr, vals, seen = qid, [], [], [], set()
            if did in seen:
                report(ln, f"duplicate document {did!r} in query {qid!r} (ignored)")
                continue
            seen.add(did)
            docs.append(did)
            sstr.append(s)
            vals.append(v)
    if cur is not None:
        yield cur, docs, sstr, vals


def old_iter_chunks(path: str, chunk_size: int, report):
    chunk = []
    for q in old_iter_queries(path, report):
        chunk.append(q)
        if len(chunk) == chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def old_process_chunk(chunk, geom, user_scores, cfg, args, say):
    from jkofast.jko.energy import align_scores, blend, softmax_tau
    from jkofast.jko.solver import rerank_batch

    ok_q, bad = [], {}
    rows_all = []
    for qi, (_qid, docs, _s, _v) in enumerate(chunk):
        rows = [geom.row.get(d, -1) for d in docs]
        if any(r < 0 for r in rows):
            missing = docs[rows.index(-1)]
            bad[qi] = f"document {missing!r} not in the geometry"
        elif not docs:
            bad[qi] = "empty pool"
        else:
            ok_q.append(qi)
            rows_all.extend(rows)
    p_by_q = {}
    if ok_q:
        sizes = np.array([len(chunk[qi][1]) for qi in ok_q], np.int64)
        off = np.zeros(len(ok_q) + 1, np.int64)
        np.cumsum(sizes, out=off[1:])
        run_s = np.concatenate([np.asarray(chunk[qi][3], np.float64) for qi in ok_q])
        if user_scores is not None:
            flat_docs = [d for qi in ok_q for d in chunk[qi][1]]
            rr, _ = align_scores(user_scores, [chunk[qi][0] for qi in ok_q], off, flat_docs)
            r = blend(off, dense=run_s, rerank=rr.astype(np.float64), alpha=args.alpha, gamma=args.gamma)
        else:
            r = blend(off, dense=run_s, alpha=1.0)
        p0 = softmax_tau(r, off, cfg.tau0)
        res = rerank_batch(-r, p0, off, config=cfg, n_threads=args.threads, **geom.gather(rows_all))
        status = np.asarray(res.status)
        errors = getattr(res, "errors", {}) or {}
        for j, qi in enumerate(ok_q):
            if status[j] != 0:
                bad[qi] = errors.get(j, f"solver status {int(status[j])}")
            else:
                p_by_q[qi] = np.asarray(res.p[off[j] : off[j + 1]], np.float64)
    lines = []
    dist_p, dist_sizes, dist_status = [], [], []
    for qi, (qid, docs, sstr, _v) in enumerate(chunk):
        if qi in bad:
            say(f"jkofast rerank: query {qid!r} passed through unchanged: {bad[qi]}")
            kk = len(docs) if args.k <= 0 else min(args.k, len(docs))
            for rank in range(kk):
                lines.append(f"{qid} Q0 {docs[rank]} {rank + 1} {sstr[rank]} {args.tag}\n")
            dist_p.append(np.full(len(docs), np.nan, np.float32))
            dist_status.append(1)
        else:
            p = p_by_q[qi]
            order = np.argsort(-p, kind="stable")
            kk = len(docs) if args.k <= 0 else min(args.k, len(docs))
            for rank in range(kk):
                j = order[rank]
                lines.append(f"{qid} Q0 {docs[j]} {rank + 1} {p[j]:.9g} {args.tag}\n")
            dist_p.append(p.astype(np.float32))
            dist_status.append(0)
        dist_sizes.append(len(docs))
    dist = {
        "query_ids": np.array([c[0] for c in chunk], dtype=str),
        "sizes": np.array(dist_sizes, np.int64),
        "p": np.concatenate(dist_p) if dist_p else np.zeros(0, np.float32),
        "status": np.array(dist_status, np.int32),
    }
    return "".join(lines), dist, len(bad)


class OldScoreStream:
    def __init__(self, path: str):
        self.path = path
        self.missing = 0
        self._it = self._blocks()
        self._cur = next(self._it, None)

    def _blocks(self):
        from jkofast.jko.energy import _parse_score_line

        cur, block = None, {}
        with _old_open_text(self.path) as fh:
            for ln, line in enumerate(fh, 1):
                parts = line.split()
                if not parts:
                    continue
                try:
                    qid, did, v = _parse_score_line(parts)
                except ValueError as exc:
                    if ln == 1:
                        continue
                    raise ValueError(f"{self.path}:{ln}: malformed score line: {exc}") from None
                if not np.isfinite(v):
                    raise ValueError(f"{self.path}:{ln}: non-finite score")
                if qid != cur:
                    if cur is not None:
                        yield cur, block
                    cur, block = qid, {}
                block[did] = v
        if cur is not None:
            yield cur, block

    def take(self, qid: str):
        if self._cur is not None and self._cur[0] == qid:
            block = self._cur[1]
            self._cur = next(self._it, None)
            return block
        self.missing += 1
        return None


def old_scores_path(path, chunks):
    """Stream the score file alongside the chunks and align it (the previous code)."""
    from jkofast.jko.energy import align_scores

    st = OldScoreStream(path)
    out = []
    for c in chunks:
        sc = {}
        for q in c.qids:
            b = st.take(q)
            if b is not None:
                sc[q] = b
        out.append(align_scores(sc, c.qids, c.off, c.docs)[0])
    return out


def new_scores_path(path, chunks):
    st = R.ScoreStream(path)
    out = []
    for c in chunks:
        sc = {}
        for q in c.qids:
            b = st.take(q)
            if b is not None:
                sc[q] = b
        out.append(R.align_chunk_scores(sc, c.qids, c.off, c.docs))
    return out


# ---------------------------------------------------------------------------------------------
# harness
# ---------------------------------------------------------------------------------------------
class _P0Result:
    def __init__(self, p, n):
        self.p, self.status, self.errors = p, np.zeros(n, np.int32), {}


def _stand_in_kernel(energy, p0, offsets, **_kw):
    return _P0Result(p0, len(offsets) - 1)


class _NoGather:
    """The geometry's id lookup without the embedding gather."""

    def __init__(self, geom):
        self.row = geom.row

    def rows(self, docs):
        return R._map_rows(self.row, docs)

    def gather(self, rows):
        return {"embeddings": np.zeros((len(rows), 1), np.float32)}


def _best(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _alternate(pairs, repeats):
    """pairs: {name: fn}; run them alternately, best of ``repeats`` each -> {name: seconds}."""
    best = {k: float("inf") for k in pairs}
    for _ in range(repeats):
        for k, fn in pairs.items():
            t = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def stage_bench(d: str, chunk_size: int, repeats: int) -> dict:
    import jkofast.jko.solver as J

    path = os.path.join(d, "run.trec")
    geom = R.DenseGeometry(os.path.join(d, "E.npy"), os.path.join(d, "ids.txt"))
    args = argparse.Namespace(alpha=0.4, gamma=0.6, threads=1, k=0, tag="jkofast")
    cfg = J.operating_point("tuned")
    nop = lambda *a: None  # noqa: E731
    old_chunks = list(old_iter_chunks(path, chunk_size, nop))
    new_chunks = list(R.iter_chunks(path, chunk_size, nop))
    nq = sum(len(c) for c in new_chunks)
    assert [t for c in old_chunks for t in c] == [t for c in new_chunks for t in c], "parsers disagree"
    out = {"queries": nq, "chunk_size": chunk_size}
    t = _alternate(
        {
            "old": lambda: list(old_iter_chunks(path, chunk_size, nop)),
            "new": lambda: list(R.iter_chunks(path, chunk_size, nop)),
        },
        repeats,
    )
    out["parse_s"] = t
    real = J.rerank_batch
    J.rerank_batch = _stand_in_kernel
    try:
        ng = _NoGather(geom)
        texts = {}

        def proc(fn, chunks, key):
            texts[key] = [fn(c, ng, None, cfg, args, nop)[0] for c in chunks]

        t = _alternate(
            {
                "old": lambda: proc(old_process_chunk, old_chunks, "old"),
                "new": lambda: proc(R.process_chunk, new_chunks, "new"),
            },
            repeats,
        )
        assert texts["old"] == texts["new"], "formatted output differs"
        out["process_s"] = t
        rows = [R._map_rows(geom.row, c.docs) for c in new_chunks]
        out["gather_s"] = _best(lambda: [geom.gather(r) for r in rows], repeats)
    finally:
        J.rerank_batch = real
    spath = os.path.join(d, "scores.tsv")
    if os.path.exists(spath):  # --scores: stream + align (make_synthetic_pools.py --scores)
        got = {}
        t = _alternate(
            {
                "old": lambda: got.__setitem__("old", old_scores_path(spath, new_chunks)),
                "new": lambda: got.__setitem__("new", new_scores_path(spath, new_chunks)),
            },
            repeats,
        )
        assert all(np.array_equal(a, b) for a, b in zip(got["old"], got["new"], strict=True)), "scores differ"
        out["scores_s"] = t
    with tempfile.TemporaryDirectory() as td:
        out["write_s"] = _best(
            lambda: [R._atomic_write_text(os.path.join(td, "c.trec"), x) for x in texts["new"]], repeats
        )
    for k in ("old", "new"):
        tot = out["parse_s"][k] + out["process_s"][k] + out["write_s"]
        out[f"python_side_{k}_qps"] = nq / tot
        out[f"python_side_{k}_plus_gather_qps"] = nq / (tot + out["gather_s"])
    return out


def load_old_module(path: str | None, ref: str = OLD_REF):
    """The previous ``jkofast/commands/rerank.py`` as a module: from ``path``, else ``git show REF:...``."""
    import importlib.util
    import subprocess

    if path is None:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        src = subprocess.run(
            ["git", "show", f"{ref}:jkofast/commands/rerank.py"], cwd=root, check=True, capture_output=True, text=True
        ).stdout
        fd, path = tempfile.mkstemp(suffix="_rerank_old.py")
        with os.fdopen(fd, "w") as fh:
            fh.write(src)
    spec = importlib.util.spec_from_file_location("jkofast_rerank_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _head(src: str, dst: str, n_queries: int) -> None:
    """The first ``n_queries`` queries of a run file."""
    with open(src, encoding="utf-8") as fh, open(dst, "w", encoding="utf-8") as out:
        seen, cur = 0, None
        for line in fh:
            q = line.split(None, 1)[0]
            if q != cur:
                seen += 1
                cur = q
                if seen > n_queries:
                    break
            out.write(line)


def _kernel_only(pools: str, d: str, config: str, grad, chunk_size: int, nt: int) -> dict:
    """Throughput of the kernel stage alone (gather + rerank_batch) on the first chunk."""
    from jkofast.jko.solver import operating_point

    geom = R.DenseGeometry(os.path.join(d, "E.npy"), os.path.join(d, "ids.txt"))
    cfg = operating_point(config) if grad is None else operating_point(config, grad=grad)
    args = argparse.Namespace(alpha=0.4, gamma=0.6, threads=nt, k=0, tag="jkofast")
    chunk = next(iter(R.iter_chunks(pools, chunk_size, None)))
    pr = R.prepare_chunk(chunk, geom, None, cfg, args)
    t = time.perf_counter()
    R.solve_chunk(pr, geom, cfg, args)
    wall = time.perf_counter() - t
    return {"queries": len(chunk), "wall_s": wall, "qps": len(chunk) / wall}


def cli_bench(
    d: str,
    n_queries: int,
    threads: list,
    config: str,
    chunk_size: int,
    repeats: int,
    old_path: str | None,
    grad: str | None = None,
) -> dict:
    """Whole CLI (real kernel): the previous command module against the current one, alternating."""
    old = load_old_module(old_path)
    work = tempfile.mkdtemp(prefix="rr_cli_")
    pools = os.path.join(work, "run.trec")
    warm = os.path.join(work, "warm.trec")
    _head(os.path.join(d, "run.trec"), pools, n_queries)
    _head(pools, warm, chunk_size)
    base = [
        "rerank",
        "--pools",
        "POOLS",
        "--embeddings",
        os.path.join(d, "E.npy"),
        "--ids",
        os.path.join(d, "ids.txt"),
        "--config",
        config,
        "--chunk-size",
        str(chunk_size),
        "--json",
        *(["--grad", grad] if grad else []),
    ]
    res: dict = {"queries": n_queries, "config": config, "grad": grad, "chunk_size": chunk_size}

    def one(mod, kind, nt, src=pools):
        ap = argparse.ArgumentParser()
        mod.add_parser(ap.add_subparsers())
        outp = os.path.join(work, f"{kind}_{nt}.trec")
        argv = [src if a == "POOLS" else a for a in base]
        args = ap.parse_args([*argv, "--threads", str(nt), "--out", outp])
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            t = time.perf_counter()
            rc = mod.run(args)
            wall = time.perf_counter() - t
        assert rc == 0
        return wall, json.loads(buf.getvalue())["queries_per_s"]

    try:
        for nt in threads:
            one(R, "new", nt, warm)  # warm-up: compilation, one chunk
            res[f"kernel_{nt}"] = _kernel_only(pools, d, config, grad, chunk_size, nt)
            best = {"old": (float("inf"), 0.0), "new": (float("inf"), 0.0)}
            for _ in range(repeats):
                for kind, mod in (("old", old), ("new", R)):
                    wall, qps = one(mod, kind, nt)
                    if wall < best[kind][0]:
                        best[kind] = (wall, qps)
            with (
                open(os.path.join(work, f"old_{nt}.trec"), "rb") as fa,
                open(os.path.join(work, f"new_{nt}.trec"), "rb") as fb,
            ):
                assert fa.read() == fb.read(), "CLI outputs differ"
            res[f"threads_{nt}"] = {
                k: {"wall_s": w, "wall_qps": n_queries / w, "reported_qps": q} for k, (w, q) in best.items()
            }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="output folder of benchmarks/tools/make_synthetic_pools.py (run.trec, E.npy, ids.txt)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--chunk-size", type=int, default=1000)
    ap.add_argument("--cli-queries", type=int, default=500, help="queries for the CLI runs (0 = skip)")
    ap.add_argument("--cli-threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--cli-chunk-size", type=int, default=250)
    ap.add_argument("--config", default="fast")
    ap.add_argument("--grad", default=None, choices=["unrolled", "implicit"])
    ap.add_argument("--old-module", help=f"previous rerank.py for the CLI runs (default: git show {OLD_REF}:...)")
    ap.add_argument("--json", help="write the figures as JSON")
    a = ap.parse_args(argv)
    r = {"stages": stage_bench(a.dir, a.chunk_size, a.repeats)}
    s = r["stages"]
    nq = s["queries"]
    print(f"{nq} queries, chunk {s['chunk_size']}, best of {a.repeats} (old/new alternating, one process)")
    for st in ("parse", "process"):
        o, n = s[f"{st}_s"]["old"], s[f"{st}_s"]["new"]
        print(f"  {st:8s} old {o:7.3f} s ({nq / o:8.0f} q/s)   new {n:7.3f} s ({nq / n:8.0f} q/s)   {o / n:5.2f}x")
    if "scores_s" in s:
        o, n = s["scores_s"]["old"], s["scores_s"]["new"]
        print(
            f"  --scores old {o:7.3f} s ({nq / o:8.0f} q/s)   new {n:7.3f} s ({nq / n:8.0f} q/s)   {o / n:5.2f}x "
            "(stream scores.tsv + align)"
        )
    print(f"  write    {s['write_s']:7.3f} s (same code)   gather {s['gather_s']:7.3f} s (same code)")
    print(
        f"  parse+process+write: old {s['python_side_old_qps']:.0f} q/s, new {s['python_side_new_qps']:.0f} q/s; "
        f"with gather: old {s['python_side_old_plus_gather_qps']:.0f}, "
        f"new {s['python_side_new_plus_gather_qps']:.0f}"
    )
    if a.cli_queries > 0:
        r["cli"] = cli_bench(
            a.dir, a.cli_queries, a.cli_threads, a.config, a.cli_chunk_size, a.repeats, a.old_module, a.grad
        )
        for nt in a.cli_threads:
            c = r["cli"][f"threads_{nt}"]
            kq = r["cli"][f"kernel_{nt}"]
            print(
                f"  kernel stage alone (gather + rerank_batch), first chunk of {kq['queries']}, {nt} thread(s): "
                f"{kq['qps']:.1f} q/s"
            )
            print(
                f"  CLI {a.cli_queries} q, --config {a.config} --grad {a.grad}, {nt} thread(s): "
                f"wall old {c['old']['wall_s']:.2f} s "
                f"({c['old']['wall_qps']:.1f} q/s), new {c['new']['wall_s']:.2f} s ({c['new']['wall_qps']:.1f} q/s), "
                f"{c['old']['wall_s'] / c['new']['wall_s']:.2f}x; outputs identical"
            )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(r, fh, indent=1)


if __name__ == "__main__":
    main()
