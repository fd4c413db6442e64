"""SparseGeometricRAG query path (SPEC B.6-B.10) vs the naive oracle; threads; storage;
bad input."""

from __future__ import annotations

import os

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from test_sgr_build import SMALL, synthetic_corpus

import reference as ref
from jkofast._threads import numba_threads
from jkofast.kernels.sgr import query as gk
from jkofast.sgr._engine import new_scratch
from jkofast.sgr.retriever import SparseGeometricRetriever

QUERIES = [
    "w00 w03 w07",
    "w01 w12 w12 w20",
    "w05",
    "w09 w02 w28 w13 w04 w17 w21 w22",
    "w07 unknownword",
    "w15 w16 w18 w19 w25 w26 w27 w29 w24 w23 w11 w10 w08",
]


@pytest.fixture(scope="module")
def retr():
    return SparseGeometricRetriever(**SMALL).fit(synthetic_corpus(n_docs=40, seed=1))


def _dense_q(r, text):
    qi, qt, qv = r.transform_queries([text])
    q = np.zeros(r.n_terms_)
    q[qt] = qv.astype(np.float64)
    return q


def _sem_lists(r):
    ix = r._ix
    return {
        t: list(
            zip(
                ix["sem_idx"][ix["sem_indptr"][t] : ix["sem_indptr"][t + 1]].tolist(),
                ix["sem_val"][ix["sem_indptr"][t] : ix["sem_indptr"][t + 1]].astype(np.float64).tolist(),
                strict=True,
            )
        )
        for t in range(r.n_terms_)
    }


def _work(r, qi, qt):
    """A fresh one-chunk ``SGRWork`` (stamps -1, tables zero) for the batch ``qi``/``qt``."""
    sc = new_scratch(1, r.n_terms_, r.n_docs_, r.params["n_memberships"])
    prm = r._query.params(r.params["pool_size"], qi)
    sizes = gk._batch_sizes(qi, qt, r._query.index().sem_indptr, prm, sc.dmr.shape[2])
    return gk.chunk_work(0, sc, sizes, r.n_docs_)


def test_query_vectoriser_matches_sklearn(retr):
    from sklearn.feature_extraction.text import TfidfVectorizer

    corpus = synthetic_corpus(n_docs=40, seed=1)
    vec = TfidfVectorizer(token_pattern=r"(?u)\b\w\w+\b", dtype=np.float32).fit(corpus)
    Q = vec.transform(QUERIES).toarray()
    for i, q in enumerate(QUERIES):
        assert_allclose(_dense_q(retr, q), Q[i], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("qtext", QUERIES)
def test_routing_stage(retr, qtext):
    ix = retr._ix
    qi, qt, qv = retr.transform_queries([qtext])
    V = retr.n_terms_
    out_t = np.empty(V + 64, np.int64)
    out_w = np.empty(V + 64, np.float64)
    n = gk.route_query(
        qt,
        qv,
        ix["g_indptr"],
        ix["g_idx"],
        ix["g_val"],
        0.1,
        SMALL["route_budget"],
        np.full(V, -1, np.int64),
        np.zeros(V),
        0,
        np.empty(V, np.int64),
        out_t,
        out_w,
        np.empty(V + 64),
        np.empty(V + 64, np.int64),
    )
    G = np.zeros((V, V))
    for t in range(V):
        lo, hi = ix["g_indptr"][t], ix["g_indptr"][t + 1]
        G[t, ix["g_idx"][lo:hi]] = ix["g_val"][lo:hi]
    rt, rw = ref.sgr_route(_dense_q(retr, qtext), G, 0.1, SMALL["route_budget"])
    assert_array_equal(out_t[:n], rt)
    assert_allclose(out_w[:n], rw, rtol=1e-12)
    assert n == max(len(qt), min(SMALL["route_budget"], n))  # > budget literals: all kept, none added


@pytest.mark.parametrize("qtext", QUERIES)
def test_local_score_stage(retr, qtext):
    ix = retr._ix
    p = retr.params
    qi, qt, qv = retr.transform_queries([qtext])
    o = ref.sgr_query(ix, _dense_q(retr, qtext), p, _sem_lists(retr))
    rt, rw = o["route_terms"], o["route_w"]
    ws = _work(retr, qi, qt)
    ws.mark[qt] = 1
    ws.qval[qt] = qv
    ws.rt[: len(rt)] = rt
    ws.rw[: len(rt)] = rw
    nu = gk.stage_local_score(7, qt, len(rt), retr._query.index(), retr._query.params(p["pool_size"], qi), ws)
    dp, esum, csum, ulist, qbits = ws.dp, ws.esum, ws.csum, ws.ulist, ws.qbits
    assert not qbits.any()  # the query-term bitset is cleared on exit
    # positions: ulist[a] is the doc at position a, dp[d] = (stamp, a); other docs unstamped
    assert_array_equal(dp[ulist[:nu], 0], 7)
    assert_array_equal(dp[ulist[:nu], 1], np.arange(nu))
    assert (dp[:, 0] == 7).sum() == nu
    U = np.sort(ulist[:nu])
    assert_array_equal(U, o["U"])
    pos = dp[U, 1]
    tail = esum[pos] + p["lam_m"] * csum[pos]
    assert_allclose(tail, [o["tail"][d] for d in U], rtol=1e-9, atol=1e-12)


def _check_against_oracle(r, qtext, P=None):
    pl = r.pool([qtext], P=P)
    p = dict(r.params)
    if P is not None:
        p["pool_size"] = P
    o = ref.sgr_query(r._ix, _dense_q(r, qtext), p, _sem_lists(r))
    n = pl.n[0]
    assert n == len(o["pool"])
    assert pl.n_routed_docs[0] == len(o["U"])
    if n == 0:
        assert pl.status[0] == gk.STATUS_EMPTY
        return
    docs = pl.doc[0, :n]
    # rescue / shortlist: same pool set (pre scores compared where the oracle has no near-tie)
    assert set(docs.tolist()) == set(o["pool"].tolist())
    for name in ("tail", "lex1", "lexadj", "sem", "rare", "relevance"):
        got = getattr(pl, name)[0, :n]
        want = [o[name][d] for d in docs]
        assert_allclose(got, want, rtol=1e-7, atol=1e-9, err_msg=name)
    # final order incl. diversity
    assert_array_equal(docs, o["order"])
    assert np.all(pl.doc[0, n:] == -1) and np.all(np.isnan(pl.relevance[0, n:]))


@pytest.mark.parametrize(
    "gate",
    [
        dict(gate_min=4, gate_mult=0),
        dict(gate_min=1, gate_mult=1),
        dict(gate_min=9, gate_mult=0, rescue_mode="scan"),
        dict(gate_min=9, gate_mult=0, rescue_mode="postings"),
    ],
)
def test_tail_gate_vs_oracle(retr, gate):
    """The optional tail gate keeps the top max(gate_min, gate_mult·P) routed documents by
    tail (moved to the front positions); the rest of the query path sees only them."""
    retr.set_params(tail_gate=True, **gate)
    try:
        for qtext in QUERIES:
            _check_against_oracle(retr, qtext)
    finally:
        retr.set_params(tail_gate=False, gate_min=10_000, gate_mult=40, rescue_mode="auto")


@pytest.mark.parametrize("qtext", QUERIES)
def test_full_query_vs_oracle(retr, qtext):
    _check_against_oracle(retr, qtext)


@pytest.mark.parametrize("qtext", QUERIES[:4])
def test_full_query_large_pool_and_lowest_term_id(retr, qtext):
    retr.set_params(semantic_neighbours="lowest_term_id", n_diverse=10)
    try:
        _check_against_oracle(retr, qtext, P=1000)
    finally:
        retr.set_params(semantic_neighbours="strongest", n_diverse=SMALL["n_diverse"])


def test_set_params_remakes_semantic_lists_only_when_they_change():
    """A query-parameter change keeps the semantic neighbour lists (no rebuild); a change of
    ``semantic_k`` / ``semantic_neighbours`` gives the lists of a fresh fit with that value."""
    docs = synthetic_corpus(n_docs=40, seed=1)
    r = SparseGeometricRetriever(**SMALL).fit(docs)
    sem = r._ix["sem_idx"]
    r.set_params(tail_gate=True, n_diverse=1)
    assert r._ix["sem_idx"] is sem
    for change in (
        dict(semantic_k=3),
        dict(semantic_neighbours="lowest_term_id"),
        dict(semantic_k=SMALL.get("semantic_k", 16), semantic_neighbours="strongest"),
    ):
        r.set_params(**change)
        fresh = SparseGeometricRetriever(**r.params).fit(docs)
        for key in ("sem_indptr", "sem_idx", "sem_val"):
            assert_array_equal(r._ix[key], fresh._ix[key])
        assert_array_equal(r.search(QUERIES, k=5)[0], fresh.search(QUERIES, k=5)[0])


def test_diversity_off_is_plain_relevance_order(retr):
    retr.set_params(n_diverse=1)
    try:
        pl = retr.pool(QUERIES)
        for i in range(len(QUERIES)):
            n = pl.n[i]
            rel = pl.relevance[i, :n]
            order = np.lexsort((pl.doc[i, :n], -rel))
            assert_array_equal(order, np.arange(n))
    finally:
        retr.set_params(n_diverse=SMALL["n_diverse"])


def test_search_matches_pool_and_padding(retr):
    idx, sc = retr.search(QUERIES, k=12)
    pl = retr.pool(QUERIES)
    assert idx.shape == (len(QUERIES), 12) and idx.dtype == np.int64 and sc.dtype == np.float32
    for i in range(len(QUERIES)):
        n = min(12, pl.n[i])
        assert_array_equal(idx[i, :n], pl.doc[i, :n])
        assert np.all(sc[i, :n] <= pl.relevance[i, :n].astype(np.float32))
        assert np.all(np.diff(sc[i, :n]) < 0)  # strictly decreasing: order survives re-sorting
        rel = pl.relevance[i, :n].astype(np.float32)
        if n:
            # uncapped ranks (clearly below every earlier relevance) keep their relevance
            prev_min = np.concatenate([[np.inf], np.minimum.accumulate(rel)[:-1]])
            free = rel < prev_min - 1e-4
            assert_array_equal(sc[i, :n][free], rel[free])
        assert np.all(idx[i, n:] == -1) and np.all(sc[i, n:] == -np.inf)


def test_empty_and_unknown_queries(retr):
    idx, sc = retr.search(["", "zzzz qqqq", "a", "w03"], k=3)
    assert np.all(idx[:3] == -1) and np.all(sc[:3] == -np.inf)
    assert idx[3, 0] >= 0 and np.isfinite(sc[3, 0])
    pl = retr.pool(["", "w03"])
    assert pl.status[0] == gk.STATUS_EMPTY and pl.status[1] == gk.STATUS_OK
    idx, sc = retr.search([], k=3)
    assert idx.shape == (0, 3)


def test_thread_invariance(retr):
    qs = QUERIES * 3
    with numba_threads(1):
        a = retr.pool(qs, n_threads=1)
    with numba_threads(2):
        b = retr.pool(qs, n_threads=2)
    for name in ("doc", "n", "tail", "lexadj", "sem", "rare", "relevance", "lex1"):
        assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_serial_and_parallel_kernels_agree(retr):
    """One query per call runs ``sgr_query_serial``; a batch runs ``sgr_query_batch`` (one chunk
    at one thread, two at 2 threads): same ids, scores and pool components, bit for bit."""
    qs = QUERIES * 3
    batch = retr.pool(qs, n_threads=2)
    one_thread = retr.pool(qs, n_threads=1)
    singles = [retr.pool([q], n_threads=2) for q in qs]
    ids2, sc2 = retr.search(qs, k=5, n_threads=2)
    for name in ("doc", "n", "tail", "lexadj", "sem", "rare", "relevance", "lex1", "status"):
        assert_array_equal(getattr(one_thread, name), getattr(batch, name), err_msg=name)
        assert_array_equal(np.concatenate([getattr(x, name) for x in singles]), getattr(batch, name), err_msg=name)
    for i, q in enumerate(qs):
        ids1, sc1 = retr.search([q], k=5)
        assert_array_equal(ids1[0], ids2[i])
        assert_array_equal(sc1[0], sc2[i])


def test_tail_gate_and_bm25_fusion(retr):
    base = retr.pool(QUERIES)
    retr.set_params(tail_gate=True, gate_min=10_000)  # gate keeps everything -> identical
    try:
        g = retr.pool(QUERIES)
        assert_array_equal(g.doc, base.doc)
        retr.set_params(gate_min=1, gate_mult=1)  # gate keeps P docs by tail
        g = retr.pool(QUERIES)
        assert np.all(g.n <= SMALL["pool_size"])
    finally:
        retr.set_params(tail_gate=False, gate_min=10_000, gate_mult=40)
    retr.set_params(bm25_weight=1.0, bm25_candidates=5)
    try:
        f = retr.pool(["w03 w07"], P=100)
    finally:
        retr.set_params(bm25_weight=0.0, bm25_candidates=0)
    # BM25 component vs the formula (Lucene idf, k1=1.2, b=0.75) on raw counts
    from sklearn.feature_extraction.text import CountVectorizer

    corpus = synthetic_corpus(n_docs=40, seed=1)
    cv = CountVectorizer(token_pattern=r"(?u)\b\w\w+\b").fit(corpus)
    Cm = cv.transform(corpus).toarray().astype(np.float64)
    dl = retr._ix["dl"]
    qt = [cv.vocabulary_["w03"], cv.vocabulary_["w07"]]
    df = (Cm > 0).sum(0)
    idf = np.log1p((len(corpus) - df + 0.5) / (df + 0.5))
    tf = Cm[:, qt]
    bm = (idf[qt] * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl[:, None] / dl.mean()))).sum(1)
    n = f.n[0]
    assert_allclose(f.bm25[0, :n], bm[f.doc[0, :n]], rtol=1e-6)
    top5 = ref.sgr_top(bm, np.arange(len(bm)), 5)
    assert set(top5[bm[top5] > 0].tolist()) <= set(f.doc[0, :n].tolist())


def test_save_load_round_trip(retr, tmp_path):
    retr.save(str(tmp_path / "idx"))
    r2 = SparseGeometricRetriever.load(str(tmp_path / "idx"))
    a = retr.search(QUERIES, k=8)
    b = r2.search(QUERIES, k=8)
    assert_array_equal(a[0], b[0])
    assert_array_equal(a[1], b[1])
    assert r2.params == retr.params


def test_query_bad_input(retr):
    with pytest.raises(TypeError, match="query_texts"):
        retr.search("w01", k=3)
    with pytest.raises(TypeError, match=r"query_texts\[0\]"):
        retr.search([None], k=3)
    with pytest.raises(ValueError, match="k"):
        retr.search(["w01"], k=0)
    with pytest.raises(ValueError, match="P"):
        retr.pool(["w01"], P=0)
    with pytest.raises(RuntimeError, match="fit"):
        SparseGeometricRetriever().search(["w01"], k=3)
    with pytest.raises(ValueError, match="fit again"):
        retr.set_params(code_size=3)


def test_z_scores_population_and_zero_std():
    vals = np.array([1.0, 2.0, 4.0, 4.0, 9.0])
    ids = np.array([0, 2, 3], np.int64)
    out = np.zeros(5)
    z = np.empty(3)
    gk.zscore(vals[ids], 3, z)  # the kernel z-scores a gathered (position-indexed) sequence
    out[ids] = z
    x = vals[ids]
    assert_allclose(out[ids], (x - x.mean()) / x.std(ddof=0))
    gk.zscore(vals[[2, 3]], 2, z)
    out[[2, 3]] = z[:2]
    assert_array_equal(out[[2, 3]], 0.0)


def test_reused_scratch_is_stateless(retr):
    """Scratch persists across calls (stamps advance); results must not depend on history."""
    fresh = SparseGeometricRetriever(**SMALL).fit(synthetic_corpus(n_docs=40, seed=1))
    want = fresh.pool(QUERIES)
    retr.pool(QUERIES[::-1])
    retr.set_params(n_eligible=1)
    retr.pool(QUERIES)
    retr.set_params(n_eligible=SMALL["n_eligible"])
    for _ in range(2):
        got = retr.pool(QUERIES)
        for name in ("doc", "n", "relevance", "tail", "sem"):
            assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    one = [retr.search([q], k=5) for q in QUERIES]
    both = retr.search(QUERIES, k=5)
    assert_array_equal(np.vstack([o[0] for o in one]), both[0])


@pytest.mark.parametrize("gate", [False, True])
def test_rescue_modes_bit_identical(retr, gate):
    outs = []
    try:
        for mode in ("scan", "postings", "auto"):
            retr.set_params(rescue_mode=mode, tail_gate=gate, gate_min=1, gate_mult=2)
            outs.append(retr.pool(QUERIES))
    finally:
        retr.set_params(rescue_mode="auto", tail_gate=False, gate_min=10_000, gate_mult=40)
    for o in outs[1:]:
        for name in ("doc", "n", "tail", "lexadj", "sem", "rare", "relevance", "lex1"):
            assert_array_equal(getattr(o, name), getattr(outs[0], name), err_msg=name)


def test_fit_from_count_matrix_matches_text_fit(tmp_path):
    from sklearn.feature_extraction.text import CountVectorizer

    corpus = synthetic_corpus(n_docs=40, seed=1)
    cv = CountVectorizer(token_pattern=r"(?u)\b\w\w+\b").fit(corpus)
    rt = SparseGeometricRetriever(**SMALL).fit(corpus)
    rc = SparseGeometricRetriever(**SMALL).fit(cv.transform(corpus))
    for key in ("code_term", "code_sign", "r_terms", "r_w", "r_scale", "g_idx", "g_val", "c_vals"):
        assert_array_equal(rc._ix[key], rt._ix[key], err_msg=key)
    a = rt.search(QUERIES, k=6)
    b = rc.search_counts(cv.transform(QUERIES), k=6)
    # same vocabulary, counts and dl (every analyser token is in-vocabulary here)
    assert_array_equal(a[0], b[0])
    assert_allclose(a[1], b[1], rtol=1e-6)
    with pytest.raises(ValueError, match="search_counts"):
        rc.search(["w01"], k=3)
    with pytest.raises(ValueError, match="columns"):
        rc.search_counts(cv.transform(QUERIES)[:, :5], k=3)
    rc.save(str(tmp_path / "c"))
    r2 = SparseGeometricRetriever.load(str(tmp_path / "c"))
    assert_array_equal(r2.search_counts(cv.transform(QUERIES), k=6)[0], b[0])


# non-ASCII corner cases of lowercasing and \w: final sigma, dotted I (lower() -> 2 code
# points), ligature, fullwidth, roman numeral, superscripts, lone surrogates, underscores
ODD_QUERIES = [
    "",
    "W03 w03, w07-w09_x",
    "ΟΔΟΣ w01Σ σς Σ w05",
    "x w0",
    "İW02 ﬃ w11",
    "a_b __ 12 3 w04's",
    "\ud800w06 w07\udfff",
    "Ｗ０１ w01 Ⅻ ²³ w02",
    "ᚠᚠ w03",
    "\tw08\nw08\r\n",
    "ΣΊΣΥΦΟΣ ΣΑΣ ΣΣ",
]


def _naive_script_tokens(text: str) -> list:
    """Maximal runs of >= 2 word characters of the folded, lowercased text, character by character.

    A word character is what ``\\w`` matches (``str.isalnum()`` or ``_``) or a combining mark (Mn,
    Mc, Me): the analysis of jkofast.text.scripts (``"İ".lower()`` is ``i`` + U+0307, one word).
    """
    import unicodedata

    from jkofast.text.scripts import fold_script

    toks, cur = [], []
    for c in fold_script(text).lower() + " ":
        if c.isalnum() or c == "_" or unicodedata.category(c) in ("Mn", "Mc", "Me"):
            cur.append(c)
        else:
            if len(cur) >= 2:
                toks.append("".join(cur))
            cur = []
    return toks


def _naive_query_tfidf(texts, vocabulary, idf32):
    """``ref.sgr_query_tfidf`` with :func:`_naive_script_tokens` as the tokeniser (same numerics)."""
    import math
    from collections import Counter

    indptr, terms, vals = [0], [], []
    for text in texts:
        cnt = Counter(t for t in (vocabulary.get(w) for w in _naive_script_tokens(text)) if t is not None)
        ts = sorted(cnt)
        v = np.array([cnt[t] for t in ts], np.float32) * idf32[ts]
        nrm = np.float32(math.sqrt(sum(float(x) ** 2 for x in v)))
        terms += ts
        vals += [np.float32(x / nrm) for x in v]
        indptr.append(len(terms))
    return np.array(indptr, np.int64), np.array(terms, np.int32), np.array(vals, np.float32)


def _check_analysis(r, batch):
    # ASCII text: the literal regex oracle; the index folds non-ASCII text (jkofast.text.scripts:
    # full-width "Ｗ０１" -> "w01", combining marks inside words): the character-by-character oracle
    if all(q.isascii() for q in batch):
        want = ref.sgr_query_tfidf(batch, r.vocabulary_, r._idf32)
    else:
        want = _naive_query_tfidf(batch, r.vocabulary_, r._idf32)
    for nt in (1, 2):
        got = r.transform_queries(batch, n_threads=nt)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            assert_array_equal(g, w)  # bit for bit
    for g, w in zip(r._transform_each(batch), want, strict=True):
        assert_array_equal(g, w)


def test_query_analysis_kernel_matches_naive_regex(retr):
    """The analysis kernel (tokens, lookup, counts, TF-IDF) equals the literal regex oracle
    bit for bit: ASCII and non-ASCII batches, the serial (< 64 queries) and the parallel
    path, 1 and 2 threads, empty queries, and a query holding the old batch sentinel."""
    qs = [*QUERIES, *ODD_QUERIES]
    for batch in (qs, qs[::-1], ["", ""], [qs[0], ""], QUERIES, [QUERIES[1]], qs * 9, QUERIES * 13, ["w01", "ᚠᚠ w03"]):
        _check_analysis(retr, batch)
    with pytest.raises(TypeError, match=r"query_texts\[1\]"):
        retr.transform_queries(["w01", 3])
    with pytest.raises(TypeError, match=r"query_texts\[66\]"):
        retr.transform_queries(QUERIES * 11 + [None])


def test_query_analysis_non_ascii_vocabulary():
    """Terms with non-ASCII code points (found through the full \\w table) and every term of
    the vocabulary looked up through the hash table; a tiny table still resolves every
    term (long probe chains)."""
    from jkofast.kernels.text import tokenize as tk

    docs = [
        "Σίσυφος ΟΔΟΣ café naïve ﬃx straße",
        "İstanbul ǅemal µm ½ ²³ x_y",
        "κινάση NF-κB β-blockers",
        "naïve café κινάση",
        "x_y µm straße ΟΔΟΣ",
    ]
    r = SparseGeometricRetriever(**SMALL).fit(docs * 3)
    _check_analysis(r, [" ".join(r.terms_), "ΟΔΌΣ Σίσυφοσ", "CAFÉ NAÏVE Straße STRASSE", *docs])
    table, voc_off, voc_cp = r._qtable
    small = np.full(1 << r.n_terms_.bit_length(), -1, np.int32)  # load factor up to 1
    longest = tk.build_vocab_table(voc_off, voc_cp, small)
    assert longest > 1
    for t in range(r.n_terms_):
        lo, hi = voc_off[t], voc_off[t + 1]
        for tab in (table, small):
            assert tk.lookup_term(voc_cp, lo, hi, np.uint64(tk.fnv1a(voc_cp, lo, hi)), tab, voc_off, voc_cp) == t
    miss = np.frombuffer("zzzz".encode("utf-32-le"), np.uint32)
    assert tk.lookup_term(miss, 0, 4, np.uint64(tk.fnv1a(miss, 0, 4)), table, voc_off, voc_cp) == -1


def test_query_analysis_random_texts(retr):
    """Random texts over vocabulary words, 1-char words, digits, underscores, punctuation,
    case and non-ASCII letters: kernel == oracle bit for bit (hypothesis)."""
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies
    words = [*retr.terms_[:20], "W05", "w", "Σ", "ΟΔΟΣ", "İ", "ﬃ", "_", "9", "x1", "ᚠᚠ"]
    piece = st.one_of(
        st.sampled_from(words), st.sampled_from([" ", "  ", "-", ".", "\n", "é", "'"]), st.text(max_size=3)
    )
    texts = st.lists(piece, max_size=12).map("".join)

    @hyp.given(st.lists(texts, min_size=1, max_size=70))
    @hyp.settings(max_examples=60, deadline=None, derandomize=True)
    def check(batch):
        _check_analysis(retr, batch)

    check()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_query_path_topk_matches_lexsort(seed):
    """Call-free heap top-k: descending score, ties to the lowest id/position, -inf last."""
    rng = np.random.default_rng(seed)
    n = 200
    scores = rng.integers(0, 12, size=n).astype(np.float64)  # many exact ties
    scores[rng.choice(n, 15, replace=False)] = -np.inf
    cand = rng.choice(n, 120, replace=False).astype(np.int64)
    hv, hi = np.empty(n), np.empty(n, np.int64)
    for k in (0, 1, 7, 119, 120, 500):
        oi, ov = np.empty(max(k, 1), np.int64), np.empty(max(k, 1))
        m = gk.topk_ids(scores, cand, cand.size, k, oi, ov, hv, hi)
        want = cand[np.lexsort((cand, -scores[cand]))][:k]
        assert m == want.size
        assert_array_equal(oi[:m], want)
        assert_array_equal(ov[:m], scores[want])
        m = gk.topk_pos(scores, n, k, oi, ov, hv, hi)
        want = np.lexsort((np.arange(n), -scores))[:k]
        assert_array_equal(oi[:m], want)
        # values by candidate position (the query path's dense per-position arrays)
        m = gk.topk_ids_pos(scores[cand], cand, cand.size, k, oi, ov, hv, hi)
        want = cand[np.lexsort((cand, -scores[cand]))][:k]
        assert m == want.size
        assert_array_equal(oi[:m], want)
        assert_array_equal(ov[:m], scores[want])


def test_search_scores_are_capped_relevance(retr):
    """``cap_scores_desc`` vs the NumPy formulation: float32 relevance, each rank capped
    at nextafter(previous score, -inf), padding -inf."""
    k = 9
    _, sc = retr.search(QUERIES, k=k)
    pl = retr.pool(QUERIES)
    kk = min(k, pl.doc.shape[1])
    rel = np.where(pl.doc[:, :kk] >= 0, pl.relevance[:, :kk], -np.inf).astype(np.float32)
    want = np.full((len(QUERIES), k), -np.inf, np.float32)
    want[:, 0] = rel[:, 0]
    for c in range(1, kk):
        cap = np.nextafter(want[:, c - 1], np.float32(-np.inf))
        want[:, c] = np.where(np.isfinite(rel[:, c]), np.minimum(rel[:, c], cap), -np.inf)
    assert_array_equal(sc, want)


@pytest.mark.parametrize("n_terms", [50, 70_000])
def test_semantic_presence_pool_vs_naive(n_terms):
    """Pool semantic presence: the slot table (< 65,535 semantic terms) and the V-sized
    fallback both equal the ascending-term sum over each doc's support."""
    rng = np.random.default_rng(3)
    n_docs = 30
    lens = rng.integers(0, 40, size=n_docs)
    s_indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    s_idx = np.concatenate([np.sort(rng.choice(n_terms, size=m, replace=False)) for m in lens])
    s_idx = s_idx.astype(np.uint16 if n_terms <= 65_535 else np.int32)
    n_sem = min(n_terms, 66_000)
    sem_terms = rng.choice(n_terms, size=n_sem, replace=False).astype(np.int64)
    sval = np.zeros(n_terms)
    sval[sem_terms] = rng.random(n_sem)
    pool = rng.choice(n_docs, size=12, replace=False).astype(np.int64)
    slot = np.zeros(n_terms, np.uint16)
    sem_out = np.full(pool.size, np.nan)
    gk.semantic_presence_pool(
        sval, slot, np.empty(n_sem + 1), sem_terms, n_sem, pool, pool.size, s_indptr, s_idx, sem_out
    )
    for a, d in enumerate(pool):
        s = 0.0
        for t in s_idx[s_indptr[d] : s_indptr[d + 1]]:
            if sval[t] != 0.0:
                s += sval[t]
        assert sem_out[a] == s
    assert np.all(slot == 0)  # left clean for the next query


def test_rescue_query_terms_postings_and_bitsets_agree(retr):
    """lex1 / lexadj / rare of the routed docs: streaming every postings list and testing
    document bitsets wherever possible give the same bits as a naive support scan."""
    ix, p = retr._ix, retr.params
    N = retr.n_docs_
    _, qt, _ = retr.transform_queries([QUERIES[3]])
    nq = qt.size
    ulist = np.arange(0, N, 2, dtype=np.int64)[::-1].copy()  # "routed" docs, by position
    qi = np.array([0, nq], np.int64)
    prm = retr._query.params(p["pool_size"], qi)
    mark = np.zeros(retr.n_terms_, np.uint8)
    mark[qt] = 1
    mark[qt[:2]] |= 4  # two "rare" terms
    avgdl = float(ix["dl"].mean())
    assert prm.avgdl == avgdl and (prm.b_rescue, prm.b_final, prm.coord) == (
        p["b_rescue"],
        p["b_final"],
        p["coord_exp"],
    )
    outs = []
    for tb_row in (np.full_like(ix["tb_row"], -1), ix["tb_row"]):
        ws = _work(retr, qi, qt)
        ws.ulist[: ulist.size] = ulist
        ws.dp[ulist, 0] = 5
        ws.dp[ulist, 1] = np.arange(ulist.size)
        ws.mark[:] = mark
        gk.rescue_query_terms(qt, ulist.size, 5, 2, retr._query.index()._replace(tb_row=tb_row), prm, ws)
        outs.append((ws.lex, ws.lexadj, ws.rare))  # position-indexed
    for d_pos, d in enumerate(ulist):
        sup = ix["s_idx"][ix["s_indptr"][d] : ix["s_indptr"][d + 1]].astype(np.int64)
        hit = [t for t in sup if mark[t] & 1]
        s1 = s2 = 0.0
        for t in hit:
            s1 += ix["idf"][t]
            s2 += ix["idf"][t] * ix["idf"][t]
        n1 = (1.0 - p["b_rescue"]) + p["b_rescue"] * ix["dl"][d] / avgdl
        n2 = (1.0 - p["b_final"]) + p["b_final"] * ix["dl"][d] / avgdl
        want = (s1 / n1, s2 / n2 * (len(hit) / nq) ** p["coord_exp"], sum(1 for t in hit if mark[t] & 4) / 2)
        for lex, lexadj, rare in outs:
            assert lex[d_pos] == want[0] and rare[d_pos] == want[2]
            assert lexadj[d_pos] == pytest.approx(want[1], rel=1e-15)


def test_format1_folder_is_refused(retr, tmp_path):
    """A format-1 folder (``index.npz`` + ``meta.json`` with ``"format": 1``; never released) is
    not read: ``load`` raises a ValueError that names the format and says to rebuild."""
    import json

    d = tmp_path / "v1"
    d.mkdir()
    np.savez(d / "index.npz", idf=np.ones(3))
    meta = {"params": retr.params, "terms": retr.terms_, "ids": None, "n_docs": retr.n_docs_, "format": 1}
    (d / "meta.json").write_text(json.dumps(meta))
    for kw in (dict(), dict(mmap=True)):
        with pytest.raises(ValueError, match=r"format 1 .*not supported; rebuild the index"):
            SparseGeometricRetriever.load(str(d), **kw)


# ---------------------------------------------------------------- QA round 2: bad input


def test_count_params_beyond_the_corpus_equal_their_caps(retr):
    """n_eligible = 10**6 asked the kernel for a 10**12-slot workspace (SystemError); count
    parameters are capped where a larger value cannot change a result."""
    base = retr.search(QUERIES, k=10)
    P = retr.params["pool_size"]
    for name, cap in (
        ("n_eligible", 10**6),
        ("top_h", 10**6),
        ("n_diverse", 10**6),
        ("route_budget", 10**7),
        ("n_rare", 10**9),
        ("bm25_candidates", 10**9),
    ):
        r = SparseGeometricRetriever(**{**retr.params, name: cap}).fit(synthetic_corpus(n_docs=40, seed=1))
        small = SparseGeometricRetriever(
            **{
                **retr.params,
                name: {
                    "n_eligible": r.n_terms_,
                    "top_h": P,
                    "n_diverse": P,
                    "route_budget": r.n_terms_,
                    "n_rare": r.n_terms_,
                    "bm25_candidates": r.n_docs_,
                }[name],
            }
        )
        small.fit(synthetic_corpus(n_docs=40, seed=1))
        a, b = r.search(QUERIES, k=10), small.search(QUERIES, k=10)
        assert_array_equal(a[0], b[0])
        assert_array_equal(a[1], b[1])
    assert base[0].shape == (len(QUERIES), 10)
    huge_gate = retr.set_params(tail_gate=True, gate_min=0, gate_mult=10**18)
    try:
        g = huge_gate.search(QUERIES, k=10)  # gate_mult * P overflowed int64 (negative gate)
        ungated = retr.set_params(tail_gate=False).search(QUERIES, k=10)
        assert_array_equal(g[0], ungated[0])
    finally:
        retr.set_params(tail_gate=False, gate_min=10_000, gate_mult=40)


def test_huge_k_and_pool_are_named_errors(retr):
    with pytest.raises(ValueError, match=r"k=1000000000000 exceeds the corpus"):
        retr.search(["w00"], k=10**12)
    with pytest.raises(ValueError, match=r"P=1000000000000 exceeds the corpus"):
        retr.pool(["w00"], P=10**12)
    with pytest.raises(ValueError, match=r"k=.*exceeds the corpus"):
        r = SparseGeometricRetriever(**SMALL).fit(synthetic_corpus(n_docs=40, seed=1))
        import scipy.sparse as sp

        r.search_counts(sp.csr_matrix((1, r.n_terms_)), k=10**12)
    idx, _ = retr.search(["w00"], k=retr.n_docs + 5)  # modest padding past the corpus still works
    assert idx.shape == (1, retr.n_docs + 5) and (idx[0, retr.n_docs :] == -1).all()
    with pytest.raises(ValueError, match="n_threads"):
        retr.pool(["w00"], n_threads=0)


@pytest.mark.parametrize("name", ["tail_gate", "reliability_float16", "ppmi_include_self"])
def test_bool_params_refuse_strings(name):
    with pytest.raises(TypeError, match=name):
        SparseGeometricRetriever(**{name: "no"})  # bool("no") is True: was a silent 'on'
    assert SparseGeometricRetriever(**{name: np.bool_(False)}).params[name] is False


def test_tail_gate_that_keeps_nothing_is_refused():
    with pytest.raises(ValueError, match="gate_min"):
        SparseGeometricRetriever(tail_gate=True, gate_min=0, gate_mult=0)


def test_search_counts_refuses_negative_counts():
    import scipy.sparse as sp

    C = sp.csr_matrix(np.array([[1.0, 0, 2, 0], [0, 1, 1, 0], [3, 0, 0, 1]]))
    r = SparseGeometricRetriever(pool_size=2).fit(C)
    with pytest.raises(ValueError, match="q_counts"):
        r.search_counts(sp.csr_matrix(np.array([[-1.0, 1, 0, 0]])), k=2)


def test_registry_attributes(retr):
    assert retr.n_docs == retr.n_docs_ == 40
    assert retr.doc_sep == " "


def _corrupt(retr, tmp_path, edit_meta=None, edit_arrays=None):
    """Save ``retr`` (format 3) and edit its meta.json / arrays (the listing follows the edits).

    The edited meta.json is written without checksums (as jkofast 0.1.0 wrote it), so that the
    structural checks, not the checksums, meet the edits.
    """
    import json

    d = str(tmp_path / "idx")
    retr.save(d)
    with open(os.path.join(d, "meta.json")) as f:
        m = json.load(f)
    for k in ("manifest_crc32", "files", "checksum"):
        m.pop(k)
    if edit_arrays is not None:
        ix = {k: np.load(os.path.join(d, k + ".npy")) for k in m["arrays"]}
        edit_arrays(ix)
        for k in list(m["arrays"]):
            if k not in ix:
                os.remove(os.path.join(d, k + ".npy"))
                continue
            np.save(os.path.join(d, k + ".npy"), ix[k])
            m["arrays"][k] = [ix[k].dtype.str, list(ix[k].shape)]
    if edit_meta is not None:
        m = edit_meta(m)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(m, f)
    return d


def _set(key, value):
    def f(d):
        d[key] = value
        return d

    return f


def _after_sentinel(z):
    ct = z["code_term"]
    row = int(np.flatnonzero((ct == 65_535).any(axis=1))[0]) if (ct == 65_535).any() else 0
    ct[row, -1] = 65_535
    ct[row, 0] = 65_535
    ct[row, -1] = 0


@pytest.mark.parametrize(
    "case, match",
    [
        (dict(edit_meta=lambda m: [1, 2]), "expected a JSON object"),
        (dict(edit_meta=lambda m: {"terms": None, "format": 2}), "missing key"),
        (dict(edit_meta=_set("format", 99)), "format 99"),
        (dict(edit_meta=_set("format", None)), "format None"),
        (dict(edit_meta=lambda m: {**m, "n_docs": 2}), "n_docs|dl"),  # segfaulted in the kernel
        (dict(edit_meta=lambda m: {**m, "ids": None, "n_docs": 2}), "dl"),
        (dict(edit_meta=lambda m: {**m, "ids": "other.npy"}), "ids"),
        (dict(edit_meta=lambda m: {**m, "terms": m["terms"][:3]}), "terms"),  # silently dropped query terms
        (dict(edit_meta=lambda m: {**m, "terms": [m["terms"][0]] * len(m["terms"])}), "duplicates"),
        (dict(edit_meta=lambda m: {**m, "params": {**m["params"], "n_memberships": 1}}), "n_memberships"),
        (dict(edit_meta=lambda m: {**m, "params": {**m["params"], "code_size": 3}}), "code_term|code_sign"),
        (dict(edit_meta=lambda m: {**m, "params": {**m["params"], "pool_size": -3}}), "pool_size"),
        (dict(edit_meta=lambda m: {**m, "arrays": {**m["arrays"], "g_idx": ["<i4", [3]]}}), "g_idx"),
        (dict(edit_arrays=lambda z: z.pop("g_idx")), "missing array|g_idx"),
        (dict(edit_arrays=lambda z: z.__setitem__("g_idx", z["g_idx"] + 1000)), "g_idx holds ids"),  # segfault
        (dict(edit_arrays=lambda z: z.__setitem__("r_terms", z["r_terms"] + 1000)), "r_terms holds ids"),
        (dict(edit_arrays=lambda z: z.__setitem__("mem_doc", z["mem_doc"] + 1000)), "mem_doc holds ids"),
        (dict(edit_arrays=lambda z: z.__setitem__("t_code", z["t_code"] | 128)), "t_code does not decode"),
        (dict(edit_arrays=lambda z: z.__setitem__("t_off", z["t_off"][::-1].copy())), "t_off"),
        (dict(edit_arrays=lambda z: z.__setitem__("t_tfq", z["t_tfq"] * 0)), "t_xpos must list exactly the postings"),
        (dict(edit_arrays=lambda z: z.__setitem__("s_idx", z["s_idx"] + 1000)), "s_idx holds ids"),
        (dict(edit_arrays=lambda z: z.__setitem__("t_indptr", z["t_indptr"][::-1].copy())), "t_indptr"),
        (dict(edit_arrays=lambda z: z.__setitem__("dl", z["dl"] * np.nan)), "dl contains NaN"),
        (dict(edit_arrays=lambda z: z.__setitem__("mem_m", z["mem_m"].astype(np.float64))), "mem_m has dtype"),
        (dict(edit_arrays=_after_sentinel), "code_term"),
        (dict(edit_arrays=lambda z: z.__setitem__("c_vals", z["c_vals"][:-1])), "c_indptr|c_vals"),
        (dict(edit_arrays=lambda z: z.__setitem__("r_nj", z["r_nj"][:-1])), "r_nj"),
    ],
)
def test_load_refuses_corrupted_index(retr, tmp_path, case, match):
    d = _corrupt(retr, tmp_path, **case)
    for kw in (dict(), dict(mmap=True, verify=True)):
        with pytest.raises(ValueError, match=match) as e:
            SparseGeometricRetriever.load(d, **kw)
        assert "meta.json" in str(e.value) or d in str(e.value)


def test_load_mmap_range_checks_every_id_the_kernels_index_with(retr, tmp_path):
    """``load(mmap=True)`` range-checks the ids the kernels index with (issue #26: a bad id no
    longer reaches a kernel); ``verify=True`` and the in-memory load refuse it too."""
    d = _corrupt(retr, tmp_path, edit_arrays=lambda z: z.__setitem__("mem_doc", z["mem_doc"] + 1000))
    for kw in (dict(), dict(mmap=True), dict(mmap=True, verify=True)):
        with pytest.raises(ValueError, match="mem_doc holds ids"):
            SparseGeometricRetriever.load(d, **kw)


def test_load_refuses_foreign_or_broken_folders(retr, tmp_path):
    from jkofast.pools.retrievers import get_retriever

    bm = str(tmp_path / "bm25")
    get_retriever("bm25").fit(["aa bb", "bb cc"]).save(bm)
    with pytest.raises(ValueError, match="not a SparseGeometricRetriever index"):
        SparseGeometricRetriever.load(bm)
    with pytest.raises(ValueError, match="not a SparseGeometricRetriever index"):
        SparseGeometricRetriever.load(str(tmp_path / "missing"))
    d = _corrupt(retr, tmp_path)
    with open(os.path.join(d, "meta.json"), "w") as f:
        f.write("{bad")
    with pytest.raises(ValueError, match=r"meta\.json"):
        SparseGeometricRetriever.load(d)
    d2 = str(tmp_path / "idx2")
    retr.save(d2)
    with open(os.path.join(d2, "code_term.npy"), "r+b") as f:
        f.truncate(100)
    for kw in (dict(), dict(mmap=True)):
        with pytest.raises(ValueError, match=r"code_term\.npy: (unreadable|has 100 bytes)"):
            SparseGeometricRetriever.load(d2, **kw)
    with pytest.raises(ValueError, match="not a directory"):
        retr.save(os.path.join(d2, "code_term.npy"))
    # an interrupted save (no meta.json: it is written last, and removed first on a rewrite)
    d3 = str(tmp_path / "idx3")
    retr.save(d3)
    os.remove(os.path.join(d3, "meta.json"))
    with pytest.raises(ValueError, match="did not finish"):
        SparseGeometricRetriever.load(d3)


def test_search_counts_refuses_float32_overflow():
    import scipy.sparse as sp

    r = SparseGeometricRetriever(pool_size=2).fit(sp.csr_matrix(np.array([[1.0, 0, 2], [0, 1, 1]])))
    with pytest.raises(ValueError, match="q_counts: counts too large"):  # NaN weights ranked silently
        r.search_counts(sp.csr_matrix(np.array([[3e38, 3e38, 0]])), k=2)


@pytest.mark.parametrize("f16", [True, False])
def test_slot_weight_vs_naive(f16):
    """The weight of a term off the centre: the stored (j, t) weight, else the SPEC B.4 one-occurrence value."""
    tau, beta = 20.0, -0.2
    r_indptr = np.array([0, 3, 3, 4], np.int64)
    r_terms = np.array([2, 5, 9, 1], np.uint16)
    stored = np.array([0.75, 1.5, 0.3125, 2.0], np.float32)
    if f16:
        r_w = stored.astype(np.float16).view(np.uint16)
        h2f = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    else:
        r_w, h2f = stored, np.zeros(0, np.float32)
    r_nj = np.array([4.0, 0.0, 7.0])
    r_scale = np.array([1.25, 1.0, 0.8])
    gvar = np.linspace(0.0, 0.02, 12)
    rel = (r_indptr, r_terms, r_w, r_nj, r_scale, gvar)

    def naive(t, j):
        row = dict(zip(r_terms[r_indptr[j] : r_indptr[j + 1]].tolist(), stored[r_indptr[j] : r_indptr[j + 1]].tolist()))
        if t in row:
            return row[t]
        nj = r_nj[j]
        if nj == 0.0:
            return 1.0
        shr = 1.0 / (1.0 + tau) * (1.0 / nj - (1.0 / nj) ** 2) + tau / (1.0 + tau) * gvar[t]
        w = (shr + 1e-6) ** beta * r_scale[j]
        return float(np.float16(w)) if f16 else float(np.float32(w))

    for j in range(3):
        for t in range(12):
            assert gk.slot_weight(t, j, rel, (tau, beta, f16), h2f) == naive(t, j), (t, j)


def test_expanded_code_values_vs_naive(retr):
    """Each code slot's centre value and weight (derived at fit) equal the naive expansion of the compact index."""
    ix = retr._ix
    assert ix["x_w"].shape == ix["code_term"].shape  # a small index is expanded
    wide = ref.wide_view({k: v for k, v in ix.items() if k not in ("x_cval", "x_w")}, retr.params)
    live = wide["code_term"] >= 0
    assert_array_equal(ix["x_cval"][live], wide["code_cval"][live])
    assert_array_equal(ix["x_w"][live], wide["code_w"][live])


def test_compact_and_expanded_paths_identical(monkeypatch):
    """The query path over the per-slot code values and over the branch table give the same bits."""
    from jkofast.sgr import _engine as engine

    corpus = synthetic_corpus(n_docs=60, seed=3)
    queries = [*QUERIES, "w02 w04 w06 w08 w10", "w11 w13 w17 w19"]
    r = SparseGeometricRetriever(**SMALL).fit(corpus)
    assert r._ix["x_w"].shape[0] > 0
    want = r.search(queries, k=10, n_threads=1)
    want_pool = r.pool(queries, P=20)
    monkeypatch.setattr(engine, "EXPAND_CODES_MAX_BYTES", 0)
    r._query.make_query_layout()
    assert r._ix["x_w"].shape[0] == 0 and r.index_nbytes(breakdown=True)["code_values"] == 0
    got = r.search(queries, k=10, n_threads=1)
    got_pool = r.pool(queries, P=20)
    assert_array_equal(got[0], want[0])
    assert_array_equal(got[1], want[1])
    for f in ("doc", "tail", "relevance", "lex1", "sem", "rare"):
        assert_array_equal(getattr(got_pool, f), getattr(want_pool, f))
