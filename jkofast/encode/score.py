"""Score (query, document) pairs with a cross-encoder into a ``query-id doc-id score`` file, resumable by chunk.

The output is the file ``--scores`` reads (``jkofast run``, ``rerank``, ``tune``, ``study``):
one line per pair, in the order of the pairs given, the score written with 9 significant
digits (a float32 read back exactly).  Work is cut into chunks of ``chunk_size`` pairs, each
saved atomically (:mod:`jkofast._io`) to ``OUT.parts/`` as ``scores-NNNNN-<digest>.npy``
(float32), the digest a SHA-256 of the chunk's query and document texts, exactly as
:mod:`jkofast.encode.embed` saves its parts: a rerun reuses a part only when its texts are the
texts now, and ``manifest.json`` (the model's sha256, the pair length, the scored label, the
chunk size and the digest of the pair ids) discards every part made for anything else.  The
output file appears complete or not at all; the parts are removed once it is written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time

import numpy as np

from jkofast._io import atomic_save_npy, atomic_write_text, load_array
from jkofast._threads import resolve_threads
from jkofast._validation import check_int
from jkofast.encode.cross import CrossEncoderModel, _logits_to_scores, cross_logits
from jkofast.encode.embed import _prepare_parts, _texts_digest

__all__ = ["score_pairs"]


def _pairs_digest(pairs) -> str:
    h = hashlib.sha256()
    for q, d in pairs:
        h.update(q.encode("utf-8") + b"\t" + d.encode("utf-8") + b"\n")
    return h.hexdigest()


def _part_is_usable(path: str, rows: int) -> bool:
    """Whether a saved part reads as a finite float32 (rows,) array (a damaged part is scored again)."""
    try:
        a = load_array(path, kinds="f", ndim=1)
    except ValueError:
        return False
    return a.dtype == np.float32 and a.shape == (rows,) and bool(np.isfinite(a).all())


def score_pairs(
    model: CrossEncoderModel,
    pairs,
    query_text,
    doc_text,
    out: str,
    *,
    label: int | None = None,
    batch_size: int = 64,
    chunk_size: int = 4096,
    n_threads: int | None = None,
    progress=None,
) -> dict:
    """Score ``pairs`` with ``model`` and write ``out`` (``query-id doc-id score`` lines, pair order).

    Parameters
    ----------
    model : CrossEncoderModel
        From :func:`jkofast.encode.cross.load_cross_encoder`.
    pairs : list of (str, str)
        ``(query id, doc id)`` in output order; every id must be a key of its text mapping.
    query_text, doc_text : Mapping[str, str]
        Query id -> query text; doc id -> document text (``title + " " + text`` as ``jkofast
        embed`` builds it).
    out : str
        Output file (written atomically); ``out + ".parts"`` holds the finished chunks meanwhile.
    label : int or None
        For a multi-label head, the label whose log-odds is the score
        (:func:`jkofast.encode.cross.cross_scores`).
    batch_size, chunk_size : int
        Pairs per forward pass; pairs per saved part (the unit of resuming).
    n_threads : int or None
    progress : callable or None
        Called with the number of pairs done (reused parts count at once).

    Returns
    -------
    dict
        ``n_pairs``, ``reused`` (pairs read back from earlier parts), ``seconds`` (scoring).

    Raises
    ------
    ValueError
        No pairs, an id without text, bad ``label`` / ``batch_size`` / ``chunk_size``.
    """
    batch_size = check_int(batch_size, "batch_size", min_value=1)
    chunk_size = check_int(chunk_size, "chunk_size", min_value=1)
    nt = resolve_threads(n_threads)
    label = model.resolve_label(label)
    pairs = [(str(q), str(d)) for q, d in pairs]
    if not pairs:
        raise ValueError("no (query, document) pairs to score")
    for q, d in pairs:
        if q not in query_text or d not in doc_text:
            raise ValueError(f"pair ({q!r}, {d!r}) has no {'query' if q not in query_text else 'document'} text")
    parts = out + ".parts"
    manifest = {
        "model_sha256": model.sha256,
        "max_length": model.max_length,
        "label": label,
        "dtype": "float32",
        "chunk_size": chunk_size,
        "pairs": _pairs_digest(pairs),
    }
    _prepare_parts(parts, manifest)
    present = set(os.listdir(parts))
    scores = np.empty(len(pairs), np.float32)
    reused = 0
    t0 = time.perf_counter()
    for c in range(0, len(pairs), chunk_size):
        chunk = pairs[c : c + chunk_size]
        qs = [query_text[q] for q, _ in chunk]
        ds = [doc_text[d] for _, d in chunk]
        stem = f"scores-{c // chunk_size:05d}-"
        name = stem + _texts_digest([t for pair in zip(qs, ds, strict=True) for t in pair]) + ".npy"
        path = os.path.join(parts, name)
        for old in sorted(f for f in present if f.startswith(stem) and f != name):
            os.unlink(os.path.join(parts, old))  # made from texts that have changed since
        if name in present and _part_is_usable(path, len(chunk)):
            scores[c : c + len(chunk)] = load_array(path, kinds="f", ndim=1)
            reused += len(chunk)
            if progress is not None:
                progress(len(chunk))
            continue
        s = _logits_to_scores(cross_logits(model, qs, ds, batch_size, nt, progress), label)
        atomic_save_npy(path, s)
        scores[c : c + len(chunk)] = s
    seconds = time.perf_counter() - t0
    atomic_write_text(out, "".join(f"{q} {d} {float(v):.9g}\n" for (q, d), v in zip(pairs, scores, strict=True)))
    shutil.rmtree(parts, ignore_errors=True)
    return {"n_pairs": len(pairs), "reused": reused, "seconds": seconds}
