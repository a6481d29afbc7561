"""`transformer_jax.positions` is `transformer_jax.model.positions`: this name stays importable."""
import sys

from transformer_jax.model import positions

sys.modules[__name__] = positions
