"""`transformer_jax.study` is `transformer_jax.studies.study`: this name stays importable."""
import sys

from transformer_jax.studies import study

sys.modules[__name__] = study
