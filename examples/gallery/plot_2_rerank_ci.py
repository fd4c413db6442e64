"""
A rerank, before and after, with confidence intervals
=====================================================

Hybrid SciFact pools in their first-stage order (BM25 and MiniLM fused by
reciprocal rank), then reranked by JKO-RAG: the mean of each metric with its
interval, and the paired difference query by query (significant when its
interval excludes 0).
"""

# %%
# Rerank the pools
# ----------------
# :func:`jkofast.jko.example_pools` builds the pools of the SciFact test
# queries from the shipped data, each in fused-rank order, with the energy and
# the initial distribution ``p0`` of the main table.
import matplotlib.pyplot as plt
import numpy as np

import jkofast
from jkofast.eval import paired_bootstrap_diff
from jkofast.jko import example_pools

ex = example_pools(n_queries=300, pool_size=100)
res = jkofast.rerank_batch(
    ex.E, ex.p0, ex.offsets, embeddings=ex.Z, config="tuned"
)
# the first stage's ranking: each pool in its fused-rank order
sizes = np.diff(ex.offsets)
first_stage = np.concatenate([-np.arange(n, dtype=float) for n in sizes])

metrics = ["ndcg@10", "mrr@10", "recall@10"]
before = jkofast.evaluate(ex.to_run(first_stage), ex.qrels, metrics)
after = jkofast.evaluate(ex.to_run(res.p), ex.qrels, metrics)
# paired differences need the same queries, in the same order
assert before.query_ids == after.query_ids

# %%
# Means and paired differences
# ----------------------------
diffs = {}
for m in metrics:
    b, a = before.summary()[m], after.summary()[m]
    diffs[m] = d = paired_bootstrap_diff(after[m], before[m])
    verdict = "significant" if d.lo > 0 or d.hi < 0 else "not significant"
    print(
        f"{m:<10} before {b['mean']:.4f} [{b['lo']:.3f}, {b['hi']:.3f}]",
        end="   ",
    )
    print(f"after {a['mean']:.4f} [{a['lo']:.3f}, {a['hi']:.3f}]")
    diff = f"{d.mean:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}]"
    print(f"{'':<10} difference {diff}, {verdict}")

# %%
# Query by query
# --------------
# Left: nDCG@10 of each query before and after (points above the diagonal
# gained; a little jitter separates equal values). Right: the paired
# differences with their 95 % intervals.
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 3.4), layout="constrained")
jitter = np.random.default_rng(0).normal(0, 0.008, (2, len(before.query_ids)))
ax1.scatter(
    before["ndcg@10"] + jitter[0], after["ndcg@10"] + jitter[1], s=8, alpha=0.5
)
ax1.plot([0, 1], [0, 1], color="grey", lw=0.8)
ax1.set(
    xlabel="nDCG@10, first stage",
    ylabel="nDCG@10, JKO-RAG",
    title="each query",
)
mean = np.array([diffs[m].mean for m in metrics])
err = np.array(
    [
        [diffs[m].mean - diffs[m].lo, diffs[m].hi - diffs[m].mean]
        for m in metrics
    ]
)
ax2.errorbar(mean, metrics, xerr=err.T, fmt="o", capsize=4)
ax2.axvline(0, color="grey", lw=0.8)
ax2.set_ylim(len(metrics) - 0.5, -0.5)
ax2.set(
    xlabel="JKO-RAG - first stage, 95 % paired bootstrap",
    title="paired differences",
)
plt.show()
