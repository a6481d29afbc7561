"""`transformer_jax.probes` is `transformer_jax.studies.analysis.probes`: this name stays importable."""
import sys

from transformer_jax.studies.analysis import probes

sys.modules[__name__] = probes
