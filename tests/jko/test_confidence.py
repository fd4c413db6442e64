"""Dual-Rank confidence read-out (SPEC A.6.4): kernel vs a NumPy oracle, hand-worked cases, bad pools, lines."""

import io
import math

import numpy as np
import pytest
import reference_ot as ref
from numpy.testing import assert_allclose, assert_array_equal

from jkofast import _status, numba_threads
from jkofast.jko.confidence import (
    ConfidenceSignals,
    confidence_signals,
    dual_confidence,
    format_confidence_lines,
    write_confidence_file,
    write_confidence_lines,
)
from jkofast.jko.solver import operating_point, rerank_batch


def confidence_naive(p, f, logits):
    """SPEC A.6.4 literally: np.argmax (first index), np.median, softmax by definition, sorted p."""
    p = np.asarray(p, np.float64)
    f = np.asarray(f, np.float64)
    top1 = int(np.argmax(p))
    z = np.exp(np.asarray(logits, np.float64) - np.max(logits))
    srt = np.sort(p)[::-1]
    second = srt[1] if p.size > 1 else 0.0
    return top1, f[top1], f[top1] - np.median(f), float(np.max(z / z.sum())), srt[0] - second


def ragged(sizes, seed=0):
    rng = np.random.default_rng(seed)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(off[-1])
    p = rng.random(n)
    for q in range(len(sizes)):
        p[off[q] : off[q + 1]] /= p[off[q] : off[q + 1]].sum()
    return p, rng.normal(size=n), 3.0 * rng.normal(size=n), off


def check_against_oracle(s, p, f, lg, off, queries):
    for q in queries:
        sl = slice(off[q], off[q + 1])
        t, tf, cd, cs, cm = confidence_naive(p[sl], f[sl], lg[sl])
        assert s.status[q] == 0 and s.top1[q] == t
        assert s.conf_dual[q] == cd  # same selection, same (a + b)/2 as np.median
        assert_allclose(
            [s.top1_f[q], s.conf_dual[q], s.conf_softmax[q], s.conf_margin[q]], [tf, cd, cs, cm], rtol=1e-12
        )


def test_matches_oracle_on_ragged_pools():
    sizes = [1, 2, 3, 4, 7, 10, 11, 16, 33]  # odd and even medians, a single-entry pool, pools that partition
    p, f, lg, off = ragged(sizes)
    s = confidence_signals(p, f, lg, off)
    check_against_oracle(s, p, f, lg, off, range(len(sizes)))
    assert s.errors == {} and len(s) == len(sizes)


def test_hand_worked_ties_even_median_softmax():
    # p ties at the top: top1 = first index (1); f sorted = [1, 2, 3, 4] -> median (2 + 3)/2 = 2.5
    # conf_dual = f[1] - 2.5 = -1.5; margin = 0.5 - 0.5 = 0; softmax of [0, ln 3, 0, 0] = [1, 3, 1, 1]/6 -> 0.5
    s = confidence_signals([0.2, 0.4, 0.4, 0.0], [4.0, 1.0, 3.0, 2.0], [0.0, math.log(3.0), 0.0, 0.0], [0, 4])
    assert s.top1[0] == 1
    assert s.top1_f[0] == 1.0 and s.conf_dual[0] == -1.5 and s.conf_margin[0] == 0.0
    assert_allclose(s.conf_softmax[0], 0.5, rtol=1e-15)


def test_hand_worked_odd_median_and_minus_inf_logits():
    # f = [3, 1, 2]: median 2, top1 = 0 -> conf_dual 1; p_(1) - p_(2) = 0.6 - 0.3
    # logits [-inf, 0, 0]: the -inf entry has probability 0 -> max softmax 0.5
    s = confidence_signals([0.6, 0.1, 0.3], [3.0, 1.0, 2.0], [-np.inf, 0.0, 0.0], [0, 3])
    assert s.conf_dual[0] == 1.0 and s.conf_softmax[0] == 0.5
    assert_allclose(s.conf_margin[0], 0.3, rtol=1e-15)


def test_pool_of_one_is_defined():
    # conf_dual = f - f = 0; softmax of one logit = 1; margin = p_(1) - 0 (missing second entry = probability 0)
    s = confidence_signals([1.0], [0.7], [12.5], [0, 1])
    assert (s.top1[0], s.top1_f[0], s.conf_dual[0], s.conf_softmax[0], s.conf_margin[0]) == (0, 0.7, 0.0, 1.0, 1.0)


def test_bad_pools_reported_by_index_others_return():
    p, f, lg, off = ragged([3, 0, 3, 3, 3, 3, 3, 3], seed=1)
    n0 = lambda q: off[q]  # noqa: E731
    p[n0(2)] = np.nan
    f[n0(3) + 1] = np.inf
    lg[n0(4)] = np.nan
    lg[n0(5) + 2] = np.inf
    lg[n0(6) : n0(7)] = -np.inf
    p[n0(7)] = -0.1
    s = confidence_signals(p, f, lg, off)
    assert s.status.tolist() == [0, _status.EMPTY] + [_status.BAD_INPUT] * 6
    assert s.errors[1] == "empty pool"
    assert "p contains" in s.errors[2] and "f contains" in s.errors[3]
    assert "logits contain" in s.errors[4] and "logits contain" in s.errors[5]
    assert "all -inf" in s.errors[6] and "negative" in s.errors[7]
    assert s.top1[1:].tolist() == [-1] * 7 and np.isnan(s.conf_dual[1:]).all() and np.isnan(s.conf_margin[1:]).all()
    check_against_oracle(s, p, f, lg, off, [0])


def test_status_on_input_is_kept():
    p, f, lg, off = ragged([3, 4, 2], seed=2)
    s = confidence_signals(p, f, lg, off, status=np.array([0, _status.NON_FINITE, 0], np.int32))
    assert s.status.tolist() == [0, _status.NON_FINITE, 0] and "status 2" in s.errors[1]
    check_against_oracle(s, p, f, lg, off, [0, 2])
    with pytest.raises(ValueError, match="status"):
        confidence_signals(p, f, lg, off, status=np.zeros(2, np.int32))


def test_without_logits_softmax_is_nan():
    p, f, lg, off = ragged([3, 4], seed=3)
    s = confidence_signals(p, f, None, off)
    full = confidence_signals(p, f, lg, off)
    assert np.isnan(s.conf_softmax).all()
    assert_array_equal(s.conf_dual, full.conf_dual)
    assert_array_equal(s.conf_margin, full.conf_margin)


def test_thread_count_invariance_and_readonly_float32_inputs():
    p, f, lg, off = ragged([5, 6, 7, 8, 9, 10], seed=4)
    for a in (p, f, lg):
        a.setflags(write=False)
    with numba_threads(1):
        s1 = confidence_signals(p, f, lg, off)
    s2 = confidence_signals(p, f, lg, off, n_threads=2)
    for name in ("conf_dual", "top1_f", "conf_softmax", "conf_margin", "top1"):
        assert_array_equal(getattr(s1, name), getattr(s2, name))
    s32 = confidence_signals(p.astype(np.float32), f.astype(np.float32), lg.astype(np.float32), off)
    assert s32.conf_dual.dtype == np.float64
    check_against_oracle(s32, p.astype(np.float32), f.astype(np.float32), lg.astype(np.float32), off, range(6))


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(f=np.zeros(2)), ValueError, "f must have one entry"),
        (dict(logits=np.zeros(4)), ValueError, "logits must have one entry"),
        (dict(p=np.array(["a", "b", "c"])), TypeError, "p must be a real numeric"),
        (dict(offsets=np.array([0.0, 3.0])), TypeError, "offsets must be an integer"),
        (dict(offsets=np.array([0, 2])), ValueError, "offsets must start at 0 and end at 3"),
    ],
)
def test_bad_arguments_name_the_argument(kw, exc, match):
    args = dict(p=np.full(3, 1 / 3), f=np.zeros(3), logits=np.zeros(3), offsets=np.array([0, 3]))
    args.update(kw)
    with pytest.raises(exc, match=match):
        confidence_signals(args["p"], args["f"], args["logits"], args["offsets"])


def test_signal_accessor():
    s = confidence_signals([0.6, 0.4], [1.0, 0.0], [0.0, 0.0], [0, 2])
    assert s.signal("dual") is s.conf_dual and s.signal("conf_margin") is s.conf_margin
    with pytest.raises(ValueError, match="name"):
        s.signal("entropy")


# ---------------------------------------------------------------------------------------------
# the duals of rerank_batch are SPEC A.4.5's uniform-target read-out from p_T
# ---------------------------------------------------------------------------------------------
def small_batch(sizes=(5, 6, 4), d=4, seed=5):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(sum(sizes), d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    E = -rng.random(off[-1])
    return Z, E, off, 2.0 * rng.normal(size=off[-1])


@pytest.mark.parametrize("grad", ["implicit", "unrolled"])
def test_rerank_duals_are_the_uniform_target_readout(grad):
    cfg = operating_point("contrib", grad=grad, T=1, inner_steps=3)
    Z, E, off, lg = small_batch()
    res = rerank_batch(E, None, off, embeddings=Z, config=cfg, return_duals=True, n_threads=1)
    s = dual_confidence(res, lg)
    for q in range(3):
        sl = slice(off[q], off[q + 1])
        C, _ = ref.geometry_dense_naive(Z[sl])
        f_ref, _ = ref.dual_readout_naive(res.p[sl], C, cfg.sinkhorn_eps, n_iter=cfg.sinkhorn_iter)
        assert_allclose(res.f[sl], f_ref, rtol=1e-9, atol=1e-11)
        t, tf, cd, cs, cm = confidence_naive(res.p[sl], f_ref, lg[sl])
        assert s.top1[q] == t
        assert_allclose([s.conf_dual[q], s.conf_softmax[q], s.conf_margin[q]], [cd, cs, cm], rtol=1e-9, atol=1e-11)


def test_dual_confidence_needs_duals_and_keeps_failed_queries():
    cfg = operating_point("contrib", grad="implicit", T=1, inner_steps=2)
    Z, E, off, lg = small_batch(seed=6)
    with pytest.raises(ValueError, match="return_duals=True"):
        dual_confidence(rerank_batch(E, None, off, embeddings=Z, config=cfg, n_threads=1), lg)
    E[off[1]] = np.nan
    res = rerank_batch(E, None, off, embeddings=Z, config=cfg, return_duals=True, n_threads=1)
    s = dual_confidence(res, lg)
    assert s.status[1] == res.status[1] != 0 and np.isnan(s.conf_dual[1])
    assert s.status[0] == s.status[2] == 0 and np.isfinite(s.conf_dual[[0, 2]]).all()


# ---------------------------------------------------------------------------------------------
# confidence lines (jkofast rerank --confidence FILE)
# ---------------------------------------------------------------------------------------------
def test_confidence_lines_round_trip_text_and_binary():
    p, f, lg, off = ragged([3, 4, 1, 0], seed=7)
    s = confidence_signals(p, f, lg, off)
    qids = ["q1", "q-2", "3", "empty"]
    buf = io.StringIO()
    assert write_confidence_lines(buf, qids, s) == 4
    lines = buf.getvalue().splitlines()
    assert lines[0] == "# query_id\tconf_dual\tconf_softmax\tconf_margin" and len(lines) == 5
    for q, line in enumerate(lines[1:]):
        cols = line.split("\t")
        assert cols[0] == qids[q] and len(cols) == 4
        got = [float(x) for x in cols[1:]]
        want = [s.conf_dual[q], s.conf_softmax[q], s.conf_margin[q]]
        if q == 3:  # the empty pool: nan
            assert cols[1:] == ["nan"] * 3
        else:
            assert got == want  # repr round-trips exactly
    raw = io.BytesIO()
    write_confidence_lines(raw, qids, s, header=False)
    assert raw.getvalue().decode("utf-8") == "".join(x + "\n" for x in lines[1:])


def test_confidence_lines_from_mapping_and_bad_input():
    conf = {"conf_dual": [0.1], "conf_softmax": [1 / 3], "conf_margin": [0.0]}
    assert format_confidence_lines(["a"], conf, header=False) == f"a\t0.1\t{1 / 3!r}\t0.0\n"
    with pytest.raises(ValueError, match="query_ids has 2 entries"):
        format_confidence_lines(["a", "b"], conf)
    with pytest.raises(ValueError, match="tab or line break"):
        format_confidence_lines(["a\tb"], conf)
    with pytest.raises(ValueError, match="missing"):
        format_confidence_lines(["a"], {"conf_dual": [0.1]})
    with pytest.raises(TypeError, match="conf must be"):
        format_confidence_lines(["a"], [0.1, 0.2, 0.3])


def test_write_confidence_file(tmp_path):
    s = ConfidenceSignals(*(np.array([0.5]) for _ in range(4)), np.zeros(1, np.int64), np.zeros(1, np.int32))
    path = write_confidence_file(tmp_path / "conf.tsv", ["q"], s)
    assert open(path).read() == "# query_id\tconf_dual\tconf_softmax\tconf_margin\nq\t0.5\t0.5\t0.5\n"
    with pytest.raises(ValueError, match="is a folder"):
        write_confidence_file(tmp_path, ["q"], s)
    with pytest.raises(ValueError, match="does not exist"):
        write_confidence_file(tmp_path / "nope" / "conf.tsv", ["q"], s)
