"""`transformer_jax.defaults` is `transformer_jax.train.defaults`: this name stays importable."""
import sys

from transformer_jax.train import defaults

sys.modules[__name__] = defaults
