"""`model.qk_init_scale`: W_q and W_k start at a multiple of their usual draw, nothing else moves.

At d_k^(-1/4) an unscaled model's logits at initialization are the scaled model's: q and k are
each d_k^(-1/4) times the scaled model's (the same draws, biases start at 0), so Q·Kᵀ is
d_k^(-1/2) times it, which is exactly what ÷√d_k does. The logits therefore agree to float32
rounding (a relative 1e-5 covers the extra multiplications), not only in distribution; the
unscaled model at the usual draw has logits √d_k times wider, which the same checks reject.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import tiny_config
from transformer_jax.config import ConfigError
from transformer_jax.model.attention import MultiHeadAttention, attention_logits

D_K = 64  # one head: d_k = d_model
RTOL = 1e-5


def attention(attn_scale: bool, qk_init_scale: float) -> MultiHeadAttention:
    return MultiHeadAttention(D_K, 1, attn_scale=attn_scale, qk_init_scale=qk_init_scale,
                              rngs=nnx.Rngs(0))


def logits(module: MultiHeadAttention) -> np.ndarray:
    """Q·Kᵀ times the module's own scale on unit-variance inputs (post-LN's): [B, H, T, T]."""
    x = jnp.asarray(np.random.default_rng(0).normal(0, 1, (4, 16, D_K)), jnp.float32)
    q, k, _ = module.project(x)
    return np.asarray(attention_logits(q, k, scale=None if module.attn_scale else 1.0))


@pytest.mark.parametrize("factor", [0.5, D_K ** -0.25])
def test_only_the_query_and_key_kernels_scale_by_the_factor(factor):
    usual, shrunk = attention(False, 1.0), attention(False, factor)
    for name in ("query", "key"):
        np.testing.assert_allclose(getattr(shrunk, name).kernel[...],
                                   factor * getattr(usual, name).kernel[...], rtol=RTOL)
        assert float(np.std(getattr(shrunk, name).kernel[...])) == pytest.approx(
            factor * float(np.std(getattr(usual, name).kernel[...])), rel=RTOL)
    for name in ("value", "out"):
        np.testing.assert_array_equal(getattr(shrunk, name).kernel[...],
                                      getattr(usual, name).kernel[...])


def test_the_default_draws_the_usual_kernels_bit_for_bit():
    default = MultiHeadAttention(D_K, 1, rngs=nnx.Rngs(0))
    linear = nnx.Linear(D_K, D_K, rngs=nnx.Rngs(0))  # the first draw of the same stream
    np.testing.assert_array_equal(default.query.kernel[...], linear.kernel[...])


def test_shrunk_unscaled_logits_at_init_are_the_scaled_ones():
    scaled = logits(attention(True, 1.0))
    shrunk = logits(attention(False, D_K ** -0.25))
    np.testing.assert_allclose(shrunk, scaled, rtol=RTOL, atol=RTOL * np.abs(scaled).max())
    assert np.std(shrunk) == pytest.approx(np.std(scaled), rel=RTOL)
    unscaled = logits(attention(False, 1.0))  # the arm the factor corrects: √d_k times wider
    assert np.std(unscaled) == pytest.approx(np.sqrt(D_K) * np.std(scaled), rel=RTOL)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), True, "small"])
def test_a_bad_factor_is_refused_in_one_line(bad):
    with pytest.raises(ConfigError, match=r"^model\.qk_init_scale=.* must be a positive number"
                                          r"[^\n]*$"):
        tiny_config(qk_init_scale=bad)
