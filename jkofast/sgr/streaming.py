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
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import sys
import threading
import time
import warnings

import numpy as np

from jkofast._io import atomic_save_npy, atomic_write_json, file_sha256
from jkofast._threads import numba_threads, resolve_threads
from jkofast._validation import check_int
from jkofast.kernels.sgr import stream as _st
from jkofast.sgr import layout
from jkofast.sgr.config import BUILD_PARAMS, as_config
from jkofast.sgr.retriever import TOKEN_PATTERN, SparseGeometricRetriever
from jkofast.text.scripts import script_tokenizer

__all__ = [
    "build_index",
    "byte_shard_term_counts",
    "corpus_file",
    "read_corpus_shards",
    "shard_term_counts",
    "stream_vocabulary",
]

_STATE_VERSION = 1
_LOCAL_K = 150_000  # B.11: local heavy hitters per shard
_CANDIDATE_K = 200_000  # B.11: candidate union


# ---------------------------------------------------------------------------------------------- corpus
def corpus_file(corpus: str) -> str:
    """Return the corpus file of ``corpus``: a ``.jsonl`` / ``.jsonl.gz`` file, or a BEIR folder's.

    Raises
    ------
    FileNotFoundError
        Neither a file nor a folder holding ``corpus.jsonl(.gz)``.
    """
    corpus = os.fspath(corpus)
    if os.path.isdir(corpus):
        for cand in ("corpus.jsonl", "corpus.jsonl.gz"):
            p = os.path.join(corpus, cand)
            if os.path.isfile(p):
                return p
        raise FileNotFoundError(f"{corpus}: no corpus.jsonl(.gz) in this folder")
    if not os.path.isfile(corpus):
        raise FileNotFoundError(f"corpus {corpus!r} not found")
    return corpus


def _fingerprint(path: str) -> dict:
    """Path, size and SHA-256 of every byte of ``path``: a corpus changed anywhere is refused on resume."""
    return {"path": os.path.abspath(path), "size": os.path.getsize(path), "sha256": file_sha256(path)}


class _Reader:
    """Byte-position aware line reader of a ``.jsonl`` / ``.jsonl.gz`` file (``pos`` = compressed bytes read)."""

    def __init__(self, path: str):
        import gzip

        self.path = path
        self.raw = open(path, "rb")  # closed in close()
        self.fh = gzip.GzipFile(fileobj=self.raw, mode="rb") if path.endswith(".gz") else self.raw
        self.size = os.fstat(self.raw.fileno()).st_size

    @property
    def pos(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        if self.fh is not self.raw:
            self.fh.close()
        self.raw.close()

    def lines(self):
        """Yield ``(line number, raw bytes)``; corrupt gzip data is a ``ValueError`` naming the line."""
        import gzip
        import zlib

        lineno = 0
        it = iter(self.fh)
        while True:
            try:
                raw = next(it)
            except StopIteration:
                return
            except (gzip.BadGzipFile, EOFError, zlib.error) as e:
                raise ValueError(f"{self.path}: corrupted gzip data at or after line {lineno + 1} ({e})") from None
            lineno += 1
            yield lineno, raw


def _parse(raw: bytes, path: str, lineno: int) -> tuple[str, str] | None:
    """``(id, title + " " + text)`` of one corpus line, ``None`` for a blank line; ``ValueError`` naming file:line."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}:{lineno}: invalid UTF-8 ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{lineno}: invalid JSON ({e.msg}; a truncated line?)") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
    did = obj.get("_id")
    if isinstance(did, bool) or not isinstance(did, str | int):
        raise ValueError(f"{path}:{lineno}: '_id' must be a string, got {did!r}")
    did = str(did)
    if not did or any(c.isspace() for c in did):
        raise ValueError(f"{path}:{lineno}: '_id' {did!r} must be non-empty without whitespace")
    title, text = obj.get("title") or "", obj.get("text") or ""
    if not isinstance(title, str) or not isinstance(text, str):
        raise ValueError(f"{path}:{lineno}: fields 'title' and 'text' must be strings")
    return did, title + " " + text


def read_corpus_shards(path: str, shard_size: int, done=(), on_progress=None):
    """Yield ``(shard number, ids, texts, digest)`` of consecutive ``shard_size`` passages of a corpus file.

    Parameters
    ----------
    path : str
        ``corpus.jsonl`` or ``corpus.jsonl.gz`` (BEIR rows ``{"_id", "title", "text"}``; blank lines
        skipped).  The text of a passage is ``title + " " + text``.
    shard_size : int
        Passages per shard (the last one may be shorter).
    done : sequence of (n_docs, digest)
        Shards already read (a resume): their lines are read but not parsed, and their SHA-1
        must equal ``digest`` (else ``ValueError``: the corpus changed).
    on_progress : callable, optional
        Called as ``on_progress(passages, compressed bytes read, file size)`` once per shard.

    Yields
    ------
    tuple
        Shard number, ids, texts, and the SHA-1 (hex) of the raw lines from the end of the
        previous shard to the shard's last passage line.

    Raises
    ------
    ValueError
        A line that is not a JSON object with a valid ``_id`` (truncated, not JSON, bad UTF-8),
        naming the file and the line (the shards yielded before stay valid); or a corpus whose
        first ``len(done)`` shards differ from ``done``.
    """
    rd = _Reader(path)
    try:
        yield from _shards(rd, path, shard_size, list(done), on_progress)
    finally:
        rd.close()


def _shards(rd, path, shard_size, done, on_progress):
    shard, ids, texts, n_seen = 0, [], [], 0
    h = hashlib.sha1()
    for lineno, raw in rd.lines():
        h.update(raw)
        if shard < len(done):
            if raw.strip():
                n_seen += 1
                if n_seen == done[shard][0]:
                    if h.hexdigest() != done[shard][1]:
                        raise ValueError(
                            f"{path}: the corpus changed since the interrupted build (shard {shard}, up to "
                            f"line {lineno}, differs); rerun with resume=False (--no-resume) to start over"
                        )
                    shard, n_seen, h = shard + 1, 0, hashlib.sha1()
                    if on_progress is not None:
                        on_progress(done[shard - 1][0], rd.pos, rd.size)
            continue
        rec = _parse(raw, path, lineno)
        if rec is None:
            continue
        ids.append(rec[0])
        texts.append(rec[1])
        if len(ids) == shard_size:
            yield shard, ids, texts, h.hexdigest()
            if on_progress is not None:
                on_progress(len(ids), rd.pos, rd.size)
            shard, ids, texts, h = shard + 1, [], [], hashlib.sha1()
    if shard < len(done):
        raise ValueError(f"{path}: the corpus is shorter than when the interrupted build read it (shard {shard})")
    if ids:
        yield shard, ids, texts, h.hexdigest()
        if on_progress is not None:
            on_progress(len(ids), rd.pos, rd.size)


# ---------------------------------------------------------------------------------------------- tokens
def shard_term_counts(texts) -> dict:
    """Analyse ``texts`` with the SGR analyser; return the shard's local term counts.

    Tokens equal ``script_tokenizer(TOKEN_PATTERN)``'s: ASCII passages go through the byte-level
    kernel (``jkofast.kernels.sgr.stream``; ``str.lower`` then maximal runs of ``[0-9a-z_]`` of
    length >= 2, what the regex finds on ASCII text), the others through the analyser itself.

    Returns a dict of ``terms`` (local vocabulary, str array), ``indptr`` int64 / ``indices``
    int32 (local ids, sorted per row) / ``counts`` int32 (CSR of raw term counts per passage),
    ``dl`` int64 (analyser tokens per passage), ``tf`` and ``df`` int64 (the shard's total
    count and document frequency per local term).
    """
    import scipy.sparse as sp

    n = len(texts)
    asc = np.fromiter((t.isascii() for t in texts), bool, n)
    joined = "\n".join(t if a else "" for t, a in zip(texts, asc.tolist())).lower()
    buf = np.frombuffer(joined.encode("ascii"), np.uint8)
    lens = np.fromiter((len(t) if a else 0 for t, a in zip(texts, asc.tolist())), np.int64, n)
    doc_off = np.zeros(n + 1, np.int64)
    np.cumsum(lens + 1, out=doc_off[1:])
    doc_off[1:] -= 1  # passage i is buf[doc_off[i]:doc_off[i + 1]] (+ its separator)
    dl = np.zeros(n, np.int64)
    n_tok = int(_st.count_tokens(buf, doc_off, dl))
    ids = np.zeros(n_tok, np.int32)
    t_start = np.zeros(max(n_tok, 1), np.int64)
    t_len = np.zeros(max(n_tok, 1), np.int64)
    t_hash = np.zeros(max(n_tok, 1), np.uint64)
    nv = int(_st.token_ids(buf, doc_off, n_tok, ids, t_start, t_len, t_hash))
    raw = joined.encode("ascii")
    terms = [raw[a : a + m].decode("ascii") for a, m in zip(t_start[:nv].tolist(), t_len[:nv].tolist())]
    rows = np.repeat(np.arange(n, dtype=np.int64), dl)
    cols = ids
    if not asc.all():
        rows, cols, terms = _non_ascii_tokens(texts, np.flatnonzero(~asc), terms, rows, cols, dl)
    nv = len(terms)
    tf = np.bincount(cols, minlength=nv).astype(np.int64)
    m = sp.csr_matrix((np.ones(cols.shape[0], np.int32), (rows, cols)), shape=(n, nv))  # sums duplicates
    m.sort_indices()
    return {
        "terms": np.array(terms, dtype=str) if nv else np.zeros(0, "<U1"),
        "indptr": m.indptr.astype(np.int64),
        "indices": m.indices.astype(np.int32),
        "counts": m.data.astype(np.int32),
        "dl": dl,
        "tf": tf,
        "df": np.bincount(m.indices, minlength=nv).astype(np.int64),
    }


def _first_seen_ids(tokens, vocab: dict, words: list) -> list:
    """Term ids of ``tokens``; a token not in ``vocab`` gets the next id and is appended to ``words``."""
    ids = []
    for w in tokens:
        t = vocab.get(w)
        if t is None:
            t = vocab[w] = len(words)
            words.append(w)
        ids.append(t)
    return ids


def _non_ascii_tokens(texts, docs, terms, rows, cols, dl):
    """Add the tokens of the non-ASCII passages ``docs`` (exact analyser) to the kernel's ``rows`` / ``cols``."""
    analyse = script_tokenizer(TOKEN_PATTERN)
    vocab = {w: i for i, w in enumerate(terms)}
    terms = list(terms)
    extra_r: list = []
    extra_c: list = []
    for d in docs.tolist():
        toks = analyse(texts[d])
        dl[d] = len(toks)
        extra_c.extend(_first_seen_ids(toks, vocab, terms))
        extra_r.extend([d] * len(toks))
    rows = np.concatenate([rows, np.asarray(extra_r, np.int64)])
    cols = np.concatenate([cols, np.asarray(extra_c, np.int32)])
    return rows, cols, terms


def _read_chunks(rd: _Reader, free: queue.Queue, out: queue.Queue, stop: threading.Event) -> None:
    """(reader thread) Fill the buffers taken from ``free`` and put ``(buffer, bytes, position)`` on ``out``.

    The buffers come back through ``free`` once copied, so the reads touch no new memory; the
    end of the file is ``bytes == 0``; a read error is put on ``out`` as the exception itself
    (the consumer raises it).
    """
    import gzip
    import zlib

    try:
        while not stop.is_set():
            try:
                b = free.get(timeout=0.1)
            except queue.Empty:
                continue
            n = rd.fh.readinto(memoryview(b))
            out.put((b, n, rd.pos))
            if not n:
                return
    except (gzip.BadGzipFile, EOFError, zlib.error, OSError) as e:
        out.put(e)


class _ByteShards:
    """Consecutive shards of a corpus file as bytes: one buffer per shard, cut after its last passage line.

    A reader thread reads (and decompresses) the file ahead in ``chunk``-byte pieces while the
    caller tokenises the previous shard; :func:`jkofast.kernels.sgr.stream.line_bounds` splits the
    bytes into lines.  The lines and shard cuts are those of :func:`read_corpus_shards`.
    """

    def __init__(self, path: str, chunk: int = 16 << 20):
        import gzip
        import zlib

        self._gzip_errors = (gzip.BadGzipFile, EOFError, zlib.error)
        self.path, self.rd = path, _Reader(path)
        self.q: queue.Queue = queue.Queue()
        self.free: queue.Queue = queue.Queue()
        for _ in range(4):  # read ahead by up to 4 chunks
            self.free.put(np.empty(chunk, np.uint8))
        self.stop = threading.Event()
        self.th = threading.Thread(target=_read_chunks, args=(self.rd, self.free, self.q, self.stop), daemon=True)
        self.th.start()
        self.buf = np.empty(4 * chunk, np.uint8)
        self.fill = 0  # valid bytes in buf
        self.scanned = 0  # bytes of buf split into complete lines
        self.starts = np.zeros(0, np.int64)
        self.ends = np.zeros(0, np.int64)
        self.nonblank = np.zeros(0, bool)
        self.n_lines = 0  # lines of the file before buf[0]
        self.eof = False
        self.pos = 0

    def close(self) -> None:
        self.stop.set()
        self.th.join()
        self.rd.close()

    def _read(self) -> None:
        item = self.q.get()
        if isinstance(item, BaseException):
            if isinstance(item, self._gzip_errors):
                at = self.n_lines + self.starts.shape[0] + 1
                raise ValueError(f"{self.path}: corrupted gzip data at or after line {at} ({item})") from None
            raise item
        chunk, n, self.pos = item
        if not n:
            self.eof = True
        elif self.fill + n > self.buf.shape[0]:
            grown = np.empty(max(2 * self.buf.shape[0], self.fill + n), np.uint8)
            grown[: self.fill] = self.buf[: self.fill]
            self.buf = grown
        self.buf[self.fill : self.fill + n] = chunk[:n]
        self.fill += n
        self.free.put(chunk)
        s, e, nb = _st.line_bounds(self.buf, self.scanned, self.fill, self.eof)
        if s.shape[0]:
            self.starts = np.concatenate([self.starts, s])
            self.ends = np.concatenate([self.ends, e])
            self.nonblank = np.concatenate([self.nonblank, nb])
            self.scanned = min(int(e[-1]) + 1, self.fill)

    def take(self, n: int):
        """Return the next ``n`` passages (fewer at the end of the file, ``None`` after it).

        Returns ``(buf, starts, ends, line numbers)``: the shard's bytes ``buf`` (from the end of
        the previous shard to the end of its last passage line, or to the end of the file for a
        last shard of fewer than ``n``), its passages the lines ``buf[starts[i]:ends[i]]``
        (without their newline).  The buffer is valid until the next call.
        """
        self._drop()
        while True:
            nb = np.flatnonzero(self.nonblank)
            if nb.shape[0] >= n or self.eof:
                break
            self._read()
        if nb.shape[0] == 0:
            return None
        last = int(nb[min(n, nb.shape[0]) - 1])
        cut = min(int(self.ends[last]) + 1, self.fill) if nb.shape[0] >= n else self.fill
        sel = nb[: min(n, nb.shape[0])]
        self._cut = (cut, last + 1)
        return self.buf[:cut], self.starts[sel], self.ends[sel], self.n_lines + 1 + sel

    def _drop(self) -> None:
        """Remove the bytes and lines of the shard returned last."""
        cut, lines = getattr(self, "_cut", (0, 0))
        if cut:
            rest = self.fill - cut
            self.buf[:rest] = self.buf[cut : self.fill]
            self.fill, self.scanned = rest, self.scanned - cut
            self.starts = self.starts[lines:] - cut
            self.ends = self.ends[lines:] - cut
            self.nonblank = self.nonblank[lines:]
            self.n_lines += lines
        self._cut = (0, 0)


def _n_blocks(n: int, n_threads: int) -> int:
    """Blocks of passages a shard is tokenised in: one per thread (the serial merge grows with the blocks)."""
    return max(1, min(n, n_threads))


def byte_shard_term_counts(buf, starts, ends, linenos, path: str, n_threads: int | None = None, n_blocks=None):
    """Parse and analyse the BEIR rows ``buf[starts[i]:ends[i]]``: the shard's ids and local term counts.

    The byte-level twin of :func:`read_corpus_shards` + :func:`shard_term_counts`, with the same
    output bit for bit.  Rows that need no JSON decoding are read and tokenised from the bytes
    (in parallel blocks of passages, merged in block order: the shard's first-seen term order);
    the other rows go through ``json``, and their text through the byte kernels if ASCII, else
    through the analyser after the others (as :func:`shard_term_counts` orders them).

    Parameters
    ----------
    buf : uint8 ndarray
        The shard's bytes (writable; any case).
    starts, ends : int64 ndarray (n,)
        Byte range of each passage row in ``buf`` (without its newline).
    linenos : int ndarray (n,)
        File line number of each row (error messages).
    path : str
        The corpus file (error messages).
    n_threads : int, optional
        Numba threads.
    n_blocks : int, optional
        Blocks of passages (default: one per thread); the output does not depend on it.

    Returns
    -------
    dict
        The arrays of :func:`shard_term_counts` plus ``ids`` (str array, ``np.array(ids, dtype=str)``).

    Raises
    ------
    ValueError
        A row that is not a JSON object with a valid ``_id`` and string fields, naming
        ``path`` and its line.
    """
    n = starts.shape[0]
    with numba_threads(n_threads) as nt:
        rows = np.empty((n, 6), np.int64)
        ok = np.empty(n, bool)
        _st.parse_lines(buf, starts, ends, rows, ok)
        segs = np.ascontiguousarray(rows[:, 2:])
        slow_ids: dict = {}
        aux: list = []
        non_ascii: list = []
        base = buf.shape[0]
        for i in np.flatnonzero(~ok).tolist():
            end = int(ends[i]) + 1 if ends[i] < buf.shape[0] else int(ends[i])  # with its newline, as a file line
            did, text = _parse(bytes(buf[starts[i] : end]), path, int(linenos[i]))
            slow_ids[i] = did
            if text.isascii():
                b = text.encode("ascii")
                segs[i] = (base, base + len(b), 0, 0)
                base += len(b)
                aux.append(b)
            else:
                segs[i] = 0
                non_ascii.append((i, text))
        ids = _shard_ids(buf, rows, slow_ids)
        if aux:
            buf = np.concatenate([buf, np.frombuffer(b"".join(aux), np.uint8)])
        out = _segment_term_counts(buf, segs, non_ascii, _n_blocks(n, nt) if n_blocks is None else n_blocks)
    out["ids"] = ids
    return out


def _shard_ids(buf, rows, slow_ids: dict) -> np.ndarray:
    """Return the passage ids as ``np.array(ids, dtype=str)``: byte ranges ``rows[:, :2]``, else ``slow_ids``."""
    n = rows.shape[0]
    length = rows[:, 1] - rows[:, 0]
    width = max(int(length.max()) if n else 1, 1)
    mat = _st.gather_bytes(buf, rows[:, 0], length, width, False)
    ids = mat.view(f"S{width}").ravel().astype(f"<U{width}")
    if not slow_ids:
        return ids
    lst = ids.tolist()
    for i, did in slow_ids.items():
        lst[i] = did
    return np.array(lst, dtype=str)


def _segment_term_counts(buf, segs, non_ascii: list, n_blocks: int) -> dict:
    """Term counts of passages given as byte segments (+ ``non_ascii`` (row, text) for the analyser)."""
    n = segs.shape[0]
    dl = np.zeros(n, np.int64)
    total = int(_st.count_segment_tokens(buf, segs, dl))
    tok_off = np.zeros(n + 1, np.int64)
    np.cumsum(dl, out=tok_off[1:])
    blk = (np.arange(n_blocks + 1, dtype=np.int64) * n) // max(n_blocks, 1)
    ids = np.empty(total, np.int32)
    cap = max(total, 1)
    t_start, t_len, t_hash = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.uint64)
    blk_nv = np.zeros(n_blocks, np.int64)
    _st.block_term_ids(buf, segs, tok_off, blk, ids, t_start, t_len, t_hash, blk_nv)
    if n_blocks == 1:
        nv = int(blk_nv[0])
    else:
        gcap = max(int(blk_nv.sum()), 1)
        g_start, g_len, g_hash = np.empty(gcap, np.int64), np.empty(gcap, np.int64), np.empty(gcap, np.uint64)
        gmap = np.empty(cap, np.int32)
        nv = int(_st.merge_block_terms(buf, blk, tok_off, blk_nv, t_start, t_len, t_hash, gmap, g_start, g_len, g_hash))
        _st.remap_block_ids(ids, blk, tok_off, gmap)
        t_start, t_len = g_start, g_len
    del t_hash
    if nv:
        width = int(t_len[:nv].max())
        mat = _st.gather_bytes(buf, t_start[:nv], t_len[:nv], width, True)
        terms = mat.view(f"S{width}").ravel().astype(f"<U{width}")
    else:
        terms = np.zeros(0, "<U1")
    if non_ascii:
        ids, tok_off, terms = _splice_non_ascii(ids, tok_off, dl, terms, non_ascii)
    nv = terms.shape[0]
    nnz = np.empty(n, np.int64)
    _st.sort_rows_count_unique(ids, tok_off, nnz)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(nnz, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), np.int32)
    counts = np.empty(int(indptr[-1]), np.int32)
    _st.fill_term_counts(ids, tok_off, indptr, indices, counts)
    return {
        "terms": terms,
        "indptr": indptr,
        "indices": indices,
        "counts": counts,
        "dl": dl,
        "tf": np.bincount(ids, minlength=nv).astype(np.int64),
        "df": np.bincount(indices, minlength=nv).astype(np.int64),
    }


def _splice_non_ascii(ids, tok_off, dl, terms, non_ascii: list):
    """Add the analyser's tokens of the ``non_ascii`` passages (new terms after the kernel's, in row order)."""
    analyse = script_tokenizer(TOKEN_PATTERN)
    words = terms.tolist()
    vocab = {w: i for i, w in enumerate(words)}
    x_doc, x_ids = [], []
    x_off = [0]
    for i, text in non_ascii:
        toks = analyse(text)
        x_ids.extend(_first_seen_ids(toks, vocab, words))
        dl[i] = len(toks)
        x_doc.append(i)
        x_off.append(len(x_ids))
    out_off = np.zeros(dl.shape[0] + 1, np.int64)
    np.cumsum(dl, out=out_off[1:])
    out = np.empty(int(out_off[-1]), np.int32)
    _st.splice_rows(
        ids,
        tok_off,
        np.asarray(x_doc, np.int64),
        np.asarray(x_off, np.int64),
        np.asarray(x_ids, np.int32),
        out,
        out_off,
    )
    return out, out_off, (np.array(words, dtype=str) if words else np.zeros(0, "<U1"))


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


# ---------------------------------------------------------------------------------------------- vocabulary
def stream_vocabulary(shards, max_features: int, local_k: int = _LOCAL_K, candidate_k: int = _CANDIDATE_K) -> dict:
    """Select the vocabulary over shard term counts (B.11), with ``CountVectorizer``'s rule.

    Parameters
    ----------
    shards : sequence of callables or dicts
        Per shard, its ``terms`` (str array) and ``tf`` / ``df`` (int64 per local term);
        a callable is called to get the dict (a shard read from disk when needed).
    max_features : int
        V, the vocabulary cap.
    local_k, candidate_k : int
        Heavy hitters kept per shard and in the candidate union (150k, 200k as published).

    Returns
    -------
    dict
        ``terms`` (selected, alphabetical), ``tf`` / ``df`` int64 over the corpus per term,
        ``exact`` (True: the selection ran on the whole vocabulary), ``n_distinct`` (distinct
        terms seen, a lower bound when not exact), ``guaranteed`` (the kept set is provably
        the true top-V).
    """
    get = [s if callable(s) else (lambda s=s: s) for s in shards]
    union: dict = {}
    complete = True
    bound_out = 0  # upper bound on the corpus tf of a term outside every shard's heavy hitters
    for g in get:
        s = g()
        tf, terms = np.asarray(s["tf"]), s["terms"]
        if tf.shape[0] > local_k:
            complete = False
            part = np.argpartition(-tf, local_k - 1)[:local_k]
            bound_out += int(tf[part].min())
            sel_t, sel_f = terms[part], tf[part]
        else:
            sel_t, sel_f = terms, tf
        for t, f in zip(sel_t.tolist(), sel_f.tolist()):
            union[t] = union.get(t, 0) + f
    exact = complete and len(union) <= candidate_k
    if len(union) > candidate_k:
        items = sorted(union.items(), key=lambda kv: (-kv[1], kv[0]))
        bound_out += items[candidate_k][1]  # + what a dropped candidate may have lost in the shards
        cand = sorted(t for t, _ in items[:candidate_k])
    else:
        cand = sorted(union)
    cand_arr = np.array(cand, dtype=str) if cand else np.zeros(0, "<U1")  # sorted: searched per shard
    tf = np.zeros(len(cand), np.int64)
    df = np.zeros(len(cand), np.int64)
    for g in get:
        s = g()
        loc = _global_ids(np.asarray(s["terms"]), cand_arr)
        k = loc >= 0
        np.add.at(tf, loc[k], np.asarray(s["tf"])[k])
        np.add.at(df, loc[k], np.asarray(s["df"])[k])
    keep = _select_top(tf, max_features, exact)
    cut = int(tf[keep].min()) if keep.size == max_features else 0
    guaranteed = exact or cut > bound_out
    if not guaranteed:
        warnings.warn(
            f"stream_vocabulary: the top-{max_features} cut (corpus tf {cut}) is not above the bound ({bound_out}) "
            "on terms outside the heavy-hitter candidates; raise local_k / candidate_k for a proven exact vocabulary",
            RuntimeWarning,
            stacklevel=2,
        )
    return {
        "terms": cand_arr[keep],
        "tf": tf[keep],
        "df": df[keep],
        "exact": bool(exact),
        "n_distinct": len(union),
        "guaranteed": bool(guaranteed),
    }


def _select_top(tf: np.ndarray, limit: int, exact: bool) -> np.ndarray:
    """Return the indices (ascending) of the kept terms: ``CountVectorizer._limit_features`` on alphabetical terms.

    ``exact``: the same float32 array and ``argsort`` as scikit-learn (whose term sums are float32;
    equal to the exact counts below 2**24), hence the same ties; otherwise the exact int64 counts.
    """
    if tf.shape[0] <= limit:
        return np.arange(tf.shape[0])
    key = tf.astype(np.float32) if exact else tf
    return np.sort((-key).argsort()[:limit])


# ---------------------------------------------------------------------------------------------- TF-IDF rows
def smooth_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """``TfidfTransformer(smooth_idf=True)``'s idf in float32 (its dtype for float32 counts): ln((1+N)/(1+df)) + 1."""
    d = df.astype(np.float32) + np.float32(1.0)
    idf = np.full_like(d, fill_value=n_docs + 1, dtype=np.float32)
    idf /= d
    np.log(idf, out=idf)
    idf += np.float32(1.0)
    return idf


def shard_rows(tok: dict, term_index, idf32: np.ndarray, n_threads: int | None = None):
    """Return ``(X, counts)`` of one token shard in the global vocabulary.

    ``X`` float32 CSR of L2-normalised TF-IDF rows (sorted indices) and ``counts`` float32
    CSR of the raw term counts (in-vocabulary terms only), as ``fit`` computes them (scikit-learn's
    ``TfidfTransformer`` + ``normalize`` arithmetic, bit for bit; one kernel,
    :func:`jkofast.kernels.sgr.stream.tfidf_rows`, parallel over passages).

    ``term_index`` maps a term to its global id: a dict, or the vocabulary's terms as a sorted
    str array (the id is the position).
    """
    import scipy.sparse as sp

    terms = np.asarray(tok["terms"])
    indptr = np.asarray(tok["indptr"], np.int64)
    n = indptr.shape[0] - 1
    V = idf32.shape[0]
    gid = _global_ids(terms, term_index)
    with numba_threads(n_threads):
        nnz = np.empty(n, np.int64)
        indices = np.asarray(tok["indices"], np.int32)
        _st.vocab_row_counts(indptr, indices, gid, nnz)
        total = int(nnz.sum())
        idt = np.int32 if max(total, V) < np.iinfo(np.int32).max else np.int64  # scipy's index dtype
        out_indptr = np.zeros(n + 1, idt)
        np.cumsum(nnz, out=out_indptr[1:])
        out_idx = np.empty(total, idt)
        c_data = np.empty(total, np.float32)
        x_data = np.empty(total, np.float32)
        counts = np.asarray(tok["counts"], np.int32)
        _st.tfidf_rows(indptr, indices, counts, gid, np.asarray(idf32, np.float32), out_indptr, out_idx, c_data, x_data)
    C = sp.csr_matrix((c_data, out_idx, out_indptr), shape=(n, V))
    X = sp.csr_matrix((x_data, out_idx.copy(), out_indptr.copy()), shape=(n, V))
    C.has_sorted_indices = X.has_sorted_indices = True
    return X, C


def _global_ids(terms: np.ndarray, term_index) -> np.ndarray:
    """int64 global id of each local term (-1 outside the vocabulary): dict look-ups or a sorted-array search."""
    if isinstance(term_index, dict):
        return np.fromiter((term_index.get(t, -1) for t in terms.tolist()), np.int64, len(terms))
    vocab = np.asarray(term_index)
    if vocab.shape[0] == 0 or terms.shape[0] == 0:
        return np.full(terms.shape[0], -1, np.int64)
    common = np.result_type(vocab.dtype, terms.dtype)  # the wider str type: no truncation in the search
    vocab, terms = vocab.astype(common, copy=False), terms.astype(common, copy=False)
    pos = np.minimum(np.searchsorted(vocab, terms), vocab.shape[0] - 1)
    return np.where(vocab[pos] == terms, pos, -1).astype(np.int64)


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


class _Bar:
    """``label: done passages (rate/s, pct %, ETA m:ss)`` on stderr, from compressed bytes read."""

    def __init__(self, label: str, enabled: bool, total: int | None = None):
        self.label, self.enabled, self.total = label, enabled, total
        self.done, self.t0, self.frac = 0, time.perf_counter(), 0.0

    def update(self, n: int, frac: float | None = None) -> None:
        self.done += n
        if frac is None and self.total:
            frac = self.done / self.total
        self.frac = frac if frac is not None else self.frac
        if not self.enabled:
            return
        el = time.perf_counter() - self.t0
        rate = self.done / max(el, 1e-9)
        eta = el * (1 - self.frac) / self.frac if self.frac > 0 else float("nan")
        eta_s = f"{int(eta // 60)}:{int(eta % 60):02d}" if np.isfinite(eta) else "?"
        print(
            f"\r{self.label}: {self.done:,} passages ({rate:,.0f}/s, {100 * self.frac:.0f} %, ETA {eta_s})   ",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self.enabled:
            print(file=sys.stderr, flush=True)


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


def _tokenise_corpus(path: str, work: str, shard_size: int, bar: _Bar, n_threads=None) -> int:
    """Stage 1: write every token shard not yet complete; return the number of shards.

    The corpus is read as bytes ahead of the tokenisation (:class:`_ByteShards`); each shard is
    parsed and tokenised by :func:`byte_shard_term_counts` while its SHA-1 is computed on
    another thread.  A resume re-reads the completed shards' bytes and checks their SHA-1;
    once the whole corpus is read, its size and modification time are recorded and checked by
    later resumes.
    """
    from concurrent.futures import ThreadPoolExecutor

    tdir = os.path.join(work, "tokens")
    end = _read_done(tdir, "_end.json")
    if end is not None:
        if end.get("corpus") != _fingerprint(path):
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
    src = _ByteShards(path)
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
    end = {"n_shards": n_shards, "n_docs": n_docs, "corpus": _fingerprint(path)}
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
    local_k: int = _LOCAL_K,
    candidate_k: int = _CANDIDATE_K,
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
        Passages the geometry is calibrated on (B.11: 1,000,000 for MS MARCO); ``None``: the
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
        Vocabulary heavy hitters per shard and candidate union size (B.11: 150k, 200k).
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
    bar = _Bar("tokens", progress)
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
    bar = _Bar("encode", progress)
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
