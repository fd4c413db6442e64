"""A tiny random sentence-transformers BERT folder and a naive NumPy forward pass (the oracle).

``write_tiny_bert(folder)`` writes config.json, model.safetensors (``safetensors.numpy``),
tokenizer.json (a ``tokenizers`` WordPiece model with BERT normaliser, pre-tokeniser and the
``[CLS] $A [SEP]`` template), modules.json, 1_Pooling/config.json and
sentence_bert_config.json.  ``naive_encode`` is the textbook padded-batch BERT with an additive
attention mask, float64, erf GELU (scipy), mean pooling with the mask and L2 normalisation.
"""

from __future__ import annotations

import json
import os

import numpy as np

WORDS = ("solar panels convert sunlight wind turbines make power the cat sat on mat dog and "
         "energy ##s ##ing rain river".split())  # fmt: skip
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CFG = dict(hidden_size=8, num_attention_heads=2, num_hidden_layers=2, intermediate_size=16,
           max_position_embeddings=16, type_vocab_size=2, layer_norm_eps=1e-12)  # fmt: skip
MAX_SEQ = 10


def layer_weights(p: str, h: int, inter: int, r) -> dict:
    """Random weights of one BERT encoder layer under the prefix ``p``, drawn by ``r(*shape, s=scale)``."""
    w = {}
    for n in ("query", "key", "value"):
        w[p + f"attention.self.{n}.weight"] = r(h, h)
        w[p + f"attention.self.{n}.bias"] = r(h, s=0.1)
    w[p + "attention.output.dense.weight"] = r(h, h)
    w[p + "attention.output.dense.bias"] = r(h, s=0.1)
    w[p + "attention.output.LayerNorm.weight"] = 1 + r(h, s=0.1)
    w[p + "attention.output.LayerNorm.bias"] = r(h, s=0.1)
    w[p + "intermediate.dense.weight"] = r(inter, h)
    w[p + "intermediate.dense.bias"] = r(inter, s=0.1)
    w[p + "output.dense.weight"] = r(h, inter)
    w[p + "output.dense.bias"] = r(h, s=0.1)
    w[p + "output.LayerNorm.weight"] = 1 + r(h, s=0.1)
    w[p + "output.LayerNorm.bias"] = r(h, s=0.1)
    return w


def tiny_weights(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    h, i, v = CFG["hidden_size"], CFG["intermediate_size"], len(SPECIAL) + len(WORDS)

    def r(*shape, s=0.5):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": r(v, h),
        "embeddings.position_embeddings.weight": r(CFG["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": r(2, h),
        "embeddings.LayerNorm.weight": 1 + r(h, s=0.1),
        "embeddings.LayerNorm.bias": r(h, s=0.1),
        "embeddings.position_ids": np.arange(CFG["max_position_embeddings"], dtype=np.int64)[None],
    }
    for layer in range(CFG["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        w.update(layer_weights(p, h, i, r))
    return w


def write_tiny_bert(folder, seed: int = 0, config: dict | None = None, pooling: str = "mean") -> str:
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    folder = str(folder)
    os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
    vocab = {t: i for i, t in enumerate([*SPECIAL, *WORDS])}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    tok.save(os.path.join(folder, "tokenizer.json"))
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu", "vocab_size": len(vocab),
           **CFG, **(config or {})}  # fmt: skip
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    save_file(tiny_weights(seed), os.path.join(folder, "model.safetensors"))
    mods = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    with open(os.path.join(folder, "modules.json"), "w") as fh:
        json.dump(mods, fh)
    with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as fh:
        json.dump({"word_embedding_dimension": CFG["hidden_size"], "pooling_mode_mean_tokens": pooling == "mean",
                   "pooling_mode_cls_token": pooling == "cls"}, fh)  # fmt: skip
    with open(os.path.join(folder, "sentence_bert_config.json"), "w") as fh:
        json.dump({"max_seq_length": MAX_SEQ, "do_lower_case": False}, fh)
    return folder


# ------------------------------------------------------------------------ the naive oracle
def _ln(x, g, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def _gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def naive_hidden(w: dict, ids_list, cfg=CFG):
    """Padded batch forward in float64 with the additive mask; returns (hidden (B, T, H), mask (B, T))."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    B, T = len(ids_list), max(len(s) for s in ids_list)
    ids = np.zeros((B, T), np.int64)
    mask = np.zeros((B, T))
    for b, s in enumerate(ids_list):
        ids[b, : len(s)] = s
        mask[b, : len(s)] = 1
    eps, nh = cfg["layer_norm_eps"], cfg["num_attention_heads"]
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:T][None]
    x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = _ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    H = x.shape[-1]
    d = H // nh
    add = (1.0 - mask)[:, None, None, :] * -1e9
    for layer in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."

        def lin(z, n, p=p):
            return z @ w[p + n + ".weight"].T + w[p + n + ".bias"]

        def heads(z):
            return z.reshape(B, T, nh, d).transpose(0, 2, 1, 3)

        q, k, v = (heads(lin(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + add
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, H)
        x = _ln(x + lin(ctx, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"], eps)  # fmt: skip
        f = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
        x = _ln(x + f, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x, mask


def naive_encode(w: dict, ids_list, pooling: str = "mean"):
    x, mask = naive_hidden(w, ids_list)
    if pooling == "cls":
        v = x[:, 0]
    else:
        v = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
