"""The torch-free cross-encoder (jkofast.encode.cross): its kernel against a naive attention, its
logits against ``transformers``' ``BertForSequenceClassification`` (an oracle, skipped when absent)
on random models written to tmp_path, pair tokenisation and truncation against Hugging Face's
tokenizer, the score of multi-label heads, and the folder errors."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from jkofast.encode.bert import forward
from jkofast.encode.cross import (
    _logits_to_scores,
    cross_logits,
    cross_scores,
    load_cross_encoder,
    pair_tokenize,
)
from jkofast.kernels.encode import cross as KC

pytest.importorskip("tokenizers", reason='the encode extra: pip install "jkofast[encode]"')
pytest.importorskip("safetensors", reason='the encode extra: pip install "jkofast[encode]"')

from cross_helpers import write_cross_encoder

QUERIES = ["what is solar power", "cat", "how does a gene make protein", "", "rain river rain river rain"]
DOCS = [
    "solar panels convert sunlight into power",
    "the cat sat on the mat and the dog sat on the mat",
    "protein",
    "wind turbines make energy",
    "",
]
LONG_Q = " ".join(["cancer risk study"] * 20)  # 60 tokens
LONG_D = " ".join(["the cell gene trial"] * 20)  # 80 tokens


# ------------------------------------------------------------------------------- kernel
def test_attention_first_row_matches_naive():
    rng = np.random.default_rng(3)
    nh, d = 3, 4
    H = nh * d
    lengths = [3, 1, 6]
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    qkv = rng.standard_normal((off[-1], 3 * H)).astype(np.float32)
    ctx = np.full((3, H), np.nan, np.float32)
    KC.attention_first_row(qkv, off, nh, np.float32(1 / math.sqrt(d)), ctx)
    for s, m in enumerate(lengths):
        blk = qkv[off[s] : off[s + 1]].astype(np.float64)
        q, k, v = (blk[:, i * H : (i + 1) * H].reshape(m, nh, d).transpose(1, 0, 2) for i in range(3))
        sc = q[:, :1] @ k.transpose(0, 2, 1) / math.sqrt(d)
        p = np.exp(sc - sc.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        ref = (p @ v).transpose(1, 0, 2).reshape(H)
        np.testing.assert_allclose(ctx[s], ref, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ model without an oracle
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load_cross_encoder(write_cross_encoder(tmp_path_factory.mktemp("ce"), model_max_length=24))


def test_cls_rows_equal_the_full_forward(tiny):
    """The last layer run for [CLS] only gives the [CLS] row of the full forward pass."""
    from jkofast.encode.cross import _cls_forward

    ids, types = pair_tokenize(tiny, QUERIES, DOCS)
    off = np.concatenate([[0], np.cumsum([t.size for t in ids])]).astype(np.int64)
    flat_ids, flat_types = np.concatenate(ids), np.concatenate(types)
    full = forward(tiny.bert, flat_ids, off, flat_types)
    cls = _cls_forward(tiny, flat_ids, off, np.diff(off), flat_types)
    np.testing.assert_allclose(cls, full[off[:-1]], rtol=1e-5, atol=1e-5)


def test_pair_tokens_types_and_truncation(tiny):
    ids, types = pair_tokenize(tiny, ["cat", LONG_Q, "cat", LONG_Q], ["the dog", "dog", LONG_D, LONG_D])
    vocab = tiny.bert.tokenizer.get_vocab()
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    assert ids[0].tolist() == [cls, vocab["cat"], sep, vocab["the"], vocab["dog"], sep]
    assert types[0].tolist() == [0, 0, 0, 1, 1, 1]
    for i, t in zip(ids, types, strict=True):
        assert i.size <= tiny.max_length == 24 and i[0] == cls and i[-1] == sep
        n_a = int(np.flatnonzero(i == sep)[0]) + 1  # [CLS] A [SEP]: type 0
        assert (t[:n_a] == 0).all() and (t[n_a:] == 1).all()
    # longest_first: the long side loses tokens until the pair fits; both long -> they end equal (+-1)
    assert ids[1].size == 24 and (types[1] == 1).sum() == 2  # "dog" kept whole
    assert ids[2].size == 24 and (types[2] == 0).sum() == 3
    a, b = (types[3] == 0).sum() - 2, (types[3] == 1).sum() - 1
    assert ids[3].size == 24 and abs(a - b) <= 1


def test_scores_in_pair_order_and_batch_independent(tiny):
    full = cross_logits(tiny, QUERIES, DOCS, batch_size=64)
    assert full.shape == (5, 1) and full.dtype == np.float32 and np.isfinite(full).all()
    for bs in (1, 2):
        np.testing.assert_allclose(cross_logits(tiny, QUERIES, DOCS, batch_size=bs), full, rtol=1e-5, atol=1e-6)
    rev = cross_scores(tiny, QUERIES[::-1], DOCS[::-1])
    np.testing.assert_allclose(rev[::-1], full[:, 0], rtol=1e-5, atol=1e-6)
    assert cross_logits(tiny, [], []).shape == (0, 1)


def test_multi_label_scores_are_log_odds(tmp_path):
    m2 = load_cross_encoder(write_cross_encoder(tmp_path / "two", num_labels=2))
    lg = cross_logits(m2, QUERIES, DOCS)
    np.testing.assert_allclose(cross_scores(m2, QUERIES, DOCS), lg[:, 1] - lg[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cross_scores(m2, QUERIES, DOCS, label=0), lg[:, 0] - lg[:, 1], rtol=1e-5, atol=1e-5)
    m3 = load_cross_encoder(write_cross_encoder(tmp_path / "three", num_labels=3))
    with pytest.raises(ValueError, match=r"3 labels .* choose the one to score"):
        cross_scores(m3, QUERIES, DOCS)
    with pytest.raises(ValueError, match="label 3 is out of range"):
        cross_scores(m3, QUERIES, DOCS, label=3)
    lg3 = cross_logits(m3, QUERIES, DOCS).astype(np.float64)
    p = np.exp(lg3 - lg3.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(cross_scores(m3, QUERIES, DOCS, label=2), np.log(p[:, 2] / (1 - p[:, 2])),
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    big = np.array([[0.0, 1000.0, -1000.0]])
    assert np.isfinite(_logits_to_scores(big, 0)).all()  # log-sum-exp with the max taken out


def test_bad_arguments(tiny):
    with pytest.raises(TypeError, match="queries must be a list of str"):
        cross_logits(tiny, "cat", ["dog"])
    with pytest.raises(ValueError, match="queries has 2 texts, docs 1"):
        cross_logits(tiny, ["a", "b"], ["c"])
    with pytest.raises(TypeError, match=r"docs\[0\] must be a str"):
        cross_logits(tiny, ["a"], [None])
    with pytest.raises(ValueError, match="single output"):
        cross_scores(tiny, ["a"], ["b"], label=1)


def test_folder_errors(tmp_path):
    from encode_helpers import write_tiny_bert

    with pytest.raises(ValueError, match="not a sequence-classification"):
        load_cross_encoder(write_tiny_bert(tmp_path / "embedder"))  # a sentence-embedding model
    p = write_cross_encoder(tmp_path / "ce", max_pos=32)
    with pytest.raises(ValueError, match="max_length 33 exceeds the model's 32 position"):
        load_cross_encoder(p, max_length=33)
    assert load_cross_encoder(p).max_length == 32  # no tokenizer_config.json: the positions
    assert load_cross_encoder(p, max_length=9).max_length == 9
    cfg = json.load(open(os.path.join(p, "config.json")))
    cfg["id2label"] = {"0": "a", "1": "b"}
    json.dump(cfg, open(os.path.join(p, "config.json"), "w"))
    with pytest.raises(ValueError, match="id2label names 2 labels, the classifier has 1"):
        load_cross_encoder(p)
    q = write_cross_encoder(tmp_path / "single")
    tok = json.load(open(os.path.join(q, "tokenizer.json")))
    tok["post_processor"] = None
    json.dump(tok, open(os.path.join(q, "tokenizer.json"), "w"))
    with pytest.raises(ValueError, match=r"does not build pairs as \[CLS\] A \[SEP\] B \[SEP\]"):
        load_cross_encoder(q)


# --------------------------------------------------------- the transformers oracle (optional)
SHAPES = [  # (hidden, heads, layers, intermediate, max_pos, model_max_length, num_labels)
    (8, 2, 1, 16, 64, None, 1),
    (12, 3, 2, 20, 40, 24, 1),
    (16, 4, 3, 32, 64, 16, 2),
    (32, 8, 2, 64, 128, 48, 3),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"h{s[0]}-l{s[2]}-len{s[5]}-labels{s[6]}")
def test_logits_match_transformers(tmp_path, shape):
    torch = pytest.importorskip("torch", reason="transformers is an oracle: pip install transformers")
    transformers = pytest.importorskip("transformers", reason="an oracle: pip install transformers")
    h, nh, nl, inter, max_pos, mml, labels = shape
    path = write_cross_encoder(tmp_path / "m", hidden=h, heads=nh, layers=nl, intermediate=inter, max_pos=max_pos,
                               model_max_length=mml, num_labels=labels, seed=h)  # fmt: skip
    model = load_cross_encoder(path)
    qs = [*QUERIES, LONG_Q, "cat", LONG_Q]
    ds = [*DOCS, "dog", LONG_D, LONG_D]  # long query / long document / both: truncated longest_first
    ours = cross_logits(model, qs, ds, batch_size=3)
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"))
    hf_tok.pad_token = "[PAD]"
    enc = hf_tok(qs, ds, truncation="longest_first", max_length=model.max_length, padding=True,
                 return_tensors="pt", return_token_type_ids=True)  # fmt: skip
    ids, types = pair_tokenize(model, qs, ds)  # the same tokens and types as Hugging Face's pair truncation
    for i, t in enumerate(ids):
        n = int(enc["attention_mask"][i].sum())
        assert enc["input_ids"][i, :n].tolist() == t.tolist()
        assert enc["token_type_ids"][i, :n].tolist() == types[i].tolist() and types[i].max() == 1
    hf = transformers.BertForSequenceClassification.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        ref = hf(**enc).logits.numpy()
    assert ours.shape == ref.shape == (len(qs), labels)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-5)


def test_scores_match_sentence_transformers(tmp_path):
    """sentence-transformers' CrossEncoder on the same folder: same max_length, raw logits (no sigmoid)."""
    torch = pytest.importorskip("torch", reason="an oracle: pip install sentence-transformers")
    st = pytest.importorskip("sentence_transformers", reason="an oracle: pip install sentence-transformers")
    path = write_cross_encoder(tmp_path / "m", hidden=16, heads=4, layers=2, intermediate=32, model_max_length=20)
    model = load_cross_encoder(path)
    ce = st.CrossEncoder(path, device="cpu")
    assert ce.max_seq_length == model.max_length == 20
    qs, ds = [*QUERIES, LONG_Q], [*DOCS, LONG_D]
    ref = ce.predict(list(zip(qs, ds, strict=True)), activation_fn=torch.nn.Identity(), batch_size=4)
    np.testing.assert_allclose(cross_scores(model, qs, ds), ref, rtol=0, atol=1e-5)
