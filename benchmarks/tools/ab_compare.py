"""A/B timing of two versions of jkofast in ONE process: an older commit, imported as a renamed
copy of the package, against the working tree (or another commit), alternating per input.

    python benchmarks/tools/ab_compare.py --base 8bfc0fb [--head WORKTREE|REF] [--suite jko|sinkhorn|batch]
           [--configs tuned/implicit,contrib/implicit] [--repeats 3] [--pools 15] [--json out.json]

How: ``git archive REF jkofast`` is unpacked into a cache folder (``--cache``, default
``$TMPDIR/jkofast_ab``; one folder per commit, so Numba's on-disk cache of the copy survives
between runs) as the top-level package ``jkofast_<sha12>``, every ``jkofast`` module reference in
its ``.py`` files rewritten to that name.  Both packages are imported side by side; each input is
run by base then head, ``--repeats`` times, and the best CPU time (``time.process_time``, Numba
at 1 thread) of each side is kept, so load from other jobs hits both sides alike.

Suites (inputs are built here, identical for both sides):
  jko       ``run_jko`` per pool: the synthetic clustered pool (M = 200, d = 384, 20 clusters) and
            the first ``--pools`` SciFact parity pools (jkofast/datasets/reference/jko_reference_scifact30.npz);
            configs ``name/grad[@eps]`` (default tuned/contrib/base x implicit/unrolled)
  sinkhorn  ``sinkhorn_log`` µs per update pair, M in {200, 1000}, eps 0.1, fixed iterations
  batch     ``rerank_batch`` on 40 synthetic pools (tuned/implicit), queries/s at 1 thread
Prints ms (or µs) per input for each side and the ratio base/head (> 1: head is faster), and the
largest difference of the outputs (0 when both sides compute the same bits): |p_base - p_head| for
``jko`` and ``batch``, the duals f, g and the cost for ``sinkhorn``.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURE = os.path.join(ROOT, "jkofast", "datasets", "reference", "jko_reference_scifact30.npz")
DEFAULT_CONFIGS = [
    "tuned/implicit",
    "contrib/implicit",
    "base/implicit",
    "tuned/unrolled",
    "contrib/unrolled",
    "base/unrolled",
]
_MODULE_REF = re.compile(r"\bjkofast\b(?!/)")  # module references, not paths like jkofast/datasets


# ---------------------------------------------------------------------------------------------
# export + rename
# ---------------------------------------------------------------------------------------------
def resolve(ref: str, root: str = ROOT) -> str:
    """Full commit sha of ``ref`` (raises ``RuntimeError`` if git or the ref is unavailable)."""
    try:
        r = subprocess.run(
            ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=root, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise RuntimeError(f"git is not available: {exc}") from None
    if r.returncode != 0:
        raise RuntimeError(f"cannot resolve {ref!r}: {r.stderr.strip()}")
    return r.stdout.strip()


def rename_source(text: str, name: str) -> str:
    """Rewrite every ``jkofast`` module reference (imports, dotted names in strings) to ``name``."""
    return _MODULE_REF.sub(name, text)


def export_package(ref: str, dest: str, *, root: str = ROOT, with_data: bool = False) -> str:
    """Unpack ``jkofast`` at ``ref`` into ``dest/jkofast_<sha12>`` with renamed imports.

    Reuses an existing complete export (commits are immutable).  The bundled datasets are
    left out unless ``with_data``.  Returns the package name; ``dest`` goes on ``sys.path``.
    """
    sha = resolve(ref, root)
    name = f"jkofast_{sha[:12]}"
    pkg = os.path.join(dest, name)
    stamp = os.path.join(pkg, ".ab_export_complete")
    if not os.path.exists(stamp):
        os.makedirs(dest, exist_ok=True)
        spec = ["jkofast"] if with_data else ["jkofast", ":(exclude)jkofast/datasets/scifact"]
        tar = subprocess.run(
            ["git", "archive", "--format=tar", sha, "--", *spec], cwd=root, capture_output=True, check=True
        ).stdout
        tmp = tempfile.mkdtemp(prefix=".export-", dir=dest)
        with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
            try:
                tf.extractall(tmp, filter="data")
            except TypeError:  # Python without extraction filters (our own git archive: trusted)
                tf.extractall(tmp)
        for dirpath, _dirs, files in os.walk(os.path.join(tmp, "jkofast")):
            for f in files:
                if f.endswith(".py"):
                    p = os.path.join(dirpath, f)
                    with open(p, encoding="utf-8") as fh:
                        src = fh.read()
                    with open(p, "w", encoding="utf-8") as fh:
                        fh.write(rename_source(src, name))
        if os.path.exists(pkg):  # an incomplete earlier export
            import shutil

            shutil.rmtree(pkg)
        os.replace(os.path.join(tmp, "jkofast"), pkg)
        os.rmdir(tmp)
        with open(stamp, "w") as fh:
            fh.write(sha + "\n")
    return name


def import_side(ref: str, cache: str):
    """``(label, package module)``: ``WORKTREE`` = the checkout's jkofast, else an export of ``ref``."""
    if ref.upper() == "WORKTREE":
        if ROOT not in sys.path:
            sys.path.insert(0, ROOT)
        return "worktree", importlib.import_module("jkofast")
    name = export_package(ref, cache)
    if cache not in sys.path:
        sys.path.insert(0, cache)
    return f"{ref} ({name[8:]})", importlib.import_module(name)


# ---------------------------------------------------------------------------------------------
# inputs (plain numpy, the same arrays for both sides)
# ---------------------------------------------------------------------------------------------
def clustered_pool(m=200, d=384, n_clusters=20, seed=0):
    """Unit rows in 20 clusters (benchmarks/bench_sinkhorn.py) and the SPEC A.4.7 energy."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    Z = centres[np.arange(m) % n_clusters] + 0.05 * rng.normal(size=(m, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    S = np.clip(Z @ Z.T, -1, 1)
    rng = np.random.default_rng(seed)

    def minmax(x):
        return (x - x.min()) / (x.max() - x.min())

    r = 0.4 * minmax(rng.random(m)) + 0.6 * minmax(rng.normal(size=m))
    return Z, -r, (1 - S) ** 2, np.maximum(S, 0)


def p0_of(E, tau0):
    x = -E / max(tau0, 1e-9)
    e = np.exp(x - x.max())
    return e / e.sum()


def scifact_pool(z, q: int, tau0: float):
    """(p0, E, C, K) of fixture pool ``q`` as the fixture README builds it (float32): the
    checkout's own builder (``jkofast parity`` uses it), the same arrays for both sides."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    try:
        from jkofast.jko.parity import fixture_pool
    except ImportError:  # the layout before the parity library moved out of the command
        from jkofast.commands.parity import fixture_pool

    return fixture_pool(z, q, tau0)


# ---------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------
def _cpu(fn):
    c = time.process_time()
    out = fn()
    return time.process_time() - c, out


def alternate(fns: dict, repeats: int):
    """Run ``fns`` (label -> callable) alternately ``repeats`` times -> (best CPU s, last result) each."""
    best = {k: float("inf") for k in fns}
    res = {}
    for _ in range(repeats):
        for k, fn in fns.items():
            t, res[k] = _cpu(fn)
            best[k] = min(best[k], t)
    return best, res


def _jko(pkg):
    return importlib.import_module(pkg.__name__ + ".jko")


def _config(pkg, spec: str):
    name, _, rest = spec.partition("/")
    grad, _, eps = rest.partition("@")
    cfg = _jko(pkg).operating_point(name, grad=grad or "unrolled")
    return cfg.replace(sinkhorn_eps=float(eps)) if eps else cfg


def suite_jko(sides: dict, configs: list, repeats: int, n_pools: int) -> list:
    import numba

    numba.set_num_threads(1)
    z = np.load(FIXTURE) if os.path.exists(FIXTURE) and n_pools > 0 else None
    _, E_syn, C_syn, K_syn = clustered_pool()
    rows = []
    for spec in configs:
        cfgs = {k: _config(pkg, spec) for k, (_, pkg) in sides.items()}
        jmods = {k: _jko(pkg) for k, (_, pkg) in sides.items()}
        tau0 = cfgs["head"].tau0
        inputs = [("synthetic", p0_of(E_syn, tau0), E_syn, C_syn, K_syn)]
        if z is not None:
            inputs += [(f"scifact{q}", *scifact_pool(z, q, tau0)) for q in range(n_pools)]
        t0 = time.perf_counter()
        for k, (_, pkg) in sides.items():  # warm-up: compile or load the cache
            _, p0, E, C, K = inputs[0]
            _jko(pkg).run_jko(p0, E, C, K, cfgs[k].replace(T=1, inner_steps=1))
        warm = time.perf_counter() - t0
        per = []
        max_dp = 0.0
        for label, p0, E, C, K in inputs:
            best, res = alternate(
                {k: (lambda j=jmods[k], c=cfgs[k], a=(p0, E, C, K): j.run_jko(*a, c)) for k in sides}, repeats
            )
            pb, ph = (np.asarray(getattr(res[k], "p", res[k]), np.float64) for k in ("base", "head"))
            max_dp = max(max_dp, float(np.abs(pb - ph).max()))
            per.append((label, 1e3 * best["base"], 1e3 * best["head"]))
        syn = per[0]
        sci = per[1:]
        row = {
            "config": spec,
            "synthetic_ms": {"base": syn[1], "head": syn[2], "ratio": syn[1] / syn[2]},
            "max_abs_dp": max_dp,
            "warmup_s": warm,
        }
        if sci:
            b = np.array([x[1] for x in sci])
            h = np.array([x[2] for x in sci])
            row["scifact_ms"] = {
                "pools": len(sci),
                "base_median": float(np.median(b)),
                "base_max": float(b.max()),
                "head_median": float(np.median(h)),
                "head_max": float(h.max()),
                "ratio_median": float(np.median(b) / np.median(h)),
            }
        rows.append(row)
        s = row["synthetic_ms"]
        line = f"  {spec:22s} synthetic {s['base']:8.1f} -> {s['head']:8.1f} ms ({s['ratio']:4.2f}x)"
        if sci:
            f = row["scifact_ms"]
            line += (
                f" | SciFact median (max) {f['base_median']:6.1f} ({f['base_max']:.1f}) -> "
                f"{f['head_median']:6.1f} ({f['head_max']:.1f}) ms ({f['ratio_median']:4.2f}x), "
                f"{f['pools']} pools"
            )
        print(line + f" | max|dp| {max_dp:.1e}", flush=True)
    return rows


def suite_sinkhorn(sides: dict, repeats: int) -> list:
    import numba

    numba.set_num_threads(1)
    rows = []
    for m, n_it in ((200, 2000), (1000, 200)):
        _, _, C, _ = clustered_pool(m)
        rng = np.random.default_rng(0)
        a = rng.random(m) + 0.01
        a /= a.sum()
        b = np.full(m, 1.0 / m)
        for _, pkg in sides.values():
            pkg.sinkhorn_log(a, b, C, 0.1, max_iter=5, tol=None)
        best, res = alternate(
            {
                k: (lambda pkg=pkg, a=a, b=b, C=C, n_it=n_it: pkg.sinkhorn_log(a, b, C, 0.1, max_iter=n_it, tol=None))
                for k, (_, pkg) in sides.items()
            },
            repeats,
        )
        rb, rh = res["base"], res["head"]
        max_d = max(float(np.abs(rb.f - rh.f).max()), float(np.abs(rb.g - rh.g).max()), abs(rb.cost - rh.cost))
        us = {k: 1e6 * v / n_it for k, v in best.items()}
        rows.append({"M": m, "us_per_pair": us, "ratio": us["base"] / us["head"], "max_abs_dfg": max_d})
        print(
            f"  sinkhorn_log M={m:5d}: {us['base']:8.2f} -> {us['head']:8.2f} µs/pair "
            f"({us['base'] / us['head']:4.2f}x) | max|df|,|dg|,|dcost| {max_d:.1e}",
            flush=True,
        )
    return rows


def suite_batch(sides: dict, repeats: int) -> list:
    n, m = 40, 200
    zs, es = [], []
    for q in range(n):
        Z, E, _, _ = clustered_pool(m, seed=q)
        zs.append(Z.astype(np.float32))
        es.append(E)
    Z, E = np.concatenate(zs), np.concatenate(es)
    off = np.arange(0, m * (n + 1), m, dtype=np.int64)
    cfgs = {k: _jko(pkg).operating_point("tuned", grad="implicit") for k, (_, pkg) in sides.items()}
    for k, (_, pkg) in sides.items():
        _jko(pkg).rerank_batch(E[:m], None, off[:2], embeddings=Z[:m], config=cfgs[k].replace(T=1, inner_steps=1))
    jmods = {k: _jko(pkg) for k, (_, pkg) in sides.items()}
    best, res = alternate(
        {
            k: (lambda j=jmods[k], c=cfgs[k]: j.rerank_batch(E, None, off, embeddings=Z, config=c, n_threads=1))
            for k in sides
        },
        repeats,
    )
    max_dp = float(np.abs(res["base"].p - res["head"].p).max())
    qps = {k: n / v for k, v in best.items()}
    print(
        f"  rerank_batch tuned/implicit, {n} pools, 1 thread: {qps['base']:.1f} -> {qps['head']:.1f} queries/s "
        f"({qps['head'] / qps['base']:4.2f}x) | max|dp| {max_dp:.1e}",
        flush=True,
    )
    return [{"pools": n, "queries_per_cpu_s": qps, "ratio": qps["head"] / qps["base"], "max_abs_dp": max_dp}]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="git ref of the older version")
    ap.add_argument("--head", default="WORKTREE", help="git ref, or WORKTREE (default): the checkout as it is")
    ap.add_argument("--suite", default="jko", choices=["jko", "sinkhorn", "batch"])
    ap.add_argument(
        "--configs",
        default=",".join(DEFAULT_CONFIGS),
        help="jko suite: comma-separated name/grad[@eps] (default: tuned/contrib/base x implicit/unrolled)",
    )
    ap.add_argument("--repeats", type=int, default=3, help="best of N per side and input (3)")
    ap.add_argument("--pools", type=int, default=15, help="SciFact parity pools for the jko suite (15; 0 = none)")
    ap.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "jkofast_ab"),
        help="folder for the exported packages (reused; keeps their Numba cache)",
    )
    ap.add_argument("--json", help="write the figures as JSON")
    a = ap.parse_args(argv)
    sides = {"base": import_side(a.base, a.cache), "head": import_side(a.head, a.cache)}
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(
        f"base = {sides['base'][0]}, head = {sides['head'][0]}; suite {a.suite}, best of {a.repeats} CPU time "
        f"per side and input, alternating, 1 thread; load average {load:.2f}",
        flush=True,
    )
    if a.suite == "jko":
        rows = suite_jko(sides, [c.strip() for c in a.configs.split(",") if c.strip()], a.repeats, a.pools)
    elif a.suite == "sinkhorn":
        rows = suite_sinkhorn(sides, a.repeats)
    else:
        rows = suite_batch(sides, a.repeats)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(
                {
                    "base": sides["base"][0],
                    "head": sides["head"][0],
                    "suite": a.suite,
                    "load": load,
                    "repeats": a.repeats,
                    "rows": rows,
                },
                fh,
                indent=1,
            )


if __name__ == "__main__":
    main()
