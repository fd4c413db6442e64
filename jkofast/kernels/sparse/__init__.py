"""Sparse-retrieval kernels: counting, weights, CSR transpose, scoring with top-k, sparse cosine."""

__all__ = ["cosine", "scoring", "weights"]  # kernel modules
