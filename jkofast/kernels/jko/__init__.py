"""JKO-RAG kernels: per-pool geometry and the inner/outer solver."""
