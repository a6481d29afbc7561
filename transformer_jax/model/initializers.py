"""The model's random initializers, drawn as one flat vector and reshaped.

Why: the values are bit for bit those of `nnx.initializers.lecun_normal()` (every Dense kernel)
and `jax.nn.initializers.normal` (the token embedding), because JAX's threefry numbers each
entry by its position in the flattened array. What changes is what XLA compiles: a 1-D sampler
is a simpler program, and kernels of one size ([64, 256] and [256, 64]) share it: compiling the
random draws of the README's 2-layer model as one program took 2.2 s of CPU with shaped draws and
1.2 s flat (2-core AMD EPYC; scripts/bench/eager_example.py times the whole example).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

LECUN_TRUNCATION = 0.87962566103423978  # std of a standard normal truncated to (-2, 2)


def lecun_normal(key: jax.Array, shape, dtype=jnp.float32) -> jax.Array:
    """`nnx.initializers.lecun_normal()`: a normal truncated at ±2σ, variance 1/fan_in, for a
    kernel [in, out] (fan_in = in; batch dimensions in front multiply it, as JAX counts them)."""
    fan_in = math.prod(shape[:-1])  # JAX's: shape[-2] × the receptive field shape[:-2]
    variance = jnp.array(1.0 / fan_in, dtype=dtype)
    stddev = jnp.sqrt(variance) / jnp.array(LECUN_TRUNCATION, dtype)
    return jax.random.truncated_normal(key, -2, 2, (math.prod(shape),), dtype).reshape(shape) * stddev


def normal(stddev: float):
    """`jax.nn.initializers.normal(stddev)`: N(0, stddev²) in every entry."""
    def init(key: jax.Array, shape, dtype=jnp.float32) -> jax.Array:
        draw = jax.random.normal(key, (math.prod(shape),), dtype).reshape(shape)
        return draw * jnp.array(stddev, dtype)
    return init
