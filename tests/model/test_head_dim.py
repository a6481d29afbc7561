"""`model.head_dim`: each head's width d_k chosen apart from d_model / num_heads.

W_q, W_k, W_v map d_model to num_heads × head_dim, W_o maps it back, and ÷√d_k uses head_dim.
Checked against Flax's `nnx.MultiHeadAttention` (qkv_features = heads × head_dim) and PyTorch's
`scaled_dot_product_attention`, on the explicit and the fused path, in an unrolled and a scanned
stack; at its default (0) the model is the one it was, bit for bit, and no study's fingerprint
moves.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from conftest import assert_close, copy_mha_to_flax, kernel_and_bias, randomize_biases_and_scales, tiny_config
from transformer_jax.config import AttentionImpl, ConfigError, ModelConfig
from transformer_jax.model.attention import MultiHeadAttention
from transformer_jax.model.transformer import UNROLL_MAX_LAYERS, Transformer, attention_mask
from transformer_jax.studies.study import load_study

REPO = Path(__file__).resolve().parents[2]
D_MODEL, HEADS, HEAD_DIM, BATCH, LENGTH = 16, 2, 12, 2, 5  # 2 × 12 = 24 ≠ 16: d_k ≠ d_model / h


def wide_mha(implementation=AttentionImpl.EXPLICIT, attn_scale=True) -> MultiHeadAttention:
    mha = MultiHeadAttention(D_MODEL, HEADS, head_dim=HEAD_DIM, attn_scale=attn_scale,
                             implementation=implementation, rngs=nnx.Rngs(0))
    randomize_biases_and_scales(mha, 0)
    return mha


def inputs(seed=0):
    x = np.random.default_rng(seed).normal(0, 1, (BATCH, LENGTH, D_MODEL)).astype(np.float32)
    return jnp.asarray(x), attention_mask(None, LENGTH, causal=True)


def test_the_projections_have_heads_times_head_dim_columns():
    mha = wide_mha()
    for name in ("query", "key", "value"):
        assert getattr(mha, name).kernel[...].shape == (D_MODEL, HEADS * HEAD_DIM)
    assert mha.out.kernel[...].shape == (HEADS * HEAD_DIM, D_MODEL)
    leaves = jax.tree.leaves(nnx.state(mha, nnx.Param))
    inner = HEADS * HEAD_DIM  # the class docstring's count
    assert sum(p.size for p in leaves) == 4 * D_MODEL * inner + 3 * inner + D_MODEL


@pytest.mark.parametrize("implementation", list(AttentionImpl))
def test_matches_flax_multi_head_attention_with_qkv_features(implementation):
    mha = wide_mha(implementation)
    flax_mha = nnx.MultiHeadAttention(num_heads=HEADS, in_features=D_MODEL,
                                      qkv_features=HEADS * HEAD_DIM, decode=False,
                                      deterministic=True, rngs=nnx.Rngs(1))
    copy_mha_to_flax(mha, flax_mha)
    x, mask = inputs()
    assert_close(mha(x, mask=mask)[0], flax_mha(x, mask=mask, deterministic=True))


@pytest.mark.parametrize("attn_scale", [True, False])
def test_heads_match_torch_sdpa_with_the_scale_of_head_dim(attn_scale):
    """Each head's output before W_o against torch's softmax(QKᵀ·scale)V: the ÷√d_k is
    √head_dim, not √(d_model / num_heads) (which would be √8 here)."""
    mha = wide_mha(attn_scale=attn_scale)
    x, mask = inputs(1)
    q, k, v = (torch.from_numpy(np.array(t)).transpose(1, 2) for t in mha.project(x))
    scale = HEAD_DIM ** -0.5 if attn_scale else 1.0
    heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                              scale=scale)  # [B, H, T, D]
    merged = heads.transpose(1, 2).reshape(BATCH, LENGTH, HEADS * HEAD_DIM).numpy()
    kernel, bias = kernel_and_bias(mha.out)
    assert_close(mha(x, mask=mask)[0], merged @ kernel + bias)


@pytest.mark.parametrize("num_layers", [2, UNROLL_MAX_LAYERS + 1])  # unrolled, then a loop
def test_the_stack_runs_its_blocks_at_head_dim(num_layers):
    """The Transformer (scan, unrolled or not) equals its blocks run one by one, each block's
    attention at head_dim; fused equals explicit."""
    cfg = tiny_config(num_layers=num_layers, head_dim=HEAD_DIM, num_heads=3)
    model = Transformer(cfg, rngs=nnx.Rngs(0))
    tokens = jnp.asarray(np.random.default_rng(2).integers(0, cfg.vocab_size, (BATCH, LENGTH)))
    out, _ = model(tokens)
    x, mask = model.embeddings(tokens, None), attention_mask(None, LENGTH, causal=True)
    for layer in range(num_layers):
        block = model.layers.block(layer)
        assert block.attention.query.kernel[...].shape == (cfg.d_model, 3 * HEAD_DIM)
        x, _ = block(x, mask=mask)
    assert model.final_norm is None  # tiny_config is Post-LN: the head reads the last block
    assert_close(out, model.head(x))
    fused = Transformer(dataclasses.replace(cfg, attention=AttentionImpl.FUSED), rngs=nnx.Rngs(0))
    assert_close(fused(tokens)[0], out)


def test_the_default_is_todays_model_bit_for_bit():
    """head_dim=0 and head_dim = d_model / num_heads draw the same parameters and compute the
    same outputs; the default's kernels are the draws nnx.Linear(d_model, d_model) makes."""
    tokens = jnp.asarray(np.random.default_rng(3).integers(0, 13, (BATCH, LENGTH)))
    default, explicit = (Transformer(tiny_config(head_dim=h), rngs=nnx.Rngs(0)) for h in (0, 8))
    for a, b in zip(jax.tree.leaves(nnx.state(default)), jax.tree.leaves(nnx.state(explicit))):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(default(tokens)[0], explicit(tokens)[0])
    mha = MultiHeadAttention(D_MODEL, HEADS, rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(mha.query.kernel[...],
                                  nnx.Linear(D_MODEL, D_MODEL, rngs=nnx.Rngs(0)).kernel[...])


def test_head_dim_frees_the_head_count_from_dividing_d_model():
    cfg = tiny_config(num_heads=3, head_dim=8)  # 3 does not divide 16
    assert (cfg.d_k, cfg.head_dim) == (8, 8)
    assert tiny_config().d_k == 8 and tiny_config().head_dim == 0
    with pytest.raises(ConfigError, match=r"model.num_heads=3 does not divide .*set it to choose"):
        tiny_config(num_heads=3)


@pytest.mark.parametrize("bad", [-1, 2.5, True, "8"])
def test_a_bad_head_dim_is_refused_in_one_line(bad):
    start = re.escape(f"model.head_dim={bad!r} must be a non-negative integer")
    with pytest.raises(ConfigError, match=rf"^{start}[^\n]*$"):
        tiny_config(head_dim=bad)


def test_rotary_names_an_odd_head_dim():
    with pytest.raises(ConfigError, match=r"even head dimension, got model.head_dim=5$"):
        tiny_config(position="rotary", head_dim=5)
    assert tiny_config(position="rotary", head_dim=6).d_k == 6


def test_the_field_at_its_default_leaves_every_fingerprint_where_it_was():
    """Committed verdicts were judged with designs that had no model.head_dim: at 0 it is left
    out of every experiment's design, any other value is part of it (tests/studies/
    test_preregistration.py checks every committed verdict against today's fingerprints)."""
    assert ModelConfig(vocab_size=5, num_outputs=5).head_dim == 0
    for name in ("lm_scaling", "scaling"):
        study = load_study(REPO / "experiments" / f"{name}.py", "tiny")
        assert study.base.model.head_dim == 0
        assert "head_dim" not in study.design()["base"]["model"]
        without = study.base.copy_and_resolve_references()
        without.unlock()
        del without.model["head_dim"]
        wider = study.base.copy_and_resolve_references()
        wider.model.head_dim = 64
        fingerprint = lambda base: dataclasses.replace(study, base=base).fingerprint()  # noqa: E731
        assert fingerprint(without) == study.fingerprint()
        assert fingerprint(wider) != study.fingerprint()
