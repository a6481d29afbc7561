"""A run killed after it logged steps past its last checkpoint: resumed, its curves read back as
TensorBoard shows them hold every step exactly once, with the values of an uninterrupted run
(the resumed writer purges what the killed process logged after the checkpoint).

The kill is simulated, which makes the case certain rather than a race: a run logs every step
to the end; then its last checkpoint is removed and its status set back to running, which is
what a kill -9 after the step-20 events were flushed and before checkpoint 20 was finalized
leaves on disk.
"""
from __future__ import annotations

import shutil

import pytest

from conftest import ORBAX_LATE_CLOSE
from helpers_train import checkpoint_steps, tiny_config

pytestmark = [pytest.mark.usefixtures("compilation_cache"), ORBAX_LATE_CLOSE]

CHECKPOINT, STEPS = 10, 20  # the tiny config's 20 steps, a checkpoint at 10 (and 20)
UNLOGGED = {"train/steps_per_sec"}  # wall-clock: differs between any two runs


def curves(workdir) -> dict[str, list[tuple[int, float]]]:
    from transformer_jax.train import summaries

    return {tag: points for tag, points in summaries.read_scalars(str(workdir)).items()
            if tag not in UNLOGGED}


def test_resumed_curves_hold_each_step_once_and_equal_the_uninterrupted_run(tmp_path,
                                                                          tj_data_dir):
    from transformer_jax import train
    from transformer_jax.train import workdir as workdir_lib

    config = tiny_config(overrides={"data.data_dir": tj_data_dir, "train.log_every": 1,
                                    "train.eval_every": 5, "train.checkpoint_every": CHECKPOINT})
    assert config.train.num_steps == STEPS
    workdir = tmp_path / "run"
    assert train.train_and_evaluate(config, str(workdir))["state"] == "finished"
    uninterrupted = curves(workdir)
    assert [s for s, _ in uninterrupted["train/loss"]] == list(range(1, STEPS + 1))
    assert [s for s, _ in uninterrupted["eval/loss"]] == [5, 10, 15, 20]

    # What a kill after step 20's events and before checkpoint 20 leaves behind:
    assert checkpoint_steps(workdir) == [CHECKPOINT, STEPS]
    shutil.rmtree(workdir / "checkpoints" / str(STEPS))
    workdir_lib.write_status(workdir, "running", CHECKPOINT)

    status = train.train_and_evaluate(config, str(workdir))
    assert status["state"] == "finished" and status["step"] == STEPS
    resumed = curves(workdir)
    assert set(resumed) == set(uninterrupted)
    for tag, points in resumed.items():
        steps = [s for s, _ in points]
        assert steps == sorted(set(steps)), f"{tag}: steps logged twice or out of order: {steps}"
        assert points == uninterrupted[tag], tag
