"""The chunk store of a streaming rerank job: ``OUT.parts/{manifest.json, chunk_NNNNNN.trec|.npz|.conf}``.

Every finished chunk is a set of part files written atomically, its ``.trec`` last (it marks the
chunk finished); ``manifest.json`` fingerprints the input and the settings, so a restart skips the
finished chunks of the same job and refuses the parts of another.  The final outputs are the
concatenation of the parts in input order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile

import numpy as np

from jkofast._io import atomic_open, atomic_save_npz, atomic_write_text, file_sha256
from jkofast.jko.confidence import format_confidence_lines

__all__ = ["FMT_VERSION", "ChunkStore", "fingerprint", "write_part"]

FMT_VERSION = 1  # of the chunk store (manifest + parts)


def fingerprint(opts, cfg) -> dict:
    """Return the manifest of a job: its inputs (path, size, mtime and content digest), its settings and their hash.

    Every input file (pools, embeddings, ids, TF-IDF corpus, user scores, projection) is keyed by
    the SHA-256 of its bytes, so a file edited between two runs (even keeping its size and
    modification time) refuses the parts made from the old one instead of mixing them in.
    ``grad`` is the gradient path the job runs (``cfg.grad``, the default resolved), so parts
    written on one path are never resumed on the other.
    """
    st = os.stat(opts.pools)
    d = {
        "version": FMT_VERSION,
        "pools": os.path.abspath(opts.pools),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "config": opts.config if isinstance(opts.config, str) else dataclasses.asdict(opts.config),
        "chunk_size": opts.chunk_size,
        "k": opts.k,
        "tag": opts.tag,
        "embeddings": opts.embeddings,
        "ids": opts.ids,
        "tfidf_corpus": opts.tfidf_corpus,
        "scores": opts.scores,
        "scores_in_memory": opts.scores_in_memory,
        "grad": cfg.grad,
        "mode": opts.mode,
        "alpha_prox": opts.alpha_prox,
        "alpha": opts.alpha,
        "gamma": opts.gamma,
        "dist": bool(opts.dist),
    }
    if opts.confidence or opts.projection:  # absent keys keep the hash of older manifests
        d["confidence"] = bool(opts.confidence)
        d["projection"] = os.path.abspath(opts.projection) if opts.projection else None
    if getattr(opts, "multires", None):
        d["multires"] = [opts.multires, opts.clusters, opts.refine, float(opts.beta)]
    d["inputs_sha256"] = {
        role: file_sha256(path)
        for role, path in (
            ("pools", opts.pools),
            ("embeddings", opts.embeddings),
            ("ids", opts.ids),
            ("tfidf_corpus", opts.tfidf_corpus),
            ("scores", opts.scores),
            ("projection", opts.projection),
        )
        if path
    }
    d["hash"] = hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()
    return d


class ChunkStore:
    """Finished chunks as atomic part files; a manifest ties them to the input and settings."""

    def __init__(self, opts, cfg):
        self.dir = opts.out + ".parts"
        self.dist = bool(opts.dist)
        self.conf = bool(opts.confidence)
        self.bases: list[str] = []
        os.makedirs(self.dir, exist_ok=True)
        fp = fingerprint(opts, cfg)
        self.manifest = os.path.join(self.dir, "manifest.json")
        if os.path.exists(self.manifest):
            try:
                with open(self.manifest, encoding="utf-8") as fh:
                    old = json.load(fh)
            except ValueError as exc:  # not JSON, not UTF-8
                raise ValueError(
                    f"{self.manifest}: not a readable manifest ({exc}); remove {self.dir} to start over"
                ) from None
            if not isinstance(old, dict) or old.get("hash") != fp["hash"]:
                raise ValueError(f"{self.dir} holds parts of a run with other settings/input; remove it to start over")
        else:
            atomic_write_text(self.manifest, json.dumps(fp, indent=1))

    def add(self, ci: int) -> bool:
        """Register chunk ``ci`` (in order); True when it is finished already.

        A chunk counts as finished when its ``.sum`` (written last) lists every part the job needs and
        each part still has the SHA-256 recorded there; a chunk with a missing or damaged part is
        removed and solved again, so a resumed output never holds a damaged part.
        """
        base = os.path.join(self.dir, f"chunk_{ci:06d}")
        self.bases.append(base)
        need = [".trec", *([".npz"] if self.dist else []), *([".conf"] if self.conf else [])]
        if _parts_intact(base, need):
            return True
        for ext in (".sum", ".trec", ".npz", ".conf"):
            if os.path.exists(base + ext):
                os.remove(base + ext)
        return False

    def write(self, ci: int, text: str, dist: dict) -> None:
        """Store chunk ``ci``; its ``.trec`` is written last: it marks the chunk finished."""
        conf = dist.pop("_conf", None)
        write_part(self.dir, ci, text, dist if self.dist else None, conf)

    def concat(self, out: str, dist: str | None, confidence: str | None = None) -> None:
        """Write the final output (and dist, confidence) from the parts, atomically."""
        _concat_parts(out, [b + ".trec" for b in self.bases])
        if dist:
            _write_npz_streaming(dist, [b + ".npz" for b in self.bases])
        if confidence:
            head = format_confidence_lines([], {c: [] for c in ("conf_dual", "conf_softmax", "conf_margin")})
            _concat_parts(confidence, [b + ".conf" for b in self.bases], head.encode("utf-8"))

    def remove(self) -> None:
        """Delete the parts, the manifest and the folder."""
        for base in self.bases:
            for ext in (".sum", ".trec", ".npz", ".conf"):
                if os.path.exists(base + ext):
                    os.remove(base + ext)
        os.remove(self.manifest)
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def _concat_parts(path: str, parts: list, head: bytes = b"") -> None:
    """Write ``head`` then the bytes of every part file, in order, to ``path`` (atomically)."""
    with atomic_open(path, fsync=False) as dst:
        dst.write(head)
        for part in parts:
            with open(part, "rb") as fh:
                while buf := fh.read(1 << 20):
                    dst.write(buf)


def write_part(parts_dir: str, ci: int, text: str, dist: dict | None, conf: str | None = None) -> None:
    """Write chunk ``ci``'s part files atomically: ``.npz`` / ``.conf`` (when given), the ``.trec``, then ``.sum``.

    ``.sum`` (the SHA-256 of each part) is written last and marks the chunk finished; a chunk
    written twice (a retried task) is replaced by identical bytes.
    """
    base = os.path.join(parts_dir, f"chunk_{ci:06d}")
    if conf is not None:
        atomic_write_text(base + ".conf", conf)
    if dist is not None:
        atomic_save_npz(base + ".npz", **{k: v for k, v in dist.items() if k != "_conf"})
    atomic_write_text(base + ".trec", text)
    sums = {ext: file_sha256(base + ext) for ext in (".trec", ".npz", ".conf") if os.path.exists(base + ext)}
    atomic_write_text(base + ".sum", json.dumps(sums, sort_keys=True))


def _parts_intact(base: str, need: list) -> bool:
    """Whether chunk ``base``'s ``.sum`` lists every part in ``need`` and each part matches its SHA-256."""
    try:
        with open(base + ".sum", encoding="utf-8") as fh:
            sums = json.load(fh)
    except (OSError, ValueError):
        return False
    if not isinstance(sums, dict) or any(ext not in sums for ext in need):
        return False
    try:
        return all(file_sha256(base + ext) == sums[ext] for ext in need)
    except OSError:
        return False


def _write_npz_streaming(path: str, parts: list[str]) -> None:
    """Concatenate per-chunk npz parts into one .npz without holding all of p in memory."""
    sizes, qids, status = [], [], []
    n_total = 0
    for pth in parts:
        with np.load(pth) as z:
            sizes.append(z["sizes"])
            qids.append(z["query_ids"])
            status.append(z["status"])
            n_total += int(z["sizes"].sum())
    sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    offsets = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    with atomic_open(path, fsync=False) as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in (
            ("query_ids", np.concatenate(qids) if qids else np.zeros(0, str)),
            ("offsets", offsets),
            ("status", np.concatenate(status) if status else np.zeros(0, np.int32)),
        ):
            with zf.open(name + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(arr))
        with zf.open("p.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_2_0(
                fh,
                {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False, "shape": (n_total,)},
            )
            for pth in parts:
                with np.load(pth) as z:
                    fh.write(np.ascontiguousarray(z["p"], dtype="<f4").tobytes())
