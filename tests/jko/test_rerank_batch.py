"""Batched reranking (jkofast.jko.solver.rerank_batch): ragged pools, geometry, thread invariance, bad queries."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

import reference as ref
from jkofast import numba_threads
from jkofast.jko.solver import JKOConfig, initial_distribution, pool_geometry, rerank_batch, run_jko, run_jko_with_duals

CFG = JKOConfig(h=2.0, lam=0.1, rho=0.05, sinkhorn_eps=0.2, T=2, inner_steps=5, tau0=1.0)
SIZES = [6, 1, 9, 4, 7]


def batch(sizes=SIZES, d=5, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if sparse:
        X = sp.random(n, 30, density=0.3, random_state=seed, format="csr", dtype=np.float64)
        X.data += 0.1
        emb = X
    else:
        emb = rng.normal(size=(n, d)).astype(np.float32)
    E = -rng.random(n)
    p0 = rng.random(n) + 0.05
    return E, p0, off, emb


def test_geometry_kernels_match_oracle():
    _, _, _, Z = batch()
    C, K = pool_geometry(embeddings=Z[:6])
    Zd = Z[:6].astype(np.float64)
    C_ref, K_ref = ref.geometry_dense_naive(Zd / np.linalg.norm(Zd, axis=1, keepdims=True))
    assert_allclose(C, C_ref, atol=1e-12)
    assert_allclose(K, K_ref, atol=1e-12)
    assert_array_equal(C, C.T)
    _, _, _, X = batch(sparse=True)
    Cs, Ks = pool_geometry(csr=X[:7])
    C_ref, K_ref = ref.geometry_csr_naive(X[:7])
    assert_allclose(Cs, C_ref, atol=1e-12)
    assert_allclose(Ks, K_ref, atol=1e-12)


def test_csr_geometry_equals_merge_join_bit_for_bit():
    # scatter / gather adds the merge join's products in its order: equal to the last bit, on
    # rows with disjoint supports, a zero row, negative values, and a pool not starting at row 0
    rng = np.random.default_rng(3)
    X = sp.random(12, 40, density=0.25, random_state=4, format="csr", dtype=np.float64)
    X.data = rng.standard_normal(X.data.size)
    X = sp.vstack([X, sp.csr_matrix((1, 40)), sp.csr_matrix(([1.5, -2.0], ([0, 0], [38, 39])), shape=(1, 40))]).tocsr()
    Xs = X[3:]
    E = np.zeros(Xs.shape[0])
    Cs, Ks = pool_geometry(csr=Xs)
    C_ref, K_ref = ref.geometry_csr_merge_naive(Xs)
    assert_array_equal(Cs, C_ref)
    assert_array_equal(Ks, K_ref)
    assert_array_equal(Cs, Cs.T)
    assert Cs[-2, -2] == 1.0 and Ks[-2].max() == 0.0  # the zero row: cosine 0 with everything
    # the same pool at offset 3 of a batch (lo > 0 in the kernel) gives the same geometry
    off = np.array([0, 3, 3 + Xs.shape[0]])
    res = rerank_batch(np.zeros(X.shape[0]), None, off, csr=X, config=CFG, return_duals=True)
    res_one = rerank_batch(E, None, np.array([0, Xs.shape[0]]), csr=Xs, config=CFG, return_duals=True)
    assert_array_equal(res.pool(1), res_one.pool(0))


@pytest.mark.parametrize("sparse", [False, True])
def test_batch_equals_per_query_run_jko(sparse):
    E, p0, off, emb = batch(sparse=sparse)
    res = rerank_batch(E, p0, off, **({"csr": emb} if sparse else {"embeddings": emb}), config=CFG, return_duals=True)
    assert res.p.dtype == np.float64 and res.offsets.dtype == np.int64 and res.status.dtype == np.int32
    assert not res.errors and not res.status.any()
    for q in range(len(SIZES)):
        lo, hi = off[q], off[q + 1]
        C, K = pool_geometry(**({"csr": emb[lo:hi]} if sparse else {"embeddings": emb[lo:hi]}))
        p, f, g = run_jko_with_duals(p0[lo:hi], E[lo:hi], C, K, CFG)
        assert_array_equal(res.pool(q), p)
        assert_array_equal(res.f[lo:hi], f)
        assert_array_equal(res.g[lo:hi], g)
    assert_array_equal(res.pool(1), [1.0])


@pytest.mark.parametrize("grad", ["unrolled", "implicit"])
def test_thread_invariance(grad):
    E, p0, off, Z = batch(sizes=[5, 8, 3, 6, 7, 4])
    cfg = CFG.replace(grad=grad)
    with numba_threads(1):
        r1 = rerank_batch(E, p0, off, embeddings=Z, config=cfg, n_threads=1)
    r2 = rerank_batch(E, p0, off, embeddings=Z, config=cfg, n_threads=2)
    assert_array_equal(r1.p, r2.p)


def test_default_p0_is_softmax_of_minus_energy():
    E, _, off, Z = batch()
    res = rerank_batch(E, None, off, embeddings=Z, config=CFG)
    lo, hi = off[2], off[3]
    C, K = pool_geometry(embeddings=Z[lo:hi])
    assert_array_equal(res.pool(2), run_jko(initial_distribution(E[lo:hi], CFG.tau0), E[lo:hi], C, K, CFG))


def test_bad_queries_are_reported_and_others_return():
    E, p0, off, Z = batch(sizes=[6, 0, 9, 4, 7, 5])
    clean = rerank_batch(E, p0, off, embeddings=Z, config=CFG)
    E2, p02, Z2 = E.copy(), p0.copy(), Z.copy()
    E2[off[2] + 1] = np.nan  # query 2: NaN energy
    p02[off[3] : off[4]] = 0.0  # query 3: zero-mass p0
    Z2[off[5]] = np.inf  # query 5: bad geometry row
    res = rerank_batch(E2, p02, off, embeddings=Z2, config=CFG)
    assert set(res.errors) == {1, 2, 3, 5}
    assert "empty" in res.errors[1] and "energy" in res.errors[2] and "p0" in res.errors[3]
    assert "embeddings" in res.errors[5]
    assert res.status[0] == 0 and res.status[4] == 0 and all(res.status[q] != 0 for q in (1, 2, 3, 5))
    for q in (0, 4):
        assert_array_equal(res.pool(q), clean.pool(q))
    assert np.isnan(res.pool(2)).all()
    p03 = p0.copy()
    p03[off[4]] = -1.0
    assert set(rerank_batch(E, p03, off, embeddings=Z, config=CFG).errors) == {1, 4}


def test_batch_bad_input():
    E, p0, off, Z = batch()
    with pytest.raises(ValueError, match="exactly one"):
        rerank_batch(E, p0, off, config=CFG)
    with pytest.raises(ValueError, match="embeddings must have one row"):
        rerank_batch(E, p0, off, embeddings=Z[:-1], config=CFG)
    with pytest.raises(ValueError, match="p0 and energy"):
        rerank_batch(E, p0[:-1], off, embeddings=Z, config=CFG)
    with pytest.raises(ValueError, match="offsets"):
        rerank_batch(E, p0, off[:-1], embeddings=Z, config=CFG)
    with pytest.raises(TypeError, match="offsets"):
        rerank_batch(E, p0, off.astype(float), embeddings=Z, config=CFG)
    with pytest.raises(ValueError, match="operating point"):
        rerank_batch(E, p0, off, embeddings=Z, config="nope")


# ---- adversarial inputs (QA review) ---------------------------------------------------------
def test_result_query_index_is_checked():
    from jkofast.jko.solver import QueryIndexError

    E, p0, off, Z = batch()
    res = rerank_batch(E, p0, off, embeddings=Z, config=CFG)
    nq = len(SIZES)
    for q in (-1, nq, 10**9):  # -1 returned an empty pool (offsets[-1]:offsets[0]) silently
        with pytest.raises(QueryIndexError, match="q must be a query index"):
            res.pool(q)
        with pytest.raises(ValueError, match="q must be a query index"):
            res.topk(q, 2)
        with pytest.raises(IndexError):
            res.pool(q)
    with pytest.raises(TypeError, match="q must be an integer"):
        res.pool(1.0)
    assert_array_equal(res.pool(nq - 1), res.p[off[-2] : off[-1]])


def test_topk_of_a_failed_query_names_it():
    E, p0, off, Z = batch()
    E = E.copy()
    E[off[2]] = np.nan
    res = rerank_batch(E, p0, off, embeddings=Z, config=CFG)
    with pytest.raises(ValueError, match=r"query 2 has no result .*energy contains NaN"):
        res.topk(2, 3)
    assert res.topk(0, 3).shape == (3,)


def test_p0_segment_whose_sum_overflows():
    E, p0, off, Z = batch()
    big = p0.copy()
    a, b = off[2], off[3]
    big[a:b] = p0[a:b] / p0[a:b].max() * 1e308  # sum overflows: was divided to all zeros
    with np.errstate(over="ignore"):
        r_big = rerank_batch(E, big, off, embeddings=Z, config=CFG)
    r = rerank_batch(E, p0, off, embeddings=Z, config=CFG)
    assert_array_equal(r_big.status, 0)
    assert_allclose(r_big.p, r.p, rtol=1e-10, atol=1e-14)


def test_energy_beyond_range_is_a_bad_query():
    E, p0, off, Z = batch()
    E = E.copy()
    E[off[3]] = -1e200
    res = rerank_batch(E, p0, off, embeddings=Z, config=CFG)
    assert res.status[3] != 0 and "magnitude" in res.errors[3]
    assert np.all(res.status[[0, 1, 2, 4]] == 0)
    assert np.all(np.isfinite(res.p[: off[3]])) and np.all(np.isnan(res.pool(3)))


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_huge_or_tiny_rows_give_the_same_cosine_geometry(scale):
    # float64 rows of norm 1e200 overflowed to C = NaN; 1e-200 underflowed to "zero rows"
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(4, 3))
    C, K = pool_geometry(embeddings=Z)
    Cs, Ks = pool_geometry(embeddings=Z * scale)
    assert_allclose(Cs, C, rtol=1e-12, atol=1e-15)
    assert_allclose(Ks, K, rtol=1e-12, atol=1e-15)
    Cc, Kc = pool_geometry(csr=sp.csr_matrix(Z * scale))
    assert_allclose(Cc, C, rtol=1e-12, atol=1e-15)
    E, p0, off, Zb = batch()
    Zb = Zb.astype(np.float64)
    r = rerank_batch(E, p0, off, embeddings=Zb, config=CFG)
    rs = rerank_batch(E, p0, off, embeddings=Zb * scale, config=CFG)
    assert_array_equal(rs.status, 0)
    assert_allclose(rs.p, r.p, rtol=1e-9, atol=1e-12)
    X = sp.csr_matrix(Zb)
    rc = rerank_batch(E, p0, off, csr=X, config=CFG)
    rcs = rerank_batch(E, p0, off, csr=X * scale, config=CFG)
    assert_allclose(rcs.p, rc.p, rtol=1e-9, atol=1e-12)


def test_raw_dot_products_that_overflow_are_rejected():
    Z = np.array([[1e200, 0.0], [0.0, 1e200]])
    with pytest.raises(ValueError, match=r"embeddings.*overflow"):
        pool_geometry(embeddings=Z, normalise=False)


def test_failed_query_duals_are_nan_not_zero():
    E, p0, off, Z = batch()
    E = E.copy()
    E[off[1]] = np.inf
    res = rerank_batch(E, p0, off, embeddings=Z, config=CFG, return_duals=True)
    a, b = off[1], off[2]
    assert res.status[1] != 0
    assert np.all(np.isnan(res.f[a:b])) and np.all(np.isnan(res.g[a:b]))  # were zeros
    ok = np.ones(off[-1], bool)
    ok[a:b] = False
    assert np.all(np.isfinite(res.f[ok])) and np.all(np.isfinite(res.g[ok]))


def test_unconverged_inner_steps_are_counted_per_query_and_warned():
    import warnings

    from jkofast._status import ConvergenceWarning

    E, p0, off, Z = batch()
    cfg = CFG.replace(grad="implicit")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ok = rerank_batch(E, p0, off, embeddings=Z, config=cfg)
        assert_array_equal(ok.unconverged, 0)
        un = rerank_batch(E, p0, off, embeddings=Z, config=CFG)  # unrolled: fixed counts, never flagged
        assert_array_equal(un.unconverged, 0)
    E_bad = E.copy()
    E_bad[off[3]] = np.nan  # a rejected query reports nothing here
    with pytest.warns(ConvergenceWarning, match=r"rerank_batch: implicit-gradient CG stopped at its cap") as rec:
        res = rerank_batch(E_bad, p0, off, embeddings=Z, config=cfg.replace(cg_max_iter=0))
    assert len(rec) == 1  # one warning for the batch, not one per query
    # pools of size > 1 that ran: every inner step's CG stopped at 0 iterations
    ran = [q for q in range(len(SIZES)) if SIZES[q] > 1 and q != 3]
    assert_array_equal(res.unconverged[ran, 1], cfg.T * cfg.inner_steps)
    assert_array_equal(res.unconverged[[1, 3]], 0)
    assert f"in {len(ran) * cfg.T * cfg.inner_steps} inner steps of {len(ran)} queries" in str(rec[0].message)
    # the per-query counts do not depend on the thread count
    with numba_threads(2), pytest.warns(ConvergenceWarning):
        res2 = rerank_batch(E_bad, p0, off, embeddings=Z, config=cfg.replace(cg_max_iter=0), n_threads=2)
    assert_array_equal(res2.unconverged, res.unconverged)


def test_all_zero_geometry_row_has_cosine_zero_with_every_row():
    Z = np.array([[1.0, 0.0], [0.0, 0.0], [0.6, 0.8]])
    C, K = pool_geometry(embeddings=Z)
    assert_array_equal(C[1], 1.0) and assert_array_equal(C[:, 1], 1.0)  # C_ii = (1 - 0)^2 = 1
    assert_array_equal(K[1], 0.0) and assert_array_equal(K[:, 1], 0.0)
    Zn = Z.copy()
    Zn[1] = 0.0  # the published code's view: dot products of the (zero) row
    assert_allclose(C[[0, 2]][:, [0, 2]], ref.geometry_dense_naive(Zn[[0, 2]])[0], atol=1e-12)


def test_batch_runs_named_points_on_the_implicit_path_drop_in_keeps_unrolled(monkeypatch):
    """rerank_batch: a named operating point -> implicit, a config keeps its grad, ``grad=`` always wins;
    the drop-in entries keep the published unrolled default.  The kernels are not run (a spy)."""
    from jkofast.compat import JKOConfig as CompatConfig
    from jkofast.jko import solver
    from jkofast.jko.config import batch_config, resolve_config

    seen = []
    monkeypatch.setattr(solver, "_rerank_pools", lambda E, P0, off, rows, cfg, duals, out, n_threads: seen.append(cfg))
    E = np.array([-1.0, -0.5, 0.0])
    Z = np.eye(3)
    off = np.array([0, 3])
    cases = [
        (dict(), "implicit"),
        (dict(config="fast"), "implicit"),
        (dict(config="base", grad="unrolled"), "unrolled"),
        (dict(config=solver.operating_point("tuned")), "unrolled"),
        (dict(config=solver.operating_point("tuned"), grad="implicit"), "implicit"),
        (dict(config=JKOConfig(mode="kl")), "none"),
    ]
    for kw, path in cases:
        res = rerank_batch(E, None, off, embeddings=Z, **kw)
        assert res.grad_path == path and f"grad_path='{path}'" in repr(res)
    assert [c.grad for c in seen] == ["implicit", "implicit", "unrolled", "unrolled", "implicit", "unrolled"]
    # the drop-in defaults: run_jko / run_jko_with_duals / jko_step resolve through resolve_config
    assert JKOConfig().grad == CompatConfig().grad == "unrolled"
    assert resolve_config(None).grad == resolve_config("tuned").grad == resolve_config("fast").grad == "unrolled"
    assert batch_config("fast").grad == "implicit" and batch_config("fast", grad="unrolled").grad == "unrolled"
    with pytest.raises(ValueError, match="grad must be one of"):
        batch_config("tuned", grad="exact")
