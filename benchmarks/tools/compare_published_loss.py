"""``jkofast.compat.log_sinkhorn_loss`` vs the published JKO-RAG ``log_sinkhorn_loss``, side by side.

    python benchmarks/tools/compare_published_loss.py --published DIR           # values + speed
    python benchmarks/tools/compare_published_loss.py --published DIR --write-fixture tests/data/published_sinkhorn.npz

``DIR`` holds the published solver module (``jko.py``, from ``src/`` of the JKO-RAG repository);
it needs PyTorch, which jkofast never imports: run this script from an environment that has both
(e.g. a separate venv with ``torch numpy scipy numba`` and ``PYTHONPATH`` pointing at jkofast).
Nothing of the published code is stored here.

**Inputs** (``pool_inputs``): the 30 SciFact pools of the parity fixture
(``jkofast.datasets.beir.parity_fixture_path()``), M = 200 each.  ``C = (1 - clip(Z Zᵀ, -1, 1))²``
from the fixture's float16 embeddings (product in float64, then cast to float32); p0 = the base
operating point's start (``softmax(r / 0.1)`` of the (0.4, 0.6) min-max blend, as in
``tests/reference_ot.fixture_inputs``); p_T = the fixture's ``base_wasserstein/p_T``.
Log-marginal pairs (float32, logs taken by NumPy):

* ``wc``: the stability metric's lifting, ``p + 1e-8`` renormalised, for (p0, p_T);
* ``half``: ``wc`` with ``log 0.5`` added to ``log_q`` (unequal masses: checks that no
  renormalisation happens);
* ``dual``: ``log max(p_T, 1e-30)`` of ``contrib_wasserstein/p_T`` to the uniform target
  ``-log M``, the published ``run_jko_with_duals`` read-out.

**Settings** (``SETTINGS``): the stability metric (eps 0.1, 80 iterations), the published defaults
of ``log_sinkhorn_loss`` (eps 0.1, 60, n_iter_grad 3) and of ``log_sinkhorn_with_duals``
(eps 0.1, 60, n_iter_grad 0, with f and g), and the dual read-out of the contrib operating point
(eps 0.2, 60).  The published calls run under ``torch.no_grad()`` on float32 tensors, as in the
stability scripts; the value report also runs them on float64 tensors (same inputs), which separates
the published float32 rounding from any difference of method.

``--write-fixture`` stores the inputs that are not cheap to rebuild exactly (the float32 log
vectors), a checksum of each C, and the published outputs; ``tests/jko/test_compat.py`` reads it.

**Speed**: ``log_sinkhorn_loss`` at M = 200, eps 0.1, 80 iterations (the W_C setting), one pool
after another over the 30 pools, each library on its native inputs (torch tensors / NumPy
arrays, built outside the timed region), both on one thread (``torch.set_num_threads(1)``,
``jkofast.numba_threads(1)``); rounds interleaved (published, jkofast, published, ...), best of
``--repeat`` of wall time (and, separately, of process CPU time, steadier on a loaded machine);
also jkofast called directly on the torch tensors (conversion through ``__array__`` included).
torch's thread count is set after numba's pool starts: under numba's OpenMP layer both share
libgomp, and starting numba's pool put torch back on all cores (measured: the published loop then
ran ~20x slower on a 2-core machine); the run asserts both are at one thread.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time

import numpy as np

PAIRS = ("wc", "half", "dual")
# name -> (pair, eps, n_iter, n_iter_grad, with_duals)
SETTINGS = {
    "wc_eps0.1_it80": ("wc", 0.1, 80, 3, False),
    "wc_defaults": ("wc", 0.1, 60, 3, False),
    "wc_duals_defaults": ("wc", 0.1, 60, 0, True),
    "half_eps0.1_it80": ("half", 0.1, 80, 3, False),
    "dual_eps0.2_it60": ("dual", 0.2, 60, 0, True),
}


def _minmax(x):
    x = x.astype(np.float32)
    lo, hi = x.min(), x.max()
    if hi - lo < 1e-9:
        return np.zeros_like(x)
    return (x - lo) / (hi - lo)


def cost_matrix(emb_f16) -> np.ndarray:
    """``(1 - clip(Z Zᵀ, -1, 1))²`` in float64 from the float16 embeddings, cast to float32."""
    Z = emb_f16.astype(np.float64)
    return ((1.0 - np.clip(Z @ Z.T, -1.0, 1.0)) ** 2).astype(np.float32)


def _lift(p):
    p = p.astype(np.float32) + np.float32(1e-8)
    return p / p.sum()


def pool_inputs(fx, q: int) -> dict:
    """C and the float32 log-marginal pairs of fixture pool ``q`` (see the module docstring)."""
    C = cost_matrix(fx["pool_emb_f16"][q])
    r = (np.float32(0.4) * _minmax(fx["dense_pool"][q]) + np.float32(0.6) * _minmax(fx["bm25_pool"][q])).astype(
        np.float32
    )
    x = r / np.float32(0.1)
    e = np.exp(x - x.max())
    p0 = (e / e.sum()).astype(np.float32)
    pT = fx["base_wasserstein/p_T"][q].astype(np.float32)
    wc_p = np.log(_lift(p0)).astype(np.float32)
    wc_q = np.log(_lift(pT)).astype(np.float32)
    pd = fx["contrib_wasserstein/p_T"][q].astype(np.float32)
    dual_p = np.log(np.maximum(pd, np.float32(1e-30))).astype(np.float32)
    M = C.shape[0]
    return {
        "C": C,
        "wc": (wc_p, wc_q),
        "half": (wc_p, (wc_q + np.float32(np.log(0.5))).astype(np.float32)),
        "dual": (dual_p, np.full(M, -np.log(M), dtype=np.float32)),
    }


def load_parity_fixture() -> dict:
    from jkofast.datasets.beir import parity_fixture_path

    z = np.load(parity_fixture_path())
    return {k: z[k] for k in ("pool_emb_f16", "dense_pool", "bm25_pool", "base_wasserstein/p_T",
                              "contrib_wasserstein/p_T")}  # fmt: skip


def _published_module(path: str):
    sys.path.insert(0, path)
    return importlib.import_module("jko")


def run_published(pub, torch, inputs, setting, dtype=np.float32):
    pair, eps, n_iter, n_grad, duals = SETTINGS[setting]
    a, b = (torch.from_numpy(x.astype(dtype)) for x in inputs[pair])
    C = torch.from_numpy(inputs["C"].astype(dtype))
    with torch.no_grad():
        if duals:
            w, f, g = pub.log_sinkhorn_with_duals(a, b, C, eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
            return float(w), f.numpy().copy(), g.numpy().copy()
        return float(pub.log_sinkhorn_loss(a, b, C, eps=eps, n_iter=n_iter, n_iter_grad=n_grad)), None, None


def run_jkofast(inputs, setting):
    from jkofast import compat

    pair, eps, n_iter, n_grad, duals = SETTINGS[setting]
    a, b = inputs[pair]
    if duals:
        return compat.log_sinkhorn_with_duals(a, b, inputs["C"], eps=eps, n_iter=n_iter, n_iter_grad=n_grad)
    return compat.log_sinkhorn_loss(a, b, inputs["C"], eps=eps, n_iter=n_iter, n_iter_grad=n_grad), None, None


def compare_values(pub, torch, fx, n_pools: int, fixture_out: str | None) -> dict:
    out = {"n_pools": n_pools}
    store = {}
    pools = [pool_inputs(fx, q) for q in range(n_pools)]
    for pair in PAIRS:
        if pair != "half":  # half = wc + log 0.5, rebuilt exactly by the test
            store[f"{pair}/log_p"] = np.stack([pi[pair][0] for pi in pools])
            if pair == "wc":
                store[f"{pair}/log_q"] = np.stack([pi[pair][1] for pi in pools])
    store["C_sum"] = np.array([pi["C"].astype(np.float64).sum() for pi in pools])
    for s in SETTINGS:
        ws, wj, fs, gs, df, dg, r64, d64 = [], [], [], [], [], [], [], []
        for pi in pools:
            w_p, f_p, g_p = run_published(pub, torch, pi, s)
            w_j, f_j, g_j = run_jkofast(pi, s)
            # the published code on float64 tensors (same float32 inputs): isolates its float32 rounding
            w_64, f_64, g_64 = run_published(pub, torch, pi, s, np.float64)
            r64.append(abs(w_j - w_64) / abs(w_64))
            ws.append(w_p)
            wj.append(w_j)
            if f_p is not None:
                d64.append(max(np.max(np.abs(f_j - f_64)), np.max(np.abs(g_j - g_64))))
                fs.append(f_p)
                gs.append(g_p)
                df.append(float(np.max(np.abs(f_j.astype(np.float64) - f_p)) / np.max(np.abs(f_p))))
                dg.append(float(np.max(np.abs(g_j.astype(np.float64) - g_p)) / np.max(np.abs(g_p))))
        ws, wj = np.array(ws), np.array(wj)
        rel = np.abs(wj - ws) / np.abs(ws)
        out[s] = {
            "max_rel_loss": float(rel.max()),
            "median_rel_loss": float(np.median(rel)),
            "max_rel_loss_vs_published_float64": float(max(r64)),
        }
        if fs:
            out[s]["max_dual_err_rel_to_max_abs"] = {"f": max(df), "g": max(dg)}
            out[s]["max_abs_dual_err_vs_published_float64"] = float(max(d64))
            store[f"{s}/f"] = np.stack(fs)
            store[f"{s}/g"] = np.stack(gs)
        store[f"{s}/loss"] = ws.astype(np.float64)
    if fixture_out:
        how = "benchmarks/tools/compare_published_loss.py --write-fixture; published src/jko.py"
        store["how"] = np.array(f"{how}, torch {torch.__version__}")
        np.savez_compressed(fixture_out, **store)
        out["fixture"] = fixture_out
    return out


def compare_speed(pub, torch, fx, n_pools: int, repeat: int) -> dict:
    import numba

    from jkofast import compat, numba_threads

    pools = [pool_inputs(fx, q) for q in range(n_pools)]
    np_in = [(pi["wc"][0], pi["wc"][1], pi["C"]) for pi in pools]
    t_in = [tuple(torch.from_numpy(x) for x in t) for t in np_in]

    def published():
        with torch.no_grad():
            for a, b, C in t_in:
                float(pub.log_sinkhorn_loss(a, b, C, eps=0.1, n_iter=80))

    def jk_numpy():
        for a, b, C in np_in:
            compat.log_sinkhorn_loss(a, b, C, eps=0.1, n_iter=80)

    def jk_torch():
        for a, b, C in t_in:
            compat.log_sinkhorn_loss(a, b, C, eps=0.1, n_iter=80)

    fns = {
        "published": published,
        "jkofast": jk_numpy,
        "jkofast_on_torch_tensors": jk_torch,
    }
    best = dict.fromkeys(fns, np.inf)
    best_cpu = dict.fromkeys(fns, np.inf)
    with numba_threads(1):
        # after numba's pool is up: with the OpenMP layer, numba and torch share libgomp and starting
        # numba's pool resets torch's intra-op thread count (measured: torch went back to 2 threads and
        # the published loop got ~20x slower on this 2-core machine)
        torch.set_num_threads(1)
        for fn in fns.values():  # warm-up: compilation, allocator
            fn()
        threads = {"torch": torch.get_num_threads(), "numba": numba.get_num_threads()}
        assert threads == {"torch": 1, "numba": 1}, threads
        for _ in range(repeat):
            for name, fn in fns.items():
                c0 = time.process_time()
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
                best_cpu[name] = min(best_cpu[name], time.process_time() - c0)
    ms = {k: 1e3 * v / n_pools for k, v in best.items()}
    cpu = {k: 1e3 * v / n_pools for k, v in best_cpu.items()}
    return {
        "ms_per_call": ms,
        "cpu_ms_per_call": cpu,
        "speedup_vs_published": ms["published"] / ms["jkofast"],
        "speedup_vs_published_cpu_time": cpu["published"] / cpu["jkofast"],
        "speedup_on_torch_tensors": ms["published"] / ms["jkofast_on_torch_tensors"],
        "threads_seen": threads,
        "numba_threading_layer": numba.threading_layer(),
        "M": int(pools[0]["C"].shape[0]),
        "n_iter": 80,
        "eps": 0.1,
        "threads": 1,
        "repeat": repeat,
        "torch": torch.__version__,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--published", required=True, help="folder holding the published jko.py")
    ap.add_argument("--pools", type=int, default=30, help="fixture pools to use (<= 30)")
    ap.add_argument("--repeat", type=int, default=7, help="timed rounds (best of)")
    ap.add_argument("--write-fixture", default=None, help="write the published values to this .npz")
    ap.add_argument("--no-speed", action="store_true", help="values only")
    ap.add_argument("--no-values", action="store_true", help="speed only")
    args = ap.parse_args(argv)
    import torch

    pub = _published_module(args.published)
    fx = load_parity_fixture()
    n = min(args.pools, fx["pool_emb_f16"].shape[0])
    report = {}
    if not args.no_values or args.write_fixture:
        report["values"] = compare_values(pub, torch, fx, n, args.write_fixture)
    if not args.no_speed:
        report["speed"] = compare_speed(pub, torch, fx, n, args.repeat)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
