"""`transformer_jax.norms` is `transformer_jax.model.norms`: this name stays importable."""
import sys

from transformer_jax.model import norms

sys.modules[__name__] = norms
