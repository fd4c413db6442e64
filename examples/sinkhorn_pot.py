"""Use :func:`jkofast.sinkhorn_log` where you would call POT's log-domain Sinkhorn.

What it shows: entropic optimal transport between two point clouds, solved by jkofast's
log-domain Sinkhorn; the plan, its cost and the marginal error, compared with POT's
``ot.sinkhorn(..., method="sinkhorn_log")`` on the same problem when POT is installed (``pip install "jkofast[bench]"``
or ``pip install pot``), else jkofast's result alone.

Run it::

    python examples/sinkhorn_pot.py              # 500 x 400 points
    python examples/sinkhorn_pot.py --tiny       # 40 x 30 points
    python examples/sinkhorn_pot.py --n 2000 --m 2000 --eps 0.01
"""

import argparse
import time

import numpy as np

import jkofast


def main() -> None:
    """Solve one entropic OT problem with jkofast, and with POT when installed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500, help="source points")
    ap.add_argument("--m", type=int, default=400, help="target points")
    ap.add_argument("--eps", type=float, default=0.05, help="entropic regulariser")
    ap.add_argument("--tiny", action="store_true", help="40 x 30 points")
    args = ap.parse_args()
    if args.tiny:
        args.n, args.m = 40, 30

    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.n, 2))
    y = rng.standard_normal((args.m, 2)) + 1.0
    C = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    C /= C.max()
    a = np.full(args.n, 1.0 / args.n)
    b = np.full(args.m, 1.0 / args.m)

    # POT: P = ot.sinkhorn(a, b, C, reg=eps, method="sinkhorn_log"); here the result holds the duals, the plan on demand
    jkofast.sinkhorn_log(a, b, C, args.eps, max_iter=1, tol=None)  # the first call loads the compiled kernel
    t0 = time.perf_counter()
    res = jkofast.sinkhorn_log(a, b, C, args.eps, max_iter=10000, tol=1e-9)
    P = res.plan(C, args.eps)
    t_jk = time.perf_counter() - t0
    print(
        f"jkofast: cost <P, C> {res.cost:.6f}, {res.n_iter} iterations, converged {res.converged}, "
        f"marginal error {res.marginal_error:.2e}, {t_jk * 1e3:.1f} ms"
    )

    try:
        import ot
    except ImportError:
        print("POT is not installed (pip install pot): no comparison")
        return
    t0 = time.perf_counter()
    P_ot = ot.sinkhorn(a, b, C, reg=args.eps, method="sinkhorn_log", numItermax=10000, stopThr=1e-9)
    t_ot = time.perf_counter() - t0
    print(f"POT:     cost <P, C> {(P_ot * C).sum():.6f}, {t_ot * 1e3:.1f} ms")
    print(f"max |P_jkofast - P_POT| = {np.abs(P - P_ot).max():.2e}")


if __name__ == "__main__":
    main()
