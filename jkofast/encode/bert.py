r"""The BERT forward pass and sentence embedding (:func:`encode`), float32, without torch.

For a batch of token sequences (packed without padding: the tokens of sequence ``s`` are rows
``offsets[s]:offsets[s+1]``), with H the hidden size, h heads of size d = H / h:

* embeddings ``x = LN(word[id] + pos[position] + type[type id])``;
* per layer: ``q, k, v = x W_qkv + b``; per sequence and head
  ``A = softmax(q kᵀ / sqrt d) v`` (each sequence attends over its own tokens only, which is
  what BERT's padding mask does); ``x = LN(x + A W_o + b_o)``;
  ``x = LN(x + gelu(x W_1 + b_1) W_2 + b_2)`` with the exact erf GELU;
* pooling: the mean of each sequence's token rows (or its first row for CLS pooling), then
  ``v / max(|v|, 1e-12)``.

Dense products are BLAS ``sgemm`` calls on weights transposed once at load, one per row block
inside a Numba ``prange`` (BLAS itself runs one thread, so every thread is Numba's: the count
is :func:`jkofast.numba_threads`'s); bias + GELU, bias + residual + LayerNorm, the attention
softmax and the pooling are fused Numba kernels (:mod:`jkofast.kernels.encode.bert`).
:func:`encode` tokenises (``tokenizers``; text stripped as sentence-transformers does,
truncated to ``max_seq_length`` tokens including [CLS] and [SEP]), sorts the texts by token
count and runs batches of ``batch_size`` sequences, so a batch holds sequences of similar
length; packing leaves no padding at all.

An empty text is encoded as ``[CLS] [SEP]``: a defined, finite unit vector (the same for every
empty text).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from jkofast._numba import register_warmup
from jkofast._threads import numba_threads, resolve_threads
from jkofast._validation import check_int
from jkofast.kernels.encode import bert as _k

__all__ = ["encode", "forward", "tokenize"]


def _check_batch(model, ids, offsets, types):
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    if ids.ndim != 1 or off.ndim != 1 or off.size < 1 or off[0] != 0 or off[-1] != ids.size:
        raise ValueError("ids must be 1-D and offsets 1-D from 0 to len(ids)")
    lengths = np.diff(off)
    if (lengths < 1).any():
        raise ValueError("every sequence needs at least one token")
    if lengths.size and lengths.max() > model.pos.shape[0]:
        raise ValueError(f"a sequence has {int(lengths.max())} tokens, beyond {model.pos.shape[0]} positions")
    if ids.size and (ids.min() < 0 or ids.max() >= model.word.shape[0]):
        raise ValueError(f"token ids must lie in [0, {model.word.shape[0]})")
    if types is None:
        types = np.zeros(ids.size, np.int64)
    else:
        types = np.ascontiguousarray(types, dtype=np.int64)
        if types.shape != ids.shape or (types.size and (types.min() < 0 or types.max() >= model.typ.shape[0])):
            raise ValueError(f"types must match ids and lie in [0, {model.typ.shape[0]})")
    return ids, off, lengths, types


def forward(model, ids, offsets, types=None, n_threads: int | None = None) -> np.ndarray:
    """Hidden states of the last layer for packed token sequences.

    Parameters
    ----------
    model : jkofast.encode.model.BertModel
    ids : int ndarray (N,)
        Token ids of all sequences, one after the other.
    offsets : int ndarray (S + 1,)
        Sequence ``s`` is ``ids[offsets[s]:offsets[s+1]]`` (at least one token each).
    types : int ndarray (N,), optional
        Token-type ids (default 0).
    n_threads : int or None
        Numba threads for the call (BLAS runs one thread inside each).

    Returns
    -------
    float32 ndarray (N, H)
    """
    ids, off, lengths, types = _check_batch(model, ids, offsets, types)
    with numba_threads(n_threads), _blas_threads(1):  # Numba runs the BLAS calls side by side
        return _forward(model, ids, off, lengths, types)


def _forward(model, ids, off, lengths, types, n_layers=None):
    # Dynamic scheduling (chunks of one iteration) over many blocks: on a shared machine a
    # descheduled thread does not hold up every parallel region.
    with numba.parallel_chunksize(1):
        return _forward_layers(model, ids, off, lengths, types, n_layers)


_BLOCK_ROWS = 256


def _forward_layers(model, ids, off, lengths, types, n_layers=None):
    """Hidden states after the embeddings and the first ``n_layers`` layers (default all)."""
    n, h = ids.size, model.dim
    positions = np.arange(n, dtype=np.int64) - np.repeat(off[:-1], lengths)
    x = np.empty((n, h), np.float32)
    _k.embed_layernorm(ids, positions, types, model.word, model.pos, model.typ, model.emb_ln_g, model.emb_ln_b,
                       model.eps, x)  # fmt: skip
    qkv = np.empty((n, 3 * h), np.float32)
    ctx = np.empty((n, h), np.float32)
    tmp = np.empty((n, h), np.float32)
    ff = np.empty((n, model.layers[0].w_ff1.shape[1]), np.float32) if model.layers else None
    scale = np.float32(1.0 / math.sqrt(h // model.n_heads))
    nb = _BLOCK_ROWS  # row blocks of the dense products (fixed: results independent of the thread count)
    for L in model.layers[:n_layers]:
        _k.matmul_rows(x, L.w_qkv, qkv, nb)
        _k.add_bias_inplace(qkv, L.b_qkv)
        _k.attention_packed(qkv, off, model.n_heads, scale, ctx)
        _k.matmul_rows(ctx, L.w_out, tmp, nb)
        _k.add_bias_residual_layernorm(tmp, L.b_out, x, L.ln1_g, L.ln1_b, model.eps, x)
        _k.matmul_rows(x, L.w_ff1, ff, nb)
        _k.add_bias_gelu(ff, L.b_ff1)
        _k.matmul_rows(ff, L.w_ff2, tmp, nb)
        _k.add_bias_residual_layernorm(tmp, L.b_ff2, x, L.ln2_g, L.ln2_b, model.eps, x)
    return x


_CTL = []


def _blas_controller():
    """One ``threadpoolctl.ThreadpoolController`` (scikit-learn's dependency) for NumPy's and SciPy's BLAS.

    The attention kernel's ``np.dot`` calls SciPy's BLAS (``scipy.linalg.cython_blas``, loaded
    here first so the controller sees it); NumPy's BLAS runs the dense products.
    """
    if not _CTL:
        import scipy.linalg.cython_blas  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _CTL.append(ThreadpoolController())
    return _CTL[0]


def _blas_threads(n: int):
    """Context manager limiting every BLAS library to ``n`` threads (restored on exit)."""
    return _blas_controller().limit(limits=n, user_api="blas")


def tokenize(model, texts) -> list[np.ndarray]:
    """Token ids per text (stripped, wrapped in ``[CLS]``/``[SEP]``, truncated to ``model.max_seq_length``).

    Raises
    ------
    TypeError
        ``texts`` is a str, or holds something other than str.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of str, not a str (use [text])")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be a str, got {type(t).__name__}")
    encs = model.tokenizer.encode_batch([t.strip() for t in texts])
    return [np.asarray(e.ids, dtype=np.int64) for e in encs]


def encode(
    model,
    texts,
    batch_size: int = 32,
    n_threads: int | None = None,
    progress=None,
) -> np.ndarray:
    """Sentence embeddings of ``texts`` (sentence-transformers' ``encode`` without torch).

    Parameters
    ----------
    model : jkofast.encode.model.BertModel
        From :func:`jkofast.encode.model.load_model`.
    texts : list of str
        An empty text gets the embedding of ``[CLS] [SEP]``; long texts are truncated to
        ``model.max_seq_length`` tokens.
    batch_size : int
        Sequences per forward pass (texts are sorted by token count first).
    n_threads : int or None
        Numba threads (default: all / ``JKOFAST_NUM_THREADS``); BLAS runs one thread inside each.
    progress : callable or None
        Called with the number of texts done after each batch.

    Returns
    -------
    float32 ndarray (len(texts), H)
        Rows in the order of ``texts``; unit L2 norm when the model normalises.

    Examples
    --------
    >>> from jkofast.encode.model import load_model  # doctest: +SKIP
    >>> encode(load_model(), ["a sentence"]).shape  # doctest: +SKIP
    (1, 384)
    """
    batch_size = check_int(batch_size, "batch_size", min_value=1)
    nt = resolve_threads(n_threads)
    toks = tokenize(model, texts)
    out = np.empty((len(toks), model.dim), np.float32)
    order = np.argsort([-t.size for t in toks], kind="stable")
    mode = 1 if model.pooling == "cls" else 0
    with numba_threads(nt), _blas_threads(1):  # Numba runs the BLAS calls side by side
        for a in range(0, len(order), batch_size):
            sel = order[a : a + batch_size]
            lengths = np.array([toks[i].size for i in sel], np.int64)
            off = np.zeros(sel.size + 1, np.int64)
            np.cumsum(lengths, out=off[1:])
            ids = np.concatenate([toks[i] for i in sel])
            x = _forward(model, ids, off, lengths, np.zeros(ids.size, np.int64))
            pooled = np.empty((sel.size, model.dim), np.float32)
            _k.pool_normalize(x, off, mode, model.normalize, pooled)
            out[sel] = pooled
            if progress is not None:
                progress(sel.size)
    return out


@register_warmup("encode")
def _warmup() -> None:
    """Compile the encoder kernels on a 3-token, 2-dimensional toy batch."""
    f = np.ones((3, 2), np.float32)
    g = np.ones(2, np.float32)
    i = np.zeros(3, np.int64)
    _k.embed_layernorm(i, i, i, f, f, f, g, g, 1e-12, f.copy())
    _k.add_bias_inplace(f.copy(), g)
    _k.add_bias_gelu(f.copy(), g)
    _k.add_bias_residual_layernorm(f.copy(), g, f.copy(), g, g, 1e-12, f.copy())
    _k.attention_packed(np.ones((3, 6), np.float32), np.array([0, 1, 3], np.int64), 2, np.float32(1.0), f.copy())
    _k.matmul_rows(f, np.ones((2, 2), np.float32), f.copy(), 2)
    _k.pool_normalize(f, np.array([0, 3], np.int64), 0, True, np.empty((1, 2), np.float32))
