"""What sits where a block normalizes (`model.norm_type`), apart from where it sits (`model.norm`).

    layernorm:  γ·(x − mean(x))/√(var(x) + ε) + β          (Ba et al. 2016; the paper's choice)
    rmsnorm:    γ·x/√(mean(x²) + ε)                         (Zhang & Sennrich 2019: no centring, no β)
    dyt:        γ·tanh(α·x) + β, α a learnable scalar       (Zhu et al. 2025: no statistics at all)

Dynamic Tanh asks whether a norm's job is the statistics or only the squashing: it looks at no
other channel and no other token, yet Zhu et al. report it matches LayerNorm in Pre-LN stacks.
`make_norm` is the one table from `NormType` to a module; blocks and the final norm use it.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from transformer_jax.config import NormType

Array = jax.Array
NORM_EPSILON = 1e-5  # PyTorch's default for LayerNorm; the parity tests compare against it
DYT_ALPHA_INIT = 0.5  # Zhu et al. 2025's default for non-LLM models


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


def make_norm(norm_type: NormType, num_features: int, *, dtype, rngs: nnx.Rngs) -> nnx.Module:
    """The norm module for `norm_type` over the last axis of size `num_features`."""
    if norm_type is NormType.LAYERNORM:
        return nnx.LayerNorm(num_features, epsilon=NORM_EPSILON, dtype=dtype, rngs=rngs)
    if norm_type is NormType.RMSNORM:
        return nnx.RMSNorm(num_features, epsilon=NORM_EPSILON, dtype=dtype, rngs=rngs)
    if norm_type is NormType.DYT:
        return DynamicTanh(num_features, dtype=dtype, rngs=rngs)
    raise ValueError(f"no norm for {norm_type!r}")  # ModelConfig only admits NormType members


def qk_norm(head_dim: int, *, dtype, rngs: nnx.Rngs) -> nnx.LayerNorm:
    """QK-norm's LayerNorm over head_dim (Dehghani et al. 2023, ViT-22B), one γ per head_dim
    channel shared by the heads, no β: then ‖γ⊙q̂‖² ≤ max(γ)²·head_dim bounds every logit by
    scale·max(γ_q)·max(γ_k)·head_dim whatever the input's scale. Exact two-pass variance: the
    input may be large (that is the point), where E[x²] − E[x]² cancels badly."""
    return nnx.LayerNorm(head_dim, epsilon=NORM_EPSILON, dtype=dtype, use_bias=False,
                         use_fast_variance=False, rngs=rngs)
