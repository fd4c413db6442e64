"""MR-JKO / SAM-JKO (SPEC A.6.3): the batched kernel against the naive two-stage oracle."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast import _status
from jkofast.jko.multires import coarse_config, fine_config, group_count, initial_rows, multires_rerank

# small flows (the oracle runs the published loop in NumPy)
CO = coarse_config(T=2, inner_steps=4)
FI = fine_config(T=2, inner_steps=5)


def _pools(sizes, seed=0, d=5):
    rng = np.random.default_rng(seed)
    Zs, rs = [], []
    for m in sizes:
        c = rng.normal(size=(4, d))
        Z = c[rng.integers(0, 4, m)] + 0.4 * rng.normal(size=(m, d))
        Zs.append(Z)
        rs.append(rng.random(m))
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return np.concatenate(Zs), np.concatenate(rs), off


def _oracle(Z, rel, off, q, G, G_keep, clustering="kmeans", beta=1.0, co=CO, fi=FI):
    s = slice(off[q], off[q + 1])
    return ref.mr_jko_naive(Z[s], rel[s], G, G_keep, co, fi, clustering, beta)


@pytest.mark.parametrize(("clustering", "beta"), [("kmeans", 1.0), ("sam", 0.5), ("sam", 2.0)])
def test_batch_matches_oracle(clustering, beta):
    Z, rel, off = _pools([14, 11, 16], seed=1)
    res = multires_rerank(rel, off, Z, G=4, G_keep=2, clustering=clustering, sam_beta=beta, coarse=CO, fine=FI)
    assert_array_equal(res.status, 0)
    for q in range(3):
        p, pool, passes, G = _oracle(Z, rel, off, q, 4, 2, clustering, beta)
        assert_allclose(res.pool(q), p, rtol=1e-9, atol=1e-12)
        assert_array_equal(np.flatnonzero(res.in_pool[off[q] : off[q + 1]]), pool)
        assert res.pool_size[q] == len(pool)
        assert res.lloyd_passes[q] == passes
        assert res.n_groups[q] == G


def test_output_is_a_distribution_on_the_refined_pool():
    Z, rel, off = _pools([30, 25], seed=2)
    res = multires_rerank(rel, off, Z, G=6, G_keep=2, clustering="sam", sam_beta=2.0, coarse=CO, fine=FI)
    for q in range(2):
        p = res.pool(q)
        inside = res.in_pool[off[q] : off[q + 1]]
        assert np.all(p[~inside] == 0.0)  # exactly 0 outside the refined pool
        assert np.all(p[inside] > 0)
        assert_allclose(p.sum(), 1.0, atol=1e-12)
        assert 2 <= res.pool_size[q] == inside.sum() <= off[q + 1] - off[q]


def test_group_count_rule():
    # G >= M -> max(2, M // 4) (SPEC A.6.3 step 1); one row: no clustering
    assert group_count(200, 20) == 20
    assert group_count(12, 50) == 3
    assert group_count(12, 12) == 3
    assert group_count(5, 50) == 2
    assert group_count(2, 2) == 2
    assert group_count(1, 50) == 0
    Z, rel, off = _pools([12, 5], seed=3)
    res = multires_rerank(rel, off, Z, G=50, G_keep=1, coarse=CO, fine=FI)
    assert_array_equal(res.n_groups, [3, 2])
    for q in range(2):
        p, pool, _, _ = _oracle(Z, rel, off, q, 50, 1)
        assert_allclose(res.pool(q), p, rtol=1e-9, atol=1e-12)


def test_g_keep_above_g_is_clamped_to_the_whole_pool():
    # SPEC: G_keep <- min(G_keep, G); keeping every group = every row, so the fine flow runs on the pool
    Z, rel, off = _pools([13], seed=4)
    res = multires_rerank(rel, off, Z, G=3, G_keep=10, coarse=CO, fine=FI)
    assert res.pool_size[0] == 13
    p, pool, _, _ = _oracle(Z, rel, off, 0, 3, 10)
    assert len(pool) == 13
    assert_allclose(res.p, p, rtol=1e-9, atol=1e-12)
    # the fine flow on the whole pool is the plain JKO flow with E = -minmax(rel), p0 = softmax(minmax(rel)/tau0)
    x = ref.mr_minmax_naive(rel)
    Zn = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    C, K = ref.geometry_dense_naive(Zn)
    pv, _ = ref.jko_naive(ref.mr_softmax_naive(x, FI.tau0), -x, C, K, h=FI.h, lam=FI.lam, rho=FI.rho,
                          eps=FI.sinkhorn_eps, T=FI.T, inner=FI.inner_steps)  # fmt: skip
    assert_allclose(res.p, pv, rtol=1e-9, atol=1e-12)


def test_fewer_than_two_members_falls_back_to_the_whole_pool():
    # an isolated, very relevant row that is an initial row forms a group of its own; the coarse
    # flow puts the most mass on it and G_keep = 1 keeps just that group -> whole pool
    M, G = 12, 3
    rng = np.random.default_rng(5)
    Z = np.tile([1.0, 0.0, 0.0], (M, 1)) + 0.05 * rng.normal(size=(M, 3))
    rel = np.full(M, 0.1) + 0.01 * rng.random(M)
    lone = int(initial_rows(M, G)[0])
    Z[lone] = [0.0, 0.0, 1.0]
    rel[lone] = 1.0
    off = np.array([0, M])
    p, pool, _, _ = ref.mr_jko_naive(Z, rel, G, 1, CO, FI)
    assert len(pool) == M  # the oracle took the fallback too
    res = multires_rerank(rel, off, Z, G=G, G_keep=1, coarse=CO, fine=FI)
    assert res.pool_size[0] == M
    assert res.in_pool.all()
    assert_allclose(res.p, p, rtol=1e-9, atol=1e-12)


def test_all_equal_relevance_is_defined():
    # minmax of a constant is all zeros (SPEC A.1): E = 0 and uniform p0 in both stages
    Z, _, off = _pools([15], seed=6)
    rel = np.full(15, 0.7)
    for clustering in ("kmeans", "sam"):
        res = multires_rerank(rel, off, Z, G=4, G_keep=2, clustering=clustering, sam_beta=2.0, coarse=CO, fine=FI)
        assert res.status[0] == 0
        p, pool, _, _ = _oracle(Z, rel, off, 0, 4, 2, clustering, 2.0)
        assert_allclose(res.p, p, rtol=1e-9, atol=1e-12)


def test_bad_pool_is_reported_by_index_and_the_others_return():
    Z, rel, off = _pools([10, 12, 9, 11], seed=7)
    good = multires_rerank(rel, off, Z, G=3, G_keep=1, coarse=CO, fine=FI)
    rel_bad = rel.copy()
    rel_bad[off[1] + 2] = np.nan
    Z_bad = Z.copy()
    Z_bad[off[2] + 1, 0] = np.inf
    off_e = np.array([0, 10, 10, 22, 31, 42])  # an empty pool at index 1
    r1 = multires_rerank(rel_bad, off, Z_bad, G=3, G_keep=1, coarse=CO, fine=FI)
    assert_array_equal(r1.status, [0, _status.BAD_INPUT, _status.BAD_INPUT, 0])
    assert "rel" in r1.errors[1] and "embeddings" in r1.errors[2]
    assert np.isnan(r1.pool(1)).all() and np.isnan(r1.pool(2)).all()
    assert_array_equal(r1.pool_size[1:3], 0)
    for q in (0, 3):
        assert_array_equal(r1.pool(q), good.pool(q))
    r2 = multires_rerank(rel, off_e, Z, G=3, G_keep=1, coarse=CO, fine=FI)
    assert_array_equal(r2.status, [0, _status.EMPTY, 0, 0, 0])
    assert_array_equal(r2.pool(2), good.pool(1))


def test_one_row_pool():
    res = multires_rerank([0.3], [0, 1], [[1.0, 2.0]], G=5, coarse=CO, fine=FI)
    assert res.status[0] == 0
    assert_array_equal(res.p, [1.0])
    assert res.pool_size[0] == 1


@pytest.mark.parametrize("grad", ["unrolled", "implicit"])
def test_thread_count_invariance(grad):
    from jkofast import numba_threads  # noqa: F401 (the wrapper scopes the threads itself)

    Z, rel, off = _pools([14, 12, 15, 13, 16], seed=8)
    kw = dict(G=4, G_keep=2, clustering="sam", sam_beta=2.0, coarse=CO.replace(grad=grad), fine=FI.replace(grad=grad))
    r1 = multires_rerank(rel, off, Z, n_threads=1, **kw)
    r2 = multires_rerank(rel, off, Z, n_threads=2, **kw)
    assert_array_equal(r1.p, r2.p)
    assert_array_equal(r1.in_pool, r2.in_pool)
    assert_array_equal(r1.lloyd_passes, r2.lloyd_passes)


def test_implicit_gradient_stays_close_to_unrolled():
    # both stages with the exact gradient: same refined pool on well-separated groups, p close
    Z, rel, off = _pools([20], seed=9)
    kw = dict(G=4, G_keep=2, clustering="sam", sam_beta=2.0)
    ru = multires_rerank(rel, off, Z, coarse=CO, fine=FI, **kw)
    ri = multires_rerank(rel, off, Z, coarse=CO.replace(grad="implicit"), fine=FI.replace(grad="implicit"), **kw)
    assert ri.status[0] == 0
    assert_allclose(ri.p.sum(), 1.0, atol=1e-12)
    assert np.all(ri.p[~ri.in_pool] == 0.0)
    # the unrolled gradient is inexact at the coarse eps 0.1 (SPEC A.4.7: whole flows differ by
    # L1 ~0.05 at the base config), so only the gross agreement is checked
    if np.array_equal(ri.in_pool, ru.in_pool):
        assert np.abs(ri.p - ru.p).sum() < 0.2
        assert np.argmax(ri.p) == np.argmax(ru.p)


def test_float32_rows_match_float64():
    Z, rel, off = _pools([14, 12], seed=10)
    Z32 = Z.astype(np.float32)
    a = multires_rerank(rel, off, Z32, G=4, G_keep=2, coarse=CO, fine=FI)
    b = multires_rerank(rel, off, Z32.astype(np.float64), G=4, G_keep=2, coarse=CO, fine=FI)
    assert_array_equal(a.p, b.p)  # float32 rows are widened exactly


def test_argument_errors():
    Z, rel, off = _pools([10], seed=11)
    kw = dict(coarse=CO, fine=FI)
    with pytest.raises(ValueError, match="sam_beta must be >= 0"):
        multires_rerank(rel, off, Z, clustering="sam", sam_beta=-0.5, **kw)
    with pytest.raises(ValueError, match="sam_beta must be >= 0"):
        multires_rerank(rel, off, Z, clustering="sam", sam_beta=np.nan, **kw)
    with pytest.raises(TypeError, match="sam_beta must be a real number"):
        multires_rerank(rel, off, Z, sam_beta="2", **kw)
    with pytest.raises(ValueError, match="clustering must be one of"):
        multires_rerank(rel, off, Z, clustering="spectral", **kw)
    with pytest.raises(ValueError, match="embeddings must be 2-dimensional"):
        multires_rerank(rel, off, Z[:, 0], **kw)
    with pytest.raises(ValueError, match="embeddings must have one row per candidate"):
        multires_rerank(rel, off, Z[:-1], **kw)
    with pytest.raises(ValueError, match="G must be >= 1"):
        multires_rerank(rel, off, Z, G=0, **kw)
    with pytest.raises(ValueError, match="G_keep must be >= 1"):
        multires_rerank(rel, off, Z, G_keep=0, **kw)
    with pytest.raises(TypeError, match="G must be an integer"):
        multires_rerank(rel, off, Z, G=2.5, **kw)
    with pytest.raises(TypeError, match="coarse must be a JKOConfig"):
        multires_rerank(rel, off, Z, coarse={"h": 1.0})
    with pytest.raises(ValueError, match="h must be > 0"):
        multires_rerank(rel, off, Z, fine=FI.replace(h=-1.0))
    with pytest.raises(ValueError, match="offsets must start at 0"):
        multires_rerank(rel, [0, 9], Z, **kw)


def test_default_configs_are_the_spec_operating_points():
    c, f, fr = coarse_config(), fine_config(), fine_config(reported=True)
    assert (c.h, c.lam, c.rho, c.sinkhorn_eps, c.T, c.inner_steps, c.tau0) == (1.0, 0.05, 0.05, 0.1, 2, 15, 0.2)
    assert (f.h, f.lam, f.rho, f.sinkhorn_eps, f.T, f.inner_steps, f.tau0) == (2.0, 0.1, 0.05, 0.2, 3, 25, 1.0)
    assert fr.inner_steps == 20 and fr.replace(inner_steps=25) == f
    assert c.mode == f.mode == "wasserstein" and c.grad == "unrolled"


@pytest.mark.parametrize(
    "coarse_kw, fine_kw, want",
    [
        # (unrolled, log_form, imp32, imp64, converged, duals): a path's kernels and all its fallbacks
        (dict(grad="unrolled"), dict(grad="unrolled"), (True, True, None, None, None, None)),
        (dict(grad="implicit"), dict(grad="implicit"), (None, None, True, True, True, None)),
        (dict(grad="unrolled"), dict(grad="implicit"), (True, True, True, True, True, None)),
        (dict(objective="entropic"), dict(objective="entropic"), (None, None, None, None, True, None)),
        (dict(mode="kl"), dict(mode="kl"), (None, None, True, True, True, None)),
    ],
)
def test_stage_tokens_name_every_kernel_of_the_stage_paths(coarse_kw, fine_kw, want):
    # the MR/SAM kernel compiles only the transport kernels of its stages' paths; a missing one
    # would return an internal retry code from a stage (MISSING_PATH / RETRY_*), so every path
    # gets its fallbacks too and the results are those of the all-paths jko_query
    from jkofast.jko.multires import _stage_tokens

    assert _stage_tokens(coarse_config(**coarse_kw), fine_config(**fine_kw)) == want


def test_the_flow_warmed_ahead_is_the_one_the_batch_kernel_calls():
    """``_warm_flow`` gives ``jko_flow`` exactly the signature the MR/SAM kernel calls.

    ``jkofast rerank --multires`` compiles it while a child compiles the clustering; a signature
    that drifted would be compiled twice. In a fresh interpreter the batch kernel is compiled (its
    cache switched off, so its call types every solver kernel it needs) after ``_warm_flow``: no
    solver or transport kernel gains a signature (unrolled path: the cheaper one; both paths share
    the code). The kernels ``_warm_flow`` gives may load from the session's cache.
    """
    code = textwrap.dedent("""
        import json, sys
        import numpy as np
        from numba.core.caching import NullCache
        from numba.core.registry import CPUDispatcher
        from jkofast.jko import multires as mr
        from jkofast.kernels.jko import multires as km

        def signatures():
            mods = [m for n, m in list(sys.modules.items()) if n.startswith("jkofast.kernels.")
                    and n.rsplit(".", 1)[-1] in ("solver", "transport", "sinkhorn_log", "unrolled")]
            return {f"{m.__name__}.{k}": sorted(map(str, d.signatures))
                    for m in mods for k, d in vars(m).items() if isinstance(d, CPUDispatcher)}

        mr._warm_flow("unrolled")
        before = signatures()
        km.multires_pools._cache = NullCache()
        mr._warm_path(np.float32, "unrolled")
        assert km.multires_pools.signatures  # the batch kernel did compile here
        after = signatures()
        print(json.dumps(sorted(k for k in after if after[k] != before.get(k, []))))
    """)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_multires_warm_up_compiles_the_flow_while_a_child_compiles_the_clustering(monkeypatch):
    # jkofast rerank --multires: the child takes the energy and clustering kernels; this process compiles
    # the stage flow first, then waits for the child, then compiles the MR/SAM kernel
    from rerank_helpers import warm_up_order

    import jkofast.jko.multires as mr

    patches = {
        "_warm_flow": lambda events, grad: events.append(f"flow {grad}"),
        "multires_rerank": lambda events, *a, **k: events.append(k["clustering"]),
    }
    asked, events = warm_up_order(monkeypatch, mr, "_cluster_ahead", patches, multires=True, grad="implicit")
    assert asked == [(("energy", "multires.cluster"), ["energy", "multires.cluster"])]
    assert events == ["flow implicit", "wait", *mr.CLUSTERINGS, "energy", "close"]
