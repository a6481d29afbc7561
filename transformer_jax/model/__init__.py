"""The model layer: attention, positions, norms, blocks and the Transformer. Imports nothing above it.

    from transformer_jax.model import Transformer
"""
from transformer_jax.model.transformer import (Transformer, attention_mask, count_params,
                                               structured_attention_mask)

__all__ = ["Transformer", "attention_mask", "count_params", "structured_attention_mask"]
