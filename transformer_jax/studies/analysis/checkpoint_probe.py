"""A loaded checkpoint run one block at a time, with one mechanism taken out at evaluation: the
measurements of experiments/pretrained_claims.py.

Why block by block: "remove layer 3's residual" or "replace layer 3's LayerNorms by the
identity" is one layer's config, while `Transformer` scans every layer with one config. Here the
model's own `embeddings` and its own `Block`s run in a Python loop over the layers, each block
built from the layer's trained parameters under the config that the ablation names (`residual=
False`, `norm='none'`, `attn_scale=False`), so no line of the model's math is copied. Each kind
of block is one compiled program, reused by every layer and every batch (the batch is padded to
one shape: `pad_batch`).

    probe = CheckpointProbe(model)
    found = probe.run(batch, Ablation(no_residual=2))   # embeddings [B, D], weights [L, B, H, T, T]
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.config import Norm, Position
from transformer_jax.model.blocks import Block
from transformer_jax.model.pretrained import Batch, mean_pool, with_config
from transformer_jax.model.transformer import Transformer, structured_attention_mask


@dataclasses.dataclass(frozen=True)
class Ablation:
    """What is taken out of the trained model at evaluation (the default: nothing)."""

    positions: bool = True  # False: the position table is not added
    attn_scale: bool = True  # False: logits Q·Kᵀ without ÷√d_k, in every layer
    head_mask: Optional[tuple] = None  # [L][H] of 0/1 (0: the head knocked out), as nested tuples
    no_residual: Optional[int] = None  # this layer's two residual connections removed
    no_norm: Optional[int] = None  # this layer's two LayerNorms replaced by the identity

    def block_kind(self, layer: int) -> str:
        if layer == self.no_residual:
            return "no_residual"
        if layer == self.no_norm:
            return "no_norm"
        return "intact" if self.attn_scale else "no_scale"


class Found(NamedTuple):
    embeddings: np.ndarray  # [B, D], L2-normalized mean of the real tokens (sentence-transformers)
    weights: np.ndarray  # [L, B, H, T, T] attention weights


# each kind of block's config changes (no_scale acts in every layer, the others in one)
BLOCK_CHANGES = {"intact": {}, "no_scale": {"attn_scale": False},
                 "no_residual": {"residual": False}, "no_norm": {"norm": Norm.NONE}}


class CheckpointProbe:
    """A trained (BERT-family, Post-LN) `Transformer`, run with an `Ablation`."""

    def __init__(self, model: Transformer):
        if model.cfg.norm is not Norm.POST:
            raise ValueError(f"model.norm={model.cfg.norm.value!r}: the probe runs Post-LN "
                             "checkpoints (BERT's), which have no final norm")
        self.cfg = model.cfg
        self.embedders = {True: model, False: with_config(model, position=Position.NONE)}
        _, stacked = nnx.split(model.layers.blocks)
        layers = [nnx.to_pure_dict(jax.tree.map(lambda a, i=i: a[i], stacked))
                  for i in range(self.cfg.num_layers)]  # each layer's trained parameters
        # kind -> (its program's graph, each layer's parameters in that kind of block)
        self.blocks = {kind: _blocks(dataclasses.replace(self.cfg, **changes), layers)
                       for kind, changes in BLOCK_CHANGES.items()}

    def run(self, batch: Batch, ablation: Ablation = Ablation()) -> Found:
        tokens, mask = jnp.asarray(batch.tokens), jnp.asarray(batch.padding_mask)
        types = jnp.asarray(batch.token_types)
        x = _embed(self.embedders[ablation.positions], tokens, mask, types)
        head_mask = (np.ones((self.cfg.num_layers, self.cfg.num_heads), np.float32)
                     if ablation.head_mask is None else np.asarray(ablation.head_mask, np.float32))
        weights = []
        for layer in range(self.cfg.num_layers):
            graphdef, states = self.blocks[ablation.block_kind(layer)]
            x, w = _block(graphdef, states[layer], x, mask, jnp.asarray(head_mask[layer]))
            weights.append(w)
        return Found(np.asarray(mean_pool(x, mask)), np.stack([np.asarray(w) for w in weights]))


def _blocks(cfg, layers: list[dict]) -> tuple[nnx.GraphDef, list[nnx.State]]:
    """A Block of `cfg`'s graph, and each layer's trained parameters as its state (a block
    without norms leaves the norms' parameters out)."""
    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: Block(cfg, rngs=nnx.Rngs(0))))
    states = []
    for params in layers:
        state = jax.tree.map(lambda x: x, abstract)  # a copy to fill
        wanted = nnx.to_pure_dict(abstract)
        nnx.replace_by_pure_dict(state, {k: params[k] for k in wanted})
        states.append(state)
    return graphdef, states


@nnx.jit
def _embed(model: Transformer, tokens, mask, types):
    return model.embeddings(tokens, mask, token_types=types)  # [B, T, D]


@functools.partial(jax.jit, static_argnums=0)
def _block(graphdef, state, x, mask, head_mask):
    """One block of the given kind on x [B, T, D]: (x [B, T, D], weights [B, H, T, T])."""
    block = nnx.merge(graphdef, state)
    attention_mask = structured_attention_mask(mask, x.shape[1], causal=False)
    x, found = block(x, mask=attention_mask, probe=True, token_mask=mask, head_mask=head_mask)
    return x, found.weights


def pad_batch(batch: Batch, rows: int, length: int) -> Batch:
    """`batch` padded to [rows, length] (one compiled program for every batch): extra rows
    repeat the first sentence (a row of padding alone would attend to nothing); callers drop
    them. A sentence longer than `length` is a ValueError (choose sentences that fit)."""
    b, t = batch.tokens.shape
    if t > length or b > rows:
        raise ValueError(f"batch [{b}, {t}] does not fit [{rows}, {length}]")
    def pad(a):
        a = np.pad(a, ((0, 0), (0, length - t)))
        return np.concatenate([a, np.repeat(a[:1], rows - b, axis=0)])
    return Batch(*(pad(a) for a in batch))


def cosine_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1 − cos between rows of a and b [B, D] -> [B] (the embeddings are unit vectors already;
    normalized again, so that rounding of the norm does not count)."""
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return 1.0 - np.sum(a * b, axis=-1)


def attention_entropy(weights: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """weights [L, B, H, T, T], mask [B, T] -> [L, B]: the entropy (nats) of each real query's
    weights, averaged over heads and real queries."""
    w = np.clip(weights, 1e-30, 1.0)
    per_query = -np.sum(weights * np.log(w), axis=-1).mean(axis=2)  # [L, B, T]: mean over heads
    m = mask[None].astype(np.float64)  # [1, B, T]
    return np.sum(per_query * m, axis=-1) / np.sum(m, axis=-1)
