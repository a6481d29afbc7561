"""Positional schemes, grouped by where they act.

- added to the token embeddings: `sinusoidal_table` (fixed), `LearnedPositions` (trained);
- rotating queries and keys: `apply_rotary` (RoPE, Su et al. 2021), so q·k sees only offsets;
- biasing the attention logits: `alibi_bias` (Press et al. 2021), a per-head linear distance
  penalty.
Without any of them, attention is permutation-equivariant: "dog bites man" = "man bites dog".
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

Array = jax.Array


# --- added to the embeddings ------------------------------------------------------------------

def sinusoidal_table(length: int, d_model: int) -> Array:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same). [length, d_model]."""
    pos = jnp.arange(length, dtype=jnp.float32)[:, None]  # [T, 1]
    two_i = jnp.arange(0, d_model, 2, dtype=jnp.float32)[None, :]  # [1, ceil(D/2)]
    angle = pos / jnp.power(10000.0, two_i / d_model)  # [T, ceil(D/2)]
    table = jnp.zeros((length, d_model), jnp.float32)
    table = table.at[:, 0::2].set(jnp.sin(angle))
    return table.at[:, 1::2].set(jnp.cos(angle[:, : d_model // 2]))


class LearnedPositions(nnx.Module):
    """A trained [max_len, d_model] table; positions past max_len do not exist.

    Initialized with the sinusoidal table's per-dimension RMS (1/√2), so the two additive
    schemes start at the same scale relative to the (unit-variance) token embeddings.
    """

    def __init__(self, max_len: int, d_model: int, *, rngs: nnx.Rngs):
        init = jax.nn.initializers.normal(stddev=2 ** -0.5)
        self.table = nnx.Param(init(rngs.params(), (max_len, d_model), jnp.float32))

    def __call__(self, length: int) -> Array:
        return self.table[:length]  # [T, D]


# --- rotating q and k ---------------------------------------------------------------------------

def rotary_angles(length: int, head_dim: int, base: float = 10000.0) -> Array:
    """θ[pos, i] = pos · base^(-2i/head_dim), one angle per pair of dimensions. [T, D/2]."""
    inv_freq = base ** (-jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)
    return jnp.arange(length, dtype=jnp.float32)[:, None] * inv_freq[None, :]


def apply_rotary(x: Array, angles: Array) -> Array:
    """Rotates each pair (x[2i], x[2i+1]) of x [B, T, H, D] by angles [T, D/2] (Su et al. eq. 34)."""
    batch, length, heads, dim = x.shape
    pairs = x.astype(jnp.float32).reshape(batch, length, heads, dim // 2, 2)  # [B, T, H, D/2, 2]
    even, odd = pairs[..., 0], pairs[..., 1]
    cos = jnp.cos(angles)[None, :, None, :]  # [1, T, 1, D/2]
    sin = jnp.sin(angles)[None, :, None, :]
    rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return rotated.reshape(x.shape).astype(x.dtype)


def rotary_qk_transform(length: int, head_dim: int):
    """The q/k transform attention takes: rotate both by their positions 0..length-1."""
    angles = rotary_angles(length, head_dim)
    return lambda q, k: (apply_rotary(q, angles), apply_rotary(k, angles))


# --- biasing the logits -------------------------------------------------------------------------

def alibi_slopes(num_heads: int) -> Array:
    """Geometric slopes 2^(-8/n), 2^(-16/n), ...; for 8 heads 1/2 ... 1/256 (Press et al. 2021).

    For a head count that is not a power of two, the paper's recipe: the slopes of the closest
    smaller power of two, then every other slope of the next power of two.
    """
    def power_of_two(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = power_of_two(num_heads)
    else:
        closest = 2 ** math.floor(math.log2(num_heads))
        slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: num_heads - closest]
    return jnp.asarray(slopes, jnp.float32)


def alibi_bias(num_heads: int, q_len: int, kv_len: int) -> Array:
    """-slope_h · |i - j| for query i, key j: [1, H, Tq, Tk], to add to the logits.

    Symmetric, so it serves a bidirectional encoder too; in a causal decoder only j ≤ i is seen,
    where it equals the paper's slope·(j - i).
    """
    distance = jnp.abs(jnp.arange(q_len)[:, None] - jnp.arange(kv_len)[None, :])  # [Tq, Tk]
    return -alibi_slopes(num_heads)[None, :, None, None] * distance[None, None].astype(jnp.float32)
