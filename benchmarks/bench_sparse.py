"""asv suites for the sparse first stage: index build, batched top-k, pool cosines, and the
bm25s (numba backend) peer on the same inputs.  1 thread unless a ``threads`` parameter says
otherwise.  SciFact is the bundled copy (always present); the synthetic corpus is a seeded
Zipf corpus of integer token ids (``benchmarks.common.zipf_corpus``)."""

from __future__ import annotations

import functools

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark, jk, zipf_corpus
from jkofast import numba_threads

ZIPF_SIZES = [20_000] if PROFILE == "fast" else [20_000, 200_000]


@functools.lru_cache(maxsize=1)
def scifact():
    ds = jk("jkofast.datasets.beir").load_dataset("scifact")
    return ds, list(ds.query_texts)


@functools.lru_cache(maxsize=2)
def zipf(n_docs):
    return zipf_corpus(n_docs, 100_000, 60, seed=SEED)


def _retriever(method):
    return jk("jkofast.pools.retrievers").get_retriever(method)


class SciFactBuild(Benchmark):
    """Text -> index (analyser + weights + postings), 5183 docs."""

    params = (["bm25", "bm25-lucene", "tfidf"],)
    param_names = ["method"]

    def make_inputs(self, method):
        DOC_SEP = jk("jkofast.pools.retrievers").DOC_SEP
        ds, _ = scifact()
        self.docs = ds.doc_texts(DOC_SEP[method])

    def run(self, method):
        with numba_threads(1):
            _retriever(method).fit(self.docs)

    def time_build(self, method):
        self.run(method)


class SciFactSearch(Benchmark):
    """All 1109 SciFact queries, pre-tokenised (query CSR) -> top-k."""

    params = (["bm25", "bm25-lucene", "tfidf"], [10, 1000])
    param_names = ["method", "k"]

    def make_inputs(self, method, k):
        DOC_SEP = jk("jkofast.pools.retrievers").DOC_SEP
        ds, qs = scifact()
        self.index = _retriever(method).fit(ds.doc_texts(DOC_SEP[method])).index
        self.q = self.index.query_csr(qs)

    def run(self, method, k):
        self.index.search_csr(*self.q, k=k, n_threads=1)

    def time_search(self, method, k):
        self.run(method, k)


class SciFactSearchText(Benchmark):
    """End to end from query text (analyser included), BM25 okapi, top-10."""

    def make_inputs(self):
        ds, self.qs = scifact()
        self.r = _retriever("bm25").fit(ds.doc_texts(". "))

    def run(self):
        self.r.search(self.qs, 10, n_threads=1)

    def time_search_text(self):
        self.run()


class ZipfBuild(Benchmark):
    """Token ids -> BM25 (lucene) index on the synthetic Zipf corpus."""

    params = (ZIPF_SIZES,)
    param_names = ["n_docs"]
    timeout = 1200

    def make_inputs(self, n_docs):
        self.flat, self.off, _ = zipf(n_docs)

    def run(self, n_docs):
        BM25Index = jk("jkofast.sparse.index").BM25Index
        with numba_threads(1):
            BM25Index("lucene").fit_token_ids((self.flat, self.off), 100_000)

    def time_build(self, n_docs):
        self.run(n_docs)


class ZipfSearch(Benchmark):
    """1000 Zipf queries (3-8 tokens) -> top-k, BM25 lucene, 1 or 2 threads."""

    params = (ZIPF_SIZES, [10, 1000], [1, 2])
    param_names = ["n_docs", "k", "threads"]
    timeout = 1200

    def make_inputs(self, n_docs, k, threads):
        BM25Index = jk("jkofast.sparse.index").BM25Index
        flat, off, qs = zipf(n_docs)
        self.index = BM25Index("lucene").fit_token_ids((flat, off), 100_000)
        qf = np.concatenate(qs)
        qo = np.r_[0, np.cumsum([q.size for q in qs])].astype(np.int64)
        self.q = self.index._token_query_csr((qf, qo))

    def run(self, n_docs, k, threads):
        self.index.search_csr(*self.q, k=k, n_threads=threads)

    def time_search(self, n_docs, k, threads):
        self.run(n_docs, k, threads)


class PoolCosines(Benchmark):
    """TF-IDF pool geometry: 100 pools of M SciFact rows -> M x M cosines."""

    params = ([50, 200], [1, 2])
    param_names = ["M", "threads"]

    def make_inputs(self, M, threads):
        TfidfIndex = jk("jkofast.sparse.index").TfidfIndex
        ds, _ = scifact()
        D = TfidfIndex().fit(ds.doc_texts(" ")).doc_matrix()
        rng = np.random.default_rng(SEED)
        rows = np.concatenate([rng.choice(D.shape[0], M, replace=False) for _ in range(100)])
        self.X = D[rows]
        self.off = np.arange(0, 100 * M + 1, M)

    def run(self, M, threads):
        cosine_pools = jk("jkofast.sparse.index").cosine_pools
        cosine_pools(self.X, self.off, n_threads=threads)

    def time_cosine_pools(self, M, threads):
        self.run(M, threads)


class BM25sPeer(Benchmark):
    """The peer on the same inputs: bm25s (numba backend), pre-tokenised SciFact queries."""

    params = ([10, 1000],)
    param_names = ["k"]

    def make_inputs(self, k):
        try:
            import bm25s
        except ImportError:
            raise NotImplementedError("bm25s not installed") from None
        ds, qs = scifact()
        docs = ds.doc_texts(" ")
        self.bm = bm25s.BM25(backend="numba")
        self.bm.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
        toks = bm25s.tokenize(qs, stopwords="en", show_progress=False, return_ids=False)
        self.q = [[self.bm.vocab_dict[t] for t in q if t in self.bm.vocab_dict] or [0] for q in toks]

    def run(self, k):
        self.bm.retrieve(self.q, k=k, show_progress=False, n_threads=1, backend_selection="numba")

    def time_bm25s_search(self, k):
        self.run(k)


class TrackSciFactNDCG(Benchmark):
    """Correctness rides along: SciFact test nDCG@10 of BM25 lucene + stop-words (ref 0.662)."""

    def make_inputs(self):
        try:
            import pytrec_eval
        except ImportError:
            raise NotImplementedError("pytrec_eval not installed") from None
        self.pytrec_eval = pytrec_eval
        ds, _ = scifact()
        self.ds = ds
        self.r = _retriever("bm25-lucene").fit(ds.doc_texts(" "))

    def run(self):
        ds = self.ds
        qids = ds.split_query_ids("test")
        qm = ds.queries
        ids, sc = self.r.search([qm[q] for q in qids], 10, n_threads=1)
        run = {q: {ds.doc_ids[i]: float(s) for i, s in zip(ids[n], sc[n])} for n, q in enumerate(qids)}
        res = self.pytrec_eval.RelevanceEvaluator(ds.qrels("test"), {"ndcg_cut.10"}).evaluate(run)
        return float(np.mean([v["ndcg_cut_10"] for v in res.values()]))

    def track_ndcg10(self):
        return self.run()
