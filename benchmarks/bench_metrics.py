"""asv suites: ranking metrics (end to end from dicts, from files, and the kernel alone), bootstrap CIs.

Side-by-side figures against pytrec_eval and ranx: ``benchmarks/tools/compare_metrics.py``; from
files (``evaluate_files`` vs pytrec_eval's documented file reading): ``compare_evaluate_files.py``.
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks.common import PROFILE, SHARED_DATA, Benchmark, jk, make_metric_data

METRICS = ("ndcg@10", "recall@10", "p@10", "mrr@10", "map")


def _synthetic(n_queries: int, depth: int, seed: int = 0):
    return make_metric_data(n_queries, depth, seed=seed)


class EvaluateDicts(Benchmark):
    """``evaluate(run_dict, qrels_dict)``: flattening + id packing + kernel."""

    params = ([1000, 10000] if PROFILE != "fast" else [200], [100], [1])
    param_names = ["n_queries", "depth", "n_threads"]

    def make_inputs(self, n_queries, depth, n_threads):
        self.run_d, self.qrels_d = _synthetic(n_queries, depth)

    def run(self, n_queries, depth, n_threads):
        jk("jkofast.eval.metrics").evaluate(self.run_d, self.qrels_d, METRICS, n_threads=n_threads)

    def time_evaluate(self, *p):
        self.run(*p)


class EvaluateFiles(Benchmark):
    """``evaluate_files(run_file, qrels_file)``: read + metrics from a TREC run and qrels on disk."""

    params = ([10000] if PROFILE != "fast" else [200], [100], [1, 2])
    param_names = ["n_queries", "depth", "n_threads"]

    def make_inputs(self, n_queries, depth, n_threads):
        import tempfile

        try:
            from jkofast.eval.fastread import evaluate_files
        except ImportError:  # a commit before evaluate_files
            raise NotImplementedError("evaluate_files is absent") from None
        self.evaluate_files = evaluate_files
        run, qrels = _synthetic(n_queries, depth)
        self.tmp = tempfile.TemporaryDirectory()
        self.run_p = os.path.join(self.tmp.name, "run.trec")
        self.qrels_p = os.path.join(self.tmp.name, "qrels.txt")
        with open(self.run_p, "w") as fh:
            for q, docs in run.items():
                for r, (d, sc) in enumerate(sorted(docs.items(), key=lambda t: -t[1]), 1):
                    fh.write(f"{q} Q0 {d} {r} {sc:.4f} synth\n")
        with open(self.qrels_p, "w") as fh:
            for q, docs in qrels.items():
                fh.writelines(f"{q} 0 {d} {lab}\n" for d, lab in docs.items())

    def teardown(self, *params):
        if getattr(self, "tmp", None) is not None:  # a skipped setup made no folder
            self.tmp.cleanup()

    def run(self, n_queries, depth, n_threads):
        self.evaluate_files(self.run_p, self.qrels_p, METRICS, n_threads=n_threads)

    def time_evaluate_files(self, *p):
        self.run(*p)


class EvaluateKernel(Benchmark):
    """The batched kernel alone on packed arrays (trec_eval order)."""

    params = ([1000, 10000] if PROFILE != "fast" else [200], [100, 1000], [1, 2])
    param_names = ["n_queries", "depth", "n_threads"]

    def make_inputs(self, n_queries, depth, n_threads):
        M = jk("jkofast.eval.metrics")

        if n_queries * depth > 2_000_000:
            raise NotImplementedError("grid point skipped (too large)")
        run, qrels = _synthetic(n_queries, depth)
        qids = list(run)
        self.roff, rids, sc = M._flatten_dict(run, qids, np.float64)
        self.qoff, qids_, self.lab = M._flatten_dict(qrels, qids, np.int64)
        self.rr, self.qr = M._id_rows(rids, qids_)
        self.s32 = sc.astype(np.float32)
        _, self.kinds, self.ks = M._parse_metrics(METRICS)
        self.out = np.zeros((len(qids), len(METRICS)))
        self.nret = np.zeros(len(qids), np.int64)

    def run(self, n_queries, depth, n_threads):
        from jkofast import numba_threads

        K = jk("jkofast.kernels.eval.metrics")

        run = (self.roff, self.rr, self.s32, self.qoff, self.qr, self.lab, self.kinds, self.ks, K.GAIN_LINEAR)
        with numba_threads(n_threads):
            if hasattr(K, "evaluate_batch_chars_trec"):
                K.evaluate_batch_chars_trec(*run, False, self.out, self.nret)
            else:  # a commit before the kernel per tie mode (asv runs this suite on older commits too)
                K.evaluate_batch_chars(*run, K.TIE_TREC_EVAL, False, self.out, self.nret)

    def time_kernel(self, *p):
        self.run(*p)


class EvaluateSciFact(Benchmark):
    """SciFact BM25 top-100 run (300 test queries) from ../shared/data."""

    params = ([1],)
    param_names = ["n_threads"]

    def make_inputs(self, n_threads):
        T = jk("jkofast.eval.trec")

        run_p = os.path.join(SHARED_DATA, "scifact", "runs", "bm25s_snowball_test_top100.tsv.gz")
        qrels_p = os.path.join(SHARED_DATA, "scifact", "qrels", "test.tsv")
        if not (os.path.exists(run_p) and os.path.exists(qrels_p)):
            raise NotImplementedError("../shared/data/scifact is absent")
        self.run_d, self.qrels_d = T.read_run(run_p), T.read_qrels(qrels_p)

    def run(self, n_threads):
        jk("jkofast.eval.metrics").evaluate(self.run_d, self.qrels_d, METRICS, n_threads=n_threads)

    def time_evaluate(self, *p):
        self.run(*p)

    def track_ndcg10(self, *p):
        """Correctness rides along: mean nDCG@10 of the BM25 run."""
        evaluate = jk("jkofast.eval.metrics").evaluate
        return float(evaluate(self.run_d, self.qrels_d, ["ndcg@10"]).means["ndcg@10"])


class Bootstrap(Benchmark):
    """``bootstrap_ci`` with the SPEC's 2000 replicates."""

    params = ([300, 10000],)
    param_names = ["n"]

    def make_inputs(self, n):
        self.x = np.random.default_rng(0).random(n)

    def run(self, n):
        jk("jkofast.eval.metrics").bootstrap_ci(self.x)

    def time_bootstrap_ci(self, *p):
        self.run(*p)


class FirstCall:
    """Compile time of the metrics kernels: first ``evaluate`` call in a fresh process
    with the on-disk cache off (``JKOFAST_NUMBA_CACHE=0``)."""

    timeout = 600
    number = 1
    repeat = 1

    def track_first_call_seconds(self):
        import subprocess
        import sys

        code = (
            "import time\n"
            "t = time.perf_counter()\n"
            "try:\n"
            "    from jkofast.eval.metrics import evaluate\n"
            "except ModuleNotFoundError:  # a commit before the layout change\n"
            "    from jkofast.evaluation import evaluate\n"
            "evaluate({'q': {'a': 1.0, 'b': 0.5}}, {'q': {'a': 1}})\n"
            "print(time.perf_counter() - t)\n"
        )
        env = dict(os.environ, JKOFAST_NUMBA_CACHE="0")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        return float(out.stdout.strip().splitlines()[-1])

    track_first_call_seconds.unit = "seconds"
