"""The torch-free encoder: every kernel and the whole forward pass against a naive NumPy BERT
(tests/encode/tiny_bert.py) on a tiny random model written to tmp_path; model-folder errors;
parity with the bundled SciFact embeddings when the all-MiniLM-L6-v2 weights are installed."""

from __future__ import annotations

import itertools
import json
import math
import os
import zipfile

import numpy as np
import pytest
from scipy.special import erf

from jkofast.encode.bert import _forward, encode, forward, tokenize
from jkofast.encode.model import MODEL_HINT, default_model_path, load_model
from jkofast.kernels.encode import bert as K

pytest.importorskip("tokenizers", reason='the encode extra: pip install "jkofast[encode]"')
pytest.importorskip("safetensors", reason='the encode extra: pip install "jkofast[encode]"')

from encode_helpers import MAX_SEQ, naive_encode, naive_hidden, tiny_weights, write_tiny_bert

TEXTS = ["solar panels convert sunlight", "the cat sat on the mat", "wind", "dog and cat and rain river energy"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = write_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))
    return load_model(path)


def _ln(x, g, b, eps):
    x = x.astype(np.float64)
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * g + b


# ------------------------------------------------------------------------------- kernels
def test_embed_layernorm_matches_numpy():
    rng = np.random.default_rng(1)
    word, pos, typ = (rng.standard_normal((n, 6)).astype(np.float32) for n in (9, 5, 2))
    g, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    ids, positions, types = np.array([3, 0, 8, 8]), np.array([0, 1, 0, 4]), np.array([0, 1, 0, 0])
    out = np.empty((4, 6), np.float32)
    K.embed_layernorm(ids, positions, types, word, pos, typ, g, b, 1e-12, out)
    ref = _ln(word[ids] + pos[positions] + typ[types], g, b, 1e-12)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_add_bias_gelu_is_the_erf_gelu():
    x = np.linspace(-9, 9, 60, dtype=np.float32).reshape(3, 20)
    bias = np.linspace(-0.5, 0.5, 20, dtype=np.float32)
    y = x.copy()
    K.add_bias_gelu(y, bias)
    z = x.astype(np.float64) + bias
    np.testing.assert_allclose(y, 0.5 * z * (1 + erf(z / math.sqrt(2))), rtol=1e-5, atol=5e-7)


def test_exp_inplace_relative_error():
    x = np.linspace(-87, 20, 2001, dtype=np.float32)
    y = x.copy()
    K.exp_inplace(y, np.empty(y.size, np.int32))
    np.testing.assert_allclose(y, np.exp(x.astype(np.float64)), rtol=3e-7)
    y = np.array([-1e4, -100.0, 0.0], np.float32)
    K.exp_inplace(y, np.empty(3, np.int32))
    assert np.all(y[:2] < 2e-38) and y[2] == 1.0  # clamped, finite, no NaN


def test_add_bias_residual_layernorm_in_place_on_residual():
    rng = np.random.default_rng(2)
    x, res = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32)
    b, g, be = (rng.standard_normal(7).astype(np.float32) for _ in range(3))
    ref = _ln(x + b + res, g, be, 1e-12)
    K.add_bias_residual_layernorm(x.copy(), b, res, g, be, 1e-12, res)  # out = residual
    np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-5)


def test_attention_packed_matches_masked_padded_attention():
    rng = np.random.default_rng(3)
    nh, d = 2, 4
    H = nh * d
    lengths = [3, 1, 5]
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    qkv = rng.standard_normal((off[-1], 3 * H)).astype(np.float32)
    ctx = np.full((off[-1], H), np.nan, np.float32)
    K.attention_packed(qkv, off, nh, np.float32(1 / math.sqrt(d)), ctx)
    for s, m in enumerate(lengths):  # padded to T = 5 with an additive -1e9 mask, float64
        T = 5
        blk = np.zeros((T, 3 * H))
        blk[:m] = qkv[off[s] : off[s + 1]]
        q, k, v = (blk[:, i * H : (i + 1) * H].reshape(T, nh, d).transpose(1, 0, 2) for i in range(3))
        sc = q @ k.transpose(0, 2, 1) / math.sqrt(d) + np.where(np.arange(T) < m, 0.0, -1e9)
        p = np.exp(sc - sc.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        ref = (p @ v).transpose(1, 0, 2).reshape(T, H)[:m]
        np.testing.assert_allclose(ctx[off[s] : off[s + 1]], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("block_rows", [1, 2, 5, 7])
def test_matmul_rows_blocks(block_rows):
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    out = np.full((5, 3), np.nan, np.float32)
    K.matmul_rows(x, w, out, block_rows)  # a last block shorter than the others; 7 > 5 rows: one block
    np.testing.assert_allclose(out, x.astype(np.float64) @ w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", [0, 1])
def test_pool_normalize(mode):
    rng = np.random.default_rng(4)
    h = rng.standard_normal((6, 3)).astype(np.float32)
    off = np.array([0, 2, 3, 6], np.int64)
    out = np.empty((3, 3), np.float32)
    K.pool_normalize(h, off, mode, True, out)
    rows = [h[a:b].mean(0) if mode == 0 else h[a] for a, b in itertools.pairwise(off)]
    ref = np.array([r / np.linalg.norm(r) for r in rows])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    z = np.empty((1, 3), np.float32)
    K.pool_normalize(np.zeros((2, 3), np.float32), np.array([0, 2], np.int64), 0, True, z)
    assert np.all(z == 0)  # max(|v|, 1e-12): no NaN for a zero vector


# ------------------------------------------------------------------------ whole forward pass
def test_forward_matches_naive_bert(tiny):
    toks = tokenize(tiny, TEXTS)
    off = np.concatenate([[0], np.cumsum([t.size for t in toks])])
    hid = forward(tiny, np.concatenate(toks), off)
    ref, mask = naive_hidden(tiny_weights(), toks)
    for s, t in enumerate(toks):
        np.testing.assert_allclose(hid[off[s] : off[s + 1]], ref[s, : t.size], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_encode_matches_naive_in_input_order(tiny, batch_size):
    emb = encode(tiny, TEXTS, batch_size=batch_size)
    ref = naive_encode(tiny_weights(), tokenize(tiny, TEXTS))
    np.testing.assert_allclose(emb, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-6)


def test_encode_thread_counts_agree(tiny):
    np.testing.assert_array_equal(encode(tiny, TEXTS * 40, n_threads=1), encode(tiny, TEXTS * 40, n_threads=2))


def test_cls_pooling(tmp_path):
    m = load_model(write_tiny_bert(tmp_path / "cls", pooling="cls"))
    ref = naive_encode(tiny_weights(), tokenize(m, TEXTS), pooling="cls")
    np.testing.assert_allclose(encode(m, TEXTS), ref, rtol=1e-5, atol=1e-5)


def test_empty_text_is_cls_sep(tiny):
    toks = tokenize(tiny, ["", "   "])
    assert [t.tolist() for t in toks] == [[2, 3], [2, 3]]  # [CLS] [SEP]: stripped, as sentence-transformers
    emb = encode(tiny, ["", "cat", "   "])
    np.testing.assert_allclose(emb[0], emb[2], rtol=1e-6, atol=1e-7)  # one embedding for every empty text
    np.testing.assert_allclose(emb[0], naive_encode(tiny_weights(), [np.array([2, 3])])[0], rtol=1e-5, atol=1e-5)


def test_long_text_truncated_to_max_seq_length(tiny):
    toks = tokenize(tiny, ["cat " * 1000])
    assert toks[0].size == MAX_SEQ and toks[0][0] == 2 and toks[0][-1] == 3
    np.testing.assert_array_equal(encode(tiny, ["cat " * 1000]), encode(tiny, ["cat " * (MAX_SEQ - 2)]))


def test_zip_of_the_model_folder(tmp_path, tiny):
    folder = write_tiny_bert(tmp_path / "m")
    zp = tmp_path / "m.zip"
    with zipfile.ZipFile(zp, "w") as z:
        for root, _, files in os.walk(folder):
            for f in files:
                full = os.path.join(root, f)
                z.write(full, os.path.join("inner", os.path.relpath(full, folder)))
    mz = load_model(str(zp))
    assert mz.sha256 == tiny.sha256 and mz.name == "m"
    np.testing.assert_array_equal(encode(mz, TEXTS), encode(tiny, TEXTS))


def test_forward_and_encode_argument_checks(tiny):
    with pytest.raises(TypeError, match="not a str"):
        encode(tiny, "cat")
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str"):
        encode(tiny, ["cat", None])
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        encode(tiny, ["cat"], batch_size=0)
    with pytest.raises(ValueError, match="token ids must lie"):
        forward(tiny, np.array([0, 999]), np.array([0, 2]))
    with pytest.raises(ValueError, match="at least one token"):
        forward(tiny, np.array([2, 3]), np.array([0, 0, 2]))
    assert _forward is not None


# ------------------------------------------------------------------------ bad model folders
def _edit_json(path, **kw):
    with open(path) as fh:
        d = json.load(fh)
    d.update(kw)
    with open(path, "w") as fh:
        json.dump(d, fh)


@pytest.mark.parametrize("missing", ["config.json", "model.safetensors", "tokenizer.json"])
def test_missing_file_is_named(tmp_path, missing):
    folder = write_tiny_bert(tmp_path / "m")
    os.remove(os.path.join(folder, missing))
    with pytest.raises(FileNotFoundError, match=missing.replace(".", r"\.")):
        load_model(folder)


@pytest.mark.parametrize(
    "edit, match",
    [
        (dict(architectures=["RobertaModel"]), "architectures entry 'RobertaModel'"),
        (dict(model_type="distilbert"), "model_type 'distilbert'"),
        (dict(hidden_act="gelu_new"), "hidden_act 'gelu_new'"),
        (dict(num_attention_heads=3), "not a multiple of num_attention_heads"),
    ],
)
def test_unsupported_config_is_named(tmp_path, edit, match):
    folder = write_tiny_bert(tmp_path / "m")
    _edit_json(os.path.join(folder, "config.json"), **edit)
    with pytest.raises(ValueError, match=match):
        load_model(folder)


def test_bad_sentence_transformers_files(tmp_path):
    folder = write_tiny_bert(tmp_path / "m")
    with open(os.path.join(folder, "modules.json"), "w") as fh:
        mods = [{"type": "sentence_transformers.models.Transformer"}, {"type": "sentence_transformers.models.Dense"}]
        json.dump(mods, fh)
    with pytest.raises(ValueError, match=r"modules\.json.*Dense.*not supported"):
        load_model(folder)
    os.remove(os.path.join(folder, "modules.json"))
    with open(os.path.join(folder, "config.json"), "w") as fh:
        fh.write('{"model_type":\n "bert",,}')
    with pytest.raises(ValueError, match=r"config\.json:2: invalid JSON"):
        load_model(folder)


def test_missing_or_misshapen_tensor_is_named(tmp_path):
    from safetensors.numpy import save_file

    folder = write_tiny_bert(tmp_path / "m")
    w = tiny_weights()
    del w["encoder.layer.1.output.dense.bias"]
    save_file(w, os.path.join(folder, "model.safetensors"))
    with pytest.raises(ValueError, match=r"safetensors: tensor 'encoder\.layer\.1\.output\.dense\.bias' missing"):
        load_model(folder)
    w = tiny_weights()
    w["encoder.layer.0.intermediate.dense.weight"] = np.zeros((3, 3), np.float32)
    save_file(w, os.path.join(folder, "model.safetensors"))
    with pytest.raises(ValueError, match=r"has shape \(3, 3\), expected \(16, 8\)"):
        load_model(folder)


def test_bert_prefixed_checkpoint(tmp_path, tiny):
    from safetensors.numpy import save_file

    folder = write_tiny_bert(tmp_path / "m")
    save_file({"bert." + k: v for k, v in tiny_weights().items()}, os.path.join(folder, "model.safetensors"))
    np.testing.assert_array_equal(encode(load_model(folder), TEXTS), encode(tiny, TEXTS))


def test_missing_default_model_and_extra(monkeypatch):
    import sys

    import jkofast.encode.model as M

    monkeypatch.setattr(M, "default_model_path", lambda: None)
    with pytest.raises(FileNotFoundError, match=MODEL_HINT):
        load_model()
    assert MODEL_HINT in M.encoder_available()
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers -> ImportError
    with pytest.raises(ImportError, match=r'pip install "jkofast\[encode\]"'):
        load_model()


def test_model_argument_type():
    with pytest.raises(TypeError, match="model path must be a str"):
        load_model(3)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_model("/nonexistent/model")


# ------------------------------------------------------------------ parity with the bundled file
@pytest.mark.skipif(default_model_path() is None, reason=f"all-MiniLM-L6-v2 weights not installed ({MODEL_HINT})")
def test_parity_with_bundled_scifact_embeddings():
    """The bundled embeddings were made by sentence-transformers 6.2.0 (float16 storage)."""
    from jkofast.datasets.beir import load_dataset

    ds = load_dataset("scifact")
    D, Q = ds.embeddings()
    m = load_model()
    assert m.name == "minilm-l6-v2" and m.max_seq_length == 256
    q = encode(m, ds.query_texts[:12], batch_size=8)
    docs = ds.doc_texts(" ")
    idx = [0, 7, 1000]
    d = encode(m, [docs[i] for i in idx])
    for a, b in ((q, Q[:12]), (d, D[idx])):
        cos = (a * b).sum(1) / np.linalg.norm(b, axis=1)
        assert cos.min() >= 0.9999
