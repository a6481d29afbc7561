"""`transformer_jax.attention` is `transformer_jax.model.attention`: this name stays importable."""
import sys

from transformer_jax.model import attention

sys.modules[__name__] = attention
