"""Blocks and the full model: parity with torch.nn.TransformerEncoderLayer, causality, the scanned
layer stack, the pooled head, the fused attention path, and jit in float32 and bfloat16."""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from conftest import (PARITY_ATOL, assert_close, copy_mha_to_torch, kernel_and_bias, max_abs_diff,
                      randomize_biases_and_scales, tiny_config)
from transformer_jax import (Arch, AttentionImpl, Block, DType, Head, ModelConfig,
                             MultiHeadAttention, Norm, Position, Transformer, attention_mask,
                             count_params)
from transformer_jax.model import positions as pos

BATCH, LENGTH = 2, 6
LENGTHS = np.array([LENGTH, 4])  # the second sequence ends in two padding tokens


def padding_mask(lengths=LENGTHS, length=LENGTH):
    return jnp.asarray(np.arange(length)[None, :] < np.asarray(lengths)[:, None])  # [B, T]


def random_tokens(cfg, batch=BATCH, length=LENGTH, seed=0):
    return jnp.asarray(np.random.default_rng(seed).integers(0, cfg.vocab_size, (batch, length)))


def random_inputs(d_model=16, batch=BATCH, length=LENGTH, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(0, 1, (batch, length, d_model))
                       .astype(np.float32))


def jit_apply(model):
    """The functional pattern: split once, jit a pure function of (state, inputs)."""
    graphdef, state = nnx.split(model)
    fn = jax.jit(lambda state, *args, **kwargs: nnx.merge(graphdef, state)(*args, **kwargs)[0])
    return lambda *args, **kwargs: fn(state, *args, **kwargs)


# --- Block vs PyTorch ---------------------------------------------------------------------------


def copy_linear_to_torch(linear, torch_linear):
    kernel, bias = kernel_and_bias(linear)
    with torch.no_grad():
        torch_linear.weight.copy_(torch.from_numpy(kernel.T.copy()))
        torch_linear.bias.copy_(torch.from_numpy(bias))


def copy_norm_to_torch(norm, torch_norm):
    with torch.no_grad():
        torch_norm.weight.copy_(torch.from_numpy(np.asarray(norm.scale[...])))
        torch_norm.bias.copy_(torch.from_numpy(np.asarray(norm.bias[...])))


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("norm", [Norm.POST, Norm.PRE])
def test_block_matches_torch_transformer_encoder_layer(norm, masked):
    cfg = ModelConfig(vocab_size=13, num_outputs=7, d_model=16, num_heads=4, d_ff=32, norm=norm)
    block = Block(cfg, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(block, seed=1)
    layer = torch.nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, activation="relu", batch_first=True,
        norm_first=norm is Norm.PRE, layer_norm_eps=1e-5)
    copy_mha_to_torch(block.attention, layer.self_attn)
    copy_linear_to_torch(block.feed_forward.hidden, layer.linear1)
    copy_linear_to_torch(block.feed_forward.output, layer.linear2)
    if norm is Norm.POST:  # torch: x = norm1(x + sa(x)); x = norm2(x + ff(x))
        copy_norm_to_torch(block.norm_after_attention, layer.norm1)
        copy_norm_to_torch(block.norm_after_feed_forward, layer.norm2)
    else:  # torch: x = x + sa(norm1(x)); x = x + ff(norm2(x))
        copy_norm_to_torch(block.norm_before_attention, layer.norm1)
        copy_norm_to_torch(block.norm_before_feed_forward, layer.norm2)

    x = random_inputs()
    if masked:
        mask = attention_mask(padding_mask(), LENGTH, causal=True)
        torch_kwargs = dict(  # PyTorch: True = masked out
            src_mask=torch.from_numpy(~np.tril(np.ones((LENGTH, LENGTH), bool))),
            src_key_padding_mask=torch.from_numpy(~np.asarray(padding_mask())))
    else:
        mask, torch_kwargs = None, {}
    ours, _ = block(x, mask=mask)
    layer.eval()
    with torch.no_grad():
        reference = layer(torch.from_numpy(np.array(x)), **torch_kwargs).numpy()
    assert_close(ours, reference)


# --- causality ----------------------------------------------------------------------------------


@pytest.mark.parametrize("position, norm", [(Position.NONE, Norm.POST),
                                            (Position.ROTARY, Norm.PRE),
                                            (Position.ALIBI, Norm.NONE)])
def test_decoder_layers_output_at_i_has_zero_gradient_wrt_inputs_after_i(position, norm):
    cfg = tiny_config(position=position, norm=norm)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    mask = attention_mask(None, LENGTH, causal=True)
    bias = pos.alibi_bias(cfg.num_heads, LENGTH, LENGTH) if position is Position.ALIBI else None
    rotate = (pos.rotary_qk_transform(LENGTH, cfg.d_k) if position is Position.ROTARY
              else None)
    graphdef, state = nnx.split(model.layers)

    def layers(state, x):  # x: continuous inputs [T, D] standing for the embeddings
        out, _ = nnx.merge(graphdef, state)(x[None], mask=mask, bias=bias, qk_transform=rotate)
        return out[0]

    x = random_inputs(batch=1)[0]
    jacobian = np.asarray(jax.jit(jax.jacrev(layers, argnums=1))(state, x))  # [T, D, T, D]
    dependence = np.abs(jacobian).sum(axis=(1, 3))  # [T_out, T_in]
    later = np.triu(np.ones((LENGTH, LENGTH), bool), k=1)
    assert np.all(dependence[later] == 0.0)
    assert np.all(dependence[~later] > 0.0)


@pytest.mark.parametrize("position", [Position.LEARNED])
def test_decoder_logits_ignore_later_tokens_and_probes_are_causal(position):
    """End to end through embeddings, positions, final norm and head: changing the tokens after
    position i leaves the logits at positions <= i unchanged."""
    cfg = tiny_config(position=position, norm=Norm.PRE)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)

    @jax.jit
    def apply(state, tokens):
        return nnx.merge(graphdef, state)(tokens, probe=True)

    tokens = random_tokens(cfg, seed=1)
    changed = tokens.at[:, 3:].set((tokens[:, 3:] + 1) % cfg.vocab_size)
    (logits, probes), (logits_changed, _) = apply(state, tokens), apply(state, changed)
    assert logits.shape == (BATCH, LENGTH, cfg.num_outputs) and logits.dtype == jnp.float32
    assert_close(logits[:, :3], logits_changed[:, :3])
    assert max_abs_diff(logits[:, 3:], logits_changed[:, 3:]) > 1e-3
    weights = np.asarray(probes.weights)
    assert weights.shape == (cfg.num_layers, BATCH, cfg.num_heads, LENGTH, LENGTH)
    assert probes.max_abs_logit.shape == (cfg.num_layers,)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[..., np.triu(np.ones((LENGTH, LENGTH), bool), k=1)] == 0.0)


# --- the scanned stack --------------------------------------------------------------------------


def test_scanned_layers_are_distinct_and_equal_a_python_loop():
    cfg = tiny_config(arch=Arch.ENCODER, norm=Norm.PRE, position=Position.SINUSOIDAL,
                      num_layers=2)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(model, seed=2)
    block_graphdef, stacked = nnx.split(model.layers.blocks)

    kernels = [(path, leaf) for path, leaf in jax.tree_util.tree_leaves_with_path(stacked)
               if "kernel" in jax.tree_util.keystr(path)]
    assert len(kernels) == 6  # q, k, v, out, hidden, output
    for path, kernel in kernels:
        assert kernel.shape[0] == cfg.num_layers, path
        for a, b in itertools.combinations(range(cfg.num_layers), 2):
            assert max_abs_diff(kernel[a], kernel[b]) > 1e-3, (path, a, b)

    graphdef, state = nnx.split(model)

    @jax.jit
    def scanned_and_looped(state, tokens, padding):
        model = nnx.merge(graphdef, state)
        mask = attention_mask(padding, LENGTH, causal=False)
        x = model.embed(tokens) * cfg.d_model ** 0.5 + pos.sinusoidal_table(LENGTH, cfg.d_model)
        scanned, probes = model.layers(x, mask=mask, probe=True)
        _, stacked = nnx.split(model.layers.blocks)
        y, weights = x, []
        for layer in range(cfg.num_layers):  # the same layers, one python step each
            block = nnx.merge(block_graphdef, jax.tree.map(lambda leaf: leaf[layer], stacked))
            y, found = block(y, mask=mask, probe=True)
            weights.append(found.weights)
        by_hand = model.head(model.final_norm(y))  # the rest of the forward pass, by hand
        return scanned, probes.weights, y, jnp.stack(weights), model(tokens, padding)[0], by_hand

    scanned, scanned_weights, looped, looped_weights, logits, by_hand = scanned_and_looped(
        state, random_tokens(cfg), padding_mask())
    assert_close(scanned, looped)
    assert_close(scanned_weights, looped_weights)
    assert_close(logits, by_hand)


# --- pooled head, fused attention, dropout --------------------------------------------------------


@pytest.mark.parametrize("position", [Position.NONE, Position.SINUSOIDAL])
def test_pooled_head_ignores_padding(position):
    cfg = tiny_config(arch=Arch.ENCODER, head=Head.POOLED, position=position)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)

    @jax.jit
    def both(state, tokens, padding, padded_tokens, padded_padding):
        model = nnx.merge(graphdef, state)
        return model(tokens, padding)[0], model(padded_tokens, padded_padding)[0]

    tokens, padding = random_tokens(cfg), padding_mask()
    extra = 3  # append three pad tokens (random ids: only the mask may matter)
    padded_tokens = jnp.concatenate([tokens, random_tokens(cfg, length=extra, seed=5)], axis=1)
    padded_padding = jnp.concatenate([padding, jnp.zeros((BATCH, extra), bool)], axis=1)
    out, out_padded = both(state, tokens, padding, padded_tokens, padded_padding)
    assert out.shape == (BATCH, cfg.num_outputs)
    assert_close(out, out_padded)


@pytest.mark.parametrize("arch, attn_scale, padded", [
    (Arch.ENCODER, True, True), (Arch.DECODER, False, False), (Arch.DECODER, True, True)])
def test_fused_attention_model_matches_explicit(arch, attn_scale, padded):
    """Same parameters, same outputs and gradients: ALiBi bias, padding, the causal mask (which
    the fused path gets as is_causal and key lengths, not as the dense mask) and the unscaled
    logits all reach the fused path unchanged."""
    kwargs = dict(arch=arch, position=Position.ALIBI, attn_scale=attn_scale)
    explicit = Transformer(tiny_config(**kwargs), rngs=nnx.Rngs(0))
    fused = Transformer(tiny_config(attention=AttentionImpl.FUSED, **kwargs), rngs=nnx.Rngs(0))
    randomize_biases_and_scales(explicit, seed=3)
    nnx.update(fused, nnx.state(explicit))
    tokens = random_tokens(explicit.cfg)
    padding = padding_mask() if padded else None
    assert_close(jit_apply(fused)(tokens, padding), jit_apply(explicit)(tokens, padding))

    def gradient(model):
        graphdef, params = nnx.split(model)
        loss = lambda p: jnp.sum(nnx.merge(graphdef, p)(tokens, padding)[0] ** 2)
        return jax.tree.leaves(jax.jit(jax.grad(loss))(params))

    for ours, reference in zip(gradient(fused), gradient(explicit)):  # float32: relative to size
        assert_close(ours, reference, atol=PARITY_ATOL * max(1.0, float(jnp.max(jnp.abs(reference)))))


def test_dropout_acts_only_with_a_key():
    cfg = tiny_config(dropout=0.5, arch=Arch.ENCODER)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    without = Transformer(tiny_config(arch=Arch.ENCODER), rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    train = jax.jit(lambda s, t, k: nnx.merge(graphdef, s)(t, dropout_key=k)[0])
    tokens = random_tokens(cfg)
    evaluation = jit_apply(model)(tokens)
    assert_close(evaluation, jit_apply(without)(tokens))
    first, again = train(state, tokens, jax.random.key(1)), train(state, tokens, jax.random.key(1))
    other = train(state, tokens, jax.random.key(2))
    assert_close(first, again)
    assert max_abs_diff(first, evaluation) > 1e-2 and max_abs_diff(first, other) > 1e-2


def test_sequence_longer_than_max_len_is_rejected():
    cfg = tiny_config(max_len=4, position=Position.LEARNED)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="max_len=4"):
        model(random_tokens(cfg, length=5))


@pytest.mark.parametrize("bad_id", [13, -1])
def test_a_token_id_outside_the_vocabulary_is_refused_where_it_can_be_seen(bad_id):
    """The embedding would clamp it and return logits; a concrete input is checked instead.
    Inside jit the ids are tracers and cannot stop the program: the call clamps as before."""
    cfg = tiny_config()  # vocab_size 13
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    tokens = random_tokens(cfg, length=5).at[1, 2].set(bad_id)
    with pytest.raises(ValueError, match=rf"token id {bad_id} is outside the vocabulary: ids "
                                         rf"must be in \[0, 13\)"):
        model(tokens)
    logits, _ = nnx.jit(lambda m, t: m(t))(model, tokens)
    assert logits.shape == (2, 5, cfg.num_outputs)


@pytest.mark.parametrize("tokens, fragment", [
    (jnp.zeros((2, 5, 1), jnp.int32), "tokens has shape (2, 5, 1)"),
    (jnp.zeros((2, 5), jnp.float32), "dtype float32"),
])
def test_tokens_of_the_wrong_layout_name_the_layout(tokens, fragment):
    model = Transformer(tiny_config(), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="integer token ids \\[batch, length\\]") as error:
        model(tokens)
    assert fragment in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"padding_mask has shape \(2, 4\); it must be"):
        model(jnp.zeros((2, 5), jnp.int32), jnp.ones((2, 4), bool))


def test_attention_mask_combines_causal_and_padding():
    padding = padding_mask(lengths=[3, 2], length=3)
    mask = np.asarray(attention_mask(padding, 3, causal=True))
    assert mask.shape == (2, 1, 3, 3)
    np.testing.assert_array_equal(mask[1, 0], [[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    assert attention_mask(None, 3, causal=False) is None
    assert attention_mask(padding, 3, causal=False).shape == (2, 1, 1, 3)


def test_count_params_of_a_block_stack():
    cfg = tiny_config()
    d, f, layers = cfg.d_model, cfg.d_ff, cfg.num_layers
    per_block = (4 * d * d + 4 * d) + (d * f + f + f * d + d) + 2 * (2 * d)  # MHA, FFN, 2 norms
    expected = cfg.vocab_size * d + layers * per_block + d * cfg.num_outputs + cfg.num_outputs
    assert count_params(Transformer(cfg, rngs=nnx.Rngs(0))) == expected


# --- jit, float32 and bfloat16 ------------------------------------------------------------------

BF16_TOLERANCE = 0.03  # measured ≤ 0.008; relative to the float32 output's largest magnitude

MODEL_COMBOS = [  # every position scheme, norm placement, architecture and head at least once
    (Arch.ENCODER, Position.SINUSOIDAL, Norm.POST, Head.TOKEN),
    (Arch.DECODER, Position.LEARNED, Norm.PRE, Head.TOKEN),
    (Arch.ENCODER, Position.ROTARY, Norm.NONE, Head.TOKEN),
    (Arch.DECODER, Position.ALIBI, Norm.POST, Head.TOKEN),
    (Arch.ENCODER, Position.NONE, Norm.PRE, Head.POOLED),
    (Arch.DECODER, Position.ROTARY, Norm.PRE, Head.TOKEN),
]


def check_bf16_against_f32(out32, out16, shape):
    assert out32.shape == out16.shape == shape
    assert np.all(np.isfinite(np.asarray(out32))) and np.all(np.isfinite(np.asarray(out16, np.float32)))
    scale = max(1.0, float(np.abs(np.asarray(out32)).max()))
    assert max_abs_diff(out32, np.asarray(out16, np.float32)) <= BF16_TOLERANCE * scale


@pytest.mark.parametrize("arch, position, norm, head", MODEL_COMBOS,
                         ids=["-".join(m.value for m in combo) for combo in MODEL_COMBOS])
def test_transformer_jits_in_float32_and_bfloat16(arch, position, norm, head):
    kwargs = dict(arch=arch, position=position, norm=norm, head=head)
    model32 = Transformer(tiny_config(**kwargs), rngs=nnx.Rngs(0))
    model16 = Transformer(tiny_config(dtype=DType.BFLOAT16, **kwargs), rngs=nnx.Rngs(0))
    nnx.update(model16, nnx.state(model32))  # parameters stay float32 in both
    tokens = random_tokens(model32.cfg)
    padding = padding_mask() if arch is Arch.ENCODER else None
    out32, out16 = jit_apply(model32)(tokens, padding), jit_apply(model16)(tokens, padding)
    shape = (BATCH, 7) if head is Head.POOLED else (BATCH, LENGTH, 7)
    assert out32.dtype == out16.dtype == jnp.float32
    check_bf16_against_f32(out32, out16, shape)


def test_attention_and_block_jit_in_float32_and_bfloat16():
    x = random_inputs()
    mask = attention_mask(padding_mask(), LENGTH, causal=True)
    mha32 = MultiHeadAttention(16, 4, rngs=nnx.Rngs(0))
    mha16 = MultiHeadAttention(16, 4, dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    nnx.update(mha16, nnx.state(mha32))
    out32, out16 = jit_apply(mha32)(x, mask=mask), jit_apply(mha16)(x.astype(jnp.bfloat16), mask=mask)
    assert out16.dtype == jnp.bfloat16
    check_bf16_against_f32(out32, out16, x.shape)

    block32 = Block(tiny_config(norm=Norm.PRE), rngs=nnx.Rngs(0))
    block16 = Block(tiny_config(norm=Norm.PRE, dtype=DType.BFLOAT16), rngs=nnx.Rngs(0))
    nnx.update(block16, nnx.state(block32))
    out32, out16 = jit_apply(block32)(x, mask=mask), jit_apply(block16)(x.astype(jnp.bfloat16), mask=mask)
    check_bf16_against_f32(out32, out16, x.shape)
