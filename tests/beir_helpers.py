"""Tiny BEIR folders for CLI and main-job tests (corpus.jsonl, queries.jsonl, qrels/test.tsv)."""

from __future__ import annotations

import json
import os


def write_beir(root, docs, queries, qrels) -> str:
    """Write a BEIR folder at ``root`` and return its path as str.

    ``docs``: ``(id, title, text)``; ``queries``: ``(id, text)``; ``qrels``: ``(query id, doc id,
    label)`` for the test split. UTF-8 throughout.
    """
    os.makedirs(os.path.join(root, "qrels"), exist_ok=True)
    with open(os.path.join(root, "corpus.jsonl"), "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs)
    with open(os.path.join(root, "queries.jsonl"), "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"_id": i, "text": x}) + "\n" for i, x in queries)
    with open(os.path.join(root, "qrels", "test.tsv"), "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels))
    return str(root)


# a five-document folder the tiny-BERT vocabulary covers (tests/encode/encode_helpers.py)
TINY_DOCS = [
    ("d1", "Solar", "solar panels convert sunlight"),
    ("d2", "Wind", "wind turbines make power"),
    ("d3", "", "sunlight and wind"),
    ("d4", "Cat", "the cat sat on mat"),
    ("d5", "Dog", "dog and cat"),
]
TINY_QUERIES = [("q1", "sunlight power"), ("q2", "cat"), ("q3", "wind")]
