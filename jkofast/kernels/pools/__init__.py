"""Pool kernels: fusion, per-pool normalisation, in-pool baselines."""
