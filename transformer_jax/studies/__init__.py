"""The studies layer: what a study is, how it is judged, run, rendered and recorded.

Experiment files import from `transformer_jax.studies.study` (its old name,
`transformer_jax.study`, warned for a release and went in 0.2.0: docs/changelog.md). The rest
is in rooms, one package per job, each importing only from the rooms below it (.importlinter):

- `run`: the sweep and evaluation-only studies (what runs a study);
- `render`: pages, the verdict's words, figures and TensorBoard's comparison (what people read);
- `records`: the verdict record, provenance, pre-registration and the design's history, a
  suite's time, the export (what a results file holds and where it came from);
- `design`: loading experiment files, the suites, and what a design's fingerprint holds;
- `judge`: what turns per-seed values into verdicts and counts them (the statistics, an
  expectation's judgement, Holm's correction, a tuned arm's choice of candidate), the lowest
  room; the judging rules' version is tied to a digest of it, read whole (judging_rules,
  judging_digest, beside it: the table holds the room's digest);
- `analysis`: what a study measures beyond its curves (probes, head roles, knock-outs);
- `rundir` (a module, below every room): the one seam to a run's directory (`RunRecord`: its
  status, saved config; the trainer's format is train/workdir.py). The report, the plateau
  decision and two analyses still read it themselves: their code is measured, and they move in
  the batch that re-runs every suite (.importlinter's run-seam contract lists them).

Still flat: the design helpers experiment files call (tuning, grid, deep_arms, plateau), what
several rooms read of a run (convergence, run_values, checks), the report of a study's runs
and what publishes or re-judges it.
"""
