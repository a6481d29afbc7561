"""The block's switches, each checked so that a planted bug fails: the residual connection of
each sub-layer under every norm placement, inverted dropout's keep rate and 1/(1 - p)
rescaling, and the deep stacks' `lax.scan` loop against the unrolled stack and a Python loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import assert_close, max_abs_diff, randomize_biases_and_scales, tiny_config
from transformer_jax import Arch, Block, Norm, Position, Transformer, attention_mask
from transformer_jax.model import transformer as model_lib
from transformer_jax.model.blocks import dropout

BATCH, LENGTH, D_MODEL = 2, 5, 16
PLACEMENTS = [Norm.POST, Norm.PRE, Norm.NONE]


def inputs(seed: int = 0) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).normal(0, 1, (BATCH, LENGTH, D_MODEL)),
                       jnp.float32)


def make_block(norm: Norm, residual: bool) -> Block:
    block = Block(tiny_config(norm=norm, residual=residual), rngs=nnx.Rngs(0))
    randomize_biases_and_scales(block, seed=1)  # a dropped bias or norm would show
    return block


def zero(linear) -> None:
    """Makes a Dense layer output exactly 0 (so its sub-layer adds nothing)."""
    linear.kernel[...] = jnp.zeros_like(linear.kernel[...])
    linear.bias[...] = jnp.zeros_like(linear.bias[...])


# --- residual connections -------------------------------------------------------------------------


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("norm", PLACEMENTS)
def test_block_is_the_diagram_of_its_norm_placement_and_residual(norm, residual):
    """The block equals its diagram, composed here from its own sub-layers and norms:
    post: x = n(x + f(x)); pre: x = x + f(n(x)); none: x = x + f(x); residual=False drops "x +"."""
    block = make_block(norm, residual)
    pre, post = norm is Norm.PRE, norm is Norm.POST
    norms = [block.norm_before_attention, block.norm_after_attention,
             block.norm_before_feed_forward, block.norm_after_feed_forward]
    assert [n is not None for n in norms] == [pre, post, pre, post]
    n = lambda layer, h: h if layer is None else layer(h)  # noqa: E731
    x = inputs()
    attention = lambda h: block.attention(h)[0]  # noqa: E731
    h = x
    for sublayer, before, after in ((attention, norms[0], norms[1]),
                                    (block.feed_forward, norms[2], norms[3])):
        y = sublayer(n(before, h))
        h = n(after, h + y if residual else y)
    assert_close(block(x)[0], h)


@pytest.mark.parametrize("zeroed", ["attention", "feed_forward"])
@pytest.mark.parametrize("norm", PLACEMENTS)
def test_residual_false_output_does_not_contain_the_input(norm, zeroed):
    """With one sub-layer's output zeroed, residual=True passes x through it (exactly: the
    block is then the other sub-layer's residual step), residual=False loses x there: the
    block's output no longer depends on x at all."""
    x, other_x = inputs(0), inputs(1)
    n = lambda layer, h: h if layer is None else layer(h)  # noqa: E731
    outputs, blocks = {}, {}
    for residual in (True, False):
        blocks[residual] = block = make_block(norm, residual)
        zero(block.attention.out if zeroed == "attention" else block.feed_forward.output)
        outputs[residual] = block(x)[0], block(other_x)[0]
    # residual=True: the zeroed sub-layer passes its input on (normed if post)
    block, h = blocks[True], x
    if zeroed == "attention":
        h = n(block.norm_after_attention, h)
        h = n(block.norm_after_feed_forward,
              h + block.feed_forward(n(block.norm_before_feed_forward, h)))
    else:
        h = n(block.norm_after_attention, h + block.attention(n(block.norm_before_attention, h))[0])
        h = n(block.norm_after_feed_forward, h)
    assert_close(outputs[True][0], h)
    with_x, other = outputs[True]
    assert max_abs_diff(with_x, other) > 0.1  # residual=True: the output follows x
    without_x, other = outputs[False]
    assert_close(without_x, other, atol=0.0)  # residual=False: x is gone


@pytest.mark.parametrize("norm", [Norm.PRE, Norm.NONE])  # post: the sum is normalized
def test_residual_step_adds_exactly_the_sublayer_outputs(norm):
    """residual=True, norm none/pre: block(x) - attention part - feed-forward part == x."""
    block = make_block(norm, True)
    n = lambda layer, h: h if layer is None else layer(h)  # noqa: E731
    x = inputs()
    a = block.attention(n(block.norm_before_attention, x))[0]
    f = block.feed_forward(n(block.norm_before_feed_forward, x + a))
    assert_close(block(x)[0] - a - f, x)


# --- dropout --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_dropout_keeps_1_minus_p_and_rescales_by_its_inverse(rate):
    x = jnp.asarray(np.random.default_rng(0).normal(1.0, 1.0, (400, 500)), jnp.float32)
    out = np.asarray(dropout(x, rate, jax.random.key(3)))
    kept = out != 0
    n = kept.size
    tolerance = 5 * np.sqrt(rate * (1 - rate) / n)  # five standard errors of a binomial fraction
    assert abs(kept.mean() - (1 - rate)) < tolerance, kept.mean()
    np.testing.assert_allclose(out[kept], np.asarray(x)[kept] / (1 - rate), rtol=1e-6)
    ones = np.asarray(dropout(jnp.ones((400, 500)), rate, jax.random.key(4)))
    assert abs(ones.mean() - 1.0) < 5 * np.sqrt(rate / (1 - rate) / n)  # expectation kept
    other = np.asarray(dropout(x, rate, jax.random.key(5))) != 0
    assert (other != kept).mean() > rate * (1 - rate)  # a new key, a new mask


def test_dropout_is_the_identity_without_a_key_or_rate():
    x = inputs()
    np.testing.assert_array_equal(dropout(x, 0.5, None), x)
    np.testing.assert_array_equal(dropout(x, 0.0, jax.random.key(0)), x)
    half = dropout(x.astype(jnp.bfloat16), 0.5, jax.random.key(0))
    assert half.dtype == jnp.bfloat16


# --- the scanned stack: loop (deep stacks) == unrolled (shallow stacks) ----------------------------


def _forward_and_grads(model, tokens, padding, key, loop: bool, monkeypatch):
    """Logits and parameter gradients of `model`, its stack compiled as a
    `lax.scan` loop (loop=True: as stacks deeper than UNROLL_MAX_LAYERS) or unrolled."""
    monkeypatch.setattr(model_lib, "UNROLL_MAX_LAYERS", 0 if loop else 64)
    graphdef, params = nnx.split(model, nnx.Param)

    def loss(params):
        logits, _ = nnx.merge(graphdef, params)(tokens, padding, dropout_key=key)
        return jnp.sum(jnp.sin(logits)), logits

    def run(params):
        (_, logits), grads = jax.value_and_grad(loss, has_aux=True)(params)
        return logits, grads

    lowered = jax.jit(run).lower(params)
    return lowered.compile()(params), lowered.as_text().count("stablehlo.while")


def test_scanned_loop_equals_the_unrolled_stack(monkeypatch):
    """Same parameters, tokens, padding and dropout key: the same logits and gradients whether
    the stack runs as a loop (stacks deeper than UNROLL_MAX_LAYERS) or unrolled (the unrolled
    stack equals a Python loop over the layers: test_blocks_and_model)."""
    cfg = tiny_config(arch=Arch.DECODER, norm=Norm.PRE, position=Position.ROTARY, dropout=0.1)
    assert cfg.num_layers <= model_lib.UNROLL_MAX_LAYERS  # unrolled unless told otherwise
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(model, seed=4)
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, cfg.vocab_size, (BATCH, LENGTH)))
    padding = jnp.asarray(np.arange(LENGTH)[None] < np.array([[LENGTH], [3]]))
    key = jax.random.key(7)
    looped, loops = _forward_and_grads(model, tokens, padding, key, True, monkeypatch)
    unrolled, no_loops = _forward_and_grads(model, tokens, padding, key, False, monkeypatch)
    assert loops > no_loops, (loops, no_loops)  # the stack compiled as asked
    for a, b in zip(jax.tree.leaves(looped), jax.tree.leaves(unrolled)):
        assert_close(a, b, atol=1e-6 * max(1.0, float(jnp.max(jnp.abs(b)))))  # float32 rounding


# --- attn_scale: the ÷√d_k switch --------------------------------------------------------------


@pytest.mark.parametrize("attn_scale", [True, False])
def test_attention_weights_are_softmax_of_scaled_or_unscaled_logits(attn_scale):
    """The weights equal softmax(q·kᵀ · s) computed in numpy from the layer's own projections,
    s = 1/√d_k with attn_scale, 1 without."""
    from transformer_jax import MultiHeadAttention

    mha = MultiHeadAttention(D_MODEL, 2, attn_scale=attn_scale, rngs=nnx.Rngs(0))
    x = inputs()
    _, found = mha(x, probe=True)
    heads, head_dim = 2, D_MODEL // 2
    project = lambda layer: (np.asarray(x, np.float64) @ np.asarray(layer.kernel[...])  # noqa: E731
                             + np.asarray(layer.bias[...])).reshape(BATCH, LENGTH, heads, head_dim)
    q, k = project(mha.query), project(mha.key)
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) * (head_dim ** -0.5 if attn_scale else 1.0)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(found.weights), weights, atol=1e-5)
