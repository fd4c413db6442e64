"""Forward + backward of the drop-in loss: jkofast's hand-written gradient vs the published autograd.

    python benchmarks/tools/compare_dropin_grad.py --published DIR [--pools 30] [--repeat 7]

``DIR`` holds the published solver module (``jko.py``, from ``src/`` of the JKO-RAG repository); it
needs PyTorch (``pip install "jkofast[torch]"``). Nothing of the published code is stored here.

**Inputs**: the ``wc`` log-marginal pairs and C of the 30 parity-fixture pools, M = 200
(``compare_published_loss.pool_inputs``), as float32 (what the published scripts run) and float64.

**Settings**: the published defaults (eps 0.1, n_iter 60, n_iter_grad 3) and the NM-JKO end-to-end
call (eps 0.2, n_iter 30, n_iter_grad 4). Per call, all three inputs require grad:

* ``published``: ``pub.log_sinkhorn_loss(...)`` then ``loss.backward()`` (torch autograd);
* ``jkofast_torch``: ``jkofast.compat.torch.log_sinkhorn_loss(...)`` then ``loss.backward()``;
* ``jkofast_numpy``: ``jkofast.compat.log_sinkhorn_loss_and_grad(...)`` on NumPy arrays.

One thread each (``torch.set_num_threads(1)`` after numba's pool starts, as in
``compare_published_loss.py``; asserted), rounds interleaved, the median of ``--repeat`` rounds of
wall time per call over the pools (the typical round), the best round too, and the median of process
CPU time (steadier on a shared machine). **Values**: per
setting, the largest deviation of the jkofast gradients from the published float64 autograd,
relative to each gradient's largest entry (float64 inputs).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np

SETTINGS = {"defaults": (0.1, 60, 3), "nm_jko_e2e": (0.2, 30, 4)}


def _pool_inputs(n_pools):
    path = os.path.join(os.path.dirname(__file__), "compare_published_loss.py")
    spec = importlib.util.spec_from_file_location("compare_published_loss", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fx = mod.load_parity_fixture()
    return [mod.pool_inputs(fx, q) for q in range(n_pools)]


def _published_module(path: str):
    sys.path.insert(0, path)
    return importlib.import_module("jko")


def _tensors(torch, pool, dtype):
    a, b = pool["wc"]
    return [torch.tensor(np.asarray(x, np.float64), dtype=dtype, requires_grad=True) for x in (a, b, pool["C"])]


def _torch_grads(torch, fn, pool, dtype, eps, n_iter, n_grad):
    ts = _tensors(torch, pool, dtype)
    fn(*ts, eps=eps, n_iter=n_iter, n_iter_grad=n_grad).backward()
    return [t.grad.double().numpy() for t in ts]


def compare_values(torch, pub, pools) -> dict:
    from jkofast import compat
    from jkofast.compat import torch as jkt

    out = {}
    for name, (eps, n_iter, n_grad) in SETTINGS.items():
        worst = {"numpy": 0.0, "torch_adapter": 0.0}
        for pi in pools:
            want = _torch_grads(torch, pub.log_sinkhorn_loss, pi, torch.float64, eps, n_iter, n_grad)
            a, b = (x.astype(np.float64) for x in pi["wc"])
            got_np = compat.log_sinkhorn_loss_and_grad(a, b, pi["C"].astype(np.float64), eps, n_iter, n_grad)[1:]
            got_t = _torch_grads(torch, jkt.log_sinkhorn_loss, pi, torch.float64, eps, n_iter, n_grad)
            for key, got in (("numpy", got_np), ("torch_adapter", got_t)):
                for x, y in zip(got, want):
                    worst[key] = max(worst[key], float(np.abs(x - y).max() / np.abs(y).max()))
        out[name] = {"max_rel_dev_vs_published_float64": worst}
    return out


def compare_speed(torch, pub, pools, repeat: int) -> dict:
    import numba

    from jkofast import compat, numba_threads
    from jkofast.compat import torch as jkt

    out = {}
    with numba_threads(1):
        torch.set_num_threads(1)  # after numba's pool is up (shared libgomp; see compare_published_loss.py)
        threads = {"torch": torch.get_num_threads(), "numba": numba.get_num_threads()}
        assert threads == {"torch": 1, "numba": 1}, threads
        for name, (eps, n_iter, n_grad) in SETTINGS.items():
            for dtype_name in ("float32", "float64"):
                dt = getattr(torch, dtype_name)
                t_in = [_tensors(torch, pi, dt) for pi in pools]
                np_in = [tuple(t.detach().numpy() for t in ts) for ts in t_in]

                def fwd_bwd(fn, t_in=t_in, eps=eps, n_iter=n_iter, n_grad=n_grad):
                    def run():
                        for ts in t_in:
                            for t in ts:
                                t.grad = None
                            fn(*ts, eps=eps, n_iter=n_iter, n_iter_grad=n_grad).backward()

                    return run

                def jk_numpy(np_in=np_in, eps=eps, n_iter=n_iter, n_grad=n_grad):
                    for a, b, C in np_in:
                        compat.log_sinkhorn_loss_and_grad(a, b, C, eps, n_iter, n_grad)

                fns = {
                    "published": fwd_bwd(pub.log_sinkhorn_loss),
                    "jkofast_torch": fwd_bwd(jkt.log_sinkhorn_loss),
                    "jkofast_numpy": jk_numpy,
                }
                times = {k: [] for k in fns}
                cpu = {k: [] for k in fns}
                for fn in fns.values():  # warm-up: compilation, allocator
                    fn()
                for _ in range(repeat):
                    for k, fn in fns.items():
                        c0 = time.process_time()
                        t0 = time.perf_counter()
                        fn()
                        times[k].append(1e3 * (time.perf_counter() - t0) / len(pools))
                        cpu[k].append(1e3 * (time.process_time() - c0) / len(pools))
                med = {k: float(np.median(v)) for k, v in times.items()}
                med_cpu = {k: float(np.median(v)) for k, v in cpu.items()}
                out[f"{name}/{dtype_name}"] = {
                    "eps": eps,
                    "n_iter": n_iter,
                    "n_iter_grad": n_grad,
                    "median_ms_per_call": med,
                    "best_ms_per_call": {k: float(min(v)) for k, v in times.items()},
                    "speedup_torch_adapter": med["published"] / med["jkofast_torch"],
                    "speedup_numpy": med["published"] / med["jkofast_numpy"],
                    "median_cpu_ms_per_call": med_cpu,
                    "speedup_torch_adapter_cpu_time": med_cpu["published"] / med_cpu["jkofast_torch"],
                }
    return {
        "M": int(pools[0]["C"].shape[0]),
        "pools": len(pools),
        "repeat": repeat,
        "threads_seen": threads,
        "torch": torch.__version__,
        "settings": out,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--published", required=True, help="folder holding the published jko.py")
    ap.add_argument("--pools", type=int, default=30, help="fixture pools to use (<= 30)")
    ap.add_argument("--repeat", type=int, default=7, help="timed rounds (median and best reported)")
    ap.add_argument("--no-values", action="store_true", help="speed only")
    args = ap.parse_args(argv)
    import torch

    pub = _published_module(args.published)
    pools = _pool_inputs(min(args.pools, 30))
    report = {}
    if not args.no_values:
        report["values"] = compare_values(torch, pub, pools)
    report["speed"] = compare_speed(torch, pub, pools, args.repeat)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
