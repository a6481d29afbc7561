"""`scripts/large_studies.sh`: the GPU's resumable run of every study, checked on the CPU."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
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


def test_smoke_stops_at_the_limit_and_says_how_to_resume(tmp_path):
    """--smoke trains the tiny studies on the CPU; at the limit the sweep gets SIGTERM (a run in
    its training loop saves a checkpoint) and the script exits 124, resumable (~20 s)."""
    workdir = tmp_path / "studies"
    proc = _run("--smoke", "--limit=12", "--grace=10", str(workdir), timeout=90)
    assert proc.returncode == 124, proc.stderr[-3000:]
    assert "--size=tiny" in proc.stderr
    assert "stopped at the 12 s limit; rerun the same command to resume" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_bad_options_are_one_line_errors():
    proc = _run("--limit=soon")
    assert proc.returncode == 2 and "must be whole seconds" in proc.stderr
    proc = _run("--size=large")
    assert proc.returncode == 2 and "unknown option --size=large" in proc.stderr
