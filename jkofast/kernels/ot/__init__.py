"""Optimal-transport kernels: log-domain Sinkhorn sweeps and dual read-outs."""
