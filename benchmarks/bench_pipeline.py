"""asv suites for the retrieval pipeline: global RRF pools, per-pool energies, pool baselines, rerank CLI I/O."""

from __future__ import annotations

import types

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark, jk
from jkofast import numba_threads


def _pools(nq, m, d, dtype=np.float32):
    rng = np.random.default_rng(SEED)
    off = np.arange(0, (nq + 1) * m, m, dtype=np.int64)
    Z = rng.normal(size=(nq * m, d)).astype(dtype)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    return off, rng.random(nq * m).astype(dtype), rng.random(nq * m).astype(dtype), Z


class RRFPools(Benchmark):
    """Global hybrid RRF: nq queries x (500 sparse + 500 dense) -> M = 200."""

    params = ([300] if PROFILE == "fast" else [300, 3000], [1, 2])
    param_names = ["n_queries", "threads"]

    def make_inputs(self, nq, threads):
        rng = np.random.default_rng(SEED)
        n_docs = 50_000
        self.s = np.stack([rng.choice(n_docs, 500, replace=False) for _ in range(nq)])
        self.d = np.stack([rng.choice(n_docs, 500, replace=False) for _ in range(nq)])

    def run(self, nq, threads):
        from jkofast.pools import rrf_fuse

        rrf_fuse(self.s, self.d, M=200, n_threads=threads)

    def time_rrf_fuse(self, nq, threads):
        self.run(nq, threads)


class Energy(Benchmark):
    """minmax blend + softmax p0 over nq pools of 200."""

    params = ([1000] if PROFILE == "fast" else [1000, 10000],)
    param_names = ["n_queries"]

    def make_inputs(self, nq):
        self.off, self.a, self.b, _ = _pools(nq, 200, 1)

    def run(self, nq):
        jk("jkofast.jko.energy").energy_and_p0(self.off, dense=self.a, rerank=self.b, alpha=0.4, gamma=0.6, tau0=0.1)

    def time_energy_and_p0(self, nq):
        self.run(nq)


class PoolBaselines(Benchmark):
    """In-pool RRF, MMR (lambda 0.5) and DPP-MAP (k = 20) over nq pools of M = 200, d = 384."""

    params = (["inpool_rrf", "mmr", "dpp_map"], [1, 2])
    param_names = ["method", "threads"]

    def make_inputs(self, method, threads):
        nq = 50 if PROFILE == "fast" else 300
        self.off, self.s, self.d, self.Z = _pools(nq, 200, 384)

    def run(self, method, threads):
        B = jk("jkofast.pools.baselines")
        with numba_threads(threads):
            if method == "inpool_rrf":
                B.inpool_rrf(self.s, self.d, self.off, 20)
            elif method == "mmr":
                B.mmr(self.s, self.Z, self.off, 20)
            else:
                B.dpp_map(self.s, self.Z, self.off, 20)

    def time_baseline(self, method, threads):
        self.run(method, threads)


class SciFactPools(Benchmark):
    """Hybrid pools of the bundled SciFact test queries (BM25 okapi + MiniLM -> RRF -> 200);
    times pool construction and tracks the in-pool RRF / blend nDCG@10 (correctness rides along)."""

    params = (["build_pools", "inpool_rrf", "blend"],)
    param_names = ["step"]
    timeout = 300

    def make_inputs(self, step):
        C = jk("jkofast.pools.candidates")
        get_retriever = jk("jkofast.pools.retrievers").get_retriever

        ds = jk("jkofast.datasets.beir").load_dataset("scifact")
        n = 60 if PROFILE == "fast" else 300
        self.qids = ds.split_query_ids("test")[:n]
        self.ds = ds
        self.S = get_retriever("bm25").fit(ds.doc_texts(". ")).score_all([ds.queries[q] for q in self.qids])
        demb, qemb = ds.embeddings()
        row = {q: i for i, q in enumerate(ds.query_ids)}
        self.D = C.dense_scores(demb, qemb[[row[q] for q in self.qids]])
        self.P = C.build_pools(self.S, self.D, query_ids=self.qids)

    def run(self, step):
        from jkofast.pools import build_pools

        blend = jk("jkofast.jko.energy").blend
        B = jk("jkofast.pools.baselines")
        P = self.P
        if step == "build_pools":
            return build_pools(self.S, self.D, query_ids=self.qids).doc_idx
        if step == "inpool_rrf":
            return B.positions_to_docs(B.inpool_rrf(P.sparse, P.dense, P.offsets, 20), P.offsets, P.doc_idx)
        r = blend(P.offsets, dense=P.dense, rerank=P.sparse, alpha=0.4, gamma=0.6)
        return B.positions_to_docs(B.topk_by_score(r, P.offsets, 20), P.offsets, P.doc_idx)

    def time_step(self, step):
        self.run(step)

    def track_ndcg10(self, step):
        evaluate_topk = jk("jkofast.studies.main_job").evaluate_topk
        if step == "build_pools":
            return self.P.recall(self.ds.qrels("test"), self.ds.doc_ids)  # micro pool recall
        top = self.run(step)
        return float(np.mean(evaluate_topk(top, self.qids, self.ds.qrels("test"), self.ds.doc_ids)["ndcg"]))

    track_ndcg10.unit = "nDCG@10 (pool recall for build_pools)"


class RerankIO(Benchmark):
    """``jkofast rerank`` input/output path without the JKO kernel, nq pools of M = 200 in a
    6-column TREC file: ``parse`` (file -> chunks), ``format`` (doc id -> row, energy/p0, output
    text, the kernel replaced by p0) and both."""

    params = (["parse", "format", "parse_format"],)
    param_names = ["step"]

    def make_inputs(self, step):
        import tempfile

        S = jk("jkofast.jko.stream")

        nq, m, n_docs = (200 if PROFILE == "fast" else 2000), 200, 50_000
        rng = np.random.default_rng(SEED)
        self._dir = tempfile.TemporaryDirectory()
        self.path = f"{self._dir.name}/run.trec"
        with open(self.path, "w") as fh:
            for q in range(nq):
                docs = rng.choice(n_docs, m, replace=False)
                sc = -np.sort(-rng.gamma(2.0, 2.0, m))
                fh.write(
                    "".join(
                        f"q{q} Q0 doc{d} {r + 1} {s:.4f} synth\n"
                        for r, (d, s) in enumerate(zip(docs.tolist(), sc.tolist(), strict=True))
                    )
                )

        class _Rows:  # the geometry's doc id -> row lookup, no embedding gather
            row = {f"doc{i}": i for i in range(n_docs)}

            def rows(self, docs):
                return S._map_rows(self.row, docs)

        self.geom = _Rows()
        self.args = types.SimpleNamespace(alpha=0.4, gamma=0.6, k=0, tag="jkofast", threads=1, confidence=None)
        self.cfg = types.SimpleNamespace(tau0=0.1)
        self.chunks = list(jk("jkofast.eval.runio").iter_chunks(self.path, 500, None))

    def teardown(self, step):
        self._dir.cleanup()

    def _format(self, chunks):
        S = jk("jkofast.jko.stream")
        out = 0
        for c in chunks:
            pr = S.prepare_chunk(c, self.geom, None, self.cfg, self.args)
            _, p0 = S.energy_p0(pr, self.cfg, self.args)
            res = types.SimpleNamespace(p=p0, status=np.zeros(len(pr.off_ok) - 1, np.int32), errors={})
            out += len(S.finish_chunk(pr, res, self.args, print)[0])
        return out

    def run(self, step):
        iter_chunks = jk("jkofast.eval.runio").iter_chunks
        if step == "parse":
            return list(iter_chunks(self.path, 500, None))
        if step == "format":
            return self._format(self.chunks)
        return self._format(iter_chunks(self.path, 500, None))

    def time_rerank_io(self, step):
        self.run(step)
