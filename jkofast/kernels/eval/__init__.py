"""Ranking-metric kernels over ragged batches."""
