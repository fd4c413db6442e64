"""jkofast's torch-free cross-encoder vs sentence-transformers' ``CrossEncoder`` (torch CPU), side by side in one run.

Same model: a seeded random-weight ``BertForSequenceClassification`` of
cross-encoder/ms-marco-MiniLM-L-6-v2's shape (6 layers, hidden 384, 12 heads, FFN 1536, 512
positions, one label), written to a temporary folder with a WordPiece ``tokenizer.json`` over
SciFact's 30,000 most frequent words (every character and ``##`` character too, so no word is
unknown) and ``model_max_length`` 512.  Same pairs: a seeded sample of SciFact test queries,
each with documents drawn from the corpus (``title + " " + text``), scored with batch 64 (the
published protocol's), the same thread counts; both sides tokenise with the ``tokenizers``
library (included in the time).  sentence-transformers runs in a worker subprocess of the torch
interpreter (``--st-python``; jkofast never imports torch), with raw logits
(``activation_fn=Identity``).  Each (library, threads) cell is timed ``--repeat`` times,
interleaved, and the **median** is reported; the scores of the two agree to the printed max
absolute difference.

    python3 benchmarks/tools/cross_encoder_vs_st.py --pairs 512 --threads 1 2 --repeat 3
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

MINILM_L6 = dict(hidden=384, heads=12, layers=6, intermediate=1536, max_pos=512)


def write_random_cross_encoder(folder, words, *, hidden, heads, layers, intermediate, max_pos, seed=0) -> str:
    """Write a random-weight one-label BERT cross-encoder folder (hub layout) over ``words``; return it."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    os.makedirs(folder, exist_ok=True)
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = sorted({c for w in words for c in w})
    vocab = {t: i for i, t in enumerate(dict.fromkeys([*special, *chars, *("##" + c for c in chars), *words]))}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )  # fmt: skip
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as fh:
        json.dump({"model_max_length": max_pos, "do_lower_case": True, "tokenizer_class": "BertTokenizer",
                   "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]",
                   "mask_token": "[MASK]"}, fh)  # fmt: skip
    cfg = {"architectures": ["BertForSequenceClassification"], "model_type": "bert", "hidden_act": "gelu",
           "vocab_size": len(vocab), "hidden_size": hidden, "num_attention_heads": heads,
           "num_hidden_layers": layers, "intermediate_size": intermediate, "max_position_embeddings": max_pos,
           "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0, "id2label": {"0": "LABEL_0"},
           "label2id": {"LABEL_0": 0}}  # fmt: skip
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    rng = np.random.default_rng(seed)

    def r(*shape, s=0.05):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    h, i = hidden, intermediate
    w = {"bert.embeddings.word_embeddings.weight": r(len(vocab), h),
         "bert.embeddings.position_embeddings.weight": r(max_pos, h),
         "bert.embeddings.token_type_embeddings.weight": r(2, h),
         "bert.embeddings.LayerNorm.weight": 1 + r(h), "bert.embeddings.LayerNorm.bias": r(h),
         "bert.pooler.dense.weight": r(h, h), "bert.pooler.dense.bias": r(h),
         "classifier.weight": r(1, h), "classifier.bias": r(1)}  # fmt: skip
    for n in range(layers):
        p = f"bert.encoder.layer.{n}."
        for name, shape in (("attention.self.query", (h, h)), ("attention.self.key", (h, h)),
                            ("attention.self.value", (h, h)), ("attention.output.dense", (h, h)),
                            ("intermediate.dense", (i, h)), ("output.dense", (h, i))):  # fmt: skip
            w[p + name + ".weight"] = r(*shape)
            w[p + name + ".bias"] = r(shape[0])
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"] = 1 + r(h)
            w[p + ln + ".bias"] = r(h)
    save_file(w, os.path.join(folder, "model.safetensors"))
    return folder


def scifact_words(texts, n: int = 30000) -> list[str]:
    """The ``n`` most frequent lower-case words (``\\w+``) of ``texts``."""
    c = collections.Counter(t for x in texts for t in re.findall(r"\w+", x.lower()))
    return [w for w, _ in c.most_common(n)]


def scifact_pairs(n_pairs: int, seed: int = 0):
    """``(queries, docs)``: a seeded sample of SciFact test queries, each with 8 seeded corpus documents."""
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset("scifact")
    docs = ds.doc_texts(" ")
    qtext = ds.queries
    qids = ds.split_query_ids("test")
    rng = np.random.default_rng(seed)
    qs = [qtext[q] for q in rng.choice(qids, (n_pairs + 7) // 8, replace=False) for _ in range(8)][:n_pairs]
    ds_ = [docs[i] for i in rng.choice(len(docs), n_pairs, replace=False)]
    return qs, ds_, docs


def _st_worker(args) -> int:
    """Run in the torch interpreter: score the pairs of ``--pairs-file``, print the median times, save the scores."""
    import torch
    from sentence_transformers import CrossEncoder

    with open(args.pairs_file, encoding="utf-8") as fh:
        pairs = json.load(fh)
    torch.set_num_threads(args.threads[0])
    model = CrossEncoder(args.model, device="cpu")
    ident = torch.nn.Identity()
    model.predict(pairs[:8], batch_size=args.batch_size, activation_fn=ident)  # warm-up
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        s = model.predict(pairs, batch_size=args.batch_size, activation_fn=ident)
        times.append(time.perf_counter() - t0)
    np.save(args.out, np.asarray(s, np.float32))
    import sentence_transformers
    import transformers

    print(json.dumps({"times": times, "max_length": model.max_seq_length, "torch": torch.__version__,
                      "sentence-transformers": sentence_transformers.__version__,
                      "transformers": transformers.__version__}))  # fmt: skip
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--st-python",
        default=os.environ.get("JKOFAST_ST_PYTHON", sys.executable),
        help="interpreter with torch + sentence-transformers (default: $JKOFAST_ST_PYTHON, else this one)",
    )
    p.add_argument("--pairs", type=int, default=512, help="(query, document) pairs timed")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--st-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--pairs-file", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.st_worker:
        return _st_worker(args)

    from jkofast.encode.cross import cross_scores, load_cross_encoder, pair_tokenize

    qs, ds, corpus = scifact_pairs(args.pairs)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_random_cross_encoder(os.path.join(tmp, "ce"), scifact_words(corpus), **MINILM_L6)
        model = load_cross_encoder(path)
        ids, _ = pair_tokenize(model, qs, ds)
        n_tok = np.array([t.size for t in ids])
        print(f"random MiniLM-L6-shaped cross-encoder (6 x 384, 12 heads), max_length {model.max_length}; "
              f"{len(qs)} SciFact pairs, tokens per pair mean {n_tok.mean():.0f} (max {n_tok.max()}), "
              f"batch {args.batch_size}, median of {args.repeat}")  # fmt: skip
        cross_scores(model, qs[:8], ds[:8], batch_size=args.batch_size)  # compile / load the kernels
        ppath = os.path.join(tmp, "pairs.json")
        with open(ppath, "w", encoding="utf-8") as fh:
            json.dump([[q, d] for q, d in zip(qs, ds, strict=True)], fh)
        jk, st, err = {}, {}, {}
        for nt in args.threads:  # interleaved per thread count: jkofast, then sentence-transformers
            t_jk = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                s_jk = cross_scores(model, qs, ds, batch_size=args.batch_size, n_threads=nt)
                t_jk.append(time.perf_counter() - t0)
            jk[nt] = float(np.median(t_jk))
            cmd = [args.st_python, os.path.abspath(__file__), "--st-worker", "--pairs-file", ppath, "--model", path,
                   "--out", os.path.join(tmp, "st.npy"), "--batch-size", str(args.batch_size),
                   "--repeat", str(args.repeat), "--threads", str(nt)]  # fmt: skip
            env = dict(os.environ, OMP_NUM_THREADS=str(nt), MKL_NUM_THREADS=str(nt))
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if res.returncode:
                print(res.stderr[-3000:], file=sys.stderr)
                return 1
            info = json.loads(res.stdout.strip().splitlines()[-1])
            if info["max_length"] != model.max_length:
                print(f"max_length differs: ST {info['max_length']}, jkofast {model.max_length}", file=sys.stderr)
                return 1
            st[nt] = float(np.median(info["times"]))
            err[nt] = float(np.abs(np.load(os.path.join(tmp, "st.npy")) - s_jk).max())
    print(f"torch {info['torch']}, sentence-transformers {info['sentence-transformers']}, "
          f"transformers {info['transformers']}")  # fmt: skip
    print(f"{'threads':>7} {'jkofast s':>10} {'ST s':>8} {'pairs/s jk':>11} {'pairs/s ST':>11} {'ratio ST/jk':>12} "
          f"{'max |diff|':>11}")  # fmt: skip
    n = len(qs)
    for nt in args.threads:
        print(f"{nt:>7} {jk[nt]:>10.2f} {st[nt]:>8.2f} {n / jk[nt]:>11.1f} {n / st[nt]:>11.1f} "
              f"{st[nt] / jk[nt]:>12.3f} {err[nt]:>11.2e}")  # fmt: skip
    print(f"uptime: {os.popen('uptime').read().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
