"""SparseGeometricRAG: index build and end-to-end query (text in -> top-10 out), SciFact and
a synthetic corpus, at 1 and 2 threads, with bm25s (numba backend) side by side."""

from __future__ import annotations

from benchmarks.common import PROFILE, Benchmark, jk, synthetic_texts

__all__ = [
    "BM25sSciFactQuery",
    "BM25sSyntheticQuery",
    "SGRSciFactBuild",
    "SGRSciFactQuery",
    "SGRStreamingBuild",
    "SGRSyntheticBuild",
    "SGRSyntheticQuery",
    "synthetic_texts",
]

SYNTHETIC_DOCS = 2_000 if PROFILE == "fast" else 200_000
STREAM_DOCS = 2_000 if PROFILE == "fast" else 200_000
# the fast profile (CI's smoke run) times one thread count; the regular one both
THREADS = [1] if PROFILE == "fast" else [1, 2]
_SYNTHETIC_INDEX = "sgr_synthetic_index"  # written by setup_cache into asv's per-suite working directory


def _scifact():
    """(doc_texts, test query texts) of the bundled SciFact copy."""
    ds = jk("jkofast.datasets.beir").load_dataset("scifact")
    q = ds.queries
    return ds.doc_texts(" "), [q[i] for i in ds.split_query_ids("test")]


class SGRSciFactBuild(Benchmark):
    """Index build on SciFact (5,183 docs); tracks index bytes per document."""

    params = [THREADS]
    param_names = ["threads"]

    def make_inputs(self, threads):
        self.texts, _ = _scifact()

    def run(self, threads):
        from jkofast.sgr import SparseGeometricRetriever

        self.r = SparseGeometricRetriever().fit(self.texts, n_threads=threads)

    def time_build(self, threads):
        self.run(threads)

    def track_index_bytes_per_doc(self, threads):
        return self.r.index_nbytes() / self.r.n_docs_

    track_index_bytes_per_doc.unit = "bytes"


class SGRSciFactQuery(Benchmark):
    """End to end on the 300 SciFact test queries: tokenise + TF-IDF + SGR -> top-10."""

    params = [THREADS]
    param_names = ["threads"]

    def make_inputs(self, threads):
        from jkofast.sgr import SparseGeometricRetriever

        texts, self.queries = _scifact()
        self.r = SparseGeometricRetriever().fit(texts)

    def run(self, threads):
        self.r.search(self.queries, k=10, n_threads=threads)

    def time_search_300_queries(self, threads):
        self.run(threads)


class _BM25sPeer(Benchmark):
    """bm25s (numba backend) over ``self.corpus()`` = (doc texts, query texts): index in
    setup, text in -> top-10 out (tokenisation included) in the timed call."""

    params = [THREADS]
    param_names = ["threads"]

    def corpus(self):
        raise NotImplementedError

    def make_inputs(self, threads):
        try:
            import bm25s
        except ImportError:
            raise NotImplementedError("bm25s not installed") from None
        texts, self.queries = self.corpus()
        self.bm25s = bm25s
        self.ret = bm25s.BM25(backend="numba")
        self.ret.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)

    def run(self, threads):
        from jkofast import numba_threads

        with numba_threads(threads):
            tok = self.bm25s.tokenize(self.queries, stopwords=None, show_progress=False)
            self.ret.retrieve(tok, k=10, n_threads=threads, show_progress=False)


class BM25sSciFactQuery(_BM25sPeer):
    """Peer: bm25s (numba backend), tokenisation included, top-10, same queries."""

    def corpus(self):
        return _scifact()

    def time_search_300_queries(self, threads):
        self.run(threads)


class SGRSyntheticQuery(Benchmark):
    """Synthetic corpus (200k docs in the regular profile, 2k in fast): end-to-end search
    of 200 queries, tail gate off (the frozen method) and on (the optional gate).  The index
    is built once per commit in ``setup_cache`` (2 threads) and saved; each parameter loads it,
    so the regular profile can afford asv's repeats (samples give ``asv compare`` its statistics)."""

    params = [THREADS, [False, True]]
    param_names = ["threads", "tail_gate"]
    timeout = 3600

    def setup_cache(self):
        from jkofast.sgr import SparseGeometricRetriever

        docs, queries = synthetic_texts(SYNTHETIC_DOCS, 200)
        SparseGeometricRetriever().fit(docs, n_threads=2).save(_SYNTHETIC_INDEX)
        return queries

    def make_inputs(self, queries, threads, tail_gate):
        from jkofast.sgr import SparseGeometricRetriever

        self.queries = queries
        self.r = SparseGeometricRetriever.load(_SYNTHETIC_INDEX).set_params(tail_gate=tail_gate)

    def run(self, queries, threads, tail_gate):
        self.r.search(self.queries, k=10, n_threads=threads)

    def time_search_200_queries(self, queries, threads, tail_gate):
        self.run(queries, threads, tail_gate)

    def track_index_bytes_per_doc(self, queries, threads, tail_gate):
        return self.r.index_nbytes() / self.r.n_docs_

    track_index_bytes_per_doc.unit = "bytes"

    def track_postings_bytes_per_doc(self, queries, threads, tail_gate):
        """The compressed inverted postings alone (format 3: document gaps + one-byte frequencies)."""
        return self.r.index_nbytes(breakdown=True)["postings"] / self.r.n_docs_

    track_postings_bytes_per_doc.unit = "bytes"


class SGRSyntheticCompact(Benchmark):
    """The compact index (``postings=False``, SPEC B.11) on the synthetic corpus, saved in
    format 2: ``load(mmap=True)`` time, end-to-end search of 200 queries on the mapped index
    (pages read on demand), and bytes per document."""

    params = [[1]]
    param_names = ["threads"]
    timeout = 3600

    def setup_cache(self):
        from jkofast.sgr import SparseGeometricRetriever

        docs, queries = synthetic_texts(SYNTHETIC_DOCS, 200)
        SparseGeometricRetriever(postings=False).fit(docs, n_threads=2).save(_SYNTHETIC_INDEX + "_compact")
        return queries

    def make_inputs(self, queries, threads):
        from jkofast.sgr import SparseGeometricRetriever

        self.queries = queries
        self.r = SparseGeometricRetriever.load(_SYNTHETIC_INDEX + "_compact", mmap=True)

    def run(self, queries, threads):
        self.r.search(self.queries, k=10, n_threads=threads)

    def time_search_200_queries_mmap(self, queries, threads):
        self.run(queries, threads)

    def time_load_mmap(self, queries, threads):
        from jkofast.sgr import SparseGeometricRetriever

        SparseGeometricRetriever.load(_SYNTHETIC_INDEX + "_compact", mmap=True)

    def track_index_bytes_per_doc(self, queries, threads):
        return self.r.index_nbytes() / self.r.n_docs_

    track_index_bytes_per_doc.unit = "bytes"


class BM25sSyntheticQuery(_BM25sPeer):
    """Peer: bm25s (numba backend) on the same synthetic corpus and queries, tokenisation
    included, top-10."""

    timeout = 3600
    repeat = 1
    number = 1
    warmup_time = 0

    def corpus(self):
        return synthetic_texts(SYNTHETIC_DOCS, 200)

    def time_search_200_queries(self, threads):
        self.run(threads)


class SGRSyntheticBuild(Benchmark):
    """Index build on the synthetic corpus (dominated by the second-order graph G, whose
    exact cost is Σ_n (column length of A at n)²).  Warm-up compiles on a tiny slice."""

    params = [[2]]
    param_names = ["threads"]
    timeout = 3600
    repeat = 1
    number = 1
    warmup_time = 0

    def make_inputs(self, threads):
        self.docs, _ = synthetic_texts(SYNTHETIC_DOCS, 1)

    def setup(self, threads):
        from jkofast.sgr import SparseGeometricRetriever

        self.make_inputs(threads)
        SparseGeometricRetriever().fit(self.docs[:50], n_threads=threads)  # compile only

    def run(self, threads):
        from jkofast.sgr import SparseGeometricRetriever

        SparseGeometricRetriever().fit(self.docs, n_threads=threads)

    def time_build(self, threads):
        self.run(threads)


class SGRStreamingBuild(Benchmark):
    """Streaming build from a file (``jkofast.sgr.streaming.build_index``) on the synthetic corpus
    written as ``corpus.jsonl``: passages/s of the whole build and of its tokens stage (read,
    parse, tokenise, write the token shards); shards of a quarter of the corpus, the geometry
    calibrated on the first quarter (as B.11 calibrates on a subset), compact layout."""

    params = [THREADS]
    param_names = ["threads"]
    timeout = 1800

    def setup_cache(self):
        import json
        import os

        docs, _ = synthetic_texts(STREAM_DOCS, 1)
        path = os.path.abspath("sgr_stream_corpus.jsonl")
        with open(path, "w") as fh:
            fh.writelines(json.dumps({"_id": str(i), "title": "", "text": t}) + "\n" for i, t in enumerate(docs))
        return path

    def make_inputs(self, path, threads):
        self.info = None

    def run(self, path, threads):
        import tempfile

        from jkofast.sgr.streaming import build_index

        with tempfile.TemporaryDirectory() as tmp:
            r = build_index(
                path, tmp, calibrate=STREAM_DOCS // 4, shard_size=STREAM_DOCS // 4, params={"postings": False},
                n_threads=threads, progress=False,
            )  # fmt: skip
            self.info = r.build_info_
            del r

    def track_build_passages_per_second(self, path, threads):
        self.run(path, threads)
        return self.info["n_docs"] / self.info["seconds"]

    track_build_passages_per_second.unit = "passages/s"

    def track_tokens_passages_per_second(self, path, threads):
        self.run(path, threads)
        return self.info["n_docs"] / self.info["stage_seconds"]["tokens"]

    track_tokens_passages_per_second.unit = "passages/s"
