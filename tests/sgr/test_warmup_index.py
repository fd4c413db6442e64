"""The ``sgr.search`` warm-up: its stored index is what fit builds; it compiles every search kernel a fit calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from jkofast.sgr import retriever as rt

REGENERATE = "python -c 'from jkofast.sgr.retriever import _write_warmup_index; _write_warmup_index()'"


def test_stored_warmup_index_is_what_fit_builds():
    # the same arrays (names, dtypes, shapes, values) give the search kernels the same argument types
    # (and the warm-up search the same paths)
    fresh = rt._warmup_index_arrays()
    with np.load(rt._WARMUP_INDEX) as z:
        stored = {k: z[k] for k in z.files}
    assert sorted(stored) == sorted(fresh), f"fit builds other arrays now; regenerate the file: {REGENERATE}"
    for name, want in fresh.items():
        got = stored[name]
        assert (got.dtype, got.shape) == (want.dtype, want.shape), f"{name}; regenerate the file: {REGENERATE}"
        if want.dtype.kind == "f":
            # a few ulp apart where numpy's transcendental functions (np.log1p of the BM25 idf) differ
            # by CPU: its AVX-512 builds use their own implementations, others the C library's
            np.testing.assert_array_max_ulp(got, want, maxulp=4)
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{name}; regenerate the file: {REGENERATE}")
        assert got.flags.c_contiguous and got.flags.writeable


# after the warm-up, a retriever fitted on another corpus and searched adds no signature to a
# query-path or query-analysis kernel (a fresh process: the signatures are this process's own)
COVER = """
import json
from jkofast._numba import REGISTRY, WARMUPS
from jkofast.sgr import retriever as rt

WARMUPS["sgr.search"]()
before = {k: set(map(str, d.signatures)) for k, d in REGISTRY.items()}
docs = ["solar wind and magnetic fields", "magnetic storms", "wind turbines", "fields of wheat"] * 3
r = rt.SparseGeometricRetriever(**rt._WARM_PARAMS).fit(docs)
r.search(["magnetic wind", "wheat", "nothing known"] * 30, k=3)
r.transform_queries(["magnetic wind"] * 70)
new = {k: sorted(set(map(str, d.signatures)) - before.get(k, set())) for k, d in REGISTRY.items()}
print(json.dumps({k: v for k, v in new.items() if v and (".sgr.query." in k or ".text.tokenize." in k)}))
"""


def test_search_warmup_covers_a_fitted_retrievers_search():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", COVER], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}
