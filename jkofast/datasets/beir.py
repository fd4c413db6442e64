"""BEIR-format datasets: corpus, queries, qrels and (optional) saved embeddings.

A BEIR folder holds ``corpus.jsonl`` (or ``.jsonl.gz``), ``queries.jsonl`` (or ``.gz``) and
``qrels/{split}.tsv``; jkofast also reads ``embeddings/<name>/{docs.npy, queries.npy,
docs_ids.txt, query_ids.txt}`` when present.  ``load_dataset("scifact")`` returns the copy
bundled in ``jkofast/datasets/scifact`` (CC BY-NC 2.0, see its README); any other argument
is a folder path.

Data model (all lists follow the *file order*):

* ``doc_ids``, ``titles``, ``texts``: ``list[str]``, one entry per corpus line;
* ``query_ids``, ``query_texts``: ``list[str]`` in ``queries.jsonl`` order; ``queries`` is
  the ``dict`` qid -> text;
* ``qrels(split)``: ``dict[qid, dict[docid, int]]``; label-0 lines are kept (SPEC A.2.1);
* ``split_query_ids(split)``: the qids of a split that exist in ``queries.jsonl``, sorted
  numerically when every id is a decimal string (SciFact) and as strings otherwise
  (SPEC A.2.2);
* ``doc_texts(sep)``: ``(title + sep + text).strip()`` per document (``". "`` for the
  JKO-RAG BM25 / encoders, ``" "`` for SparseGeometricRAG and bm25s);
* ``embeddings(name)``: ``(doc_emb float32 (N, d), query_emb float32 (n_queries, d))`` with
  rows aligned with ``doc_ids`` / ``query_ids``, or ``None`` when absent.

Malformed input (bad JSON line, invalid UTF-8, missing ``_id``, an ``_id`` that is not a
non-empty string or integer without whitespace, duplicate ids, an empty corpus or queries file,
qrels lines without exactly 3 tab-separated fields, empty ids, non-integer labels, a repeated
(query, document) judgement) raises ``ValueError`` naming the file and the 1-based line number.
The qrels header line is skipped when it is one (a first line that parses as a judgement is
kept).  Saved embeddings must be 2-D, finite and of one dimension.

Data that other BEIR tooling tolerates is dropped with one :class:`DataWarning` per file giving
the count and the first line: qrels judgements on documents absent from the corpus (a query
left without judgements leaves the qrels) and queries without text (empty or missing
``text``).  ``strict=True`` (``--strict`` on the CLI) makes both an error naming file and line.
"""

from __future__ import annotations

import gzip
import json
import os
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np

from jkofast._digest import corpus_sha256, text_digests
from jkofast._io import load_array
from jkofast._validation import check_bool

__all__ = [
    "BeirDataset",
    "DataWarning",
    "StaleEmbeddings",
    "bundled_path",
    "load_dataset",
    "parity_fixture_path",
    "read_corpus",
    "read_qrels_beir",
    "read_queries",
    "read_query_file",
]

BUNDLED = ("scifact",)


class DataWarning(UserWarning):
    """Records of a BEIR file were dropped (unknown documents in qrels, queries without text).

    One warning per file, giving the count; ``strict=True`` turns the first one into a ``ValueError``.
    """


def _warn_dropped(path: str, n: int, what: str, first: str) -> None:
    """Emit the one :class:`DataWarning` of a file that dropped ``n`` records (``first`` describes the first)."""
    warnings.warn(
        f"{path}: dropped {n} {what} (first: {first}); strict=True / --strict makes this an error",
        DataWarning,
        stacklevel=3,
    )


def bundled_path(name: str) -> str:
    """Folder of a dataset shipped inside the package (``"scifact"``)."""
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled dataset {name!r}; bundled: {', '.join(BUNDLED)}")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name)


def parity_fixture_path() -> str:
    """Path of the bundled parity fixture: the published solver's outputs on 30 SciFact pools.

    ``jkofast/datasets/reference/jko_reference_scifact30.npz`` (package data, so ``jkofast parity``
    works from a wheel); read by ``jkofast parity``, the parity tests and the A/B tools.
    """
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference", "jko_reference_scifact30.npz")


def _find(folder: str, stem: str) -> str:
    """Return ``folder/stem`` or ``folder/stem.gz``, whichever exists (``FileNotFoundError`` if neither)."""
    for cand in (stem, stem + ".gz"):
        p = os.path.join(folder, cand)
        if os.path.isfile(p):
            return p
    raise FileNotFoundError(f"{os.path.join(folder, stem)}(.gz) not found")


def _open_bytes(path: str):
    """Open a file for reading bytes, gunzipping ``.gz`` files on the fly."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def _lines(fh, path: str):
    """Yield ``(line number, text)`` of the byte lines of ``fh``, decoding each as UTF-8.

    Lines are decoded one at a time, so invalid UTF-8 names its exact line (``ValueError``
    instead of a bare ``UnicodeDecodeError``); corrupt gzip data names the first line not read.
    """
    lineno = 0
    it = iter(fh)
    while True:
        try:
            raw = next(it)
        except StopIteration:
            return
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:  # re-raised with the file named
            raise ValueError(f"{path}: corrupted gzip data at or after line {lineno + 1} ({e})") from None
        lineno += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}:{lineno}: invalid UTF-8 at byte {e.start} of the line ({e.reason})") from None
        yield lineno, line


def _check_id(v, what: str, path: str, lineno: int) -> str:
    """Return a document/query id as str after checking it is a non-empty string (or integer) without whitespace.

    ``null``, lists or floats were turned into ids like ``'None'`` / ``'[1, 2]'``, and
    whitespace or empty ids give TREC runs that do not read back.
    """
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise ValueError(f"{path}:{lineno}: {what} must be a string, got {type(v).__name__} {v!r}")
    v = str(v)
    if not v.isascii():
        _check_encodable(v, what, path, lineno)
    if not v or any(c.isspace() or c == "\0" for c in v):
        raise ValueError(
            f"{path}:{lineno}: {what} {v!r} must be non-empty without whitespace or NUL "
            "(TREC run lines could not carry it)"
        )
    return v


def _iter_jsonl(path: str):
    """Yield ``(line_number, dict)``; blank lines are skipped."""
    with _open_bytes(path) as fh:
        for lineno, line in _lines(fh, path):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            if "_id" not in obj:
                raise ValueError(f"{path}:{lineno}: missing '_id'")
            yield lineno, obj


def _str_field(obj: dict, key: str, path: str, lineno: int) -> str:
    """Return string field ``key`` of a JSON record ('' when absent or null; ``ValueError`` if not a str)."""
    v = obj.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ValueError(f"{path}:{lineno}: field {key!r} must be a string, got {type(v).__name__}")
    if not v.isascii():
        _check_encodable(v, f"field {key!r}", path, lineno, obj.get("_id"))
    return v


def _check_encodable(v: str, what: str, path: str, lineno: int, rid=None) -> None:
    """Reject a string that cannot be encoded as UTF-8 (a JSON surrogate escape that is not half of a pair)."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        who = f" of id {rid!r}" if isinstance(rid, str | int) and not isinstance(rid, bool) else ""
        raise ValueError(
            f"{path}:{lineno}: {what}{who} holds a lone surrogate {v[e.start]!r} at character {e.start} "
            "(a \\ud800-\\udfff escape that is not half of a pair): not valid Unicode text"
        ) from None


def _read_records(
    path: str, what: str, kind: str, fields: tuple[str, ...], *, need: str | None = None, strict: bool = False
) -> tuple[list[str], ...]:
    """Read the JSONL records of ``path`` as ``(ids, *field columns)`` in file order.

    ``what`` names one record in messages (``"document"``), ``kind`` the file (``"corpus"``);
    ids are checked (:func:`_check_id`) and unique, string fields default to ``""``; an empty
    file is an error.  A record whose field ``need`` is empty or blank is dropped with one
    :class:`DataWarning` for the file (``strict``: a ``ValueError`` naming file and line).
    """
    ids: list[str] = []
    cols: tuple[list[str], ...] = tuple([] for _ in fields)
    seen: set[str] = set()
    dropped: list[str] = []
    for lineno, obj in _iter_jsonl(path):
        rid = _check_id(obj["_id"], "_id", path, lineno)
        if rid in seen:
            raise ValueError(f"{path}:{lineno}: duplicate {what} id {rid!r}")
        seen.add(rid)
        vals = [_str_field(obj, key, path, lineno) for key in fields]
        if need is not None and not vals[fields.index(need)].strip():
            if strict:
                raise ValueError(f"{path}:{lineno}: {what} {rid!r} has no {need}")
            dropped.append(f"line {lineno}, {what} {rid!r}")
            continue
        ids.append(rid)
        for col, v in zip(cols, vals):
            col.append(v)
    if dropped:
        _warn_dropped(path, len(dropped), f"{what} record(s) without {need}", dropped[0])
    if not ids:
        raise ValueError(f"{path}: no {what} (empty {kind} file)")
    return (ids, *cols)


def read_corpus(path: str) -> tuple[list[str], list[str], list[str]]:
    """Read a BEIR ``corpus.jsonl(.gz)`` -> ``(doc_ids, titles, texts)`` in file order.

    A missing ``title``/``text`` is the empty string.

    Raises
    ------
    ValueError
        Naming ``file:line``: a bad JSON line, a missing or invalid ``_id``, a duplicate id, a
        non-string field; or an empty file.
    """
    return _read_records(path, "document", "corpus", ("title", "text"))


def read_queries(path: str, strict: bool = False) -> tuple[list[str], list[str]]:
    """Read a BEIR ``queries.jsonl(.gz)`` -> ``(query_ids, texts)`` in file order.

    A query whose ``text`` is missing, empty or blank is dropped, with one :class:`DataWarning`
    giving the count (it could only retrieve nothing or fail later).

    Parameters
    ----------
    path : str
        The ``.jsonl`` (or ``.jsonl.gz``) file.
    strict : bool
        Raise ``ValueError`` naming file and line for a query without text instead.

    Raises
    ------
    ValueError
        As :func:`read_corpus`; with ``strict``, a query without text.
    """
    return _read_records(path, "query", "queries", ("text",), need="text", strict=strict)


_TSV_HEADER_IDS = ("id", "_id", "qid", "query-id", "query_id")


def read_query_file(path: str, strict: bool = False) -> tuple[list[str], list[str]]:
    """Read ad-hoc queries -> ``(query_ids, texts)`` in file order: JSONL or TSV, told apart by the first line.

    JSONL (the first non-blank line starts with ``{``): one ``{"_id": ..., "text": ...}`` per line,
    read as :func:`read_queries` reads ``queries.jsonl``.  TSV: ``id<TAB>text`` per line (the text
    is everything after the first tab); a first line ``id<TAB>text`` (or ``_id`` / ``qid`` /
    ``query-id`` / ``query_id`` and ``text`` / ``query``) is a header and skipped.  Blank lines
    are skipped; ``.gz`` files are read gunzipped.  Ids are checked as corpus ids are (non-empty,
    no whitespace) and unique; a query with a blank text is dropped with one :class:`DataWarning`
    (``strict``: an error).

    Raises
    ------
    ValueError
        Naming ``file:line``: a TSV line without a tab, a bad or duplicate id, a bad JSON line;
        or a file without any query.
    FileNotFoundError
        No such file.
    """
    with _open_bytes(path) as fh:
        first = next((line for _, line in _lines(fh, path) if line.strip()), None)
    if first is None:
        raise ValueError(f"{path}: no query (empty file)")
    if first.lstrip().startswith("{"):
        return read_queries(path, strict=strict)
    ids: list[str] = []
    texts: list[str] = []
    seen: set[str] = set()
    dropped: list[str] = []
    header = True
    with _open_bytes(path) as fh:
        for lineno, line in _lines(fh, path):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            if "\t" not in line:
                raise ValueError(f"{path}:{lineno}: expected 'id<TAB>text' (no tab on the line)")
            qid, text = line.split("\t", 1)
            if header:
                header = False
                if qid.strip().lower() in _TSV_HEADER_IDS and text.strip().lower() in ("text", "query"):
                    continue
            qid = _check_id(qid, "query id", path, lineno)
            if qid in seen:
                raise ValueError(f"{path}:{lineno}: duplicate query id {qid!r}")
            seen.add(qid)
            if not text.strip():
                if strict:
                    raise ValueError(f"{path}:{lineno}: query {qid!r} has no text")
                dropped.append(f"line {lineno}, query {qid!r}")
                continue
            ids.append(qid)
            texts.append(text)
    if dropped:
        _warn_dropped(path, len(dropped), "query record(s) without text", dropped[0])
    if not ids:
        raise ValueError(f"{path}: no query (empty queries file)")
    return ids, texts


def read_qrels_beir(path: str, known_docs=None, strict: bool = False) -> dict[str, dict[str, int]]:
    """Read BEIR qrels ``query-id<TAB>corpus-id<TAB>score`` (first line = header, skipped).

    Parameters
    ----------
    path : str
        The ``.tsv`` file.
    known_docs : container of str, optional
        The corpus ids.  A judgement on a doc id not in it is dropped (as BEIR tooling
        ignores it), with one :class:`DataWarning` for the file giving the count; a query
        left without judgements is dropped too.
    strict : bool
        Raise ``ValueError`` naming the line for a judgement on an unknown doc id instead.

    Returns
    -------
    dict[str, dict[str, int]]
        ``qrels[qid][docid] = label``; label-0 lines are kept.

    Raises
    ------
    ValueError
        Naming ``path:line`` for a line without exactly 3 tab-separated fields, a
        non-integer label, a repeated judgement, or (``strict``) an unknown doc id.
    """
    qrels: dict[str, dict[str, int]] = {}
    dropped: list[str] = []
    dropped_q: set[str] = set()
    dropped_docs: set[str] = set()
    with _open_bytes(path) as fh:
        for lineno, line in _lines(fh, path):
            line = line.rstrip("\r\n")
            if lineno == 1 and not _is_judgement(line):
                continue  # the header (a file without one lost its first judgement)
            if not line.strip():
                continue
            qid, did, label = _judgement(line, path, lineno)
            if known_docs is not None and did not in known_docs:
                if strict:
                    raise ValueError(f"{path}:{lineno}: unknown document id {did!r} (not in the corpus)")
                dropped.append(f"line {lineno}, document {did!r}")
                dropped_q.add(qid)
                dropped_docs.add(did)
                continue
            q = qrels.setdefault(qid, {})
            if did in q:  # the last label won silently
                raise ValueError(f"{path}:{lineno}: duplicate judgement for query {qid!r} and document {did!r}")
            q[did] = label
    if dropped:
        gone = sorted(q for q in dropped_q if q not in qrels)
        what = f"judgement(s) on {len(dropped_docs)} document id(s) not in the corpus"
        if gone:
            shown = ", ".join(repr(q) for q in gone[:3]) + (", ..." if len(gone) > 3 else "")
            what += f"; {len(gone)} judged query(ies) lost every judgement and leave the evaluation ({shown})"
        _warn_dropped(path, len(dropped), what, dropped[0])
    return qrels


def _judgement(line: str, path: str, lineno: int) -> tuple[str, str, int]:
    """Parse one qrels line ``qid<TAB>docid<TAB>label`` (``ValueError`` naming ``path:lineno``)."""
    parts = line.split("\t")
    if len(parts) != 3:
        raise ValueError(f"{path}:{lineno}: expected 3 tab-separated fields, got {len(parts)}")
    qid, did, lab = (p.strip() for p in parts)
    if not qid or not did:
        raise ValueError(f"{path}:{lineno}: empty {'query' if not qid else 'document'} id")
    try:
        label = int(lab)
    except ValueError:
        raise ValueError(f"{path}:{lineno}: label {lab!r} is not an integer") from None
    return qid, did, label


def _is_judgement(line: str) -> bool:
    """Tell whether a qrels line parses as ``qid<TAB>docid<TAB>integer`` (else it is a header)."""
    parts = line.split("\t")
    if len(parts) != 3:
        return False
    try:
        int(parts[2].strip())
    except ValueError:
        return False
    return True


def _sorted_qids(qids) -> list[str]:
    """Sort query ids numerically when every id is decimal, as strings otherwise (SPEC A.2.2)."""
    qids = list(qids)
    if all(q.isdecimal() for q in qids):
        return sorted(qids, key=int)
    return sorted(qids)


class StaleEmbeddings(ValueError):
    """Saved embeddings made from other texts than the dataset's (edited, added or removed since)."""


_UNCHECKED_WARNED: set = set()


def _is_bundled(d: str) -> bool:
    """Whether ``d`` lies in the package's own data (its SciFact vectors, made from its own corpus)."""
    return os.path.abspath(d).startswith(os.path.abspath(os.path.dirname(__file__)) + os.sep)


def _first_difference(d: str, stem: str, idname: str, ids: list, now) -> tuple[str, int]:
    """``(first text that differs, in words; how many differ)`` between a folder's record and the dataset."""
    try:
        with open(os.path.join(d, idname), encoding="utf-8") as fh:
            saved_ids = [ln.rstrip("\n") for ln in fh]
        saved = load_array(os.path.join(d, f"{stem}_digests.npy"), kinds="u", ndim=1).tolist()
    except (OSError, ValueError):
        return f"texts differ (its record {stem}_digests.npy / {idname} does not read)", len(ids)
    old = dict(zip(saved_ids, saved))
    first, n = None, 0
    for i, g in zip(ids, now.tolist()):
        if i not in old or old[i] != g:
            n += 1
            if first is None:
                first = f"{i!r} {'added' if i not in old else 'edited'}"
    gone = set(saved_ids).difference(ids)
    n += len(gone)
    if first is None and gone:
        first = f"{next(i for i in saved_ids if i in gone)!r} removed"
    if first is None:  # same ids and texts in another order
        first, n = "order changed (the same ids in another order)", len(ids)
    return first, n


@dataclass
class BeirDataset:
    """An in-memory BEIR dataset (see the module docstring for the data model)."""

    path: str
    name: str
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    strict: bool = False  # qrels on unknown documents: an error instead of one DataWarning (see read_qrels_beir)
    _qrels: dict = field(default_factory=dict, repr=False)
    _doc_pos: dict | None = field(default=None, repr=False)
    _warned_textless: set = field(default_factory=set, repr=False)
    _digests: tuple | None = field(default=None, repr=False)
    _fresh: dict = field(default_factory=dict, repr=False)

    @property
    def n_docs(self) -> int:
        """Number of corpus documents."""
        return len(self.doc_ids)

    @property
    def queries(self) -> dict[str, str]:
        """``dict`` query id -> text."""
        return dict(zip(self.query_ids, self.query_texts))

    @property
    def doc_index(self) -> dict[str, int]:
        """``dict`` doc id -> row position (file order)."""
        if self._doc_pos is None:
            self._doc_pos = {d: i for i, d in enumerate(self.doc_ids)}
        return self._doc_pos

    def splits(self) -> list[str]:
        """Names of the qrels files present (``test``, ``train``, ...)."""
        qdir = os.path.join(self.path, "qrels")
        if not os.path.isdir(qdir):
            return []
        return sorted(f[:-4] for f in os.listdir(qdir) if f.endswith(".tsv"))

    def qrels(self, split: str = "test") -> dict[str, dict[str, int]]:
        """Relevance judgements of a split (cached).

        Judgements on documents absent from the corpus are dropped with one :class:`DataWarning`
        (``strict``: ``ValueError``), see :func:`read_qrels_beir`.
        """
        if split not in self._qrels:
            p = os.path.join(self.path, "qrels", f"{split}.tsv")
            if not os.path.isdir(os.path.dirname(p)):
                raise ValueError(f"split {split!r}: {self.path} has no qrels/ folder (BEIR layout: qrels/{split}.tsv)")
            if not os.path.isfile(p):
                raise ValueError(f"split {split!r} not found in {self.path}; available: {self.splits()}")
            self._qrels[split] = read_qrels_beir(p, known_docs=self.doc_index, strict=self.strict)
        return self._qrels[split]

    def split_query_ids(self, split: str = "test") -> list[str]:
        """Query ids of ``split`` present in ``queries.jsonl`` (numeric sort if all decimal).

        A judged query without text (absent from ``queries.jsonl``, or dropped there for having
        none) is left out with one :class:`DataWarning` per split, naming the count and the first
        ones (``strict``: ``ValueError``).
        """
        known = set(self.query_ids)
        qrels = self.qrels(split)
        missing = [q for q in qrels if q not in known]
        if missing and split not in self._warned_textless:
            self._warned_textless.add(split)
            shown = ", ".join(repr(q) for q in _sorted_qids(missing)[:3]) + (", ..." if len(missing) > 3 else "")
            path = os.path.join(self.path, "qrels", f"{split}.tsv")
            msg = f"{path}: {len(missing)} judged query(ies) have no query text and are not evaluated ({shown})"
            if self.strict:
                raise ValueError(msg)
            warnings.warn(msg + "; strict=True / --strict makes this an error", DataWarning, stacklevel=2)
        return _sorted_qids(q for q in qrels if q in known)

    def doc_texts(self, sep: str = ". ") -> list[str]:
        """``(title + sep + text).strip()`` for every document (SPEC A.2.2)."""
        return [(t + sep + x).strip() for t, x in zip(self.titles, self.texts)]

    def text_digests(self) -> tuple:
        """Return ``(docs, queries)``: the uint64 digests of the texts embedded (cached).

        Every document's ``title + " " + text`` and every query's text, in file order (see
        :mod:`jkofast._digest`).
        """
        if self._digests is None:
            self._digests = (text_digests(self.doc_texts(" ")), text_digests(self.query_texts))
        return self._digests

    def check_embeddings_fresh(self, name: str = "minilm-l6-v2") -> None:
        """Check that ``embeddings/<name>`` was made from the texts of this corpus and these queries.

        The folder's recorded digests (``meta.json``: ``corpus_sha256``, ``queries_sha256``; per row:
        ``docs_digests.npy``, ``queries_digests.npy``) are compared with the dataset's texts.  A folder
        that records none (made by an older jkofast, or by hand) cannot be checked: one
        :class:`DataWarning` says so.

        Raises
        ------
        StaleEmbeddings
            A document or query was edited, added or removed since the vectors were made (the
            message names the folder, the first such text and the command that updates it).
        """
        d = os.path.join(self.path, "embeddings", name)
        try:
            with open(os.path.join(d, "meta.json"), encoding="utf-8") as fh:
                meta = json.load(fh)
        except (OSError, ValueError):
            meta = None
        if not isinstance(meta, dict) or "corpus_sha256" not in meta:
            if (self.path, name) not in _UNCHECKED_WARNED and not _is_bundled(d):
                _UNCHECKED_WARNED.add((self.path, name))
                warnings.warn(
                    f"{d} records no text digests (made by an older jkofast or by hand): whether its vectors "
                    f"match the corpus cannot be checked; jkofast embed --dataset {self.path} encodes it again "
                    "and records them",
                    DataWarning,
                    stacklevel=3,
                )
            return
        fix = f"jkofast embed --dataset {self.path}" + ("" if name == "minilm-l6-v2" else f" --name {name} --model M")
        for part, stem, idname, ids, key, what in (
            (0, "docs", "docs_ids.txt", self.doc_ids, "corpus_sha256", "document"),
            (1, "queries", "query_ids.txt", self.query_ids, "queries_sha256", "query"),
        ):
            if key not in self._fresh:  # once per dataset object: the texts do not change
                self._fresh[key] = corpus_sha256(ids, self.doc_texts(" ") if part == 0 else self.query_texts)
            if self._fresh[key] == meta.get(key):
                continue
            first, n = _first_difference(d, stem, idname, ids, self.text_digests()[part])
            raise StaleEmbeddings(
                f"{d} is stale: {what} {first} since its vectors were made ({n} {what}(s) differ); "
                f"update it with: {fix}" + (f" (M: the {meta.get('model')} weights)" if " --model M" in fix else "")
            )

    def embeddings(self, name: str = "minilm-l6-v2"):
        """Load the saved embeddings ``embeddings/<name>``.

        Row counts and id lists are checked against the corpus and queries first (from the
        ``.npy`` headers, before the arrays are read), so a stale folder fails before any work.

        Returns
        -------
        tuple of ndarray or None
            ``(doc_emb float32 (N, d), query_emb float32 (n_queries, d))``, rows in file order;
            ``None`` when the folder is absent.

        Raises
        ------
        StaleEmbeddings
            The folder was made from other texts (see :meth:`check_embeddings_fresh`).
        FileNotFoundError
            The folder exists without ``docs.npy`` or ``queries.npy``.
        ValueError
            Not 2-D, a non-finite row, different dimensions, a row count other than the corpus's /
            queries', or a saved id list that differs from the dataset's file order (naming the
            first differing line).
        """
        d = os.path.join(self.path, "embeddings", name)
        if not os.path.isdir(d):
            return None
        self.check_embeddings_fresh(name)

        def check_saved_ids(path: str, ids: list[str]) -> None:
            """Check a saved id list (one id a line; optional file) against the dataset's ids in file order."""
            if not os.path.isfile(path):
                return
            with open(path, encoding="utf-8") as fh:
                saved = [ln.strip() for ln in fh if ln.strip()]
            if saved == ids:
                return
            for i, (a, b) in enumerate(zip(saved, ids)):
                if a != b:
                    raise ValueError(
                        f"{path}:{i + 1}: id {a!r} where the dataset has {b!r} (ids do not match its file order)"
                    )
            raise ValueError(f"{path}: {len(saved)} ids for {len(ids)} in the dataset (ids do not match)")

        arrays = {}
        for fname, idname, ids, what in (
            ("docs.npy", "docs_ids.txt", self.doc_ids, "corpus documents"),
            ("queries.npy", "query_ids.txt", self.query_ids, "queries"),
        ):
            p = os.path.join(d, fname)
            if not os.path.isfile(p):
                raise FileNotFoundError(f"{p} not found (make the folder with: jkofast embed --dataset {self.path})")
            head = load_array(p, mmap=True)  # header only: shapes are checked before the data is read
            if head.ndim != 2:
                raise ValueError(f"{p}: expected a 2-D (rows, dim) array, got shape {head.shape}")
            if head.shape[0] != len(ids):
                raise ValueError(
                    f"{p}: {head.shape[0]} rows for {len(ids)} {what} (stale embeddings? "
                    f"jkofast embed --dataset {self.path})"
                )
            check_saved_ids(os.path.join(d, idname), ids)
            arrays[fname] = p
        doc = load_array(arrays["docs.npy"]).astype(np.float32)
        qry = load_array(arrays["queries.npy"]).astype(np.float32)
        for fname, emb in (("docs.npy", doc), ("queries.npy", qry)):
            bad = ~np.isfinite(emb).all(axis=1)
            if bad.any():  # flowed into NaN dense scores and pools
                raise ValueError(
                    f"{os.path.join(d, fname)}: row {int(np.argmax(bad))} holds NaN or inf "
                    f"({int(bad.sum())} rows in all)"
                )
        if doc.shape[1] != qry.shape[1]:
            raise ValueError(f"{d}: docs.npy has dimension {doc.shape[1]}, queries.npy {qry.shape[1]}")
        return doc, qry


def load_dataset(name_or_path: str, strict: bool = False) -> BeirDataset:
    """Load a BEIR dataset: ``"scifact"`` (bundled) or a folder path.

    Parameters
    ----------
    name_or_path : str
        A bundled name or a folder holding ``corpus.jsonl(.gz)``, ``queries.jsonl(.gz)``
        and ``qrels/``.
    strict : bool
        Queries without text and qrels judgements on documents absent from the corpus raise
        ``ValueError`` (naming file and line) instead of being dropped with one
        :class:`DataWarning` per file.

    Returns
    -------
    BeirDataset

    Raises
    ------
    FileNotFoundError
        When the folder or a required file is missing.
    ValueError
        For malformed files (message names ``file:line``).
    TypeError
        ``strict`` not a bool.

    Examples
    --------
    >>> ds = load_dataset("scifact")
    >>> len(ds.doc_ids), len(ds.split_query_ids("test"))
    (5183, 300)
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"name_or_path must be a str or path, got {type(name_or_path).__name__}")
    name_or_path = os.fspath(name_or_path)
    strict = check_bool(strict, "strict")
    if name_or_path in BUNDLED and not os.path.isdir(name_or_path):
        path, name = bundled_path(name_or_path), name_or_path
    else:
        path = name_or_path
        name = os.path.basename(os.path.normpath(path))
        if not os.path.isdir(path):
            raise FileNotFoundError(f"dataset folder {path!r} not found (bundled: {', '.join(BUNDLED)})")
    doc_ids, titles, texts = read_corpus(_find(path, "corpus.jsonl"))
    query_ids, query_texts = read_queries(_find(path, "queries.jsonl"), strict=strict)
    return BeirDataset(
        path=path,
        name=name,
        doc_ids=doc_ids,
        titles=titles,
        texts=texts,
        query_ids=query_ids,
        query_texts=query_texts,
        strict=strict,
    )
