"""Helpers shared by CLI sub-commands: the progress line, the output, the retriever options."""

from __future__ import annotations

import json
import sys
import time

__all__ = ["METHODS", "Progress", "add_method_args", "build_retriever", "emit", "method_params"]

# = jkofast.sparse.retriever.METHODS, spelled out: building the parser must not import the retriever (numba)
METHODS = ("bm25", "bm25-lucene", "tfidf", "sgr")


class Progress:
    """Progress/throughput line on stderr (silent when ``enabled`` is False).

    With a ``total``: ``label: done/total (rate/s)``, redrawn at most every ``every_s`` seconds
    and at the end.  With ``total=None`` (a stream of unknown length): ``label: done unit
    (rate/s)``, and :meth:`close` draws the final count.
    """

    def __init__(self, total: int | None, label: str, enabled: bool = True, every_s: float = 0.5, unit: str = ""):
        self.total, self.label, self.enabled, self.every_s, self.unit = total, label, enabled, every_s, unit
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def start(self) -> None:
        """Restart the clock (the work begins now)."""
        self.t0 = time.perf_counter()

    def _line(self, now: float) -> str:
        rate = self.done / max(now - self.t0, 1e-9)
        if self.total is None:
            return f"\r{self.label}: {self.done:,} {self.unit} ({rate:,.1f}/s)"
        return f"\r{self.label}: {self.done}/{self.total} ({rate:,.0f}/s)"

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items done."""
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self._last >= self.every_s or (self.total is not None and self.done >= self.total)):
            self._last = now
            print(self._line(now), end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        """End the line (drawing the final count of a stream)."""
        if self.enabled:
            print(self._line(time.perf_counter()) if self.total is None else "", file=sys.stderr, flush=True)


def emit(obj, as_json: bool, text: str | None = None) -> None:
    """Print ``obj`` as JSON (``--json``) or the given human text."""
    if as_json:
        print(json.dumps(obj, indent=2, default=float))
    else:
        print(text if text is not None else obj)


def add_method_args(p) -> None:
    """Arguments shared by ``index`` and ``search``."""
    p.add_argument("--dataset", default="scifact", help='"scifact" (bundled) or a BEIR folder path')
    p.add_argument("--method", default="bm25", choices=METHODS, help="retriever (default bm25 = Okapi, rank_bm25)")
    p.add_argument("--k1", type=float, default=None, help="BM25 k1 (default 1.5)")
    p.add_argument("--b", type=float, default=None, help="BM25 b (default 0.75)")
    p.add_argument(
        "--stopwords",
        choices=("english", "none"),
        default=None,
        help="stop-word list (default: english for bm25-lucene, none otherwise)",
    )
    p.add_argument(
        "--stemmer",
        choices=("porter", "none"),
        default=None,
        help="stem tokens (Porter 1980) after stop-word removal (default none)",
    )
    p.add_argument("--max-features", type=int, default=None, help="keep the most frequent terms only")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default all)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="a qrels judgement on a document absent from the corpus or a query without text is an error "
        "(default: dropped with one warning giving the count)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def method_params(args) -> dict:
    """Return the retriever parameters of the shared options.

    An option the method does not take is an error (``--method sgr --stemmer porter`` used to
    build an unstemmed index silently).
    """
    ignored = []
    if args.method not in ("bm25", "bm25-lucene"):
        ignored += [o for o, v in (("--k1", args.k1), ("--b", args.b)) if v is not None]
    if args.method == "sgr":
        ignored += [
            o
            for o, v in (
                ("--stopwords", args.stopwords),
                ("--stemmer", getattr(args, "stemmer", None)),
                ("--max-features", args.max_features),
            )
            if v is not None
        ]
    if ignored:
        raise ValueError(f"{', '.join(ignored)} do(es) not apply to --method {args.method}")
    params = {}
    if args.method in ("bm25", "bm25-lucene"):
        if args.k1 is not None:
            params["k1"] = args.k1
        if args.b is not None:
            params["b"] = args.b
    if args.method != "sgr":
        if args.stopwords is not None:
            params["stopwords"] = None if args.stopwords == "none" else "english"
        if args.max_features is not None:
            params["max_features"] = args.max_features
        if getattr(args, "stemmer", None) not in (None, "none"):
            params["stemmer"] = args.stemmer
    return params


def build_retriever(args):
    """Load the dataset and fit the retriever; returns ``(dataset, retriever, seconds)``."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.sparse.retriever import DOC_SEP, get_retriever

    ds = load_dataset(args.dataset, strict=getattr(args, "strict", False))
    retr = get_retriever(args.method, **method_params(args))
    texts = ds.doc_texts(DOC_SEP[args.method])
    t0 = time.perf_counter()
    if args.method == "sgr":  # the SGR build runs Numba kernels: --threads applies
        retr.fit(texts, ids=ds.doc_ids, n_threads=args.threads)  # saved: search checks them
    else:
        retr.fit(texts)
    return ds, retr, time.perf_counter() - t0
