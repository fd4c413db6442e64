"""Instruction-count workloads: one small, seeded workload per kernel family, counted under callgrind.

Wall-clock suites on a shared 2-core machine or a CI runner cannot tell a 3 % regression from
noise; the number of instructions a warm kernel executes can.  Each family below builds its
inputs, runs once (Numba compiles or loads its cache: never counted), then runs once more
between callgrind's client requests ``START_INSTRUMENTATION`` / ``STOP_INSTRUMENTATION`` (valgrind
runs with ``--instr-atstart=no``), so the count is exactly that second run: no interpreter start,
imports, input building or cache loading, and no difference of two noisy totals.  Each family
is counted in a child forked after the imports, so it starts from the same interpreter and heap
whatever families ran before it.

The client request is valgrind's "special instruction" sequence (``valgrind/valgrind.h``): on
x86-64 four rotations of ``rdi`` (a no-op, 3 + 13 + 61 + 51 = 128 bits) then ``xchg rbx, rbx``, with
``rax`` pointing at ``[request, arg1..arg5]``; natively it does nothing and returns the default.
On arm64 the rotations are of ``x12`` and the marker is ``orr x10, x10, x10`` (:func:`request_ir`).
It is compiled here through llvmlite (Numba's own back end, so no C compiler or valgrind headers are
needed).  Other architectures: :data:`SUPPORTED` is False and the harness refuses with a message.

Run as a script (``python benchmarks/instr_workloads.py FAMILY``) it is the child the harness
(:mod:`benchmarks.tools.instructions`) starts under valgrind; with ``--native`` it only builds and
runs the workload (the compile / cache warm-up the counted child then loads).

Importable against older commits: the child imports jkofast from the tree being counted (first on
``PYTHONPATH``) and this module's input helpers from the harness's own tree (like asv, current
suites against any commit).  Sizes are fixed: changing one changes every count (say so in the
commit; the gate compares a commit with its parent, both counted by the same harness).
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
import sys

import numpy as np

__all__ = ["ARCH", "EXAMPLES", "FAMILIES", "SUPPORTED", "build", "client_request", "on_valgrind", "request_ir"]

HERE = os.path.dirname(os.path.abspath(__file__))

# valgrind.h / callgrind.h request codes
_RUNNING_ON_VALGRIND = 0x1001
_CG_BASE = (ord("C") << 24) | (ord("T") << 16)  # VG_USERREQ_TOOL_BASE('C','T')
CG_ZERO_STATS = _CG_BASE + 1
CG_DUMP_STATS_AT = _CG_BASE + 3
CG_START_INSTRUMENTATION = _CG_BASE + 4
CG_STOP_INSTRUMENTATION = _CG_BASE + 5

# i64 vg_request(i64* args, i64 default), per architecture: valgrind.h's client-request sequence
# (``__SPECIAL_INSTRUCTION_PREAMBLE`` then the "client request" marker) as inline assembly with the
# registers valgrind.h uses.  x86-64: ``rdi`` rotated by 3 + 13 + 61 + 51 = 128 bits (a no-op), then
# ``xchg rbx, rbx``; rax = the argument block, rdx = the default in, the result out.  arm64: ``x12``
# rotated by 3 + 13 + 51 + 61 = 128 bits, then ``orr x10, x10, x10``; x4 = the argument block,
# x3 = the default in, the result out.  The arm64 sequence is checked here only as far as LLVM's
# code generation for an aarch64 target goes (tests/test_instructions.py); it was not run on arm64.
_SEQUENCES = {
    "x86_64": (
        "rolq $$3, %rdi ; rolq $$13, %rdi ; rolq $$61, %rdi ; rolq $$51, %rdi ; xchgq %rbx, %rbx",
        "={dx},{ax},0,~{cc},~{memory},~{dirflag},~{fpsr},~{flags}",
    ),
    "aarch64": (
        "ror x12, x12, #3 ; ror x12, x12, #13 ; ror x12, x12, #51 ; ror x12, x12, #61 ; orr x10, x10, x10",
        "={x3},{x4},0,~{cc},~{memory}",
    ),
}
ARCH = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine())
SUPPORTED = ARCH is not None


def request_ir(arch: str) -> str:
    """LLVM IR of ``i64 vg_request(i64* args, i64 default)`` for ``arch`` (``x86_64``, ``aarch64``)."""
    asm, constraints = _SEQUENCES[arch]
    return f"""
define i64 @vg_request(i64* %args, i64 %default) {{
  %r = call i64 asm sideeffect "{asm}", "{constraints}"(i64* %args, i64 %default)
  ret i64 %r
}}
"""


_REQUEST = None  # (engine, ctypes function): the engine must outlive the function


def client_request(request: int, *args: int, default: int = 0) -> int:
    """Issue valgrind client request ``request`` with up to five integer arguments; natively
    (no valgrind) it returns ``default``."""
    global _REQUEST
    if not SUPPORTED:
        raise RuntimeError(f"valgrind client requests are implemented for x86-64 and arm64, not {platform.machine()}")
    if _REQUEST is None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        mod = llvm.parse_assembly(request_ir(ARCH))
        mod.verify()
        tm = llvm.Target.from_default_triple().create_target_machine()
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        fn = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint64)(
            engine.get_function_address("vg_request")
        )
        _REQUEST = (engine, fn)
    block = (ctypes.c_uint64 * 6)(request, *(list(args) + [0] * (5 - len(args))))
    return int(_REQUEST[1](block, default))


def on_valgrind() -> bool:
    """Whether this process runs under valgrind (the RUNNING_ON_VALGRIND request)."""
    return SUPPORTED and client_request(_RUNNING_ON_VALGRIND) > 0


# ---------------------------------------------------------------------------------------------
# The families.  Each builder makes seeded inputs and returns the zero-argument callable counted.
# One thread everywhere (the harness also pins NUMBA_NUM_THREADS=1: a spinning pool counts too).


def _sinkhorn_log():
    from benchmarks.bench_sinkhorn import clustered_pool
    from jkofast import sinkhorn_log

    rng = np.random.default_rng(0)
    _, C, _ = clustered_pool(200)
    a = rng.random(200) + 0.01
    a /= a.sum()
    b = np.full(200, 1.0 / 200)
    return lambda: sinkhorn_log(a, b, C, 0.1, max_iter=100, tol=None)


def _jko(grad, m, dtype="float64"):
    def build():
        from benchmarks.bench_jko import jko_query_inputs
        from jkofast import numba_threads
        from jkofast.jko import operating_point, run_jko

        cfg = operating_point("tuned", grad=grad, dtype=dtype)
        _, p0, E, C, K = jko_query_inputs(m=m, tau0=cfg.tau0)

        def run():
            with numba_threads(1):
                run_jko(p0, E, C, K, cfg)

        return run

    return build


def _pools(n_pools, m=100):
    from benchmarks.bench_jko import jko_query_inputs

    zs, es = [], []
    for q in range(n_pools):
        Z, _, E, _, _ = jko_query_inputs(m=m, seed=q)
        zs.append(Z.astype(np.float32))
        es.append(E)
    return np.concatenate(zs), np.concatenate(es), np.arange(0, m * (n_pools + 1), m, dtype=np.int64)


def _rerank_batch_threads(n):
    def build():
        from jkofast.jko import operating_point, rerank_batch

        Z, E, off = _pools(2, m=64)
        cfg = operating_point("tuned", grad="implicit")
        return lambda: rerank_batch(E, None, off, embeddings=Z, config=cfg, n_threads=n)

    return build


def _multires():
    from benchmarks.bench_multires import multires_pools
    from jkofast.jko.multires import coarse_config, fine_config, multires_rerank

    Z, rel, off = multires_pools(n_pools=2, m=200)
    co, fi = coarse_config(grad="implicit"), fine_config(reported=True, grad="implicit")
    return lambda: multires_rerank(
        rel, off, Z, G=20, G_keep=4, clustering="sam", sam_beta=2.0, coarse=co, fine=fi, n_threads=1
    )


def _bm25_topk():
    from benchmarks.common import jk, zipf_corpus

    flat, off, qs = zipf_corpus(5_000, 20_000, 60, seed=0, n_queries=200)
    index = jk("jkofast.sparse.index").BM25Index("lucene").fit_token_ids((flat, off), 20_000)
    q = index._token_query_csr((np.concatenate(qs), np.r_[0, np.cumsum([x.size for x in qs])].astype(np.int64)))
    return lambda: index.search_csr(*q, k=10, n_threads=1)


def _sgr_query():
    from benchmarks.common import synthetic_texts
    from jkofast.sgr import SparseGeometricRetriever

    docs, queries = synthetic_texts(2_000, 50, n_words=5_000)
    r = SparseGeometricRetriever().fit(docs, n_threads=1)
    return lambda: r.search(queries, k=10, n_threads=1)


def _sgr_build():
    from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

    from benchmarks.common import synthetic_texts
    from jkofast.sgr.config import SGRConfig
    from jkofast.sgr.layout import calibrate

    docs, _ = synthetic_texts(500, 1, n_words=2_000)
    counts = CountVectorizer(dtype=np.float32).fit_transform(docs)
    X = TfidfTransformer().fit_transform(counts).astype(np.float32).tocsr()
    X.sort_indices()
    params = SGRConfig()
    # the index build's kernels: memberships, branch centres, codes, reliability rows, the two term graphs
    return lambda: calibrate(X, params, n_threads=1)


def _metrics():
    from benchmarks.common import jk, make_metric_data

    run, qrels = make_metric_data(100, 100)
    evaluate = jk("jkofast.eval.metrics").evaluate
    return lambda: evaluate(run, qrels, ("ndcg@10", "recall@10", "p@10", "mrr@10", "map"), n_threads=1)


def _encoder_forward():
    from benchmarks.bench_encode import random_minilm
    from jkofast.encode.bert import forward

    model = random_minilm(n_layers=1)
    ids = np.random.default_rng(0).integers(0, 1000, 2 * 64)
    offsets = np.arange(3, dtype=np.int64) * 64
    return lambda: forward(model, ids, offsets, n_threads=1)


FAMILIES = {
    "sinkhorn_log": _sinkhorn_log,
    "jko_unrolled": _jko("unrolled", 50),
    "jko_implicit": _jko("implicit", 100),
    "rerank_batch": _rerank_batch_threads(1),
    "multires_sam": _multires,
    "bm25_topk": _bm25_topk,
    "sgr_query": _sgr_query,
    "sgr_build": _sgr_build,
    "metrics": _metrics,
    "encoder_forward": _encoder_forward,
}


def _cosine_block(span):
    """The sparse pool-cosine kernel (``_pool_block``, under ``cosine_rows`` / ``cosine_pools``)
    over 100 rows of 500 non-zeros whose columns lie in ``[0, span)``, with a 2**24-column
    scatter buffer (128 MB, the caller's, as ``cosine_pools`` passes it): the same loops and the
    same number of gathers whatever ``span``; only where in the buffer they land differs."""

    def build():
        from jkofast.kernels.sparse.cosine import _pool_block

        m, nnz, n_cols = 100, 500, 1 << 24
        rng = np.random.default_rng(0)
        cols = [np.sort(rng.choice(span, nnz, replace=False)) for _ in range(m)]
        indices = np.concatenate(cols).astype(np.int64)
        indptr = np.arange(0, m * nnz + 1, nnz, dtype=np.int64)
        data = rng.random(m * nnz)
        buf = np.zeros(n_cols)  # all-zero on entry and on exit (the kernel clears what it scatters)
        out = np.empty(m * m)
        rows = np.arange(m, dtype=np.int64)
        return lambda: _pool_block(indptr, indices, data, rows, buf, out, 0)

    return build


# Not gated: the examples of docs/instruction_counts.md (counts and time disagreeing).  Counting a
# two-thread run needs NUMBA_NUM_THREADS=2 (the harness's ``--threads 2``).
EXAMPLES = {
    "jko_unrolled32": _jko("unrolled", 50, "float32"),
    "rerank_batch_2threads": _rerank_batch_threads(2),
    "cosine_local": _cosine_block(1 << 10),  # the columns in 8 KB of the buffer
    "cosine_spread": _cosine_block(1 << 24),  # the columns over all 128 MB of it
}


def build(family: str):
    """Return the zero-argument callable of ``family`` (a family or an example; inputs built)."""
    builder = FAMILIES.get(family) or EXAMPLES.get(family)
    if builder is None:
        raise ValueError(f"family: unknown {family!r} (one of {', '.join([*FAMILIES, *EXAMPLES])})")
    return builder()


def _seconds(run, repeat=5):
    """Median wall seconds of ``repeat`` warm runs."""
    import time

    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def _count_in_child(family: str) -> None:
    """Build ``family``, run it once uncounted, then once between the client requests."""
    run = build(family)
    run()  # compile or load the cache, first-call allocations: never counted
    gc.collect()
    gc.disable()  # a collection inside the region would depend on what the setup allocated
    client_request(CG_ZERO_STATS)
    client_request(CG_START_INSTRUMENTATION)
    run()
    client_request(CG_STOP_INSTRUMENTATION)
    gc.enable()
    # one dump per family ("desc: Trigger: Client Request: FAMILY")
    label = ctypes.create_string_buffer(family.encode())
    client_request(CG_DUMP_STATS_AT, ctypes.addressof(label))


def _package_files(pkg: str) -> list[str]:
    """The files of the package folder ``pkg`` this process has imported, relative to it, sorted."""
    return sorted(
        os.path.relpath(os.path.abspath(f), pkg)
        for f in (getattr(m, "__file__", None) for m in list(sys.modules.values()))
        if f and os.path.abspath(f).startswith(pkg + os.sep)
    )


def _native_in_child(family: str, pkg: str, timed: bool, out: int) -> None:
    """Build and run ``family`` natively (compile or load its kernels); write what the harness
    needs to the pipe ``out``: the package files imported by now and, with ``timed``, the seconds."""
    import json

    run = build(family)
    run()
    report = {"imported": _package_files(pkg), "seconds": _seconds(run) if timed else None}
    with os.fdopen(out, "w") as fh:
        fh.write(json.dumps(report))


def _in_fork(target, *args) -> tuple[bool, str]:
    """Run ``target(*args, out)`` in a child forked from this process; ``(succeeded, what it wrote to out)``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 1
        try:
            target(*args, write)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as fh:
        text = fh.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0, text


def _main(argv: list[str]) -> int:
    native = "--native" in argv
    timed = "--time" in argv
    families = [a for a in argv if not a.startswith("--")]
    import jkofast  # from the tree under test (first on PYTHONPATH), before this tree goes first

    sys.path.insert(0, os.path.dirname(HERE))  # the harness's benchmarks package (input helpers)
    sys.stderr.write(f"instr_workloads: jkofast from {os.path.dirname(jkofast.__file__)}\n")
    if not native and not on_valgrind():
        sys.stderr.write("instr_workloads: not under valgrind (run it through benchmarks/tools/instructions.py)\n")
        return 2
    by_family, seconds = {}, {}
    for family in families:
        # Each family in a child forked from this process, which has only imported jkofast and
        # numpy.  Counted: every family starts from the same interpreter and heap whatever ran
        # before it (a few instructions depend on addresses: the interpreter's method cache).
        # Native: the package files a family imports are all that family's count can depend on
        # (the gate's per-family proof); in one process a module an earlier family imported would
        # not show as the next one's.  The kernels a child compiles go to the cache, where the
        # next child (and the counted process) loads them.
        if native:
            import json

            ok, text = _in_fork(_native_in_child, family, os.path.dirname(os.path.abspath(jkofast.__file__)), timed)
            if not ok:
                sys.stderr.write(f"instr_workloads: the native child of {family} failed\n")
                return 1
            report = json.loads(text)
            by_family[family] = report["imported"]
            seconds[family] = report["seconds"]
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _count_in_child(family)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.stderr.write(f"instr_workloads: the counted child of {family} failed\n")
            return 1
    if native:
        # what the harness needs from the warm-up: the seconds (``--time``) and, per family, the
        # package files it imported (relative to the package: the gate's proof that a count is the same)
        import json

        imported = sorted(set().union(*by_family.values())) if by_family else []
        print(json.dumps({"seconds": seconds if timed else None, "imported": imported, "families": by_family}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
