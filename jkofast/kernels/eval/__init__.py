"""Ranking-metric kernels over ragged batches."""

__all__ = ["metrics"]  # kernel modules
