"""Fuzzing: random shapes, masks and option combinations. Every outcome is a correct result or
the clear one-line error, never a crash, a hang or a silent NaN."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import HealthCheck, given, settings, strategies as st

from transformer_jax import scaled_dot_product_attention
from transformer_jax.config import ConfigError, ModelConfig
from transformer_jax.model.transformer import Transformer

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(batch=st.integers(1, 3), q_len=st.integers(1, 9), kv_len=st.integers(1, 9),
       heads=st.integers(1, 4), head_dim=st.integers(1, 16), seed=st.integers(0, 2 ** 16),
       use_mask=st.booleans(), use_bias=st.booleans(),
       scale=st.one_of(st.none(), st.floats(0.01, 4.0)))
@pytest.mark.slow  # compiles many random shapes, seconds (tests/fast_lane.py)
def test_attention_on_random_shapes_and_masks(batch, q_len, kv_len, heads, head_dim, seed,
                                              use_mask, use_bias, scale):
    rng = np.random.default_rng(seed)
    q, k, v = (jnp.asarray(rng.normal(size=(batch, n, heads, head_dim)), jnp.float32)
               for n in (q_len, kv_len, kv_len))
    mask = jnp.asarray(rng.random((batch, 1, q_len, kv_len)) < 0.7) if use_mask else None
    bias = jnp.asarray(rng.normal(size=(1, heads, q_len, kv_len)), jnp.float32) if use_bias else None
    # Jitted, as the model calls it: one program per shape, where eager dispatch compiles each of
    # its ~20 ops for every new shape (~0.7 s an example on a CPU).
    ours = jax.jit(lambda q, k, v, mask, bias: scaled_dot_product_attention(
        q, k, v, mask=mask, bias=bias, scale=scale))
    out, weights = (np.asarray(x) for x in ours(q, k, v, mask, bias))
    assert out.shape == q.shape and weights.shape == (batch, heads, q_len, kv_len)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    if mask is not None:  # masked keys get no weight, unless a whole row is masked (uniform then)
        m = np.broadcast_to(np.asarray(mask), weights.shape)
        rows_with_a_key = m.any(-1, keepdims=True)
        assert np.all(weights[~m & np.broadcast_to(rows_with_a_key, m.shape)] == 0)
    # 1e-4 holds for every draw: outputs are convex combinations of ≤ 9 rows of v (normals), so
    # another summation order moves them by ≲ 9·eps·max|v| ≈ 1e-5, and the row sums above are
    # 1 within ~9·eps. Logits stay small (|scale| ≤ 4, head_dim ≤ 16): nothing saturates.
    reference = jax.jit(lambda q, k, v, mask, bias: jax.nn.dot_product_attention(
        q, k, v, bias=bias, mask=mask, scale=scale))(q, k, v, mask, bias)
    np.testing.assert_allclose(out, np.asarray(reference), atol=1e-4)


FIELD_VALUES = {
    "d_model": st.sampled_from([-4, 0, 1, 6, 8, 12, 16]),
    "num_heads": st.sampled_from([0, 1, 2, 3, 4, 5]),
    "num_layers": st.sampled_from([-1, 0, 1, 2]),
    "d_ff": st.sampled_from([0, 4, 16]),
    "dropout": st.sampled_from([-0.1, 0.0, 0.3, 1.0]),
    "position": st.sampled_from(["sinusoidal", "learned", "rotary", "alibi", "none", "sideways"]),
    "norm": st.sampled_from(["post", "pre", "none", "middle"]),
    "arch": st.sampled_from(["encoder", "decoder", "seq2seq"]),
    "head": st.sampled_from(["token", "pooled"]),
    "attention": st.sampled_from(["explicit", "fused", "flash"]),
    "attn_scale": st.booleans(),
    "residual": st.booleans(),
    "causal_mask": st.booleans(),  # False on an encoder: the one-line error
    "max_len": st.sampled_from([0, 4, 16]),
}


@SETTINGS
@given(fields=st.fixed_dictionaries({}, optional=FIELD_VALUES), length=st.integers(1, 8),
       seed=st.integers(0, 1000))
@pytest.mark.slow  # compiles many random shapes, seconds (tests/fast_lane.py)
def test_model_config_combinations_build_or_fail_clearly(fields, length, seed):
    try:
        cfg = ModelConfig.from_config(fields, vocab_size=11, num_outputs=11 if
                                      fields.get("head", "token") == "token" else 3)
    except ConfigError as e:
        message = str(e)
        assert message and "\n" not in message and len(message) < 300
        # The message names a field with its value, as given or (for a field left out, e.g. the
        # decoder that has no pooled head) as defaulted: `model.num_heads=3`, `model.norm='middle'`.
        given = {f.name: f.default for f in dataclasses.fields(ModelConfig)
                 if f.default is not dataclasses.MISSING}
        given.update(fields)
        named = [k for k, v in given.items()
                 if f"model.{k}={getattr(v, 'value', v)!r}" in message]
        assert named, message
        return
    model = Transformer(cfg, rngs=nnx.Rngs(params=seed))
    tokens = jnp.asarray(np.random.default_rng(seed).integers(1, 11, size=(2, length)))
    if length > cfg.max_len:
        try:
            model(tokens)
        except ValueError as e:
            assert "model.max_len" in str(e)
            return
        raise AssertionError("a sequence longer than model.max_len was accepted")
    logits, _ = model(tokens, jnp.ones((2, length), bool))
    expected = (2, length, 11) if cfg.head.value == "token" else (2, 3)
    assert logits.shape == expected and bool(jnp.all(jnp.isfinite(logits)))
