"""A random-weight BERT cross-encoder folder, as the Hugging Face hub serves ranking models.

``write_cross_encoder(folder, ...)`` writes ``config.json`` (``BertForSequenceClassification``),
``model.safetensors`` (``bert.*``, ``bert.pooler.dense.*``, ``classifier.*``), ``tokenizer.json``
(a ``tokenizers`` WordPiece model over a small word list, BERT normaliser and pre-tokeniser, the
pair template ``[CLS] $A [SEP] $B:1 [SEP]:1``) and, when asked, ``tokenizer_config.json``.
"""

from __future__ import annotations

import json
import os

import numpy as np
from encode.encode_helpers import layer_weights  # tests/encode/encode_helpers.py

WORDS = ("solar panels convert sunlight into power wind turbines make energy the cat sat on mat dog and rain river "
         "what is a does how protein cell gene cancer risk study trial ##s ##ing ##ed".split())  # fmt: skip
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def cross_weights(h, layers, inter, n_pos, n_labels, vocab, seed=0, scale=0.5) -> dict:
    """Random tensors of a ``BertForSequenceClassification`` checkpoint (float32)."""
    rng = np.random.default_rng(seed)

    def r(*shape, s=scale):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    w = {
        "bert.embeddings.word_embeddings.weight": r(vocab, h),
        "bert.embeddings.position_embeddings.weight": r(n_pos, h),
        "bert.embeddings.token_type_embeddings.weight": r(2, h),
        "bert.embeddings.LayerNorm.weight": 1 + r(h, s=0.1),
        "bert.embeddings.LayerNorm.bias": r(h, s=0.1),
        "bert.pooler.dense.weight": r(h, h),
        "bert.pooler.dense.bias": r(h, s=0.1),
        "classifier.weight": r(n_labels, h),
        "classifier.bias": r(n_labels, s=0.1),
    }
    for layer in range(layers):
        p = f"bert.encoder.layer.{layer}."
        w.update(layer_weights(p, h, inter, r))
    return w


def write_tokenizer(folder, words=WORDS) -> dict:
    """Write a BERT WordPiece ``tokenizer.json`` with the pair template; return its vocabulary."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {t: i for i, t in enumerate([*SPECIAL, *dict.fromkeys(words)])}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = ("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[cls, sep]
    )
    tok.save(os.path.join(str(folder), "tokenizer.json"))
    return vocab


def write_cross_encoder(folder, *, hidden=8, heads=2, layers=2, intermediate=16, max_pos=64, num_labels=1,
                        seed=0, model_max_length=None, words=WORDS, id2label=True) -> str:  # fmt: skip
    """Write a random cross-encoder folder; return its path."""
    from safetensors.numpy import save_file

    folder = str(folder)
    os.makedirs(folder, exist_ok=True)
    vocab = write_tokenizer(folder, words)
    cfg = {
        "architectures": ["BertForSequenceClassification"], "model_type": "bert", "hidden_act": "gelu",
        "vocab_size": len(vocab), "hidden_size": hidden, "num_attention_heads": heads, "num_hidden_layers": layers,
        "intermediate_size": intermediate, "max_position_embeddings": max_pos, "type_vocab_size": 2,
        "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "pad_token_id": 0,
    }  # fmt: skip
    if id2label:
        cfg["id2label"] = {str(i): f"LABEL_{i}" for i in range(num_labels)}
        cfg["label2id"] = {f"LABEL_{i}": i for i in range(num_labels)}
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    save_file(cross_weights(hidden, layers, intermediate, max_pos, num_labels, len(vocab), seed),
              os.path.join(folder, "model.safetensors"))  # fmt: skip
    if model_max_length is not None:
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as fh:
            json.dump({"model_max_length": model_max_length, "do_lower_case": True,
                       "tokenizer_class": "BertTokenizer"}, fh)  # fmt: skip
    return folder
