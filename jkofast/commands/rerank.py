"""``jkofast rerank``: resumable, streaming batch reranking of a TREC run with JKO-RAG.

Input (``--pools``): a TREC run (``qid Q0 docid rank score tag``) or a 3-column file
(``qid docid score``); each query's lines must be contiguous (their order is the pool
order).  The file is read in byte blocks (a vectorised fast path per block, the line-by-line
path for blocks with a malformed or unusual line) and cut into chunks of ``--chunk-size``
queries.  Three stages overlap: the main thread parses chunk i+1 and prepares it (doc id ->
row, pass-through decisions), a kernel thread computes energy/p0 and runs
``jkofast.jko.solver.rerank_batch`` (all cores, GIL released) on chunk i -- the only thread that
launches Numba kernels -- and a writer thread formats chunk i-1 and writes it **atomically** to
``OUT.parts/chunk_NNNNNN.trec`` (temp file + ``os.replace``).  On restart, finished chunks
are skipped; the final output is the concatenation of the parts, byte-identical to an
uninterrupted run.

Energy: ``r = minmax(run score)`` per pool, or with ``--scores`` (user rerank scores,
``query-id doc-id score``, streamed in the pool file's query order, or loaded whole with
``--scores-in-memory``) ``r = alpha*minmax(run score) + gamma*minmax(rerank)``;
``E = -r``, ``p0 = softmax_{tau0}(r)`` with the operating point's ``tau0``.
Geometry: ``--embeddings E.npy --ids ids.txt`` (dense rows, cosine) or
``--tfidf-corpus corpus.jsonl`` (TF-IDF rows, sparse cosine).

Malformed input lines are reported on stderr with their line number and skipped.  A query
whose pool cannot be reranked (unknown doc id, a failed solve) is reported on stderr and
written unchanged, in its input order, with its input scores -- never dropped.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from operator import itemgetter

import numpy as np

FMT_VERSION = 1


def add_parser(sub) -> None:
    p = sub.add_parser(
        "rerank",
        help="batch JKO-RAG reranking of a TREC run (streaming, resumable)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--pools", required=True, help="input run: TREC 6-column or 'qid docid score' (optional header; .gz ok)"
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--embeddings", help=".npy (n_docs, d) document embeddings (L2-normalised)")
    g.add_argument("--tfidf-corpus", help="BEIR corpus.jsonl(.gz): TF-IDF geometry")
    p.add_argument("--ids", help="text file, one doc id per embeddings row")
    p.add_argument(
        "--scores", help="rerank scores 'query-id doc-id score' (TREC-style), streamed in the pool file's query order"
    )
    p.add_argument(
        "--scores-in-memory",
        action="store_true",
        help="load --scores into memory (any query order) instead of streaming it",
    )
    p.add_argument("--alpha", type=float, default=0.4, help="weight of the run score when --scores (0.4)")
    p.add_argument("--gamma", type=float, default=0.6, help="weight of the rerank score when --scores (0.6)")
    p.add_argument("--config", default="tuned", help="operating point: base, tuned, contrib, fast (tuned)")
    p.add_argument(
        "--mode",
        default=None,
        choices=["wasserstein", "kl", "noproximal", "bregman"],
        help="proximal term (default: the operating point's, wasserstein = JKO-RAG; kl = KL-Prox)",
    )
    p.add_argument("--alpha-prox", type=float, default=None, help="transport weight of --mode bregman (BW-JKO)")
    p.add_argument(
        "--grad",
        default=None,
        choices=["unrolled", "implicit"],
        help="override the operating point's Wasserstein gradient path",
    )
    p.add_argument("--out", required=True, help="output TREC run")
    p.add_argument("--dist", help="also write the final distributions p_T (.npz)")
    p.add_argument("--k", type=int, default=0, help="keep the top-k per query (0 = whole pool)")
    p.add_argument("--tag", default="jkofast", help="run tag (6th column)")
    p.add_argument("--chunk-size", type=int, default=1000, help="queries per chunk (1000)")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default: all)")
    p.add_argument("--keep-parts", action="store_true", help="keep OUT.parts/ after success")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    # test hook: raise before processing chunk N (simulates an interruption)
    p.add_argument("--fail-after-chunks", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


# ---------------------------------------------------------------------------------------------
# input parsing
#
# The input is read in raw byte blocks that end at a line break.  A block whose non-blank lines
# all have the same number of fields (6 or 3), pure ASCII with no unusual control characters, no
# bad score and no duplicate document takes the fast path (``_fast_columns``): numpy finds the
# field boundaries and checks the field count of every line, only the doc id and score columns
# become Python strings (cut out with a byte mask, one ``str.split``), scores are converted with
# one ``map(float)`` and query boundaries come from comparing the qid bytes of consecutive
# lines.  Any other block goes through the line-by-line path (text-mode semantics: universal
# newlines, Unicode whitespace), which reports malformed lines with their exact line numbers
# and keeps the rest of the block.  Both paths give the same records; the query open at the
# end of a block continues into the next.
# ---------------------------------------------------------------------------------------------
_BLOCK_BYTES = 1 << 22  # bytes read per block (tests shrink it to exercise block boundaries)
_F32_MAX = float(np.finfo(np.float32).max)  # user scores are float32


def _parse_line(parts):
    """-> (qid, docid, score_str, score) or raise ValueError."""
    if len(parts) == 6:
        qid, did, s = parts[0], parts[2], parts[4]
    elif len(parts) == 3:
        qid, did, s = parts
    else:
        raise ValueError(f"expected 6 fields (TREC run) or 3 (qid docid score), got {len(parts)}")
    v = float(s)
    if not np.isfinite(v):
        raise ValueError(f"non-finite score {s!r}")
    return qid, did, s, v


def _open_bytes(path: str):
    if path.endswith(".gz"):
        import gzip

        return gzip.open(path, "rb")
    return open(path, "rb")


def _iter_blocks(path: str, block_bytes: int | None = None):
    """Yield raw blocks of whole lines: line 1 alone (header handling), then ~``block_bytes``
    each, every block but the last ending with ``\\n``."""
    block_bytes = block_bytes or _BLOCK_BYTES
    with _open_bytes(path) as fh:
        first = fh.readline()
        if first:
            yield first
        rest = b""
        while True:
            buf = fh.read(block_bytes)
            if not buf:
                break
            if rest:
                buf = rest + buf
            cut = buf.rfind(b"\n") + 1
            if cut == 0:  # a line longer than the block: read on
                rest = buf
                continue
            rest = buf[cut:]
            yield buf[:cut] if rest else buf
        if rest:
            yield rest


def _text_lines(block: bytes):
    """The block's lines as text-mode iteration gives them (UTF-8, universal newlines)."""
    return io.StringIO(block.decode("utf-8"), newline=None)


_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], np.uint64)  # mask of the n low bytes


def _fast_columns(block: bytes):
    """Fast-path tokenisation of a block of whole lines.

    When the block is ASCII without unusual control characters or lone CRs and every
    non-blank line has the same number of fields, 6 (``qid Q0 docid rank score tag``) or 3
    (``qid docid score``), returns ``(n_lines, qids, sizes, docs, sstr)``: the runs of
    consecutive lines with the same qid (``qids[i]`` has ``sizes[i]`` lines) and the doc id
    and score strings of every line, in order; ``n_lines`` counts blank lines too.  Returns
    ``None`` otherwise (the caller falls back to the line-by-line path).

    Only the doc id and score columns become Python strings: field boundaries come from one
    numpy pass over the bytes, the two columns are cut out with a byte mask and split once,
    and query boundaries are found by comparing the qid bytes of consecutive lines.
    """
    if not block.isascii():
        return None
    if b"\r" in block:
        if block.count(b"\r") != block.count(b"\r\n"):
            return None  # a lone CR is a line break in text mode
        block = block.replace(b"\r\n", b"\n")
    if not block.endswith(b"\n"):
        block += b"\n"
    a = np.frombuffer(block, np.uint8)
    nl = np.flatnonzero(a == 10)
    n_lines = nl.size
    n_ctrl = np.count_nonzero(a < 32)
    if n_ctrl != n_lines and n_ctrl != n_lines + sum(block.count(c) for c in (b"\t", b"\x0b", b"\x0c")):
        return None  # \x1c-\x1f are whitespace to str.split: keep exact semantics
    nw = np.empty(a.size + 1, bool)  # nw[i + 1]: byte i is a field byte (ASCII, no other control
    nw[0] = False  # bytes: any byte > 32)
    np.greater(a, 32, out=nw[1:])
    pos = np.flatnonzero(nw[1:] != nw[:-1])  # field starts and ends, alternating
    starts, ends = pos[0::2], pos[1::2]  # the block ends with '\n': every field closes
    if starts.size == 0:
        return n_lines, [], [], [], []
    per_line = np.diff(np.searchsorted(starts, nl), prepend=0)
    k = int(per_line.max())
    if k not in (3, 6) or np.count_nonzero(per_line) * k != starts.size:
        return None  # mixed field counts (or all malformed): line-by-line path
    di, si = (2, 4) if k == 6 else (1, 2)
    # doc id and score columns: keep their bytes and the separator after each, split once
    toggle = np.zeros(a.size + 1, bool)
    for f in (di, si):
        toggle[starts[f::k]] = True
        toggle[ends[f::k]] = True
    keep = np.logical_xor.accumulate(toggle)[:-1]  # inside a kept field
    keep[ends[di::k]] = True
    keep[ends[si::k]] = True
    cols = a[keep].tobytes().decode("ascii").split()
    docs, sstr = cols[0::2], cols[1::2]
    # query boundaries: compare the qid bytes of consecutive lines, 8 bytes at a time
    qs, qe = starts[0::k], ends[0::k]
    ql = qe - qs
    w = int(ql.max())
    if w > 256:
        return None
    pad = np.zeros(a.size + w + 16, np.uint8)
    pad[: a.size] = a
    words = np.ndarray(shape=(a.size + w,), dtype="<u8", buffer=pad.data, strides=(1,))  # bytes i..i+7
    same = ql[1:] == ql[:-1]
    for j in range(0, w, 8):
        wj = words[qs + j] & _LOW_BYTES[np.clip(ql - j, 0, 8)]
        same &= wj[1:] == wj[:-1]
    first = np.flatnonzero(~same)
    first += 1
    first = np.concatenate(([0], first))
    sizes = np.diff(first, append=qs.size).tolist()
    qids = [block[s:e].decode("ascii") for s, e in zip(qs[first].tolist(), qe[first].tolist(), strict=True)]
    return n_lines, qids, sizes, docs, sstr


def _floats(strs: list):
    """Python ``float`` of every string (exact ``float()`` semantics), or None if any fails
    or is not finite."""
    try:
        v = np.fromiter(map(float, strs), np.float64, len(strs))
    except ValueError:
        return None
    return v if np.isfinite(v).all() else None


class Chunk:
    """Queries in columnar form: query ``i`` is ``qids[i]`` and owns flat lines
    ``off[i]:off[i + 1]`` of ``docs`` (doc ids), ``sstr`` (input score strings) and ``vals``
    (float64 scores), in input order."""

    __slots__ = ("docs", "off", "qids", "sstr", "vals")

    def __init__(self, qids, off, docs, sstr, vals):
        self.qids, self.off, self.docs, self.sstr, self.vals = qids, off, docs, sstr, vals

    def __len__(self) -> int:
        return len(self.qids)

    def __iter__(self):
        """Per query ``(qid, docs, score strings, scores)`` (the pre-columnar tuple form)."""
        off = self.off.tolist()
        vals = self.vals.tolist()
        for i, q in enumerate(self.qids):
            a, b = off[i], off[i + 1]
            yield q, self.docs[a:b], self.sstr[a:b], vals[a:b]


class _PoolParser:
    """Incremental parser of a pool file into pieces of complete queries (columnar).

    Semantics (both paths): 6 fields ``qid Q0 docid rank score tag`` or 3 ``qid docid score``;
    blank lines skipped; a 3-field line 1 that does not parse is a header; other malformed
    lines (field count, non-numeric or non-finite score) go to ``report(lineno, message)`` and
    are skipped; a document repeated inside a query keeps its first line (the later one is
    reported); a query is a run of consecutive lines with the same qid.
    """

    def __init__(self, report):
        self.report = report
        self.ln = 0  # lines consumed
        self.open = None  # (qid, docs, sstr, vals ndarray) of the query still being read

    def feed(self, block: bytes):
        """Parse one block -> (qids, sizes, docs, sstr, vals) of the queries it completes."""
        if self.ln:
            piece = self._fast(block)
            if piece is not None:
                return piece
        return self._slow(block)

    def close(self):
        """The last query (if any) as a piece."""
        if self.open is None:
            return None
        q, d, s, v = self.open
        self.open = None
        return [q], [len(d)], d, s, v

    def _fast(self, block: bytes):
        r = _fast_columns(block)
        if r is None:
            return None
        n_lines, qs, ns, d, s = r
        if not qs:
            self.ln += n_lines
            return [], [], [], [], np.zeros(0)
        v = _floats(s)
        if v is None:
            return None
        o = self.open
        cont = o is not None and qs[0] == o[0]  # the open query continues into this block
        a = 0
        for i, n in enumerate(ns):  # duplicates -> the line-by-line path reports them (state untouched)
            if n > 1 or (i == 0 and cont):
                seg = d[a : a + n]
                if i == 0 and cont:
                    seg = o[1] + seg
                if len(set(seg)) != len(seg):
                    return None
            a += n
        self.ln += n_lines
        if cont and len(qs) == 1:  # the whole block extends the open query
            self.open = (o[0], o[1] + d, o[2] + s, np.concatenate((o[3], v)))
            return [], [], [], [], np.zeros(0)
        # the last run stays open; the rest (behind the previous open query) is finished.  The
        # columns are fresh lists: cut and prepend in place instead of copying them again
        cut = len(d) - ns[-1]
        self.open = (qs[-1], d[cut:], s[cut:], v[cut:])
        del d[cut:], s[cut:]
        v = v[:cut]
        qs, ns = qs[:-1], ns[:-1]
        if o is not None:
            if cont:
                ns[0] += len(o[1])
            else:
                qs.insert(0, o[0])
                ns.insert(0, len(o[1]))
            d[0:0] = o[1]
            s[0:0] = o[2]
            v = np.concatenate((o[3], v))
        return qs, ns, d, s, v

    def _slow(self, block: bytes):
        qs, ns, docs, sstr, vals = [], [], [], [], []
        if self.open is not None:
            cur, d, s, v = self.open
            d, s, v = list(d), list(s), v.tolist()
        else:
            cur, d, s, v = None, [], [], []
        seen = set(d)
        ln = self.ln
        for line in _text_lines(block):
            ln += 1
            parts = line.split()
            if not parts:
                continue
            try:
                qid, did, sv, fv = _parse_line(parts)
            except ValueError as exc:
                if ln == 1 and len(parts) == 3:
                    continue  # a 'query-id corpus-id score' header
                self.report(ln, str(exc))
                continue
            if qid != cur:
                if cur is not None:
                    qs.append(cur)
                    ns.append(len(d))
                    docs += d
                    sstr += s
                    vals += v
                cur, d, s, v, seen = qid, [], [], [], set()
            if did in seen:
                self.report(ln, f"duplicate document {did!r} in query {qid!r} (ignored)")
                continue
            seen.add(did)
            d.append(did)
            s.append(sv)
            v.append(fv)
        self.ln = ln
        self.open = None if cur is None else (cur, d, s, np.asarray(v, np.float64))
        return qs, ns, docs, sstr, np.asarray(vals, np.float64)


def _iter_pieces(path: str, report):
    parser = _PoolParser(report)
    for block in _iter_blocks(path):
        piece = parser.feed(block)
        if piece[0]:
            yield piece
    last = parser.close()
    if last is not None:
        yield last


def iter_chunks(path: str, chunk_size: int, report):
    """Stream the pool file as :class:`Chunk` s of ``chunk_size`` queries (the last may be
    smaller).  Malformed lines go to ``report(lineno, message)`` and are skipped."""
    bq: list = []  # the chunk being filled from the pieces
    bn: list = []
    bd: list = []
    bs: list = []
    bv: list = []

    def emit():
        off = np.zeros(len(bn) + 1, np.int64)
        np.cumsum(bn, out=off[1:])
        return Chunk(bq, off, bd, bs, bv[0] if len(bv) == 1 else np.concatenate(bv))

    for qs, ns, d, s, v in _iter_pieces(path, report):
        off = np.zeros(len(ns) + 1, np.int64)
        np.cumsum(ns, out=off[1:])
        offl = off.tolist()
        i = 0
        while i < len(qs):
            j = min(len(qs), i + chunk_size - len(bq))
            a, b = offl[i], offl[j]
            if not bq:  # start a chunk: one slice copy of each column
                bq, bn, bd, bs, bv = qs[i:j], ns[i:j], d[a:b], s[a:b], [v[a:b]]
            else:
                bq += qs[i:j]
                bn += ns[i:j]
                bd += d[a:b]
                bs += s[a:b]
                bv.append(v[a:b])
            if len(bq) == chunk_size:
                yield emit()
                bq, bn, bd, bs, bv = [], [], [], [], []
            i = j
    if bq:
        yield emit()


def iter_queries(path: str, report):
    """Stream ``(qid, docids, score_strs, scores)`` per contiguous query block.

    Malformed lines are passed to ``report(lineno, message)`` and skipped.  Duplicate doc
    ids within a query keep the first occurrence (the later line is reported).
    """
    for chunk in iter_chunks(path, 1024, report):
        yield from chunk


class _ScoreParser:
    """Incremental parser of a score file into ``(qid, {docid: score})`` per contiguous block.

    Semantics (both paths): ``query-id doc-id score`` or a 6-field TREC line; a line 1 that
    does not parse is a header; any other malformed line or a non-finite score raises
    ``ValueError("<file>:<line>: ...")``; a repeated doc id in a block keeps its last score.
    """

    def __init__(self, path: str):
        self.path = path
        self.ln = 0
        self.open = None  # (qid, dict)

    def feed(self, block: bytes) -> list:
        if self.ln:
            out = self._fast(block)
            if out is not None:
                return out
        return self._slow(block)

    def close(self) -> list:
        out = [] if self.open is None else [self.open]
        self.open = None
        return out

    def _emit(self, out, qid, block):
        if self.open is not None and self.open[0] == qid:
            self.open[1].update(block)
            return
        if self.open is not None:
            out.append(self.open)
        self.open = (qid, block)

    def _fast(self, block: bytes):
        r = _fast_columns(block)
        if r is None:
            return None
        n_lines, qs, ns, d, s = r
        out: list = []
        if qs:
            v = _floats(s)
            if v is None or np.abs(v).max() > _F32_MAX:  # the line-by-line path reports it
                return None
            vl = v.tolist()
            a = 0
            for key, n in zip(qs, ns, strict=True):
                self._emit(out, key, dict(zip(d[a : a + n], vl[a : a + n], strict=True)))
                a += n
        self.ln += n_lines
        return out

    def _slow(self, block: bytes):
        from jkofast.jko.energy import iter_score_lines

        out: list = []
        cur, blk = self.open if self.open is not None else (None, {})
        self.open = None
        lines = list(_text_lines(block))
        for qid, did, v in iter_score_lines(lines, self.path, self.ln + 1):
            if qid != cur:
                if cur is not None:
                    out.append((cur, blk))
                cur, blk = qid, {}
            blk[did] = v
        self.ln += len(lines)
        if cur is not None:
            self.open = (cur, blk)
        return out


def iter_score_blocks(path: str):
    """Stream a score file as ``(qid, {docid: score})`` per contiguous query block."""
    parser = _ScoreParser(path)
    for block in _iter_blocks(path):
        yield from parser.feed(block)
    yield from parser.close()


def read_scores(path: str) -> dict:
    """Whole score file -> ``{qid: {docid: score}}`` (any order; a repeat keeps its last
    score), as :func:`jkofast.jko.energy.read_score_file` but block-parsed (and ``.gz`` ok)."""
    out: dict = {}
    for qid, blk in iter_score_blocks(path):
        d = out.get(qid)
        if d is None:
            out[qid] = blk
        else:
            d.update(blk)
    return out


class ScoreStream:
    """Stream a score file by contiguous query blocks, in the pool file's query order.

    ``take(qid)`` returns the next block if it belongs to ``qid`` (and advances), else None
    (the query has no scores; nothing is consumed).  Memory: one block of the file.
    """

    def __init__(self, path: str):
        self.path = path
        self.missing = 0
        self._it = iter_score_blocks(path)
        self._cur = next(self._it, None)

    def take(self, qid: str):
        if self._cur is not None and self._cur[0] == qid:
            block = self._cur[1]
            self._cur = next(self._it, None)
            return block
        self.missing += 1
        return None


# ---------------------------------------------------------------------------------------------
# geometry
# ---------------------------------------------------------------------------------------------
def _id_rows(ids: list, path: str) -> dict:
    """doc id -> geometry row; a repeated id is an error (every pool holding it would otherwise be
    passed through as 'not in the geometry', or silently use the last row)."""
    row = {d: i for i, d in enumerate(ids)}
    if len(row) != len(ids):
        seen: set = set()
        for i, d in enumerate(ids):
            if d in seen:
                raise ValueError(f"{path}: document id {d!r} is repeated (row {i}); ids must be unique")
            seen.add(d)
    return row


class DenseGeometry:
    def __init__(self, npy: str, ids_path: str | None):
        from jkofast.pools.candidates import load_embeddings

        if ids_path is None:
            raise ValueError("--embeddings needs --ids (one doc id per row)")
        self.emb, ids = load_embeddings(npy, ids_path)
        self.row = _id_rows(ids, ids_path)

    def rows(self, docs) -> np.ndarray:
        return _map_rows(self.row, docs)

    def gather(self, rows):
        r = np.asarray(rows, np.int64)
        return {"embeddings": np.ascontiguousarray(self.emb[r], dtype=np.float32)}


class TfidfGeometry:
    def __init__(self, corpus: str):
        from jkofast.datasets.beir import read_corpus
        from jkofast.sparse.index import TfidfIndex

        ids, titles, texts = read_corpus(corpus)
        idx = TfidfIndex().fit([(t + " " + x).strip() for t, x in zip(titles, texts, strict=True)])
        self.X = idx.doc_matrix().tocsr()
        self.row = _id_rows(ids, corpus)

    def rows(self, docs) -> np.ndarray:
        return _map_rows(self.row, docs)

    def gather(self, rows):
        return {"csr": self.X[np.asarray(rows, np.int64)]}


# ---------------------------------------------------------------------------------------------
# per-chunk work
# ---------------------------------------------------------------------------------------------
class _Counter:
    """Progress on stderr: queries done and throughput (the total is unknown while streaming)."""

    def __init__(self, enabled: bool, every_s: float = 0.5):
        self.enabled, self.every_s = enabled, every_s
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and now - self._last >= self.every_s:
            self._last = now
            rate = self.done / max(now - self.t0, 1e-9)
            print(f"\rrerank: {self.done:,} queries ({rate:,.1f}/s)", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled:
            rate = self.done / max(time.perf_counter() - self.t0, 1e-9)
            print(f"\rrerank: {self.done:,} queries ({rate:,.1f}/s)", file=sys.stderr, flush=True)


def _map_rows(row: dict, docs: list) -> np.ndarray:
    """Geometry row of every doc id (-1 = unknown), one dict lookup each at C speed."""
    try:
        return np.fromiter(map(row.__getitem__, docs), np.int64, len(docs))
    except KeyError:
        return np.fromiter(map(row.get, docs, repeat(-1)), np.int64, len(docs))


def align_chunk_scores(scores: dict, qids, off, docs) -> np.ndarray:
    """Float32 user scores aligned with a chunk's lines, as :func:`jkofast.jko.energy.align_scores`:
    a line without a score gets its query's smallest score, a query without any gets zeros."""
    offl = off.tolist()
    out = np.zeros(offl[-1] if offl else 0, np.float32)
    for i, qid in enumerate(qids):
        sq = scores.get(qid)
        if not sq:
            continue
        a, b = offl[i], offl[i + 1]
        vals = list(map(sq.get, docs[a:b]))
        if None in vals:
            present = [x for x in vals if x is not None]
            if not present:
                continue
            floor = min(present)
            vals = [floor if x is None else x for x in vals]
        out[a:b] = vals
    return out


def format_lines(qids, off, docs, sstr, p, ok, k: int, tag: str) -> str:
    """TREC lines of a chunk, one ``%`` over preformatted columns.

    Query ``i`` (lines ``off[i]:off[i+1]``) is written by descending ``p`` (ties in input
    order) with ``p`` as ``%.9g`` when ``ok[i]``, else unchanged: input order and input score
    strings ``sstr``; ``k > 0`` keeps the first ``k`` lines of each query.  Byte-identical to
    ``f"{qid} Q0 {doc} {rank} {p:.9g} {tag}\\n"`` per line.
    """
    nq = len(qids)
    if nq == 0:
        return ""
    lens = np.diff(off)
    n = int(off[-1])
    offl = off.tolist()
    order = np.arange(n)
    for i in np.flatnonzero(ok).tolist():
        a, b = offl[i], offl[i + 1]
        order[a:b] = np.argsort(-p[a:b], kind="stable") + a  # ties -> input order
    if k > 0:
        kk = np.minimum(lens, k)
        pos = np.arange(n) - np.repeat(off[:-1], lens)
        keep = pos < np.repeat(kk, lens)
        sel, rank = order[keep], pos[keep] + 1
    else:
        kk, sel, rank = lens, order, np.arange(n) - np.repeat(off[:-1], lens) + 1
    m = sel.size
    if m == 0:
        return ""
    sel_l = sel.tolist()
    args: list = [None] * (4 * m)
    args[0::4] = np.repeat(np.array(qids, object), kk).tolist()
    args[1::4] = [docs[sel_l[0]]] if m == 1 else itemgetter(*sel_l)(docs)
    args[2::4] = rank.tolist()
    t = tag.replace("%", "%%")
    f_ok, f_bad = f"%s Q0 %s %d %.9g {t}\n", f"%s Q0 %s %d %s {t}\n"
    if ok.all():
        args[3::4] = p[sel].tolist()
        fmt = f_ok * m
    else:
        kept_ok = np.repeat(ok, kk)
        score = np.empty(m, object)
        i_ok = np.flatnonzero(kept_ok)
        i_bad = np.flatnonzero(~kept_ok)
        score[i_ok] = p[sel[i_ok]].tolist()
        score[i_bad] = [sstr[j] for j in sel[i_bad].tolist()]
        args[3::4] = score.tolist()
        fmt = "".join([(f_ok if o else f_bad) * c for o, c in zip(ok.tolist(), kk.tolist(), strict=True)])
    return fmt % tuple(args)


class _Prepared:
    """A chunk after the Python-side preparation, ready for the kernel stage."""

    __slots__ = ("bad", "chunk", "line_ok", "off_ok", "ok", "rows", "rr", "run_s")


def prepare_chunk(chunk, geom, user_scores, cfg, args) -> _Prepared:
    """Doc ids -> geometry rows, pass-through decisions (unknown doc, empty pool), aligned user
    scores.  Pure Python/numpy: no Numba launch here, so the kernel thread is the only thread
    that runs parallel kernels (the workqueue threading layer forbids concurrent launches)."""
    pr = _Prepared()
    pr.chunk = chunk
    qids, off = chunk.qids, chunk.off
    nq = len(qids)
    lens = np.diff(off)
    rows = geom.rows(chunk.docs)
    bad: dict = {}
    unknown = rows < 0
    if unknown.any():
        first = np.flatnonzero(unknown)
        for qi, j in zip((np.searchsorted(off, first, side="right") - 1).tolist(), first.tolist(), strict=True):
            if qi not in bad:
                bad[qi] = f"document {chunk.docs[j]!r} not in the geometry"
    for qi in np.flatnonzero(lens == 0).tolist():
        bad.setdefault(qi, "empty pool")
    ok = np.ones(nq, bool)
    ok[list(bad)] = False
    pr.bad, pr.ok = bad, ok
    pr.line_ok = line_ok = None if not bad else np.repeat(ok, lens)
    ok_q = np.flatnonzero(ok)
    off_ok = np.zeros(ok_q.size + 1, np.int64)
    np.cumsum(lens[ok_q], out=off_ok[1:])
    pr.off_ok = off_ok
    pr.rows = rows if line_ok is None else rows[line_ok]
    pr.run_s = pr.rr = None
    if ok_q.size:
        pr.run_s = chunk.vals if line_ok is None else chunk.vals[line_ok]
        if user_scores is not None:
            ok_ids = qids if line_ok is None else [qids[i] for i in ok_q.tolist()]
            ok_docs = (
                chunk.docs if line_ok is None else [d for d, o in zip(chunk.docs, line_ok.tolist(), strict=True) if o]
            )
            pr.rr = align_chunk_scores(user_scores, ok_ids, off_ok, ok_docs)
    return pr


def energy_p0(pr: _Prepared, cfg, args):
    """(energy, p0) of the chunk's rerankable queries: ``r`` = the run score's min-max (blended
    with the user scores' when given), ``E = -r``, ``p0 = softmax_{tau0}(r)``."""
    from jkofast.jko.energy import blend, softmax_tau

    if pr.rr is not None:
        r = blend(pr.off_ok, dense=pr.run_s, rerank=pr.rr.astype(np.float64), alpha=args.alpha, gamma=args.gamma)
    else:
        r = blend(pr.off_ok, dense=pr.run_s, alpha=1.0)
    return -r, softmax_tau(r, pr.off_ok, cfg.tau0)


def solve_chunk(pr: _Prepared, geom, cfg, args):
    """The kernel stage: energy/p0, the geometry rows' gather, ``rerank_batch`` (GIL released)."""
    from jkofast.jko.solver import rerank_batch

    if pr.run_s is None:
        return None
    energy, p0 = energy_p0(pr, cfg, args)
    # no per-chunk ConvergenceWarning: the counts are summed over the run and reported once
    return rerank_batch(
        energy, p0, pr.off_ok, config=cfg, n_threads=args.threads, warn_unconverged=False, **geom.gather(pr.rows)
    )


def finish_chunk(pr: _Prepared, res, args, say):
    """Solver statuses -> pass-through; TREC text and dist arrays -> (text, dist, n passed through)."""
    chunk, bad, ok = pr.chunk, pr.bad, pr.ok
    qids, off = chunk.qids, chunk.off
    lens = np.diff(off)
    n = int(off[-1])
    p = np.full(n, np.nan, np.float64)
    if res is not None:
        ok_q = np.flatnonzero(ok)
        status = np.asarray(res.status)
        errors = getattr(res, "errors", {}) or {}
        for j in np.flatnonzero(status != 0).tolist():
            qi = int(ok_q[j])
            bad[qi] = errors.get(j, f"solver status {int(status[j])}")
            ok[qi] = False
        p_ok = np.asarray(res.p, np.float64)
        if pr.line_ok is None:
            p = p_ok
        else:
            p[pr.line_ok] = p_ok
    for qi in sorted(bad):
        say(f"jkofast rerank: query {qids[qi]!r} passed through unchanged: {bad[qi]}")
    text = format_lines(qids, off, chunk.docs, chunk.sstr, p, ok, args.k, args.tag)
    pf = p.astype(np.float32)
    if bad:
        pf[np.repeat(~ok, lens)] = np.nan
    dist = {
        "query_ids": np.array(qids, dtype=str),
        "sizes": lens.astype(np.int64),
        "p": pf,
        "status": (~ok).astype(np.int32),
    }
    return text, dist, len(bad)


def process_chunk(chunk, geom, user_scores, cfg, args, say):
    """Rerank one :class:`Chunk` -> (trec text, dist arrays, number of passed-through queries)."""
    pr = prepare_chunk(chunk, geom, user_scores, cfg, args)
    return finish_chunk(pr, solve_chunk(pr, geom, cfg, args), args, say)


def _atomic_write_text(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _atomic_write_npz(path: str, arrays: dict) -> None:
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _fingerprint(args) -> dict:
    st = os.stat(args.pools)
    d = {
        "version": FMT_VERSION,
        "pools": os.path.abspath(args.pools),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "config": args.config,
        "chunk_size": args.chunk_size,
        "k": args.k,
        "tag": args.tag,
        "embeddings": args.embeddings,
        "ids": args.ids,
        "tfidf_corpus": args.tfidf_corpus,
        "scores": args.scores,
        "scores_in_memory": args.scores_in_memory,
        "grad": getattr(args, "grad", None),
        "mode": getattr(args, "mode", None),
        "alpha_prox": getattr(args, "alpha_prox", None),
        "alpha": args.alpha,
        "gamma": args.gamma,
        "dist": bool(args.dist),
    }
    d["hash"] = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()
    return d


def _write_npz_streaming(path: str, parts: list[str]) -> None:
    """Concatenate per-chunk npz parts into one .npz without holding all of p in memory."""
    sizes, qids, status = [], [], []
    n_total = 0
    for pth in parts:
        with np.load(pth) as z:
            sizes.append(z["sizes"])
            qids.append(z["query_ids"])
            status.append(z["status"])
            n_total += int(z["sizes"].sum())
    sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    offsets = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in (
            ("query_ids", np.concatenate(qids) if qids else np.zeros(0, str)),
            ("offsets", offsets),
            ("status", np.concatenate(status) if status else np.zeros(0, np.int32)),
        ):
            with zf.open(name + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(arr))
        with zf.open("p.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_2_0(
                fh,
                {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False, "shape": (n_total,)},
            )
            for pth in parts:
                with np.load(pth) as z:
                    fh.write(np.ascontiguousarray(z["p"], dtype="<f4").tobytes())
    os.replace(tmp, path)


def _warm_needed() -> None:
    """Warm up only the modules a chunk uses (energy + the JKO core), not the whole package."""
    import importlib

    from jkofast._numba import WARMUPS

    for mod, name in (("jkofast.jko.energy", "energy"), ("jkofast.jko.solver", "jko")):
        try:
            importlib.import_module(mod)
            if name in WARMUPS:
                WARMUPS[name]()
        except Exception as exc:  # a broken warm-up must not stop a batch job: kernels compile lazily
            print(f"jkofast rerank: warm-up of {mod} failed ({type(exc).__name__}: {exc}); continuing", file=sys.stderr)


def run(args) -> int:
    from jkofast.commands._common import emit

    if args.chunk_size < 1:
        raise ValueError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    if args.k < 0:
        raise ValueError(f"--k must be >= 0 (0 = whole pool), got {args.k}")
    if not args.tag or any(c.isspace() for c in args.tag):
        raise ValueError(f"--tag must be non-empty without whitespace, got {args.tag!r}")
    from jkofast._threads import resolve_threads

    resolve_threads(args.threads)  # before any part is written
    for name in ("alpha", "gamma"):
        v = getattr(args, name)
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"--{name} must be finite and >= 0, got {v}")
    if not os.path.isfile(args.pools):
        raise FileNotFoundError(f"--pools file not found: {args.pools}")
    if args.embeddings is None and args.tfidf_corpus is None:
        raise ValueError("a geometry is required: --embeddings E.npy --ids ids.txt, or --tfidf-corpus corpus.jsonl")
    from jkofast.jko.solver import JKOConfig, operating_point

    cfg = args.config if isinstance(args.config, JKOConfig) else operating_point(args.config)
    for field, val in (
        ("grad", getattr(args, "grad", None)),
        ("mode", getattr(args, "mode", None)),
        ("alpha_prox", getattr(args, "alpha_prox", None)),
    ):
        if val is not None:
            cfg = cfg.replace(**{field: val})
    t0 = time.perf_counter()
    quiet = args.quiet or args.json

    def say(msg):
        print(msg, file=sys.stderr, flush=True)

    n_malformed = [0]
    seen_q: set = set()  # query ids of earlier blocks: a reappearing id is a split query
    n_split = [0]
    n_unconv = np.zeros(3, np.int64)  # queries, Sinkhorn-capped inner steps, CG-capped inner steps

    def check_split(chunk):
        for q in chunk.qids:
            if q in seen_q:
                n_split[0] += 1
                say(
                    f"jkofast rerank: query {q!r} reappears after other queries in {args.pools} (its lines "
                    "are not contiguous): each block is reranked and written separately"
                )
            else:
                seen_q.add(q)

    def report(ln, msg):
        n_malformed[0] += 1
        say(f"jkofast rerank: {args.pools}:{ln}: malformed line skipped: {msg}")

    geom = DenseGeometry(args.embeddings, args.ids) if args.embeddings else TfidfGeometry(args.tfidf_corpus)
    all_scores = stream = None
    if args.scores and args.scores_in_memory:
        all_scores = read_scores(args.scores)
    elif args.scores:
        stream = ScoreStream(args.scores)

    def chunk_scores(chunk):
        if all_scores is not None:
            return all_scores
        if stream is None:
            return None
        out = {}
        for qid in chunk.qids:
            block = stream.take(qid)
            if block is not None:
                out[qid] = block
        return out

    _warm_needed()  # compile / load the kernels a chunk needs before the worker starts

    work = args.out + ".parts"
    os.makedirs(work, exist_ok=True)
    if args.dist:  # like --out's folder: created now, not found missing after all the work
        os.makedirs(os.path.dirname(os.path.abspath(args.dist)), exist_ok=True)
    fp = _fingerprint(args)
    man = os.path.join(work, "manifest.json")
    if os.path.exists(man):
        with open(man, encoding="utf-8") as fh:
            old = json.load(fh)
        if old.get("hash") != fp["hash"]:
            raise ValueError(f"{work} holds parts of a run with other settings/input; remove it to start over")
    else:
        _atomic_write_text(man, json.dumps(fp, indent=1))

    prog = _Counter(enabled=not quiet)  # streaming: the total is unknown up front
    n_done = n_skipped = n_failed = n_q = 0
    part_names = []
    k_pending = w_pending = None  # (ci, prepared, kernel future); writer future
    t_first = None

    def write_job(ci, pr, res):
        text, dist, nbad = finish_chunk(pr, res, args, say)
        base = os.path.join(work, f"chunk_{ci:06d}")
        if args.dist:
            _atomic_write_npz(base + ".npz", dist)
        _atomic_write_text(base + ".trec", text)  # written last: marks the chunk finished
        return len(pr.chunk), nbad

    def drain_writer():
        nonlocal w_pending, n_done, n_failed
        if w_pending is not None:
            nq_c, nbad = w_pending.result()
            w_pending = None
            n_done += nq_c
            n_failed += nbad
            prog.update(nq_c)

    # three stages: this thread parses and prepares chunk i+1 while the kernel thread solves
    # chunk i (rerank_batch releases the GIL; the only thread launching Numba kernels) and the
    # writer formats and writes chunk i-1
    with ThreadPoolExecutor(max_workers=1) as kex, ThreadPoolExecutor(max_workers=1) as wex:

        def submit(item):
            nonlocal k_pending, w_pending
            done, k_pending = k_pending, None
            if item is not None:
                ci_, pr_ = item
                k_pending = (ci_, pr_, kex.submit(solve_chunk, pr_, geom, cfg, args))
            if done is not None:
                res = done[2].result()
                if res is not None and res.unconverged is not None:
                    n_unconv[0] += np.count_nonzero(res.unconverged.any(axis=1))
                    n_unconv[1:] += res.unconverged.sum(axis=0)
                drain_writer()  # at most one chunk being formatted / written
                w_pending = wex.submit(write_job, done[0], done[1], res)

        for ci, chunk in enumerate(iter_chunks(args.pools, args.chunk_size, report)):
            n_q += len(chunk)
            check_split(chunk)
            scores_c = chunk_scores(chunk)  # advances the score stream even for finished chunks
            base = os.path.join(work, f"chunk_{ci:06d}")
            part_names.append(base)
            if os.path.exists(base + ".trec") and (not args.dist or os.path.exists(base + ".npz")):
                n_skipped += len(chunk)
                prog.update(len(chunk))
                continue
            if args.fail_after_chunks is not None and ci >= args.fail_after_chunks:
                submit(None)
                drain_writer()
                raise RuntimeError(f"injected failure before chunk {ci}")
            if t_first is None:
                t_first = time.perf_counter()
            submit((ci, prepare_chunk(chunk, geom, scores_c, cfg, args)))
        submit(None)
        drain_writer()
    t_compute = time.perf_counter() - t_first if t_first is not None else 0.0
    prog.close()
    if stream is not None and stream.missing:
        say(
            f"jkofast rerank: {stream.missing} queries had no rerank scores (their rerank term is 0); if "
            f"{args.scores} is not in the pool file's query order, use --scores-in-memory"
        )

    # final output: concatenation of the parts, written atomically
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as out:
        for base in part_names:
            with open(base + ".trec", "rb") as fh:
                while True:
                    buf = fh.read(1 << 20)
                    if not buf:
                        break
                    out.write(buf)
    os.replace(tmp, args.out)
    if args.dist:
        _write_npz_streaming(args.dist, [b + ".npz" for b in part_names])
    if not args.keep_parts:
        for base in part_names:
            for ext in (".trec", ".npz"):
                if os.path.exists(base + ext):
                    os.remove(base + ext)
        os.remove(man)
        try:
            os.rmdir(work)
        except OSError:
            pass
    wall = time.perf_counter() - t0
    import resource

    summary = {
        "queries": n_q,
        "reranked_now": n_done,
        "skipped_finished": n_skipped,
        "passed_through": n_failed,
        "malformed_lines": n_malformed[0],
        "split_queries": n_split[0],
        "chunks": len(part_names),
        "unconverged_queries": int(n_unconv[0]),
        "unconverged_inner_steps": [int(n_unconv[1]), int(n_unconv[2])],
        "wall_s": wall,
        "compute_s": t_compute,
        "queries_per_s": n_done / t_compute if t_compute > 0 else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "config": args.config,
        "out": args.out,
    }
    text = (
        f"reranked {n_done} queries ({n_skipped} from finished chunks, {n_failed} passed through, "
        f"{n_malformed[0]} malformed lines"
        + (f", {n_split[0]} split queries" if n_split[0] else "")
        + f") in {wall:.1f} s"
        + (f", {summary['queries_per_s']:.1f} queries/s" if summary["queries_per_s"] else "")
        + f"; peak RSS {summary['peak_rss_mb']:.0f} MB -> {args.out}"
    )
    if n_unconv[0]:
        from jkofast._status import unconverged_summary

        say(f"jkofast rerank: {unconverged_summary(*n_unconv, cfg)}")
    emit(summary, args.json, text)
    return 0
