"""Naive NumPy/SciPy oracles for SparseGeometricRAG (SPEC B.2-B.10), one per stage.

Dense, slow and literal: every stage is written straight from the SPEC formulas on dense
arrays (tiny corpora only).  Ties in every top-k go to the lowest id (``_top``).
"""

from __future__ import annotations

import math

import numpy as np


def sgr_top(values, ids, k):
    """Indices (into ``values``) of the k largest values, ties -> lowest id."""
    values = np.asarray(values, np.float64)
    ids = np.asarray(ids)
    order = np.lexsort((ids, -values))
    return order[:k]


def sgr_tfidf(texts, max_features=50_000):
    """Dense float32 TF-IDF (sklearn semantics), idf, dl (all analyser tokens)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(lowercase=True, token_pattern=r"(?u)\b\w\w+\b", max_features=max_features, dtype=np.float32)
    X = vec.fit_transform(texts).toarray().astype(np.float32)
    an = vec.build_analyzer()
    dl = np.array([len(an(t)) for t in texts], np.float64)
    return X, np.asarray(vec.idf_, np.float64), dl, vec


def sgr_l2_rows_in_order(indptr, order, x):
    """Each CSR row of float32 ``x`` divided by its L2 norm, literally as scikit-learn's float32 kernel:
    the float32 squares added one by one to a Python float (float64) in the order
    ``order[indptr[i]:indptr[i + 1]]``, ``math.sqrt``, each value divided in float64, rounded to float32."""
    out = np.array(x, np.float32)
    for i in range(len(indptr) - 1):
        s = 0.0
        for j in range(indptr[i], indptr[i + 1]):
            v = np.float32(out[order[j]])
            s += float(np.float32(v * v))
        if s == 0.0:
            continue
        s = math.sqrt(s)
        for j in range(indptr[i], indptr[i + 1]):
            out[j] = np.float32(float(out[j]) / s)
    return out


def sgr_query_tfidf(texts, vocabulary, idf32):
    """Query TF-IDF rows (indptr, terms int32, vals float32), literally: ``re.findall`` of
    the token pattern on ``text.lower()``, known tokens counted, count × idf in float32,
    divided by the float64 L2 norm (rounded to float32) of the row."""
    import re
    from collections import Counter

    indptr, terms, vals = [0], [], []
    for text in texts:
        cnt = Counter(
            t for t in (vocabulary.get(w) for w in re.findall(r"(?u)\b\w\w+\b", text.lower())) if t is not None
        )
        ts = sorted(cnt)
        v = np.array([cnt[t] for t in ts], np.float32) * idf32[ts]
        nrm = np.float32(math.sqrt(sum(float(x) ** 2 for x in v)))
        terms += ts
        vals += [np.float32(x / nrm) for x in v]
        indptr.append(len(terms))
    return np.array(indptr, np.int64), np.array(terms, np.int32), np.array(vals, np.float32)


def sgr_memberships(X, F):
    """List of (doc, branch, m) in doc-major order: top-F terms, m = x / Σ top-F."""
    out = []
    for d in range(X.shape[0]):
        nz = np.flatnonzero(X[d])
        sel = nz[sgr_top(X[d, nz], nz, F)]
        tot = float(np.sum(X[d, sel].astype(np.float64)))
        for j in sel:
            out.append((d, int(j), float(X[d, j]) / tot))
    return out


def sgr_centres(X, mems, B):
    """Dense (V, V) centres: row j = Σ m x_d / Σ m, truncated to its top-B coordinates."""
    V = X.shape[1]
    C = np.zeros((V, V))
    for j in range(V):
        rows = [(d, m) for d, jj, m in mems if jj == j]
        if not rows:
            continue
        acc = np.zeros(V)
        ms = 0.0
        for d, m in sorted(rows):
            m32 = float(np.float32(m))
            acc += m32 * X[d].astype(np.float64)
            ms += m32
        c = acc / ms
        nz = np.flatnonzero(c)
        keep = nz[sgr_top(c[nz], nz, B)]
        C[j, keep] = c[keep]
    return C


def sgr_codes(X, C, mems, S):
    """Per membership: (term ids sorted, signs, centre values) of the top-S |x_d - c_j|."""
    out = []
    for d, j, _ in mems:
        nz = np.flatnonzero(X[d])
        c = C[j, nz].astype(np.float32).astype(np.float64)
        r = X[d, nz].astype(np.float64) - c
        sel = np.sort(sgr_top(np.abs(r), nz, S))
        out.append((nz[sel], np.where(r[sel] >= 0, 1, -1), c[sel]))
    return out


def sgr_reliability(codes, mems, V, tau=20.0, beta=-0.2, weighted_mean=False):
    """Reliability weight of every code entry (list aligned with ``codes``)."""
    M = len(codes)
    Z = np.zeros((M, V))  # sign of t in membership m's code, 0 when absent
    P = np.zeros((M, V))  # presence
    for m, (t, s, _) in enumerate(codes):
        Z[m, t] = s
        P[m, t] = 1
    gvar = P.sum(0) / M - (Z.sum(0) / M) ** 2
    branch = np.array([j for _, j, _ in mems])
    out = []
    W = {}
    for j in np.unique(branch):
        rows = np.flatnonzero(branch == j)
        nj = len(rows)
        cnt = P[rows].sum(0)
        sz = Z[rows].sum(0)
        terms = np.flatnonzero(cnt)
        lv = cnt[terms] / nj - (sz[terms] / nj) ** 2
        shr = cnt[terms] / (cnt[terms] + tau) * lv + tau / (cnt[terms] + tau) * gvar[terms]
        w = (shr + 1e-6) ** beta
        if weighted_mean:
            w = w / (np.sum(w * cnt[terms]) / np.sum(cnt[terms]))
        else:
            w = w / np.mean(w)
        for t, wv in zip(terms, w, strict=True):
            W[(int(j), int(t))] = wv
    for m, (t, _, _) in enumerate(codes):
        out.append(np.array([W[(mems[m][1], int(tt))] for tt in t]))
    return out


def sgr_ppmi(X, L, K, damping=10.0, include_self=False):
    """Dense (V, V) graph A: PPMI over top-L co-occurrence × n/(n+damping), top-K per row."""
    N, V = X.shape
    Tm = np.zeros((N, V))
    for d in range(N):
        nz = np.flatnonzero(X[d])
        Tm[d, nz[sgr_top(X[d, nz], nz, L)]] = 1
    n = Tm.sum(0)
    co = Tm.T @ Tm
    A = np.zeros((V, V))
    for i in range(V):
        for j in range(V):
            if co[i, j] == 0 or (i == j and not include_self):
                continue
            v = max(0.0, math.log(co[i, j] * N / (n[i] * n[j]))) * co[i, j] / (co[i, j] + damping)
            A[i, j] = v
        nz = np.flatnonzero(A[i] > 0)
        keep = nz[sgr_top(A[i, nz], nz, K)]
        row = np.zeros(V)
        row[keep] = A[i, keep]
        A[i] = row
    return A


def sgr_second_order(A, K):
    """Dense (V, V) graph G: cosine of L2-normalised rows of A, no self, top-K positive."""
    nrm = np.linalg.norm(A, axis=1)
    An = A / np.where(nrm > 0, nrm, 1)[:, None]
    cos = An @ An.T
    np.fill_diagonal(cos, 0)
    G = np.zeros_like(A)
    for i in range(A.shape[0]):
        nz = np.flatnonzero(cos[i] > 1e-15)
        keep = nz[sgr_top(cos[i, nz], nz, K)]
        G[i, keep] = cos[i, keep]
    return G


def sgr_route(q, G, alpha, budget):
    """(routed term ids, route weights): literal terms in id order, then the strongest
    inferred terms up to ``budget`` in total."""
    lit = np.flatnonzero(q)
    route = q.astype(np.float64).copy()
    for t in lit:
        route += alpha * q[t] * G[t]
    inf = np.array([t for t in np.flatnonzero(route) if q[t] == 0], dtype=np.int64)
    room = max(0, budget - len(lit))
    sel = inf[sgr_top(route[inf], inf, room)] if len(inf) else inf
    terms = np.concatenate([lit, sel]).astype(np.int64)
    return terms, route[terms]


def _z(x):
    x = np.asarray(x, np.float64)
    if x.size == 0:
        return x
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def _minmax(x):
    x = np.asarray(x, np.float64)
    rng = x.max() - x.min()
    return (x - x.min()) / rng if rng >= 1e-9 else np.zeros_like(x)


def wide_view(ix, p):
    """The compact index (``jkofast.sgr.layout``) expanded to one entry per code slot, naively.

    Returns a dict with the arrays the oracles read: ``mem_doc``, ``mem_branch``, ``mem_m``,
    ``b_indptr``, ``b_mem`` (identity: the memberships are branch-major), ``code_term``
    (int64, -1 padding), ``code_sign`` (int8 ±1, 0 padding), ``code_cval`` (``c_j[t]`` from
    the centre), ``code_w`` (the stored (j, t) weight, else the SPEC B.4 formula with
    ``cnt = 1``, ``Σz = ±1``: ``((1/(1+τ))·(1/n_j - 1/n_j²) + τ/(1+τ)·gvar[t] + 1e-6)^β·scale_j``,
    rounded through float16 or float32; 1.0 when ``n_j = 0``), ``code_count``, and every
    other array of ``ix`` unchanged.  Plain Python loops.
    """
    if "b_mem" in ix:
        return ix
    out = dict(ix)
    V = ix["idf"].shape[0]
    M, S = ix["code_term"].shape
    bi = ix["b_indptr"]
    branch = np.repeat(np.arange(V), np.diff(bi))
    ct = np.full((M, S), -1, np.int64)
    cs = np.zeros((M, S), np.int8)
    cv = np.zeros((M, S), np.float32)
    cw = np.zeros((M, S), np.float32)
    cc = np.zeros(M, np.int32)
    tau, beta = p["tau"], p["beta"]
    r_w = ix["r_w"].view(np.float16).astype(np.float32) if ix["r_w"].dtype == np.uint16 else ix["r_w"]
    for m in range(M):
        j = int(branch[m])
        cent = {
            int(t): float(v)
            for t, v in zip(
                ix["c_terms"][ix["c_indptr"][j] : ix["c_indptr"][j + 1]],
                ix["c_vals"][ix["c_indptr"][j] : ix["c_indptr"][j + 1]],
                strict=True,
            )
        }
        rel = {
            int(t): float(w)
            for t, w in zip(
                ix["r_terms"][ix["r_indptr"][j] : ix["r_indptr"][j + 1]],
                r_w[ix["r_indptr"][j] : ix["r_indptr"][j + 1]],
                strict=True,
            )
        }
        nj = float(ix["r_nj"][j])
        for r in range(S):
            t = int(ix["code_term"][m, r])
            if t >= V:
                break
            cc[m] = r + 1
            ct[m, r] = t
            cs[m, r] = 1 if (int(ix["code_sign"][m, r // 16]) >> (r % 16)) & 1 else -1
            cv[m, r] = cent.get(t, 0.0)
            if t in rel:
                cw[m, r] = rel[t]
            elif nj == 0:
                cw[m, r] = 1.0
            else:
                lv = 1.0 / nj - (1.0 / nj) ** 2
                shr = 1.0 / (1.0 + tau) * lv + tau / (1.0 + tau) * float(ix["gvar"][t])
                w = math.pow(shr + 1e-6, beta) * float(ix["r_scale"][j])
                cw[m, r] = np.float16(w) if p["reliability_float16"] else np.float32(w)
    out.update(
        mem_branch=branch,
        b_mem=np.arange(M),
        code_term=ct,
        code_sign=cs,
        code_cval=cv,
        code_w=cw,
        code_count=cc,
    )
    return out


def sgr_query(ix, q, p, sem_lists):
    """Whole query path (B.6-B.10) on dense per-query tables.

    ``ix``: the retriever's index arrays (build is tested separately); ``q``: dense float64
    query vector (V,); ``p``: parameter dict; ``sem_lists``: {t: [(n, A_tn), ...]}.
    Returns dict with routed terms/weights, U (sorted), tail/lex1 per U doc, pool, final
    order and pool components keyed by doc.
    """
    ix = wide_view(ix, p)
    V = q.shape[0]
    N = ix["dl"].shape[0]
    G = np.zeros((V, V))
    for t in range(V):
        for a in range(ix["g_indptr"][t], ix["g_indptr"][t + 1]):
            G[t, ix["g_idx"][a]] = ix["g_val"][a]
    rt, rw = sgr_route(q, G, p["alpha"], p["route_budget"])
    support = [set(ix["s_idx"][ix["s_indptr"][d] : ix["s_indptr"][d + 1]].tolist()) for d in range(N)]
    idf = ix["idf"]
    dl = np.asarray(ix["dl"], np.float64)
    avgdl = dl.mean()
    qset = set(np.flatnonzero(q).tolist())
    E = {}  # (doc, routed position) -> E
    esum = {}
    csum = {}
    for k, (j, rho) in enumerate(zip(rt, rw, strict=True)):
        for a in range(ix["b_indptr"][j], ix["b_indptr"][j + 1]):
            m = ix["b_mem"][a]
            d = int(ix["mem_doc"][m])
            c = ix["code_count"][m]
            t = ix["code_term"][m, :c]
            L = np.sum(
                ix["code_w"][m, :c].astype(np.float64)
                * (q[t] - ix["code_cval"][m, :c].astype(np.float64))
                * ix["code_sign"][m, :c]
            )
            Q = np.sum(q[t] ** 2)
            mr = float(ix["mem_m"][m]) * rho
            e = mr * L * Q ** p["gamma"] if Q > 0 else 0.0
            E[(d, k)] = max(E.get((d, k), -np.inf), e)
            esum[d] = esum.get(d, 0.0) + e
            csum[d] = csum.get(d, 0.0) + mr
    U = np.array(sorted(esum), dtype=np.int64)
    res = {"route_terms": rt, "route_w": rw, "U": U}
    if U.size == 0:
        res.update(pool=np.zeros(0, np.int64), order=np.zeros(0, np.int64))
        return res
    tail = np.array([esum[d] + p["lam_m"] * csum[d] for d in U])
    if p.get("tail_gate"):  # optional gate: only the top max(gate_min, gate_mult·P) by tail go on
        ng = min(U.size, max(p["gate_min"], p["gate_mult"] * p["pool_size"]))
        keep = np.sort(sgr_top(tail, U, ng))
        U, tail = U[keep], tail[keep]
    lex1 = np.array(
        [sum(idf[t] for t in support[d] & qset) / ((1 - p["b_rescue"]) + p["b_rescue"] * dl[d] / avgdl) for d in U]
    )
    pre = _z(tail) + p["eta"] * _z(lex1)
    psel = sgr_top(pre, U, p["pool_size"])
    pool = U[psel]
    res.update(
        tail=dict(zip(U.tolist(), tail, strict=True)),
        lex1=dict(zip(U.tolist(), lex1, strict=True)),
        pre=dict(zip(U.tolist(), pre, strict=True)),
        pool=pool,
    )
    nq = len(qset)
    lit = np.flatnonzero(q)
    rare_t = set(lit[sgr_top(idf[lit], lit, min(p["n_rare"], nq))].tolist())
    semvec = np.zeros(V)
    for t in lit:
        for n, a in sem_lists.get(int(t), []):
            semvec[n] += q[t] * a * idf[n]
    lexadj, sem, rare = [], [], []
    for d in pool:
        hit = support[d] & qset
        lex2 = sum(idf[t] ** 2 for t in hit) / ((1 - p["b_final"]) + p["b_final"] * dl[d] / avgdl)
        lexadj.append(lex2 * (len(hit) / nq) ** p["coord_exp"])
        sem.append(sum(semvec[t] for t in support[d]))
        rare.append(len(hit & rare_t) / min(p["n_rare"], nq))
    tl = np.array([res["tail"][d] for d in pool])
    rel = p["w_tail"] * _z(tl) + p["w_lex"] * _z(lexadj) + p["w_sem"] * _z(sem) + p["w_rare"] * _z(rare)
    res.update(
        lexadj=dict(zip(pool.tolist(), lexadj, strict=True)),
        sem=dict(zip(pool.tolist(), sem, strict=True)),
        rare=dict(zip(pool.tolist(), rare, strict=True)),
        relevance=dict(zip(pool.tolist(), rel, strict=True)),
    )
    res["order"] = sgr_diversify(pool, rel, E, rt, ix, p)
    return res


def sgr_diversify(pool, rel, E, rt, ix, p):
    """Soft high-quality-branch diversity (B.10) on a pool with relevance ``rel``."""
    plain = pool[sgr_top(rel, pool, len(pool))]
    relmap = dict(zip(pool.tolist(), rel, strict=True))
    # H per routed position
    H = {}
    for k in range(len(rt)):
        vals = sorted([E[(int(d), k)] for d in pool if (int(d), k) in E], reverse=True)[: p["top_h"]]
        if vals:
            H[k] = float(np.mean(vals))
    ks = np.array(sorted(H), dtype=np.int64)
    elig = ks[sgr_top([H[k] for k in ks], ks, p["n_eligible"])] if len(ks) else ks
    V = ix["c_norm"].shape[0]

    def unit(j):
        c = np.zeros(V)
        a, b = ix["c_indptr"][j], ix["c_indptr"][j + 1]
        c[ix["c_terms"][a:b]] = ix["c_vals"][a:b]
        n = np.linalg.norm(c)
        return c / n if n > 0 else c

    U = np.array([unit(rt[k]) for k in elig]) if len(elig) else np.zeros((0, V))
    cos = U @ U.T
    eidx = {int(k): b for b, k in enumerate(elig)}

    def doc_elig(d):
        return [eidx[k] for k in range(len(rt)) if (int(d), k) in E and k in eidx]

    order = [int(plain[0])]
    S = []
    b0 = doc_elig(plain[0])
    if b0:
        S.append(min(b0))
    remaining = [int(d) for d in plain[1:]]
    for _ in range(1, min(p["n_diverse"], len(pool))):
        if S and len(elig):
            dev = np.array([1 + np.mean(cos[np.ix_(S, S)]) - 2 * np.mean(cos[b, S]) for b in range(len(elig))])
            dev = _minmax(dev)
        else:
            dev = np.zeros(len(elig))
        r = _minmax([relmap[d] for d in remaining])
        best, bestv, bestb = None, -np.inf, None
        for i, d in enumerate(remaining):
            bs = doc_elig(d)
            bb = None
            if bs:
                bb = sorted(bs, key=lambda b: (-dev[b], b))[0]
            v = r[i] + (p["lam_d"] * dev[bb] if (bb is not None and S) else 0.0)
            if v > bestv:
                best, bestv, bestb = i, v, bb
        d = remaining.pop(best)
        order.append(d)
        if bestb is not None:
            S.append(bestb)
    return np.array(order + remaining, dtype=np.int64)
