"""The query path of SparseGeometricRetriever: derived tables, kernel parameters, scratch and the kernel call.

:class:`QueryPath` is a plain object that a :class:`jkofast.sgr.retriever.SparseGeometricRetriever`
owns (``retriever._query``), made when the retriever adopts an index (fit, load, ``from_parts``).
It holds what lies between an analysed query batch (CSR TF-IDF rows) and the kernels of
:mod:`jkofast.kernels.sgr.query`: the tables derived from the index (semantic neighbour lists,
frequent-term bitsets, per-slot code values), the capped
:class:`~jkofast.kernels.sgr.query.SGRParams`, the per-chunk scratch reused across calls, and the
dispatch to the parallel batch kernel or its serial twin.  It reads nothing back from the
retriever: the index arrays and the parameters are given to it (:meth:`QueryPath.set_config` when
the query parameters change).  The thirteen arguments of a kernel call travel as a
:class:`QueryArgs` (a ``NamedTuple``, unpacked at the call, so the kernels' signatures and their
compiled overloads are those of the thirteen arrays and bundles).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import NamedTuple

import numba
import numpy as np

from jkofast._numba import entry_point
from jkofast._threads import numba_threads, resolve_threads
from jkofast.eval.runio import strictly_decreasing
from jkofast.kernels.sgr import build as kb
from jkofast.kernels.sgr import postings as kp
from jkofast.kernels.sgr import query as kq
from jkofast.sgr import layout

__all__ = ["COMPONENTS", "SERIAL_BELOW", "QueryArgs", "QueryPath", "SGRPool", "new_scratch"]

COMPONENTS = ("tail", "lexadj", "sem", "rare", "relevance", "lex1", "bm25")
# float16 bits -> float32 (the c_w decode table of the default float16 reliability)
H2F = np.arange(65_536, dtype=np.uint16).view(np.float16).astype(np.float32)
# each code slot's centre value and weight, float32 (8 B per slot), derived in memory when they fit this budget
# (SciFact: 2.7 MB; ~130k passages at the defaults): local_score then reads them from the membership's row
EXPAND_CODES_MAX_BYTES = 64 << 20
SERIAL_BELOW = 16  # batches of fewer queries on one chunk run the serial twin (no parallel launch)
RESCUE_MODES = {"auto": kq.RESCUE_AUTO, "scan": kq.RESCUE_SCAN, "postings": kq.RESCUE_POSTINGS}
_new_tuple = tuple.__new__


@dataclasses.dataclass
class SGRPool:
    """Top-P pools with their component scores (one row per query).

    ``doc`` int64 (nq, P): corpus row positions in final rank order, padded with -1;
    ``n`` int64 (nq,): pool size per query; each component (``tail``, ``lexadj``,
    ``sem``, ``rare``, ``relevance``, ``lex1``, ``bm25``) is float64 (nq, P) aligned with
    ``doc`` and NaN-padded; ``n_routed_docs`` ``|U|`` and ``n_routed_terms`` per query;
    ``status`` int32 (0 ok, 3 empty query).
    """

    doc: np.ndarray
    n: np.ndarray
    tail: np.ndarray
    lexadj: np.ndarray
    sem: np.ndarray
    rare: np.ndarray
    relevance: np.ndarray
    lex1: np.ndarray
    bm25: np.ndarray
    n_routed_docs: np.ndarray
    n_routed_terms: np.ndarray
    status: np.ndarray


def new_scratch(n_slabs: int, n_terms: int, n_docs: int, n_memberships: int) -> kq.SGRScratch:
    """Allocate fresh query scratch of ``n_slabs`` chunk slabs.

    Fresh query scratch of ``n_slabs`` chunk slabs (layout: ``jkofast.kernels.sgr.query.SGRScratch``):
    stamps -1, everything else zero.
    """
    m, V, N, F = n_slabs, n_terms, n_docs, n_memberships
    return kq.SGRScratch(
        vi=np.full((m, kq.N_VI, V), -1, np.int64),
        vf=np.zeros((m, kq.N_VF, V)),
        mark=np.zeros((m, V), np.uint8),
        dp=np.full((m, N, 2), -1, np.int64),
        ni=np.full((m, kq.N_NI, N), -1, np.int64),
        nf=np.zeros((m, kq.N_NF, N)),
        dmr=np.zeros((m, N, F), np.int64),
        dme=np.zeros((m, N, F)),
        slot=np.zeros((m, V), np.uint16),
        bt=np.full((m, V, 3), -1.0),
    )


class QueryArgs(NamedTuple):
    """The arguments of one call of ``sgr_query_batch`` / ``sgr_query_serial``, in their order.

    Unpacked at the call (``kernel(*args)``): the kernels take the thirteen values, so their
    signatures do not change with this bundle and nothing compiles per query.
    """

    q_indptr: np.ndarray  # int64 (nq + 1,): the query rows' CSR pointers
    q_terms: np.ndarray  # int32: term ids, sorted and unique per row
    q_vals: np.ndarray  # float32: L2-normalised TF-IDF weights
    ix: kq.SGRIndex  # the index arrays
    prm: kq.SGRParams  # the capped query parameters
    sc: kq.SGRScratch  # per-chunk scratch, reused across calls
    n_chunks: int  # contiguous chunks of queries (the parallel kernel's prange)
    gen_base: int  # stamp of the first query (advanced by nq after each call)
    out_doc: np.ndarray  # int64 (nq, n_out): corpus rows in rank order, -1 padded
    out_comp: np.ndarray  # float64 (nq, N_COMP, n_out): component scores, NaN padded
    out_n: np.ndarray  # int64 (nq,): pool size
    out_info: np.ndarray  # int64 (nq, 3): routed documents, routed terms, ...
    out_status: np.ndarray  # int32 (nq,): 0 ok, else why the query has no pool

    def queries_fixed(self) -> bool:
        """Whether the query arrays have the dtypes and layout the compiled overload was made for."""
        qi, qt, qv = self.q_indptr, self.q_terms, self.q_vals
        return (  # spelled out, not a loop: this runs on every call of a one-query search
            qi.dtype == np.int64
            and qt.dtype == np.int32
            and qv.dtype == np.float32
            and qi.flags.c_contiguous
            and qt.flags.c_contiguous
            and qv.flags.c_contiguous
            and qi.flags.writeable
            and qt.flags.writeable
            and qv.flags.writeable
        )


class QueryPath:
    """The query path of one index (owned by a :class:`jkofast.sgr.retriever.SparseGeometricRetriever`).

    Parameters
    ----------
    ix : dict
        The index arrays (compact layout, in memory or memory-mapped); the derived query tables
        (``sem_*``, ``tb_*``, ``h2f``, ``x_cval``, ``x_w``) are added to this same dict.
    config : SGRConfig
        The parameters.
    """

    def __init__(self, ix: dict, config) -> None:
        self.ix = ix
        self.config = config
        self.n_docs = int(ix["dl"].shape[0])
        self.n_terms = int(ix["idf"].shape[0])
        self._lock = threading.Lock()
        self._scratch: kq.SGRScratch | None = None
        self._gen = 0
        self._pa_cache: dict = {}  # kernel parameters (SGRParams) by (pool, routed); cleared with the config
        self._kix: kq.SGRIndex | None = None  # the index arrays as the kernels' SGRIndex (built on first use)
        self._entry: dict = {}  # compiled query kernels by dispatcher, for this SGRIndex
        self._make_semantic()
        self.make_query_layout()

    def set_config(self, config) -> None:
        """Adopt new query parameters (the build parameters are the index's own)."""
        # the semantic neighbour lists depend on these two only (rebuilding them costs ~0.5 s
        # on a 20k-document index, so other query-parameter changes keep them)
        remake = any(getattr(config, k) != getattr(self.config, k) for k in ("semantic_neighbours", "semantic_k"))
        self.config = config
        self._pa_cache = {}
        if remake:
            self._make_semantic()

    def _make_semantic(self) -> None:
        """Per-term semantic neighbour lists (``semantic_k`` of each A row)."""
        self._kix = None
        ix, cfg = self.ix, self.config
        indptr, idx, val = ix["a_indptr"], ix["a_idx"], ix["a_val"]
        V = indptr.shape[0] - 1
        rows = np.repeat(np.arange(V), np.diff(indptr))
        if cfg.semantic_neighbours == "lowest_term_id":
            rank = np.arange(idx.shape[0]) - indptr[rows]
            keep = rank < cfg.semantic_k
            sel = np.flatnonzero(keep)
        else:
            order = np.lexsort((idx, -val.astype(np.float64), rows))
            rank = np.arange(order.shape[0]) - indptr[rows[order]]
            sel = np.sort(order[rank < cfg.semantic_k])  # back to (row, term id) order
        cnt = np.bincount(rows[sel], minlength=V)
        sem_indptr = np.zeros(V + 1, np.int64)
        np.cumsum(cnt, out=sem_indptr[1:])
        ix["sem_indptr"] = sem_indptr
        ix["sem_idx"] = idx[sel].astype(layout.term_dtype(V))
        ix["sem_val"] = val[sel].astype(np.float32)

    def make_query_layout(self) -> None:
        """Derive the query-path tables at fit and load.

        Document bitsets of the frequent terms (with postings only; not saved): a term gets a
        row of ``ceil(N / 64)`` int64 words when ``32·df >= N``, i.e. when the bitset is no
        larger than its int32 postings, so the extra memory is bounded by the postings.  The
        query path tests a routed or pool document against such a term in O(1) instead of
        streaming its postings (SciFact: 693 of 35,899 terms).  Without postings the rescue
        scans the support and these tables are empty.
        """
        self._pa_cache = {}
        self._kix = None
        ix = self.ix
        N = int(ix["dl"].shape[0])
        V = int(ix["idf"].shape[0])
        if self.config.postings:
            t_indptr = ix["t_indptr"]
            df = np.diff(t_indptr)
            freq = (df > 0) & (32 * df >= N)
            tb_row = np.full(V, -1, np.int64)
            tb_row[freq] = np.arange(int(freq.sum()))
            bits = np.zeros((max(int(freq.sum()), 1), (N + 63) // 64), np.int64)
            kb.term_doc_bitsets(t_indptr, ix["t_off"], ix["t_code"], tb_row, bits)
        else:  # never read: the rescue scans the support
            tb_row = np.full(1, -1, np.int64)
            bits = np.zeros((1, 1), np.int64)
        ix["tb_row"] = tb_row
        ix["tb_bits"] = bits
        ix["h2f"] = H2F if ix["c_w"].dtype == np.uint16 else np.zeros(0, np.float32)
        self._expand_codes()
        dl = ix["dl"]
        mean = float(np.asarray(dl).astype(np.float64).mean()) if dl.size else 0.0
        self.avgdl = mean if mean > 0 else 1.0

    def _expand_codes(self) -> None:
        """Derive ``x_cval`` / ``x_w`` (float32 (M, S), not saved): every code slot's centre value and weight.

        ``kernels.sgr.query.expand_codes`` writes the values the query path would look up per
        (query, branch), so the scores are the same bits either way; the branch-local scores
        then read them from the membership's own row instead of a branch table.  Only when
        they fit ``EXPAND_CODES_MAX_BYTES``; otherwise both are (0, S) and every query looks
        the values up (the compact path).
        """
        ix, cfg = self.ix, self.config
        code_term = ix["code_term"]
        M, S = code_term.shape
        if M > 0 and 8 * M * S <= EXPAND_CODES_MAX_BYTES:
            x_cval = np.zeros((M, S), np.float32)
            x_w = np.zeros((M, S), np.float32)
            V = int(ix["idf"].shape[0])
            kq.expand_codes(
                ix["b_indptr"],
                code_term,
                (ix["c_indptr"], ix["c_terms"], ix["c_vals"], ix["c_w"], ix["h2f"]),
                (ix["r_indptr"], ix["r_terms"], ix["r_w"], ix["r_nj"], ix["r_scale"], ix["gvar"]),
                (float(cfg.tau), float(cfg.beta), bool(cfg.reliability_float16)),
                np.empty((V, 3), np.float64),
                x_cval,
                x_w,
            )
        else:
            x_cval = np.zeros((0, S), np.float32)
            x_w = np.zeros((0, S), np.float32)
        ix["x_cval"] = x_cval
        ix["x_w"] = x_w

    def params(self, pool_size: int, q_indptr=None) -> kq.SGRParams:
        """Query parameters of the batch kernel.

        Count parameters are capped where a larger value cannot change a result (a pool holds at most N
        documents, at most V terms are routed, diversity reaches at most the pool): the kernel sizes its
        workspace by them, so an uncapped ``n_eligible = 10**6`` would ask for a 10**12-slot buffer inside the
        kernel and ``gate_mult * P`` could overflow int64.  Every field is a Python float / int /
        bool, so the kernel signature never changes with the values.
        """
        p = self.config
        N, V = self.n_docs, self.n_terms
        if not p.postings and (p.bm25_candidates > 0 or p.bm25_weight != 0 or p.bm25_rescue_weight != 0):
            raise ValueError(
                "the BM25 extension (bm25_candidates, bm25_weight, bm25_rescue_weight) reads the lexical "
                "postings; this index was built with postings=False"
            )
        P = min(int(pool_size), N)
        max_q = int(np.diff(q_indptr).max()) if q_indptr is not None and q_indptr.shape[0] > 1 else V
        budget = min(p.route_budget, V)
        n_routed = min(V, max_q + budget)  # the routed branches of one query
        key = (P, n_routed)
        hit = self._pa_cache.get(key)
        if hit is not None:
            return hit
        prm = kq.SGRParams(
            alpha=float(p.alpha),
            budget=int(budget),
            gamma=float(p.gamma),
            lam_m=float(p.lam_m),
            avgdl=float(self.avgdl),
            bm25_candidates=int(min(p.bm25_candidates, N)),
            bm25_k1=float(p.bm25_k1),
            bm25_b=float(p.bm25_b),
            w_bm25=float(p.bm25_weight),
            w_bm25_rescue=float(p.bm25_rescue_weight),
            tail_gate=bool(p.tail_gate),
            gate_min=int(min(p.gate_min, N)),
            gate_mult=int(min(p.gate_mult, N)),
            rescue_mode=RESCUE_MODES[p.rescue_mode if p.postings else "scan"],
            b_rescue=float(p.b_rescue),
            b_final=float(p.b_final),
            coord=float(p.coord_exp),
            n_rare=int(min(p.n_rare, V)),
            pool=int(P),
            eta=float(p.eta),
            w_tail=float(p.w_tail),
            w_lex=float(p.w_lex),
            w_sem=float(p.w_sem),
            w_rare=float(p.w_rare),
            n_elig=int(min(p.n_eligible, n_routed)),
            top_h=int(min(p.top_h, P)),
            n_div=int(min(p.n_diverse, P)),
            lam_d=float(p.lam_d),
            rel_tau=float(p.tau),
            rel_beta=float(p.beta),
            rel_f16=bool(p.reliability_float16),
        )
        if len(self._pa_cache) > 64:
            self._pa_cache.clear()
        self._pa_cache[key] = prm
        return prm

    def index(self) -> kq.SGRIndex:
        """Return the index arrays as the kernels' ``SGRIndex``.

        Rebuilt after ``_make_semantic`` / :meth:`make_query_layout`, the only places that
        replace them (or after ``_kix`` is reset by whoever replaced an array of ``ix``).
        """
        if self._kix is None:
            ix = dict(self.ix)
            if "t_code" not in ix:
                ix["t_off"] = np.zeros(1, np.int64)
                ix["t_code"] = np.zeros(0, np.uint8)
                ix["t_tfq"] = np.zeros(0, np.uint8)
                ix["t_xpos"] = np.zeros(0, np.int64)
                ix["t_xval"] = np.zeros(0, np.float32)
            self._kix = kq.SGRIndex(*(ix[name] for name in kq.SGRIndex._fields))
            self._entry = {}
        return self._kix

    def _call(self, disp, args: QueryArgs) -> None:
        """Call a query kernel.

        After the first call (compile or cache load) the compiled overload is called directly: the dispatcher's
        type check of the ``SGRIndex`` (29 arrays) costs ~6 µs per call in Python, about 7 % of a one-query
        search.  Safe while the argument types cannot change: the index bundle is the same object (``_entry`` is
        reset whenever it is rebuilt), the scratch, parameters and outputs are built here with fixed types, and
        the query arrays are checked by :meth:`QueryArgs.queries_fixed`.
        """
        fixed = args.queries_fixed()
        ep = self._entry.get(disp) if fixed else None
        if ep is not None:
            ep(*args)
            return
        disp(*args)
        if fixed:
            ep = entry_point(disp, args)  # None on an untested Numba: the dispatcher every time
            if ep is not None:
                self._entry[disp] = ep

    def run(self, q_indptr, q_terms, q_vals, pool_size, n_threads, n_out=None):
        """Run the batch kernel on analysed queries (CSR rows); outputs hold the first ``n_out`` (default P) ranks.

        Returns ``(out_doc, out_comp, out_n, out_info, out_status)`` (see :class:`QueryArgs`).
        """
        nq = q_indptr.shape[0] - 1
        P = pool_size
        n_out = P if n_out is None else n_out
        prm = self.params(P, q_indptr)
        out = (
            np.full((nq, n_out), -1, np.int64),
            np.full((nq, kq.N_COMP, n_out), np.nan, np.float64),
            np.zeros(nq, np.int64),
            np.zeros((nq, 3), np.int64),
            np.zeros(nq, np.int32),
        )
        n_chunks = max(1, min(nq, resolve_threads(n_threads)))
        with self._lock:
            sc = self.get_scratch(n_chunks)
            gen_base = self._gen
            self._gen += nq
            # tuple.__new__: the NamedTuple built without its generated __new__ (~1 µs less per call)
            args = _new_tuple(QueryArgs, (q_indptr, q_terms, q_vals, self.index(), prm, sc, n_chunks, gen_base, *out))
            if n_chunks == 1 and nq < SERIAL_BELOW:
                # a few queries on one chunk: the same code on the calling thread, no parallel
                # launch and no thread-mask change (together ~10 µs per call)
                self._call(kq.sgr_query_serial, args)
            else:
                # (one chunk included: the chunk body compiled inside the parallel kernel runs
                # ~10 % faster per query than the serial twin, which pays off above a few queries)
                with numba_threads(n_threads):
                    self._call(kq.sgr_query_batch, args)
        return out

    def _lexical_fallback(self, terms: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Rank the documents holding any of ``terms`` by BM25 (``empty_fallback="lexical"``).

        ``score(d) = sum_t idf_t tf (k1 + 1) / (tf + k1 (1 - b + b dl_d / avgdl))`` over the distinct
        query terms ``t`` in ``d`` (Lucene idf ``bm25_idf``; ``bm25_k1``, ``bm25_b``; the BM25
        extension's formula), with ``tf`` from the postings, or ``tf = 1`` over the binary support
        of an index without postings.  Sums are float64 in term order; the top ``k`` by score,
        ties to the lowest row, as ``(docs int64, scores float64)``.
        """
        ix, cfg = self.ix, self.config
        terms = np.asarray(terms, np.int64)
        if cfg.postings:
            ptr = ix["t_indptr"]
            lo, hi = ptr[terms].astype(np.int64), ptr[terms + 1].astype(np.int64)
            take = np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)])
            docs = np.concatenate([self.term_docs(int(t)) for t in terms.tolist()])
            tf = np.asarray(ix["t_tfq"])[take].astype(np.float64)
            esc = np.flatnonzero(tf == 0.0)
            if esc.size:  # frequencies kept exactly in t_xval
                xpos = np.asarray(ix["t_xpos"])
                tf[esc] = np.asarray(ix["t_xval"])[np.searchsorted(xpos, take[esc])]
            idf = np.repeat(np.asarray(ix["bm25_idf"], np.float64)[terms], hi - lo)
        else:
            s_idx = np.asarray(ix["s_idx"])
            hit = np.flatnonzero(np.isin(s_idx, terms))
            # term order first (as the postings give it), then row
            t_of = s_idx[hit].astype(np.int64)
            d_of = np.searchsorted(np.asarray(ix["s_indptr"]), hit, side="right") - 1
            order = np.lexsort((d_of, t_of))
            docs, t_of = d_of[order].astype(np.int64), t_of[order]
            tf = np.ones(docs.shape[0])
            idf = np.asarray(ix["bm25_idf"], np.float64)[t_of]
        if docs.size == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        k1, b = cfg.bm25_k1, cfg.bm25_b
        dl = np.asarray(ix["dl"])[docs].astype(np.float64)
        part = idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / self.avgdl))
        uniq, inv = np.unique(docs, return_inverse=True)
        score = np.bincount(inv, weights=part, minlength=uniq.shape[0])
        top = np.lexsort((uniq, -score))[:k]
        return uniq[top], score[top]

    def term_docs(self, t: int) -> np.ndarray:
        """Documents (int64, ascending) of term ``t``, decoded from the compressed postings."""
        ix = self.ix
        out = np.empty(int(ix["t_indptr"][t + 1] - ix["t_indptr"][t]), np.int64)
        kp.decode_term(ix["t_indptr"], ix["t_off"], ix["t_code"], t, out)
        return out

    def apply_fallback(self, q_indptr, q_terms, status, idx, sc, kk) -> np.ndarray:
        """Fill the rows of the queries with known terms but no routed document (in place).

        Returns the bool mask of the rows filled.  Scores are float32, capped to be strictly
        decreasing in rank as the retriever's ``search`` makes them.
        """
        nq = status.shape[0]
        fb = np.zeros(nq, bool)
        if self.config.empty_fallback != "lexical" or not status.any():  # STATUS_OK is 0
            return fb
        for i in np.flatnonzero(status != kq.STATUS_OK).tolist():
            lo, hi = int(q_indptr[i]), int(q_indptr[i + 1])
            if hi == lo:  # no known term: nothing to score
                continue
            docs, score = self._lexical_fallback(q_terms[lo:hi], kk)
            if docs.size == 0:
                continue
            fb[i] = True
            idx[i, : docs.size] = docs
            sc[i, : docs.size] = strictly_decreasing(score.astype(np.float32)[None, :])[0]
        return fb

    def get_scratch(self, n_chunks: int) -> kq.SGRScratch:
        """Per-chunk query scratch, allocated once and reused across calls (SPEC B.12: no dense per-query zeroing).

        Stamps start at -1; marks must stay all zero.
        """
        sc = self._scratch
        if sc is None or sc.vi.shape[0] < n_chunks:
            m = max(n_chunks, int(numba.config.NUMBA_NUM_THREADS))
            sc = new_scratch(m, self.n_terms, self.n_docs, self.config.n_memberships)
            self._scratch = sc
            self._gen = 0
        return sc
