"""`transformer_jax.blocks` is `transformer_jax.model.blocks`: this name stays importable."""
import sys

from transformer_jax.model import blocks

sys.modules[__name__] = blocks
