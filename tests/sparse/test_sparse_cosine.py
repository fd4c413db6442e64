import numpy as np
import pytest
import scipy.sparse as sp

import reference as ref
from jkofast._threads import numba_threads
from jkofast.kernels.sparse import cosine as _kc
from jkofast.sparse._cosine import cosine_cross, cosine_pools, cosine_rows
from jkofast.sparse.index import TfidfIndex


def _rand_csr(n, v, density, seed, dtype=np.float64, signed=False):
    rng = np.random.default_rng(seed)
    X = sp.random(n, v, density=density, random_state=rng, format="csr", dtype=np.float64)
    if signed:
        X.data -= 0.5
    X = X.tolil()
    X[1] = 0  # an all-zero row
    return sp.csr_matrix(X, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("signed", [False, True])
def test_cosine_rows_equals_dense(dtype, signed):
    X = _rand_csr(9, 12, 0.35, 1, dtype, signed)
    rows = np.array([4, 1, 0, 7, 2])
    for out_dt in (np.float32, np.float64):
        C = cosine_rows(X, rows, dtype=out_dt)
        assert C.dtype == out_dt and C.shape == (5, 5)
        exp = ref.sparse_cosine_dense(X.toarray()[rows])
        np.testing.assert_allclose(C, exp, atol=1e-6 if out_dt == np.float32 else 1e-12)
        np.testing.assert_array_equal(C, C.T)
        assert C[1, 1] == 0.0  # all-zero row: cosine 0, including itself
        assert (np.abs(C) <= 1).all()
    full = cosine_rows(X)
    np.testing.assert_allclose(full, ref.sparse_cosine_dense(X.toarray()), atol=1e-6)


def test_noncanonical_scipy_input_is_canonicalised():
    # duplicates and unsorted indices: scipy semantics = sum duplicates
    data = np.array([1.0, 2.0, 1.0, 3.0, 1.0])
    indices = np.array([2, 0, 2, 1, 0])
    indptr = np.array([0, 3, 5])
    X = sp.csr_matrix((data, indices, indptr), shape=(2, 3))
    dense = np.array([[2.0, 0.0, 2.0], [1.0, 3.0, 0.0]])
    np.testing.assert_allclose(cosine_rows(X), ref.sparse_cosine_dense(dense), atol=1e-12)
    assert X.indices.tolist() == [2, 0, 2, 1, 0]  # caller's matrix untouched


def test_cosine_pools_and_threads():
    X = _rand_csr(30, 20, 0.3, 2)
    off = np.array([0, 5, 5, 17, 30])  # includes an empty pool
    with numba_threads(1):
        flat1, oo = cosine_pools(X, off)
    flat2, oo2 = cosine_pools(X, off, n_threads=2)
    np.testing.assert_array_equal(flat1, flat2)
    np.testing.assert_array_equal(oo, oo2)
    D = X.toarray()
    for q in range(4):
        m = off[q + 1] - off[q]
        blk = flat1[oo[q] : oo[q + 1]].reshape(m, m)
        np.testing.assert_allclose(blk, ref.sparse_cosine_dense(D[off[q] : off[q + 1]]), atol=1e-12)
    with pytest.raises(ValueError, match="offsets"):
        cosine_pools(X, [0, 5, 40])


def test_cosine_cross_and_errors():
    A = _rand_csr(6, 10, 0.4, 3)
    B = _rand_csr(4, 10, 0.4, 4, np.float32)
    with numba_threads(1):
        C1 = cosine_cross(A, B)
    C2 = cosine_cross(A, B, n_threads=2)
    np.testing.assert_array_equal(C1, C2)
    np.testing.assert_allclose(C1, ref.sparse_cosine_dense(A.toarray(), B.toarray().astype(np.float64)), atol=1e-6)
    with pytest.raises(ValueError, match="same number of columns"):
        cosine_cross(A, _rand_csr(3, 9, 0.5, 5))
    with pytest.raises(TypeError, match=r"scipy\.sparse"):
        cosine_rows(np.eye(3))
    with pytest.raises(ValueError, match="rows"):
        cosine_rows(A, [0, 6])


def test_tfidf_geometry_over_pool():
    """Reranker use: TF-IDF rows of a candidate pool -> C = (1 - cos)^2, K = max(0, cos)."""
    docs = ["cat sat mat", "dog cat", "fish swim", "cat sat mat", "dog dog bark"]
    idx = TfidfIndex().fit(docs)
    D = idx.doc_matrix()
    pool = np.array([3, 0, 2, 4])
    cos = cosine_rows(D, pool)
    assert cos[0, 1] == pytest.approx(1.0, abs=1e-6)  # identical docs
    assert cos[0, 2] == 0.0  # disjoint vocabularies
    C = (1 - cos) ** 2
    assert np.all(C >= 0) and np.allclose(np.diag(C), 0)
    # the kernel-level helpers agree with the wrappers
    ip, ix, dt = D.indptr.astype(np.int64), D.indices.astype(np.int64), D.data
    assert _kc.row_dot(ip, ix, dt, 0, 1) == pytest.approx(float(D[0].multiply(D[1]).sum()), rel=1e-6)


# ---- adversarial inputs (QA review) ---------------------------------------------------------
def test_output_dtype_and_rows_are_validated():
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 0.0]]))
    for f in (
        lambda: cosine_rows(X, dtype=int),
        lambda: cosine_pools(X, [0, 3], dtype=np.int32),
        lambda: cosine_cross(X, X, dtype=np.float16),
    ):
        with pytest.raises(TypeError, match="dtype"):  # int output truncated cosines to 0/1
            f()
    with pytest.raises(TypeError, match="rows"):  # floats were truncated to row ids silently
        cosine_rows(X, rows=[0.5, 1.2])


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_huge_or_tiny_rows_keep_their_cosines(scale):
    # squared norms of 1e200 overflowed (NaN cosines), of 1e-200 underflowed (rows taken as 0)
    rng = np.random.default_rng(0)
    D = rng.normal(size=(4, 5))
    D[D < 0.3] = 0.0
    X = sp.csr_matrix(D)
    expect = cosine_rows(X)
    np.testing.assert_allclose(cosine_rows(X * scale), expect, rtol=1e-12, atol=1e-15)
    flat, _ = cosine_pools(X * scale, [0, 2, 4])
    ref_flat, _ = cosine_pools(X, [0, 2, 4])
    np.testing.assert_allclose(flat, ref_flat, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(cosine_cross(X * scale, X), cosine_cross(X, X), rtol=1e-12, atol=1e-15)
