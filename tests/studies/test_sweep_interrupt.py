"""Ctrl-C to a sweep with worker processes (`transformer_jax.studies.run.jobs`), sent as a terminal
sends it: SIGINT to the whole foreground process group (workers ignore it; the sweep relays it).

The first Ctrl-C asks every worker to save a checkpoint and stop (`preempted`), and the sweep
exits 0; the same command resumes each run from that checkpoint. A second Ctrl-C while the
workers are stopping kills them at once and ends the sweep with KeyboardInterrupt (a sweep
killed mid-run resuming from its checkpoints: test_faults).
"""
from __future__ import annotations

import os
import re
import signal

import pytest

from transformer_jax.train import workdir as workdir_lib

from conftest import ORBAX_LATE_CLOSE
from fork_server import Forked, start_command
from helpers_train import (LONG_SWEEP_STEPS, TIMEOUT_S, assert_no_worker_outlives,
                           checkpoint_steps, sweep_command, sweep_logs, sweep_workers, wait_for)

pytestmark = [pytest.mark.usefixtures("compilation_cache"), ORBAX_LATE_CLOSE]

RUNS = [(v, s) for v in ("a", "b") for s in (0, 1)]
RESUMING = re.compile(r"resuming \S+/(\w)/seed_(\d) from step (\d+)")
ASKED = "SIGINT: asking every worker to save a checkpoint and stop"


def _start(command, log_path) -> Forked:
    """The sweep in a process group of its own, as a shell starts a foreground job (every
    command of the fork server is)."""
    return start_command(command, log_path)


def _ctrl_c(process: Forked) -> None:
    os.killpg(process.pid, signal.SIGINT)  # what the terminal does: the whole group


def _resumed(text: str) -> dict[tuple[str, int], int]:
    return {(v, int(s)): int(step) for v, s, step in RESUMING.findall(text)}


def _states(root) -> dict:
    return {(v, s): workdir_lib.read_status(root / v / f"seed_{s}") for v, s in RUNS}


def test_ctrl_c_checkpoints_and_resumes_a_second_ctrl_c_stops_at_once(tmp_path, tj_data_dir):
    # LONG_SWEEP_STEPS (72): neither variant can finish while the other one compiles and
    # reaches its first checkpoint (at 24, a cold compilation cache let one finish first: a
    # race, not a bug)
    command, root = sweep_command(tmp_path, tj_data_dir, jobs=2, steps=LONG_SWEEP_STEPS)

    # 1. One Ctrl-C with both variants training: every run checkpoints, preempted; exit 0.
    log = tmp_path / "first.log"
    process = _start(command, log)
    wait_for(lambda: all(checkpoint_steps(root / v / "seed_0") for v in ("a", "b")), process,
             "a checkpoint in both variants", log_path=log)
    workers = sweep_workers(process)
    assert len(workers) == 2, workers
    _ctrl_c(process)
    assert process.wait(timeout=TIMEOUT_S) == 0, log.read_text()[-3000:]
    assert_no_worker_outlives(workers)
    text = log.read_text()
    assert text.count(ASKED) == 1 and "Traceback" not in text, text[-3000:]
    states = _states(root)
    assert {s["state"] for s in states.values()} == {"preempted"}, states
    preempted = {run: s["step"] for run, s in states.items()}
    for (v, s), step in preempted.items():
        assert step in checkpoint_steps(root / v / f"seed_{s}"), (v, s, step)

    # 2. The same command resumes every run from its checkpoint; Ctrl-C twice while it trains:
    #    the second kills the workers at once, the sweep ends with KeyboardInterrupt.
    log = tmp_path / "second.log"
    process = _start(command, log)
    wait_for(lambda: len(_resumed(sweep_logs(log.read_text(), root))) == len(RUNS), process,
             "every run resuming", log_path=log)
    assert _resumed(sweep_logs(log.read_text(), root)) == preempted
    workers = sweep_workers(process)
    _ctrl_c(process)
    wait_for(lambda: ASKED in log.read_text(), process, "the first Ctrl-C's warning",
             log_path=log)
    _ctrl_c(process)
    code = process.wait(timeout=TIMEOUT_S)
    assert_no_worker_outlives(workers)
    text = log.read_text()
    assert code != 0 and "KeyboardInterrupt" in text, (code, text[-3000:])
    assert text.count(ASKED) == 1, text[-3000:]  # the second Ctrl-C did not ask again
    assert not (root / "summary.csv").exists()  # the study did not end

