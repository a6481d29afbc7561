"""A Transformer block: attention and a position-wise feed-forward net, each wrapped in a
residual connection and a norm whose placement (`model.norm`) and function (`model.norm_type`:
LayerNorm, RMSNorm, Dynamic Tanh or BatchNorm, `transformer_jax.model.norms`) are config choices.

Norm placement is three optional norms per sub-layer pair, so the forward pass reads like the
diagram for every variant:

    post:  x = norm(x + attn(x));        x = norm(x + ffn(x))
    pre:   x = x + attn(norm(x));        x = x + ffn(norm(x))      (+ a final norm after the stack)
    none:  x = x + attn(x);              x = x + ffn(x)
and `residual=False` drops the "x +". Every norm sees which tokens are real (`token_mask`);
only BatchNorm, whose statistics span the batch, uses it.

How the branches F start is `model.branch_init` (`branch_scales`; L = num_layers):

    standard:      x + F(x)                   every kernel at nnx.Linear's draw
    depth_scaled:  x + F(x)                   W_o and the FFN's second kernel drawn × 1/√(2L)
    rezero:        x + α·F(x)                 α a learned scalar per branch, 0 at the start
    deepnet:       norm(α·x + F(x))           α = (2L)^(1/4); W_v, W_o and both FFN kernels × β,
                                              β = (8L)^(-1/4); Post-LN only
with the norms where `model.norm` puts them. GPT-2 (Radford et al. 2019) scales "the weights of
residual layers" by 1/√N, N = 2L residual sums; ReZero (Bachlechner et al. 2020) makes each block
the identity at the start; DeepNet (Wang et al. 2022) bounds Post-LN's update with α and β
(Xavier's draw × β there; here the project's LeCun draw × β, the same for the square W_v, W_o).
"""
from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.model.attention import AttentionProbe, Mask, MultiHeadAttention, QKTransform
from transformer_jax.config import Activation, BranchInit, ModelConfig, Norm
from transformer_jax.model.dense import Dense
from transformer_jax.model.hook_points import scope, tap
from transformer_jax.model.norms import apply_norm, make_norm

Array = jax.Array


def compute_dtype(cfg: ModelConfig):
    return jnp.dtype(cfg.dtype.value)


def norm_layer(cfg: ModelConfig, rngs: nnx.Rngs) -> nnx.Module:
    """The norm over d_model that `cfg.norm_type` names (LayerNorm, RMSNorm, DyT or BatchNorm)."""
    return make_norm(cfg.norm_type, cfg.d_model, dtype=compute_dtype(cfg), rngs=rngs,
                     epsilon=cfg.norm_eps)


# `model.activation`: exact GELU and its tanh form differ by up to ~1e-3 per unit, enough to
# move a trained BERT's hidden states past 1e-4 (tests/model/test_pretrained.py plants one).
ACTIVATIONS = {
    Activation.RELU: jax.nn.relu,
    Activation.GELU: lambda x: jax.nn.gelu(x, approximate=False),  # x·Φ(x), Φ through erf
    Activation.GELU_TANH: lambda x: jax.nn.gelu(x, approximate=True),
}


def dropout(x: Array, rate: float, key: Optional[Array]) -> Array:
    """Inverted dropout; key=None (evaluation) or rate=0 is the identity."""
    if key is None or rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0).astype(x.dtype)


class FeedForward(nnx.Module):
    """FFN(x) = act(x·W1 + b1)·W2 + b2, applied to each position alone; act is
    `model.activation` (ReLU, max(0, ·), by default)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        dtype = compute_dtype(cfg)
        self.hidden = Dense(cfg.d_model, cfg.d_ff, matmul=cfg.dense_matmul, dtype=dtype, rngs=rngs)
        self.output = Dense(cfg.d_ff, cfg.d_model, matmul=cfg.dense_matmul, dtype=dtype, rngs=rngs)
        self.rate = cfg.dropout
        self.activation = cfg.activation  # an enum: a static, hashable attribute

    def __call__(self, x: Array, key: Optional[Array] = None, hooks=None) -> Array:
        """x [B, T, D] -> [B, T, D]; hook point `hidden`: act(x·W1 + b1) [B, T, d_ff]."""
        hidden = tap(hooks, "hidden", ACTIVATIONS[self.activation](self.hidden(x)))
        return self.output(dropout(hidden, self.rate, key))  # [B, T, D]


# Which kernels each scheme draws × its factor (`branch_scales`): the last layer of each branch
# for depth_scaled; for deepnet every kernel but W_q and W_k, which only shape the weights.
SCALED_KERNELS = {
    BranchInit.DEPTH_SCALED: ("attention.out", "feed_forward.output"),
    BranchInit.DEEPNET: ("attention.value", "attention.out", "feed_forward.hidden",
                         "feed_forward.output"),
}


def branch_scales(cfg: ModelConfig) -> tuple[float, float]:
    """(α on the residual x, factor on the SCALED_KERNELS' draws) of cfg.branch_init."""
    layers = cfg.num_layers
    if cfg.branch_init is BranchInit.DEPTH_SCALED:
        return 1.0, (2 * layers) ** -0.5  # 1/√N over the N = 2L residual sums
    if cfg.branch_init is BranchInit.DEEPNET:
        return (2 * layers) ** 0.25, (8 * layers) ** -0.25  # encoder- or decoder-only N = L
    return 1.0, 1.0


class Block(nnx.Module):
    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.attention = MultiHeadAttention(
            cfg.d_model, cfg.num_heads, head_dim=cfg.d_k, attn_scale=cfg.attn_scale,
            qk_norm=cfg.qk_norm, qk_init_scale=cfg.qk_init_scale, implementation=cfg.attention,
            dtype=compute_dtype(cfg), dense_matmul=cfg.dense_matmul, rngs=rngs)
        self.feed_forward = FeedForward(cfg, rngs=rngs)
        pre, post = cfg.norm is Norm.PRE, cfg.norm is Norm.POST
        self.norm_before_attention = norm_layer(cfg, rngs) if pre else None
        self.norm_after_attention = norm_layer(cfg, rngs) if post else None
        self.norm_before_feed_forward = norm_layer(cfg, rngs) if pre else None
        self.norm_after_feed_forward = norm_layer(cfg, rngs) if post else None
        self.residual = cfg.residual
        self.rate = cfg.dropout
        self.skip, kernel_factor = branch_scales(cfg)  # skip: DeepNet's α on x, else 1
        for path in SCALED_KERNELS.get(cfg.branch_init, ()):  # the same draws, × the factor
            owner, layer = path.split(".")
            kernel = getattr(getattr(self, owner), layer).kernel
            kernel[...] = kernel_factor * kernel[...]
        rezero = cfg.branch_init is BranchInit.REZERO  # ReZero's α: one scalar per branch, from 0
        self.attention_gate = nnx.Param(jnp.zeros((), jnp.float32)) if rezero else None
        self.feed_forward_gate = nnx.Param(jnp.zeros((), jnp.float32)) if rezero else None

    def __call__(self, x: Array, *, mask: Optional[Array | Mask] = None,
                 bias: Optional[Array] = None, qk_transform: Optional[QKTransform] = None,
                 key: Optional[Array] = None, probe: bool = False,
                 token_mask: Optional[Array] = None, head_mask: Optional[Array] = None,
                 hooks=None) -> tuple[Array, Optional[AttentionProbe]]:
        """x [B, T, D], token_mask [B, T] (True = real token), head_mask [H] (0 = head knocked
        out) -> ([B, T, D], attention probe if asked).

        Hook points: `resid_pre` (x), `ln1.out` / `ln2.out` (the attention's and the
        feed-forward's norm, wherever `model.norm` puts it), `attn.*` (`MultiHeadAttention`),
        `attn.out` (the attention branch as added: after W_o and dropout), `resid_mid`,
        `mlp.hidden`, `mlp.out` (the feed-forward branch as added), `resid_post`."""
        keys = [None] * 3 if key is None else list(jax.random.split(key, 3))
        norm = functools.partial(self.tap_norm, token_mask=token_mask, hooks=hooks)
        x = tap(hooks, "resid_pre", x)
        y, found = self.attention(norm(self.norm_before_attention, x, "ln1.out"), mask=mask,
                                  bias=bias, qk_transform=qk_transform, probe=probe,
                                  head_mask=head_mask, hooks=scope(hooks, "attn"))
        y = tap(hooks, "attn.out", dropout(y, self.rate, keys[0]))
        x = self.add_branch(x, y, self.attention_gate)
        x = tap(hooks, "resid_mid", norm(self.norm_after_attention, x, "ln1.out"))

        y = self.feed_forward(norm(self.norm_before_feed_forward, x, "ln2.out"), keys[1],
                              hooks=scope(hooks, "mlp"))
        y = tap(hooks, "mlp.out", dropout(y, self.rate, keys[2]))
        x = self.add_branch(x, y, self.feed_forward_gate)
        x = tap(hooks, "resid_post", norm(self.norm_after_feed_forward, x, "ln2.out"))
        return x, found

    @staticmethod
    def tap_norm(module: Optional[nnx.Module], x: Array, name: str, *,
                 token_mask: Optional[Array], hooks) -> Array:
        """The norm `module` of x (x itself without one), hooked as `name` where it exists."""
        if module is None:
            return x
        return tap(hooks, name, apply_norm(module, x, token_mask))

    def add_branch(self, x: Array, y: Array, gate: Optional[nnx.Param]) -> Array:
        """The residual sum of x and a branch's output y [B, T, D]: x + y, y alone without the
        residual, ReZero's x + α·y, DeepNet's α·x + y."""
        y = y if gate is None else gate[...].astype(y.dtype) * y  # ReZero's α, learned from 0
        if not self.residual:  # the residual switch
            return y
        return x + y if self.skip == 1.0 else self.skip * x + y  # DeepNet's α on x
