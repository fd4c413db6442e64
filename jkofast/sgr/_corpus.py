"""Corpus reading and per-shard term counts of the streaming SGR build (steps 1 of :mod:`jkofast.sgr.streaming`).

The corpus file is read in shards of passages (:func:`read_corpus_shards`: ids, texts and a digest
per shard), or as bytes by a reader thread ahead of the tokeniser (:class:`ByteShards`,
:func:`byte_shard_term_counts`: ASCII rows parsed and tokenised by byte kernels, the others through
``json`` and the analyser; the same arrays as :func:`shard_term_counts`, bit for bit).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading

import numpy as np

from jkofast._io import file_sha256
from jkofast._threads import numba_threads
from jkofast.kernels.sgr import stream as _st
from jkofast.sgr.retriever import TOKEN_PATTERN
from jkofast.text.scripts import script_tokenizer


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


def fingerprint(path: str) -> dict:
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


class ByteShards:
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
