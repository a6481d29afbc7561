"""The flat initializers give JAX's own values bit for bit: every model's parameters, and so
every study's results, are what they were before the draws were flattened."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.model import initializers
from transformer_jax.model.dense import Dense


@pytest.mark.parametrize("shape", [(64, 64), (64, 256), (256, 64), (3, 5, 7)])
def test_lecun_normal_is_nnx_linears_default_bit_for_bit(shape):
    key = jax.random.key(3)
    ours = initializers.lecun_normal(key, shape, jnp.float32)
    theirs = nnx.initializers.lecun_normal()(key, shape, jnp.float32)
    assert ours.shape == shape and ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_normal_is_jaxs_bit_for_bit_and_under_vmap():
    keys = jax.random.split(jax.random.key(0), 2)
    ours = jax.vmap(lambda k: initializers.normal(0.125)(k, (100, 64)))(keys)
    theirs = jax.vmap(lambda k: jax.nn.initializers.normal(0.125)(k, (100, 64)))(keys)
    np.testing.assert_array_equal(ours, theirs)


def test_dense_draws_nnx_linears_kernel_unless_given_another():
    dense, linear = Dense(8, 16, rngs=nnx.Rngs(5)), nnx.Linear(8, 16, rngs=nnx.Rngs(5))
    np.testing.assert_array_equal(dense.kernel[...], linear.kernel[...])
    zeros = Dense(8, 16, kernel_init=nnx.initializers.zeros, rngs=nnx.Rngs(5))
    assert not np.any(zeros.kernel[...])
