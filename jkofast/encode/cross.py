r"""A BERT cross-encoder (sentence-transformers' ``CrossEncoder``, ``BertForSequenceClassification``) without torch.

A ranking cross-encoder reads a (query, document) pair as one sequence
``[CLS] query [SEP] document [SEP]`` (token type 0 up to the first ``[SEP]``, 1 after it) and
scores it from the last layer's ``[CLS]`` row ``c``:

* pooler: ``u = tanh(c W_p + b_p)`` (BERT's ``bert.pooler``);
* head: ``logits = u W_c + b_c`` (``classifier``, ``num_labels`` outputs);
* score: with one label the logit itself (a ranking model such as
  cross-encoder/ms-marco-MiniLM-L-6-v2; raw, no sigmoid, as the JKO-RAG energy uses it); with
  ``L >= 2`` labels the log-odds of one label ``l``,
  ``log(p_l / (1 - p_l)) = logit_l - log sum_{j != l} exp(logit_j)`` (``logit_1 - logit_0`` for
  two labels), a score on the same logit scale; ``l`` defaults to 1 for two labels and must be
  chosen for more.

Tokenisation is the model's ``tokenizer.json`` (the ``tokenizers`` library) encoding the pair,
truncated as sentence-transformers / Hugging Face tokenizers do for pairs: ``longest_first`` to
``max_length`` tokens (special tokens included), one token at a time from the longer of the two
texts.  ``max_length`` is the model's ``tokenizer_config.json`` ``model_max_length`` capped at
its position embeddings (what sentence-transformers uses), or the caller's.

The encoder is :mod:`jkofast.encode.bert`'s (packed sequences, no padding, pairs sorted by
length and run ``batch_size`` at a time); only the last layer differs: the head reads one row
per pair, so that layer computes the attention, the feed-forward block and the LayerNorms of
the ``[CLS]`` rows alone (:func:`jkofast.kernels.encode.cross.attention_first_row`).
"""

from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads, resolve_threads
from jkofast._validation import check_int, check_texts
from jkofast.encode.bert import _BLOCK_ROWS, _blas_threads, _forward
from jkofast.encode.model import BertModel, _load, _tensor
from jkofast.kernels.encode import bert as _k
from jkofast.kernels.encode import cross as _kc

__all__ = ["CrossEncoderModel", "cross_logits", "cross_scores", "load_cross_encoder", "pair_tokenize"]


@dataclasses.dataclass
class CrossEncoderModel:
    """A loaded BERT cross-encoder: the encoder, the pooler and the classification head.

    Attributes
    ----------
    bert : jkofast.encode.model.BertModel
        The encoder (its tokenizer truncates pairs ``longest_first`` to ``max_length``).
    w_pool, b_pool : float32 ndarray
        Pooler dense layer, (H, H) transposed for ``x @ W``, and (H,).
    w_cls, b_cls : float32 ndarray
        Classifier, (H, L) transposed, and (L,).
    max_length : int
        Tokens per pair, special tokens included.
    labels : list of str
        ``id2label`` names of the L outputs (``LABEL_i`` when the config names none).
    """

    bert: BertModel
    w_pool: np.ndarray
    b_pool: np.ndarray
    w_cls: np.ndarray
    b_cls: np.ndarray
    max_length: int
    labels: list

    @property
    def num_labels(self) -> int:
        """Number of outputs L of the classification head."""
        return int(self.b_cls.shape[0])

    def resolve_label(self, label: int | None = None) -> int | None:
        """Return the label whose log-odds is the score (``None``: one output; default 1 for two; required for more).

        Raises
        ------
        ValueError
            ``label`` given for a one-output model, out of range, or missing for three or more labels.
        """
        n = self.num_labels
        if n == 1:
            if label not in (None, 0):
                raise ValueError(f"label {label!r}: the model has a single output (its logit is the score)")
            return None
        if label is None:
            if n == 2:
                return 1
            raise ValueError(f"the model has {n} labels {self.labels}: choose the one to score with label=INDEX")
        label = check_int(label, "label", min_value=0)
        if label >= n:
            raise ValueError(f"label {label} is out of range: the model has {n} labels {self.labels}")
        return label

    @property
    def name(self) -> str:
        """The model folder's name, lower case."""
        return self.bert.name

    @property
    def sha256(self) -> str:
        """SHA-256 of ``model.safetensors``."""
        return self.bert.sha256


def _max_length(src, cfg_pos: int, max_length) -> int:
    """Return the pair length: the caller's, else tokenizer_config.json's ``model_max_length`` (capped)."""
    if max_length is not None:
        max_length = check_int(max_length, "max_length", min_value=4)
        if max_length > cfg_pos:
            raise ValueError(f"max_length {max_length} exceeds the model's {cfg_pos} position embeddings")
        return max_length
    n = cfg_pos
    if src.exists("tokenizer_config.json"):
        tc = src.json("tokenizer_config.json")
        v = tc.get("model_max_length") if isinstance(tc, dict) else None
        if isinstance(v, int | float) and not isinstance(v, bool) and v >= 4:
            n = min(n, int(v))  # an unset model_max_length is a huge number: the positions cap it
    return n


def _check_pair_template(tok, where: str) -> None:
    """Refuse a tokenizer whose post-processor does not build ``[CLS] A [SEP] B [SEP]`` with type ids 0 / 1."""
    enc = tok.encode("a", "b")
    special, types = enc.special_tokens_mask, enc.type_ids
    if not (special and special[0] == 1 and special[-1] == 1 and types[0] == 0 and types[-1] == 1):
        raise ValueError(
            f"{where}: the post-processor does not build pairs as [CLS] A [SEP] B [SEP] with token types "
            "0 and 1 (a BERT tokenizer.json has a TemplateProcessing or BertProcessing post-processor)"
        )


def load_cross_encoder(path: str | os.PathLike, max_length: int | None = None) -> CrossEncoderModel:
    """Load a BERT cross-encoder folder (or zip) as sentence-transformers' ``CrossEncoder`` reads it.

    The folder holds ``config.json`` (``BertForSequenceClassification``), ``model.safetensors``
    (``bert.*``, ``bert.pooler.dense.*``, ``classifier.*``), ``tokenizer.json`` and optionally
    ``tokenizer_config.json`` (``model_max_length``): the files of a Hugging Face hub model
    such as cross-encoder/ms-marco-MiniLM-L-6-v2.

    Parameters
    ----------
    path : str or path
        Model folder or zip.
    max_length : int or None
        Tokens per pair (special tokens included, >= 4); default ``model_max_length`` of
        ``tokenizer_config.json`` capped at the position embeddings.

    Returns
    -------
    CrossEncoderModel

    Raises
    ------
    ImportError
        ``tokenizers`` / ``safetensors`` absent (names ``pip install "jkofast[encode]"``).
    FileNotFoundError
        The folder or one of its files is missing.
    ValueError
        What :func:`jkofast.encode.model.load_model` refuses; no pooler or classifier tensors (a
        sentence-embedding model, not a cross-encoder); an ``id2label`` that disagrees with the
        classifier; fewer than two token types; a tokenizer without a pair template; a bad
        ``max_length``.
    """
    if path is None:
        raise TypeError("a cross-encoder needs a model folder (path is None)")
    bert, w, src = _load(path)
    where = src.where("model.safetensors")
    h = bert.dim
    pre = "bert." if any(k.startswith("bert.") for k in w) else ""
    if f"{pre}pooler.dense.weight" not in w or "classifier.weight" not in w:
        raise ValueError(
            f"{where}: no pooler or classifier tensors ({pre}pooler.dense.weight, classifier.weight): "
            "not a sequence-classification (cross-encoder) checkpoint"
        )
    wc = w["classifier.weight"]
    if wc.ndim != 2 or wc.shape[1] != h or wc.shape[0] < 1:
        raise ValueError(f"{where}: tensor 'classifier.weight' has shape {wc.shape}, expected (num_labels, {h})")
    n_labels = wc.shape[0]
    id2label = bert.config.get("id2label")
    if isinstance(id2label, dict) and id2label:
        if len(id2label) != n_labels:
            raise ValueError(
                f"{src.where('config.json')}: id2label names {len(id2label)} labels, the classifier has {n_labels}"
            )
        labels = [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(n_labels)]
    else:
        labels = [f"LABEL_{i}" for i in range(n_labels)]
    if bert.typ.shape[0] < 2:
        raise ValueError(f"{where}: a pair needs two token types; token_type_embeddings has {bert.typ.shape[0]}")
    n_len = _max_length(src, bert.pos.shape[0], max_length)
    tok = bert.tokenizer
    tok.no_truncation()
    _check_pair_template(tok, src.where("tokenizer.json"))
    tok.enable_truncation(max_length=n_len, strategy="longest_first")
    bert.max_seq_length = n_len
    return CrossEncoderModel(
        bert=bert,
        w_pool=np.ascontiguousarray(_tensor(w, f"{pre}pooler.dense.weight", (h, h), where).T),
        b_pool=_tensor(w, f"{pre}pooler.dense.bias", (h,), where),
        w_cls=np.ascontiguousarray(_tensor(w, "classifier.weight", (n_labels, h), where).T),
        b_cls=_tensor(w, "classifier.bias", (n_labels,), where),
        max_length=n_len,
        labels=labels,
    )


def pair_tokenize(model: CrossEncoderModel, queries, docs) -> tuple[list, list]:
    """Token ids and token-type ids of every pair ``[CLS] query [SEP] doc [SEP]``, truncated ``longest_first``.

    Parameters
    ----------
    model : CrossEncoderModel
    queries, docs : list of str
        Same length; texts are stripped of surrounding whitespace.

    Returns
    -------
    (list of int64 ndarray, list of int64 ndarray)
        Ids and type ids per pair, at most ``model.max_length`` tokens each.

    Raises
    ------
    TypeError
        A str instead of a list, or an item that is not a str.
    ValueError
        The two lists differ in length.
    """
    queries, docs = check_texts(queries, "queries"), check_texts(docs, "docs")
    if len(queries) != len(docs):
        raise ValueError(f"queries has {len(queries)} texts, docs {len(docs)}")
    encs = model.bert.tokenizer.encode_batch([(q.strip(), d.strip()) for q, d in zip(queries, docs, strict=True)])
    return [np.asarray(e.ids, np.int64) for e in encs], [np.asarray(e.type_ids, np.int64) for e in encs]


def _cls_forward(model: CrossEncoderModel, ids, off, lengths, types) -> np.ndarray:
    """Last-layer [CLS] rows (S, H) of a packed batch: all layers but the last in full, the last for [CLS] only."""
    bert = model.bert
    x = _forward(bert, ids, off, lengths, types, n_layers=len(bert.layers) - 1)
    L = bert.layers[-1]
    n, h, s = x.shape[0], bert.dim, off.shape[0] - 1
    nb = _BLOCK_ROWS
    qkv = np.empty((n, 3 * h), np.float32)
    _k.matmul_rows(x, L.w_qkv, qkv, nb)  # the keys and values of every row; only the [CLS] queries are read
    _k.add_bias_inplace(qkv, L.b_qkv)
    ctx = np.empty((s, h), np.float32)
    _kc.attention_first_row(qkv, off, bert.n_heads, np.float32(1.0 / math.sqrt(h // bert.n_heads)), ctx)
    cls = np.ascontiguousarray(x[off[:-1]])
    tmp = np.empty((s, h), np.float32)
    _k.matmul_rows(ctx, L.w_out, tmp, nb)
    _k.add_bias_residual_layernorm(tmp, L.b_out, cls, L.ln1_g, L.ln1_b, bert.eps, cls)
    ff = np.empty((s, L.w_ff1.shape[1]), np.float32)
    _k.matmul_rows(cls, L.w_ff1, ff, nb)
    _k.add_bias_gelu(ff, L.b_ff1)
    _k.matmul_rows(ff, L.w_ff2, tmp, nb)
    _k.add_bias_residual_layernorm(tmp, L.b_ff2, cls, L.ln2_g, L.ln2_b, bert.eps, cls)
    return cls


def _head(model: CrossEncoderModel, cls: np.ndarray) -> np.ndarray:
    """Logits (S, L) float32: pooler (dense + tanh) and classifier on the [CLS] rows."""
    pooled = np.tanh(np.dot(cls, model.w_pool) + model.b_pool)
    return (np.dot(pooled, model.w_cls) + model.b_cls).astype(np.float32, copy=False)


def cross_logits(
    model: CrossEncoderModel, queries, docs, batch_size: int = 64, n_threads: int | None = None, progress=None
) -> np.ndarray:
    """Classification logits of every (query, doc) pair (``BertForSequenceClassification`` without torch).

    Parameters
    ----------
    model : CrossEncoderModel
        From :func:`load_cross_encoder`.
    queries, docs : list of str
        The pairs, ``queries[i]`` with ``docs[i]``.
    batch_size : int
        Pairs per forward pass (pairs are sorted by token count first; packed, no padding).
    n_threads : int or None
        Numba threads (default: all / ``JKOFAST_NUM_THREADS``); BLAS runs one thread inside each.
    progress : callable or None
        Called with the number of pairs done after each batch.

    Returns
    -------
    float32 ndarray (n_pairs, num_labels)
        Rows in the order of the pairs.

    Examples
    --------
    >>> m = load_cross_encoder("ms-marco-MiniLM-L-6-v2")  # doctest: +SKIP
    >>> cross_logits(m, ["what is a cat"], ["A cat is a small feline."]).shape  # doctest: +SKIP
    (1, 1)
    """
    batch_size = check_int(batch_size, "batch_size", min_value=1)
    nt = resolve_threads(n_threads)
    ids_l, types_l = pair_tokenize(model, queries, docs)
    out = np.empty((len(ids_l), model.num_labels), np.float32)
    order = np.argsort([-t.size for t in ids_l], kind="stable")
    with numba_threads(nt), _blas_threads(1):  # Numba runs the BLAS calls side by side
        for a in range(0, len(order), batch_size):
            sel = order[a : a + batch_size]
            lengths = np.array([ids_l[i].size for i in sel], np.int64)
            off = np.zeros(sel.size + 1, np.int64)
            np.cumsum(lengths, out=off[1:])
            ids = np.concatenate([ids_l[i] for i in sel])
            types = np.concatenate([types_l[i] for i in sel])
            out[sel] = _head(model, _cls_forward(model, ids, off, lengths, types))
            if progress is not None:
                progress(sel.size)
    return out


def _logits_to_scores(logits: np.ndarray, label: int | None) -> np.ndarray:
    """Scores (n,) float32 from logits (n, L): the logit for L = 1, else the log-odds of ``label``."""
    lg = np.asarray(logits, np.float64)
    if label is None:
        return lg[:, 0].astype(np.float32)
    others = np.delete(lg, label, axis=1)
    mx = others.max(axis=1)
    lse = mx + np.log(np.exp(others - mx[:, None]).sum(axis=1))
    return (lg[:, label] - lse).astype(np.float32)


def cross_scores(
    model: CrossEncoderModel,
    queries,
    docs,
    *,
    label: int | None = None,
    batch_size: int = 64,
    n_threads: int | None = None,
    progress=None,
) -> np.ndarray:
    """Relevance scores (n_pairs,) float32 of (query, doc) pairs: the logit, or the log-odds of ``label``.

    ``label``: ``None`` for a one-output model (the raw logit, no sigmoid); for two outputs the
    default is label 1 (score ``logit_1 - logit_0``); more outputs need it named.  Other
    parameters as :func:`cross_logits`.

    Raises
    ------
    ValueError
        ``label`` given for a one-output model, out of range, or missing for three or more labels.
    """
    label = model.resolve_label(label)
    return _logits_to_scores(cross_logits(model, queries, docs, batch_size, n_threads, progress), label)


@register_warmup("cross_encoder")
def _warmup() -> None:
    """Compile the cross-encoder's own kernel on a toy batch (the encoder's are the ``encode`` entry's)."""
    qkv = np.ones((3, 6), np.float32)
    _kc.attention_first_row(qkv, np.array([0, 1, 3], np.int64), 2, np.float32(1.0), np.empty((2, 2), np.float32))
