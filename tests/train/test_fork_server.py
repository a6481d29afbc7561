"""The tests' fork server (tests/fork_server.py) runs a command as a fresh interpreter would."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import fork_server
from helpers_train import REPO, SYNTHETIC, error_lines, main_args, main_command


def test_a_command_gives_what_a_fresh_process_gives(tmp_path):
    """Exit status, stdout and stderr of a bad command line, from a fork and from a fresh
    `python -m`; the fork sees the environment as it is when it starts."""
    command = main_command(["--config=configs/synthetic.py:tiny", "--config.model.position=nope",
                            f"--workdir={tmp_path / 'run'}"])
    fresh = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    forked = fork_server.run_command(command)
    assert fresh.returncode == 2
    assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout)
    # the same stderr, but for the time and thread id that start an absl log line
    assert error_lines(forked.stderr) == error_lines(fresh.stderr)
    assert len(forked.stderr.splitlines()) == len(fresh.stderr.splitlines())
    assert not (tmp_path / "run").exists()


def test_a_started_command_is_a_group_of_its_own_and_dies_of_its_signal(tmp_path, tj_data_dir):
    run = fork_server.start_command(main_command(main_args(
        f"{SYNTHETIC}:tiny", tmp_path / "run", tj_data_dir, {"train.num_steps": 100_000})),
        tmp_path / "log")
    deadline = time.monotonic() + 30
    while os.getpgid(run.pid) != run.pid:  # its first act, as a shell's foreground job
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.01)
    assert run.poll() is None
    run.send_signal(signal.SIGKILL)
    assert run.wait(timeout=30) == -signal.SIGKILL
    run.kill()  # once it has exited, a signal goes nowhere
    assert run.returncode == -signal.SIGKILL
