"""Positional schemes: sinusoidal values, rotary's relative-offset property, ALiBi's slopes, and
the fact that without positions a bidirectional encoder is permutation-equivariant."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_close, max_abs_diff, tiny_config
from transformer_jax import Arch, Position, Transformer
from transformer_jax.model import positions as pos

# --- sinusoidal ---------------------------------------------------------------------------------


def test_sinusoidal_matches_hand_computed_entries():
    table = np.asarray(pos.sinusoidal_table(6, 8))  # 10000^(2i/8) = 1, 10, 100, 1000
    assert table.shape == (6, 8)
    expected = {
        (0, 0): 0.0, (0, 1): 1.0, (0, 6): 0.0, (0, 7): 1.0,
        (1, 0): math.sin(1.0), (1, 1): math.cos(1.0),
        (3, 2): math.sin(0.3), (3, 3): math.cos(0.3),
        (5, 4): math.sin(0.05), (5, 5): math.cos(0.05),
        (4, 6): math.sin(0.004), (4, 7): math.cos(0.004),
    }
    for (p, i), value in expected.items():
        assert abs(table[p, i] - value) <= 1e-6, (p, i, table[p, i], value)


@pytest.mark.parametrize("d_model", [16, 7])
def test_sinusoidal_matches_the_formula_everywhere(d_model):
    length = 20
    table = np.asarray(pos.sinusoidal_table(length, d_model))
    p = np.arange(length)[:, None]
    i = np.arange(d_model)[None, :]
    angle = p / np.power(10000.0, (i - i % 2) / d_model)  # columns 2i and 2i+1 share 2i
    expected = np.where(i % 2 == 0, np.sin(angle), np.cos(angle))
    assert_close(table, expected)


# --- rotary ---------------------------------------------------------------------------------------

ROTARY_LENGTH, ROTARY_DIM = 24, 8


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 16))
def test_rotary_dot_product_depends_only_on_the_offset(seed):
    """Same q at every position, same k at every position: after rotation, q_m·k_n is a function
    of m - n alone, i.e. the logit matrix is Toeplitz (q at m, k at n == q at m+s, k at n+s)."""
    rng = np.random.default_rng(seed)
    q_vec, k_vec = rng.normal(0, 1, (2, 1, 1, 2, ROTARY_DIM)).astype(np.float32)  # 2 heads
    tile = lambda v: jnp.asarray(np.broadcast_to(v, (1, ROTARY_LENGTH, 2, ROTARY_DIM)))
    q, k = pos.rotary_qk_transform(ROTARY_LENGTH, ROTARY_DIM)(tile(q_vec), tile(k_vec))
    logits = np.einsum("bqhd,bkhd->bhqk", np.asarray(q, np.float64), np.asarray(k, np.float64))
    scale = np.abs(logits).max() + 1.0
    for shift in (1, 5, 11):
        diff = np.abs(logits[..., shift:, shift:] - logits[..., :-shift, :-shift]).max()
        assert diff <= 1e-5 * scale, (shift, diff)
    # and it does depend on the offset (it is not a constant)
    assert np.abs(logits[0, 0, 5, 0] - logits[0, 0, 5, 5]) > 1e-3


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2 ** 16))
def test_rotary_preserves_norms(seed):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(0, 3, (2, ROTARY_LENGTH, 3, ROTARY_DIM)).astype(np.float32))
    rotated = pos.apply_rotary(x, pos.rotary_angles(ROTARY_LENGTH, ROTARY_DIM))
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1),
                               rtol=1e-5)
    assert_close(rotated[:, 0], x[:, 0])  # position 0 is not rotated


def test_rotary_rotates_each_pair_by_pos_times_frequency():
    x = jnp.asarray(np.random.default_rng(0).normal(0, 1, (1, 4, 1, 6)).astype(np.float32))
    rotated = np.asarray(pos.apply_rotary(x, pos.rotary_angles(4, 6)))
    p, i = 3, 1  # pair (x[2], x[3]) at position 3: angle 3 · 10000^(-2/6)
    theta = 3 * 10000.0 ** (-2 / 6)
    even, odd = np.asarray(x)[0, p, 0, 2 * i], np.asarray(x)[0, p, 0, 2 * i + 1]
    expected = [even * math.cos(theta) - odd * math.sin(theta),
                even * math.sin(theta) + odd * math.cos(theta)]
    assert_close(rotated[0, p, 0, 2 * i: 2 * i + 2], expected)


# --- ALiBi ----------------------------------------------------------------------------------------


def reference_alibi_slopes(n):
    """The ALiBi authors' get_slopes (github.com/ofirpress/attention_with_linear_biases)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + reference_alibi_slopes(2 * closest)[0::2][: n - closest]


def test_alibi_slopes_for_8_heads_are_powers_of_one_half():
    slopes = np.asarray(pos.alibi_slopes(8))
    np.testing.assert_array_equal(slopes, [2.0 ** -k for k in range(1, 9)])


@pytest.mark.parametrize("num_heads", [1, 2, 3, 5, 6, 7, 12])
def test_alibi_slopes_for_any_head_count(num_heads):
    """n distinct slopes in (0, 1), as the authors' recipe gives them. For a head count that is
    not a power of two the recipe appends the interleaved slopes, so the list is not sorted: it is
    n distinct values which, sorted, decrease strictly."""
    slopes = np.asarray(pos.alibi_slopes(num_heads))
    assert slopes.shape == (num_heads,)
    np.testing.assert_allclose(slopes, reference_alibi_slopes(num_heads), rtol=1e-6)
    assert np.all(slopes > 0) and np.all(slopes < 1)
    assert np.all(np.diff(np.sort(slopes)[::-1]) < 0)


@pytest.mark.parametrize("q_len, kv_len", [(5, 5), (3, 6)])
def test_alibi_bias_is_minus_slope_times_distance(q_len, kv_len):
    bias = np.asarray(pos.alibi_bias(4, q_len, kv_len))
    assert bias.shape == (1, 4, q_len, kv_len)
    slopes = np.asarray(pos.alibi_slopes(4))
    distance = np.abs(np.arange(q_len)[:, None] - np.arange(kv_len)[None, :])
    np.testing.assert_array_equal(bias[0], -slopes[:, None, None] * distance[None])
    for i in range(min(q_len, kv_len)):
        assert np.all(bias[0, :, i, i] == 0.0)


# --- learned --------------------------------------------------------------------------------------


def test_learned_positions_table_shape_and_scale():
    learned = pos.LearnedPositions(256, 64, rngs=nnx.Rngs(0))
    assert learned(10).shape == (10, 64)
    assert_close(learned(10), learned.table[...][:10])
    assert abs(float(jnp.std(learned.table[...])) - 2 ** -0.5) < 0.02


# --- permutation equivariance -------------------------------------------------------------------


@pytest.mark.parametrize("position", list(Position))
def test_encoder_without_positions_is_permutation_equivariant(position):
    """A bidirectional encoder with no positional scheme maps permuted tokens to permuted outputs;
    every positional scheme breaks that (clearly, not by rounding)."""
    cfg = tiny_config(arch=Arch.ENCODER, position=position, num_heads=2)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    length = 8
    tokens = jnp.asarray(np.random.default_rng(1).permutation(cfg.vocab_size)[:length][None])
    perm = jnp.asarray(np.random.default_rng(2).permutation(length))

    @jax.jit
    def both(state, tokens):
        model = nnx.merge(graphdef, state)
        return model(tokens)[0], model(tokens[:, perm])[0]

    out, out_permuted = both(state, tokens)
    diff = max_abs_diff(out[:, perm], out_permuted)
    if position is Position.NONE:
        assert diff <= 1e-5, diff
    else:
        assert diff > 1e-3, diff
