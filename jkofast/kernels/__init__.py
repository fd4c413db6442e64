"""Numba kernels: arrays in, arrays + int status codes out. No validation here.

Every kernel is created with ``jkofast._numba.kernel`` (lazy compile, one cache switch,
named fastmath presets).  Wrappers in ``jkofast`` validate and coerce before calling.

Sub-packages mirror the wings (``ot``, ``jko``, ``sparse``, ``sgr``, ``eval``, ``pools``);
leaves shared by several wings sit at this level (``topk``).
"""

__all__ = ["eval", "jko", "ot", "pools", "sgr", "sparse", "topk"]  # kernel modules / wing sub-packages
