"""The provable top-k radius of the exact KL-proximal / proximal-free flow (jkofast.jko.theory).

Oracles: the closed-form KL step without redundancy (tests/reference_theory.py), the damped-Newton exact
step of jkofast.jko.linear_response; invariants: the Lipschitz bound in Hilbert's distance on random
perturbations, the top-k unchanged inside the radius (property test), the bound never above the flow's own
walk radius on the bundled SciFact queries.
"""

import numpy as np
import pytest
import reference_theory as ref
from hypothesis import given, settings
from hypothesis import strategies as hst

from jkofast.jko.config import JKOConfig, operating_point
from jkofast.jko.linear_response import solve_step
from jkofast.jko.theory import exact_flow, hilbert_distance, provable_radius, walk_radius
from jkofast.selection import topk


def pool(seed=0, m=12, d=4, tau=0.3):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    S = np.clip(Z @ Z.T, -1, 1)
    E = -rng.uniform(size=m)
    p0 = np.exp(-E / tau)
    return E, p0 / p0.sum(), (1 - S) ** 2, np.maximum(S, 0)


KL = operating_point("base", mode="kl")
NOPROX = operating_point("base", mode="noproximal")


def test_hilbert_distance_and_the_total_variation_lemma():
    assert hilbert_distance([0.5, 0.25, 0.25], [0.25, 0.25, 0.5]) == pytest.approx(2 * np.log(2))
    assert hilbert_distance([0.2, 0.8], [0.4, 1.6]) == pytest.approx(0.0, abs=1e-15)  # projective
    rng = np.random.default_rng(3)
    for _ in range(200):  # ||p - q||_1 <= 2 tanh(d_H/4), the step from d_H to L1 in the derivation
        p, q = rng.dirichlet(np.full(7, 0.5)), rng.dirichlet(np.full(7, 0.5))
        assert np.abs(p - q).sum() <= 2 * np.tanh(hilbert_distance(p, q) / 4) + 1e-12
    with pytest.raises(ValueError, match="positive"):
        hilbert_distance([0.5, 0.5], [1.0, 0.0])
    with pytest.raises(ValueError, match="same shape"):
        hilbert_distance([1.0], [0.5, 0.5])


@pytest.mark.parametrize("T", [1, 3])
def test_exact_flow_without_redundancy_is_the_closed_form(T):
    E, p0, _, K = pool(1)
    cfg = JKOConfig(h=0.5, lam=0.05, rho=0.0, T=T, mode="kl")
    q = p0
    for _ in range(T):
        q = ref.kl_step_closed_form(E, q, 0.05, 0.5)
    np.testing.assert_allclose(exact_flow(E, p0, K, cfg), q, rtol=1e-11)
    # no proximal term: the minimiser of F, softmax(-E/lam), whatever p0
    cfg = JKOConfig(lam=0.05, rho=0.0, T=T, mode="noproximal")
    z = np.exp(-(E - E.min()) / 0.05)
    np.testing.assert_allclose(exact_flow(E, p0, K, cfg), z / z.sum(), rtol=1e-11)
    # bregman with alpha 0 is the KL flow
    assert np.array_equal(exact_flow(E, p0, K, KL), exact_flow(E, p0, K, KL.replace(mode="bregman", alpha_prox=0.0)))


@pytest.mark.parametrize("cfg", [KL, NOPROX], ids=["kl", "noproximal"])
def test_exact_step_matches_the_newton_solver(cfg):
    E, p0, C, K = pool(2)
    one = cfg.replace(T=1)
    sol = solve_step(E, p0, C, K, one, tol=1e-13)
    np.testing.assert_allclose(exact_flow(E, p0, K, one), sol.p, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("cfg", [KL, NOPROX, KL.replace(T=5, h=2.0, lam=0.1)], ids=["kl", "noprox", "kl-T5"])
@pytest.mark.parametrize("tau", [None, 0.1])
def test_the_lipschitz_bound_holds_on_random_perturbations(cfg, tau):
    E, p0, _, K = pool(4, m=15)
    b = provable_radius(E, p0, K, cfg, 3, p0_tau=tau)
    rng = np.random.default_rng(5)
    worst = 0.0
    for scale in (1e-3, 1e-2, 0.1, 1.0):
        for _ in range(6):
            d = scale * rng.normal(size=E.shape[0])
            q0 = p0 if tau is None else np.exp(-(E + d - (E + d).min()) / tau)
            q0 = q0 / q0.sum()
            p0e = p0 if tau is None else np.exp(-(E - E.min()) / tau) / np.exp(-(E - E.min()) / tau).sum()
            pa = exact_flow(E, p0e, K, cfg)
            pb = exact_flow(E + d, q0, K, cfg)
            ratio = hilbert_distance(pa, pb) / (b.lipschitz * np.ptp(d))
            worst = max(worst, ratio)
            assert ratio <= 1 + 1e-9
    assert worst > 0.3  # the constant is not vacuous: random perturbations reach a good part of it


@settings(max_examples=40, deadline=None)
@given(seed=hst.integers(0, 10_000), frac=hst.floats(0.0, 0.999), k=hst.integers(1, 5), kl=hst.booleans())
def test_topk_never_changes_inside_the_radius(seed, frac, k, kl):
    """Property: any perturbation with ||delta||_2 < radius keeps the top-k of the exact flow."""
    E, p0, _, K = pool(seed % 7, m=10)
    cfg = KL if kl else NOPROX
    b = provable_radius(E, p0, K, cfg, k)
    rng = np.random.default_rng(seed)
    d = rng.normal(size=E.shape[0])
    d *= frac * b.radius / np.linalg.norm(d)
    assert set(topk(exact_flow(E + d, p0, K, cfg), k)[0].tolist()) == set(b.topk.tolist())
    # the worst direction: the k-th entry pushed down, the (k+1)-th pulled up
    order = np.argsort(-b.p, kind="stable")
    v = np.zeros(E.shape[0])
    v[order[k - 1]], v[order[k]] = 1 / np.sqrt(2), -1 / np.sqrt(2)
    assert b.along(v) == pytest.approx(b.radius)
    got = exact_flow(E + frac * b.radius * v, p0, K, cfg)
    assert set(topk(got, k)[0].tolist()) == set(b.topk.tolist())


def test_radius_fields_and_refusals():
    E, p0, C, K = pool(6)
    b = provable_radius(E, p0, K, KL, 3)
    assert b.radius == pytest.approx(b.radius_osc / np.sqrt(2))
    assert b.radius_osc == pytest.approx(b.margin / b.lipschitz)
    srt = np.sort(b.p)[::-1]
    assert b.margin == pytest.approx(np.log(srt[2]) - np.log(srt[3]))
    assert b.along(np.ones_like(E)) == np.inf  # a constant shift changes nothing
    # 1 + 1/(2h)·(1 - b^T)/(1 - b) with b = w·a: the closed form of L
    a = 1 / (KL.lam + 1 / (2 * KL.h) - KL.rho * b.kappa / 2)
    bb = a / (2 * KL.h)
    assert b.lipschitz == pytest.approx(a * (1 - bb**KL.T) / (1 - bb))
    with pytest.raises(ValueError, match="not convex"):
        provable_radius(E, p0, K, operating_point("base"), 3)
    with pytest.raises(ValueError, match="not convex"):
        provable_radius(E, p0, K, KL.replace(mode="bregman", alpha_prox=0.5), 3)
    with pytest.raises(ValueError, match="k must be smaller"):
        provable_radius(E, p0, K, KL, E.shape[0])
    with pytest.raises(ValueError, match="no provable radius"):
        provable_radius(E, p0, 100 * K - 50, NOPROX.replace(rho=1.0), 3)
    with pytest.raises(ValueError, match="shape"):
        provable_radius(E, p0[:-1], K, KL, 3)


def test_bound_never_exceeds_the_walk_on_the_bundled_queries():
    """Every SciFact fixture query of the E4 set-up, two top-band directions each: bound <= the exact flow's
    walk radius (first top-10 change along the direction), and report-sized ratios."""
    from jkofast.jko.theory import TheoryBatch, band_direction, band_edges, gibbs_laplacian
    from jkofast.studies.common import StudyOptions, study_inputs
    from jkofast.studies.theory import theory_energy

    inp = study_inputs(StudyOptions(progress=False), "test", study="theory", n_queries=4)
    batch = TheoryBatch.from_embeddings(inp.Z, inp.offsets, n_threads=1)
    E, p0 = theory_energy(inp.rerank, inp.offsets)
    off = inp.offsets
    rng = np.random.default_rng(0)
    ratios = []
    for q in range(inp.n_queries):
        Eq, pq, Kq = E[off[q] : off[q + 1]], p0[off[q] : off[q + 1]], batch.kernel(q)
        b = provable_radius(Eq, pq, Kq, KL, 10)
        U = gibbs_laplacian(batch.cost(q))[1]
        e = band_edges(U.shape[0], 4)
        for _ in range(2):
            v = band_direction(U, e[-2], e[-1], rng)
            walk = walk_radius(Eq, pq, Kq, v, KL, 10, step=0.02)
            assert 0 < b.along(v) <= walk
            ratios.append(b.along(v) / walk)
    assert 0 < np.mean(ratios) <= 1
