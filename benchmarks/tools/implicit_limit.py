"""The ``grad="implicit"`` path at its limit: old vs new side by side, and what bounds it.

    python benchmarks/tools/implicit_limit.py [--base HEAD] [--overlay FILE ...] [--extra SRC=DEST ...]
           [--repeats 5] [--synthetic 10] [--config tuned] [--set key=value ...] [--set-new key=value ...]
           [--json out.json]

Two packages are imported in one process (Numba at 1 thread, ``NUMBA_NUM_THREADS=1`` is set
here before Numba loads):

* **old** — ``git archive BASE jkofast`` as the renamed package ``jkofast_<sha12>``
  (``benchmarks/tools/ab_compare.py``);
* **new** — the same export with the working tree's ``--overlay`` files copied over it
  (default: the OT kernels this tool measures, ``jkofast/kernels/ot/{transport,sinkhorn_log,dual,ieee}.py``)
  and ``--extra SRC=DEST`` files from anywhere (an experimental copy of a module kept outside
  the repository), every ``jkofast`` module reference renamed. Only the named files differ
  from BASE, so edits in progress elsewhere in the working tree do not leak into the figures.

Inputs (the same arrays for both sides): the 30 SciFact parity pools of the fixture, and
M = 200 synthetic pools of two kinds: ``clustered`` (SPEC A.4.7: 20 tight clusters of 10,
the README's synthetic pool; seeds 0..n-1) and ``synthpools`` (``make_synthetic_pools.py``:
500 clusters, gamma BM25-like scores; the first n queries of a 5,000-document corpus). Per
pool, old and new ``run_jko`` alternate ``--repeats`` times; the best CPU time
(``time.process_time``) of each is kept. Printed per set: median / mean / max ms per query,
the ratio, parity against the fixture (L1 of p_T and top-10 sets, SciFact) and the largest
|Δp| between the sides.

What bounds it: a serial copy of the implicit flow (each side's own stage kernels and
``w_implicit_counted``, so the counts are before and after) counts per query the M x M sweeps
by stage — the ``Ks p`` of the energy, the Sinkhorn iterations (a row and a column sweep each),
the gradient's set-up (three) and PCG steps (two each, Newton steps included) — checks that its
p_T equals that side's ``run_jko`` bit for bit, and prices them with a measured sweep
(``matvec_lp`` on a float32 200 x 200 operator; a fused ``matvec2_lp`` at its own cost):
``sweeps x cost`` next to the measured time is the roofline account, the rest is the O(M)
vector work (exp / log / divisions) of the inner steps. The copy is also timed in three parts
(operators and scratch only; plus the flow's own stages — log-softmax, energy, warm start,
Adam — without the transport term; everything), so the account splits the time into
operators, flow stages and transport, each beside its sweeps.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import ab_compare as ab  # noqa: E402

DEFAULT_OVERLAY = [
    "jkofast/kernels/ot/transport.py",
    "jkofast/kernels/ot/sinkhorn_log.py",
    "jkofast/kernels/ot/dual.py",
    "jkofast/kernels/ot/ieee.py",
    "jkofast/kernels/jko/solver.py",
]


# ---------------------------------------------------------------------------------------------
# sides
# ---------------------------------------------------------------------------------------------
def overlay_package(base_name: str, cache: str, files: list[tuple[str, str]]) -> str:
    """Copy the export ``base_name`` to a package named after the overlay's content hash and
    write ``files`` (``(source path, path inside the repo)``) over it, renamed."""
    h = hashlib.sha1(base_name.encode() + b"\0overlay-v2")
    texts = []
    for src, dest in files:
        with open(src, encoding="utf-8") as fh:
            t = fh.read()
        texts.append((dest, t))
        h.update(dest.encode() + b"\0" + t.encode())
    name = f"jkofast_new{h.hexdigest()[:10]}"
    pkg = os.path.join(cache, name)
    if not os.path.exists(os.path.join(pkg, ".overlay_complete")):
        if os.path.exists(pkg):
            shutil.rmtree(pkg)
        shutil.copytree(
            os.path.join(cache, base_name), pkg, ignore=shutil.ignore_patterns("__pycache__", ".ab_export_complete")
        )
        for dirpath, _dirs, fnames in os.walk(pkg):  # the copy's own references: base name -> new name
            for f in fnames:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8") as fh:
                        t = fh.read()
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(t.replace(base_name, name))
        for dest, t in texts:
            rel = dest.split("/", 1)[1] if dest.startswith("jkofast/") else dest
            with open(os.path.join(pkg, rel), "w", encoding="utf-8") as fh:
                fh.write(ab.rename_source(t, name))
        with open(os.path.join(pkg, ".overlay_complete"), "w") as fh:
            fh.write("\n".join(d for d, _ in texts) + "\n")
    return name


def _files(overlay: list[str], extra: list[str]) -> list[tuple[str, str]]:
    files = [(os.path.join(ROOT, f), f) for f in overlay]
    for spec in extra:
        src, _, dest = spec.partition("=")
        files.append((src, dest))
    return files


def sides(base: str, overlay: list[str], extra: list[str], cache: str) -> dict:
    base_name = ab.export_package(base, cache)
    new_name = overlay_package(base_name, cache, _files(overlay, extra))
    if cache not in sys.path:
        sys.path.insert(0, cache)
    return {"old": importlib.import_module(base_name), "new": importlib.import_module(new_name)}


def sub(pkg, mod: str):
    return importlib.import_module(f"{pkg.__name__}.{mod}")


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------
def _minmax(x):
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 1e-9 else np.zeros_like(x)


def _p0(E, tau0):
    x = -E / max(tau0, 1e-9)
    e = np.exp(x - x.max())
    return e / e.sum()


def scifact_pools(tau0: float) -> list:
    z = np.load(ab.FIXTURE)
    return [ab.scifact_pool(z, q, tau0) for q in range(z["cand_idx"].shape[0])], z


def clustered_pools(n: int, tau0: float) -> list:
    out = []
    for seed in range(n):
        _, E, C, K = ab.clustered_pool(seed=seed)
        out.append((_p0(E, tau0), E, C, K))
    return out


def synthpools(n: int, tau0: float, m: int = 200) -> list:
    """The first ``n`` pools of ``make_synthetic_pools.py`` (5,000 docs): C, K from the
    clustered embeddings, E = -minmax(score)."""
    import make_synthetic_pools as msp

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        msp.main([tmp, "--queries", str(n), "--pool", str(m), "--docs", "5000"])
        Z = np.load(os.path.join(tmp, "E.npy")).astype(np.float64)
        docs, scores = [], []
        with open(os.path.join(tmp, "run.trec")) as fh:
            for line in fh:
                _, _, d, _, sc, _ = line.split()
                docs.append(int(d[3:]))
                scores.append(float(sc))
    docs = np.array(docs).reshape(n, m)
    scores = np.array(scores).reshape(n, m)
    for q in range(n):
        Zq = Z[docs[q]]
        S = np.clip(Zq @ Zq.T, -1, 1)
        E = -_minmax(scores[q])
        out.append((_p0(E, tau0), E, (1 - S) ** 2, np.maximum(S, 0)))
    return out


# ---------------------------------------------------------------------------------------------
# timing and parity
# ---------------------------------------------------------------------------------------------
def time_set(mods: dict, cfgs: dict, pools: list, repeats: int):
    """Best-of-``repeats`` CPU ms per pool for each side (alternating) and the outputs."""
    ms = {k: [] for k in mods}
    outs = {k: [] for k in mods}
    for a in pools:
        best = {k: np.inf for k in mods}
        last = {}
        for _ in range(repeats):
            for k, jm in mods.items():
                c = time.process_time()
                last[k] = jm.run_jko(*a, cfgs[k])
                best[k] = min(best[k], time.process_time() - c)
        for k in mods:
            ms[k].append(1e3 * best[k])
            outs[k].append(np.asarray(last[k], np.float64))
    return {k: np.array(v) for k, v in ms.items()}, outs


def _top10(p):
    return set(np.argsort(-np.asarray(p, np.float64), kind="stable")[:10].tolist())


def parity(outs: list, ref: np.ndarray) -> dict:
    l1 = np.array([np.abs(p - ref[q]).sum() for q, p in enumerate(outs)])
    same = sum(_top10(p) == _top10(ref[q]) for q, p in enumerate(outs))
    return {"l1_max": float(l1.max()), "l1_median": float(np.median(l1)), "top10_same": int(same), "n": len(outs)}


# ---------------------------------------------------------------------------------------------
# counting copy of the implicit flow (serial; one side's kernels)
# ---------------------------------------------------------------------------------------------
N_COUNTS = 11


def _jit(f):
    from numba import njit

    return njit(f)


def _cycle_counter():
    """A jitted ``cycles()``: the CPU's time-stamp counter (``llvm.readcyclecounter``), for stage timing."""
    from llvmlite import ir
    from numba import njit, types
    from numba.extending import intrinsic

    @intrinsic
    def _rdtsc(typingctx):
        def codegen(context, builder, signature, args):
            fn = builder.module.declare_intrinsic("llvm.readcyclecounter", (), ir.FunctionType(ir.IntType(64), []))
            return builder.call(fn, [])

        return types.int64(), codegen

    @njit
    def cycles():
        return _rdtsc()

    return cycles


CYCLES = None


def tsc_per_ms() -> float:
    """Time-stamp counter ticks per millisecond (against ``time.perf_counter`` over 0.2 s, busy)."""
    c0, t0 = CYCLES(), time.perf_counter()
    while time.perf_counter() - t0 < 0.2:
        pass
    return (CYCLES() - c0) / (1e3 * (time.perf_counter() - t0))


# stages of one query timed by the counting copy (``parts=3``), and the exps / logs each calls per unit
STAGES = ("outer (outer_start, softmax)", "log_softmax", "energy", "warm_start", "transport", "grad + Adam")


@_jit
def _store(r, counts, fused):
    """Add one ``w_implicit_counted`` call's counts: three plain set-up sweeps, or with ``fused``
    (``KCᵀ`` stored as ``KC`` itself) one plain (``Π t``) and one fused (``KC v`` with ``KC u``)."""
    counts[2] += r[3]
    counts[3] += r[4]
    counts[4] += r[5]
    counts[5] += r[6]
    counts[6] += r[7]
    counts[7] += r[8]
    if fused:
        counts[9] += 1
        counts[10] += 1
    else:
        counts[9] += 3


def make_counter(pkg):
    """A jitted copy of the implicit branch of ``jko_query`` that counts the sweeps.

    Built from the package's own stage kernels (``kernels.jko.solver``) and
    ``w_implicit_counted`` (``kernels.ot.transport``); mode ``wasserstein``, objective
    ``transport``. ``counts`` (int64, ``N_COUNTS``): float32-operator steps, inner steps, update
    pairs, plain row sweeps, column sweeps fused with ``Kᵀ(u ⊙ x)``, plain column sweeps, Newton
    PCG steps, gradient PCG steps, fallbacks (a step the scaled path could not take: the copy
    stops counting there and returns False), the gradient's plain set-up sweeps (``KC v``, ``KCᵀu``,
    ``Π t``; ``Πᵀx`` is a plain column sweep when not fused), its fused set-up sweeps (``KC v``
    and ``KC u`` in one pass, where the side's operators store ``KCᵀ`` as ``KC`` itself).
    """
    from numba import njit

    S = sub(pkg, "kernels.jko.solver")
    T = sub(pkg, "kernels.ot.transport")
    prox_weights, transport_operators, jko_work = S.prox_weights, S.transport_operators, S.jko_work
    outer_start, log_softmax, energy_terms = S.outer_start, S.log_softmax, S.energy_terms
    implicit_warm_start, add_transport_grad, adam_step, softmax = (
        S.implicit_warm_start,
        S.add_transport_grad,
        S.adam_step,
        S.softmax,
    )
    counted, Limits, store = T.w_implicit_counted, T.Limits, _store
    global CYCLES
    if CYCLES is None:
        CYCLES = _cycle_counter()
    cycles = CYCLES
    if log_softmax.py_func.__code__.co_argcount == 4:  # the implicit path's exp_tab flag

        @njit(inline="always")
        def lsm(theta, a, p):
            log_softmax(theta, a, p, True)

    else:
        lsm = log_softmax

    @njit
    def flow(p0, E, C, C_T, Ks, prm, p_out, counts, parts, cyc):
        w_w, _, _, _ = prox_weights(prm)
        lim = Limits(prm.max_iter, prm.cg_tol, prm.cg_max, prm.newton_every)
        op = transport_operators(C, C_T, Ks, prm, True, True, True, True, None)
        if op.lowp:
            fused = op.ops32.KC.ctypes.data == op.ops32.KCT.ctypes.data
        else:
            fused = op.ops64.KC.ctypes.data == op.ops64.KCT.ctypes.data
        fl, sk, w, _, ws = jko_work(p0.shape[0], 1, None, True)
        theta, a, p, b, q, gh, kp, mom, vel, abar = fl
        diag = np.zeros(2, np.int64)
        for i in range(q.shape[0]):
            q[i] = p0[i]
            abar[i] = 0.0
        if parts == 0:  # operators and scratch only
            return True
        timed = parts == 3  # the time-stamp counter around each stage, summed into cyc
        c0 = cycles() if timed else 0
        for _t in range(prm.T):
            outer_start(q, b, sk.qb, theta, mom, vel)
            if timed:
                c1 = cycles()
                cyc[0] += c1 - c0
                c0 = c1
            for s_ in range(1, prm.inner + 1):
                lsm(theta, a, p)
                if timed:
                    c1 = cycles()
                    cyc[1] += c1 - c0
                    c0 = c1
                energy_terms(E, prm.lam, prm.rho, Ks, op, a, p, kp, gh, True)
                if timed:
                    c1 = cycles()
                    cyc[2] += c1 - c0
                    c0 = c1
                tol_eff = implicit_warm_start(p, sk.pa, s_, prm.tol, prm.tol_step, ws)
                if timed:
                    c1 = cycles()
                    cyc[3] += c1 - c0
                    c0 = c1
                if parts == 1:  # the flow's own O(M) stages without the transport term
                    add_transport_grad(w_w, p, abar, 0, gh, diag)
                    adam_step(theta, gh, p, mom, vel, s_, prm.lr)
                    continue
                if op.lowp:
                    r = counted(op.ops32, tol_eff, lim, ws.vs, ws.xw, abar, sk, w)
                    counts[0] += 1
                else:
                    r = counted(op.ops64, tol_eff, lim, ws.vs, ws.xw, abar, sk, w)
                if not r[0]:
                    counts[8] += 1
                    return False
                if timed:
                    c1 = cycles()
                    cyc[4] += c1 - c0
                    c0 = c1
                counts[1] += 1
                store(r, counts, fused)
                flags = r[2]
                add_transport_grad(w_w, p, abar, flags, gh, diag)
                adam_step(theta, gh, p, mom, vel, s_, prm.lr)
                if timed:
                    c1 = cycles()
                    cyc[5] += c1 - c0
                    c0 = c1
            softmax(theta, q)
        for i in range(q.shape[0]):
            p_out[i] = q[i]
        return True

    solver = sub(pkg, "jko.solver")

    def run(p0, E, C, K, cfg, parts=2, repeats=0):
        """``(ok, p_T, counts, ms)``; with ``repeats``, ``ms`` the best CPU ms of ``parts`` (0: operators,
        1: + the flow's stages without the transport term, 2: everything), with ``parts=3`` the stage
        cycles (``STAGES``) of the repeat whose total was least."""
        p0c, Ec, Cc, C_T, Ks = solver._check_pool(p0, E, C, K)
        counts = np.zeros(N_COUNTS, np.int64)
        p = np.empty(Ec.shape[0])
        prm = cfg._params(False)
        cyc = np.zeros(len(STAGES), np.int64)
        ok = flow(p0c, Ec, Cc, C_T, Ks, prm, p, counts, parts, cyc)
        best, best_cyc = np.inf, None
        for _ in range(repeats):
            cyc[:] = 0
            c = time.process_time()
            flow(p0c, Ec, Cc, C_T, Ks, prm, p, np.zeros(N_COUNTS, np.int64), parts, cyc)
            el = time.process_time() - c
            if parts == 3:
                el = cyc.sum()
                if el < best:
                    best_cyc = cyc.copy()
            best = min(best, el)
        return ok, p, counts, best_cyc if parts == 3 else 1e3 * best

    return run


def sweep_costs(pkg, m: int = 200, reps: int = 20000) -> dict:
    """Measured µs per M x M sweep: float32 and float64 ``matvec_lp``, float32 ``matvec2_lp``. Best of
    7 CPU-time runs of ``reps`` back-to-back calls (operands in L2, as in the flow)."""
    from numba import njit

    K = sub(pkg, "kernels.ot.sinkhorn_log")
    mv = K.matvec_lp
    mv2 = getattr(K, "matvec2_lp", None)

    @njit
    def loop1(A, x, out, n):
        for _ in range(n):
            mv(A, x, out)
            x[0] = x[0] + out[0] * 1e-30

    def best_of(f, *args):
        f(*args, 10)
        best = np.inf
        for _ in range(7):
            t = time.process_time()
            f(*args, reps)
            best = min(best, (time.process_time() - t) / reps)
        return 1e6 * best

    rng = np.random.default_rng(0)
    res = {}
    for dt in (np.float32, np.float64):
        A = rng.random((m, m)).astype(dt)
        res[f"matvec_lp_{np.dtype(dt).name}_us"] = best_of(loop1, A, rng.random(m).astype(dt), np.empty(m))
    A = rng.random((m, m)).astype(np.float32)
    x, y = rng.random(m).astype(np.float32), rng.random(m).astype(np.float32)
    o1, o2 = np.empty(m), np.empty(m)
    if mv2 is not None:

        @njit
        def loop2(A, x, y, o1, o2, n):
            for _ in range(n):
                mv2(A, x, y, o1, o2)
                x[0] = x[0] + o1[0] * 1e-30

        res["matvec2_lp_float32_us"] = best_of(loop2, A, x, y, o1, o2)
    return res


def account(counts: np.ndarray, cost: dict) -> dict:
    """M x M products per query by stage (``counts`` of ``make_counter``) and their price.

    A product is one operator times one vector: per inner step the energy's ``Ks p``, a row and a
    column product per Sinkhorn pair (plus the row product that checks the last pair), four for
    the gradient's set-up (``KC v``, ``KCᵀu``, ``Πᵀx``, ``Π t``) and two per PCG step. A pass is
    one sweep over the operators: a fused pass (``matvec2_lp``: ``Kᵀu`` and ``Kᵀ(u ⊙ x)``, or on a
    symmetric cost ``KC v`` and ``KC u``) computes two products and is priced at its own measured
    cost (``sweep_costs``; 1.5 plain sweeps where not measured).
    """
    steps = counts[1]
    f32 = counts[0] > 0
    c1 = cost["matvec_lp_float32_us"] if f32 else cost["matvec_lp_float64_us"]
    c2 = cost.get("matvec2_lp_float32_us", 1.5 * c1) if f32 else 1.5 * c1
    row, col2, col, setup = counts[3], counts[4], counts[5], counts[9]
    products = {
        "energy_Ks_p": steps,
        "sinkhorn_row": row,
        "sinkhorn_col": counts[2],
        "grad_setup": 4 * steps,
        "pcg_newton": 2 * counts[6],
        "pcg_grad": 2 * counts[7],
    }
    passes = {
        "plain": steps + row + col + setup + 2 * counts[6] + 2 * counts[7],
        "col2_fused": col2,
        "setup_fused": counts[10],
    }
    us = passes["plain"] * c1 + (col2 + counts[10]) * c2
    return {
        "inner_steps": float(steps),
        "pairs_per_step": counts[2] / steps,
        "newton_pcg_per_step": counts[6] / steps,
        "grad_pcg_per_step": counts[7] / steps,
        "sweeps_per_query": {k: float(v) for k, v in products.items()},
        "passes_per_query": {k: float(v) for k, v in passes.items()},
        "sweeps_per_step": sum(products.values()) / steps,
        "sweep_ms_per_query": us / 1e3,
    }


def stage_table(ms: np.ndarray, acc: dict, cost: dict, counts: np.ndarray, cfg, m: int) -> dict:
    """Per stage of the counting copy (``STAGES``): mean ms per query, the priced sweeps in it, the rest
    (the O(M) passes), and the exps / logs it calls (by construction of each stage; the transport term's
    exps are the M per Newton dual step, not counted here, so they read 0)."""
    f32 = counts[0] > 0
    c1 = cost["matvec_lp_float32_us"] if f32 else cost["matvec_lp_float64_us"]
    sweeps_ms = acc["sweep_ms_per_query"]
    ks_ms = acc["sweeps_per_query"]["energy_Ks_p"] * c1 / 1e3
    steps = acc["inner_steps"]
    sw = {"energy": ks_ms, "transport": sweeps_ms - ks_ms}
    exps = {"outer (outer_start, softmax)": 2 * m * cfg.T, "log_softmax": 2 * m * steps}
    logs = {"outer (outer_start, softmax)": m * cfg.T, "log_softmax": steps}
    out = {}
    for k, name in enumerate(STAGES):
        s_ms = sw.get(name, 0.0)
        out[name] = {
            "ms": float(ms[k]),
            "sweep_ms": s_ms,
            "om_ms": float(ms[k]) - s_ms,
            "exps": float(exps.get(name, 0)),
            "logs": float(logs.get(name, 0)),
        }
    return out


def published_ratio(folder: str, jm: dict, cfgs: dict, pools: list, repeats: int, out: dict) -> dict:
    """The published torch ``run_jko`` (float32, unrolled: what the fixture's p_T came from) on ``pools`` with
    the same operating point, best CPU time of ``repeats`` per pool, alternating with old and new; both
    libraries at one thread (torch's count set after Numba's pool started, as compare_published_loss.py)."""
    import torch

    sys.path.insert(0, folder)
    pub = importlib.import_module("jko")
    torch.set_num_threads(1)
    assert torch.get_num_threads() == 1
    c = cfgs["new"]
    pcfg = pub.JKOConfig(
        h=c.h,
        lam=c.lam,
        rho=c.rho,
        sinkhorn_eps=c.sinkhorn_eps,
        sinkhorn_iter=c.sinkhorn_iter,
        sinkhorn_iter_grad=c.sinkhorn_iter_grad,
        inner_steps=c.inner_steps,
        inner_lr=c.inner_lr,
        T=c.T,
        mode=c.mode,
    )
    ms = {"published": [], "old": [], "new": []}
    for pool in pools:
        f32 = tuple(np.asarray(x, np.float32) for x in pool)
        fns = {"published": lambda f32=f32: pub.run_jko(*f32, pcfg)}
        fns.update({k: (lambda k=k, pool=pool: jm[k].run_jko(*pool, cfgs[k])) for k in jm})
        best = {k: np.inf for k in fns}
        for _ in range(repeats):
            for k, f in fns.items():
                t = time.process_time()
                f()
                best[k] = min(best[k], time.process_time() - t)
        for k in fns:
            ms[k].append(1e3 * best[k])
    res = {k: float(np.median(v)) for k, v in ms.items()}
    for k in jm:
        res[f"ratio_{k}"] = res["published"] / res[k]
        res[f"ratio_{k}_scifact_median"] = res["published"] / out["sets"]["scifact"][k]["median"]
    print(
        f"published run_jko (torch {torch.__version__}, 1 thread), {len(pools)} SciFact pools, best of {repeats}: "
        f"{res['published']:.0f} ms/query; same pools old {res['old']:.2f} ms ({res['ratio_old']:.0f}x), new "
        f"{res['new']:.2f} ms ({res['ratio_new']:.0f}x); against the 30-pool medians old "
        f"{res['ratio_old_scifact_median']:.0f}x, new {res['ratio_new_scifact_median']:.0f}x",
        flush=True,
    )
    return res


# ---------------------------------------------------------------------------------------------
def _summ(ms):
    return {"median": float(np.median(ms)), "mean": float(ms.mean()), "max": float(ms.max())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD", help="git ref of the old side (HEAD)")
    ap.add_argument("--overlay", nargs="*", default=DEFAULT_OVERLAY, help="working-tree files of the new side")
    ap.add_argument("--extra", nargs="*", default=[], help="SRC=DEST: a file from anywhere as repo path DEST")
    ap.add_argument("--config", default="tuned")
    ap.add_argument("--set", nargs="*", default=[], help="key=value config overrides (both sides), e.g. cg_tol=2e-3")
    ap.add_argument("--set-new", nargs="*", default=[], help="key=value overrides of the new side only")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--synthetic", type=int, default=10, help="pools per synthetic kind (10)")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "jkofast_implicit_limit"))
    ap.add_argument(
        "--published",
        help="folder holding the published solver's jko.py (needs torch): its run_jko "
        "timed on the first --published-pools SciFact pools, alternating with both sides",
    )
    ap.add_argument("--published-pools", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args(argv)

    mods = sides(a.base, a.overlay, a.extra, a.cache)
    import numba

    numba.set_num_threads(1)
    jm = {k: sub(p, "jko") for k, p in mods.items()}

    def conv(v):
        try:
            return int(v)
        except ValueError:
            try:
                return float(v)
            except ValueError:
                return v

    ov = dict(kv.split("=", 1) for kv in a.set)
    ovn = dict(kv.split("=", 1) for kv in a.set_new)
    ovc = {x: conv(y) for x, y in ov.items()}
    cfgs = {k: m.operating_point(a.config, grad="implicit", **ovc) for k, m in jm.items()}
    cfgs["new"] = cfgs["new"].replace(**{x: conv(y) for x, y in ovn.items()})
    tau0 = cfgs["new"].tau0
    load0 = os.getloadavg()
    print(f"old = {mods['old'].__name__} ({a.base}), new = {mods['new'].__name__} (+ {a.overlay} {a.extra})")
    print(f"config {a.config}/implicit {ov} new-only {ovn}; best of {a.repeats} CPU, alternating, 1 thread")
    print(f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)

    sci, z = scifact_pools(tau0)
    sets = {"scifact": sci}
    if a.synthetic:
        sets["clustered"] = clustered_pools(a.synthetic, tau0)
        sets["synthpools"] = synthpools(a.synthetic, tau0)
    t0 = time.perf_counter()
    for k in jm:
        jm[k].run_jko(*sci[0], cfgs[k].replace(T=1, inner_steps=2))
    print(f"warm-up (compile or cache load) {time.perf_counter() - t0:.1f} s", flush=True)

    out = {"load_start": load0, "config": a.config, "overrides": ov, "new_overrides": ovn, "sets": {}}
    ref = z[f"{a.config}_wasserstein/p_T"].astype(np.float64) if f"{a.config}_wasserstein/p_T" in z.files else None
    for name, pools in sets.items():
        ms, outs = time_set(jm, cfgs, pools, a.repeats)
        row = {k: _summ(v) for k, v in ms.items()}
        row["ratio_median"] = row["old"]["median"] / row["new"]["median"]
        row["max_abs_dp"] = float(max(np.abs(x - y).max() for x, y in zip(outs["old"], outs["new"], strict=True)))
        line = (
            f"{name:10s} ms/query median (mean, max): old {row['old']['median']:6.2f} ({row['old']['mean']:.2f}, "
            f"{row['old']['max']:.2f})  new {row['new']['median']:6.2f} ({row['new']['mean']:.2f}, "
            f"{row['new']['max']:.2f})  ratio {row['ratio_median']:.2f}x  max|dp| {row['max_abs_dp']:.1e}"
        )
        if name == "scifact" and ref is not None:
            row["parity"] = {k: parity(outs[k], ref) for k in jm}
            line += "".join(
                f"\n           parity {k}: L1 max {v['l1_max']:.2e} median {v['l1_median']:.2e}, "
                f"top-10 {v['top10_same']}/{v['n']}"
                for k, v in row["parity"].items()
            )
        out["sets"][name] = row
        print(line, flush=True)

    if a.published:
        out["published"] = published_ratio(a.published, jm, cfgs, sci[: a.published_pools], a.repeats, out)

    # the batched entry point (no per-call Python work): rerank_batch over the SciFact pools
    Zb = np.concatenate([z["pool_emb_f16"][q].astype(np.float32) for q in range(len(sci))])
    Eb = np.concatenate([np.asarray(x[1], np.float64) for x in sci])
    off = np.arange(0, Zb.shape[0] + 1, sci[0][1].shape[0], dtype=np.int64)
    for k in jm:
        cw = cfgs[k].replace(T=1, inner_steps=2)
        jm[k].rerank_batch(Eb[: off[1]], None, off[:2], embeddings=Zb[: off[1]], config=cw, n_threads=1)
    best = {k: np.inf for k in jm}
    for _ in range(a.repeats):
        for k in jm:
            c = time.process_time()
            jm[k].rerank_batch(Eb, None, off, embeddings=Zb, config=cfgs[k], n_threads=1)
            best[k] = min(best[k], time.process_time() - c)
    nb = len(off) - 1
    out["rerank_batch_scifact_ms_per_query"] = {k: 1e3 * v / nb for k, v in best.items()}
    print(
        f"rerank_batch, the {nb} SciFact pools (dense geometry in-kernel, 1 thread): old "
        f"{1e3 * best['old'] / nb:.2f} ms/query, new {1e3 * best['new'] / nb:.2f} ms/query "
        f"({best['old'] / best['new']:.2f}x)",
        flush=True,
    )

    # the account: counts x sweep cost vs measured
    cost = sweep_costs(mods["new"])
    global CYCLES
    if CYCLES is None:
        CYCLES = _cycle_counter()
    tick = tsc_per_ms()
    out["tsc_per_ms"] = tick
    out["sweep_cost_us"] = cost
    print("sweep cost (µs, M = 200): " + ", ".join(f"{k} {v:.2f}" for k, v in cost.items()), flush=True)
    for side in ("old", "new"):
        try:
            counter = make_counter(mods[side])
        except AttributeError as exc:  # a side without w_implicit_counted
            print(f"no counting copy of {side}: {exc}")
            continue
        for name, pools in sets.items():
            tot = np.zeros(N_COUNTS, np.int64)
            same = True
            part_ms = np.zeros((len(pools), 3))
            stage_cyc = np.zeros(len(STAGES))
            for k, pool in enumerate(pools):
                ok, p, c, part_ms[k, 2] = counter(*pool, cfgs[side], repeats=a.repeats)
                tot += c
                pn = np.asarray(jm[side].run_jko(*pool, cfgs[side]), np.float64)
                same &= bool(ok) and np.array_equal(p, pn)
                part_ms[k, 0] = counter(*pool, cfgs[side], parts=0, repeats=a.repeats)[3]
                part_ms[k, 1] = counter(*pool, cfgs[side], parts=1, repeats=a.repeats)[3]
                stage_cyc += counter(*pool, cfgs[side], parts=3, repeats=a.repeats)[3]
            acc = account(tot / len(pools), cost)
            acc["stages"] = stage_table(stage_cyc / len(pools) / tick, acc, cost, tot, cfgs[side], pools[0][1].shape[0])
            pm = part_ms.mean(0)
            acc["parts_ms_mean"] = {
                "operators": pm[0],
                "flow_stages_without_transport": pm[1] - pm[0],
                "transport": pm[2] - pm[1],
                "copy_total": pm[2],
            }
            acc["counting_copy_bitwise_equal"] = same
            acc["measured_ms_median"] = out["sets"][name][side]["median"]
            acc["measured_ms_mean"] = out["sets"][name][side]["mean"]
            out["sets"][name].setdefault("account", {})[side] = acc
            sw = acc["sweeps_per_query"]
            print(
                f"{name:10s} {side}: per step: Sinkhorn pairs {acc['pairs_per_step']:.2f}, grad PCG "
                f"{acc['grad_pcg_per_step']:.2f}, Newton PCG {acc['newton_pcg_per_step']:.2f} -> "
                f"{acc['sweeps_per_step']:.1f} sweeps/step ({', '.join(f'{k} {v:.0f}' for k, v in sw.items())} "
                f"per query); sweeps {acc['sweep_ms_per_query']:.2f} ms vs measured mean "
                f"{acc['measured_ms_mean']:.2f} ms ({100 * acc['sweep_ms_per_query'] / acc['measured_ms_mean']:.0f} %)"
                f"; copy == run_jko: {same}",
                flush=True,
            )
            for st, row in acc["stages"].items():
                print(
                    f"{'':10s}   {st:30s} {row['ms']:5.2f} ms/query: sweeps {row['sweep_ms']:5.2f} ms, O(M) "
                    f"{row['om_ms']:5.2f} ms; exps {row['exps']:7.0f}, logs {row['logs']:5.0f} per query",
                    flush=True,
                )
            pp = acc["parts_ms_mean"]
            ks = sw["energy_Ks_p"] * (cost["matvec_lp_float32_us"] if tot[0] else cost["matvec_lp_float64_us"]) / 1e3
            print(
                f"{'':10s} parts (copy, mean ms/query): operators {pp['operators']:.2f}, flow stages without the "
                f"transport term {pp['flow_stages_without_transport']:.2f} (its Ks p sweeps {ks:.2f}), transport "
                f"{pp['transport']:.2f} (its sweeps {acc['sweep_ms_per_query'] - ks:.2f}); "
                f"total {pp['copy_total']:.2f}",
                flush=True,
            )
    out["load_end"] = os.getloadavg()
    print(f"load average at end {out['load_end'][0]:.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
