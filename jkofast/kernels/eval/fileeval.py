"""Metrics straight from parsed run and qrels bytes: no Python string, dict or id array per line.

Inputs are the row arrays of :func:`jkofast.kernels.eval.parse.parse_table_chunks`: ids are
``(start, length)`` byte ranges of the file buffers (``rbuf`` for the run, ``qbuf`` for the
qrels), scores float64, labels int64.

* ``match_queries`` groups the qrels rows by query id (groups numbered in order of first
  appearance, the insertion order of a ``{qid: {docid: label}}`` dict) and finds the group of
  every run query block, with one open-addressing hash table over the id bytes (equal hashes
  are confirmed byte by byte, so a collision never merges two ids).
* ``evaluate_rows`` evaluates one run query block against its qrels group per ``prange``
  iteration: a per-query hash table resolves repeated qrels documents (the last label wins),
  a second one repeated run documents (``tie_mode`` ``TIE_TREC_EVAL``: the last score wins)
  and looks up each ranked document's label; the ranking is trec_eval's (float32 score
  descending, then document id descending in byte (``strcmp``) order), checked in one pass
  over the block and sorted only when the file is not already in that order.  ``TIE_GIVEN``
  keeps the file order and every line.  The metrics are ``query_metrics`` of
  :mod:`jkofast.kernels.eval.metrics`, the kernel behind :func:`jkofast.eval.metrics.evaluate`.

All arithmetic of a query is serial inside its iteration: results do not depend on the thread
count.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from jkofast._numba import kernel
from jkofast.kernels.eval.metrics import TIE_TREC_EVAL, query_metrics
from jkofast.kernels.sorting import argsort_stable, sort_range

__all__ = ["evaluate_rows", "match_queries"]

_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)


@kernel(inline="always")
def _hash(buf, s, n):
    """Hash (uint64) of the bytes ``buf[s:s + n]``: rotate-by-7 xor (packs up to 9 ASCII bytes exactly), then mixed.

    The mix is MurmurHash3's 64-bit finaliser, so that the low bits index a table well.
    """
    h = np.uint64(0)
    for i in range(s, s + n):
        h = ((h << np.uint64(7)) | (h >> np.uint64(57))) ^ np.uint64(buf[i])
    h ^= h >> np.uint64(33)
    h *= _MIX1
    h ^= h >> np.uint64(33)
    h *= _MIX2
    h ^= h >> np.uint64(33)
    return h


@kernel(inline="always")
def _same(a, sa, na, b, sb, nb):
    """Whether ``a[sa:sa + na]`` and ``b[sb:sb + nb]`` hold the same bytes."""
    if na != nb:
        return False
    for t in range(na):
        if a[sa + t] != b[sb + t]:
            return False
    return True


@kernel(inline="always")
def _cmp(buf, sa, na, sb, nb):
    """-1 / 0 / 1 comparing ``buf[sa:sa + na]`` with ``buf[sb:sb + nb]`` as C ``strcmp`` does (unsigned bytes)."""
    for t in range(min(na, nb)):
        x = buf[sa + t]
        y = buf[sb + t]
        if x != y:
            return -1 if x < y else 1
    if na == nb:
        return 0
    return -1 if na < nb else 1


@kernel(inline="always")
def _table_size(n):
    """Return the open-addressing table size for ``n`` keys: a power of two >= 2 n (at least 8)."""
    size = 8
    while size < 2 * n:
        size *= 2
    return size


@kernel()
def match_queries(qbuf, qq_start, qq_len, rbuf, rh_start, rh_len, qrels_group, run_group):
    """Group the qrels rows by query id and find the group of each run query block.

    ``qq_start`` / ``qq_len`` (int64): query id of each qrels row in ``qbuf``; ``rh_start`` /
    ``rh_len``: query id of each run block in ``rbuf``.  Writes ``qrels_group[r]`` (groups
    0, 1, ... in order of first appearance) and ``run_group[j]`` (-1: no qrels for that
    query).  Returns ``(n_groups, repeated)``: ``repeated`` is True when two run blocks
    have the same query id (the run's lines of a query are not contiguous).
    """
    nq = qq_start.shape[0]
    nr = rh_start.shape[0]
    size = _table_size(nq + nr)
    mask = np.uint64(size - 1)
    kind = np.zeros(size, np.int8)  # 0 empty, 1 key in qbuf (qrels row), 2 key in rbuf (run block)
    key = np.empty(size, np.int64)
    hsh = np.empty(size, np.uint64)
    grp = np.full(size, -1, np.int64)
    blk = np.full(size, -1, np.int64)
    n_groups = 0
    for r in range(nq):
        h = _hash(qbuf, qq_start[r], qq_len[r])
        i = h & mask
        while True:
            if kind[i] == 0:
                kind[i] = 1
                key[i] = r
                hsh[i] = h
                grp[i] = n_groups
                qrels_group[r] = n_groups
                n_groups += 1
                break
            u = key[i]
            if hsh[i] == h and _same(qbuf, qq_start[u], qq_len[u], qbuf, qq_start[r], qq_len[r]):
                qrels_group[r] = grp[i]
                break
            i = (i + np.uint64(1)) & mask
    repeated = False
    for j in range(nr):
        h = _hash(rbuf, rh_start[j], rh_len[j])
        i = h & mask
        while True:
            if kind[i] == 0:
                kind[i] = 2
                key[i] = j
                hsh[i] = h
                blk[i] = j
                run_group[j] = -1
                break
            u = key[i]
            if hsh[i] == h:
                if kind[i] == 1:
                    same = _same(qbuf, qq_start[u], qq_len[u], rbuf, rh_start[j], rh_len[j])
                else:
                    same = _same(rbuf, rh_start[u], rh_len[u], rbuf, rh_start[j], rh_len[j])
                if same:
                    if blk[i] >= 0:
                        repeated = True
                    blk[i] = j
                    run_group[j] = grp[i]
                    break
            i = (i + np.uint64(1)) & mask
    return n_groups, repeated


@kernel()
def _qrels_table(qbuf, qd_start, qd_len, qrows, m, qh, qslot, qkeep):
    """Hash table of the qrels documents of rows ``qrows`` (a repeated document keeps its last row).

    Writes the hashes ``qh``, the slots ``qslot`` (local index or -1) and ``qkeep`` (False for
    a row superseded by a later one).
    """
    mask = np.uint64(qslot.shape[0] - 1)
    for t in range(m):
        r = qrows[t]
        h = _hash(qbuf, qd_start[r], qd_len[r])
        qh[t] = h
        i = h & mask
        while qslot[i] >= 0:
            u = qslot[i]
            v = qrows[u]
            if qh[u] == h and _same(qbuf, qd_start[v], qd_len[v], qbuf, qd_start[r], qd_len[r]):
                qkeep[u] = False
                break
            i = (i + np.uint64(1)) & mask
        qslot[i] = t


@kernel(inline="always")
def _label_of(rbuf, s, n, h, qbuf, qd_start, qd_len, qlabels, qrows, qh, qslot):
    """Label of the run document ``rbuf[s:s + n]`` (hash ``h``) in the query's qrels table (0 when absent)."""
    mask = np.uint64(qslot.shape[0] - 1)
    i = h & mask
    while qslot[i] >= 0:
        u = qslot[i]
        v = qrows[u]
        if qh[u] == h and _same(qbuf, qd_start[v], qd_len[v], rbuf, s, n):
            return qlabels[v]
        i = (i + np.uint64(1)) & mask
    return 0


@kernel()
def _run_table(rbuf, d_start, d_len, a, n, rh, slot, keep):
    """Hash table of the run documents of rows ``a .. a + n`` (hashes ``rh``); a repeated document keeps its last row.

    Writes ``slot`` (local row index or -1) and ``keep[j] = False`` for a row whose document
    repeats later; returns the kept count.
    """
    mask = np.uint64(slot.shape[0] - 1)
    n_keep = n
    for j in range(n):
        h = rh[j]
        i = h & mask
        while slot[i] >= 0:
            u = slot[i]
            if rh[u] == h and _same(rbuf, d_start[a + u], d_len[a + u], rbuf, d_start[a + j], d_len[a + j]):
                keep[u] = False
                n_keep -= 1
                break
            i = (i + np.uint64(1)) & mask
        slot[i] = j
    return n_keep


@kernel(inline="always")
def _find_run(rbuf, d_start, d_len, a, rh, slot, qbuf, s, n, h):
    """Local index of the run row holding the document ``qbuf[s:s + n]`` (hash ``h``) in the run table, or -1."""
    mask = np.uint64(slot.shape[0] - 1)
    i = h & mask
    while slot[i] >= 0:
        u = slot[i]
        if rh[u] == h and _same(rbuf, d_start[a + u], d_len[a + u], qbuf, s, n):
            return u
        i = (i + np.uint64(1)) & mask
    return -1


@kernel(inline="always")
def _after(rbuf, d_start, d_len, scores, x, y):
    """Whether row ``y`` must be ranked before row ``x`` (float32 score desc, then document id desc)."""
    sx = np.float32(scores[x])
    sy = np.float32(scores[y])
    if sx != sy:
        return sy > sx
    return _cmp(rbuf, d_start[y], d_len[y], d_start[x], d_len[x]) > 0


@kernel()
def _trec_order(rbuf, d_start, d_len, scores, rows):
    """Put the (unique-id) global rows ``rows`` in trec_eval order in place.

    One pass checks the order; a file in (or near) that order — the usual case, where only
    tied scores may be out of order — is finished by insertion sort, bounded by 4 moves
    per row; beyond that the rows are sorted by score (``argsort``) and the tie groups by id.
    """
    n = rows.shape[0]
    j0 = n
    for j in range(1, n):
        if _after(rbuf, d_start, d_len, scores, rows[j - 1], rows[j]):
            j0 = j
            break
    if j0 == n:
        return
    budget = 4 * n
    tmp = rows.copy()
    for j in range(j0, n):
        x = rows[j]
        t = j
        while t > 0 and _after(rbuf, d_start, d_len, scores, rows[t - 1], x):
            rows[t] = rows[t - 1]
            t -= 1
            budget -= 1
        rows[t] = x
        if budget < 0:
            break
    if budget >= 0:
        return
    keys = np.empty(n, np.float64)  # the float32 scores exactly: the same order and ties
    for j in range(n):
        keys[j] = -np.float64(np.float32(scores[tmp[j]]))
    o = argsort_stable(keys)
    for j in range(n):
        rows[j] = tmp[o[j]]
    # equal scores: insertion sort by id descending (ids are unique, so the order is unique)
    for j in range(1, n):
        x = rows[j]
        t = j
        while t > 0 and _after(rbuf, d_start, d_len, scores, rows[t - 1], x):
            rows[t] = rows[t - 1]
            t -= 1
        rows[t] = x


@kernel()
def _ideal(qlabels, qrows, qkeep):
    """``(ideal, num_rel)``: the kept qrels labels sorted descending, and how many are > 0."""
    m = qkeep.shape[0]
    n_ideal = 0
    for t in range(m):
        if qkeep[t]:
            n_ideal += 1
    ideal = np.empty(n_ideal, np.int64)
    num_rel = 0
    k = 0
    for t in range(m):
        if qkeep[t]:
            lab = qlabels[qrows[t]]
            ideal[k] = -lab
            k += 1
            if lab > 0:
                num_rel += 1
    sort_range(ideal, np.int64(0), np.int64(n_ideal))
    for t in range(n_ideal):
        ideal[t] = -ideal[t]
    return ideal, num_rel


@kernel()
def _evaluate_one(rbuf, d_pos, scores, a, b, qbuf, qd_pos, qlabels, qrows, kinds, ks, gain_mode, trec, out):
    """Metrics of run rows ``a .. b`` against the qrels rows ``qrows`` into ``out``; return the ranked count.

    ``d_pos`` / ``qd_pos`` (2, n): start and length of each row's document id.  ``trec``:
    repeated run documents keep their last row, the ranking is trec_eval's and each judged
    document is looked up in the run's table (one probe per qrels row); otherwise the file
    order, every line, each run row looked up in the qrels table.
    """
    d_start = d_pos[0]
    d_len = d_pos[1]
    qd_start = qd_pos[0]
    qd_len = qd_pos[1]
    m = qrows.shape[0]
    qh = np.empty(m, np.uint64)
    qslot = np.full(_table_size(m), -1, np.int64)
    qkeep = np.ones(m, np.bool_)
    _qrels_table(qbuf, qd_start, qd_len, qrows, m, qh, qslot, qkeep)
    ideal, num_rel = _ideal(qlabels, qrows, qkeep)
    n = b - a
    rh = np.empty(n, np.uint64)
    for j in range(n):
        rh[j] = _hash(rbuf, d_start[a + j], d_len[a + j])
    if not trec:
        labels = np.empty(n, np.int64)
        for j in range(n):
            r = a + j
            labels[j] = _label_of(rbuf, d_start[r], d_len[r], rh[j], qbuf, qd_start, qd_len, qlabels, qrows, qh, qslot)
        query_metrics(labels, ideal, num_rel, kinds, ks, gain_mode, trec, out)
        return n
    slot = np.full(_table_size(n), -1, np.int64)
    keep = np.ones(n, np.bool_)
    n_keep = _run_table(rbuf, d_start, d_len, a, n, rh, slot, keep)
    lab = np.zeros(n, np.int64)
    for t in range(m):
        if qkeep[t]:
            v = qrows[t]
            u = _find_run(rbuf, d_start, d_len, a, rh, slot, qbuf, qd_start[v], qd_len[v], qh[t])
            if u >= 0:
                lab[u] = qlabels[v]
    rows = np.empty(n_keep, np.int64)
    k = 0
    for j in range(n):
        if keep[j]:
            rows[k] = a + j
            k += 1
    _trec_order(rbuf, d_start, d_len, scores, rows)
    labels = np.empty(n_keep, np.int64)
    for j in range(n_keep):
        labels[j] = lab[rows[j] - a]
    query_metrics(labels, ideal, num_rel, kinds, ks, gain_mode, trec, out)
    return n_keep


@kernel(parallel=True)
def evaluate_rows(
    rbuf,
    d_pos,
    scores,
    queries,
    qbuf,
    qd_pos,
    qlabels,
    qperm,
    qoff,
    metric_kinds,
    metric_ks,
    gain_mode,
    tie_mode,
    out,
    n_ret,
):
    """Metrics of every evaluated query (``prange``; iteration ``q`` writes ``out[q]`` and ``n_ret[q]`` only).

    Query ``q`` is run rows ``queries[0, q] .. queries[1, q]`` (document ids
    ``rbuf[d_pos[0]:d_pos[0] + d_pos[1]]``, float64 ``scores``, compared at float32 as trec_eval
    stores them) against qrels group ``g = queries[2, q]``: rows ``qperm[qoff[g]:qoff[g + 1]]``
    (document ids at ``qd_pos`` in ``qbuf``, int64 ``qlabels``).  Metric kinds, cutoffs, gains
    and tie modes as in :mod:`jkofast.kernels.eval.metrics`.  Returns 0 (OK).
    """
    trec = tie_mode == TIE_TREC_EVAL
    for q in prange(queries.shape[1]):
        g = queries[2, q]
        qrows = qperm[qoff[g] : qoff[g + 1]]
        n_ret[q] = _evaluate_one(
            rbuf, d_pos, scores, queries[0, q], queries[1, q], qbuf, qd_pos, qlabels, qrows,
            metric_kinds, metric_ks, gain_mode, trec, out[q],
        )  # fmt: skip
    return 0
