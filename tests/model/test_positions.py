"""Positional schemes: sinusoidal values, rotary's relative-offset property, ALiBi's slopes, and
the fact that without positions a bidirectional encoder is permutation-equivariant."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import example, given, settings
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


def rotary_logits_closed_form(q_vec: np.ndarray, k_vec: np.ndarray, length: int) -> np.ndarray:
    """q rotated to position m dotted with k rotated to n, from the pairs alone (float64):
    Σ_i a_i cos(δθ_i) + b_i sin(δθ_i) with δ = n - m, θ_i = 10000^(-2i/D),
    a_i = q_2i k_2i + q_2i+1 k_2i+1, b_i = q_2i+1 k_2i - q_2i k_2i+1 (qᵀR(δθ)k per pair).
    q_vec, k_vec: [H, D]; returns [H, m, n]."""
    dim = q_vec.shape[-1]
    theta = 10000.0 ** (-np.arange(0, dim, 2) / dim)  # [D/2]
    q_even, q_odd, k_even, k_odd = q_vec[:, 0::2], q_vec[:, 1::2], k_vec[:, 0::2], k_vec[:, 1::2]
    a, b = q_even * k_even + q_odd * k_odd, q_odd * k_even - q_even * k_odd  # [H, D/2]
    offset = np.arange(length)[None, :] - np.arange(length)[:, None]  # [m, n] = n - m
    angle = offset[..., None] * theta  # [m, n, D/2]
    return (np.einsum("hi,mni->hmn", a, np.cos(angle))
            + np.einsum("hi,mni->hmn", b, np.sin(angle)))


def rotated_logits(q_vec: np.ndarray, k_vec: np.ndarray) -> np.ndarray:
    """The same q at every position, the same k at every position, rotated by our transform:
    the logit matrix [H, m, n] (float64 products of the float32 rotations)."""
    tile = lambda v: jnp.asarray(np.broadcast_to(v, (1, ROTARY_LENGTH) + v.shape))
    q, k = pos.rotary_qk_transform(ROTARY_LENGTH, ROTARY_DIM)(tile(q_vec), tile(k_vec))
    return np.einsum("bqhd,bkhd->bhqk", np.asarray(q, np.float64), np.asarray(k, np.float64))[0]


# Seeds 7121 and 38561 broke an earlier form of this test, which asserted that two logits differ
# by > 1e-3: for 33 of the 65,537 seeds they differ by less, by chance. The closed form below holds
# for every seed (scripts/randomized_tests.py rotary checks all of them, and that a rotary that
# does not rotate fails on every one).
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 16))
@example(seed=7121)
@example(seed=38561)
def test_rotary_dot_product_depends_only_on_the_offset(seed):
    """After rotation q_m·k_n is a function of n - m alone, and exactly the function of the
    closed form: the logit matrix is Toeplitz, and its entries are qᵀR((n - m)θ)k.

    Tolerance, for every input: each float32 angle is pos·θ_i (pos < 24) rounded, so each rotated
    pair is off by at most ~24 ulp of its angle (1.4e-6 rad) plus the rounding of cos and sin:
    a logit is off by at most ~4e-6·|q||k| (measured over all 65,537 seeds: 1.9e-7·|q||k|)."""
    rng = np.random.default_rng(seed)
    q_vec, k_vec = rng.normal(0, 1, (2, 2, ROTARY_DIM)).astype(np.float32)  # [H=2, D] each
    logits = rotated_logits(q_vec, k_vec)
    want = rotary_logits_closed_form(q_vec.astype(np.float64), k_vec.astype(np.float64),
                                     ROTARY_LENGTH)
    bound = 1e-5 * (np.linalg.norm(q_vec.astype(np.float64), axis=-1)
                    * np.linalg.norm(k_vec.astype(np.float64), axis=-1))  # [H]
    for shift in (1, 5, 11):  # Toeplitz: (m, n) and (m + s, n + s) agree
        diff = np.abs(logits[:, shift:, shift:] - logits[:, :-shift, :-shift]).max(axis=(1, 2))
        assert np.all(diff <= 2 * bound), (shift, diff, bound)
    error = np.abs(logits - want).max(axis=(1, 2))
    assert np.all(error <= bound), (error, bound)


def test_rotary_logit_of_a_unit_pair_is_the_cosine_of_the_offset():
    """q = k = the first unit vector: only pair 0 (θ_0 = 1 rad) carries anything, so the logit
    at (m, n) is cos(n - m): it depends on the offset, for a fixed input."""
    unit = np.zeros((1, ROTARY_DIM), np.float32)
    unit[0, 0] = 1.0
    offset = np.arange(ROTARY_LENGTH)[None, :] - np.arange(ROTARY_LENGTH)[:, None]
    np.testing.assert_allclose(rotated_logits(unit, unit)[0], np.cos(offset), atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2 ** 16))
def test_rotary_preserves_norms(seed):
    """A rotation keeps each pair's length up to the rounding of cos, sin and two products
    (a few ulp, relative), so rtol 1e-5 holds for every draw; position 0 has angle 0, where
    cos = 1 and sin = 0 exactly, so it is unchanged bit for bit."""
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
