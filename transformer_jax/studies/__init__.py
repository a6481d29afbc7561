"""The studies layer: what a study is, its statistics, the sweep that runs it and its reports.

Experiment files import from `transformer_jax.studies.study` (its old name,
`transformer_jax.study`, warned for a release and went in 0.2.0: docs/changelog.md).
"""
