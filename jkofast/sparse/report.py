"""SearchReport: what a retriever's ``search`` could not answer, per query.

Every retriever's ``search(..., return_report=True)`` returns ``(indices, scores, report)``; the
plain call keeps returning ``(indices, scores)``.  The report says, for each query, whether the
method found something to rank (:data:`OK`), found no term of the query in its vocabulary
(:data:`NO_KNOWN_TERM`), or -- SparseGeometricRAG only -- knew the terms but routed no document
(:data:`NO_ROUTED_DOC`), and whether the returned rows came from a fallback.  The CLI's summary
line and the main job's notes are built from :meth:`SearchReport.summary`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["NO_KNOWN_TERM", "NO_ROUTED_DOC", "OK", "REASONS", "SearchReport"]

OK, NO_KNOWN_TERM, NO_ROUTED_DOC = 0, 1, 2
REASONS = {OK: "ok", NO_KNOWN_TERM: "no known term", NO_ROUTED_DOC: "no routed document"}


@dataclasses.dataclass(frozen=True)
class SearchReport:
    """Per-query outcome of one ``search`` call (rows in query order).

    Attributes
    ----------
    status : int8 ndarray (nq,)
        :data:`OK`, :data:`NO_KNOWN_TERM` (no query token is in the vocabulary: nothing to
        score) or :data:`NO_ROUTED_DOC` (SparseGeometricRAG: known terms, but no document in
        any routed branch).
    fallback : bool ndarray (nq,)
        The query's returned rows come from a fallback ranking, not from the method itself
        (SparseGeometricRAG's ``empty_fallback="lexical"``).
    n_results : int64 ndarray (nq,)
        Non-padding entries of the query's row (``indices >= 0``).
    filler : bool ndarray (nq,)
        The row holds documents although nothing matched: BM25 / TF-IDF rank every document
        at score 0 for a query with no known term (corpus order), so its row is full but says
        nothing about relevance.
    """

    status: np.ndarray
    fallback: np.ndarray
    n_results: np.ndarray
    filler: np.ndarray

    @classmethod
    def from_outputs(cls, indices, status, fallback=None, filler=None) -> SearchReport:
        """Build from a ``search`` output's ``indices`` and the per-query ``status`` (and flags)."""
        st = np.asarray(status, np.int8)
        nq = st.shape[0]
        idx = np.asarray(indices)
        n = (idx >= 0).sum(axis=1).astype(np.int64) if idx.ndim == 2 else np.zeros(nq, np.int64)
        fb = np.zeros(nq, bool) if fallback is None else np.asarray(fallback, bool)
        fl = np.zeros(nq, bool) if filler is None else np.asarray(filler, bool)
        return cls(status=st, fallback=fb, n_results=n, filler=fl)

    @classmethod
    def concat(cls, reports) -> SearchReport:
        """Join the reports of consecutive query blocks (in order) into one report."""
        reports = list(reports)
        if not reports:
            return cls.from_outputs(np.zeros((0, 0), np.int64), np.zeros(0, np.int8))
        return cls(**{f: np.concatenate([getattr(r, f) for r in reports]) for f in _FIELDS})

    @property
    def n_queries(self) -> int:
        """Number of queries."""
        return int(self.status.shape[0])

    @property
    def empty(self) -> np.ndarray:
        """Positions of the queries whose row holds no document (all padding)."""
        return np.flatnonzero(self.n_results == 0)

    @property
    def unanswered(self) -> np.ndarray:
        """Positions of the queries the method could not answer itself (``status != OK``)."""
        return np.flatnonzero(self.status != OK)

    def counts(self) -> dict:
        """Return ``{reason: count}`` of the non-OK statuses, ``fallback`` and ``empty`` (zeros included)."""
        return {
            "no_known_term": int(np.count_nonzero(self.status == NO_KNOWN_TERM)),
            "no_routed_document": int(np.count_nonzero(self.status == NO_ROUTED_DOC)),
            "fallback": int(np.count_nonzero(self.fallback)),
            "empty": int(self.empty.shape[0]),
        }

    def to_dict(self, query_ids=None) -> dict:
        """Return the counts and the named queries per reason (JSON-ready; ids when ``query_ids`` is given)."""
        out = self.counts()
        for key, code in (("no_known_term", NO_KNOWN_TERM), ("no_routed_document", NO_ROUTED_DOC)):
            out[f"{key}_queries"] = self._names(np.flatnonzero(self.status == code), query_ids)
        out["fallback_queries"] = self._names(np.flatnonzero(self.fallback), query_ids)
        out["empty_queries"] = self._names(self.empty, query_ids)
        if query_ids is None:  # positions, as ints
            for key in ("no_known_term", "no_routed_document", "fallback", "empty"):
                out[f"{key}_queries"] = [int(x) for x in out[f"{key}_queries"]]
        return out

    @staticmethod
    def _names(pos, query_ids) -> list:
        """Return the ids of the queries at ``pos`` (their positions as str without ``query_ids``)."""
        return [str(query_ids[i]) if query_ids is not None else str(i) for i in pos.tolist()]

    def summary(self, query_ids=None, max_names: int = 5) -> str:
        """Return one line naming the queries without an answer of their own ('' when there is none).

        Counted per reason (no known term, no routed document) with how their rows were filled,
        then any other query whose row is empty.

        Parameters
        ----------
        query_ids : sequence of str, optional
            Names of the queries (positions are printed without them).
        max_names : int, default 5
            Queries named per reason; the rest are counted (``+N more``).
        """
        parts = []
        for code in (NO_KNOWN_TERM, NO_ROUTED_DOC):
            pos = np.flatnonzero(self.status == code)
            if not pos.size:
                continue
            names = self._names(pos[:max_names], query_ids)
            more = f" +{pos.size - max_names} more" if pos.size > max_names else ""
            fb = int(np.count_nonzero(self.fallback[pos]))
            fl = int(np.count_nonzero(self.filler[pos]))
            nothing = int(np.count_nonzero(self.n_results[pos] == 0))
            how = []
            if fb:
                how.append(f"{fb} answered by the lexical fallback")
            if fl:
                how.append(f"{fl} filled with score-0 documents in corpus order")
            if nothing:
                how.append(f"{nothing} with no result")
            label = "query" if pos.size == 1 else "queries"
            parts.append(
                f"{pos.size} {label} with {REASONS[code]} ({', '.join(names)}{more}): {', '.join(how) or 'none left'}"
            )
        other = np.flatnonzero((self.status == OK) & (self.n_results == 0))
        if other.size:
            names = self._names(other[:max_names], query_ids)
            more = f" +{other.size - max_names} more" if other.size > max_names else ""
            label = "query" if other.size == 1 else "queries"
            parts.append(f"{other.size} {label} with no result ({', '.join(names)}{more})")
        return "; ".join(parts)


_FIELDS = tuple(f.name for f in dataclasses.fields(SearchReport))
