"""asv suites for the torch-free cross-encoder (jkofast.encode.cross) and its peer.

* ``CrossEncoderScore``: :func:`jkofast.encode.cross.cross_scores` of 64 SciFact (query,
  document) pairs (batch 64, tokenisation included) with a seeded random-weight cross-encoder of
  ms-marco-MiniLM-L-6-v2's shape (6 layers, hidden 384, 12 heads, 512 positions), 1 and 2
  threads (the fast profile: one layer, 1 thread); needs the ``encode`` extra.
* ``CrossEncoderSTPeer``: sentence-transformers' ``CrossEncoder.predict`` (torch CPU, raw logits)
  on the same model folder and pairs, ``torch.set_num_threads`` 1 and 2; skipped
  (``NotImplementedError``) without sentence-transformers.  ``track_max_abs_diff`` records the
  largest difference between its scores and jkofast's.

The model folder and the pairs come from ``benchmarks/tools/cross_encoder_vs_st.py`` (which
also times the two side by side in one run and prints the ratio).
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

from benchmarks.common import PROFILE, SEED, Benchmark

N_PAIRS = 64
_MODEL: list = []


def _tools():
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import cross_encoder_vs_st

    return cross_encoder_vs_st


def model_and_pairs():
    """``(model folder, queries, docs)``: written once per process (a temporary folder)."""
    try:
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:  # the optional extra
        raise NotImplementedError(str(exc)) from None
    if not _MODEL:
        t = _tools()
        qs, ds, corpus = t.scifact_pairs(N_PAIRS, seed=SEED)
        folder = tempfile.mkdtemp(prefix="jkofast-bench-ce-")
        shape = {**t.MINILM_L6, "layers": 1} if PROFILE == "fast" else t.MINILM_L6  # fast: CI's smoke run
        t.write_random_cross_encoder(os.path.join(folder, "ce"), t.scifact_words(corpus), seed=SEED, **shape)
        _MODEL.append((os.path.join(folder, "ce"), qs, ds))
    return _MODEL[0]


class CrossEncoderScore(Benchmark):
    """``cross_scores`` of 64 SciFact pairs through a random MiniLM-L6-shaped cross-encoder."""

    params = ([1] if PROFILE == "fast" else [1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        from jkofast.encode.cross import load_cross_encoder

        path, self.qs, self.ds = model_and_pairs()
        self.model = load_cross_encoder(path)

    def run(self, threads):
        from jkofast.encode.cross import cross_scores

        return cross_scores(self.model, self.qs, self.ds, batch_size=64, n_threads=threads)

    def time_cross_scores_64_pairs(self, threads):
        self.run(threads)

    def track_scores_finite(self, threads):
        return float(np.isfinite(self.run(threads)).mean())


class CrossEncoderSTPeer(Benchmark):
    """The peer: sentence-transformers' ``CrossEncoder.predict`` on the same folder and pairs (raw logits)."""

    params = ([1] if PROFILE == "fast" else [1, 2],)
    param_names = ["threads"]

    def make_inputs(self, threads):
        try:
            import torch
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise NotImplementedError("sentence-transformers not installed") from None
        path, qs, ds = model_and_pairs()
        self.torch = torch
        self.ce = CrossEncoder(path, device="cpu")
        self.pairs = [[q, d] for q, d in zip(qs, ds, strict=True)]
        self.ident = torch.nn.Identity()

    def run(self, threads):
        self.torch.set_num_threads(threads)
        return self.ce.predict(self.pairs, batch_size=64, activation_fn=self.ident)

    def time_st_predict_64_pairs(self, threads):
        self.run(threads)

    def track_max_abs_diff(self, threads):
        from jkofast.encode.cross import cross_scores, load_cross_encoder

        path, qs, ds = model_and_pairs()
        ours = cross_scores(load_cross_encoder(path), qs, ds, n_threads=threads)
        return float(np.abs(np.asarray(self.run(threads), np.float64) - ours).max())
