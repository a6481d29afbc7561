"""The explainer's arithmetic on a real example: `python -m transformer_jax.trace`."""
