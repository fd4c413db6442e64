"""Digests that tie saved vectors to the texts they were made from.

An embeddings folder records, for every row it holds, an 8-byte BLAKE2b digest of the exact
text that was encoded into it (``docs_digests.npy``, ``queries_digests.npy``, uint64), and in
``meta.json`` the SHA-256 of the ids and texts (``corpus_sha256``, ``queries_sha256``).  A reader
recomputes the corpus's SHA-256 (:func:`corpus_sha256`: about the speed of hashing its bytes) and,
only when it differs, the per-text digests that name the first changed, added or removed text.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["corpus_sha256", "text_digests"]


def text_digests(texts) -> np.ndarray:
    """Return the uint64 digest (BLAKE2b, 8 bytes, little-endian) of each text's UTF-8 bytes."""
    b2 = hashlib.blake2b
    raw = b"".join(b2(t.encode("utf-8"), digest_size=8).digest() for t in texts)
    return np.frombuffer(raw, dtype="<u8").copy() if raw else np.zeros(0, dtype="<u8")


def corpus_sha256(ids, texts) -> str:
    """SHA-256 (hex) of ids and texts in order: the digest of a whole corpus (or query set).

    The strings are hashed joined, after their lengths (in characters), which delimit them exactly: a
    few calls into C over the whole corpus instead of one per text (the per-text digests of
    :func:`text_digests` are computed only to name what changed, or to update an embeddings folder).
    """
    h = hashlib.sha256()
    for strings in (ids, texts):
        h.update(np.fromiter(map(len, strings), dtype="<i8", count=len(strings)).tobytes())
        h.update("".join(strings).encode("utf-8"))
    return h.hexdigest()
