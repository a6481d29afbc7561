"""studies/rundir.py, the one seam between studies/ and a run directory: what a RunRecord reads is
what the trainer wrote (train/workdir.py)."""
from __future__ import annotations

import json

from transformer_jax.studies import rundir
from transformer_jax.train import workdir


def test_a_run_record_reads_the_status_and_config_the_trainer_wrote(tmp_path):
    run = rundir.RunRecord.of(tmp_path, "sinusoidal", 2)
    assert run.path == tmp_path / "sinusoidal" / "seed_2"
    assert run.status() is None and run.state() is None and not run.ended()
    run.path.mkdir(parents=True)
    workdir.write_status(run.path, workdir.PREEMPTED, 40)
    assert run.state() == rundir.PREEMPTED and not run.ended()
    workdir.write_status(run.path, workdir.FINISHED, 100)
    assert run.status()["step"] == 100 and run.state() == rundir.FINISHED
    assert run.ended() and run.ended(100) and not run.ended(200)  # a longer budget goes on
    workdir.write_status(run.path, workdir.DIVERGED, 7)
    assert run.ended(200)  # a diverged run has ended whatever the budget
    config = {"model": {"d_model": 16}}
    run.config_file.write_text(json.dumps(config))
    assert json.loads(run.config_file.read_text()) == config
    assert run.config_file.name == workdir.CONFIG_FILE
