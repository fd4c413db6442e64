"""NM-JKO metric learning (SPEC A.6.2): InfoNCE value and gradient, AdamW, training, selection, files.

Oracles are naive NumPy (per-query loops, ``scipy.special.logsumexp``) written from the SPEC's
formulas; the hand-written gradient is checked against central finite differences.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.special import logsumexp

from jkofast import _codes
from jkofast._threads import numba_threads
from jkofast.jko.metric import (
    FORMAT_VERSION,
    LearnedMetric,
    infonce_loss,
    init_projection,
    load_metric,
    save_metric,
    select_training_queries,
    train_metric,
)
from jkofast.kernels.jko import metric as K

# ----------------------------------------------------------------------------- naive oracles


def oracle_infonce(W, zq, Zp, gold):
    """``-mean_{g gold} log softmax(s)_g`` with ``s_j = -||W (zq - z_j)||²`` (one query)."""
    s = np.array([-np.sum((W @ (zq - z)) ** 2) for z in Zp])
    logp = s - logsumexp(s)
    return -np.mean(logp[np.asarray(gold, bool)])


def oracle_grad(W, zq, Zp, gold):
    """``-2 Σ_j c_j W d_j d_jᵀ`` with ``c = softmax(s) - gold/n_gold`` (explicit loop)."""
    s = np.array([-np.sum((W @ (zq - z)) ** 2) for z in Zp])
    sm = np.exp(s - logsumexp(s))
    c = sm - np.asarray(gold, float) / np.sum(gold)
    G = np.zeros_like(W)
    for j, z in enumerate(Zp):
        dj = zq - z
        G += c[j] * (-2.0) * np.outer(W @ dj, dj)
    return G


def oracle_adamw(W, grads, lr=5e-3, wd=1e-4, b1=0.9, b2=0.999, eps=1e-8):
    """torch.optim.AdamW as its documentation writes it (decoupled decay, bias-corrected moments)."""
    W = W.copy()
    m = np.zeros_like(W)
    v = np.zeros_like(W)
    for t, g in enumerate(grads, start=1):
        W = W - lr * wd * W
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1**t)
        vhat = v / (1 - b2**t)
        W = W - lr * mhat / (np.sqrt(vhat) + eps)
    return W


def oracle_train(Q, off, Z, gold, queries, r, epochs, seed, lr=5e-3, wd=1e-4):
    """The whole procedure: init, per-epoch in-place shuffle by default_rng(0), one AdamW step per query."""
    d = Q.shape[1]
    W = np.hstack([np.eye(r), np.zeros((r, d - r))]) + 0.01 * np.random.default_rng(seed).standard_normal((r, d))
    m = np.zeros_like(W)
    v = np.zeros_like(W)
    order = list(queries)
    rng = np.random.default_rng(0)
    t = 0
    hist = []
    for _ in range(epochs):
        rng.shuffle(order)
        losses = []
        for q in order:
            sl = slice(off[q], off[q + 1])
            losses.append(oracle_infonce(W, Q[q], Z[sl], gold[sl]))
            g = oracle_grad(W, Q[q], Z[sl], gold[sl])
            t += 1
            W = W - lr * wd * W
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            W = W - lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        hist.append(np.mean(losses))
    return W, np.array(hist)


# ----------------------------------------------------------------------------- fixtures


def _batch(seed=0, d=6, sizes=(5, 7, 4, 6)):
    rng = np.random.default_rng(seed)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    Q = rng.standard_normal((len(sizes), d))
    Z = rng.standard_normal((int(off[-1]), d))
    gold = np.zeros(int(off[-1]), bool)
    for q, m in enumerate(sizes):
        gold[off[q] + rng.choice(m, 1 + q % 2, replace=False)] = True
    return Q, off, Z, gold


def _kernel_grad(W, zq, Zp, gold):
    m = Zp.shape[0]
    work = K.infonce_work(W.shape[0], W.shape[1], m)
    loss, st = K.infonce_grad(W, zq, Zp, 0, m, gold, True, work)
    return loss, st, work.G.copy()


# ----------------------------------------------------------------------------- InfoNCE value


def test_infonce_hand_worked():
    # W = I, z_q = 0, rows (1,0), (0,0), (0,2): s = (-1, 0, -4); gold = {0} -> loss = LSE(s) + 1
    W = np.eye(2)
    Z = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    expected = np.log(np.exp(-1.0) + 1.0 + np.exp(-4.0)) + 1.0
    got = infonce_loss(W, np.zeros((1, 2)), [0, 3], Z, np.array([True, False, False]))
    np.testing.assert_allclose(got, [expected], rtol=1e-14)
    # two golds {0, 2}: average of their -log p
    got2 = infonce_loss(W, np.zeros((1, 2)), [0, 3], Z, np.array([True, False, True]))
    np.testing.assert_allclose(got2, [np.log(np.exp(-1.0) + 1.0 + np.exp(-4.0)) + 2.5], rtol=1e-14)


@pytest.mark.parametrize("r", [3, 6])
def test_infonce_matches_oracle_per_query(r):
    Q, off, Z, gold = _batch(1)
    W = init_projection(r, Q.shape[1], seed=4) * 1.7
    got = infonce_loss(W, Q, off, Z, gold)
    want = [oracle_infonce(W, Q[q], Z[off[q] : off[q + 1]], gold[off[q] : off[q + 1]]) for q in range(len(Q))]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_infonce_is_stable_for_large_scores():
    # ||W d||² ~ 1e4: a naive exp would underflow to 0/0; the max-shifted LSE stays finite
    Q, off, Z, gold = _batch(2)
    W = 40.0 * init_projection(3, Q.shape[1], seed=0)
    got = infonce_loss(W, Q, off, Z, gold)
    want = [oracle_infonce(W, Q[q], Z[off[q] : off[q + 1]], gold[off[q] : off[q + 1]]) for q in range(len(Q))]
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_infonce_invariants():
    # loss >= 0 with one gold (−log p), and = log M when every score ties (W = 0)
    Q, off, Z, gold = _batch(3)
    W = init_projection(2, Q.shape[1])
    one = gold.copy()
    for q in range(len(Q)):
        seg = one[off[q] : off[q + 1]]
        seg[:] = False
        seg[0] = True
    assert np.all(infonce_loss(W, Q, off, Z, one) >= 0)
    np.testing.assert_allclose(infonce_loss(np.zeros_like(W), Q, off, Z, gold), np.log(np.diff(off)), rtol=1e-14)


# ----------------------------------------------------------------------------- gradient


# r = 2: the row-by-row remainder only; 4: one block of four rows; 7: a block and three remainder rows
@pytest.mark.parametrize(("seed", "r"), [(0, 2), (1, 4), (2, 7)])
def test_gradient_matches_central_differences(seed, r):
    rng = np.random.default_rng(seed)
    d, m = 8, 5
    W = rng.standard_normal((r, d))
    zq = rng.standard_normal(d)
    Zp = rng.standard_normal((m, d))
    gold = np.zeros(m, bool)
    gold[[1, 3]] = True
    loss, st, G = _kernel_grad(W, zq, Zp, gold)
    assert st == _codes.OK
    np.testing.assert_allclose(loss, oracle_infonce(W, zq, Zp, gold), rtol=1e-13)
    h = 1e-6
    fd = np.zeros_like(W)
    for k in range(r):
        for t in range(d):
            Wp, Wm = W.copy(), W.copy()
            Wp[k, t] += h
            Wm[k, t] -= h
            fd[k, t] = (oracle_infonce(Wp, zq, Zp, gold) - oracle_infonce(Wm, zq, Zp, gold)) / (2 * h)
    np.testing.assert_allclose(G, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(G, oracle_grad(W, zq, Zp, gold), rtol=1e-12, atol=1e-14)


def test_gradient_zero_when_all_scores_tie_and_all_gold():
    # every row gold -> c = softmax - 1/M; with W = 0, softmax = 1/M exactly -> zero gradient
    rng = np.random.default_rng(5)
    _, _, G = _kernel_grad(np.zeros((2, 3)), rng.standard_normal(3), rng.standard_normal((4, 3)), np.ones(4, bool))
    np.testing.assert_allclose(G, 0.0, atol=1e-15)


def test_kernel_status_without_gold():
    rng = np.random.default_rng(6)
    loss, st, _ = _kernel_grad(np.eye(2, 3), rng.standard_normal(3), rng.standard_normal((4, 3)), np.zeros(4, bool))
    assert st == _codes.EMPTY and np.isnan(loss)


# ----------------------------------------------------------------------------- AdamW


def test_adamw_step_matches_torch_semantics_oracle():
    rng = np.random.default_rng(7)
    W0 = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) * s for s in (1.0, 1e-3, 5.0, 0.0, 1e-7)]
    W = W0.copy()
    m = np.zeros_like(W)
    v = np.zeros_like(W)
    for t, g in enumerate(grads, start=1):
        K.adamw_step(W, g, m, v, t, 5e-3, 1e-4, 0.9, 0.999, 1e-8)
    np.testing.assert_allclose(W, oracle_adamw(W0, grads), rtol=1e-13, atol=1e-15)


def test_adamw_first_step_moves_each_entry_by_about_lr():
    # t = 1: m̂ = g, v̂ = g², so the update is lr·sign(g) (plus the decay) for |g| >> eps
    W = np.ones((1, 3))
    g = np.array([[2.0, -0.5, 3.0]])
    K.adamw_step(W, g, np.zeros_like(W), np.zeros_like(W), 1, 5e-3, 1e-4, 0.9, 0.999, 1e-8)
    np.testing.assert_allclose(W, (1 - 5e-7) - 5e-3 * np.sign(g), rtol=1e-7)


# ----------------------------------------------------------------------------- training


@pytest.mark.parametrize("r", [3, 5])
def test_training_matches_naive_procedure(r):
    Q, off, Z, gold = _batch(8)
    queries = np.array([2, 0, 3, 1])
    m = train_metric(Q, off, Z, gold, queries=queries, r=r, epochs=4, seed=3)
    W, hist = oracle_train(Q, off, Z, gold, queries, r=r, epochs=4, seed=3)
    np.testing.assert_allclose(m.W, W, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(m.loss_history, hist, rtol=1e-11)
    final = [oracle_infonce(W, Q[q], Z[off[q] : off[q + 1]], gold[off[q] : off[q + 1]]) for q in queries]
    np.testing.assert_allclose(m.final_loss, np.mean(final), rtol=1e-11)
    assert m.n_train == 4 and m.epochs == 4


def test_training_is_deterministic_and_thread_invariant():
    Q, off, Z, gold = _batch(9)
    with numba_threads(1):
        a = train_metric(Q, off, Z, gold, r=2, epochs=3)
    with numba_threads(2):
        b = train_metric(Q, off, Z, gold, r=2, epochs=3)
    np.testing.assert_array_equal(a.W, b.W)
    np.testing.assert_array_equal(a.loss_history, b.loss_history)
    c = train_metric(Q, off, Z, gold, r=2, epochs=3, seed=1)
    assert not np.array_equal(a.W, c.W)


def test_order_rng_continues_the_callers_stream():
    Q, off, Z, gold = _batch(10)
    rng = np.random.default_rng(0)
    rng.shuffle([0, 1, 2])  # e.g. the selection's draw
    a = train_metric(Q, off, Z, gold, r=2, epochs=2, order_rng=rng)
    b = train_metric(Q, off, Z, gold, r=2, epochs=2)  # fresh default_rng(0)
    assert not np.array_equal(a.W, b.W)


def test_training_lowers_the_loss_on_a_learnable_problem():
    # gold rows are near the query in the first coordinates only; distractors differ there
    rng = np.random.default_rng(11)
    d, nq, m = 5, 6, 8
    Q = rng.standard_normal((nq, d))
    Z = np.repeat(Q, m, axis=0) + rng.standard_normal((nq * m, d))
    gold = np.zeros(nq * m, bool)
    gold[::m] = True
    Z[gold, :2] = Q[:, :2]
    met = train_metric(Q, np.arange(nq + 1) * m, Z, gold, r=2, epochs=30)
    assert met.loss_history[-1] < met.loss_history[0]
    assert met.final_loss < met.loss_history[0]


def test_zero_epochs_returns_the_init():
    Q, off, Z, gold = _batch(12)
    met = train_metric(Q, off, Z, gold, r=3, epochs=0, seed=2)
    d = Q.shape[1]
    want = np.hstack([np.eye(3), np.zeros((3, d - 3))]) + 0.01 * np.random.default_rng(2).standard_normal((3, d))
    np.testing.assert_array_equal(met.W, want)
    assert met.loss_history.shape == (0,)


def test_float32_inputs_give_the_float64_result_of_their_values():
    Q, off, Z, gold = _batch(13)
    a = train_metric(Q.astype(np.float32), off, Z.astype(np.float32), gold, r=2, epochs=2)
    b = train_metric(
        Q.astype(np.float32).astype(np.float64), off, Z.astype(np.float32).astype(np.float64), gold, r=2, epochs=2
    )
    np.testing.assert_array_equal(a.W, b.W)
    assert a.W.dtype == np.float64


# ----------------------------------------------------------------------------- selection


def test_select_training_queries_protocol():
    qids = ["a", "b", "c", "d", "e"]
    pool_docs = ["x", "y", "z", "y", "w", "x", "u", "v", "z"]
    off = np.array([0, 2, 4, 5, 7, 9])
    qrels = {"a": {"y": 0}, "b": {"q": 1}, "c": {"w": 2}, "d": {}, "e": {"v": 1, "z": 1}}
    sel = select_training_queries(qids, qrels, off, pool_docs, n_train=80)
    # gold = listed in qrels, label 0 included (a's "y")
    np.testing.assert_array_equal(sel.gold_mask, [0, 1, 0, 0, 1, 0, 0, 1, 1])
    eligible = [0, 2, 4]  # a, c, e (b's doc is not in its pool; d has none)
    np.random.default_rng(0).shuffle(eligible)
    np.testing.assert_array_equal(sel.index, eligible)
    assert sel.query_ids == [qids[i] for i in eligible]
    assert (sel.n_candidates, sel.n_eligible, sel.n_train) == (5, 3, 3)
    two = select_training_queries(qids, qrels, off, pool_docs, n_train=2)
    np.testing.assert_array_equal(two.index, eligible[:2])


def test_select_training_queries_errors():
    with pytest.raises(ValueError, match="no eligible training query"):
        select_training_queries(["a"], {"a": {"z": 1}}, [0, 2], ["x", "y"])
    with pytest.raises(ValueError, match="pool_offsets"):
        select_training_queries(["a", "b"], {}, [0, 2], ["x", "y"])
    with pytest.raises(ValueError, match="n_train"):
        select_training_queries(["a"], {"a": {"x": 1}}, [0, 2], ["x", "y"], n_train=0)


# ----------------------------------------------------------------------------- files


def test_save_load_round_trip(tmp_path):
    Q, off, Z, gold = _batch(14)
    met = train_metric(Q, off, Z, gold, r=2, epochs=2)
    path = save_metric(met, tmp_path / "w.npz")
    back = load_metric(path, d=Q.shape[1])
    np.testing.assert_array_equal(back.W, met.W)
    np.testing.assert_array_equal(back.loss_history, met.loss_history)
    assert (back.n_train, back.epochs, back.seed, back.final_loss) == (met.n_train, met.epochs, 0, met.final_loss)
    # every other scalar field (the training record included) is stored as it was
    scalars = [f.name for f in dataclasses.fields(met) if np.ndim(getattr(met, f.name)) == 0 and f.name != "seed"]
    assert {n: getattr(back, n) for n in scalars} == {n: getattr(met, n) for n in scalars}
    # a bare array is accepted too; the suffix is added
    p2 = save_metric(met.W, tmp_path / "bare")
    assert p2.endswith("bare.npz")
    np.testing.assert_array_equal(load_metric(p2).W, met.W)


def test_load_metric_validates(tmp_path):
    good = tmp_path / "good.npz"
    save_metric(np.eye(2, 3), good)
    with pytest.raises(ValueError, match="d = 4"):
        load_metric(good, d=4)
    with pytest.raises(FileNotFoundError):
        load_metric(tmp_path / "missing.npz")
    bad = tmp_path / "other.npz"
    np.savez(bad, W=np.eye(2))
    with pytest.raises(ValueError, match="not an NM-JKO metric file"):
        load_metric(bad)
    np.savez(bad, format=np.array("jkofast-nm-jko-metric"), version=np.array(FORMAT_VERSION + 1), W=np.eye(2))
    with pytest.raises(ValueError, match="unsupported metric file version"):
        load_metric(bad)
    np.savez(bad, format=np.array("jkofast-nm-jko-metric"), version=np.array(FORMAT_VERSION), W=np.ones(3))
    with pytest.raises(ValueError, match="2-D"):
        load_metric(bad)
    np.savez(bad, format=np.array("jkofast-nm-jko-metric"), version=np.array(FORMAT_VERSION), W=np.full((2, 2), np.nan))
    with pytest.raises(ValueError, match="NaN or inf"):
        load_metric(bad)
    text = tmp_path / "text.npz"
    text.write_text("not a zip")
    with pytest.raises(ValueError, match="not a readable"):
        load_metric(text)
    with pytest.raises(ValueError, match="folder"):
        save_metric(np.eye(2), tmp_path)
    with pytest.raises(ValueError, match="NaN or inf"):
        save_metric(LearnedMetric(W=np.full((1, 2), np.inf), loss_history=np.zeros(0)), tmp_path / "x.npz")


# ----------------------------------------------------------------------------- bad input


def test_no_eligible_training_query():
    Q, off, Z, gold = _batch(15)
    with pytest.raises(ValueError, match="no eligible training query"):
        train_metric(Q, off, Z, np.zeros_like(gold), r=2, epochs=1)
    with pytest.raises(ValueError, match="no eligible training query"):
        train_metric(Q, off, Z, gold, queries=np.array([], np.int64), r=2, epochs=1)
    no_gold_q = np.zeros_like(gold)
    no_gold_q[off[1]] = True
    with pytest.raises(ValueError, match="query 0 has an empty pool or no gold row"):
        train_metric(Q, off, Z, no_gold_q, queries=np.array([1, 0]), r=2, epochs=1)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda a: {**a, "query_emb": a["query_emb"][:, :-1]}, "pool_emb must have d"),
        (lambda a: {**a, "query_emb": a["query_emb"][:-1]}, "pool_offsets describes"),
        (lambda a: {**a, "pool_emb": a["pool_emb"][:-1]}, "pool_offsets must start at 0"),
        (lambda a: {**a, "gold_mask": a["gold_mask"][:-1]}, "gold_mask must be 1-D"),
        (lambda a: {**a, "query_emb": a["query_emb"][0]}, "query_emb must be 2-dimensional"),
        (
            lambda a: {
                **a,
                "pool_emb": np.where(
                    np.arange(a["pool_emb"].size).reshape(a["pool_emb"].shape) == 7, np.nan, a["pool_emb"]
                ),
            },
            "pool_emb contains NaN",
        ),
        (lambda a: {**a, "query_emb": a["query_emb"] * np.inf}, "query_emb contains NaN or inf"),
        (lambda a: {**a, "r": 99}, "r must be <= d"),
        (lambda a: {**a, "lr": 0.0}, "lr must be > 0"),
        (lambda a: {**a, "weight_decay": -1.0}, "weight_decay must be >= 0"),
        (lambda a: {**a, "queries": np.array([0, 9])}, "queries must be positions"),
    ],
)
def test_bad_input_names_the_argument(change, match):
    Q, off, Z, gold = _batch(16)
    args = {"query_emb": Q, "pool_offsets": off, "pool_emb": Z, "gold_mask": gold, "r": 2, "epochs": 1}
    a = change(args)
    with pytest.raises(ValueError, match=match):
        train_metric(a.pop("query_emb"), a.pop("pool_offsets"), a.pop("pool_emb"), a.pop("gold_mask"), **a)


def test_bad_types():
    Q, off, Z, gold = _batch(17)
    with pytest.raises(TypeError, match="gold_mask"):
        train_metric(Q, off, Z, gold.astype(float), r=2, epochs=1)
    with pytest.raises(TypeError, match="queries"):
        train_metric(Q, off, Z, gold, queries=np.array([0.0]), r=2, epochs=1)
    with pytest.raises(TypeError, match="epochs"):
        train_metric(Q, off, Z, gold, r=2, epochs=1.5)
    with pytest.raises(ValueError, match="W must have d"):
        infonce_loss(np.eye(2, 3), Q, off, Z, gold)
    # integer 0/1 gold masks are accepted
    a = train_metric(Q, off, Z, gold.astype(np.int8), r=2, epochs=1)
    b = train_metric(Q, off, Z, gold, r=2, epochs=1)
    np.testing.assert_array_equal(a.W, b.W)


def test_divergence_is_reported():
    Q, off, Z, gold = _batch(18)
    with pytest.raises(FloatingPointError, match="epoch 0"):
        train_metric(Q * 1e200, off, Z, gold, r=2, epochs=1)
