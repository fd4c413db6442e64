"""Query perturbations of the stability protocol: the seed-0 draws of SPEC Appendix 2 and hand cases."""

import numpy as np
import pytest
from reference_stability import drop_stop_naive, hedge_naive, lower_nop_naive

from jkofast.studies._perturb import PERTURBATIONS, drop_stop, hedge, lower_nop, perturb, perturb_queries

# SPEC Appendix 2: deleted candidate index for n = 1 .. 15 candidates (published table)
APPENDIX2 = [0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 10, 11, 11, 12]


@pytest.mark.parametrize("n", range(1, 16))
def test_drop_stop_deletes_the_appendix2_candidate(n):
    # n stop-word candidates "the", separated by numbered tokens; the deleted one is candidate APPENDIX2[n-1]
    toks = []
    for i in range(n):
        toks += [f"w{i}", "the"]
    q = " ".join(toks)
    out = drop_stop(q).split()
    assert len(out) == len(toks) - 1
    j = 2 * APPENDIX2[n - 1] + 1  # position of that candidate
    assert out == toks[:j] + toks[j + 1 :]


def test_draws_are_recreated_per_call():
    q = "effect of a drug on the heart"
    assert drop_stop(q) == drop_stop(q) == drop_stop_naive(q, lambda n: int(np.random.default_rng(0).integers(0, n)))
    assert hedge("x.") == hedge("x.") == "x according to studies."


def test_hand_cases():
    # candidates: "The" (case-folded), "of", "in?" (punctuation stripped) -> 3 candidates, draw 2 deletes "in?"
    assert drop_stop("The  role of p53 in?") == "The role of p53"
    assert drop_stop("p53 mutations") == "p53 mutations"  # no candidate: unchanged, spacing kept
    assert drop_stop("  the  ") == ""
    assert hedge("Sepsis is caused by TNF...") == "Sepsis is caused by TNF according to studies."
    assert hedge("no period") == "no period according to studies."
    assert lower_nop("Does IL-6 cause fever? Yes, in mice!") == "does il-6 cause fever yes, in mice"
    assert lower_nop("already lower, no stops") == "already lower, no stops"


@pytest.mark.parametrize(
    "q",
    ["0-dimensional biomaterials show inductive properties.", "A deficiency of vitamin B12 increases blood levels."],
)
def test_against_the_spec_oracles(q):
    draw = lambda n: int(np.random.default_rng(0).integers(0, n))  # noqa: E731
    assert drop_stop(q) == drop_stop_naive(q, draw)
    assert hedge(q) == hedge_naive(q)
    assert lower_nop(q) == lower_nop_naive(q)
    assert [perturb(q, k) for k in PERTURBATIONS] == [drop_stop(q), hedge(q), lower_nop(q)]


def test_perturb_queries_skips_unchanged():
    ids = ["1", "2", "3"]
    texts = ["cats and dogs", "The cat.", "already lower"]
    cases = perturb_queries(ids, texts)
    assert ("1", "drop_stop", "cats and dogs") not in cases  # no stop word
    assert ("2", "drop_stop", "cat.") in cases
    assert [c for c in cases if c[1] == "lower_nop"] == [("2", "lower_nop", "the cat")]
    assert len([c for c in cases if c[1] == "hedge"]) == 3
    # strip() comparison: trailing whitespace only is "unchanged"
    assert perturb_queries(["9"], ["x "], kinds=("lower_nop",)) == []


def test_bad_input():
    with pytest.raises(ValueError, match="kind must be one of"):
        perturb("q", "synonym")
    with pytest.raises(TypeError, match="query must be a str"):
        drop_stop(3)
    with pytest.raises(ValueError, match="query_ids has 1 entries for 2 texts"):
        perturb_queries(["1"], ["a", "b"])
