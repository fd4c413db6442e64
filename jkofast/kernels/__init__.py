"""Numba kernels: arrays in, arrays + int status codes out. No validation here.

Every kernel is created with ``jkofast._numba.kernel`` (lazy compile, one cache switch,
named fastmath presets).  Wrappers in ``jkofast`` validate and coerce before calling.

Sub-packages mirror the wings (``text``, ``ot``, ``eval``, ``encode``, ``sparse``, ``sgr``, ``pools``, ``jko``);
leaves shared by several wings sit at this level (``topk``, ``sorting``).  The rules every kernel follows
(cache key, inlining, int64 indices, specialisation flags) and how to add one: docs/develop.md.
"""

__all__ = [
    "encode",
    "eval",
    "jko",
    "ot",
    "pools",
    "sgr",
    "sorting",
    "sparse",
    "text",
    "topk",
]  # kernel modules / wing sub-packages
