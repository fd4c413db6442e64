"""The SGR query path is a plain object the retriever owns; its kernel arguments are a named bundle."""

import inspect

import numpy as np
from numpy.testing import assert_array_equal

from jkofast.kernels.sgr import query as kq
from jkofast.sgr import SparseGeometricRetriever
from jkofast.sgr._engine import QueryArgs, QueryPath

DOCS = ["alpha beta gamma", "beta gamma delta", "gamma delta alpha", "zeta eta alpha"]


def test_query_args_are_the_kernels_parameters_in_order():
    """QueryArgs is unpacked into both query kernels: its fields are their parameters, in order."""
    for disp in (kq.sgr_query_batch, kq.sgr_query_serial):
        assert tuple(inspect.signature(disp.py_func).parameters) == QueryArgs._fields


def test_retriever_owns_its_query_path():
    """No mixin: the retriever holds a QueryPath over its own index dict, made when an index is adopted."""
    assert not issubclass(SparseGeometricRetriever, QueryPath)
    r = SparseGeometricRetriever(pool_size=3)
    assert r._query is None
    r.fit(DOCS)
    q = r._query
    assert isinstance(q, QueryPath) and q.ix is r._ix and q.config is r.config
    assert (q.n_docs, q.n_terms) == (r.n_docs_, r.n_terms_)


def test_set_params_reaches_the_query_path():
    """Query parameters reach the owned path; the semantic lists are rebuilt only when they depend on the change."""
    r = SparseGeometricRetriever(pool_size=3, semantic_k=4).fit(DOCS)
    sem = r._ix["sem_idx"]
    r.set_params(w_lex=0.5)
    assert r._query.config is r.config and r._query.config.w_lex == 0.5 and r._ix["sem_idx"] is sem
    r.set_params(semantic_k=1)
    assert r._ix["sem_idx"] is not sem and np.diff(r._ix["sem_indptr"]).max() <= 1
    fresh = SparseGeometricRetriever(pool_size=3, semantic_k=1, w_lex=0.5).fit(DOCS)
    for got, want in zip(r.search(["alpha gamma"], k=3), fresh.search(["alpha gamma"], k=3), strict=True):
        assert_array_equal(got, want)


def test_run_takes_the_compiled_entry_only_for_fixed_query_arrays():
    """After the first call the serial kernel's entry point is kept (on a Numba whose internals are tested) and
    gives the dispatcher's bits; query arrays of other dtypes or layout are not fixed (they take the dispatcher)."""
    from jkofast import _numba

    r = SparseGeometricRetriever(pool_size=3).fit(DOCS)
    qi, qt, qv = r.transform_queries(["alpha gamma"])
    want = r._query.run(qi, qt, qv, 3, 1)
    assert (kq.sgr_query_serial in r._query._entry) == _numba._HOOKS_TESTED
    again = r._query.run(qi, qt, qv, 3, 1)
    for a, b in zip(want, again, strict=True):
        assert_array_equal(a, b)
    rest = [None] * (len(QueryArgs._fields) - 3)
    assert QueryArgs(qi, qt, qv, *rest).queries_fixed()
    assert not QueryArgs(qi, qt.astype(np.int64), qv, *rest).queries_fixed()
    ro = qv.copy()
    ro.flags.writeable = False
    assert not QueryArgs(qi, qt, ro, *rest).queries_fixed()
    assert not QueryArgs(qi, qt, np.repeat(qv, 2)[::2], *rest).queries_fixed()
