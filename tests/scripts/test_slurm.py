"""scripts/slurm/sweep_array.sh: a SLURM array task's environment -> `sweep --shard=i/n`, checked
without SLURM (--dry_run prints the command); two shards started at once on one machine train
disjoint runs of a tiny study, and the --report job assembles all of them."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers_train import REPO, sweep_command

SCRIPT = str(REPO / "scripts" / "slurm" / "sweep_array.sh")


def _env(**slurm: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return {**env, "PYTHON": sys.executable, **slurm}


def _dry(*args: str, **slurm: str) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, "--dry_run", *args], cwd=REPO, capture_output=True, text=True,
                          env=_env(**slurm), timeout=30)


def _command(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("[sweep_array] "), line
    return line


@pytest.mark.parametrize("slurm, shard", [
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0",
      "SLURM_ARRAY_TASK_MAX": "3"}, "2/4"),
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "1", "SLURM_ARRAY_TASK_MIN": "0",
      "SLURM_ARRAY_TASK_MAX": "0"}, "0/1"),
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4"}, "3/4"),
])
def test_array_task_maps_to_its_shard(slurm, shard):
    """sbatch --array=0-3 (task 2), a one-task array, and --array=1-4 on an older SLURM without
    SLURM_ARRAY_TASK_COUNT (task 4 -> shard 3 of 4); the user's flags pass through."""
    line = _command(_dry("--experiment=experiments/positions.py", "--workdir=runs/p", "--jobs=2",
                         **slurm))
    assert line.endswith(f"-m transformer_jax.sweep --shard={shard} "
                         "--experiment=experiments/positions.py --workdir=runs/p --jobs=2"), line
    assert line.split()[1] == sys.executable


def test_report_job_and_bad_arrays():
    assert "--shard=0/1 --workdir=w" in _command(_dry("--report", "--workdir=w"))
    for slurm, message in (
            ({}, "SLURM_ARRAY_TASK_ID is not set"),
            ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0",
              "SLURM_ARRAY_TASK_MAX": "4"}, "use a contiguous --array (e.g. --array=0-2)")):
        proc = _dry("--workdir=w", **slurm)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    proc = _dry("--shard=1/2", "--workdir=w", SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_TASK_COUNT="2")
    assert proc.returncode == 2 and "comes from the array task" in proc.stderr


def test_two_shards_at_once_train_disjoint_runs_and_one_report(tmp_path, tj_data_dir):
    from transformer_jax.train import summaries
    from transformer_jax.train import workdir as workdir_lib

    command, root = sweep_command(tmp_path, tj_data_dir, jobs=1)
    args = command[3:]  # --experiment, --workdir, --jobs
    procs = []
    for task in (0, 1):
        with open(tmp_path / f"task_{task}.log", "w") as log:
            procs.append(subprocess.Popen(
                [SCRIPT, *args], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                env=_env(SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_COUNT="2",
                         SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_MAX="1")))
    codes = [p.wait(timeout=300) for p in procs]
    logs = [(tmp_path / f"task_{t}.log").read_text() for t in (0, 1)]
    assert codes == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    for task, log in enumerate(logs):
        assert f"--shard={task}/2" in log
    runs = sorted(root.glob("*/seed_*"))
    assert [str(r.relative_to(root)) for r in runs] == ["a/seed_0", "a/seed_1", "b/seed_0", "b/seed_1"]
    for run in runs:  # each trained once, by its shard: one event file, every step once
        assert workdir_lib.read_status(run)["state"] == "finished", run
        events = list(run.glob("events.out.tfevents.*"))
        task = int(run.name[-1])  # runs (a,0) (a,1) (b,0) (b,1): shard i/2 has seed i's
        assert len(events) == 1 and events[0].name.endswith(f".{procs[task].pid}"), (run, events)
        assert [s for s, _ in summaries.read_scalars(str(run))["train/loss"]] == list(range(3, 25, 3))
    report = subprocess.run([SCRIPT, "--report", *args], cwd=REPO, capture_output=True, text=True,
                            env=_env(), timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    summary = (root / "summary.csv").read_text().splitlines()
    assert [line.split(",")[:3] for line in summary[1:]] == [
        [v, s, "finished"] for v in "ab" for s in "01"], summary
    assert (root / "verdict.md").exists()
    assert [len(list(run.glob("events.out.tfevents.*"))) for run in runs] == [1] * 4  # no retraining
