"""Numba kernels: arrays in, arrays + int status codes out. No validation here.

Every kernel is created with ``jkofast._numba.kernel`` (lazy compile, one cache switch,
named fastmath presets).  Wrappers in ``jkofast`` validate and coerce before calling.
"""
