"""
The transport plan of one pool
==============================

Each JKO-RAG step moves probability mass between the documents of a pool, at a
transport cost given by their embeddings. Here is the entropic plan of
:func:`jkofast.sinkhorn_log` from a real SciFact pool's initial distribution
``p0`` to the distribution the flow ends at.
"""

# %%
# One pool, reranked
# ------------------
# Thirty documents per pool; of the first forty test queries we keep the one
# with the most relevant documents in its pool.
import textwrap

import matplotlib.pyplot as plt
import numpy as np

import jkofast
from jkofast.jko import example_pools, resolve_config

ex = example_pools(n_queries=40, pool_size=30)
res = jkofast.rerank_batch(
    ex.E, ex.p0, ex.offsets, embeddings=ex.Z, config="tuned"
)
# the query of every pool entry, and whether the entry is relevant to it
qid_of = np.repeat(ex.query_ids, np.diff(ex.offsets))
relevant_all = np.array(
    [d in ex.qrels.get(q, {}) for q, d in zip(qid_of, ex.doc_ids)]
)
q = int(np.argmax(np.add.reduceat(relevant_all, ex.offsets[:-1])))
lo, hi = ex.offsets[q], ex.offsets[q + 1]
E, p0, Z = ex.pool(q)
p, relevant = res.p[lo:hi], relevant_all[lo:hi]
rank_before = np.argsort(np.argsort(-p0, kind="stable")) + 1
rank_after = np.argsort(np.argsort(-p, kind="stable")) + 1
print(f"query {ex.query_ids[q]}:")
print(textwrap.indent(textwrap.fill(ex.queries[q], 77), "  "))
before, after = rank_before[relevant].tolist(), rank_after[relevant].tolist()
print(f"relevant documents at ranks {before} before, {after} after")

# %%
# The plan
# --------
# The cost is the reranker's own, ``C = (1 - cos)^2`` between the documents'
# MiniLM embeddings, and ``eps`` its entropic regulariser; rows and columns
# follow the order of ``p0``.
C, _ = jkofast.pool_geometry(Z)
eps = resolve_config("tuned").sinkhorn_eps
ot = jkofast.sinkhorn_log(p0, p, C, eps)
plan = ot.plan(C, eps)
print(f"<plan, C> = {ot.cost:.4f} after {ot.n_iter} iterations,", end=" ")
print(f"marginal error {ot.marginal_error:.1e}")
print(f"mass kept in place (trace of the plan): {np.trace(plan):.3f}")

order = np.argsort(-p0, kind="stable")
shown = plan[np.ix_(order, order)]
fig, (ax1, ax2) = plt.subplots(
    1, 2, figsize=(9, 4), layout="constrained", width_ratios=[1.1, 1]
)
im = ax1.imshow(shown, cmap="magma_r", norm="log", vmin=plan.max() * 1e-3)
fig.colorbar(im, ax=ax1, shrink=0.8, label="mass moved from row to column")
ax1.set(xlabel="to (by p0 rank)", ylabel="from (by p0 rank)")
ax1.set_title("Sinkhorn plan")
rel = relevant[order]
for r in np.flatnonzero(rel):  # the relevant documents, on both axes
    ax1.axhline(r, color="tab:green", lw=0.6)
    ax1.axvline(r, color="tab:green", lw=0.6)
x = np.arange(len(p0))
ax2.bar(x - 0.2, p0[order], 0.4, label="p0 (first stage)")
ax2.bar(x + 0.2, p[order], 0.4, label="after JKO-RAG")
ax2.plot(x[rel], p[order][rel], "v", color="tab:green", label="relevant")
ax2.set(xlabel="documents by p0 rank", ylabel="probability", yscale="log")
ax2.set_title("the two marginals")
ax2.legend()
plt.show()
