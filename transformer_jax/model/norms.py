"""What sits where a block normalizes (`model.norm_type`), apart from where it sits (`model.norm`).

    layernorm:  γ·(x − mean(x))/√(var(x) + ε) + β          (Ba et al. 2016; the paper's choice)
    rmsnorm:    γ·x/√(mean(x²) + ε)                         (Zhang & Sennrich 2019: no centring, no β)
    dyt:        γ·tanh(α·x) + β, α a learnable scalar       (Zhu et al. 2025: no statistics at all)
    batchnorm:  γ·(x − μ_c)/√(σ²_c + ε) + β, μ_c, σ²_c of channel c over batch × length
                                                           (Ioffe & Szegedy 2015)

Dynamic Tanh asks whether a norm's job is the statistics or only the squashing: it looks at no
other channel and no other token, yet Zhu et al. report it matches LayerNorm in Pre-LN stacks.
`make_norm` is the one table from `NormType` to a module; blocks and the final norm use it,
through `apply_norm`, which hands BatchNorm the token mask.

BatchNorm is the one norm that looks across tokens and examples: each channel is normalized by
its mean and variance over every real token of the batch (padding excluded), so a token's output
depends on the rest of the batch while training. Evaluation uses running statistics instead
(exponential moving averages, momentum as PyTorch's default), kept as `nnx.BatchStat` beside
the parameters. A module is in evaluation mode as built; the train step switches it with
`nnx.view(model, use_running_average=False)` (`TRAINING`). In a causal decoder the batch
statistics also mix in later positions' values: a small leak of the future while training.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.config import NormType

Array = jax.Array
NORM_EPSILON = 1e-5  # PyTorch's default for LayerNorm; the parity tests compare against it
DYT_ALPHA_INIT = 0.5  # Zhu et al. 2025's default for non-LLM models
BATCHNORM_MOMENTUM = 0.9  # running = 0.9·running + 0.1·batch: PyTorch's default (its momentum=0.1)
TRAINING = dict(use_running_average=False, raise_if_not_found=False)  # nnx.view(model, **TRAINING)


class DynamicTanh(nnx.Module):
    """DyT(x) = γ·tanh(α·x) + β over the last axis: α a learnable scalar, γ (scale) and β (bias)
    per channel, initialized to α_0, 1 and 0. Parameters stay float32; the math runs in `dtype`."""

    def __init__(self, num_features: int, *, alpha_init: float = DYT_ALPHA_INIT, dtype=None,
                 rngs: nnx.Rngs):
        del rngs  # deterministic initialization; the argument keeps the norms interchangeable
        self.alpha = nnx.Param(jnp.full((), alpha_init, jnp.float32))
        self.scale = nnx.Param(jnp.ones((num_features,), jnp.float32))
        self.bias = nnx.Param(jnp.zeros((num_features,), jnp.float32))
        self.dtype = dtype

    def __call__(self, x: Array) -> Array:
        dtype = self.dtype or x.dtype
        alpha, scale, bias = (p[...].astype(dtype) for p in (self.alpha, self.scale, self.bias))
        return scale * jnp.tanh(alpha * x.astype(dtype)) + bias  # [..., num_features]


class BatchNorm(nnx.BatchNorm):
    """Flax's BatchNorm over every axis but the last, with `token_mask` [B, T] (True = real
    token) choosing the tokens the statistics come from. Two-pass variance (exact, like
    `qk_norm`); evaluation mode (running statistics) as built."""

    def __init__(self, num_features: int, *, dtype=None, epsilon: float = NORM_EPSILON,
                 rngs: nnx.Rngs):
        super().__init__(num_features, use_running_average=True, momentum=BATCHNORM_MOMENTUM,
                         epsilon=epsilon, dtype=dtype, use_fast_variance=False, rngs=rngs)

    def __call__(self, x: Array, token_mask: Optional[Array] = None) -> Array:
        mask = None if token_mask is None else token_mask[..., None]  # [B, T, 1]
        if mask is None or self.use_running_average:
            return super().__call__(x, mask=mask)  # [B, T, num_features]
        # A batch of padding only has no statistics (0/0): the running ones stay as they were.
        kept, any_real = (self.mean[...], self.var[...]), jnp.any(token_mask)
        y = super().__call__(x, mask=mask)
        self.mean[...] = jnp.where(any_real, self.mean[...], kept[0])
        self.var[...] = jnp.where(any_real, self.var[...], kept[1])
        return jnp.where(any_real, y, 0.0)  # [B, T, num_features]


def make_norm(norm_type: NormType, num_features: int, *, dtype, rngs: nnx.Rngs,
              epsilon: float = NORM_EPSILON) -> nnx.Module:
    """The norm module for `norm_type` over the last axis of size `num_features`; `epsilon` is
    ε under the square root (DyT has none)."""
    if norm_type is NormType.LAYERNORM:  # two-pass variance: E[x²] − E[x]² (Flax's fast
        # default) cancels badly on rows whose mean is large against their spread, as deep
        # residual streams grow them (mean 1e3, std 1: 0.3 off; two-pass: float32 rounding)
        return nnx.LayerNorm(num_features, epsilon=epsilon, dtype=dtype,
                             use_fast_variance=False, rngs=rngs)
    if norm_type is NormType.RMSNORM:
        return nnx.RMSNorm(num_features, epsilon=epsilon, dtype=dtype, rngs=rngs)
    if norm_type is NormType.DYT:
        return DynamicTanh(num_features, dtype=dtype, rngs=rngs)
    if norm_type is NormType.BATCHNORM:
        return BatchNorm(num_features, dtype=dtype, epsilon=epsilon, rngs=rngs)
    raise ValueError(f"no norm for {norm_type!r}")  # ModelConfig only admits NormType members


def apply_norm(norm: Optional[nnx.Module], x: Array, token_mask: Optional[Array] = None
               ) -> Array:
    """norm(x) [B, T, D], or x where there is no norm; BatchNorm also learns which tokens are
    real (token_mask [B, T]), the other norms look at one token only."""
    if norm is None:
        return x
    return norm(x, token_mask) if isinstance(norm, BatchNorm) else norm(x)


def qk_norm(head_dim: int, *, dtype, rngs: nnx.Rngs) -> nnx.LayerNorm:
    """QK-norm's LayerNorm over head_dim (Dehghani et al. 2023, ViT-22B), one γ per head_dim
    channel shared by the heads, no β: then ‖γ⊙q̂‖² ≤ max(γ)²·head_dim bounds every logit by
    scale·max(γ_q)·max(γ_k)·head_dim whatever the input's scale. Exact two-pass variance: the
    input may be large (that is the point), where E[x²] − E[x]² cancels badly."""
    return nnx.LayerNorm(head_dim, epsilon=NORM_EPSILON, dtype=dtype, use_bias=False,
                         use_fast_variance=False, rngs=rngs)
