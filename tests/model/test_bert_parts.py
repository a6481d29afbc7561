"""The parts a BERT-family checkpoint needs, each alone: the feed-forward activation (exact erf
GELU, its tanh form), the embeddings' √d_model switch, token-type embeddings, the embedding norm
and the norms' ε. A model whose blocks add nothing (out and output layers zeroed, no block norm,
identity head) returns its embeddings, so each switch is checked on the line it controls."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import assert_close, tiny_config
from transformer_jax.config import Activation, ConfigError, ModelConfig, Norm, NormType
from transformer_jax.model import Transformer
from transformer_jax.model.blocks import ACTIVATIONS, FeedForward, norm_layer

D = 16
TOKENS = jnp.asarray([[1, 2, 3, 4], [5, 6, 0, 0]])
TYPES = jnp.asarray([[0, 0, 1, 1], [1, 0, 0, 0]])
MASK = TOKENS > 0


def test_gelu_is_exact_erf_and_differs_from_its_tanh_form():
    x = np.linspace(-4, 4, 81)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    assert_close(ACTIVATIONS[Activation.GELU](jnp.asarray(x, jnp.float32)), exact, atol=1e-6)
    tanh_form = ACTIVATIONS[Activation.GELU_TANH](jnp.asarray(x, jnp.float32))
    assert np.max(np.abs(np.asarray(tanh_form) - exact)) > 1e-4  # a swap would be seen
    x32 = x.astype(np.float32)
    assert_close(ACTIVATIONS[Activation.RELU](jnp.asarray(x32)), np.maximum(x32, 0), atol=0)


@pytest.mark.parametrize("act", list(Activation))
def test_feed_forward_uses_the_configured_activation(act):
    ff = FeedForward(tiny_config(activation=act), rngs=nnx.Rngs(0))
    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 3, D)), jnp.float32)
    hidden = np.asarray(x @ ff.hidden.kernel[...] + ff.hidden.bias[...], np.float64)
    exact = {Activation.RELU: np.maximum(hidden, 0),
             Activation.GELU: hidden * 0.5 * (1 + np.vectorize(math.erf)(hidden / math.sqrt(2))),
             Activation.GELU_TANH: 0.5 * hidden * (1 + np.tanh(
                 math.sqrt(2 / math.pi) * (hidden + 0.044715 * hidden ** 3)))}[act]
    expected = exact @ np.asarray(ff.output.kernel[...]) + np.asarray(ff.output.bias[...])
    assert_close(ff(x), expected, atol=1e-5)


def passthrough(**overrides) -> Transformer:
    """A model whose output is its embeddings (after the embedding norm, if any)."""
    cfg = tiny_config(num_outputs=D, norm=Norm.NONE, position="none", arch="encoder", **overrides)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    blocks = model.layers.blocks
    for dense in (blocks.attention.out, blocks.feed_forward.output):  # sub-layers add 0
        dense.kernel[...] = jnp.zeros_like(dense.kernel[...])
        dense.bias[...] = jnp.zeros_like(dense.bias[...])
    model.head.kernel[...] = jnp.eye(D)
    model.head.bias[...] = jnp.zeros(D)
    return model


def test_embed_scale_multiplies_token_vectors_by_sqrt_d_model():
    for scale, factor in ((True, D ** 0.5), (False, 1.0)):
        model = passthrough(embed_scale=scale)
        out, _ = model(TOKENS, MASK)
        assert_close(out, model.embed.embedding[...][TOKENS] * factor, atol=1e-5)


def test_token_types_add_their_row_and_default_to_type_zero():
    model = passthrough(embed_scale=False, token_types=2)
    table = np.random.default_rng(1).normal(size=(2, D)).astype(np.float32)
    model.token_type_embed.embedding[...] = jnp.asarray(table)
    words = model.embed.embedding[...][TOKENS]
    out, _ = model(TOKENS, MASK, token_types=TYPES)
    assert_close(out, words + table[np.asarray(TYPES)], atol=1e-5)
    out, _ = model(TOKENS, MASK)  # no token_types: BERT's default, every token type 0
    assert_close(out, words + table[0], atol=1e-5)


def test_token_types_errors_name_the_problem():
    with pytest.raises(ValueError, match="model.token_types=0"):
        passthrough()(TOKENS, MASK, token_types=TYPES)
    with pytest.raises(ValueError, match=r"token_types has shape \(2, 3\)"):
        passthrough(token_types=2)(TOKENS, MASK, token_types=TYPES[:, :3])


def test_embed_norm_normalizes_the_summed_embeddings_with_norm_eps():
    model = passthrough(embed_scale=False, embed_norm=True, norm_eps=1e-12)
    scale = np.random.default_rng(2).normal(size=D).astype(np.float32)
    model.embed_norm.scale[...] = jnp.asarray(scale)
    model.embed_norm.bias[...] = jnp.ones(D)
    x = np.asarray(model.embed.embedding[...][TOKENS], np.float64)
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
    out, _ = model(TOKENS, MASK)
    assert_close(out, expected * scale + 1.0, atol=1e-5)
    assert passthrough().embed_norm is None  # off by default: yesterday's model


@pytest.mark.parametrize("norm_type", [NormType.LAYERNORM, NormType.RMSNORM, NormType.BATCHNORM])
def test_norm_eps_reaches_the_norm(norm_type):
    for eps in (1e-12, 1e-2):
        norm = norm_layer(tiny_config(norm_type=norm_type, norm_eps=eps), nnx.Rngs(0))
        assert norm.epsilon == eps


def test_defaults_are_the_model_before_these_fields():
    cfg = tiny_config()
    assert (cfg.activation, cfg.embed_scale, cfg.embed_norm, cfg.token_types, cfg.norm_eps) == (
        Activation.RELU, True, False, 0, 1e-5)


@pytest.mark.parametrize("field, value, message", [
    ("token_types", -1, "model.token_types=-1 must be a non-negative integer"),
    ("norm_eps", 0.0, "model.norm_eps=0.0 must be a positive number"),
    ("activation", "swish", "model.activation='swish' is not one of: relu, gelu, gelu_tanh"),
    ("embed_norm", 1, "model.embed_norm=1 must be True or False"),
])
def test_bad_values_fail_in_one_line(field, value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as error:
        ModelConfig(vocab_size=5, num_outputs=5, **{field: value})
    assert "\n" not in str(error.value)
