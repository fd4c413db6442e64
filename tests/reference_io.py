"""Naive readers of the text formats jkofast reads, written from the format descriptions alone.

The fuzz suite (tests/fuzz) compares jkofast's readers with these on random and mutated files:
a file is either rejected (``None`` here, a named ``ValueError`` there) or read to the same content.
"""

from __future__ import annotations

import gzip
import math


def _text_lines(path):
    raw = open(path, "rb").read()
    if str(path).endswith(".gz"):
        raw = gzip.decompress(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # text mode: \r\n, \r and \n end a line
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _rows(path):
    lines = _text_lines(path)
    if lines is None:
        return None
    out = []
    for line in lines:
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        fields = [x.strip() for x in (s.split("\t") if "\t" in s else s.split())]
        out.append(fields)
    return out


def _float(s):
    try:
        return float(s)
    except ValueError:
        return None


def _int(s):
    try:
        return int(s)
    except ValueError:
        return None


def read_run(path):
    """``{qid: {docid: score}}`` of a 6- or 3-column run, or ``None`` when the file must be rejected."""
    rows = _rows(path)
    if rows is None:
        return None
    out: dict = {}
    ncol = None
    for f in rows:
        if ncol is None:
            ncol = len(f)
            if ncol not in (3, 6):
                return None
            if ncol == 3 and _float(f[2]) is None:
                continue  # a header
        if len(f) != ncol:
            return None
        if ncol == 6:
            if _int(f[3]) is None:
                return None
            qid, docid, score = f[0], f[2], f[4]
        else:
            qid, docid, score = f
        s = _float(score)
        if s is None or math.isnan(s) or not qid or not docid or "\0" in qid + docid:
            return None
        out.setdefault(qid, {})[docid] = s
    return out


def read_qrels(path):
    """``{qid: {docid: label}}`` of 4- or 3-column qrels, or ``None`` when the file must be rejected."""
    rows = _rows(path)
    if rows is None:
        return None
    out: dict = {}
    ncol = None
    for f in rows:
        if ncol is None:
            ncol = len(f)
            if ncol not in (3, 4):
                return None
            if ncol == 3 and _int(f[2]) is None:
                continue
        if len(f) != ncol:
            return None
        qid, docid, rel = (f[0], f[2], f[3]) if ncol == 4 else f
        r = _int(rel)
        if r is None or not qid or not docid or "\0" in qid + docid:
            return None
        out.setdefault(qid, {})[docid] = r
    return out
