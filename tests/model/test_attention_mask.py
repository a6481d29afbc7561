"""Attention reads boolean masks only: a float or integer mask (an additive 0 / -inf one, as
PyTorch and Hugging Face write it, reads as True wherever it blocks) or one that does not
broadcast to the logits is refused in one line, while tracing, on every path that takes one."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import assert_close
from transformer_jax import fused_attention, scaled_dot_product_attention
from transformer_jax.model.attention import attention_logits

B, TQ, TK, H, D = 2, 3, 4, 2, 8
LOGITS = f"[batch, heads, q_len, kv_len] = {[B, H, TQ, TK]}"
PATHS = {"sdpa": lambda q, k, v, **kw: scaled_dot_product_attention(q, k, v, **kw)[0],
         "fused": fused_attention,
         "logits": lambda q, k, v, **kw: attention_logits(q, k, **kw)}


@pytest.fixture
def qkv(rng):
    return tuple(jnp.asarray(rng.normal(size=(B, t, H, D)).astype(np.float32))
                 for t in (TQ, TK, TK))


def causal(dtype=bool) -> jnp.ndarray:
    return jnp.tril(jnp.ones((TQ, TK), bool))[None, None].astype(dtype)  # [1, 1, Tq, Tk]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("mask, given", [
    (jnp.where(causal(), 0.0, -jnp.inf), "float32 [1, 1, 3, 4]"),  # additive, PyTorch's way
    (causal(jnp.int32), "int32 [1, 1, 3, 4]"),
    (causal(jnp.bfloat16), "bfloat16 [1, 1, 3, 4]"),
])
def test_a_mask_that_is_not_boolean_is_refused_naming_its_dtype_and_the_expected_one(
        qkv, path, mask, given):
    with pytest.raises(ValueError) as error:
        PATHS[path](*qkv, mask=mask)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"mask: {given}; attention takes a boolean mask")
    assert LOGITS in message and "bias=" in message  # where an additive mask goes instead


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name, shape", [
    ("mask", (TK, TQ)),  # the transpose
    ("mask", (B, H, TQ, TK, 1)),  # an axis too many
    ("mask", (3, 1, TQ, TK)),  # batch 3 against 2
    ("bias", (1, H + 1, TQ, TK)),
])
def test_a_mask_or_bias_that_does_not_broadcast_is_refused_naming_both_shapes(
        qkv, path, name, shape):
    value = jnp.ones(shape, bool if name == "mask" else jnp.float32)
    with pytest.raises(ValueError) as error:
        PATHS[path](*qkv, **{name: value})
    message = str(error.value)
    assert "\n" not in message
    assert message == f"{name}: shape {list(shape)} ({value.dtype}) does not broadcast to the " \
                      f"logits' {LOGITS}"


def test_the_check_runs_while_tracing_so_jit_refuses_before_running(qkv):
    traced = jax.jit(lambda q, k, v, m: scaled_dot_product_attention(q, k, v, mask=m)[0])
    with pytest.raises(ValueError, match=r"^mask: float32 \[1, 1, 3, 4\]"):
        traced.lower(*qkv, causal(jnp.float32))  # lowering traces, nothing runs
    traced.lower(*qkv, causal())  # a boolean one lowers


@pytest.mark.parametrize("shape", [(TK,), (TQ, TK), (B, 1, 1, TK), (1, H, TQ, TK),
                                   (B, H, TQ, TK)])
def test_boolean_masks_of_every_broadcastable_shape_match_jax_nn(rng, qkv, shape):
    mask = jnp.asarray(rng.random(shape) < 0.7)
    ours, _ = scaled_dot_product_attention(*qkv, mask=mask)
    reference = jax.nn.dot_product_attention(*qkv, mask=jnp.broadcast_to(mask, (B, H, TQ, TK)))
    assert_close(ours, reference)
    assert_close(fused_attention(*qkv, mask=mask), reference)


def test_an_additive_mask_given_as_bias_is_the_boolean_mask(qkv):
    """The way the error points to: 0 / -inf in bias= blocks what False in mask= does."""
    additive = jnp.where(causal(), 0.0, -jnp.inf)
    assert_close(scaled_dot_product_attention(*qkv, bias=additive)[0],
                 scaled_dot_product_attention(*qkv, mask=causal())[0])
