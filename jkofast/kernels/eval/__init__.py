"""Evaluation kernels: ranking metrics over ragged batches, run-file parsing, the stability metric W_C."""

__all__ = ["metrics", "parse", "wc"]  # kernel modules
