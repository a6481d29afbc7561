"""The run room: what runs a study. The sweep (`python -m transformer_jax.sweep`: sweep, plan,
schedule, jobs, and the terminal it reports to) and evaluation-only studies
(`python -m transformer_jax.studies.run.evaluate`). Nothing below it imports it.
"""
