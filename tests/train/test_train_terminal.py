"""What one training shows on the terminal: a resumed run says where it picks up, a run that
had already ended says it trained nothing, and the outcome line and durations read as meant."""
from __future__ import annotations

import io
import shutil

import pytest

from conftest import ORBAX_LATE_CLOSE
from helpers_train import checkpoint_steps, error_lines, run_main

pytestmark = [pytest.mark.usefixtures("compilation_cache"), ORBAX_LATE_CLOSE]

STEPS = 20  # num_steps of the `tiny` size, checkpointed at 10 and 20


@pytest.mark.parametrize("seconds, shown", [(0, "0s"), (59.4, "59s"), (59.6, "1m00s"),
                                            (187, "3m07s"), (3720, "1h02m")])
def test_duration(seconds, shown):
    from transformer_jax.train import terminal

    assert terminal.duration(seconds) == shown


def test_outcome_of_a_run_that_trained_and_of_one_that_had_ended():
    from transformer_jax.train import terminal

    finished = {"state": "finished", "step": 20, "seconds": 19.2, "eval": {"loss": 1.23456}}
    assert terminal.outcome(finished) == "finished at step 20 in 19s: loss 1.235"
    assert terminal.outcome(finished, already_ended=True) == (
        "already finished at step 20; nothing to do (rerun with --extend_to=N to train on)")
    diverged = {"state": "diverged", "step": 7, "loss": float("nan")}
    assert terminal.outcome(diverged) == "diverged at step 7"
    assert terminal.outcome(diverged, already_ended=True) == (
        "already diverged at step 7; nothing to do")  # extending cannot help a diverged run


def test_start_records_the_step_and_announces_only_a_resume():
    from transformer_jax.train import terminal

    out = io.StringIO()
    start = terminal.Start(out)
    assert start.step is None  # never called: nothing was trained
    start(0, 20)
    assert start.step == 0 and out.getvalue() == ""
    start(10, 20)
    assert start.step == 10 and out.getvalue() == "resuming from step 10 of 20\n"


def test_a_resumed_run_says_so_on_the_terminal(finished_tiny_run, tmp_path):
    """The finished run, copied and set back to what a kill after checkpoint 10 leaves (no
    checkpoint 20, status running): main, with the terminal's default verbosity, prints one
    line naming the step it resumes from and the total, then the outcome of its training."""
    from transformer_jax.train import workdir as workdir_lib

    args, proc, workdir = finished_tiny_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = tmp_path / "run"
    shutil.copytree(workdir, copy)
    shutil.rmtree(copy / "checkpoints" / str(STEPS))
    workdir_lib.write_status(copy, "running", 10)
    args = [f"--workdir={copy}" if a.startswith("--workdir=") else a for a in args]
    resumed = run_main([*args, "--verbosity=-1"])  # after main_command's 0: absl takes the last
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert error_lines(resumed.stderr).count("resuming from step 10 of 20") == 1, resumed.stderr
    assert resumed.stdout.splitlines()[0].startswith(f"finished at step {STEPS} in ")
    assert checkpoint_steps(copy) == [10, STEPS]


def test_extend_to_says_what_it_changed_in_one_plain_line(finished_tiny_run, tmp_path):
    """At the terminal's default verbosity a warning is one plain `warning: ...` line, without
    absl's prefix (level, time, thread, file:line), which the run's train.log keeps."""
    args, proc, workdir = finished_tiny_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    copy = tmp_path / "run"
    shutil.copytree(workdir, copy)
    args = [f"--workdir={copy}" if a.startswith("--workdir=") else a for a in args]
    extended = run_main([*args, "--verbosity=-1", f"--extend_to={STEPS + 4}"])
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert extended.stderr.splitlines()[:2] == [
        f"warning: --extend_to={STEPS + 4}: train.num_steps {STEPS} -> {STEPS + 4}, resuming "
        f"{copy} from step {STEPS} (the learning-rate schedule is recomputed for the new total); "
        f"recorded in {copy / 'config_history.json'}",
        f"resuming from step {STEPS} of {STEPS + 4}"], extended.stderr
    assert "workdir.py:" in next(line for line in (copy / "train.log").read_text().splitlines()
                                 if "--extend_to=" in line)
