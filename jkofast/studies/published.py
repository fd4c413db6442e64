"""The published numbers each study prints beside its own, read from the data files shipped with the package.

One JSON file per study, ``jkofast/studies/data/<study>.json``: a ``"sources"`` entry naming the
SPEC section of every table, then the tables.  JSON object keys are strings; keys that spell a
number (a count of injected distractors, a pool size, a coverage) come back as ``int`` or
``float``, so a table is indexed as the study indexes its own results.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re

__all__ = ["published"]

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?\d+\.\d+")


def published(study: str) -> dict:
    """Return the published tables of ``study`` (a fresh copy; the callers may keep and change it).

    Parameters
    ----------
    study : str
        File stem under ``jkofast/studies/data/`` (``"ablations"``, ``"dual_rank"``, ...).

    Returns
    -------
    dict
        Table name -> table, without the ``"sources"`` entry.

    Raises
    ------
    ValueError
        No data file for ``study``.
    """
    return copy.deepcopy(_load(study))


def _key(k: str):
    if _INT.fullmatch(k):
        return int(k)
    if _FLOAT.fullmatch(k):
        return float(k)
    return k


@functools.cache
def _load(study: str) -> dict:
    path = os.path.join(_DATA, f"{study}.json")
    if not re.fullmatch(r"[a-z_]+", study) or not os.path.isfile(path):
        raise ValueError(f"no published tables for study {study!r}")
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh, object_pairs_hook=lambda pairs: {_key(k): v for k, v in pairs})
    doc.pop("sources", None)
    return doc
