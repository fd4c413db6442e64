"""The three query perturbations of the paraphrase-stability protocol (SPEC A.7.5, Appendix 2).

Each perturbation that draws a random number re-creates ``numpy.random.default_rng(seed)`` at
every call (seed 0 as published), so every query gets the same draw:

* ``drop_stop`` — split on whitespace; the candidates are the tokens whose lower-case form,
  stripped of leading/trailing ``. , ? !``, is one of 12 stop words; delete candidate number
  ``default_rng(0).integers(0, n)`` (n candidates; Appendix 2: 0, 1, 2, 3, 4, 5, 5, 6, 7, 8, …)
  and re-join with single spaces; a query without candidates is returned unchanged;
* ``hedge`` — strip trailing ``.`` and append one of three hedges chosen by
  ``default_rng(0).integers(0, 3)`` = 2: always ``" according to studies."``;
* ``lower_nop`` — delete every ``.``, ``?``, ``!`` (commas kept) and lower-case.

A (query, perturbation) whose perturbed text equals the original after ``strip()`` is skipped
(:func:`perturb_queries`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["HEDGES", "PERTURBATIONS", "STOP_WORDS", "drop_stop", "hedge", "lower_nop", "perturb", "perturb_queries"]

PERTURBATIONS = ("drop_stop", "hedge", "lower_nop")
STOP_WORDS = frozenset({"the", "a", "an", "of", "to", "in", "on", "at", "for", "with", "by", "from"})
HEDGES = (" in some cases.", " under certain conditions.", " according to studies.")


def _check_text(query) -> str:
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    return query


def drop_stop(query: str, seed: int = 0) -> str:
    """Delete one stop-word token (the seed-``seed`` draw among the candidates).

    Examples
    --------
    >>> drop_stop("the role of p53 in cancer")  # 3 candidates: draw 2 -> "in"
    'the role of p53 cancer'
    >>> drop_stop("p53 mutations")
    'p53 mutations'
    """
    toks = _check_text(query).split()
    idxs = [i for i, t in enumerate(toks) if t.lower().strip(".,?!") in STOP_WORDS]
    if not idxs:
        return query
    j = idxs[int(np.random.default_rng(seed).integers(0, len(idxs)))]
    return " ".join(t for i, t in enumerate(toks) if i != j)


def hedge(query: str, seed: int = 0) -> str:
    """Strip trailing ``.`` and append the hedge drawn with ``seed`` (seed 0: " according to studies.").

    Examples
    --------
    >>> hedge("Vitamin D reduces fractures.")
    'Vitamin D reduces fractures according to studies.'
    """
    return _check_text(query).rstrip(".") + HEDGES[int(np.random.default_rng(seed).integers(0, len(HEDGES)))]


def lower_nop(query: str) -> str:
    """Delete ``.``, ``?``, ``!`` (commas kept) and lower-case.

    Examples
    --------
    >>> lower_nop("Does IL-6 cause fever? Yes, in mice.")
    'does il-6 cause fever yes, in mice'
    """
    return _check_text(query).translate({ord("."): None, ord("?"): None, ord("!"): None}).lower()


def perturb(query: str, kind: str, seed: int = 0) -> str:
    """Apply the perturbation ``kind`` (one of :data:`PERTURBATIONS`).

    Raises
    ------
    ValueError
        Unknown ``kind``.
    """
    if kind == "drop_stop":
        return drop_stop(query, seed)
    if kind == "hedge":
        return hedge(query, seed)
    if kind == "lower_nop":
        return lower_nop(query)
    raise ValueError(f"kind must be one of {PERTURBATIONS}, got {kind!r}")


def perturb_queries(query_ids, texts, kinds=PERTURBATIONS, seed: int = 0) -> list[tuple[str, str, str]]:
    """All (query, perturbation) cases that change the query: ``(query_id, kind, perturbed_text)``.

    Ordered by perturbation, then query; a perturbed text equal to the original after
    ``strip()`` is skipped (SPEC A.7.5).

    Raises
    ------
    ValueError
        ``query_ids`` and ``texts`` of different lengths, an unknown kind.

    Examples
    --------
    >>> perturb_queries(["1", "2"], ["a cat.", "dogs"], kinds=("lower_nop",))
    [('1', 'lower_nop', 'a cat')]
    """
    query_ids = list(query_ids)
    texts = list(texts)
    if len(query_ids) != len(texts):
        raise ValueError(f"query_ids has {len(query_ids)} entries for {len(texts)} texts")
    out = []
    for kind in kinds:
        for qid, text in zip(query_ids, texts, strict=True):
            new = perturb(text, kind, seed)
            if new.strip() != text.strip():
                out.append((qid, kind, new))
    return out
