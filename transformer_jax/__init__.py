"""transformer_jax: every idea of the Transformer as a small, tested Flax (NNX) module.

    from transformer_jax import scaled_dot_product_attention, MultiHeadAttention, Transformer
"""
from transformer_jax._version import __version__
from transformer_jax.model.attention import (AttentionProbe, Mask, MultiHeadAttention,
                                             fused_attention, scaled_dot_product_attention)
from transformer_jax.model.blocks import Block, FeedForward
from transformer_jax.config import (Activation, Arch, AttentionImpl, ConfigError, DenseMatmul,
                                    DType, Head, ModelConfig, Norm, NormType, Position)
from transformer_jax.model.transformer import (Transformer, attention_mask, count_params,
                                               structured_attention_mask)
from transformer_jax.model.norms import DynamicTanh, make_norm
from transformer_jax.runtime.compile_cache import enable_compilation_cache

__all__ = [
    "Activation", "Arch", "AttentionImpl", "AttentionProbe", "Block", "ConfigError", "DenseMatmul",
    "DType", "DynamicTanh", "FeedForward", "Head", "Mask", "ModelConfig", "MultiHeadAttention",
    "Norm", "NormType", "Position", "Transformer", "attention_mask", "count_params",
    "enable_compilation_cache", "fused_attention", "make_norm", "scaled_dot_product_attention",
    "structured_attention_mask",
]
