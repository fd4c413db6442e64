"""SparseGeometricRAG kernels: index build, query analysis and the query path."""
