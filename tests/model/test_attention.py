"""Scaled dot-product and multi-head attention: parity with jax.nn, Flax NNX and PyTorch, and the
properties the seed states (softmax rows, masks, the √d_k scaling, the parameter count)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import (assert_close, copy_mha_to_flax, copy_mha_to_torch,
                      randomize_biases_and_scales)
from transformer_jax import (MultiHeadAttention, attention_mask, fused_attention,
                             scaled_dot_product_attention)
from transformer_jax.model.attention import Mask, attention_logits
from transformer_jax.config import AttentionImpl

MASK_KINDS = ("none", "causal", "padding", "random")


def make_qkv(rng, batch, q_len, kv_len, heads, head_dim, magnitude=1.0):
    q = rng.normal(0, magnitude, (batch, q_len, heads, head_dim)).astype(np.float32)
    k = rng.normal(0, magnitude, (batch, kv_len, heads, head_dim)).astype(np.float32)
    v = rng.normal(0, 1, (batch, kv_len, heads, head_dim)).astype(np.float32)
    return jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)


def make_mask(rng, kind, batch, heads, q_len, kv_len):
    """Boolean mask broadcastable to [B, H, Tq, Tk], True = may attend. May mask whole rows."""
    if kind == "none":
        return None
    if kind == "causal":
        return jnp.tril(jnp.ones((q_len, kv_len), bool))[None, None]
    if kind == "padding":  # real keys first, then padding; a length of 0 masks every key
        lengths = rng.integers(0, kv_len + 1, batch)
        return jnp.asarray(np.arange(kv_len)[None, :] < lengths[:, None])[:, None, None, :]
    return jnp.asarray(rng.random((batch, heads, q_len, kv_len)) < 0.6)


def full_mask(mask, shape):
    return np.ones(shape, bool) if mask is None else np.broadcast_to(np.asarray(mask), shape)


# Two fixed shapes (q_len < kv_len, q_len > kv_len; equal lengths are tested with the modules):
# eager JAX compiles each op once per shape, so hypothesis varies the data, masks, bias and
# scale, not the shapes.
SHAPES = [(2, 3, 5, 2, 4), (1, 5, 3, 3, 8)]  # batch, q_len, kv_len, heads, head_dim

attention_cases = dict(
    shape=st.sampled_from(SHAPES),
    mask_kind=st.sampled_from(MASK_KINDS),
    use_bias=st.booleans(),
    scale=st.sampled_from([None, 1.0, 0.37]),
    seed=st.integers(0, 2 ** 16),
)


@settings(max_examples=20, deadline=None)
@given(**attention_cases)
def test_sdpa_matches_jax_nn_and_fused(shape, mask_kind, use_bias, scale, seed):
    """Ours == jax.nn.dot_product_attention == fused_attention for any mask, bias, scale, and
    q_len != kv_len (fully masked rows included: both give uniform weights there).

    Tolerance (1e-5), for every draw: each output is a convex combination of ≤ 5 rows of v, so
    summing in another order moves it by ≲ kv_len·eps·max|v| ≈ 5·1.2e-7·6 = 4e-6 (max|v| of the
    ≤ 240 normals drawn per example stays under 6 for every seed). On the Intel Xeon of the
    suite the three agree bitwise over all cases of 1,500 seeds."""
    rng = np.random.default_rng(seed)
    batch, q_len, kv_len, heads, head_dim = shape
    q, k, v = make_qkv(rng, batch, q_len, kv_len, heads, head_dim)
    mask = make_mask(rng, mask_kind, batch, heads, q_len, kv_len)
    bias = (jnp.asarray(rng.normal(0, 1, (1, heads, q_len, kv_len)).astype(np.float32))
            if use_bias else None)

    ours, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, scale=scale)
    ref_scale = head_dim ** -0.5 if scale is None else scale
    ref_mask = None if mask is None else jnp.broadcast_to(mask, (batch, heads, q_len, kv_len))
    ref_bias = None if bias is None else jnp.broadcast_to(bias, (batch, heads, q_len, kv_len))
    reference = jax.nn.dot_product_attention(q, k, v, bias=ref_bias, mask=ref_mask,
                                             scale=ref_scale)
    fused = fused_attention(q, k, v, mask=mask, bias=bias, scale=scale)

    assert ours.shape == (batch, q_len, heads, head_dim)
    assert weights.shape == (batch, heads, q_len, kv_len)
    assert_close(ours, reference)
    assert_close(fused, ours)


def test_scale_none_is_inverse_sqrt_head_dim_and_one_is_unscaled(rng):
    q, k, v = make_qkv(rng, 1, 3, 4, 2, 9)
    _, w_default = scaled_dot_product_attention(q, k, v)
    _, w_explicit = scaled_dot_product_attention(q, k, v, scale=1 / 3)
    _, w_unscaled = scaled_dot_product_attention(q, k, v, scale=1.0)
    logits = np.einsum("bqhd,bkhd->bhqk", q, k)
    assert_close(w_default, w_explicit)
    assert_close(w_unscaled, jax.nn.softmax(logits, axis=-1))


def test_fully_masked_row_gets_uniform_weights(rng):
    q, k, v = make_qkv(rng, 1, 3, 4, 2, 4)
    mask = np.ones((1, 2, 3, 4), bool)
    mask[0, 1, 2, :] = False  # head 1, query 2 may attend nothing
    mask[0, 0, 0, 1:] = False  # head 0, query 0 only key 0
    mask = jnp.asarray(mask)
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    reference = jax.nn.dot_product_attention(q, k, v, mask=mask)
    assert_close(weights[0, 1, 2], np.full(4, 0.25))
    assert_close(out[0, 2, 1], np.mean(np.asarray(v)[0, :, 1], axis=0))
    assert_close(out, reference)
    assert_close(fused_attention(q, k, v, mask=mask), out)
    np.testing.assert_array_equal(np.asarray(weights[0, 0, 0]), [1.0, 0.0, 0.0, 0.0])


@settings(max_examples=25, deadline=None)
@given(shape=st.sampled_from(SHAPES), mask_kind=st.sampled_from(MASK_KINDS), magnitude=st.sampled_from([0.1, 1.0, 30.0]),
       seed=st.integers(0, 2 ** 16))
def test_softmax_rows_sum_to_one_and_masked_keys_get_exactly_zero(shape, mask_kind, magnitude,
                                                                  seed):
    # Holds for every draw: a row is exp(x - max)/Σ over ≤ 5 keys, each term off by a few ulp,
    # so the sum is 1 within ~5·eps = 6e-7 (< 1e-5) at any magnitude; a masked key's logit is
    # pushed to the dtype's minimum, whose exp underflows to exactly 0 however large the rest.
    rng = np.random.default_rng(seed)
    batch, q_len, kv_len, heads, head_dim = shape
    q, k, v = make_qkv(rng, batch, q_len, kv_len, heads, head_dim, magnitude)
    mask = make_mask(rng, mask_kind, batch, heads, q_len, kv_len)
    _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    weights = np.asarray(weights)
    allowed = full_mask(mask, weights.shape)
    assert np.all(np.isfinite(weights)) and np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    some_allowed = allowed.any(-1, keepdims=True)
    masked = ~allowed & some_allowed  # rows with no allowed key are uniform instead
    assert np.all(weights[masked] == 0.0)


# --- the seed's numbers -------------------------------------------------------------------------

def test_dot_product_variance_grows_with_d_k_and_scaling_restores_one():
    """q, k with unit-variance entries, d_k = 64: var(q·k) ≈ 64, var(q·k/√d_k) ≈ 1."""
    key_q, key_k = jax.random.split(jax.random.key(0))
    q = jax.random.normal(key_q, (1, 512, 1, 64))
    k = jax.random.normal(key_k, (1, 512, 1, 64))
    unscaled = float(jnp.var(attention_logits(q, k, scale=1.0)))  # 512² = 262144 samples
    scaled = float(jnp.var(attention_logits(q, k)))  # scale=None: 1/√64
    assert abs(unscaled / 64 - 1) < 0.1, unscaled
    assert abs(scaled - 1) < 0.1, scaled


@pytest.mark.parametrize("num_heads", [1, 2, 4, 8])
def test_mha_parameter_count_does_not_depend_on_heads(num_heads):
    d_model = 32
    mha = MultiHeadAttention(d_model, num_heads, rngs=nnx.Rngs(0))
    leaves = jax.tree.leaves(nnx.state(mha, nnx.Param))
    weights = sum(p.size for p in leaves if p.ndim == 2)
    biases = sum(p.size for p in leaves if p.ndim == 1)
    assert weights == 4 * d_model ** 2
    assert biases == 4 * d_model
    assert weights + biases == sum(p.size for p in leaves)


# --- MultiHeadAttention parity --------------------------------------------------------------------

D_MODEL, HEADS, BATCH, LENGTH = 16, 4, 2, 6


def our_mha(seed=0):
    mha = MultiHeadAttention(D_MODEL, HEADS, rngs=nnx.Rngs(seed))
    randomize_biases_and_scales(mha, seed)
    return mha


def causal_padding_mask():
    """Causal + padding (second sequence has 4 real tokens); position 0 is always real, so no row
    is fully masked (PyTorch would give NaN there)."""
    padding = np.arange(LENGTH)[None, :] < np.array([LENGTH, 4])[:, None]  # [B, T]
    return padding, attention_mask(jnp.asarray(padding), LENGTH, causal=True)  # [B, 1, T, T]


@pytest.mark.parametrize("masked", [False, True])
def test_mha_matches_flax_nnx_multi_head_attention(rng, masked):
    mha = our_mha()
    flax_mha = nnx.MultiHeadAttention(num_heads=HEADS, in_features=D_MODEL, decode=False,
                                      deterministic=True, rngs=nnx.Rngs(1))
    copy_mha_to_flax(mha, flax_mha)

    x = jnp.asarray(rng.normal(0, 1, (BATCH, LENGTH, D_MODEL)).astype(np.float32))
    mask = causal_padding_mask()[1] if masked else None
    ours, _ = mha(x, mask=mask)
    reference = flax_mha(x, mask=mask, deterministic=True)
    assert_close(ours, reference)


@pytest.mark.parametrize("masked", [False, True])
def test_mha_matches_torch_outputs_and_per_head_weights(rng, masked):
    mha = our_mha()
    torch_mha = torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
    copy_mha_to_torch(mha, torch_mha)

    x = rng.normal(0, 1, (BATCH, LENGTH, D_MODEL)).astype(np.float32)
    if masked:
        padding, mask = causal_padding_mask()
        torch_kwargs = dict(  # PyTorch: True = masked out
            attn_mask=torch.from_numpy(~np.tril(np.ones((LENGTH, LENGTH), bool))),
            key_padding_mask=torch.from_numpy(~padding))
    else:
        mask, torch_kwargs = None, {}
    ours, probe = mha(jnp.asarray(x), mask=mask, probe=True)
    torch_mha.eval()
    with torch.no_grad():
        t = torch.from_numpy(x)
        reference, reference_weights = torch_mha(t, t, t, need_weights=True,
                                                 average_attn_weights=False, **torch_kwargs)
    assert_close(ours, reference.numpy())
    assert probe.weights.shape == (BATCH, HEADS, LENGTH, LENGTH)
    assert_close(probe.weights, reference_weights.numpy())


def test_mha_probe_reports_the_largest_allowed_logit(rng):
    mha = our_mha()
    x = jnp.asarray(rng.normal(0, 1, (BATCH, LENGTH, D_MODEL)).astype(np.float32))
    _, mask = causal_padding_mask()
    out, probe = mha(x, mask=mask, probe=True)
    split = lambda t: t.reshape(BATCH, LENGTH, HEADS, D_MODEL // HEADS)
    logits = np.asarray(attention_logits(split(mha.query(x)), split(mha.key(x))))
    allowed = np.broadcast_to(np.asarray(mask), logits.shape)
    np.testing.assert_allclose(float(probe.max_abs_logit), np.abs(logits[allowed]).max(),
                               rtol=1e-6)
    plain, none = mha(x, mask=mask)
    assert none is None
    assert_close(plain, out)


def test_fused_kernel_is_cudnn_only_where_cudnn_runs():
    """model.attention=fused asks for cuDNN on NVIDIA GPUs in half precision (JAX's default is
    XLA everywhere), and for XLA on CPUs, TPUs, other GPUs, float32 and unsupported head sizes."""
    from types import SimpleNamespace

    from transformer_jax.model.attention import fused_kernel

    h200 = SimpleNamespace(platform="gpu", device_kind="NVIDIA H200")
    mi300 = SimpleNamespace(platform="gpu", device_kind="AMD Instinct MI300X")
    tpu = SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")
    assert fused_kernel(jnp.bfloat16, 64, h200) == "cudnn"
    assert fused_kernel(jnp.float16, 128, h200) == "cudnn"
    assert fused_kernel(jnp.float32, 64, h200) == "xla"
    assert fused_kernel(jnp.bfloat16, 12, h200) == "xla"  # not a multiple of 8
    assert fused_kernel(jnp.bfloat16, 256, h200) == "xla"
    assert fused_kernel(jnp.bfloat16, 64, mi300) == "xla"
    assert fused_kernel(jnp.bfloat16, 64, tpu) == "xla"
    assert fused_kernel(jnp.bfloat16, 64) == "xla"  # this machine's CPU


@pytest.mark.parametrize("causal", [False, True])
def test_fused_mha_reads_a_mask_in_parts_like_the_dense_one(rng, causal):
    """Mask(dense, causal, kv_lengths) on the fused path (flags, no dense array) and a Mask with
    no parts (the fused path then reads `dense`) give what the explicit path gives with `dense`."""
    explicit = our_mha()
    fused = MultiHeadAttention(D_MODEL, HEADS, implementation=AttentionImpl.FUSED,
                               rngs=nnx.Rngs(0))
    nnx.update(fused, nnx.state(explicit))
    x = jnp.asarray(rng.normal(0, 1, (BATCH, LENGTH, D_MODEL)).astype(np.float32))
    padding = jnp.asarray(np.arange(LENGTH)[None, :] < np.array([LENGTH, 4])[:, None])  # [B, T]
    dense = attention_mask(padding, LENGTH, causal=causal)
    reference, _ = explicit(x, mask=dense)
    in_parts = Mask(dense, causal, jnp.sum(padding, axis=-1, dtype=jnp.int32))
    assert_close(fused(x, mask=in_parts)[0], reference)
    assert_close(fused(x, mask=Mask(dense, False, None))[0], reference)


@pytest.mark.parametrize("shapes, why", [
    (((2, 3, 4), (2, 5, 4), (2, 5, 4)), "3 axes, not [batch, length, heads, head_dim]"),
    (((2, 3, 2, 4), (2, 5, 2, 8), (2, 5, 2, 8)), "head_dim 4 against 8"),
    (((2, 3, 2, 4), (2, 5, 2, 4), (2, 6, 2, 4)), "kv_len 5 against 6"),
    (((2, 3, 2, 4), (1, 5, 2, 4), (1, 5, 2, 4)), "batch 2 against 1"),
    (((2, 3, 2, 4), (2, 5, 1, 4), (2, 5, 1, 4)), "heads 2 against 1"),
])
def test_attention_names_the_layout_when_the_shapes_do_not_fit_it(shapes, why):
    q, k, v = (jnp.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=r"attention takes query \[batch, q_len, heads") as error:
        scaled_dot_product_attention(q, k, v)
    assert "\n" not in str(error.value) and str(shapes[1]) in str(error.value), why


def test_attention_takes_a_value_dimension_of_its_own():
    q, k, v = jnp.ones((1, 2, 1, 4)), jnp.ones((1, 3, 1, 4)), jnp.ones((1, 3, 1, 6))
    assert scaled_dot_product_attention(q, k, v)[0].shape == (1, 2, 1, 6)
