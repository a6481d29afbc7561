"""`scripts/large_studies.sh`: the GPU's resumable run of every study, checked on the CPU."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "scripts" / "large_studies.sh")


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable)
    return subprocess.run([SCRIPT, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_large_runs_every_study_at_size_large_with_one_job(tmp_path):
    proc = _run("--dry_run", str(tmp_path / "w"))
    assert proc.returncode == 0, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    for part in ("-m transformer_jax.sweep", "--experiment=experiments/", "--size=large",
                 "--jobs=1", "--suite=main", f"--workdir={tmp_path / 'w'}", "after 480 s"):
        assert part in line, (part, line)
    assert not (tmp_path / "w").exists()
    proc = _run("--dry_run", "--suite=lm", str(tmp_path / "w"))  # the real-text studies
    assert proc.returncode == 0 and "--suite=lm" in proc.stderr.strip().splitlines()[-1]


def _start(log_path: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHON=sys.executable)
    with open(log_path, "w") as log:
        return subprocess.Popen([SCRIPT, *args], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                env=env)


def _time_is_up(script: subprocess.Popen) -> None:
    """What the limit does, now: SIGALRM to the script's `timeout`, which then sends SIGTERM to
    the sweep and exits 124 as when its own alarm goes off."""
    import psutil

    timeouts = [p for p in psutil.Process(script.pid).children() if p.name() == "timeout"]
    assert len(timeouts) == 1, timeouts
    timeouts[0].send_signal(signal.SIGALRM)


def _runs(workdir: Path, state: str) -> dict[Path, dict]:
    from transformer_jax.train import workdir as workdir_lib

    found = {d: workdir_lib.read_status(d) for d in sorted(workdir.glob("*/*/seed_*"))}
    return {d: s for d, s in found.items() if s and s["state"] == state}


def _training(workdir: Path) -> bool:
    """Whether a run is inside its training loop: it has logged its first evaluation as a
    scalar (a tiny study's run evaluates every tenth of its steps), and it has not ended. Read as
    TensorBoard reads it: the tag alone is in the event file from the start, in the hparams'
    list of metrics."""
    from transformer_jax.train.summaries import read_scalars

    return any(read_scalars(str(d)).get("eval/loss") for d in _runs(workdir, "running"))


def test_smoke_stops_at_the_limit_with_a_checkpoint_and_resumes(tmp_path):
    """--smoke trains the tiny studies on the CPU. The limit comes (made to come while a run
    trains): the sweep gets SIGTERM, the training run saves a checkpoint and stops as
    preempted, the script exits 124 and says how to resume; the same command resumes that run
    from that checkpoint."""
    from helpers_train import checkpoint_steps, sweep_logs, wait_for

    workdir, log = tmp_path / "studies", tmp_path / "first.log"
    script = _start(log, "--smoke", "--limit=900", "--grace=60", str(workdir))
    wait_for(lambda: _training(workdir), script, "a run past its first evaluation",
             log_path=log)
    _time_is_up(script)
    assert script.wait(timeout=120) == 124, log.read_text()[-3000:]
    text = log.read_text()
    assert "--size=tiny" in text
    assert "stopped at the 900 s limit; rerun the same command to resume" in text
    assert "Traceback" not in text, text[-3000:]
    stopped = _runs(workdir, "preempted")
    assert stopped and not _runs(workdir, "running"), log.read_text()[-3000:]
    steps = {s["step"] for s in stopped.values()}  # the seeds of a variant train together
    assert len(steps) == 1, stopped
    step = steps.pop()
    assert step > 0 and all(step in checkpoint_steps(d) for d in stopped), stopped

    log = tmp_path / "second.log"
    script = _start(log, "--smoke", "--limit=900", "--grace=60", str(workdir))
    expected = [f"resuming {d} from step {step}" for d in stopped]
    wait_for(lambda: all(e in sweep_logs(log.read_text(), d.parents[1]) for e, d in
                         zip(expected, stopped)), script, "the stopped runs resuming",
             log_path=log)
    _time_is_up(script)
    assert script.wait(timeout=120) == 124, log.read_text()[-3000:]


def test_bad_options_are_one_line_errors():
    proc = _run("--limit=soon")
    assert proc.returncode == 2 and "must be whole seconds" in proc.stderr
    proc = _run("--size=large")
    assert proc.returncode == 2 and "unknown option --size=large" in proc.stderr
