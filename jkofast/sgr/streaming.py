"""Streaming, bounded-memory SparseGeometricRAG build from a corpus file (SPEC B.11).

:func:`build_index` indexes a BEIR ``corpus.jsonl`` / ``corpus.jsonl.gz`` (or a BEIR folder)
without holding the texts in memory, in shards of ``shard_size`` passages:

1. **Tokens** (one read of the corpus): each shard's passages (``title + " " + text``, as
   :meth:`SparseGeometricRetriever.fit` joins them) are analysed with the retriever's analyser
   (``script_tokenizer(TOKEN_PATTERN)``); a shard keeps its local term list, its per-passage
   term counts (CSR over local ids), ``dl`` (analyser tokens, out-of-vocabulary ones included)
   and the ids, written to ``out/_build/tokens/NNNNN``.  The file is read as bytes by a reader
   thread ahead of the tokeniser; rows whose JSON needs no decoding (ASCII, no escape, the keys
   ``_id`` / ``title`` / ``text``) are parsed and tokenised by byte kernels, in parallel blocks
   of passages whose term tables are merged in block order; every other row goes through
   ``json`` and, if its text is not ASCII, through the analyser itself
   (:func:`byte_shard_term_counts`: the same arrays as :func:`shard_term_counts`, bit for bit).
2. **Vocabulary** (B.11): the ``local_k`` (150k) heaviest terms of each shard -> the union ->
   the ``candidate_k`` (200k) heaviest by their summed local counts -> exact corpus counts of
   those -> the top ``max_features`` by corpus term frequency.  The selection is
   scikit-learn's ``CountVectorizer`` rule (``(-tf).argsort()[:V]`` over the alphabetically
   sorted terms, then alphabetical ids); when every shard's whole vocabulary fits in
   ``local_k`` and the union in ``candidate_k`` (SciFact, any corpus below ~200k distinct
   terms) it runs on the full vocabulary, so the vocabulary, ``df``, ``idf`` and every TF-IDF
   row are bit-identical to ``fit``'s.  Otherwise the kept set is exact whenever the cut's
   term frequency exceeds the bound on any term outside the candidates (checked; a warning
   says when it is not), and only the order of ties *at the cut* may differ from an
   in-memory ``CountVectorizer`` (whose tie order is that of ``argsort`` over all terms).
3. **Geometry** calibrated with :func:`jkofast.sgr.layout.calibrate` on ``calibrate``
   passages (the first N, or a seeded uniform N), or on the whole corpus (``None``);
4. **Encode** every shard against it (:func:`jkofast.sgr.layout.encode`), written to
   ``out/shards/NNNNN``; 5. **assemble** into the index folder ``out``; its ``meta.json``
   is written last, so an interrupted or failed (disk-full) build never leaves a folder
   that loads as a complete index.

Every stage is saved once and reused: an interrupted build rerun with the same arguments
skips the completed shards (``resume=True``): their corpus lines are read again and must have
the same SHA-1 (a corpus cut short by a failed download and completed since resumes; one whose
indexed part changed is a ``ValueError``); once the whole corpus was read, a change of its size or
modification time is a ``ValueError``, and so are other build parameters.

This module holds the stage control (state, resume, progress, the five stages); the corpus
reading and per-shard term counts are :mod:`jkofast.sgr._corpus`, the vocabulary selection and
the TF-IDF rows :mod:`jkofast.sgr._vocab`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
import warnings

import numpy as np

from jkofast._io import atomic_save_npy, atomic_write_json
from jkofast._numba import register_warmup
from jkofast._progress import ProgressLine
from jkofast._threads import resolve_threads
from jkofast._validation import check_int
from jkofast.sgr import layout
from jkofast.sgr._corpus import (
    ByteShards,
    byte_shard_term_counts,
    corpus_file,
    fingerprint,
    read_corpus_shards,
    shard_term_counts,
)
from jkofast.sgr._vocab import CANDIDATE_K, LOCAL_K, shard_rows, smooth_idf, stream_vocabulary
from jkofast.sgr.config import BUILD_PARAMS, as_config
from jkofast.sgr.retriever import SparseGeometricRetriever

__all__ = [
    "build_index",
    "byte_shard_term_counts",
    "corpus_file",
    "read_corpus_shards",
    "shard_term_counts",
    "stream_vocabulary",
]

_STATE_VERSION = 1


# ---------------------------------------------------------------------------------------------- corpus
def _atomic_dir_write(folder: str, arrays: dict, manifest: dict) -> None:
    """Write ``arrays`` as .npy files into ``folder`` (via a temporary sibling) and the manifest last."""
    tmp = folder + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for k, v in arrays.items():
        atomic_save_npy(os.path.join(tmp, k + ".npy"), v, fsync=False)
    atomic_write_json(os.path.join(tmp, "manifest.json"), manifest)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def _read_done(folder: str, name: str) -> dict | None:
    """Return the manifest of a completed stage folder, ``None`` if absent or incomplete."""
    p = os.path.join(folder, name)
    if not os.path.isfile(p):
        return None
    try:
        with open(p) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _load_arrays(folder: str, names, mmap: bool = False) -> dict:
    return {k: np.load(os.path.join(folder, k + ".npy"), mmap_mode="r" if mmap else None) for k in names}


_TOK_ARRAYS = ("terms", "indptr", "indices", "counts", "dl", "tf", "df", "ids")


# ---------------------------------------------------------------------------------------------- progress
class _Stages:
    """Seconds per build stage, one line per stage on stderr.

    Wall seconds in ``build_info_["stage_seconds"]``, the process's CPU seconds (user, system) in
    ``build_info_["stage_cpu_seconds"]``.
    """

    def __init__(self, enabled: bool):
        self.enabled, self.seconds, self.cpu = enabled, {}, {}
        self.t, self.c = time.perf_counter(), os.times()

    def done(self, name: str, note: str = "") -> None:
        now, c = time.perf_counter(), os.times()
        self.seconds[name] = now - self.t
        self.cpu[name] = (c.user - self.c.user, c.system - self.c.system)
        self.t, self.c = now, c
        if self.enabled:
            tail = f"; {note}" if note else ""
            u, k = self.cpu[name]
            print(
                f"{name}: done in {self.seconds[name]:.1f} s (cpu {u:.1f} + {k:.1f} s){tail}",
                file=sys.stderr,
                flush=True,
            )


# ---------------------------------------------------------------------------------------------- stages
def _check_state(work: str, state: dict, resume: bool) -> None:
    """Start or resume the build in ``work``: a saved state must equal ``state`` (else ``ValueError``)."""
    p = os.path.join(work, "state.json")
    if os.path.isfile(p) and resume:
        with open(p) as fh:
            old = json.load(fh)
        diff = sorted(k for k in state if old.get(k) != state[k])
        if diff:
            raise ValueError(
                f"the interrupted build in {work} used other settings ({', '.join(diff)}); "
                "rerun with the same ones, or with resume=False (--no-resume) to start over"
            )
        return
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    atomic_write_json(p, state, fsync=False, indent=1)


def _tokenise_corpus(path: str, work: str, shard_size: int, bar: ProgressLine, n_threads=None) -> int:
    """Stage 1: write every token shard not yet complete; return the number of shards.

    The corpus is read as bytes ahead of the tokenisation (:class:`ByteShards`); each shard is
    parsed and tokenised by :func:`byte_shard_term_counts` while its SHA-1 is computed on
    another thread.  A resume re-reads the completed shards' bytes and checks their SHA-1;
    once the whole corpus is read, its size and modification time are recorded and checked by
    later resumes.
    """
    from concurrent.futures import ThreadPoolExecutor

    tdir = os.path.join(work, "tokens")
    end = _read_done(tdir, "_end.json")
    if end is not None:
        if end.get("corpus") != fingerprint(path):
            raise ValueError(
                f"the corpus {path} changed since the interrupted build in {work} read it; "
                "rerun with resume=False (--no-resume) to start over"
            )
        return int(end["n_shards"])
    os.makedirs(tdir, exist_ok=True)
    done: list = []
    while (m := _read_done(_tok_dir(work, len(done)), "manifest.json")) is not None:
        done.append((int(m["n_docs"]), m["sha1"]))
    n_shards, n_docs = 0, 0
    src = ByteShards(path)
    pool = ThreadPoolExecutor(1)
    try:
        while True:
            k = n_shards
            part = src.take(done[k][0] if k < len(done) else shard_size)
            if part is None:
                break
            buf, starts, ends, linenos = part
            digest = pool.submit(lambda b=buf: hashlib.sha1(b).hexdigest())
            if k < len(done):
                if starts.shape[0] < done[k][0]:
                    break  # the corpus ends inside a completed shard
                if digest.result() != done[k][1]:
                    raise ValueError(
                        f"{path}: the corpus changed since the interrupted build (shard {k}, up to line "
                        f"{int(linenos[-1])}, differs); rerun with resume=False (--no-resume) to start over"
                    )
                n_shards, n_docs = k + 1, n_docs + done[k][0]
                bar.update(done[k][0], src.pos / max(src.rd.size, 1))
                continue
            tok = byte_shard_term_counts(buf, starts, ends, linenos, path, n_threads)
            man = {"shard": k, "n_docs": int(starts.shape[0]), "first_doc": n_docs, "sha1": digest.result()}
            _atomic_dir_write(_tok_dir(work, k), tok, man)
            n_shards, n_docs = k + 1, n_docs + int(starts.shape[0])
            bar.update(int(starts.shape[0]), src.pos / max(src.rd.size, 1))
    finally:
        pool.shutdown(wait=True)
        src.close()
    if n_shards < len(done):
        raise ValueError(f"{path}: the corpus is shorter than when the interrupted build read it (shard {n_shards})")
    if n_docs == 0:
        raise ValueError(f"{path}: no document (empty corpus file)")
    end = {"n_shards": n_shards, "n_docs": n_docs, "corpus": fingerprint(path)}
    atomic_write_json(os.path.join(tdir, "_end.json"), end, fsync=False)
    return n_shards


def _tok_dir(work: str, k: int) -> str:
    return os.path.join(work, "tokens", f"{k:05d}")


def _vocabulary(work: str, n_shards: int, max_features: int, local_k: int, candidate_k: int) -> dict:
    """Stage 2: vocabulary, idf and dl over all token shards (saved once in ``work/vocab``)."""
    vdir = os.path.join(work, "vocab")
    names = ("terms", "tf", "df", "idf", "dl")
    man = _read_done(vdir, "manifest.json")
    if man is None:
        shards = [(lambda k=k: _load_arrays(_tok_dir(work, k), ("terms", "tf", "df"))) for k in range(n_shards)]
        voc = stream_vocabulary(shards, max_features, local_k, candidate_k)
        if voc["terms"].shape[0] == 0:
            raise ValueError(f"no token matches the SGR analyser's pattern in the corpus ({n_shards} shard(s))")
        dl = np.concatenate([np.load(os.path.join(_tok_dir(work, k), "dl.npy")) for k in range(n_shards)])
        idf = smooth_idf(voc["df"], dl.shape[0])
        man = {"n_docs": int(dl.shape[0]), "n_terms": int(voc["terms"].shape[0])}
        man.update({k: voc[k] for k in ("exact", "n_distinct", "guaranteed")})
        _atomic_dir_write(vdir, {"terms": voc["terms"], "tf": voc["tf"], "df": voc["df"], "idf": idf, "dl": dl}, man)
    out = _load_arrays(vdir, names)
    out["manifest"] = man
    return out


def _calibration_rows(work: str, n_shards: int, n_docs: int, calibrate, mode: str, seed: int, rows_of):
    """Return the calibration subset's TF-IDF rows (CSR float32): all, the first N or a seeded uniform N."""
    import scipy.sparse as sp

    if calibrate is None or calibrate >= n_docs:
        pick = None
    elif mode == "first":
        pick = np.arange(calibrate)
    else:
        pick = np.sort(np.random.default_rng(seed).choice(n_docs, size=calibrate, replace=False))
    blocks, first = [], 0
    for k in range(n_shards):
        n_k = int(np.load(os.path.join(_tok_dir(work, k), "dl.npy"), mmap_mode="r").shape[0])
        if pick is None:
            blocks.append(rows_of(k))
        else:
            sel = pick[(pick >= first) & (pick < first + n_k)] - first
            if sel.size:
                blocks.append(rows_of(k)[sel])
        first += n_k
        if pick is not None and first >= pick[-1] + 1:
            break
    X = sp.vstack(blocks, format="csr").astype(np.float32)
    X.sort_indices()
    return X


# ---------------------------------------------------------------------------------------------- build
def _build_params(params) -> dict:
    """Return the full, checked parameters (defaults + ``params``) of a :class:`SparseGeometricRetriever`."""
    return as_config(params or {}).to_dict()


def _check_build_args(calibrate, calibrate_mode, seed, shard_size) -> None:
    if calibrate is not None:
        calibrate = check_int(calibrate, "calibrate")
        if calibrate <= 0:
            raise ValueError(
                f"calibrate must be a positive number of passages or None (the whole corpus), got {calibrate}"
            )
    if calibrate_mode not in ("first", "uniform"):
        raise ValueError(f"calibrate_mode must be 'first' or 'uniform', got {calibrate_mode!r}")
    check_int(seed, "seed", min_value=0)
    check_int(shard_size, "shard_size", min_value=1)


def _geometry(work: str, n_shards: int, n_docs: int, cal: tuple, rows_of, p: dict, n_threads):
    """Stage 3: the geometry calibrated on the subset ``cal`` = (calibrate, mode, seed), saved once.

    A saved geometry of another calibration choice is replaced (and the shards encoded against it
    are removed).
    """
    gdir = os.path.join(work, "geometry")
    names = [f for f in layout.Geometry._fields if f != "n_calibration"]
    key = [
        cal[0],
        cal[1] if cal[0] is not None else None,
        cal[2] if cal[0] is not None and cal[1] == "uniform" else None,
    ]
    man = _read_done(gdir, "manifest.json")
    if man is not None and man.get("calibration") == key:
        arrs = _load_arrays(gdir, names)
        return layout.Geometry(**arrs, n_calibration=int(man["n_calibration"]))
    shutil.rmtree(os.path.join(os.path.dirname(work), "shards"), ignore_errors=True)
    X = _calibration_rows(work, n_shards, n_docs, *cal, rows_of)
    g = layout.calibrate(X, p, n_threads)
    del X
    man = {"n_calibration": int(g.n_calibration), "calibration": key}
    _atomic_dir_write(gdir, {k: getattr(g, k) for k in names}, man)
    return g


def _encode_shards(work, n_shards, geometry, rows_of, p, n_threads, bar) -> list:
    """Stage 4: encode every shard not yet written (``work/shards/NNNNN``); return the shard folders."""
    folders, first = [], 0
    for k in range(n_shards):
        folder = os.path.join(os.path.dirname(work), "shards", f"{k:05d}")
        n_k = int(np.load(os.path.join(_tok_dir(work, k), "dl.npy"), mmap_mode="r").shape[0])
        if _read_done(folder, "shard.json") is None:
            X, C = rows_of(k, counts=True)
            layout.write_shard(folder, layout.encode(X, geometry, p, n_threads, first, counts=C))
        folders.append(folder)
        first += n_k
        bar.update(n_k, first / _n_docs_of(work))
    return folders


def _n_docs_of(work: str) -> int:
    """Passages of the corpus read into ``work`` (after stage 1)."""
    with open(os.path.join(work, "tokens", "_end.json")) as fh:
        return int(json.load(fh)["n_docs"])


class _Rows:
    """TF-IDF rows (and raw counts) of token shard k in the global vocabulary."""

    def __init__(self, work: str, terms: np.ndarray, idf32: np.ndarray, n_threads=None):
        self.work, self.idf32, self.n_threads = work, idf32, n_threads
        self.terms = terms  # sorted (alphabetical ids): shard_rows searches it

    def __call__(self, k: int, counts: bool = False):
        tok = _load_arrays(_tok_dir(self.work, k), ("terms", "indptr", "indices", "counts"))
        X, C = shard_rows(tok, self.terms, self.idf32, self.n_threads)
        return (X, C) if counts else X


def build_index(
    corpus,
    out,
    calibrate: int | None = None,
    calibrate_mode: str = "first",
    seed: int = 0,
    shard_size: int = 250_000,
    params: dict | None = None,
    n_threads: int | None = None,
    progress: bool = True,
    resume: bool = True,
    local_k: int = LOCAL_K,
    candidate_k: int = CANDIDATE_K,
    keep_work: bool = False,
):
    """Build a SparseGeometricRAG index from a corpus file in shards, with bounded memory (SPEC B.11).

    Parameters
    ----------
    corpus : str
        ``corpus.jsonl`` / ``corpus.jsonl.gz`` (BEIR rows ``{"_id", "title", "text"}``) or a BEIR
        folder holding one.  Passage text = ``title + " " + text``.
    out : str
        Index folder (created).  Work files live in ``out/_build`` and ``out/shards`` until
        the index is complete (removed then unless ``keep_work``); ``meta.json`` is written
        last.
    calibrate : int, optional
        Passages the geometry is calibrated on (1,000,000 for MS MARCO in SPEC B.11); ``None``: the
        whole corpus, which gives the index of ``SparseGeometricRetriever().fit(texts, ids)``
        bit for bit.  A value above the corpus size is clamped to it (a ``UserWarning``).
    calibrate_mode : {"first", "uniform"}
        The first ``calibrate`` passages, or a uniform sample of them drawn with ``seed``
        (sorted; ``numpy.random.default_rng(seed).choice(N, calibrate, replace=False)``).
    seed : int
        Seed of the uniform sample.
    shard_size : int
        Passages per shard (memory: one shard's texts, rows and codes at a time).
    params : dict, optional
        :class:`SparseGeometricRetriever` parameters (saved with the index).
    n_threads : int, optional
        Numba threads of the build kernels.
    progress : bool
        A progress line on stderr per stage (passages/s, ETA).
    resume : bool
        Reuse the completed stages and shards of an interrupted build in ``out``; ``False``
        starts over.
    local_k, candidate_k : int
        Vocabulary heavy hitters per shard and candidate union size (150k, 200k: SPEC B.11).
    keep_work : bool
        Keep ``out/_build`` and ``out/shards`` after the build.

    Returns
    -------
    SparseGeometricRetriever
        The index, opened from ``out`` (memory-mapped).

    Raises
    ------
    ValueError
        ``calibrate`` <= 0, a bad corpus line (naming file and line; the shards written
        before it stay valid for a resume), an empty corpus, duplicate ids, a corpus or
        settings changed since an interrupted build.
    FileNotFoundError
        No corpus.
    """
    _check_build_args(calibrate, calibrate_mode, seed, shard_size)
    resolve_threads(n_threads)
    p = _build_params(params)
    path = corpus_file(corpus)
    out = os.fspath(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"out {out!r} exists and is not a folder")
    work = os.path.join(out, "_build")
    state = {
        "version": _STATE_VERSION,
        "corpus": os.path.abspath(path),
        "shard_size": int(shard_size),
        "params": {k: p[k] for k in BUILD_PARAMS},
        "vocabulary": [int(local_k), int(candidate_k)],
    }
    os.makedirs(out, exist_ok=True)
    if not resume:
        shutil.rmtree(os.path.join(out, "shards"), ignore_errors=True)
    _remove_index_meta(out)  # whatever was there is no complete index until this build ends
    _check_state(work, state, resume)
    t0 = time.perf_counter()
    stages = _Stages(progress)
    bar = ProgressLine("tokens", unit="passages", enabled=progress, eta=True)
    n_shards = _tokenise_corpus(path, work, shard_size, bar, n_threads)
    bar.close()
    stages.done("tokens")
    _ids(work, n_shards)  # a duplicate id fails now, not after the encoding
    voc = _vocabulary(work, n_shards, p["max_features"], local_k, candidate_k)
    N = int(voc["manifest"]["n_docs"])
    stages.done("vocabulary", f"{voc['terms'].shape[0]:,} terms of {voc['manifest']['n_distinct']:,} candidates")
    cal = _clamp_calibrate(calibrate, N)
    rows_of = _Rows(work, voc["terms"], np.asarray(voc["idf"], np.float32), n_threads)
    geometry = _geometry(work, n_shards, N, (cal, calibrate_mode, seed), rows_of, p, n_threads)
    stages.done("calibrate", f"{geometry.n_calibration:,} passages")
    bar = ProgressLine("encode", unit="passages", enabled=progress, eta=True)
    folders = _encode_shards(work, n_shards, geometry, rows_of, p, n_threads, bar)
    bar.close()
    stages.done("encode")
    r = _assemble(out, work, n_shards, geometry, folders, voc, p, n_threads)
    stages.done("assemble")
    info = {"seconds": time.perf_counter() - t0, "n_docs": N, "n_shards": n_shards, "calibrate": cal}
    info.update({k: voc["manifest"][k] for k in ("exact", "n_distinct", "guaranteed")})
    info["stage_seconds"] = stages.seconds
    info["stage_cpu_seconds"] = stages.cpu
    r.build_info_ = info
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(os.path.join(out, "shards"), ignore_errors=True)
    return r


def _clamp_calibrate(calibrate, n_docs: int):
    if calibrate is not None and calibrate > n_docs:
        warnings.warn(
            f"calibrate={calibrate} exceeds the corpus ({n_docs} passages): calibrating on the whole corpus",
            UserWarning,
            stacklevel=3,
        )
        return None
    return calibrate


def _remove_index_meta(out: str) -> None:
    """Remove ``out/meta.json``: the folder is no complete index until the build writes it again."""
    m = os.path.join(out, "meta.json")
    if os.path.exists(m):
        os.remove(m)


def _ids(work: str, n_shards: int) -> list:
    """All passage ids in corpus order (``ValueError`` on a duplicate, naming it)."""
    ids = np.concatenate([np.load(os.path.join(_tok_dir(work, k), "ids.npy")) for k in range(n_shards)])
    srt = np.sort(ids)
    dup = np.flatnonzero(srt[1:] == srt[:-1])
    if dup.size:
        raise ValueError(f"duplicate document id {str(srt[dup[0]])!r} in the corpus")
    del srt
    return ids.tolist()


def _assemble(out, work, n_shards, geometry, folders, voc, p, n_threads):
    """Stage 5: merge the shards into ``out`` and write ``meta.json`` last; return the opened index."""
    ids = _ids(work, n_shards)
    idf = np.asarray(voc["idf"], np.float32).astype(np.float64)
    dl = np.asarray(voc["dl"], np.float64)
    ix = layout.assemble(geometry, folders, idf, dl, p, n_threads, out=out)
    r = SparseGeometricRetriever.from_parts(
        ix, params=p, terms=voc["terms"].tolist(), ids=ids, n_calibration=geometry.n_calibration, scripts=True
    )
    r.save(out)
    del r, ix
    return SparseGeometricRetriever.load(out, mmap=True)


@register_warmup("sgr.build")
def _warmup_build() -> None:
    # the sharded build of `jkofast sgr build` (its streaming kernels: tokens, vocabulary, shards),
    # on two shards of a four-passage corpus: a row the byte path reads and one that goes through json
    import tempfile

    rows = [
        {"_id": "d1", "title": "alpha", "text": "beta gamma"},
        {"_id": "d2", "title": "", "text": "gamma delta"},
        {"_id": "d3", "title": "\u00e9t\u00e9", "text": 'delta "alpha"'},
        {"_id": "d4", "title": "beta", "text": "alpha delta"},
    ]
    with tempfile.TemporaryDirectory(prefix="jkofast-warmup-") as tmp:
        path = os.path.join(tmp, "corpus.jsonl")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in rows))
        build_index(path, os.path.join(tmp, "index"), shard_size=2, progress=False, params={"pool_size": 3})
