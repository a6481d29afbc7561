"""The studies layer: what a study is, its statistics, the sweep that runs it and its reports.

Experiment files import from `transformer_jax.studies.study` (its old name,
`transformer_jax.study`, still works for one release and warns).
"""
