"""The design room: how a study's design is found, loaded and fingerprinted. Experiment files and
the suites they belong to (loading, catalog), and what the fingerprint holds beside the design's
own fields: the code that computes its judged values (measured_code) and what its analyses judge
(judged_code), both read as syntax trees (syntax). The experiment-file API itself,
`transformer_jax.studies.study`, stays where experiment files import it.
"""
