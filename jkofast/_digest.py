"""Digests that tie saved vectors to the texts they were made from.

An embeddings folder records, for every row it holds, an 8-byte BLAKE2b digest of the exact
text that was encoded into it (``docs_digests.npy``, ``queries_digests.npy``, uint64), and in
``meta.json`` the SHA-256 of the ids and those digests (``corpus_sha256``, ``queries_sha256``).
A reader recomputes the digests of the corpus it is given and compares: a changed, added or
removed text is found, and named, before any vector is used.

Cost: one BLAKE2b call per text (the bytes dominate: about the speed of reading the corpus).
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["ids_texts_sha256", "text_digests"]


def text_digests(texts) -> np.ndarray:
    """Return the uint64 digest (BLAKE2b, 8 bytes, little-endian) of each text's UTF-8 bytes."""
    b2 = hashlib.blake2b
    raw = b"".join(b2(t.encode("utf-8"), digest_size=8).digest() for t in texts)
    return np.frombuffer(raw, dtype="<u8").copy() if raw else np.zeros(0, dtype="<u8")


def ids_texts_sha256(ids, digests: np.ndarray) -> str:
    """SHA-256 (hex) of the ids in order and their texts' digests: the digest of a whole corpus."""
    h = hashlib.sha256()
    for i in ids:
        b = i.encode("utf-8")
        h.update(len(b).to_bytes(4, "little") + b)
    h.update(np.ascontiguousarray(digests, dtype="<u8").tobytes())
    return h.hexdigest()
