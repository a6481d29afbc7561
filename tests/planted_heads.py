"""A tiny Transformer whose heads are planted: one head carries the output, the others are noise.

Each unit is a seed: a fresh random model (2 layers × 4 heads, d_model 16) whose planted head's
rows of W_o are scaled up (×PLANTED_GAIN) and every other head's down (×NOISE_GAIN), on a batch of
random token sequences drawn from the same seed. Knocking a head set out (the model's own
`head_mask`, as the analyses do) costs the RMS change of the logits. The noise heads are
exchangeable across seeds, so over seeds one of them costs what a random one does; the planted
head costs far more. Role scores: the planted head has one at 0.9, the others below 0.2.
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from flax import nnx

from conftest import tiny_config
from transformer_jax.model.transformer import Transformer

SHAPE = (2, 4)  # layers, heads
PLANTED = (1, 2)
PLANTED_GAIN, NOISE_GAIN = 4.0, 0.25
THRESHOLD = 0.5
BATCH, LENGTH = 8, 8


def config():
    return tiny_config(num_layers=SHAPE[0], num_heads=SHAPE[1])


def role_scores(seed: int = 0) -> np.ndarray:
    """[L, H]: the planted head 0.9, every other head a draw in [0, 0.2)."""
    scores = np.random.default_rng(seed).uniform(0.0, 0.2, SHAPE)
    scores[PLANTED] = 0.9
    return scores


@functools.lru_cache(maxsize=None)
def planted_model(seed: int) -> tuple[Transformer, jnp.ndarray]:
    """(the model of this seed, its tokens [BATCH, LENGTH])."""
    cfg = config()
    model = Transformer(cfg, rngs=nnx.Rngs(seed))
    d_k = cfg.d_k
    gains = np.full(SHAPE, NOISE_GAIN, np.float32)
    gains[PLANTED] = PLANTED_GAIN
    rows = np.repeat(gains, d_k, axis=1)[:, :, None]  # [L, H·d_k, 1]: W_o's rows by head
    out = model.layers.blocks.attention.out.kernel
    out[...] = out[...] * rows
    tokens = np.random.default_rng(seed).integers(0, cfg.vocab_size, (BATCH, LENGTH))
    return model, jnp.asarray(tokens)


@nnx.jit
def logits(model: Transformer, tokens, head_mask):
    return model(tokens, head_mask=head_mask)[0]


@functools.lru_cache(maxsize=None)
def intact_logits(seed: int) -> jnp.ndarray:
    model, tokens = planted_model(seed)
    return logits(model, tokens, head_mask(()))


def head_mask(heads) -> jnp.ndarray:
    mask = np.ones(SHAPE, np.float32)
    for layer, head in heads:
        mask[layer, head] = 0.0
    return jnp.asarray(mask)


def knockout_cost(heads, seed: int) -> float:
    """The RMS change of the logits on this seed's model and tokens with `heads` out (the root
    of the mean square: in logit units, and less skewed over seeds than the square)."""
    model, tokens = planted_model(seed)
    intact = intact_logits(seed)
    return float(jnp.sqrt(jnp.mean((logits(model, tokens, head_mask(heads)) - intact) ** 2)))
