"""Helpers shared by CLI sub-commands: the output and the retriever options."""

from __future__ import annotations

import json
import os
import time

__all__ = [
    "METHODS",
    "add_method_args",
    "build_retriever",
    "check_qrels",
    "emit",
    "method_params",
    "parse_param",
]

# = jkofast.pools.retrievers.METHODS, spelled out: building the parser must not import the retriever (numba)
METHODS = ("bm25", "bm25-lucene", "tfidf", "sgr")
# = jkofast.text.stopwords.STOPWORD_LISTS (+ "none") and the keys of jkofast.sgr.retriever.PRESETS, likewise
STOPWORD_CHOICES = ("english", "sklearn", "lucene", "bm25s", "none")
PRESET_CHOICES = ("published",)


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
        choices=STOPWORD_CHOICES,
        default=None,
        help="stop-word list: english = sklearn (scikit-learn's 318 words), lucene or bm25s (the same 33 "
        "words), none (default: english for bm25-lucene, none otherwise)",
    )
    p.add_argument(
        "--stemmer",
        default=None,
        metavar="{porter,snowball-LANG,none}",
        help="stem tokens after stop-word removal: porter (Porter 1980, the published recipe's) or "
        'snowball-LANG (PyStemmer\'s Snowball stemmer of LANG, e.g. snowball-english; pip install "jkofast[bench]") '
        "(default none)",
    )
    p.add_argument(
        "--preset",
        choices=PRESET_CHOICES,
        default=None,
        help="named retriever parameters; sgr: published = semantic_neighbours=lowest_term_id "
        "ppmi_include_self=True (the published SciFact row)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any retriever parameter (repeatable; typed by the parameter's default; applied after --preset)",
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
    """Return the retriever parameters of the shared options, ``--preset`` and ``--param``.

    An option the method does not take is an error (``--method sgr --stemmer porter`` used to
    build an unstemmed index silently); so are an unknown ``--param`` key (the message lists the
    valid ones) and a value that does not parse as the parameter's type.
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
            params["stopwords"] = None if args.stopwords == "none" else args.stopwords
        if args.max_features is not None:
            params["max_features"] = args.max_features
        if getattr(args, "stemmer", None) not in (None, "none"):
            params["stemmer"] = args.stemmer
    params.update(_preset_and_params(args))
    return params


def _preset_and_params(args) -> dict:
    """``--preset`` then ``--param KEY=VALUE`` of ``args`` as retriever parameters."""
    preset, pairs = getattr(args, "preset", None), getattr(args, "param", None) or []
    if preset is None and not pairs:
        return {}
    from jkofast.pools.retrievers import param_types, presets

    out = {}
    if preset is not None:
        known = presets(args.method)
        if preset not in known:
            have = ", ".join(known) or "none"
            raise ValueError(f"--preset {preset} does not apply to --method {args.method} (its presets: {have})")
        out.update(known[preset])
    types = param_types(args.method)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"--param {pair!r}: expected KEY=VALUE")
        if key not in types:
            raise ValueError(
                f"--param {key}: not a parameter of --method {args.method}; valid keys: {', '.join(sorted(types))}"
            )
        out[key] = parse_param(key, value.strip(), types[key])
    return out


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse_param(key: str, value: str, kind: type):
    """Parse ``--param KEY=VALUE`` as ``kind`` (bool / int / float / str; ``none`` is None for str and int)."""
    if kind is str:
        return None if value.lower() == "none" else value
    if kind is bool:
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ValueError(f"--param {key}={value}: expected a boolean (true/false)")
    if kind is int and value.lower() == "none":
        return None
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"--param {key}={value}: expected {kind.__name__}") from None


def build_retriever(args):
    """Load the dataset and fit the retriever; returns ``(dataset, retriever, seconds)``."""
    from jkofast.datasets.beir import load_dataset
    from jkofast.pools.retrievers import DOC_SEP, get_retriever

    ds = load_dataset(args.dataset, strict=getattr(args, "strict", False))
    retr = get_retriever(args.method, **method_params(args))
    texts = ds.doc_texts(DOC_SEP[args.method])
    t0 = time.perf_counter()
    if args.method == "sgr":  # the SGR build runs Numba kernels: --threads applies
        retr.fit(texts, ids=ds.doc_ids, n_threads=args.threads)  # saved: search checks them
    else:
        retr.fit(texts)
    return ds, retr, time.perf_counter() - t0


def check_qrels(dataset: str, needed) -> None:
    """Refuse, before any work, a BEIR folder without the judgements a command reads.

    ``needed``: ``(option, split)`` pairs, e.g. ``[("--split", "train"), ("--eval-split", "test")]``.
    A bundled name or a folder that does not exist is left to the loader (its own message).
    """
    if not os.path.isdir(dataset):
        return
    qdir = os.path.join(dataset, "qrels")
    for option, split in needed:
        need = os.path.join(qdir, f"{split}.tsv")
        if not os.path.isdir(qdir):
            raise ValueError(
                f"--dataset {dataset} has no qrels/ folder: {option} {split} reads {need} "
                "(BEIR layout: qrels/<split>.tsv with query-id, corpus-id, score)"
            )
        if not os.path.isfile(need):
            have = sorted(f[:-4] for f in os.listdir(qdir) if f.endswith(".tsv"))
            raise ValueError(f"{option} {split}: no {need}; the splits of {qdir} are: {', '.join(have) or 'none'}")
