"""`python -m transformer_jax.main|sweep|trace --help` lists each command's own flags (they are
defined in the layers below the thin entry points)."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command, flags", [
    ("main", ["--config", "--workdir", "--extend_to"]),
    ("sweep", ["--experiment", "--workdir", "--suite", "--jobs", "--size"]),
    ("trace", ["--d_model", "--heads", "--position", "--norm", "--plot"]),
])
def test_help_lists_the_commands_flags(command, flags):
    proc = subprocess.run([sys.executable, "-m", f"transformer_jax.{command}", "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"TJ_HUGEPAGES": "0", "PATH": ""})
    listed = {line.split(":")[0].strip() for line in proc.stdout.splitlines()
              if line.startswith("  --")}
    assert set(flags) <= listed, proc.stdout[-2000:] + proc.stderr[-2000:]
