""".ci/run runs the whole suite by README's test command, prints its wall time and its ten
slowest tests, and fails when the suite fails (pytest's exit status is its own)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from test_docs import README, ROOT, fenced, section

CI_RUN = ROOT / ".ci" / "run"


def readme_test_command() -> str:
    block = fenced(section(README.read_text(), "## The two commands"), "bash")[0]
    [line] = [line for line in block.splitlines() if "# the test suite" in line]
    return line.split("#")[0].strip()


def test_ci_runs_the_readme_test_command_with_the_ten_slowest_tests():
    command = readme_test_command()
    assert command == "scripts/test.sh"
    ran = [line.strip() for line in CI_RUN.read_text().splitlines()
           if line.strip().startswith("scripts/")]
    assert ran == [command], ran  # the README's command as README shows it, on a line of its own


@pytest.mark.parametrize("code", [0, 3])
def test_ci_prints_the_wall_time_and_passes_the_suites_exit_status_on(tmp_path, code):
    """.ci/run in a checkout whose scripts/test.sh is a stand-in that exits with `code`."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(CI_RUN, tmp_path / ".ci" / "run")
    (tmp_path / "scripts").mkdir()
    stand_in = tmp_path / "scripts" / "test.sh"
    stand_in.write_text(f'#!/usr/bin/env bash\necho "pytest[$*] $PYTEST_ADDOPTS"\nexit {code}\n')
    stand_in.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == code, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "pytest[] --durations=10"  # no argument; pytest reads the variable
    assert re.fullmatch(rf"\[ci\] the suite took 0 min \d+ s; exit status {code}",
                        lines[-1]), lines
